#!/usr/bin/env python3
"""Should the dashboard's index be an embedded columnar database instead of sqlite (issue #34)?  The
same rows in both -- the index `bench/dashboard.py`'s history builds (1,000 commits x 200 functions) --
and the queries the pages run on them, timed in one run.

    pip install --target /tmp/duckpkg duckdb   # not a dependency of git perf
    PYTHONPATH=/tmp/duckpkg .venv/bin/python bench/columnar.py [--commits 1000]

DuckDB loads each table from CSV (its fastest path without pandas); sqlite is the index as
`views.index` writes it (compact tables behind views).  Sizes are the files on disk.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

import pygit2
from _common import table
from dashboard import generate

from gitperf.core.config import CheckConfig
from gitperf.views.index import Index

TABLES = ("commits", "functions", "changes", "verdicts")
QUERIES = {
    "function page: one function on every commit": (
        "select f.*, c.seq, c.subject from functions f left join commits c on c.sha = f.[commit] "
        "where f.name = 'fn_100' order by f.config_key, c.seq"),
    "overview: 8 functions' timelines": (
        "select f.name, f.[commit], c.seq, f.total_ns, f.ci_low, f.ci_high from functions f join commits c "
        "on c.sha = f.[commit] where f.name in ('main','fn_001','fn_002','fn_003','fn_004','fn_005','fn_006',"
        "'fn_007') order by c.seq"),
    "regressions: every degradation": (
        "select ch.*, c.seq, c.subject from changes ch left join commits c on c.sha = ch.[commit] join verdicts v "
        "on v.[commit] = ch.[commit] and v.workload = ch.workload where ch.type != 'no-change' and ch.type in "
        "('degradation', 'accepted') and v.result in ('degradation', 'accepted') order by c.seq desc"),
    "commit page: one commit's changes": (
        "select * from changes where [commit] = (select sha from commits where seq = 500) order by rank"),
    "analytic: every function's median time": "select name, median(total_ns) from functions group by name",
}


def _timed(run, n: int = 5) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> None:
    import duckdb
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        generate(root, a.commits, 200, 3)
        idx = Index(pygit2.Repository(str(root)), CheckConfig())
        idx.update(rebuild=True)
        lite = idx.db.conn
        lite.create_aggregate("median", 1, _Median)  # (sqlite has none built in; a page would do it in Python)
        t0 = time.perf_counter()
        for name in TABLES:
            cur = lite.execute(f"select * from [{name}]")
            with open(Path(tmp) / f"{name}.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow([d[0] for d in cur.description])
                w.writerows(cur)
        export = time.perf_counter() - t0
        duck_path = Path(tmp) / "index.duckdb"
        duck = duckdb.connect(str(duck_path))
        t0 = time.perf_counter()
        for name in TABLES:
            duck.execute(f"create table {name} as select * from read_csv_auto('{Path(tmp) / name}.csv', header=true)")
        duck.execute("checkpoint")
        load = time.perf_counter() - t0
        rows = []
        for label, sql in QUERIES.items():
            d_sql = sql.replace("[commit]", '"commit"')
            n_lite = len(lite.execute(sql).fetchall())
            n_duck = len(duck.execute(d_sql).fetchall())
            assert n_lite == n_duck, (label, n_lite, n_duck)
            rows.append([label, n_lite, f"{_timed(lambda: lite.execute(sql).fetchall()) * 1000:.1f}",
                         f"{_timed(lambda: duck.execute(d_sql).fetchall()) * 1000:.1f}"])
        print(f"{a.commits} commits x 200 functions; sqlite index {idx.path.stat().st_size / 2**20:.1f} MiB, "
              f"DuckDB {duck_path.stat().st_size / 2**20:.1f} MiB (the same tables' rows; loaded from CSV in "
              f"{load:.2f} s after a {export:.2f} s export)")
        print(table(["query", "rows", "sqlite ms", "DuckDB ms"], rows))


class _Median:
    def __init__(self):
        self.values = []

    def step(self, v):
        self.values.append(v)

    def finalize(self):
        return statistics.median(self.values) if self.values else None


if __name__ == "__main__":
    main()
