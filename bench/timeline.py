#!/usr/bin/env python3
"""The overview's run time at native speed against hyperfine (issue #34, item 3: "the native speed
timeline read 100-140 ms where hyperfine read 70-90 ms").  A real project's commit is collected at
defaults (`git perf collect HEAD`, as a CI job would) several times; next to each collection, hyperfine
runs the very binary that collection ran (its build id checked against the profiles') with the
workload's command.  Which goes first alternates, so that a drift of the machine's speed favours
neither.  Printed per collection: its runs' native time (`index_rows.native_run_s`: the wall time less
the waits for a CPU and the calibrated probe time; their median) against hyperfine's median; then the
commit's timeline point (the dashboard's index) against the median of every hyperfine run.

    .venv/bin/python bench/timeline.py [--projects lua,indexer,demo] [--collections 5] [--runs 15]
                                       [--neighbour quiet] [--work DIR] [--ninja-src URL_OR_PATH]

A collection's ratio is one moment's: this VM runs a program at one of two speeds by the moment (Lua
40 or 70 ms), and a collection and the hyperfine runs beside it can fall in different ones.  The
figure is the two distributions over all collections: the quartiles of git perf's native run times
and of hyperfine's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import aa
import pygit2
from _common import table
from history import cli
from resample import demo_project

from gitperf.analysis import elf
from gitperf.core.config import CheckConfig
from gitperf.store.notes import NotesStore
from gitperf.views.index import Index
from gitperf.views.index_rows import native_run_s


def hyperfine(repo: Path, argv: list[str], runs: int) -> list[float]:
    """Seconds of each of `runs` runs of `argv` in `repo` (no shell; two warm-up runs first)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(["hyperfine", "-N", "-w", "2", "-r", str(runs), "--export-json", out.name, "--style", "none",
                        subprocess.list2cmdline(argv)], cwd=repo, check=True, capture_output=True)
        return json.loads(Path(out.name).read_text())["results"][0]["times"]


def session(repo: Path, workload: str, seen: int) -> tuple[list[float], set[str], int]:
    """The native run times (s) and build ids of the complete runs of `workload` that the last
    collection added (the note's lines after the first `seen`), and how many lines there are now."""
    store = NotesStore(pygit2.Repository(str(repo)))
    good, _bad = store.read(aa.git(repo, "rev-parse", "HEAD"))
    new = [sp.profile for sp in good[seen:] if sp.profile.header.workload == workload and sp.profile.complete]
    return [v for p in new if (v := native_run_s(p)) is not None], {p.header.build_id for p in new}, len(good)


def measure(p: aa.Project, work: Path, collections: int, runs: int) -> tuple[list[list], float, list[float],
                                                                           list[float]]:
    """Rows (collection, git perf's runs and median, hyperfine's median, ratio), the commit's
    timeline point (s), and every run's native time (git perf's) and time (hyperfine's), s."""
    repo = p.make(work)
    argv = aa.workload_argv(repo, p)
    rows, every, ours_all, seen = [], [], [], 0
    for i in range(collections):
        first = i % 2 == 1  # hyperfine first in every other collection (after the first: it builds the binary)
        peer = hyperfine(repo, argv, runs) if first else []
        r = cli(repo, "collect", "HEAD", "-q")
        if r.returncode:
            raise SystemExit(f"{p.name}: collect failed: {r.stderr[-2000:]}")
        ours, ids, seen = session(repo, p.workload, seen)
        if ids != {elf.load(repo / p.exe).build_id}:
            raise SystemExit(f"{p.name}: the collection ran {ids}, not the binary in the work tree")
        peer = peer or hyperfine(repo, argv, runs)
        every += peer
        ours_all += ours
        mine, theirs = statistics.median(ours), statistics.median(peer)
        rows.append([i + 1, "hyperfine first" if first else "collect first", len(ours), f"{mine * 1e3:.1f}",
                     f"{theirs * 1e3:.1f}", f"{mine / theirs - 1:+.1%}"])
    idx = Index(pygit2.Repository(str(repo)), CheckConfig())
    idx.update()
    machine = next(w["machine"] for w in idx.workloads() if w["workload"] == p.workload)
    point = idx.native_timeline(p.workload, machine)[-1]["total_ns"] / 1e9
    return rows, point, ours_all, every


def quartiles(values: list[float]) -> str:
    return " / ".join(f"{q * 1e3:.1f}" for q in statistics.quantiles(values))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", default="lua,indexer,demo")
    ap.add_argument("--collections", type=int, default=5)
    ap.add_argument("--runs", type=int, default=15, help="hyperfine's runs beside each collection")
    ap.add_argument("--neighbour", default="quiet", choices=("quiet", "one", "two"))
    ap.add_argument("--work", type=Path)
    ap.add_argument("--ninja-src", default=aa.NINJA_URL)
    a = ap.parse_args()
    if not shutil.which("hyperfine"):
        raise SystemExit("hyperfine is not installed: make setup installs it")
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-timeline-"))
    work.mkdir(parents=True, exist_ok=True)
    makers = {"lua": aa.lua, "indexer": aa.indexer, "demo": demo_project, "ninja": lambda: aa.ninja(a.ninja_src)}
    for name in a.projects.split(","):
        p = makers[name]()
        with aa.neighbour(a.neighbour):
            rows, point, ours, every = measure(p, work, a.collections, a.runs)
        theirs = statistics.median(every)
        print(f"\n{name} (`{p.workload}`), {a.collections} collections at defaults beside {a.neighbour}, "
              f"hyperfine {a.runs} runs beside each:", flush=True)
        print(table(["collection", "order", "runs", "git perf native (ms, median)", "hyperfine (ms, median)",
                     "git perf vs hyperfine"], rows))
        print(f"timeline point {point * 1e3:.1f} ms, hyperfine's median {theirs * 1e3:.1f} ms: "
              f"{point / theirs - 1:+.1%}; "
              f"quartiles (ms) of git perf's {len(ours)} runs {quartiles(ours)}, of hyperfine's {len(every)} "
              f"{quartiles(every)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
