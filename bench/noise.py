#!/usr/bin/env python3
"""A/A at defaults on real projects: `git perf noise -k K` (K collections of one commit with the
configuration's fixed mode; every ordered pair checked with the other sessions as its history, as the
unpaired flow of `collect` + `check` would), quiet and beside a busy neighbour.  Per project: the pairs
with a false alarm, the functions that raised them and the thresholds `noise` recommends.

Projects (`--projects`) are bench/aa.py's, at their pinned base commit: lua (C, ~30 ms), ninja (C++,
~50 ms; `--ninja-src`), leveldb (C++, ~0.2 s; `--leveldb-src`), indexer (C++, ~90 ms).

    .venv/bin/python bench/noise.py [--projects lua,indexer] [--sessions 5] [--neighbours quiet,two]
                                    [--work DIR] [--ninja-src URL_OR_PATH] [--leveldb-src URL_OR_PATH]
    PYTHONPATH=<a git perf tree> .venv/bin/python bench/noise.py --judge --work DIR

The sessions are kept as notes of each project's HEAD in --work (a neighbour's K sessions after the
one's before it, listed in DIR/sessions.json): `--judge` collects nothing and judges them again with the
git perf on PYTHONPATH, so two versions of the check meet the same sessions.

Target (issue #34): at most 1 of 20 ordered pairs with an alarm at -k 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aa
from _common import ROOT, table


def noise(repo: Path, workload: str, sessions: int) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gitperf", "noise", "HEAD", "-k", str(sessions), "--workload", workload,
                        "--json", "-q", "--keep"], cwd=repo, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if r.returncode:
        raise SystemExit(f"noise failed in {repo} (exit {r.returncode}): {r.stderr[-2000:]}")
    found = [x for x in json.loads(r.stdout) if x["workload"] == workload]
    if not found or "error" in found[0]:
        raise SystemExit(f"noise measured nothing of {workload} in {repo}: {r.stdout[-2000:]}")
    return found[0], time.perf_counter() - t0


def judge(work: Path) -> None:
    """The kept sessions (`main`'s DIR/sessions.json) judged again by the git perf imported here."""
    import pygit2
    from gitperf.checks.noise import analyse
    from gitperf.core import config
    from gitperf.store.notes import NotesStore
    rows = []
    for name, s in json.loads((work / "sessions.json").read_text()).items():
        repo = pygit2.Repository(s["repo"])
        good, _ = NotesStore(repo).read(str(repo.head.target))
        runs = [sp.profile for sp in good if sp.profile.header.workload == s["workload"]]
        for hood, per in zip(s["neighbours"], s["runs"]):  # (runs a session: what the pilot afforded beside it)
            mine, runs = runs[:s["sessions"] * per], runs[s["sessions"] * per:]
            r = analyse(s["workload"], [mine[k * per:(k + 1) * per] for k in range(s["sessions"])],
                        config.load(s["repo"]).check)
            rows.append([name, hood, f"{r.pairs_with_false_alarm}/{r.pairs}",
                         f"{r.consecutive_with_false_alarm}/{r.consecutive_checks}", len(r.functions),
                         ", ".join(f"{f.name} ({f.false_alarms})" for f in r.functions if f.false_alarms) or "-"])
    import gitperf
    print(f"the sessions kept in {work}, judged by {Path(gitperf.__file__).parent.parent}")
    print(table(["project", "neighbour", "pairs alarmed", "consecutive", "functions", "alarmed by"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", default="lua,indexer")
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--neighbours", default="quiet,two")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--ninja-src", default=aa.NINJA_URL)
    ap.add_argument("--leveldb-src", default=aa.LEVELDB_URL)
    ap.add_argument("--judge", action="store_true", help="judge the sessions kept in --work again; collect nothing")
    a = ap.parse_args()
    if a.judge:
        return judge(a.work)
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-noise-"))
    kept = {}
    makers = {"lua": aa.lua, "indexer": aa.indexer, "ninja": lambda: aa.ninja(a.ninja_src),
              "leveldb": lambda: aa.leveldb(a.leveldb_src)}
    rows = []
    for name in a.projects.split(","):
        p = makers[name]()
        repo = p.make(work)
        kept[name] = {"repo": str(repo), "workload": p.workload, "sessions": a.sessions,
                      "neighbours": a.neighbours.split(","), "runs": []}
        for hood in a.neighbours.split(","):
            with aa.neighbour(hood):
                r, seconds = noise(repo, p.workload, a.sessions)
            kept[name]["runs"].append(r["runs_per_session"])
            loud = sorted((f for f in r["functions"] if f["false_alarms"]), key=lambda f: -f["false_alarms"])
            rows.append([name, hood, f"{r['pairs_with_false_alarm']}/{r['pairs']}",
                         f"{r['consecutive_with_false_alarm']}/{r['consecutive_checks']}", len(r["functions"]),
                         ", ".join(f"{f['name']} ({f['false_alarms']})" for f in loud[:3]) or "-",
                         f"{r['recommended_min_relative']:.0%}", r["recommended_repeat"], f"{seconds:.0f}"])
            print(f"{name} {hood}: {rows[-1][2]} pairs with an alarm", file=sys.stderr, flush=True)
    (work / "sessions.json").write_text(json.dumps(kept))
    print(f"git perf noise -k {a.sessions} at defaults (work: {work})")
    print(table(["project", "neighbour", "pairs alarmed", "consecutive", "functions", "alarmed by",
                 "min_relative", "repeat", "s"], rows))


if __name__ == "__main__":
    main()
