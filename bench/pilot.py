#!/usr/bin/env python3
"""Does the pilot measure the program's native run time (issue #35, `collect.pilot`)?  N budgeted
collections of one workload (`collect --max-overhead 5% --replan --repeat 1`), each's pilot native time
(`Metrics.native_s`) against the median of 15 plain runs of its command taken before each and after
the last, all in one run.  TREE is the git perf source tree to run (compare two commits' trees).

    .venv/bin/python bench/pilot.py TREE REPO WORKLOAD "CMD" N
    .venv/bin/python bench/pilot.py . demo-work/wordstat gate "./wordstat 10000 20" 3
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

GIT_PERF = [sys.executable, "-c", "import sys; sys.argv[0] = 'git-perf'; from gitperf.cli import main; main()"]


def plain(repo: str, cmd: str, k: int = 15) -> float:
    """The median wall time of `k` plain runs of the workload's command."""
    ts = []
    for _ in range(k):
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def pilot_native_s(repo: str, wl: str, env: dict) -> float:
    """One budgeted collection of `wl`: its pilot's native time, as the profile records it."""
    r = subprocess.run(GIT_PERF + ["collect", "--max-overhead", "5%", "--replan", "--repeat", "1", "--workload", wl, "-q"],
                       cwd=repo, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(subprocess.run(GIT_PERF + ["show", "HEAD", "--json"], cwd=repo, env=env, capture_output=True,
                                  text=True).stdout)
    return max((p for p in d["profiles"] if p["workload"] == wl), key=lambda p: p["header"]["started"])["metrics"]["native_s"]


def main() -> None:
    tree, repo, wl, cmd, n = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    env = dict(os.environ, PYTHONPATH=tree)
    pilots, natives = [], []
    for _ in range(n):
        natives.append(plain(repo, cmd))
        pilots.append(pilot_native_s(repo, wl, env))
    natives.append(plain(repo, cmd))
    nat = statistics.median(natives)
    print(f"{tree} {wl}: plain runs median {nat * 1e3:.1f} ms; pilot native_s "
          f"{', '.join(f'{p * 1e3:.1f}' for p in pilots)} ms; median error {statistics.median(p / nat - 1 for p in pilots):+.1%}")


if __name__ == "__main__":
    main()
