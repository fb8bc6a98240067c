"""The bcc engine: the BPF text in probe.bpf.c, this driver around it (in the manner of bcc's
funclatency.py / profile.py)."""

from __future__ import annotations

import ctypes
import os
import random
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from gitperf.elf import BinaryInfo
from gitperf.engine import bpflink
from gitperf.engine.base import Progress, RawCollection, RawFunction, RunWorkload
from gitperf.errors import EnvironmentUnavailable
from gitperf.plan import ProbePlan
from gitperf.workload import scope

BPF_SOURCE = Path(__file__).with_name("probe.bpf.c")
NHIST = 40
RINGBUF_PAGES = 256  # 1 MiB: ~25k records of 40 bytes between two polls


class Rec(ctypes.Structure):
    _fields_ = [("fid", ctypes.c_uint32), ("pid", ctypes.c_uint32), ("tid", ctypes.c_uint32),
                ("depth", ctypes.c_uint32), ("ord", ctypes.c_uint64), ("dur", ctypes.c_uint64),
                ("excl", ctypes.c_uint64)]


def _import_bcc():
    try:
        import bcc  # noqa: F401
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

    @property
    def uses_multi_link(self) -> bool:
        return not self.force_per_probe and bpflink.kernel_supports_uprobe_multi()

    # -- collection --------------------------------------------------------------------------------
    def collect(self, binary: BinaryInfo, plan: ProbePlan, run: RunWorkload, progress: Progress) -> RawCollection:
        bcc = _import_bcc()
        probed = plan.probed_ids()
        multi = self.uses_multi_link
        n = max(len(plan.functions), 1)
        with scope() as where:
            cflags = [
                f"-DNFUNCS={n}", f"-DROOT_FID={plan.root if plan.root is not None else 0xFFFFFFFF}",
                f"-DCGROUP_ID={where.cgroup_id}ULL", f"-DUSE_COOKIE={1 if multi else 0}",
                f"-DRINGBUF_PAGES={RINGBUF_PAGES}",
                f"-DPERIOD_NS={plan.period_ns if plan.mode == 'timed' else 0}ULL",
                f"-DWINDOW_NS={plan.window_ns if plan.mode == 'timed' else 0}ULL",
                f"-DTEXT_LO={min((f.vaddr for f in binary.functions), default=0)}ULL",
                f"-DTEXT_HI={max((f.vaddr + f.size for f in binary.functions), default=0)}ULL",
            ]
            text = BPF_SOURCE.read_text()
            if not multi:  # one stub pair per function: the id is compiled in
                text += "".join(f"int e_{i}(struct pt_regs *ctx) {{ return do_entry(ctx, {i}); }}\n"
                                f"int r_{i}(struct pt_regs *ctx) {{ return do_return(ctx, {i}); }}\n"
                                for i in probed)
            progress(f"compiling the BPF program ({len(probed)} functions)")
            try:
                b = bcc.BPF(text=text, cflags=cflags)
            except Exception as e:  # bcc raises bare Exception on compile/load failure
                raise EnvironmentUnavailable(f"bcc could not compile or load the probes: {e}") from None
            with ExitStack() as cleanup:
                cleanup.callback(b.cleanup)
                self._configure(b, plan)
                series = [_Reservoir(plan.series_limit, seed=i) for i in range(n)]
                raw_bytes = [0]

                def on_record(_ctx, data, _size):
                    r = ctypes.cast(data, ctypes.POINTER(Rec)).contents
                    series[r.fid].add((r.ord, r.dur))
                    raw_bytes[0] += ctypes.sizeof(Rec)

                b["records"].open_ring_buffer(on_record)
                t_start = time.perf_counter()
                attach = _Attacher(b, binary, plan, probed, multi)
                cleanup.callback(attach.detach)
                attach.attach()
                if plan.stack_hz:
                    b.attach_perf_event(ev_type=bcc.PerfType.SOFTWARE, ev_config=bcc.PerfSWConfig.CPU_CLOCK,
                                        fn_name="on_sample", sample_freq=plan.stack_hz)
                    cleanup.callback(lambda: b.detach_perf_event(ev_type=bcc.PerfType.SOFTWARE,
                                                                  ev_config=bcc.PerfSWConfig.CPU_CLOCK))
                attach_s = attach.attach_s
                attach.on_since = time.perf_counter()  # live time counts from the workload's start
                progress(f"probes attached ({attach.method}, {attach_s * 1000:.1f} ms); running workload")

                stop = threading.Event()
                poller = threading.Thread(target=self._poll, args=(b, stop), daemon=True)
                poller.start()
                burster = None
                ends: list[list[tuple[int, int]]] = []  # cumulative (calls, total ns) at each burst's end
                if plan.mode == "bursty" and plan.period_ns:
                    burster = threading.Thread(target=attach.bursts, daemon=True,
                                               args=(plan, stop, lambda: ends.append(self._totals(b, n))))
                    burster.start()
                try:
                    result = run(where)
                finally:
                    stop.set()
                    poller.join()
                    if burster:
                        burster.join()
                b.ring_buffer_consume()
                t_detach = time.perf_counter()
                attached_s = attach.attached_s(t_detach)
                in_burst = attach.attached
                attach.detach()
                detach_s = time.perf_counter() - t_detach
                funcs, counters, map_bytes = self._read(b, plan, n)
                for i, res in enumerate(series):
                    funcs[i].series = res.sorted()
                if burster:
                    _per_burst(funcs, ends, in_burst)
                samples, unknown, sample_bytes = self._read_samples(b, binary, plan)
                for i, c in samples.items():
                    funcs[i].stack_samples = c
                collection_s = time.perf_counter() - t_start
        return RawCollection(
            functions=funcs[: len(plan.functions)], run=result, attach_s=attach_s, detach_s=detach_s,
            collection_s=collection_s, raw_bytes=raw_bytes[0] + map_bytes + sample_bytes,
            records=counters[1], dropped=counters[0], overflow=counters[2], unmatched=counters[3],
            stack_samples=counters[4], unknown_samples=unknown, attach_method=attach.method,
            attached_s=attached_s,
        )

    @staticmethod
    def _poll(b, stop: threading.Event) -> None:
        while not stop.is_set():
            b.ring_buffer_poll(50)

    @staticmethod
    def _configure(b, plan: ProbePlan) -> None:
        conf = b["conf"]
        flags = 0
        if plan.record_limit:
            flags |= 1 | (2 if plan.reenable else 0)
        for i, f in enumerate(plan.functions):
            v = conf.Leaf()
            v.vaddr, v.every, v.limit, v.flags = f.vaddr, plan.every(f.name), plan.record_limit, flags
            conf[ctypes.c_int(i)] = v

    @staticmethod
    def _read(b, plan: ProbePlan, n: int) -> tuple[list[RawFunction], list[int], int]:
        calls, stats = b["calls"], b["stats"]
        funcs, nbytes = [], 0
        for i in range(n):
            count = calls[ctypes.c_int(i)].value
            per_cpu = stats.getvalue(ctypes.c_int(i))
            nbytes += 8 + ctypes.sizeof(per_cpu[0]) * len(per_cpu)
            f = RawFunction(count=count, hist=[0] * NHIST)
            mins = [s.min for s in per_cpu if s.timed]
            f.min_ns = min(mins) if mins else 0
            for s in per_cpu:
                f.timed += s.timed
                f.total_ns += s.total
                f.exclusive_ns += s.excl
                f.max_ns = max(f.max_ns, s.max)
                for k in range(NHIST):
                    f.hist[k] += s.hist[k]
            while f.hist and f.hist[-1] == 0:
                f.hist.pop()
            funcs.append(f)
        counters = [sum(b["counters"].getvalue(ctypes.c_int(k))) for k in range(8)]
        return funcs, counters, nbytes

    @staticmethod
    def _totals(b, n: int) -> list[tuple[int, int]]:
        """(calls, total inclusive ns) of every function so far."""
        calls, stats = b["calls"], b["stats"]
        return [(calls[ctypes.c_int(i)].value, sum(s.total for s in stats.getvalue(ctypes.c_int(i))))
                for i in range(n)]

    @staticmethod
    def _read_samples(b, binary: BinaryInfo, plan: ProbePlan) -> tuple[dict[int, int], int, int]:
        """Attribute each stack sample to the innermost frame inside the binary (time in libc
        counts for its caller, as exclusive time does in traced mode).  A sample in a library
        prefers the return address found on the stack (`ret`): the frame-pointer walk through
        library code misses the immediate caller."""
        index = {f.name: i for i, f in enumerate(plan.functions)}
        bases = {k.value: v.value for k, v in b["bases"].items()}
        out: dict[int, int] = {}
        unknown = nbytes = 0
        stacks = b["ustacks"]
        for k, v in b["samples"].items():
            nbytes += 16
            bias = bases.get(k.tgid, 0 if not binary.pie else None)
            fn = None
            if bias is not None and k.ret:
                fn = binary.symbolize(k.ret - 1 - bias)  # -1: a call's return address may start the next function
            if bias is not None and fn is None:
                for addr in stacks.walk(k.stackid):
                    nbytes += 8
                    sym = binary.symbolize(addr - bias)
                    if sym is not None:
                        fn = sym
                        break
            if fn is None or fn.name not in index:
                unknown += v.value
            else:
                out[index[fn.name]] = out.get(index[fn.name], 0) + v.value
        return out, unknown, nbytes


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
            funcs = self.plan.functions
            if self.method == "uprobe_multi":
                offsets = [funcs[i].offset for i in self.probed]
                cookies = list(self.probed)
                try:
                    self.links = [
                        bpflink.UprobeMultiLink(self._entry_fd, self.binary.path, offsets, cookies, retprobe=False),
                        bpflink.UprobeMultiLink(self._return_fd, self.binary.path, offsets, cookies, retprobe=True),
                    ]
                except OSError as e:
                    for link in self.links:
                        link.close()
                    self.links = []
                    raise EnvironmentUnavailable(f"cannot attach uprobe_multi links to {self.binary.path}: {e}")
            else:
                for i in self.probed:
                    f = funcs[i]
                    self.b.attach_uprobe(name=self.binary.path, sym=f.name, fn_name=f"e_{i}")
                    self.b.attach_uretprobe(name=self.binary.path, sym=f.name, fn_name=f"r_{i}")
            self.attached = True
            self.on_since = time.perf_counter()
        self.attach_s += time.perf_counter() - t0

    def attached_s(self, now: float) -> float:
        """Seconds the probes have been live since the workload started."""
        with self._lock:
            return self.on_s + (now - self.on_since if self.attached and self.on_since is not None else 0.0)

    def detach(self) -> None:
        with self._lock:
            if not self.attached:
                return
            if self.on_since is not None:
                self.on_s += time.perf_counter() - self.on_since
                self.on_since = None
            if self.method == "uprobe_multi":
                for link in self.links:
                    link.close()
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
