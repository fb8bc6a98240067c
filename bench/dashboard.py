#!/usr/bin/env python3
"""The dashboard's index and overview at scale (issue 6): a generated history of N commits x F
functions (R runs each) in real git notes; times building the index from scratch, updating it after
one new note, and serving the overview (and a commit page) warm through the real Flask app.

    .venv/bin/python bench/dashboard.py [--commits 1000] [--functions 200] [--runs 3] [--seed 0] [--no-diff]

A planted commit (a function slowed 40%, among those where that adds at least twice `check.min_share` of the
run) records the slowed function as changed by the diff, as `git perf collect`'s
diff tracing does (`PlanRecord.changed`: the check's error budget favours it); `--no-diff` leaves that
out, so that the times alone must find it.

Targets (issue #34): every planted degradation found and no other commit; full build <= 10 s at
1,000 commits, <= 2 min at 10,000; update < 1 s; warm overview < 300 ms; index <= 2x the notes.
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pygit2
from _common import Header, Metrics, PlanRecord, Profile, codec  # noqa: F401  (sets sys.path)

from gitperf.core.config import CheckConfig
from gitperf.core.model import FunctionStats
from gitperf.store.notes import NOTES_REF, NotesStore
from gitperf.views.index import Index
from gitperf.views.index_build import cpus
from gitperf.web import create_app

SIG = pygit2.Signature("Bench", "bench@example.com", 1_767_225_600, 0)


def _profile(commit: str, rng, names: list[str], base: np.ndarray, factor: np.ndarray,
             changed: tuple[str, ...] = ()) -> Profile:
    common = rng.normal(0, 0.03)
    funcs = []
    for n, b, f in zip(names, base, factor):
        t = b * f * math.exp(common + rng.normal(0, 0.05))
        funcs.append(FunctionStats(n, 100, int(t), int(t * 0.4), int(t / 200), int(t / 50),
                                   location=f"src/{n}.c:{len(n) * 7}"))
    h = Header("bench", commit, "app", "b1d", ("./app",), "w", "bcc", "m1", "k", 0.0, 1.0)
    return Profile(h, Metrics(PL=len(names), PLR=len(names)), PlanRecord(probed=tuple(names), changed=changed),
                   tuple(funcs))


def generate(dest: Path, commits: int, functions: int, runs: int, seed: int = 0, diff: bool = True) -> list[str]:
    """A repository of `commits` first-parent commits, each noted with `runs` profiles; every 100th
    commit slows one function by 40% for good (so the regressions page has something to list)."""
    repo = pygit2.init_repository(str(dest), initial_head="main")
    rng = np.random.default_rng(seed)
    names = ["main"] + [f"fn_{i:03d}" for i in range(1, functions)]
    base = np.geomspace(2e9, 1e5, functions)
    factor = np.ones(functions)
    # where 40% adds at least twice check.min_share of the run: a verdict's whole interval must clear
    # the floor, and with three runs a side the interval's low end is about half the change (fn_122's
    # +40% [+20%, +64%] added 1.9 ms, its low end 0.95 ms of a 1 ms floor: unresolved)
    plantable = int(np.sum(base * 0.4 >= 2 * CheckConfig().min_share * base[0]))
    shas, parent, pending = [], [], {}
    store = NotesStore(repo)
    for i in range(commits):
        blob = repo.create_blob(f"{i}\n".encode())
        tb = repo.TreeBuilder()
        tb.insert("a.txt", blob, pygit2.GIT_FILEMODE_BLOB)
        sha = repo.create_commit("refs/heads/main", SIG, SIG, f"commit {i}", tb.write(), parent)
        parent = [sha]
        shas.append(str(sha))
        changed = ()
        if i and i % 100 == 0:
            slowed = int(rng.integers(1, plantable))
            factor[slowed] *= 1.4
            changed = (names[slowed],) if diff else ()
        pending[str(sha)] = [codec.encode(_profile(str(sha), rng, names, base, factor, changed)) for _ in range(runs)]
        if len(pending) == 200 or i == commits - 1:  # through the store, fanned out as `collect` writes
            store.add_lines(pending)
            pending = {}
    return shas


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--functions", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-diff", action="store_true", help="planted commits do not record their changed function")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        t0 = time.perf_counter()
        shas = generate(root, a.commits, a.functions, a.runs, a.seed, not a.no_diff)
        gen = time.perf_counter() - t0
        repo = pygit2.Repository(str(root))
        notes_bytes = sum(len(repo.lookup_note(s, NOTES_REF).message) for s in shas)
        idx = Index(repo, CheckConfig())
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        full = idx.update(rebuild=True)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # (the largest worker)
        size = idx.path.stat().st_size
        found = {r["commit"] for r in idx.regressions()}
        planted = {shas[i] for i in range(100, a.commits, 100)}

        # one more commit with one new note, as `git perf collect` would leave it
        rng = np.random.default_rng(1)
        names = ["main"] + [f"fn_{i:03d}" for i in range(1, a.functions)]
        tb = repo.TreeBuilder()
        tb.insert("a.txt", repo.create_blob(b"new\n"), pygit2.GIT_FILEMODE_BLOB)
        new = str(repo.create_commit("refs/heads/main", SIG, SIG, "new commit", tb.write(), [pygit2.Oid(hex=shas[-1])]))
        NotesStore(repo).add(new, _profile(new, rng, names, np.geomspace(2e9, 1e5, a.functions),
                                           np.ones(a.functions)))
        upd = Index(repo, CheckConfig()).update()
        noop = Index(repo, CheckConfig()).update()

        client = create_app(root).test_client()
        timings = {}
        for label, url in (("overview", "/"), ("commit page", f"/commit/{new}"), ("regressions", "/regressions"),
                           ("function page", "/function/fn_100"), ("api/commits", "/api/commits")):
            assert client.get(url).status_code == 200, url  # first request: cold
            samples = []
            for _ in range(5):
                t = time.perf_counter()
                r = client.get(url)
                samples.append(time.perf_counter() - t)
            timings[label] = (statistics.median(samples), len(r.data))

    print(f"history: {a.commits} commits x {a.functions} functions x {a.runs} runs "
          f"(generated in {gen:.1f} s; notes {notes_bytes / 2**20:.1f} MiB)")
    print(f"{'step':34s} {'time':>9s}  target   detail")
    target = "<= 10 s" if a.commits <= 1000 else "<= 2 min" if a.commits <= 10000 else ""
    print(f"{'index: full build':34s} {full.seconds:8.2f}s  {target:8s} {full.read} notes read, {full.checked} "
          f"commits checked on {cpus()} CPU{'s' if cpus() > 1 else ''}, index {size / 2**20:.1f} MiB "
          f"({size / notes_bytes:.2f}x the notes, target <= 2x), peak memory "
          f"{peak:.0f} MB ({before:.0f} MB before the build), a worker's {workers_peak:.0f} MB")
    print(f"{'degradations found':34s} {len(found):9d}  planted {len(planted)}, found of them {len(found & planted)}, "
          f"other commits {len(found - planted)}{'' if a.no_diff else ' (planted commits record the diff)'}")
    print(f"{'index: update after one new note':34s} {upd.seconds:8.2f}s  < 1 s    {upd.read} note read, "
          f"{upd.checked} commit checked")
    print(f"{'index: update with nothing new':34s} {noop.seconds:8.3f}s")
    for label, (t, n) in timings.items():
        target = "< 0.3 s" if label == "overview" else ""
        print(f"{'warm ' + label + ' (median of 5)':34s} {t * 1000:7.0f}ms  {target:8s} {n / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
