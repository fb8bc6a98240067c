#!/usr/bin/env python3
"""The collected history's check calibrated on real sessions (issue #34: "a test calibrated by
simulation against real A/A data"): how often it finds something in a harmless commit, and how often
it flags and locates a real slowdown, from draws of sessions collected at defaults.

A project's sessions: N comment-only commits (the same machine code), each `git perf collect`ed with
no options, then K commits of its slowdown (each a comment on the slowed code), collected alike.  A
draw takes a target, a base and H history sessions without replacement and judges them as `git perf
check` judges a commit from stored profiles (`checks.verdict.judge`; the diff's changed set: none
between harmless sessions, the slowed function's for a slowed target).  A/A draws: any degradation or
optimization is false.  Slowdown draws: flagged (any degradation), located (the slowed function's).
Beside them, each slowdown session against the last harmless sessions before it, as consecutive
commits are (collected minutes apart, not across the hour).

Drawing across an hour of collections mixes the machine's quiet and busy spells, and its speeds (the
2-vCPU VM here runs the demo at 24 or 30 ms by which vCPU and when): harsher than consecutive commits.

    .venv/bin/python bench/resample.py [--projects demo,lua] [--sessions 24] [--slowed 8] [--draws 1000]
                                       [--histories 4,6,8] [--work DIR]

The sessions are kept in --work (DIR/<project>/): a second run with the same DIR only draws, so the
check's code can be compared on the same sessions (PYTHONPATH=<other tree>).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass
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
from gitperf.core.model import ROOT as MAIN  # noqa: E402
from gitperf.git import sourcediff  # noqa: E402
from gitperf.store.notes import NotesStore  # noqa: E402


def demo_project() -> aa.Project:
    def make(work: Path) -> Path:
        repo = work / "demo"
        repo.mkdir(parents=True)
        aa.git(repo, "init", "-q", "-b", "main")
        make_history.copy_sources(repo)
        (repo / ".gitperf.toml").write_text(make_history.DEFAULTS_CONFIG)
        (repo / ".gitignore").write_text("*.o\nwordstat\n")
        aa.git(repo, "add", "-A")
        aa.git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", "base")
        return repo
    def comment(repo: Path) -> None:
        with (repo / "report.c").open("a") as f:
            f.write("/* a comment */\n")
    return aa.Project("demo", "gate", make, "wordstat", {"comment": comment}, "checksum_block", "mathx.c", "")


def commit(repo: Path, message: str) -> str:
    aa.git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qam", message)
    return aa.git(repo, "rev-parse", "HEAD")


def collected(p: aa.Project, work: Path, n: int, k: int) -> dict:
    """The project's sessions (made and collected once, then read from DIR/<project>/sessions.json)."""
    saved = work / p.name / "sessions.json"
    if saved.exists():
        return json.loads(saved.read_text())
    (work / p.name).mkdir(parents=True, exist_ok=True)
    repo = p.make(work / p.name)
    base = aa.git(repo, "rev-parse", "HEAD")
    good = [base]
    for i in range(n - 1):
        p.cases["comment"](repo)
        good.append(commit(repo, f"bench resample: comment {i + 1}"))
    aa.git(repo, "checkout", "-q", "-b", "slowed", base)
    demo = ("checksum_block 2-3x", make_history.slowdown)
    label, change = demo if p.name == "demo" else history.slowdown(p, repo, work)
    change(repo)
    slow = [commit(repo, f"bench resample: {label}")]
    for i in range(k - 1):
        p.cases["comment"](repo)
        slow.append(commit(repo, f"bench resample: {label}, comment {i + 1}"))
    t0 = time.perf_counter()
    for i, c in enumerate(good + slow):
        aa.git(repo, "checkout", "-q", c)
        r = history.cli(repo, "collect", "HEAD", "-q")
        if r.returncode:
            raise SystemExit(f"collect of {c[:12]} failed: {r.stderr[-2000:]}")
        print(f"  {p.name}: collected {i + 1} of {len(good) + len(slow)}", file=sys.stderr)
    out = {"repo": str(repo), "good": good, "slow": slow, "slowdown": label, "collect_s": time.perf_counter() - t0}
    saved.write_text(json.dumps(out))
    return out


@dataclass(frozen=True)
class Sessions:
    """A project's collected sessions, read once: the harmless ones' and the slowdown's runs, what the
    slowdown's diff changed (as `check` asks it: the functions its target's profiles locate) and the
    check's configuration."""

    good: list
    slow: list
    changed: frozenset[str]
    cfg: object


def sessions(s: dict) -> Sessions:
    repo = pygit2.Repository(s["repo"])
    store = NotesStore(repo)
    good = [store.read(c)[0] for c in s["good"]]
    slow = [store.read(c)[0] for c in s["slow"]]
    locations = {f.name: f.location for sp in slow[0] for f in sp.profile.functions if f.location}
    changed = verdict.changed([sp.profile for sp in slow[0]], lambda: sourcediff.changed_functions(
        repo, s["good"][0], s["slow"][0], locations))
    return Sessions(good, slow, changed, config.load(s["repo"]).check)


def adjacent(ss: Sessions, h: int) -> tuple[int, int, int]:
    """Each slowdown session against the last harmless ones collected before it (base, then h history),
    as consecutive commits are: (flagged, located, sessions)."""
    good = ss.good
    found = [{c.function for c in verdict.judge(Sides("bench", t, good[-1], good[-2:-h - 2:-1]), ss.cfg, ss.changed,
                                                False) if c.type == DEGRADATION} for t in ss.slow]
    return sum(bool(f) for f in found), sum(bool(f & ss.changed) for f in found), len(found)


def draws(ss: Sessions, h: int, count: int, slowed: bool, seed: int = 1) -> dict[str, int]:
    """`count` draws of (target, base, h history sessions): how many found what (see the docstring)."""
    good, changed = ss.good, ss.changed
    rng = random.Random(seed)
    out = {"draws": 0, "false": 0, "root": 0, "flagged": 0, "located": 0}
    for _ in range(count):
        pick = rng.sample(range(len(good)), h + 2)
        target = rng.choice(ss.slow) if slowed else good[pick.pop()]
        found = verdict.judge(Sides("bench", target, good[pick[0]], [good[i] for i in pick[1:h + 1]]), ss.cfg,
                              changed if slowed else frozenset(), False)
        moved = [c for c in found if c.type in (DEGRADATION, OPTIMIZATION)]
        out["draws"] += 1
        if slowed:
            out["flagged"] += any(c.type == DEGRADATION for c in moved)
            out["located"] += any(c.type == DEGRADATION and c.function in changed for c in moved)
        else:
            out["false"] += bool(moved)
            out["root"] += any(c.function == MAIN for c in moved)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--projects", default="demo,lua")
    ap.add_argument("--sessions", type=int, default=24, help="harmless sessions (comment-only commits)")
    ap.add_argument("--slowed", type=int, default=8, help="sessions of the slowdown")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--histories", default="4,6,8", help="history lengths (sessions before the base)")
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-resample-"))
    makers = {"demo": demo_project, "lua": aa.lua, "indexer": aa.indexer}
    for name in a.projects.split(","):
        s = collected(makers[name](), work, a.sessions, a.slowed)
        ss = sessions(s)  # (read once: each draw judges the same sessions)
        rows = []
        for h in map(int, a.histories.split(",")):
            aa_ = draws(ss, h, a.draws, False)
            sd = draws(ss, h, max(a.draws // 3, 1), True)
            flagged, located, n = adjacent(ss, h)
            rows.append([h, aa.wilson(aa_["false"], aa_["draws"]), aa_["root"], aa.wilson(sd["flagged"], sd["draws"]),
                         aa.wilson(sd["located"], sd["draws"]), f"{flagged}/{n}, located {located}"])
        print(f"\n{name}: {len(s['good'])} harmless sessions, {len(s['slow'])} of the slowdown ({s['slowdown']}), "
              f"collected at defaults in {s['collect_s']:.0f} s; {work / name}")
        print(table(["history", "A/A draws with a finding", "of them the run's", "slowdown flagged", "located",
                     "slowdown after the last harmless"], rows))


if __name__ == "__main__":
    main()
