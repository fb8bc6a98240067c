"""What one traced call costs, by entry instruction and by tracer, in one run (issue #17).

1. Per entry-instruction class (the calibration program, gitperf/engine/calib): ns per call of a
   bare uprobe, a bare uprobe + uretprobe, and git perf's entry + return handlers, over native.
2. A one-line leaf function called N times, per call over native: git perf on the ordinary build
   (its entry, `lea`, is single-stepped), on a `-fpatchable-function-entry=5` build (five one-byte
   NOPs, emulated) and on a `-pg -mfentry -mnop-mcount` build (one 5-byte NOP, which kernels from
   6.18 turn into a trampoline call), a bare uprobe + uretprobe on that build (the kernel's floor),
   uftrace on a `-pg` build, and callgrind.
3. Lua 5.4 (bench/realworld.py) traced in full, ordinary against NOP-padded: slowdown over native,
   probe time predicted by the calibration against measured, and whether the exact counts agree.

Usage: sudo .venv/bin/python bench/percall.py [--calls N] [--repeat R] [--no-lua]
All figures are medians of R runs on this machine; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from _common import native, table

from gitperf.analysis import elf
from gitperf.core.config import CollectConfig
from gitperf.engine import calibrate, workload
from gitperf.engine.bcc_engine import BccEngine
from gitperf.plan.costs import call_costs
from gitperf.plan.probes import make_plan

CLASSES = ("push", "nop", "nop5", "branch", "endbr", "singlestep")
PAD = "-fpatchable-function-entry=5"
# A 5-byte NOP at every entry (GCC: only without PIE), compiled for it and linked without -pg (no gmon.out)
NOP5 = ["-fno-pie", "-pg", "-mfentry", "-mnop-mcount"]
LEAF = """#include <stdlib.h>
__attribute__((noinline, noipa)) long leaf(long x) { return x * 3 + 1; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000, s = 0;
    for (long i = 0; i < n; i++) s += leaf(i);
    return (int)(s & 1);
}
"""


def _per_call(exe: Path, work: Path, calls: int) -> dict[str, float]:
    out = work / "out.txt"
    subprocess.run([str(exe), str(out), str(calls)], check=True)
    return {k: float(v) for k, v in (ln.split() for ln in out.read_text().splitlines()) if k in CLASSES}


@contextmanager
def _empty_probes(exe: Path, names: set[str], ret: bool):
    """A uprobe (and a uretprobe) whose program does nothing on each of `names`, attached the way the
    engine attaches (one uprobe_multi link per direction): the kernel's part of a probed call."""
    import bcc

    from gitperf.engine import bpflink
    fs = [f for f in elf.load(exe).functions if f.name in names]
    b = bcc.BPF(text="int nothing(void *ctx) { return 0; }")
    fd = b.load_func("nothing", bcc.BPF.KPROBE, attach_type=bpflink.BPF_TRACE_UPROBE_MULTI).fd
    offsets, cookies = [f.offset for f in fs], list(range(len(fs)))
    links = []
    try:
        for r in (False, True) if ret else (False,):
            links.append(bpflink.UprobeMultiLink(fd, str(exe), offsets, cookies, retprobe=r))
        yield
    finally:
        for link in links:
            link.close()
        b.cleanup()


def _bare(exe: Path, work: Path, calls: int, ret: bool) -> dict[str, float]:
    """ns per call of each class with a bare uprobe (and uretprobe)."""
    with _empty_probes(exe, {f"f_{c}" for c in CLASSES}, ret):
        return _per_call(exe, work, calls)


def entry_classes(engine: BccEngine, work: Path, calls: int, repeat: int) -> str:
    exe = calibrate._build(work)
    base = [_per_call(exe, work, calls) for _ in range(repeat)]
    bare = [_bare(exe, work, calls, False) for _ in range(repeat)]
    pair = [_bare(exe, work, calls, True) for _ in range(repeat)]
    ours = calibrate.measure_classes(engine, exe, work, repeat)  # as calibrated: without the sampling timer
    med = lambda runs, c: statistics.median(r[c] for r in runs)  # noqa: E731
    rows = []
    for c in CLASSES:
        n = med(base, c)
        u, p, g = med(bare, c) - n, med(pair, c) - n, med(ours, c)
        rows.append([c, f"{n:.1f}", f"{u:.0f}", f"{p:.0f}", f"{g:.0f}", f"{g / p:.2f}" if p > 0 else "-"])
    return table(["entry class", "native ns/call", "uprobe ns", "uprobe+uretprobe ns", "git perf ns",
                  "git perf / pair"], rows)


def _build_leaf(work: Path, name: str, flags: list[str], link: tuple[str, ...] = ()) -> Path:
    src, obj = work / "leaf.c", work / f"{name}.o"
    src.write_text(LEAF)
    exe = work / name
    subprocess.run(["cc", "-O2", "-g", *flags, "-c", "-o", str(obj), str(src)], check=True)
    subprocess.run(["cc", *link, "-o", str(exe), str(obj)], check=True)
    return exe


def _traced_wall(engine: BccEngine, exe: Path, argv: list[str], funcs: tuple[str, ...] = ()) -> tuple[float, dict]:
    binary = elf.load(exe)
    plan = make_plan(binary, CollectConfig(strategy="funcs" if funcs else "userspace"), funcs)
    raw = engine.collect(binary, plan, lambda where: workload.run(workload.Command(argv, str(exe.parent)), 900, where), lambda m: None)
    counts = {f.name: r.count for f, r in zip(plan.functions, raw.functions)}
    return raw.run.wall_s, {"counts": counts, "plan": plan}


def _bare_leaf_wall(exe: Path, argv: list[str]) -> float:
    """Wall time of `argv` with an empty uprobe + uretprobe on `leaf`: the kernel's floor under any
    uprobe-based tracer's per-call cost."""
    with _empty_probes(exe, {"leaf"}, True):
        return _wall(argv, exe.parent)


def _wall(argv: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def leaf_function(engine: BccEngine, work: Path, calls: int, repeat: int) -> str:
    plain, padded = _build_leaf(work, "leaf", []), _build_leaf(work, "leaf_pad", [PAD])
    pg = _build_leaf(work, "leaf_pg", ["-pg"], ("-pg",))
    nop5 = _build_leaf(work, "leaf_nop5", NOP5, ("-no-pie",))
    n = str(calls)
    entry = {e.name: e.mnemonic for e in elf.load(plain).functions}["leaf"]
    base = native([str(plain), n], repeat)
    rows = []

    def row(what: str, walls: list[float], count: int | None = None, native_s: float = base):
        per = (statistics.median(walls) - native_s) / calls * 1e9
        rows.append([what, f"{statistics.median(walls):.3f}", f"{per:.0f}", f"{per / uftrace_ns:.1f}" if uftrace_ns
                     else "-", f"{count:,}" if count is not None else "-"])

    uftrace_ns = 0.0
    uft = []
    if shutil.which("uftrace"):
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as d:
                uft.append(_wall(["uftrace", "record", "-d", d, str(pg), n], work))
        pg_native = statistics.median(_wall([str(pg), n], work) for _ in range(repeat))  # gmon.out lands in work
        uftrace_ns = (statistics.median(uft) - pg_native) / calls * 1e9
    for name, exe in ((f"git perf, ordinary build (entry `{entry}`)", plain), (f"git perf, {PAD}", padded),
                      (f"git perf, {' '.join(NOP5)} (nop5)", nop5)):
        walls, counts = [], {}
        for _ in range(repeat):
            w, info = _traced_wall(engine, exe, [str(exe), n], ("leaf",))
            walls.append(w)
            counts = info["counts"]
        row(name, walls, counts.get("leaf"))
    row("bare uprobe + uretprobe (no handler), nop5 build", [_bare_leaf_wall(nop5, [str(nop5), n])
                                                             for _ in range(repeat)])
    if uft:
        row("uftrace 0.13, -pg build", uft, native_s=pg_native)
    if shutil.which("valgrind"):
        row("valgrind --tool=callgrind", [_wall(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                                                 str(plain), n], work) for _ in range(repeat)])
    return (f"{calls:,} calls of a one-line leaf; native {base:.3f} s\n"
            + table(["tracer", "wall s", "ns per call over native", "x uftrace", "calls counted"], rows))


def lua(engine: BccEngine, work: Path, repeat: int) -> str:
    import realworld
    src = work / "lua"
    realworld.make_history(src)
    cfg = "-std=c99 -DLUA_USE_LINUX -g -fno-omit-frame-pointer"
    costs = calibrate.costs(engine, "bench", work)
    rows, counts = [], {}
    for label, extra in (("ordinary", ""), ("NOP-padded", f" {PAD}")):
        d = work / f"lua-{label}"
        shutil.copytree(src, d)
        subprocess.run(["make", "-s", f"MYCFLAGS={cfg}{extra}", "MYLIBS=-ldl", "lua"], cwd=d, check=True,
                       capture_output=True)
        exe, argv = d / "lua", [str(d / "lua"), str(d / "bench.lua")]
        base = native(argv, repeat)
        runs = [_traced_wall(engine, exe, argv) for _ in range(repeat)]
        wall = statistics.median(w for w, _ in runs)
        info = runs[0][1]
        counts[label] = info["counts"]
        counts[label + " again"] = runs[1][1]["counts"] if len(runs) > 1 else info["counts"]
        per_call = call_costs(info["plan"], costs)
        predicted = sum(c * per_call.get(f, 0.0) for f, c in info["counts"].items()) / 1e9
        stepped = sum(1 for f in info["plan"].functions if f.entry in ("singlestep", "endbr"))
        rows.append([label, f"{base * 1e3:.1f}", f"{wall:.2f}", f"{wall / base:.0f}x", f"{predicted:.2f}",
                     f"{wall - base:.2f}", f"{predicted / max(wall - base, 1e-9):.2f}",
                     f"{stepped} of {len(info['plan'].functions)}"])
    def differ(a: dict, b: dict) -> list[str]:
        return sorted(n for n in a.keys() | b.keys() if a.get(n, 0) != b.get(n, 0))

    # Lua seeds its string hashes with addresses and the time (luai_makeseed): a few functions'
    # counts differ between any two runs, so the builds are compared against that
    runs_apart, builds_apart = differ(counts["ordinary"], counts["ordinary again"]), differ(
        counts["ordinary"], counts["NOP-padded"])
    return (table(["Lua 5.4 bench.lua", "native ms", "traced s", "slowdown", "predicted probe s", "measured probe s",
                   "predicted/measured", "single-stepped entries"], rows)
            + f"\ncall counts ({sum(counts['ordinary'].values()):,} calls): {len(runs_apart)} functions differ between"
            f" two runs of one build ({', '.join(runs_apart[:6])}), {len(builds_apart)} between the builds"
            f" ({', '.join(builds_apart[:6])})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls of the leaf function")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-lua", action="store_true")
    ap.add_argument("--only-lua", action="store_true", help="just part 3")
    args = ap.parse_args()
    engine = BccEngine()
    engine.check()
    with tempfile.TemporaryDirectory(prefix="gitperf-percall-") as tmp:
        work = Path(tmp)
        if not args.only_lua:
            print("## Per entry class (calibration program, 100,000 calls a class)\n")
            print(entry_classes(engine, work, 100_000, args.repeat))
            print("\n## Per call of a leaf function\n")
            print(leaf_function(engine, work, args.calls, args.repeat))
        if not args.no_lua:
            print("\n## Lua 5.4 traced in full\n")
            print(lua(engine, work, args.repeat))


if __name__ == "__main__":
    main()
