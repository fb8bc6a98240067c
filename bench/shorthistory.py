#!/usr/bin/env python3
"""The check under four commits of history, as the tests' demo history meets it (tests/conftest.py's
`profiled`: the demo's first five commits, `gate` collected one run at a time in five interleaved
rounds).  Here such a history is collected `--histories` times (one quiet, the others beside two
cores kept busy in bursts: bench/aa.py's neighbour), and then checks are drawn from the runs: A/A
draws take a target, a base and 0-2 history commits of five runs each from the runs of the two
harmless commits (the first and its comment-only child: the same machine code) of every collection;
slowdown draws take five runs of the slowed commit (`checksum_block` 2-3x) as the target.  Counted:
A/A draws with any finding, slowdown draws flagged and located, and what else they named.

    .venv/bin/python bench/shorthistory.py [--collections 4] [--draws 300] [--work DIR]

The collections are kept in --work: a second run with the same DIR only draws (PYTHONPATH=<other
tree> compares the check's code on the same runs).
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path

import aa
import history
from _common import ROOT, table

sys.path.insert(0, str(ROOT / "examples" / "demo"))
import make_history  # noqa: E402

import pygit2  # noqa: E402

from gitperf.checks import verdict  # noqa: E402
from gitperf.checks.change import DEGRADATION, OPTIMIZATION  # noqa: E402
from gitperf.checks.sides import Sides  # noqa: E402
from gitperf.core import config  # noqa: E402
from gitperf.store.notes import NotesStore  # noqa: E402

SLOWED = "checksum_block"


def collect(dest: Path, neighbour: str) -> Path:
    """The demo history under `profiled`'s plan (once: kept in `dest`)."""
    repo = dest / "wordstat"
    if (dest / "done").exists():
        return repo
    commits = make_history.build(repo)
    with aa.neighbour(neighbour):
        for _ in range(5):
            for c in commits[:5]:
                r = history.cli(repo, "collect", c, "--workload", "gate", "--repeat", "1", "-q")
                if r.returncode:
                    raise SystemExit(f"collect of {c[:12]} failed: {r.stderr[-2000:]}")
    (dest / "done").write_text(neighbour)
    return repo


def runs(repos: list[Path]) -> tuple[list, list]:
    """Every collection's runs of the two harmless commits, and of the slowed commit."""
    good, slow = [], []
    for repo in repos:
        git = pygit2.Repository(repo)
        store = NotesStore(git)
        line = [str(c.id) for c in git.walk(git.head.target, pygit2.GIT_SORT_TOPOLOGICAL | pygit2.GIT_SORT_REVERSE)]
        good += store.read(line[0])[0] + store.read(line[1])[0]
        slow += store.read(line[3])[0]
    return good, slow


def draws(good: list, slow: list, cfg, h: int, count: int) -> list:
    rng = random.Random(1)
    false, flagged, located, named = 0, 0, 0, collections.Counter()
    for _ in range(count):
        pool = rng.sample(good, 5 * (h + 2))
        sessions = [pool[k * 5:(k + 1) * 5] for k in range(h + 2)]
        moved = [c for c in verdict.judge(Sides("gate", sessions[0], sessions[1], sessions[2:]), cfg, frozenset(), False)
                 if c.type in (DEGRADATION, OPTIMIZATION)]
        false += bool(moved)
        named.update(f"{c.function} ({c.type}, A/A)" for c in moved)
        found = [c.function for c in verdict.judge(Sides("gate", rng.sample(slow, 5), sessions[1], sessions[2:]), cfg,
                                                   frozenset({SLOWED}), False) if c.type == DEGRADATION]
        flagged += bool(found)
        located += SLOWED in found
        named.update(f"{f} (slowdown draws)" for f in found if f != SLOWED)
    return [h, aa.wilson(false, count), aa.wilson(flagged, count), aa.wilson(located, count),
            ", ".join(f"{k} {v}" for k, v in named.most_common(4)) or "-"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collections", type=int, default=4)
    ap.add_argument("--draws", type=int, default=300)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-shorthistory-"))
    t0 = time.perf_counter()
    repos = [collect(work / f"c{i}", "quiet" if i == 0 else "two") for i in range(a.collections)]
    good, slow = runs(repos)
    cfg = config.load(repos[0]).check
    rows = [draws(good, slow, cfg, h, a.draws) for h in (0, 1, 2)]
    print(f"demo, {a.collections} collections of `profiled`'s history ({len(good)} harmless runs, {len(slow)} "
          f"slowed), {time.perf_counter() - t0:.0f} s; {work}")
    print(table(["history", "A/A draws with a finding", "slowdown flagged", "located", "named besides"], rows))


if __name__ == "__main__":
    main()
