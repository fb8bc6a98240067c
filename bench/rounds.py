"""What a paired check's round costs beyond its two runs (issue #57 item 4): for each project, a
commit that slows its hot function (bench/aa.py's `slow30`) checked with a fixed number of rounds
(`git perf check C --collect --base B --rounds N --fresh`, in this process), each round's wall time
against the two runs' own (their process run time, PRT), from the second round on (the first
compiles and attaches).

    .venv/bin/python bench/rounds.py [--projects lua,indexer] [--rounds 12] [--work DIR]

Per project it prints the round's wall time, the runs' time, what lies between (spawning, reading
and clearing the maps, symbolising the stack samples, the stop rule's check of every round so far is
not asked with a fixed number of rounds), and that as a share of the runs.  Ratios within one run;
a busy machine moves both.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

from _common import table  # noqa: F401  (sets sys.path)

import aa  # noqa: E402  (the projects and their slowdowns)
import detection  # noqa: E402

from gitperf.checks.paired import PairedOptions, check_collect  # noqa: E402
from gitperf.engine.bcc_engine import BccEngine  # noqa: E402
from gitperf.core.config import CheckConfig  # noqa: E402
from gitperf.git.repo import open_repo  # noqa: E402

ROUND = re.compile(r"\s*round \d+: base (\d+\.\d+) s, target (\d+\.\d+) s")


def rounds(repo: Path, commit: str, base: str, n: int) -> tuple[float, float]:
    """(wall seconds a round, the two runs' seconds a round), rounds 2..n of one check."""
    stamps: list[tuple[float, float]] = []

    def say(line: str) -> None:
        if m := ROUND.match(line):
            stamps.append((time.perf_counter(), float(m[1]) + float(m[2])))
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        check_collect(open_repo(repo), PairedOptions(rev=commit, base=base, rounds=n, fresh=True),
                      CheckConfig(witness="off"), BccEngine(), say)
    finally:
        os.chdir(cwd)
    if len(stamps) < 2:
        raise SystemExit(f"{repo}: fewer than two rounds ran")
    wall = (stamps[-1][0] - stamps[0][0]) / (len(stamps) - 1)
    return wall, sum(r for _, r in stamps[1:]) / (len(stamps) - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", default="lua,indexer")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    projects = {"lua": aa.lua, "indexer": aa.indexer}
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-rounds-"))
    rows = []
    for name in a.projects.split(","):
        p = projects[name]()
        repo = p.make(work)
        base = aa.git(repo, "rev-parse", "HEAD")
        _calls, per_call, native_s, _how = aa.inclusive_per_call(p, repo)
        change, _what = aa.slowdown(p, 0.3, per_call, detection.loop_costs(work, 2 * per_call))
        commit = aa.commit_case(repo, base, "bench case slow30", change)
        wall, runs = rounds(repo, commit, base, a.rounds)
        rows.append([name, f"{native_s * 1e3:.0f} ms", f"{wall * 1e3:.0f} ms", f"{runs * 1e3:.0f} ms",
                     f"{(wall - runs) * 1e3:.0f} ms", f"{(wall - runs) / runs:.0%}"])
    print(f"rounds 2..{a.rounds} of `check --collect --rounds {a.rounds} --fresh` (slow30 commits)")
    print(table(["project", "native run", "a round", "its two runs (PRT)", "between", "between / runs"], rows))


if __name__ == "__main__":
    main()
