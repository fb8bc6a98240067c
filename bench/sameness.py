#!/usr/bin/env python3
"""Whether two checkouts of git perf derive the same dashboard index and print the same checks: every row
of every index view (`except` both ways, in sqlite), every table's rows in storage order, and `git perf
check REV --recompute --json --all` of the newest three commits and `show HEAD --json`, byte for byte with
their stderr and exit codes.  On each repository given (with notes) and on a generated history
(`bench/dashboard.py`'s).  What a change meant to leave the output alone is held to this (#58: the
index's cost a commit, with every row the same).

    .venv/bin/python bench/sameness.py --tree OLD [--tree NEW] [--commits 60] [REPO ...]

NEW defaults to this checkout.  One line a repository: how many rows differ (0 where the trees agree)
and in which tables, which tables hold the same rows in another order, and which CLI outputs differ.
Exit status 1 when anything differs.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, table

CHILD = """
import os, sys
# (one CPU: one process derives every commit, in order; with workers, rows are stored in the order
# their runs finish, which no reader relies on and `tables_reordered` would report)
os.sched_setaffinity(0, [min(os.sched_getaffinity(0))])
import pygit2
from gitperf.core.config import CheckConfig
from gitperf.views.index import Index
Index(pygit2.Repository(sys.argv[1]), CheckConfig(), sys.argv[2]).update(rebuild=True)
"""


def _under(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree))


def build_index(tree: Path, repo: Path, out: Path) -> None:
    """The index `tree`'s code builds of `repo`'s notes, at `out` (run outside both: `python -c` looks for
    modules in its working directory first)."""
    subprocess.run([sys.executable, "-c", CHILD, str(repo), str(out)], env=_under(tree), cwd=out.parent,
                   check=True, capture_output=True)


def rows_differing(old: Path, new: Path) -> dict[str, int]:
    """Per table or view a reader queries (not the compact tables' ids behind the views), the rows in one
    index and not the other, both ways."""
    db = sqlite3.connect(new)
    db.execute("attach ? as o", (str(old),))
    names = [n for (n,) in db.execute("select name from sqlite_master where type in ('table', 'view') "
                                      "and name not like 'sqlite_%' and name not like '%_rows' "
                                      "and name not in ('texts', 'meta') order by name")]
    return {n: db.execute(f"select (select count(*) from (select * from main.[{n}] except select * from o.[{n}])) + "
                          f"(select count(*) from (select * from o.[{n}] except select * from main.[{n}]))").fetchone()[0]
            for n in names}


def tables_reordered(old: Path, new: Path) -> list[str]:
    """The tables whose rows, the same both ways, are stored in another order (`rows_differing`'s `except`
    cannot see order, which a reader without `order by` would)."""
    db = sqlite3.connect(new)
    db.execute("attach ? as o", (str(old),))
    names = [n for (n,) in db.execute("select name from sqlite_master where type = 'table' and name not like 'sqlite_%' "
                                      "and not sql like '%without rowid%' order by name")]
    return [n for n in names if db.execute(f"select * from main.[{n}] order by rowid").fetchall()
            != db.execute(f"select * from o.[{n}] order by rowid").fetchall()]


def cli_outputs(tree: Path, repo: Path) -> dict[str, tuple[int, str, str]]:
    """What `check --recompute --json --all` of the newest three commits and `show HEAD --json` print under
    `tree`'s code: (exit status, stdout, stderr) each."""
    revs = subprocess.run(["git", "rev-list", "--first-parent", "-n", "3", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.split()
    commands = {f"check {r[:12]}": ["check", r, "--recompute", "--json", "--all"] for r in revs}
    commands["show HEAD"] = ["show", "HEAD", "--json"]
    out = {}
    for what, argv in commands.items():
        r = subprocess.run([sys.executable, "-m", "gitperf", *argv], cwd=repo, env=_under(tree), capture_output=True,
                           text=True)
        out[what] = (r.returncode, r.stdout, r.stderr)
    return out


def compare(old: Path, new: Path, repo: Path, tmp: Path) -> list[str]:
    """One repository's line: rows differing (and where), CLI outputs differing."""
    dbs = [tmp / f"{repo.name}.{k}.db" for k in ("old", "new")]
    for tree, db in zip((old, new), dbs):
        build_index(tree, repo, db)
    rows, reordered = rows_differing(*dbs), tables_reordered(*dbs)
    clis = [cli_outputs(tree, repo) for tree in (old, new)]
    bad = [k for k in clis[0] if clis[0][k] != clis[1][k]]
    where = ", ".join(f"{n} {k}" for n, k in rows.items() if k) or "-"
    return [str(repo), f"{sum(rows.values())}", where, ", ".join(reordered) or "-", f"{len(bad)} of {len(clis[0])}",
            ", ".join(bad) or "-"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, action="append", required=True,
                    help="a checkout of git perf: the old one, then the new (default: this one)")
    ap.add_argument("--commits", type=int, default=60, help="commits of the generated history (0: none)")
    ap.add_argument("repos", type=Path, nargs="*", help="repositories with git perf notes")
    a = ap.parse_args()
    old, new = (a.tree + [ROOT])[:2]
    from dashboard import generate  # (sets sys.path as the bench's scripts do)
    with tempfile.TemporaryDirectory() as tmp:
        repos = [r.resolve() for r in a.repos]
        if a.commits:
            generate(Path(tmp) / "generated", a.commits, 200, 3)
            repos.insert(0, Path(tmp) / "generated")
        lines = [compare(old.resolve(), new.resolve(), r, Path(tmp)) for r in repos]
    print(f"old: {old}  new: {new}")
    print(table(["repository", "rows differing", "in", "tables in another order", "CLI outputs differing", "which"],
                lines))
    return 1 if any(line[1] != "0" or line[3] != "-" or not line[4].startswith("0 ") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
