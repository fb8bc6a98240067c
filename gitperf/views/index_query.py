"""Read-only queries over the dashboard's index (ARCHITECTURE.md §11): what the pages and the JSON API
read; they never touch the notes.  `views.index` builds and updates the database.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Iterable

import sqlite_utils

from gitperf.core.model import ROOT


def connect(path: Path) -> sqlite_utils.Database:
    # a reader waits for a writer's commit instead of failing at once (WAL: only checkpoints block)
    return sqlite_utils.Database(sqlite3.connect(str(path), timeout=60))


class IndexQuery:
    """Read-only queries over the index: what the pages and the API read (they never touch the notes).
    One per request (`web.db.get_index`); `close()` when done."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.db = connect(self.path)

    def close(self) -> None:
        self.db.close()

    def commits(self, since: int = 0) -> list[dict]:
        """HEAD's first-parent line from position `since` on, oldest first, with each commit's profiles
        and check result."""
        return list(self.db.query(
            "select c.sha, c.seq, c.subject, c.author, c.date, c.parent, "
            "(select count(*) from profiles p where p.[commit] = c.sha) as profiles, "
            "k.result, k.base from commits c left join checks k on k.[commit] = c.sha where c.seq >= ? order by c.seq",
            [since]))

    def line_length(self) -> int:
        """How many commits HEAD's first-parent line has (positions 0 to this less one)."""
        return next(iter(self.db.query("select coalesce(max(seq) + 1, 0) as n from commits")))["n"]

    def commit_info(self, sha: str) -> dict | None:
        rows = list(self.db.query("select * from commits where sha = ?", [sha]))
        return rows[0] if rows else None

    def configurations(self) -> list[dict]:
        """Comparison keys (binary|workload|engine|machine|mode|plan|command) with a description of the plan and
        how many commits each has."""
        return list(self.db.query(
            "select config_key, workload, max(plan) as plan, count(distinct [commit]) as commits from functions "
            "where name = ? group by config_key order by workload, commits desc", [ROOT]))

    def timeline(self, config_key: str, names: Iterable[str], since: int = 0) -> dict[str, list[dict]]:
        """Per function: its summary on every commit of HEAD's line from position `since` on that has
        one, in commit order.  Read from the window's commits to their rows by the rows' key (commit,
        configuration, name): from the names, the query read the rows of every commit of the line (the
        overview's at 4,000 commits: 240 ms, 64 ms so)."""
        names = list(names)
        out: dict[str, list[dict]] = {n: [] for n in names}
        ids = self.text_ids([config_key, *names])
        known = [ids[n] for n in names if n in ids]
        if config_key not in ids or not known:
            return out
        for r in self.db.query(
                "select tn.text as name, c.sha as [commit], c.seq, c.subject, c.author, c.date, r.runs, r.total_ns, "
                "r.total_min, r.total_max, r.ci_low, r.ci_high, r.exclusive_ns from commits c "
                "cross join texts tc on tc.text = c.sha cross join functions_rows r on r.[commit] = tc.id "
                f"and r.config_key = ? and r.name in ({','.join('?' * len(known))}) join texts tn on tn.id = r.name "
                "where c.seq >= ? order by c.seq", [ids[config_key], *known, since]):
            out[r["name"]].append(r)
        return out

    def text_ids(self, texts: list[str]) -> dict[str, int]:
        """The ids of those texts the index holds (the compact tables' text columns, `views.index`)."""
        found = {}
        for i in range(0, len(texts), 500):
            part = texts[i:i + 500]
            found.update((r["text"], r["id"]) for r in self.db.query(
                f"select id, text from texts where text in ({','.join('?' * len(part))})", part))
        return found

    def profiled(self, name: str) -> bool:
        """Whether some profile holds function `name` (a name only a pulled check record gives, such
        as a forged one, has no page to link to)."""
        ids = self.text_ids([name])
        return name in ids and any(self.db.query("select 1 from functions_rows where name = ? limit 1", [ids[name]]))

    def top_functions(self, config_key: str, n: int) -> list[str]:
        """The functions with the most exclusive time in the configuration's newest commit."""
        latest = list(self.db.query(  # newest first along the line, each probe a primary-key lookup
            "select c.sha as [commit] from commits c where exists (select 1 from functions f where "
            "f.[commit] = c.sha and f.config_key = ? and f.name = ?) order by c.seq desc limit 1", [config_key, ROOT]))
        if not latest:
            return []
        return [r["name"] for r in self.db.query(
            "select name from functions where config_key = ? and [commit] = ? and name != ? "
            "order by exclusive_ns desc limit ?", [config_key, latest[0]["commit"], ROOT, n])]

    def workloads(self) -> list[dict]:
        """(workload, machine) pairs with how many commits have native run times and how many runs
        were left out as mostly probe time."""
        return list(self.db.query(
            "select workload, machine, sum(native_ns is not null) as commits, sum(runs) as runs, "
            "sum(left_out) as left_out from natives group by workload, machine order by workload, machine"))

    def native_timeline(self, workload: str, machine: str, since: int = 0) -> list[dict]:
        """A workload's native run time on every commit of HEAD's line from position `since` on that has
        one, in commit order (as `timeline` rows: total_ns is the native time)."""
        return list(self.db.query(
            "select n.[commit], c.seq, c.subject, c.author, c.date, n.runs, n.native_ns as total_ns, n.ci_low, "
            "n.ci_high, n.left_out, n.measured from natives n join commits c on c.sha = n.[commit] "
            "where n.workload = ? and n.machine = ? and n.native_ns is not null and c.seq >= ? order by c.seq",
            [workload, machine, since]))

    def paired_steps(self, workload: str, since: int = 0) -> list[dict]:
        """The workload's run time on each commit that a paired check measured beside its parent: the
        root's change there (relative, with its interval), in commit order (the overview chains them)."""
        return list(self.db.query(
            "select ch.[commit], c.seq, ch.relative, ch.ci_low, ch.ci_high from changes ch join commits c on "
            "c.sha = ch.[commit] join checks k on k.[commit] = ch.[commit] where ch.function = ? and ch.workload = ? "
            "and ch.method like 'paired rounds%' and k.base = c.parent and c.seq >= ? order by c.seq",
            [ROOT, workload, since]))

    def marks(self, workload: str, since: int = 0) -> list[dict]:
        """A workload's function verdicts (degradations, optimizations, accepted ones) with the verdict
        its check gave the workload as a whole (`result`; the timeline draws one marker a commit from
        it: a function slower inside a run that got faster is marked as the faster run it is)."""
        return list(self.db.query(
            "select ch.*, c.seq, v.result from changes ch join commits c on c.sha = ch.[commit] join verdicts v on "
            "v.[commit] = ch.[commit] and v.workload = ch.workload where ch.workload = ? and ch.type != 'no-change' "
            "and ch.type in ('degradation', 'optimization', 'accepted') and c.seq >= ? order by c.seq, ch.rank",
            [workload, since]))

    def check(self, sha: str) -> dict | None:
        """The check of a commit: verdict, base, warnings, workloads, and its changes in severity order."""
        rows = list(self.db.query("select data from checks where [commit] = ?", [sha]))
        if not rows:
            return None
        out = json.loads(rows[0]["data"])
        out["changes"] = list(self.db.query("select * from changes where [commit] = ? order by rank", [sha]))
        return out

    def functions(self, sha: str, limit: int | None = None) -> list[dict]:
        """The commit's functions, each workload's by exclusive time; with `limit`, the first `limit` of
        each workload and any function a check gave a verdict other than no-change."""
        if limit is None:
            return list(self.db.query("select * from functions where [commit] = ? order by workload, "
                                      "exclusive_ns desc", [sha]))
        return list(self.db.query(
            "select * from (select f.*, row_number() over (partition by f.workload order by f.exclusive_ns desc) "
            "as rk from functions f where f.[commit] = ?) where rk <= ? or name in (select function from changes "
            "where [commit] = ? and type != 'no-change') order by workload, exclusive_ns desc", [sha, limit, sha]))

    def function_count(self, sha: str) -> int:
        return next(iter(self.db.query("select count(*) as n from functions where [commit] = ?", [sha])))["n"]

    def profiles(self, sha: str) -> list[dict]:
        rows = list(self.db.query("select * from profiles where [commit] = ? order by workload, line_no", [sha]))
        for r in rows:
            r["metrics"] = json.loads(r["metrics"])
        return rows

    def function_history(self, name: str, since: int = 0) -> list[dict]:
        """One function on every commit (HEAD's line from position `since` on first, in order; commits off
        the line after)."""
        return list(self.db.query(
            "select f.*, c.seq, c.subject, c.author, c.date from functions f left join commits c on c.sha = f.[commit] "
            "where f.name = ? and (c.seq is null or c.seq >= ?) order by f.config_key, c.seq is null, c.seq",
            [name, since]))

    def function_series(self, name: str, since: int = 0) -> dict[tuple[str, str], dict[str, list[dict]]]:
        """(workload, machine) -> measure -> the function's rows along HEAD's line from position `since`
        on, in commit order."""
        out: dict[tuple[str, str], dict[str, list[dict]]] = {}
        for r in self.db.query(
                "select n.*, c.seq, c.subject, c.author, c.date from function_natives n join commits c on "
                "c.sha = n.[commit] where n.name = ? and c.seq >= ? order by n.workload, n.machine, n.kind, c.seq",
                [name, since]):
            out.setdefault((r["workload"], r["machine"]), {}).setdefault(r["kind"], []).append(r)
        return out

    def compared(self, commits: list[str]) -> dict[tuple[str, str], str]:
        """(commit, workload) -> the comparison key (session) the commit's check compared."""
        out = {}
        for i in range(0, len(commits), 500):
            part = commits[i:i + 500]
            for r in self.db.query(f"select [commit], data from checks where [commit] in ({','.join('?' * len(part))})",
                                   part):
                out.update({(r["commit"], w["workload"]): w["config_key"] for w in json.loads(r["data"])["workloads"]})
        return out

    def function_changes(self, name: str, notable: bool = False) -> list[dict]:
        """A function's changes in every check, newest first; `notable`: only its verdicts (not
        no-change: its page draws and lists those alone, and at 10,000 commits the rest were 10,000
        rows a page read and copied for nothing)."""
        verdicts = "and ch.type != 'no-change'" if notable else ""  # (a literal: sqlite then uses its partial index)
        return list(self.db.query(
            "select ch.*, c.seq, c.subject from changes ch left join commits c on c.sha = ch.[commit] "
            f"where ch.function = ? {verdicts} order by c.seq desc", [name]))

    def regressions(self) -> list[dict]:
        """Every degradation (and accepted one) of a workload its check called degraded (or accepted),
        newest first: the stored verdicts' list, as `check` and the hook read them."""
        return list(self.db.query(
            "select ch.*, c.seq, c.subject, c.author, c.date from changes ch left join commits c on c.sha = ch.[commit] "
            "join verdicts v on v.[commit] = ch.[commit] and v.workload = ch.workload "
            "where ch.type != 'no-change' and ch.type in ('degradation', 'accepted') "
            "and v.result in ('degradation', 'accepted') "
            "order by c.seq is null, c.seq desc, ch.rank"))

    def function_names(self, limit: int | None = None) -> list[str]:
        """Every function's name; with `limit`, those a commit page shows (`functions(sha, limit)`)."""
        if limit is None:
            return [r["name"] for r in self.db.query("select distinct name from functions order by name")]
        return [r["name"] for r in self.db.query(
            "select name from (select name, row_number() over (partition by [commit], workload order by exclusive_ns "
            "desc) as rk from functions) where rk <= ? union select function from changes c where type != 'no-change' "
            # (a name only a check record gives has no page: `profiled`)
            "and exists (select 1 from functions f where f.name = c.function) order by name", [limit])]

    def bad_lines(self, sha: str) -> int:
        rows = list(self.db.query("select bad_lines from notes where [commit] = ?", [sha]))
        return rows[0]["bad_lines"] if rows else 0

    def noted_commits(self) -> list[str]:
        """Commits whose note holds something (profiles, or lines that could not be read)."""
        return [r["commit"] for r in self.db.query(
            "select n.[commit] from notes n where n.bad_lines > 0 or exists "
            "(select 1 from profiles p where p.[commit] = n.[commit])")]

    def resolve(self, prefix: str) -> str | None:
        """A full commit id from a unique prefix of 4+ hex digits among indexed commits."""
        if not (4 <= len(prefix) <= 40) or any(ch not in "0123456789abcdef" for ch in prefix.lower()):
            return None
        rows = list(self.db.query(
            "select sha from commits where sha like ? union select [commit] from notes where [commit] like ? limit 2",
            [prefix.lower() + "%", prefix.lower() + "%"]))
        return rows[0]["sha"] if len(rows) == 1 else None


    def diff_traced(self, sha: str) -> list[str]:
        """The functions the plans of a commit's profiles name as changed by its diff."""
        return sorted({n for r in self.db.query("select changed from profiles where [commit] = ?", [sha])
                       for n in json.loads(r["changed"] or "[]")})

    def subject(self, sha: str) -> str:
        rows = list(self.db.query("select subject from notes where [commit] = ?", [sha]))
        return rows[0]["subject"] if rows else ""

    def stacks(self, sha: str) -> dict[str, dict[str, int]]:
        """Workload -> folded stack -> samples of the commit's profiles (empty without stack samples)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.db.query("select workload, stack, samples from stacks where [commit] = ?", [sha]):
            out.setdefault(r["workload"], {})[r["stack"]] = r["samples"]
        return out

    def newest_series(self, name: str) -> tuple[str, list[tuple[int, int]]] | None:
        """The newest commit (HEAD's line first) whose profiles kept a series of `name`'s calls, and it."""
        rows = list(self.db.query(
            "select s.[commit], s.series from series s left join commits c on c.sha = s.[commit] where s.name = ? "
            "order by c.seq is null, c.seq desc limit 1", [name]))
        return (rows[0]["commit"], [tuple(x) for x in json.loads(rows[0]["series"])]) if rows else None
