#!/usr/bin/env python3
"""What one commit costs the dashboard's index, in instructions (callgrind): reading its note, deriving
its rows and checking it against its parent and history, as a full build's workers do
(`views.index_build`), on `bench/dashboard.py`'s generated history.  Instructions rather than seconds:
a VM whose speed moves by the moment (this one's by 1.5x, in phases of seconds) moves a 20% change of
a build's time out of sight, and callgrind's count of the same work does not move.

    .venv/bin/python bench/indexcost.py [--functions 200] [--commits 30] [--tree PATH ...] [--stages]

Each `--tree` (a checkout of git perf: another commit's, to compare) is measured on the same history;
the default is this one.  ~3 min a tree (two processes under callgrind).  `--stages` also splits a
commit's cost into reading its note, deriving the note's rows and checking it (`views.index_rows`),
each the measured commits with that stage alone (~5 min a tree).  `--within module:function` (again
for more) counts only the instructions inside the functions named, while the measured commits are
derived as a whole: which step a commit's instructions go to.  A sampling profiler's wall time says
otherwise here: on this VM py-spy gave the history's levels 4.6% of a commit and decoding its
functions 6%; callgrind counts 1.3% and 11%.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, table

WARM = 20  # commits derived before the measured ones: the history a check reads, the imports' caches

CHILD = """
import gc, sys
import pygit2
from gitperf.core.config import CheckConfig
from gitperf.store.notes import NOTES_REF
from gitperf.views import index_build as ib
from gitperf.views.index import _COMPACT
repo = pygit2.Repository(sys.argv[1])
ids = {str(n.annotated_id): str(n.id) for n in repo.notes(NOTES_REF)}
line = [str(c.id) for c in repo.walk(repo.head.target, pygit2.GIT_SORT_TOPOLOGICAL | pygit2.GIT_SORT_REVERSE)]
source = ib.Source(repo.path, ids, CheckConfig(), {t: s["ns"] for t, s in _COMPACT.items()})
gc.set_threshold(*ib.FEW_COLLECTIONS)
first, last, stage = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = ib._Deriver(source)
d([ib.Job(c, ids[c], True) for c in line[:first]])
if len(sys.argv) > 5:  # --within: callgrind collects inside these functions only (toggled around each outermost call)
    import ctypes, functools, importlib
    toggle, depth = ctypes.CDLL(sys.argv[5]).gitperf_toggle, [0]
    def within(f):
        @functools.wraps(f)
        def counted(*a, **k):
            if not depth[0]:
                toggle()
            depth[0] += 1
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    toggle()
        return counted
    for spec in sys.argv[6:]:
        mod, _, name = spec.partition(":")
        owner, _, attr = name.rpartition(".")
        at = importlib.import_module(mod)
        at = getattr(at, owner) if owner else at
        f = getattr(at, attr)
        setattr(at, attr, within(f))
        for m in list(sys.modules.values()):  # (and where a module imported it by name)
            if getattr(m, "__name__", "").startswith("gitperf") and getattr(m, attr, None) is f:
                setattr(m, attr, within(f))
for c in line[first:last]:
    if stage == "all":
        d([ib.Job(c, ids[c], True)])
    elif stage == "read":
        d.store.read(c)
    elif stage == "notes":
        ib.rows.note_rows(d.store, c, ids[c])
    elif stage == "check":
        d.store.read(c)
        ib.rows.check_rows(d.store, c, d.cfg)
print(ib.__file__)
"""

# What a stage's measured commits run (`--stages`), beyond the warm commits every child derives.
STAGES = {"read": "reading the note", "notes": "reading it and deriving its rows",
          "check": "reading it and checking it", "all": "the whole commit"}


TOGGLE = "#include <valgrind/callgrind.h>\nvoid gitperf_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


def toggler(tmp: Path) -> Path:
    """A library whose one function turns callgrind's collection on or off (valgrind's client request,
    which Python cannot issue itself; the header comes with Debian's valgrind)."""
    (tmp / "toggle.c").write_text(TOGGLE)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(tmp / "toggle.so"), str(tmp / "toggle.c")], check=True)
    return tmp / "toggle.so"


def within(tree: Path, repo: Path, commits: int, toggle: Path, names: list[str]) -> int:
    """Callgrind's count of what the `commits` measured commits spend inside the functions `names`."""
    r = subprocess.run(["valgrind", "--tool=callgrind", "--vgdb=no", "--collect-atstart=no", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, str(repo), str(WARM), str(WARM + commits), "all", str(toggle), *names],
                       capture_output=True, text=True, cwd=repo.parent, env=dict(os.environ, PYTHONPATH=str(tree)))
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode or not m:
        raise SystemExit(f"callgrind failed under {tree}: {r.stderr[-2000:]}")
    return int(m[1])


def instructions(tree: Path, repo: Path, commits: int, stage: str = "all") -> int:
    """Callgrind's count of the whole child process deriving the first WARM commits and running `stage`
    on the `commits` after them (run in the history's directory: `python -c` looks for modules in its
    working directory first).  The same tree on the same history counted 131.7 to 136.3 M a commit in six
    runs at aad1e44 (three of them with one fixed string hash seed): a change of 2% needs several runs
    of each tree."""
    r = subprocess.run(["valgrind", "--tool=callgrind", "--vgdb=no", "--callgrind-out-file=/dev/null", sys.executable, "-c", CHILD,
                        str(repo), str(WARM), str(WARM + commits), stage], capture_output=True, text=True,
                       cwd=repo.parent, env=dict(os.environ, PYTHONPATH=str(tree)))
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode or not m:
        raise SystemExit(f"callgrind failed under {tree}: {r.stderr[-2000:]}")
    if not Path(r.stdout.strip()).is_relative_to(tree.resolve()):
        raise SystemExit(f"the child imported git perf from {r.stdout.strip()}, not from {tree}")
    return int(m[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", type=int, default=200)
    ap.add_argument("--commits", type=int, default=30, help="commits measured (after the first 20)")
    ap.add_argument("--tree", type=Path, action="append", help="a checkout of git perf (default: this one)")
    ap.add_argument("--stages", action="store_true", help="also each stage of a commit alone")
    ap.add_argument("--within", action="append", default=[], metavar="MODULE:FUNCTION",
                    help="also the instructions inside this function (e.g. gitperf.core.codec:parse, "
                         "gitperf.store.caching:CachingStore.read); again for more, each counted alone")
    a = ap.parse_args()
    from dashboard import generate  # (sets sys.path as the bench's scripts do)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        generate(repo, WARM + a.commits, a.functions, 3)
        rows = []
        for tree in a.tree or [ROOT]:
            warm = instructions(tree, repo, 0)
            for stage in (list(STAGES) if a.stages else ["all"]):
                per = (instructions(tree, repo, a.commits, stage) - warm) / a.commits
                rows.append([str(tree), STAGES[stage], f"{per / 1e6:.1f}"])
            for name in a.within:
                per = within(tree, repo, a.commits, toggler(Path(tmp)), [name]) / a.commits
                rows.append([str(tree), f"inside {name}", f"{per / 1e6:.2f}"])
    print(f"history: bench/dashboard.py's, {a.functions} functions x 3 runs; {a.commits} commits measured after {WARM}")
    print(table(["git perf tree", "what", "M instructions a commit"], rows))


if __name__ == "__main__":
    main()
