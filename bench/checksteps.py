#!/usr/bin/env python3
"""Where a commit's time goes when the dashboard's index derives it, step by step: wall time of each
named step (reading the note, its rows, and the check's steps: sides, noise models, tests, Holm,
changes, rows), on `bench/dashboard.py`'s generated history, commits derived in order after 20 as a
build's worker does (`views.index_build`).  A map for whoever rewrites a step (issue #58, item 3);
`bench/indexcost.py` counts the instructions of the whole, which is what a change is judged by.

    .venv/bin/python bench/checksteps.py [--functions 200] [--commits 30] [--repeat 3]

Steps nest (a check's steps are inside `checks.check`); a step's time includes what it calls.  Each
step's time is the median over `--repeat` passes of the same commits, so that a VM's slow moment
moves one pass, not the figure.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path

from _common import table  # (sets sys.path)

import pygit2

from gitperf.checks import compare, sides, verdict
from gitperf.core.config import CheckConfig
from gitperf.store import notes
from gitperf.store.notes import NOTES_REF
from gitperf.views import index_build, index_rows
from gitperf.views.index import _COMPACT

WARM = 20

# (module, function, what it is): timed where the index's code calls it
STEPS = [
    (notes.NotesStore, "read", "reading a note (decoding its profiles)"),
    (index_rows, "note_rows", "a note's rows (summaries, natives, stacks, series)"),
    (index_rows, "summaries", "  of which the functions' summaries"),
    (index_rows, "check_rows", "a check's rows (the check and its changes' rows)"),
    (index_rows.checks, "check", "  the check (`checks.check`)"),
    (verdict, "changed", "    the functions the diff changed (git diff)"),
    (compare, "pair", "    each function's two sides (`sides.pair`)"),
    (sides, "_exact_sides", "      of which the target side's `Side`s from its arrays"),
    (compare, "_shared", "    what the tests share (shift, history's noise)"),
    (compare, "session_noise", "      of which the history's session noise"),
    (compare, "center_spreads", "      of which the resampled centers' spreads"),
    (compare, "_tests", "    one test for each function"),
    (compare, "decide", "    Holm and intervals"),
    (compare, "_change", "    a `Change` for each function"),
    (index_rows, "change_columns", "  the changes as the table's columns"),
]


def _timed(owner, name: str, spent: dict[str, float]) -> None:
    f = getattr(owner, name)

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
    setattr(owner, name, timed)


def one_pass(repo: pygit2.Repository, line: list[str], ids: dict[str, str], spent: dict[str, float]) -> float:
    """Derive the commits after WARM in order, in a fresh deriver (cold caches but the warm commits');
    returns the wall time of the measured commits."""
    sides._sides_of.cache_clear()
    source = index_build.Source(repo.path, ids, CheckConfig(), {t: s["ns"] for t, s in _COMPACT.items()})
    d = index_build._Deriver(source)
    d([index_build.Job(c, ids[c], True) for c in line[:WARM]])
    spent.clear()
    t0 = time.perf_counter()
    for c in line[WARM:]:
        d([index_build.Job(c, ids[c], True)])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=200)
    ap.add_argument("--commits", type=int, default=30, help="commits measured (after the first 20)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from dashboard import generate
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "repo", WARM + a.commits, a.functions, 3)
        repo = pygit2.Repository(str(Path(tmp) / "repo"))
        ids = {str(n.annotated_id): str(n.id) for n in repo.notes(NOTES_REF)}
        line = [str(c.id) for c in repo.walk(repo.head.target, pygit2.GIT_SORT_TOPOLOGICAL | pygit2.GIT_SORT_REVERSE)]
        spent: dict[str, float] = {}
        for owner, name, _ in STEPS:
            _timed(owner, name, spent)
        gc.set_threshold(*index_build.FEW_COLLECTIONS)
        passes = []
        for _ in range(a.repeat):
            whole = one_pass(repo, line, ids, spent)
            passes.append({"whole": whole, **spent})
    per = {k: statistics.median(p.get(k, 0.0) for p in passes) / a.commits * 1e3 for k in passes[0]}
    rows = [["a commit, all of it", f"{per['whole']:.2f}", "100%"]]
    rows += [[what, f"{per.get(name, 0.0):.2f}", f"{per.get(name, 0.0) / per['whole']:.0%}"] for _, name, what in STEPS]
    print(f"history: bench/dashboard.py's, {a.functions} functions x 3 runs; {a.commits} commits after {WARM}, "
          f"median of {a.repeat} passes")
    print(table(["step", "ms a commit", "of the commit"], rows))


if __name__ == "__main__":
    main()
