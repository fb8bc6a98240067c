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
        # mode=stack probes only the root (its entry gives the load bias for symbolisation)
        probed = [plan.root] if plan.mode == "stack" and plan.root is not None else list(range(len(plan.functions)))
        multi = self.uses_multi_link
        n = max(len(plan.functions), 1)
        with scope() as where:
            cflags = [
                f"-DNFUNCS={n}", f"-DROOT_FID={plan.root if plan.root is not None else 0xFFFFFFFF}",
                f"-DCGROUP_ID={where.cgroup_id}ULL", f"-DUSE_COOKIE={1 if multi else 0}",
                f"-DRINGBUF_PAGES={RINGBUF_PAGES}",
                f"-DPERIOD_NS={plan.period_ns if plan.mode == 'timed' else 0}ULL",
                f"-DWINDOW_NS={plan.window_ns if plan.mode == 'timed' else 0}ULL",
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
                progress(f"probes attached ({attach.method}, {attach_s * 1000:.1f} ms); running workload")

                stop = threading.Event()
                poller = threading.Thread(target=self._poll, args=(b, stop), daemon=True)
                poller.start()
                burster = None
                if plan.mode == "bursty" and plan.period_ns:
                    burster = threading.Thread(target=attach.bursts, args=(plan, stop), daemon=True)
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
                attach.detach()
                detach_s = time.perf_counter() - t_detach
                funcs, counters, map_bytes = self._read(b, plan, n)
                for i, res in enumerate(series):
                    funcs[i].series = res.sorted()
                samples, unknown, sample_bytes = self._read_samples(b, binary, plan)
                for i, c in samples.items():
                    funcs[i].stack_samples = c
                collection_s = time.perf_counter() - t_start
        return RawCollection(
            functions=funcs[: len(plan.functions)], run=result, attach_s=attach_s, detach_s=detach_s,
            collection_s=collection_s, raw_bytes=raw_bytes[0] + map_bytes + sample_bytes,
            records=counters[1], dropped=counters[0], overflow=counters[2], unmatched=counters[3],
            stack_samples=counters[4], unknown_samples=unknown, attach_method=attach.method,
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
    def _read_samples(b, binary: BinaryInfo, plan: ProbePlan) -> tuple[dict[int, int], int, int]:
        """Attribute each stack sample to the innermost frame inside the binary (time in libc
        counts for its caller, as exclusive time does in traced mode)."""
        index = {f.name: i for i, f in enumerate(plan.functions)}
        bases = {k.value: v.value for k, v in b["bases"].items()}
        out: dict[int, int] = {}
        unknown = nbytes = 0
        stacks = b["ustacks"]
        for k, v in b["samples"].items():
            nbytes += 16
            bias = bases.get(k.tgid, 0 if not binary.pie else None)
            fn = None
            if bias is not None:
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


class _Attacher:
    """Attach and detach the entry/return probes: two uprobe_multi links, or per-probe."""

    def __init__(self, b, binary: BinaryInfo, plan: ProbePlan, probed: list[int], multi: bool):
        self.b, self.binary, self.plan, self.probed = b, binary, plan, probed
        self.method = "uprobe_multi" if multi else "per-probe"
        self.links: list[bpflink.UprobeMultiLink] = []
        self.attached = False
        self.attach_s = 0.0
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
        self.attach_s += time.perf_counter() - t0

    def detach(self) -> None:
        with self._lock:
            if not self.attached:
                return
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

    def bursts(self, plan: ProbePlan, stop: threading.Event) -> None:
        """Bursty tracing: probes attached for `window` of every `period`, detached (native speed:
        a merely disabled uprobe still traps) for the rest."""
        burst, rest = plan.window_ns / 1e9, (plan.period_ns - plan.window_ns) / 1e9
        while not stop.wait(burst):
            self.detach()
            if stop.wait(rest):
                return
            self.attach()
