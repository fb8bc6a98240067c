#!/usr/bin/env python3
"""What a bare `git perf collect` costs and measures, beside a full trace and the native program.

    .venv/bin/python bench/defaults.py REPO WORKLOAD [--runs 3] [--trace]

REPO: a git repository with a .gitperf.toml whose [collect] sets no mode (the default: an overhead
budget of 5%).  For each of --runs rounds: the workload's command natively (same shell, same work
tree), then `git perf collect HEAD --workload WORKLOAD --json` (the default plan), in that order, so
both see the same machine.  With --trace, one `--mode trace` collection at the end.

Per plan: the run under probes (PRT) against the native median, the plan's predicted overhead, the
calibrated probe share of the root's time, how many functions were traced, and the whole command's
time (PT: pilot, counting pass, build check, analysis).  Ratios compare within one run of this
script; absolute times on a shared VM are noisy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import table

from gitperf.core import config


def native_s(repo: Path, command: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["/bin/sh", "-c", command], cwd=repo, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def collect(repo: Path, workload: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "gitperf", "collect", "HEAD", "--workload", workload, "--json",
                        "-q", *args], cwd=repo, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"collect failed ({r.returncode}): {r.stderr[-2000:]}")
    [p] = json.loads(r.stdout)["profiles"]
    return p


def root_share(repo: Path, profile_id: str) -> float | None:
    shown = json.loads(subprocess.run([sys.executable, "-m", "gitperf", "show", "HEAD", "--json", "--top", "0"],
                                      cwd=repo, capture_output=True, text=True, check=True).stdout)
    for p in shown["profiles"]:
        if p["id"] == profile_id:
            main = next((f for f in p["functions"] if f["name"] == "main"), None)
            return main["probe_ns"] / main["total_ns"] if main and main["total_ns"] else None
    return None


def row(label: str, ps: list[dict], base: float, shares: list[float | None]) -> list:
    prt = statistics.median(p["metrics"]["PRT"] for p in ps)
    pred = statistics.median(p["metrics"]["predicted_overhead_s"] for p in ps)
    share = [s for s in shares if s is not None]
    return [label, len(ps), f"{prt * 1e3:.1f} ms", f"{prt / base:.2f}x", f"{pred / base:+.0%}",
            f"{statistics.median(share):.0%}" if share else "-",
            statistics.median(len(p["plan"]["traced"]) for p in ps) if ps[0]["plan"]["traced"] else "all",
            f"{statistics.median(p['metrics']['PT'] for p in ps):.1f} s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("workload")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trace", action="store_true", help="also one full trace (slow on call-heavy code)")
    a = ap.parse_args()
    cfg = config.load(a.repo)
    if cfg is None or cfg.collect.max_overhead == 0:
        raise SystemExit(f"{a.repo}: needs a .gitperf.toml without a collect.mode (the default plan)")
    command = cfg.workload(a.workload).command
    natives, budget, shares = [], [], []
    for i in range(a.runs):
        natives += [native_s(a.repo, command) for _ in range(3)]
        p = collect(a.repo, a.workload)
        budget.append(p)
        shares.append(root_share(a.repo, p["id"]))
        print(f"round {i + 1}/{a.runs}: native {natives[-1] * 1e3:.1f} ms, default plan PRT "
              f"{p['metrics']['PRT'] * 1e3:.1f} ms", file=sys.stderr)
    base = statistics.median(natives)
    rows = [["native (no git perf)", len(natives), f"{base * 1e3:.1f} ms", "1.00x", "-", "-", "-", "-"],
            row(f"default ({cfg.collect.max_overhead:g}% budget)", budget, base, shares)]
    if a.trace:
        t = collect(a.repo, a.workload, "--mode", "trace")
        rows.append(row("--mode trace", [t], base, [root_share(a.repo, t["id"])]))
    print(f"{a.repo.name}, workload {a.workload}: {command}")
    print(table(["plan", "runs", "run time (median)", "vs native", "predicted", "probe share of main",
                 "traced", "PT"], rows))


if __name__ == "__main__":
    main()
