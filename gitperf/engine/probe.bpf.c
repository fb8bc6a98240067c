// git perf collection program (bcc).  One entry and one return program serve every probed
// function: with a uprobe_multi link the function id is the attach cookie; with per-probe attach
// (old kernels) the driver generates one tiny stub per function that passes its id.
//
// Compile-time constants (-D from the driver):
//   NFUNCS        number of probed functions (ids 0..NFUNCS-1)
//   ROOT_FID      id of the root (main): its entry records the process's load bias for symbolisation
//   PERIOD_NS, WINDOW_NS   timed sampling: record only calls that start in the first WINDOW_NS of
//                          every PERIOD_NS (0 = always)
//   USE_COOKIE    1 with uprobe_multi links
//   TEXT_LO, TEXT_HI   link-time address range of the probed binary's functions (stack samples)
//   RUN_DELAY_OFF offset of task_struct.sched_info.run_delay (see waited()); optional
#include <uapi/linux/ptrace.h>

// The kernel installs at most 64 nested return probes per thread (MAX_URETPROBE_DEPTH in
// kernel/events/uprobes.c); deeper calls fire their entry but never their return.  The shadow stack
// mirrors that depth exactly: a call entered at depth >= 64 is counted but not timed.
#define MAX_DEPTH 64
#define DEPTH_MASK (MAX_DEPTH - 1)
#define NHIST 40               // log2 buckets of duration in ns: 2^39 ns ~ 9 min
#define STALE_SCAN 4           // frames searched for a return whose entry is not on top

// conf.flags
#define F_RECORD_ALL   0       // every call (subject to `every`)
#define F_DYNAMIC      1       // dynamic probing: record ordinals < limit
#define F_BACKOFF      2       // ... and re-enable for `limit` calls at limit*2^k (doubling back-off)

// counters[]
#define C_DROPS 0              // ring buffer full: records lost (reported in the profile)
#define C_RECORDS 1            // records submitted
#define C_OVERFLOW 2           // calls nested deeper than MAX_DEPTH (counted, not timed)
#define C_UNMATCHED 3          // returns with no matching entry (burst boundaries, longjmp)
#define C_SAMPLES 4            // perf_event samples taken
#define C_WAITS 5              // ns the root's outermost calls waited, runnable, for a CPU (see waited())
#define NCOUNTERS 8

#define SCOPE_NEW 0
#define SCOPE_IN 1
#define SCOPE_OUT 2            // outside the traced cgroup: its probe hits return at once

// Records are submitted without waking the reader, which polls on a timer; every WAKE_EVERY-th
// record on a CPU wakes it, so a burst cannot fill the ring between two polls.  A wakeup per record
// cost ~200 ns of handler time (bpf_stats) and a context switch of the reader.
#define WAKE_EVERY 1024

struct frame {
    u64 start;
    u64 ret;                   // the call's return address, read at entry (see real_return())
    u64 wait;                  // the thread's run-queue wait so far (waited()), at entry
    u64 child;                 // inclusive time of completed callees
    u64 ord;                   // this call's ordinal among the function's calls
    u64 probe;                 // calibrated probe cost (ns) of the probed calls completed inside this one
    u64 nested;                // how many probed calls completed inside this one (any depth)
    u64 below;                 // bit (fid & 63) of every frame from this one down: see outermost()
    u32 fid;
    u32 record;
    u32 cost;                  // this function's calibrated cost of one probed call (conf.cost)
    u32 outer;                 // no frame below this one is the same function's (see outermost())
};

// Each thread's shadow stack lives in task-local storage: found through the task itself rather than
// by hashing its id (measured: 35-40 ns less per handler run than a BPF_HASH keyed by tid, ARCHITECTURE.md
// §6), freed by the kernel when the thread exits, and without a limit on the number of threads.
struct tstack {
    u32 depth;
    u32 scope;                 // SCOPE_*: whether this thread is traced, decided at its first probe hit
    struct frame f[MAX_DEPTH];
};

struct fstat {
    u64 total;                 // inclusive time of the outermost calls: a recursive call's time is in
                               // its outer call's already (so are `probe` and `nested`)
    u64 excl;
    u64 min;
    u64 max;
    u64 timed;                 // calls whose return was seen (count comes from `calls`)
    u64 outer;                 // of those, the outermost calls: the calls `total` sums
    u64 probe;                 // sum over calls of frame.probe: probe cost inside `total` (ns, calibrated)
    u64 nested;                // sum over calls of frame.nested
    u64 hist[NHIST];
};

struct fconf {
    u64 vaddr;
    u32 every;                 // record every n-th call (1 = all)
    u32 limit;                 // F_DYNAMIC threshold
    u32 flags;
    u32 cost;                  // calibrated ns one probed call of this function costs (entry + return)
};

struct rec {
    u32 fid;
    u32 pid;
    u32 tid;
    u32 depth;
    u64 ord;
    u64 dur;
    u64 excl;
};

struct skey {
    u32 tgid;
    s32 stackid;
    u64 ret;                   // sample outside the binary: the first binary address on the stack
    s32 kstackid;              // sample in the kernel: its kernel stack (the driver tells probe
                               // handling from system calls and faults by it); -1 in user code
    u32 xol;                   // user IP in the kernel's probe page: probe handling too
    u64 top[2];                // sample in the binary: the two words at the stack pointer where they
                               // point into it (a return address where the sampled function's frame
                               // is not set up: the driver reads the unwind table, analysis/unwind.py)
};

// The page where the kernel single-steps probed instructions out of line and where return probes
// trampoline: get_xol_area() asks for the highest user page (kernel/events/uprobes.c, hint
// TASK_SIZE - PAGE_SIZE; x86-64, 4-level tables), which `[uprobes]` in /proc/PID/maps shows there.
// Samples land in it far more often than its few instructions suggest (~half of all samples of a
// loop of probed calls): the timer interrupt held back while the trap was handled fires at the
// return to user mode.
#define XOL_PAGE 0x7fffffffe000ULL

static __always_inline int in_xol(u64 addr) {
    return addr >= XOL_PAGE && addr < XOL_PAGE + 4096;
}

// Words above the stack pointer searched for a return address into the binary when a sample lands
// in a library.  Library code (glibc) has no frame pointers, so the frame-pointer walk either stops
// at the library frame or skips the immediate caller of a leaf; the return address of the call into
// the library is then usually among the first few words (leaf string functions: the first).
#define RET_SCAN 64

struct scan {
    u64 w[RET_SCAN];
};

BPF_ARRAY(conf, struct fconf, NFUNCS);
BPF_ARRAY(scope, u64, 1);                       // the cgroup v2 whose threads are traced (0 = all): set per run
BPF_ARRAY(calls, u64, NFUNCS);                  // exact call counts, shared by all CPUs
BPF_PERCPU_ARRAY(stats, struct fstat, NFUNCS);
BPF_PERCPU_ARRAY(counters, u64, NCOUNTERS);
BPF_TASK_STORAGE(stacks, struct tstack);
BPF_HASH(bases, u32, u64, 4096);                // tgid -> load bias of the binary
BPF_RINGBUF_OUTPUT(records, RINGBUF_PAGES);
BPF_STACK_TRACE(ustacks, 16384);
BPF_STACK_TRACE(kstacks, 4096);
BPF_HASH(samples, struct skey, u64, 65536);
BPF_PERCPU_ARRAY(scan_buf, struct scan, 1);

// The frame at depth d.  The empty asm hides d's known range from clang, so the mask survives
// into the bytecode and the verifier sees a bounded index.
static __always_inline struct frame *frame_at(struct tstack *st, u32 d) {
    asm volatile("" : "+r"(d));
    return &st->f[d & DEPTH_MASK];
}

static __always_inline void add(u32 idx, u64 n) {
    u64 *c = counters.lookup(&idx);
    if (c) *c += n;
}

static __always_inline void bump(u32 idx) {
    add(idx, 1);
}

static __always_inline int in_scope(void) {
    u32 z = 0;
    u64 *cg = scope.lookup(&z);
    return !cg || !*cg || bpf_get_current_cgroup_id() == *cg;
}

// The calling thread's shadow stack, created zeroed on its first entry.  Whether the thread is in the
// traced cgroup is looked up once, then kept with it: a workload's threads start inside it.
static __always_inline struct tstack *thread_stack(int create) {
    struct tstack *st = stacks.task_storage_get(bpf_get_current_task_btf(), 0,
                                                create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
    if (st && st->scope == SCOPE_NEW)
        st->scope = in_scope() ? SCOPE_IN : SCOPE_OUT;
    return st;
}

// How long this thread has waited, runnable, for a CPU since it started (the kernel's
// sched_info.run_delay, /proc/PID/schedstat's second field; updated each time the thread gets a CPU
// back).  A call's time leaves out what grew inside it: on a shared machine a preempted thread's
// wait (a scheduler quantum of another process, ~2 ms here) lands on whichever function it was in --
// Lua's `body`, `luaM_realloc_`, `adjustlocalvars` each +2 ms in one of five collections beside two
// busy processes: the A/A false alarms of the unpaired flow.  Blocking (I/O, locks) is not a wait
// for a CPU and stays in.  RUN_DELAY_OFF: the field's offset in the running kernel's task_struct, from
// its BTF (engine/btf.py; the installed headers may be another kernel's); undefined where the kernel
// keeps no such count (CONFIG_SCHED_INFO off) or has no BTF: then nothing is left out.
static __always_inline u64 waited(void) {
#ifdef RUN_DELAY_OFF
    u64 v = 0;
    bpf_probe_read_kernel(&v, sizeof(v), (char *)bpf_get_current_task() + RUN_DELAY_OFF);
    return v;
#else
    return 0;
#endif
}

static __always_inline int should_record(struct fconf *c, u64 ord, u64 now) {
    if (c->every > 1 && ord % c->every)
        return 0;
    if (c->flags & F_DYNAMIC) {
        u64 q = ord / (c->limit ? c->limit : 1);
        if (q && !((c->flags & F_BACKOFF) && (q & (q - 1)) == 0))
            return 0;
    }
#if PERIOD_NS
    if (now % PERIOD_NS >= WINDOW_NS)
        return 0;
#endif
    return 1;
}

// Whether a call of `fid` entered at depth d has no frame of the same function below it, so that a
// recursive function's inclusive time (direct or mutual recursion) is counted once per outermost call.
// Each frame carries a 64-bit set of the functions below it, hashed by fid & 63: a clear bit decides at
// once (the common case); a set one is confirmed by walking the stack, nearest frame first (direct
// recursion is found in one step).
static __always_inline u32 outermost(struct tstack *st, u32 d, u32 fid, u64 below) {
    if (!(below & (1ULL << (fid & 63))))
        return 1;
    for (u32 i = 1; i <= MAX_DEPTH; i++) {
        if (i > d)
            break;
        if (frame_at(st, d - i)->fid == fid)
            return 0;
    }
    return 1;
}

static __always_inline int do_entry(struct pt_regs *ctx, u32 fid) {
    if (fid >= NFUNCS)
        return 0;
    struct tstack *st = thread_stack(1);
    if (!st || st->scope != SCOPE_IN)
        return 0;
    struct fconf *c = conf.lookup(&fid);
    u64 *cnt = calls.lookup(&fid);
    if (!c || !cnt)
        return 0;
    u64 ord = __sync_fetch_and_add(cnt, 1);
    if (fid == ROOT_FID) {
        u32 tgid = bpf_get_current_pid_tgid() >> 32;
        u64 bias = PT_REGS_IP(ctx) - c->vaddr;
        bases.update(&tgid, &bias);
    }
    u32 d = st->depth;
    if (d >= MAX_DEPTH) {      // no return probe will fire for this call: do not push
        bump(C_OVERFLOW);
        return 0;
    }
    st->depth = d + 1;
    u64 below = d ? frame_at(st, d - 1)->below : 0;
    struct frame *f = frame_at(st, d);
    f->outer = outermost(st, d, fid, below);
    f->below = below | (1ULL << (fid & 63));
    f->fid = fid;
    f->child = 0;
    f->probe = 0;
    f->nested = 0;
    f->cost = c->cost;
    f->ord = ord;
    u64 now = bpf_ktime_get_ns();
    f->record = should_record(c, ord, now);
    // the word at the stack pointer at a function's first instruction is its return address: read here,
    // before the kernel puts its return probe's trampoline there (handler_chain() prepares the return
    // probe after every consumer's entry handler, kernel/events/uprobes.c)
    bpf_probe_read_user(&f->ret, sizeof(f->ret), (void *)PT_REGS_SP(ctx));
    f->wait = waited();
    f->start = now;            // last, so the probe's own cost is mostly outside the interval
    return 0;
}

static __always_inline int do_return(struct pt_regs *ctx, u32 fid) {
    u64 now = bpf_ktime_get_ns();
    if (fid >= NFUNCS)
        return 0;
    struct tstack *st = thread_stack(0);
    if (st ? st->scope != SCOPE_IN : !in_scope())
        return 0;
    if (!st || st->depth == 0) {
        bump(C_UNMATCHED);
        return 0;
    }
    u32 d = st->depth - 1;
    // Frames whose return we never saw (a burst ended, longjmp) lie above ours: drop them.
#pragma unroll
    for (int i = 0; i < STALE_SCAN; i++) {
        if (frame_at(st, d)->fid == fid || d == 0)
            break;
        d--;
        bump(C_UNMATCHED);
    }
    struct frame *f = frame_at(st, d);
    if (f->fid != fid) {
        bump(C_UNMATCHED);
        return 0;
    }
    u64 waits = waited() - f->wait;
    u64 dur = now - f->start;
    dur = dur > waits ? dur - waits : 0;
    u64 excl = dur > f->child ? dur - f->child : 0;
    u64 ord = f->ord;
    u32 record = f->record;
    u64 probe = f->probe, nested = f->nested;
    u32 outer = f->outer;
    st->depth = d;
    if (d > 0) {
        // The whole of a nested probed call's cost (its entry, handlers and return) falls inside the
        // caller's interval: the caller's inclusive time carries it, the correction subtracts it.
        struct frame *p = frame_at(st, d - 1);
        p->child += dur;
        p->probe += probe + f->cost;
        p->nested += nested + 1;
    }

    if (fid == ROOT_FID && outer)
        add(C_WAITS, waits);
    struct fstat *s = stats.lookup(&fid);
    if (s) {
        if (outer) {
            s->total += dur;
            s->outer++;
            s->probe += probe;
            s->nested += nested;
        }
        s->excl += excl;
        s->timed++;
        if (s->min == 0 || dur < s->min)
            s->min = dur;
        if (dur > s->max)
            s->max = dur;
        u32 b = bpf_log2l(dur);
        if (b < NHIST)
            s->hist[b]++;
    }
    if (record) {
        struct rec *r = records.ringbuf_reserve(sizeof(struct rec));
        if (!r) {
            bump(C_DROPS);
            return 0;
        }
        u64 id = bpf_get_current_pid_tgid();
        r->fid = fid;
        r->pid = id >> 32;
        r->tid = (u32)id;
        r->depth = d;
        r->ord = ord;
        r->dur = dur;
        r->excl = excl;
        u32 k = C_RECORDS;
        u64 *n = counters.lookup(&k);
        u64 wake = BPF_RB_NO_WAKEUP;
        if (n && ((*n)++ & (WAKE_EVERY - 1)) == 0)
            wake = BPF_RB_FORCE_WAKEUP;
        records.ringbuf_submit(r, wake);
    }
    return 0;
}

#if USE_COOKIE
int on_entry(struct pt_regs *ctx) { return do_entry(ctx, (u32)bpf_get_attach_cookie(ctx)); }
int on_return(struct pt_regs *ctx) { return do_return(ctx, (u32)bpf_get_attach_cookie(ctx)); }
#endif

// The project's own shared libraries (BinaryInfo.libraries): where each is loaded in a process, read
// at its DT_INIT, which the dynamic loader runs once as it maps the library.  The driver symbolises the
// samples and frames that fall in it with the library's own symbols (engine/samples.py).
struct libkey {
    u32 tgid;
    u32 lib;                   // index in BinaryInfo.libraries
};
BPF_HASH(libinits, struct libkey, u64, 4096);  // -> the address of its DT_INIT in that process

static __always_inline int lib_load(struct pt_regs *ctx, u32 lib) {
    struct libkey k = {.tgid = bpf_get_current_pid_tgid() >> 32, .lib = lib};
    u64 ip = PT_REGS_IP(ctx);
    libinits.update(&k, &ip);
    return 0;
}
#if USE_COOKIE
// one program for every library: its link's cookie is the library's index
int on_lib(struct pt_regs *ctx) { return lib_load(ctx, (u32)bpf_get_attach_cookie(ctx)); }
#endif
// a per-probe attach has no cookie to tell them apart: one program a library (MAX_LIBS_PER_PROBE in
// bcc_engine.py)
int on_lib_0(struct pt_regs *ctx) { return lib_load(ctx, 0); }
int on_lib_1(struct pt_regs *ctx) { return lib_load(ctx, 1); }
int on_lib_2(struct pt_regs *ctx) { return lib_load(ctx, 2); }
int on_lib_3(struct pt_regs *ctx) { return lib_load(ctx, 3); }
int on_lib_4(struct pt_regs *ctx) { return lib_load(ctx, 4); }
int on_lib_5(struct pt_regs *ctx) { return lib_load(ctx, 5); }
int on_lib_6(struct pt_regs *ctx) { return lib_load(ctx, 6); }
int on_lib_7(struct pt_regs *ctx) { return lib_load(ctx, 7); }

// A word read from the stack as it is: where a traced call's return probe is pending, the kernel has
// put the address of its trampoline (in the XOL page) in place of the return address, so a sample in
// a traced function without a frame of its own (a leaf in code built without frame pointers) would
// lose its caller.  The n-th such word up from the stack pointer is the return of the n-th traced
// frame down from the top of the thread's shadow stack, whose real return address `do_entry` kept.
// (The kernel's own frame-pointer walk fixes these up itself: ustacks needs nothing.)
static __always_inline u64 real_return(u64 w, struct tstack *st, u32 *pending) {
    if (!in_xol(w))
        return w;
    if (!st || *pending >= st->depth)
        return 0;
    u64 r = frame_at(st, st->depth - 1 - *pending)->ret;
    *pending += 1;
    return r;
}

// perf_event CPU-clock sampling: count (process, user stack) pairs; the driver symbolises them.
// The context is the kernel's `struct bpf_perf_event_data`, whose first member is the sampled
// registers (`bpf_user_pt_regs_t`, on x86-64 `struct pt_regs`): it is read as that struct.  Naming
// its own type needs <linux/bpf_perf_event.h>, whose kernel headers made every compile of this
// program 1.25 s rather than 0.55 s (bcc, this VM: bench/compile.py).
int on_sample(struct pt_regs *ctx) {
    if (!in_scope())
        return 0;
    struct skey k = {};
    k.tgid = bpf_get_current_pid_tgid() >> 32;
    k.stackid = ustacks.get_stackid(ctx, BPF_F_USER_STACK);
    if (k.stackid < 0)
        return 0;
    u64 *bias = bases.lookup(&k.tgid);
    // The user registers: those of the sample, or the ones saved at kernel entry (syscall, fault).
    u64 ip = ctx->ip, sp = ctx->sp;
    k.kstackid = -1;
    if ((ctx->cs & 3) != 3) {
        k.kstackid = kstacks.get_stackid(ctx, 0);
        struct pt_regs *u = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
        bpf_probe_read_kernel(&ip, sizeof(ip), &u->ip);
        bpf_probe_read_kernel(&sp, sizeof(sp), &u->sp);
    }
    k.xol = in_xol(ip);
    struct tstack *st = stacks.task_storage_get(bpf_get_current_task_btf(), 0, 0);
    u32 pending = 0;
    if (!k.xol && bias && ip >= *bias + TEXT_LO && ip < *bias + TEXT_HI) {
        u64 top[2] = {};
        if (bpf_probe_read_user(top, sizeof(top), (void *)sp) == 0) {
            top[0] = real_return(top[0], st, &pending);
            top[1] = real_return(top[1], st, &pending);
            // only words that point into the binary: any other value would split a stack's count
            k.top[0] = top[0] > *bias + TEXT_LO && top[0] <= *bias + TEXT_HI ? top[0] : 0;
            k.top[1] = top[1] > *bias + TEXT_LO && top[1] <= *bias + TEXT_HI ? top[1] : 0;
        }
    } else if (!k.xol && bias) {
        u32 z = 0;
        struct scan *words = scan_buf.lookup(&z);
        if (words && bpf_probe_read_user(words, sizeof(*words), (void *)sp) == 0) {
#pragma unroll
            for (int i = 0; i < RET_SCAN; i++) {
                u64 w = real_return(words->w[i], st, &pending);
                if (w > *bias + TEXT_LO && w <= *bias + TEXT_HI) {
                    k.ret = w;
                    break;
                }
            }
        }
    }
    samples.increment(k);
    bump(C_SAMPLES);
    return 0;
}
