#!/usr/bin/env python3
"""Accuracy and overhead of every probing mode, and of `--max-overhead`, on two workloads.

    .venv/bin/python bench/accuracy.py [--words 300000] [--calls 1000000] [--budget 5] [--runs 5]

Workloads: the bundled example (`wordstat WORDS WORDS/100`) and a call-heavy program (`callheavy
CALLS`: 9 calls per iteration into tiny functions, beside two loops that hold most of the time).

Two references, because a full trace is exact about *calls* but not about *time*: every probed
call costs microseconds, so on call-heavy code the full trace's time shares mostly measure the
probes (a 1 ns function called 8 million times "takes" seconds).  The native-time reference is
stack sampling at 999 Hz pooled over --runs runs (~3% slower than native, unbiased in expectation).
Each mode's time shares (exclusive time) are compared with both: HPS overlap over the reference's
top 90%, instant accuracy (2 - sum|f - g|)/2, Kendall tau of the top 10 and recall of the top 3.

Slowdown: a probed run's wall time (and CPU time: user + system of the workload, to which traps and
samples are charged; less exposed to the VM's scheduling) over the mean of the native runs just
before and after it, launched the same way (own session and cgroup); the budget row: the median
over --runs.  Predicted: calibrated cost x traced calls + samples, over native.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from _common import BccEngine, CollectConfig, build_demo, table
from overhead import MODES

from gitperf.analysis import elf
from gitperf.collect.pilot import run_pilot
from gitperf.collect.profile import build_functions, predicted_overhead
from gitperf.engine import calibrate, workload
from gitperf.plan import hybrid
from gitperf.plan.probes import make_plan
from gitperf.stats import accuracy

CALLHEAVY = r"""
#include <stdlib.h>
#define NI __attribute__((noinline))
NI unsigned tiny(unsigned x) { __asm__ volatile(""); return x * 2654435761u + 1; }
NI unsigned hashmix(unsigned x) { for (int i = 0; i < 8; i++) x = tiny(x) ^ (x >> 13); return x; }
NI unsigned crunch(unsigned x) { for (int i = 0; i < 20000; i++) x = x * 1103515245u + 12345u; return x; }
NI unsigned scan(const unsigned *a, int n) { unsigned s = 0; for (int i = 0; i < n; i++) s += a[i] >> 3; return s; }
int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], 0, 10) : 1000000;
    static unsigned buf[4096];
    unsigned s = 0;
    for (long i = 0; i < n; i++) {
        s += hashmix((unsigned)i);
        if (i % 256 == 0) s += crunch(s);
        if (i % 64 == 0) { buf[i % 4096] = s; s += scan(buf, 4096); }
    }
    return s == 42;
}
"""

REF_HZ = 999


def build_callheavy(dest: Path) -> Path:
    (dest / "callheavy.c").write_text(CALLHEAVY)
    exe = dest / "callheavy"
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls", "-o", str(exe),
                    str(dest / "callheavy.c")], check=True)
    return exe


class Bench:
    def __init__(self, exe: Path, argv: list[str], engine: BccEngine, cost_ns: dict[str, float]):
        self.exe, self.argv, self.engine, self.cost_ns = exe, argv, engine, cost_ns
        self.binary = elf.load(exe)
        self.natives: list[workload.RunResult] = []

    def runner(self, where: workload.Scope) -> workload.RunResult:
        """One run of the workload in `where` (its session and cgroup)."""
        return workload.run(workload.Command(self.argv, str(self.exe.parent)), 3600, where)

    def native(self) -> workload.RunResult:
        """Launched as the probed runs are (own session and cgroup), without probes."""
        with workload.scope() as where:
            self.natives.append(self.runner(where))
        return self.natives[-1]

    def run(self, plan):
        """One probed run -> (run result, per-function results, samples taken)."""
        raw = self.engine.collect(self.binary, plan, self.runner, lambda _m: None)
        return raw.run, build_functions(plan, raw, None, self.cost_ns), raw.stack_samples

    def reference(self, runs: int) -> dict[str, float]:
        """Native-time shares: stack samples at REF_HZ pooled over `runs` runs."""
        plan = make_plan(self.binary, CollectConfig(mode="stack", stack_hz=REF_HZ))
        pooled: dict[str, float] = {}
        for _ in range(runs):
            self.native()
            _t, funcs, _n = self.run(plan)
            for f in funcs:
                pooled[f.name] = pooled.get(f.name, 0.0) + f.stack_samples
        total = sum(pooled.values())
        return {n: v / total for n, v in pooled.items() if v}


def slowdowns(run: workload.RunResult, before: workload.RunResult, after: workload.RunResult) -> tuple[float, float]:
    """Wall and CPU time of a probed run over the mean of the native runs just before and after."""
    return (run.wall_s / statistics.mean([before.wall_s, after.wall_s]),
            run.cpu_s / statistics.mean([before.cpu_s, after.cpu_s]))


def _metrics(ref, est) -> list[str]:
    m = accuracy.compare(ref, est)
    return [f"{m['overlap']:.2f}", f"{m['accuracy']:.2f}", f"{m['kendall_tau']:.2f}", f"{m['recall']:.2f}"]


def bench(name: str, b: Bench, budget: float, runs: int) -> list[list[str]]:
    ref = b.reference(runs)
    base_plan = make_plan(b.binary, CollectConfig(mode="trace"))
    results = []  # (label, [slowdown wall, CPU, predicted], shares)
    trace_funcs = None
    for label, cfg in MODES:
        plan = make_plan(b.binary, cfg)
        before = b.native()
        r, funcs, samples = b.run(plan)
        wall, cpu = slowdowns(r, before, b.native())
        if plan.mode == "trace":
            trace_funcs = funcs
        pred = "" if plan.mode == "bursty" else predicted_overhead(plan, funcs, b.cost_ns, samples) / before.wall_s
        results.append((label, [f"{wall:.2f}x", f"{cpu:.2f}x", "" if pred == "" else f"{pred:+.1%}"],
                        accuracy.shares(funcs)))
    # --max-overhead: pilot, call counts from the full trace (in use: the baseline commit's profile)
    calls = {n: 0.0 for n in base_plan.names} | {f.name: float(f.count) for f in trace_funcs}
    slows, cpus, preds, metrics_ref, metrics_trace, hz, traced = [], [], [], [], [], [], []
    for _ in range(runs):
        pilot = run_pilot(b.engine, b.binary, base_plan, b.runner, b.cost_ns)
        plan, choice, _rates = hybrid.choose(base_plan, hybrid.Inputs(base_plan.names, budget, pilot, b.cost_ns, calls,
                                                                   pilot.shares))
        before = b.native()
        r, funcs, _n = b.run(plan)
        wall, cpu = slowdowns(r, before, b.native())
        slows.append(wall)
        cpus.append(cpu)
        preds.append(choice.predicted_ns / 1e9 / pilot.native_s)
        est = accuracy.shares(funcs)
        metrics_ref.append(accuracy.compare(ref, est))
        metrics_trace.append(accuracy.compare(accuracy.shares(trace_funcs), est))
        hz.append(choice.stack_hz)
        traced.append(len(choice.traced))
    med = lambda ms, k: f"{statistics.median(m[k] for m in ms):.2f}"  # noqa: E731
    rows = []
    trace_shares = accuracy.shares(trace_funcs)
    for label, cols, shares in results:
        rows.append([name, label, *cols, *_metrics(ref, shares), *_metrics(trace_shares, shares)])
    keys = ("overlap", "accuracy", "kendall_tau", "recall")
    rows.append([name, f"--max-overhead {budget:.0%} (median of {runs}; traced {statistics.median(traced):.0f}, "
                 f"{statistics.median(hz):.0f} Hz)", f"{statistics.median(slows):.2f}x", f"{statistics.median(cpus):.2f}x",
                 f"{statistics.median(preds):+.1%}", *[med(metrics_ref, k) for k in keys],
                 *[med(metrics_trace, k) for k in keys]])
    rows.append([name, f"  each run: slowdown {' '.join(f'{s:.2f}' for s in slows)} (CPU "
                 f"{' '.join(f'{s:.2f}' for s in cpus)}); overlap " + " ".join(f"{m['overlap']:.2f}" for m in metrics_ref)]
                + [""] * 11)
    top = sorted(ref, key=ref.get, reverse=True)[:3]
    trace_top = sorted(trace_shares, key=trace_shares.get, reverse=True)[:3]
    print(f"{name}: native median {statistics.median(n.wall_s for n in b.natives):.3f} s over {len(b.natives)} runs; top 3 native: "
          + ", ".join(f"{n} {ref[n]:.0%}" for n in top) + "; top 3 in the full trace: "
          + ", ".join(f"{n} {trace_shares[n]:.0%}" for n in trace_top), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=300000)
    ap.add_argument("--calls", type=int, default=1000000)
    ap.add_argument("--budget", type=float, default=5.0, help="percent")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    engine = BccEngine()
    engine.check()
    with tempfile.TemporaryDirectory() as d:
        cost_ns = calibrate.costs(engine, "bench", Path(d))
        print("calibrated ns per hit: " + ", ".join(f"{k} {v:,.0f}" for k, v in cost_ns.items()), flush=True)
        demo, heavy = build_demo(Path(d)), build_callheavy(Path(d))
        words = [str(demo), str(args.words), str(max(args.words // 100, 1))]
        rows = bench(f"wordstat {args.words}", Bench(demo, words, engine, cost_ns), args.budget / 100, args.runs)
        rows += bench(f"callheavy {args.calls}", Bench(heavy, [str(heavy), str(args.calls)], engine, cost_ns),
                      args.budget / 100, args.runs)
    print(table(["workload", "mode", "slowdown", "CPU", "predicted", "overlap", "accuracy", "tau", "recall@3",
                 "overlap/trace", "accuracy/trace", "tau/trace", "recall@3/trace"], rows))
    print("metrics: time shares (exclusive time) against the native-time reference, then against the full trace")


if __name__ == "__main__":
    main()
