"""The bcc engine: the BPF text in probe.bpf.c, this driver around it (in the manner of bcc's
funclatency.py / profile.py); a run's stack samples are symbolised in `engine.samples`."""

from __future__ import annotations

import ctypes
import fcntl
import os
import random
import select
import signal
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from gitperf.analysis.elf import BinaryInfo, probe_points
from gitperf.analysis.unwind import Frames
from gitperf.core.errors import EnvironmentUnavailable
from gitperf.core.model import Mode
from gitperf.engine import bpflink, btf, calibrate
from gitperf.engine.base import Progress, RawCollection, RawFunction, RunWorkload
from gitperf.engine.samples import Known
from gitperf.engine.samples import read as read_samples
from gitperf.engine.workload import RunResult, scope
from gitperf.plan.probes import ProbePlan

BPF_SOURCE = Path(__file__).with_name("probe.bpf.c")
NHIST = 40
RINGBUF_PAGES = 256  # 1 MiB: ~21k records of 48 bytes (with the ring's header) between two polls
# The reader's timer: records arrive without a wakeup unless a CPU submitted 1024 since.  Not shorter:
# at 5 ms the collector's thread woke beside the demo's 5 ms runs once or twice each -- a wake-up beside
# a run is noise in what it measures.  A run's end does not wait for it: the reader waits on the ring
# and on a pipe the run's end writes to (`_Reader`; it waited for the poll's timeout, ~10 ms a run).
POLL_MS = 20


class Rec(ctypes.Structure):
    _fields_ = [("fid", ctypes.c_uint32), ("pid", ctypes.c_uint32), ("tid", ctypes.c_uint32),
                ("depth", ctypes.c_uint32), ("ord", ctypes.c_uint64), ("dur", ctypes.c_uint64),
                ("excl", ctypes.c_uint64)]


def _import_bcc():
    try:
        import bcc  # noqa: F401
        # (bcc's Python declares no signature for the ring's epoll descriptor, which `_Reader` waits on)
        bcc.lib.ring_buffer__epoll_fd.argtypes, bcc.lib.ring_buffer__epoll_fd.restype = [ctypes.c_void_p], ctypes.c_int
        return bcc
    except ImportError as e:
        raise EnvironmentUnavailable(
            f"cannot import bcc ({e}). Run `make setup` (installs python3-bpfcc and links it into .venv)."
        ) from None


CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


def _can_trace() -> bool:
    """Effective capabilities allow BPF tracing: CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN (root)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                eff = int(line.split()[1], 16)
                has = lambda cap: bool(eff >> cap & 1)  # noqa: E731
                return has(CAP_SYS_ADMIN) or (has(CAP_BPF) and has(CAP_PERFMON))
    except (OSError, ValueError):
        pass
    return os.geteuid() == 0


class _Reservoir:
    """Keeps a uniform sample of at most `limit` records per function, in call order."""

    def __init__(self, limit: int, seed: int = 0):
        self.limit, self.seen, self.items = limit, 0, []
        self._rng = random.Random(seed)

    def add(self, item) -> None:
        self.seen += 1
        if len(self.items) < self.limit:
            self.items.append(item)
        else:
            j = self._rng.randrange(self.seen)
            if j < self.limit:
                self.items[j] = item

    def sorted(self) -> list:
        return sorted(self.items)


@dataclass(frozen=True)
class _Job:
    """One collection's fixed inputs."""

    binary: BinaryInfo
    plan: ProbePlan
    probed: list[int]  # ids of the functions that get probes
    multi: bool  # uprobe_multi links (else one perf-event uprobe per function)
    progress: Progress

    @property
    def n(self) -> int:
        return max(len(self.plan.functions), 1)


def _cflags(job: _Job) -> list[str]:
    """The program's compile-time constants (see the head of probe.bpf.c)."""
    plan, funcs = job.plan, job.binary.functions
    timed = plan.mode == Mode.TIMED
    return [
        f"-DNFUNCS={job.n}", f"-DROOT_FID={plan.root if plan.root is not None else 0xFFFFFFFF}",
        f"-DUSE_COOKIE={1 if job.multi else 0}", f"-DRINGBUF_PAGES={RINGBUF_PAGES}",
        f"-DPERIOD_NS={plan.period_ns if timed else 0}ULL", f"-DWINDOW_NS={plan.window_ns if timed else 0}ULL",
        f"-DTEXT_LO={min((f.vaddr for f in funcs), default=0)}ULL",
        f"-DTEXT_HI={max((f.vaddr + f.size for f in funcs), default=0)}ULL",
    ] + _run_delay()


def _run_delay() -> list[str]:
    """Where the running kernel keeps a thread's wait for a CPU (probe.bpf.c's `waited`), when it does."""
    try:
        return [f"-DRUN_DELAY_OFF={btf.field_offset('task_struct.sched_info.run_delay')}"]
    except btf.BtfError:
        return []


def _source(job: _Job) -> str:
    text = BPF_SOURCE.read_text()
    if not job.multi:  # one stub pair per function: the id is compiled in
        text += "".join(f"int e_{i}(struct pt_regs *ctx) {{ return do_entry(ctx, {i}); }}\n"
                        f"int r_{i}(struct pt_regs *ctx) {{ return do_return(ctx, {i}); }}\n"
                        for i in job.probed)
    return text


def _load(bcc, text: str, cflags: list[str]):
    try:
        return bcc.BPF(text=text, cflags=cflags)
    except Exception as e:  # bcc raises bare Exception on compile/load failure
        raise EnvironmentUnavailable(f"bcc could not compile or load the probes: {e}") from None


class _Records:
    """The ring buffer's consumer: a reservoir of sampled calls per function, and the bytes read.
    The buffer is opened once per loaded program; `reset` starts a new run."""

    def __init__(self, b, job: _Job):
        self.job = job
        self.reset()
        b["records"].open_ring_buffer(self._on_record)

    def reset(self) -> None:
        # per function id, made as its first record arrives (a plan of a large binary holds
        # hundreds of functions that only stack samples cover: a reservoir each was 8 ms a run)
        self.series: dict[int, _Reservoir] = {}
        self.bytes = 0

    def _on_record(self, _ctx, data, _size) -> None:
        r = ctypes.cast(data, ctypes.POINTER(Rec)).contents
        if (res := self.series.get(r.fid)) is None:
            res = self.series[r.fid] = _Reservoir(self.job.plan.series_limit, seed=r.fid)
        res.add((r.ord, r.dur))
        self.bytes += ctypes.sizeof(Rec)


class BccEngine:
    name = "bcc"

    def __init__(self, force_per_probe: bool = False):
        self.force_per_probe = force_per_probe

    # -- environment -------------------------------------------------------------------------------
    def check(self) -> None:
        if not _can_trace():
            raise EnvironmentUnavailable(
                "collection needs root (or CAP_BPF and CAP_PERFMON): run `sudo git perf collect ...`, or "
                "give the interpreter the capabilities. Everything else (show, check, serve) works without.")
        _import_bcc()
        build = Path(f"/lib/modules/{os.uname().release}/build")
        if not build.exists():
            raise EnvironmentUnavailable(
                f"no kernel headers at {build}: bcc compiles its probes at run time. Run `make setup` "
                "(installs linux-headers and links them for the running kernel).")

    def calibration(self, machine: str, progress: Progress) -> dict[str, float]:
        """Measured once per machine and kernel, then read from the user's cache (`calibrate.costs`)."""
        return calibrate.costs(self, machine, progress=progress)

    @property
    def uses_multi_link(self) -> bool:
        return not self.force_per_probe and bpflink.kernel_supports_uprobe_multi()

    # -- collection --------------------------------------------------------------------------------
    def collect(self, binary: BinaryInfo, plan: ProbePlan, run: RunWorkload, progress: Progress) -> RawCollection:
        with self.session(binary, plan, progress) as s:
            return s.collect(run)

    @contextmanager
    def session(self, binary: BinaryInfo, plan: ProbePlan, progress: Progress,
                alternating: bool = False) -> Iterator[_Session]:
        """The program compiled and loaded once, for any number of runs under one plan (compiling
        takes ~0.55 s on these machines, bench/compile.py; a paired check makes dozens of short runs)."""
        bcc = _import_bcc()
        job = _Job(binary, plan, plan.probed_ids(), self.uses_multi_link, progress)
        progress(f"compiling the BPF program ({len(job.probed)} functions)")
        b = _load(bcc, _source(job), _cflags(job))
        try:
            self._configure(b, plan)
            with ExitStack() as held:  # (an alternating session's probes, detached as it ends)
                yield _Session(self, bcc, b, job, held if alternating else None)
        finally:
            b.cleanup()

    @staticmethod
    def _attach(bcc, b, job: _Job, held: ExitStack) -> _Attacher:
        """The uprobes: the plan's, and (stack sampling) the watchers of the project's own libraries'
        loads; their detach registered with `held` at once."""
        attach = _Attacher(b, job.binary, job.plan, job.probed, job.multi)
        held.callback(attach.detach)
        attach.attach()
        if job.plan.stack_hz:
            _watch_library_loads(bcc, b, job, lambda link: held.callback(_close_all, [link]))
        return attach

    @staticmethod
    def _sample(bcc, b, job: _Job, cleanup: ExitStack) -> None:
        """The sampling timer for one run (a timer on every CPU: the other side's runs are not sampled
        twice), stopped by `cleanup`."""
        if job.plan.stack_hz:
            b.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                                fn_name="on_sample", sample_freq=job.plan.stack_hz)
            cleanup.callback(lambda: b.detach_perf_event(ev_type=bcc.PerfType.SOFTWARE,
                                                          ev_config=bcc.PerfSWConfig.CPU_CLOCK))

    def _run(self, b, job: _Job, attach: _Attacher, run: Callable[[], RunResult],
             ) -> tuple[RunResult, list[list[tuple[int, int]]] | None]:
        """The workload, with the ring buffer read and (bursty) the bursts driven meanwhile.  Returns
        its result and, in bursty mode, the cumulative (calls, total ns) at each burst's end."""
        stop = threading.Event()
        burster, ends = None, None
        with _Reader(b) as reader:
            if job.plan.mode == Mode.BURSTY and job.plan.period_ns:
                ends = []
                burster = threading.Thread(target=attach.bursts, daemon=True,
                                           args=(job.plan, stop, lambda: ends.append(self._totals(b, job))))
                burster.start()
            try:
                return run(), ends
            finally:
                stop.set()
                reader.stop()
                if burster:
                    burster.join()

    @staticmethod
    def _configure(b, plan: ProbePlan) -> None:
        conf = b["conf"]
        flags = 0
        if plan.record_limit:
            flags |= 1 | (2 if plan.reenable else 0)
        for i, f in enumerate(plan.functions):
            v = conf.Leaf()
            v.vaddr, v.every, v.limit, v.flags = f.vaddr, plan.every(f.name), plan.record_limit, flags
            v.cost = min(int(plan.probe_cost.get(f.name, 0)), 0xFFFFFFFF)
            conf[ctypes.c_int(i)] = v

    @staticmethod
    def _read(b, job: _Job) -> tuple[list[RawFunction], list[int], int]:
        """Every function's counts and times: read for the probed ones, which alone have entries in
        `calls` and `stats` (the probes write them); the others are 0 (a plan of Lua's 692 functions
        with 2 traced read all 692 per-CPU entries, ~25 ms a run)."""
        calls, stats = b["calls"], b["stats"]
        funcs, nbytes = [RawFunction(count=0) for _ in range(job.n)], 0
        for i in job.probed:
            count = calls[ctypes.c_int(i)].value
            per_cpu = stats.getvalue(ctypes.c_int(i))
            nbytes += 8 + ctypes.sizeof(per_cpu[0]) * len(per_cpu)
            f = RawFunction(count=count, hist=[0] * NHIST)
            mins = [s.min for s in per_cpu if s.timed]
            f.min_ns = min(mins) if mins else 0
            for s in per_cpu:
                f.timed += s.timed
                f.outer += s.outer
                f.total_ns += s.total
                f.exclusive_ns += s.excl
                f.probe_ns += s.probe
                f.nested += s.nested
                f.max_ns = max(f.max_ns, s.max)
                for k in range(NHIST):
                    f.hist[k] += s.hist[k]
            while f.hist and f.hist[-1] == 0:
                f.hist.pop()
            funcs[i] = f
        counters = [sum(b["counters"].getvalue(ctypes.c_int(k))) for k in range(8)]
        return funcs, counters, nbytes

    @staticmethod
    def _totals(b, job: _Job) -> list[tuple[int, int]]:
        """(calls, total inclusive ns) of every function so far (the probed ones': the others' are 0)."""
        calls, stats = b["calls"], b["stats"]
        out = [(0, 0)] * job.n
        for i in job.probed:
            out[i] = (calls[ctypes.c_int(i)].value, sum(s.total for s in stats.getvalue(ctypes.c_int(i))))
        return out


class _Reader:
    """A thread that drains the ring buffer while a run goes on: woken by the ring (the handler wakes it
    every WAKE_EVERY-th record, probe.bpf.c), by its timer (POLL_MS), or by `stop`, which returns at once
    rather than after the timer (what is left in the ring is drained after the run, `_consume`)."""

    def __init__(self, b):
        from bcc import lib  # (its ring_buffer__epoll_fd declared by `_import_bcc`)
        self.b, self.ring = b, lib.ring_buffer__epoll_fd(b._ringbuf_manager)
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(target=self._drain, daemon=True)

    def __enter__(self) -> _Reader:
        self.thread.start()
        return self

    def _drain(self) -> None:
        while True:
            ready, _, _ = select.select([self.ring, self.wake_r], [], [], POLL_MS / 1000)
            if self.wake_r in ready:
                return
            self.b.ring_buffer_consume()

    def stop(self) -> None:
        if self.thread.is_alive():
            os.write(self.wake_w, b"x")
            self.thread.join()

    def __exit__(self, *_exc) -> None:
        self.stop()
        os.close(self.wake_r)
        os.close(self.wake_w)


# The project's own libraries whose loads are watched: with uprobe_multi links one program serves them
# all (`on_lib`, the cookie telling them apart); per-probe, one program each (on_lib_0 .. on_lib_7 in
# probe.bpf.c).  `libinits` keeps 4,096 (process, library) pairs.
MAX_LIBS, MAX_LIBS_PER_PROBE = 64, 8


def _watch_library_loads(bcc, b, job: _Job, opened: Callable[[bpflink.UprobeMultiLink], None]) -> None:
    """A probe at each of the project's own libraries' DT_INIT, which records where a process loaded
    it (`libinits`): one uprobe_multi link each, handed to `opened` to be closed; without uprobe_multi
    links (kernels before 6.6), a perf-event uprobe each, closed with the plan's (`_Attacher.detach`
    closes every uprobe of the program)."""
    fd = b.load_func("on_lib", bcc.BPF.KPROBE, attach_type=bpflink.BPF_TRACE_UPROBE_MULTI).fd if job.multi else -1
    for i, lib in enumerate(job.binary.libraries[:MAX_LIBS if job.multi else MAX_LIBS_PER_PROBE]):
        if lib.init is None:
            continue
        if job.multi:
            opened(bpflink.UprobeMultiLink(fd, lib.path, [lib.init[1]], [i], retprobe=False))
        else:  # (bcc turns the address into the file offset, as `init[1]` is)
            b.attach_uprobe(name=lib.path, addr=lib.init[0], fn_name=f"on_lib_{i}")


class _Session:
    """One loaded program; `collect` runs the workload once under it and leaves the maps empty.

    A run's probes are attached before it and detached after it -- but in an alternating session (a
    paired check's side, `held`: the session's own stack) once, for all of its runs: only that side's
    binary and libraries carry them, only its runs execute those files (the other side's are other
    files), and the probes count only inside a run's cgroup (`scope`).  Attaching and detaching each
    run cost ~40 ms of it: closing a uprobe_multi link waits for the kernel to let go of its probes
    (Lua's paired check: 324 ms a round, of which the two runs' own time was 63 ms).  Its sampling
    timers likewise stay open, enabled only during its runs (`_sampling`)."""

    def __init__(self, engine: BccEngine, bcc, b, job: _Job, held: ExitStack | None):
        self.engine, self.bcc, self.b, self.job, self.held = engine, bcc, b, job, held
        self.kept: _Attacher | None = None
        self.sampling = False  # an alternating session's sampling timers are open (`_sampling`)
        self.records = _Records(b, job)
        # what all of the session's runs share in symbolising their samples: one cache of return addresses,
        # unwind rows and walk steps, where a sample means probe time (read from the binary once; the
        # binary's: a library is loaded at another bias in each process)
        self.known = Known(Frames(job.binary),
                           probe_points(job.binary, (f for i in job.probed if (f := job.plan.functions[i]).name
                                                     not in job.plan.libraries)) if job.plan.stack_hz else set())

    def collect(self, run: RunWorkload) -> RawCollection:
        b, job, engine = self.b, self.job, self.engine
        with scope() as where, ExitStack() as cleanup:
            b["scope"][ctypes.c_int(0)] = ctypes.c_uint64(where.cgroup_id)
            self.records.reset()
            t_start = time.perf_counter()
            attach = self._probes(cleanup)
            self._sampling(cleanup)
            attach.restart_clock()  # live time counts from the workload's start
            job.progress(f"probes attached ({attach.method}, {attach.attach_s * 1000:.1f} ms); running workload")
            result, ends = engine._run(b, job, attach, lambda: run(where))
            _consume(b)
            t_detach = time.perf_counter()
            attached_s, in_burst = attach.attached_s(t_detach), attach.attached
            if self.held is None:
                attach.detach()
            detach_s = time.perf_counter() - t_detach
            funcs, counters, map_bytes = engine._read(b, job)
            for i, res in self.records.series.items():
                funcs[i].series = res.sorted()
            if ends is not None:
                _per_burst(funcs, ends, in_burst)
            samples = read_samples(b, job.binary, job.plan, self.known)
            for i, c in samples.by_function.items():
                funcs[i].stack_samples = c
                funcs[i].library_samples = samples.library.get(i, 0)
            collection_s = time.perf_counter() - t_start
            _clear(b, job.probed)
        return RawCollection(
            functions=funcs[: len(job.plan.functions)], run=result, attach_s=attach.attach_s, detach_s=detach_s,
            collection_s=collection_s, raw_bytes=self.records.bytes + map_bytes + samples.nbytes,
            records=counters[1], dropped=counters[0], overflow=counters[2], unmatched=counters[3],
            stack_samples=counters[4], unknown_samples=samples.unknown, probe_samples=samples.probe, waited_s=counters[5] / 1e9,
            attach_method=attach.method,
            attached_s=attached_s, stacks=samples.stacks, rooted_samples=samples.rooted,
            library_functions=samples.library_functions,
        )

    def _sampling(self, cleanup: ExitStack) -> None:
        """This run's sampling timer: started now and stopped by `cleanup`; an alternating session's is
        opened at its first run, and then only enabled for each run and disabled after it (one timer a
        CPU at a time: the other side's runs are not sampled twice; opening the timers on each CPU and
        closing them took ~18 ms of each of Lua's runs)."""
        if self.held is None or not self.job.plan.stack_hz:
            self.engine._sample(self.bcc, self.b, self.job, cleanup)
            return
        if not self.sampling:
            self.engine._sample(self.bcc, self.b, self.job, self.held)
            self.sampling = True
        else:
            _timers(self.b, self.bcc, PERF_EVENT_IOC_ENABLE)
        cleanup.callback(_timers, self.b, self.bcc, PERF_EVENT_IOC_DISABLE)

    def _probes(self, cleanup: ExitStack) -> _Attacher:
        """This run's probes: attached now and detached by `cleanup`, or an alternating session's, attached
        at its first run."""
        if self.held is None:
            return self.engine._attach(self.bcc, self.b, self.job, cleanup)
        if self.kept is None:
            self.kept = self.engine._attach(self.bcc, self.b, self.job, self.held)
        return self.kept


PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE = 0x2400, 0x2401  # _IO('$', 0) and _IO('$', 1), linux/perf_event.h


def _timers(b, bcc, request: int) -> None:
    """The sampling timer of every CPU enabled or disabled (`request`), left open."""
    for fd in b.open_perf_events[(bcc.PerfType.SOFTWARE, bcc.PerfSWConfig.CPU_CLOCK)].values():
        fcntl.ioctl(fd, request, 0)


def _consume(b) -> None:
    """Drain the ring buffer.  Its callback runs inside a C call, where a KeyboardInterrupt raised by
    Ctrl-C or SIGTERM would be printed and lost (seen: an interrupted calibration carried on into the
    workload): a signal meanwhile is remembered, and raised once the call has returned."""
    got = []
    old = {s: signal.signal(s, lambda n, _f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        b.ring_buffer_consume()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if got:
        raise KeyboardInterrupt


def _clear(b, probed: list[int]) -> None:
    """Every map a run fills, emptied for the next run of the session (the configuration stays): of
    the per-function arrays, the probed functions' entries (the only ones the probes write)."""
    for name in ("calls", "stats"):
        for i in probed:
            b[name].clearitem(ctypes.c_int(i))
    for name in ("counters", "bases", "libinits", "samples", "ustacks", "kstacks"):
        b[name].clear()


def _per_burst(funcs: list[RawFunction], ends: list[list[tuple[int, int]]], in_burst: bool) -> None:
    """Each function's calls and total in each burst, from the cumulative values at the bursts'
    ends (and at the end of the run, when it ended during a burst)."""
    final = [(f.count, f.total_ns) for f in funcs]
    marks = ends + ([final] if in_burst or not ends else [])
    for i, f in enumerate(funcs):
        prev = (0, 0)
        for m in marks:
            f.bursts.append((m[i][0] - prev[0], m[i][1] - prev[1]))
            prev = m[i]


def _close_all(links: list[bpflink.UprobeMultiLink]) -> None:
    """Every link closed, at once: each close waits for the kernel to let go of its probes, and the
    waits overlap (three links of zlib's check: 0.14-0.30 s one after another, 0.04-0.18 s at once)."""
    closing = [threading.Thread(target=link.close) for link in links]
    for t in closing:
        t.start()
    for t in closing:
        t.join()


class _Attacher:
    """Attach and detach the entry/return probes: two uprobe_multi links, or per-probe."""

    def __init__(self, b, binary: BinaryInfo, plan: ProbePlan, probed: list[int], multi: bool):
        self.b, self.binary, self.plan, self.probed = b, binary, plan, probed
        self.method = "uprobe_multi" if multi else "per-probe"
        self.links: list[bpflink.UprobeMultiLink] = []
        self.attached = False
        self.attach_s = 0.0
        self.on_s = 0.0  # bursty: time the probes were live, for the measured duty cycle
        self.on_since: float | None = None
        self._lock = threading.Lock()
        if multi:
            import bcc
            self._entry_fd = b.load_func("on_entry", bcc.BPF.KPROBE, attach_type=bpflink.BPF_TRACE_UPROBE_MULTI).fd
            self._return_fd = b.load_func("on_return", bcc.BPF.KPROBE, attach_type=bpflink.BPF_TRACE_UPROBE_MULTI).fd

    def attach(self) -> None:
        t0 = time.perf_counter()
        with self._lock:
            if self.attached or not self.probed:
                self.attached = True
                return
            if self.method == "uprobe_multi":
                self._link()
            else:
                for i in self.probed:
                    f = self.plan.functions[i]
                    path = self.plan.path_of(f.name, self.binary.path)
                    self.b.attach_uprobe(name=path, sym=f.name, fn_name=f"e_{i}")
                    self.b.attach_uretprobe(name=path, sym=f.name, fn_name=f"r_{i}")
            self.attached = True
            self.on_since = time.perf_counter()
        self.attach_s += time.perf_counter() - t0

    def _link(self) -> None:
        """An entry and a return link on each file with probed functions: the binary, and the project's
        own libraries whose functions the plan probes (a link names one file)."""
        by_path: dict[str, list[int]] = {}
        for i in self.probed:
            by_path.setdefault(self.plan.path_of(self.plan.functions[i].name, self.binary.path), []).append(i)
        try:
            for path, ids in by_path.items():
                offsets = [self.plan.functions[i].offset for i in ids]
                for fd, ret in ((self._entry_fd, False), (self._return_fd, True)):
                    self.links.append(bpflink.UprobeMultiLink(fd, path, offsets, ids, retprobe=ret))
        except OSError as e:
            _close_all(self.links)
            self.links = []
            raise EnvironmentUnavailable(f"cannot attach uprobe_multi links to {path}: {e}")

    def attached_s(self, now: float) -> float:
        """Seconds the probes have been live since the workload started."""
        with self._lock:
            return self.on_s + (now - self.on_since if self.attached and self.on_since is not None else 0.0)

    def restart_clock(self) -> None:
        """Live time counted from now (a run's start; an alternating session's probes stay attached)."""
        with self._lock:
            self.on_s, self.on_since = 0.0, time.perf_counter() if self.attached else None

    def detach(self) -> None:
        """The probes off, now."""
        with self._lock:
            if not self.attached:
                return
            if self.on_since is not None:
                self.on_s += time.perf_counter() - self.on_since
                self.on_since = None
            if self.method == "uprobe_multi":
                _close_all(self.links)
                self.links = []
            else:
                # bcc's detach_uprobe() also deletes a tracefs event, which fails where tracefs is
                # not mounted even though the probe (a perf PMU event) is gone once its fd closes.
                from bcc import lib
                for ev_name, fd in list(self.b.uprobe_fds.items()):
                    lib.bpf_close_perf_event_fd(fd)
                    self.b._del_uprobe_fd(ev_name)
            self.attached = False

    def bursts(self, plan: ProbePlan, stop: threading.Event, burst_ended: Callable[[], None]) -> None:
        """Bursty tracing: probes attached for `window` of every `period`, detached (native speed:
        a merely disabled uprobe still traps) for the rest.  `burst_ended` snapshots the counts."""
        burst, rest = plan.window_ns / 1e9, (plan.period_ns - plan.window_ns) / 1e9
        while not stop.wait(burst):
            self.detach()
            burst_ended()
            if stop.wait(rest):
                return
            self.attach()
