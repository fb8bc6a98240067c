"""The dashboard's index (ARCHITECTURE.md §11): an sqlite database under `.git/perf/`, derived from the
notes and never the source of truth.  Delete it and `update` rebuilds it.

What it holds, per commit that carries a note, is what the pages draw: a summary of every function
per comparison key (`core.model.comparison_key`: the configuration and the probing mode; the
center of the runs, their range and the center's 95% interval),
the profiles' metrics, and the result of `git perf check` with every function's change.  The first-parent line of HEAD gives the commits' order.

Updates are incremental: the index remembers each note's blob id, re-reads only notes whose id
changed, and re-checks those commits plus the few later ones whose baseline or history they are.
One process at a time updates (a lock file beside the database); pages read through `IndexQuery`, one
connection per request, while an update writes (WAL).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator

import pygit2
import sqlite_utils

from gitperf import checks
from gitperf.core import stacks
from gitperf.core.config import CheckConfig
from gitperf.core.model import ROOT, Mode, Profile, StoredProfile
from gitperf.core.progress import Progress, silent
from gitperf.git.repo import ANCESTORS, first_parent, perf_dir
from gitperf.stats import accuracy, inference
from gitperf.store.notes import NOTES_REF, BadLine, NotesStore

SCHEMA = 12  # bump when the tables change: an index of another schema is rebuilt from scratch


@dataclass(frozen=True)
class UpdateStats:
    notes: int  # commits with a note
    read: int  # notes (re)read this time
    removed: int
    checked: int  # commits whose check was (re)computed
    seconds: float
    rebuilt: bool


class CachingStore(NotesStore):
    """A read-only view of the notes that decodes each commit's note once (a check reads its
    baseline and ten predecessors; the index checks every commit)."""

    def __init__(self, repo: pygit2.Repository, note_ids: dict[str, str] | None = None):
        super().__init__(repo)
        self._read: dict[str, tuple[list[StoredProfile], list[BadLine]]] = {}
        self._text: dict[str, str] = {}
        self._line: dict[str, list[str]] = {}
        self._ids = note_ids or {}  # commit -> its note's blob, when the caller has listed them already

    def ancestors(self, commit: str) -> list[str]:
        """A commit's are its parent's after the parent: one step when the parent's are known (a
        walk per check read 377,751 commits to check 1,000, 4 s of the index's build)."""
        if commit not in self._line:
            obj = self.repo.get(commit)
            parent = str(obj.parent_ids[0]) if isinstance(obj, pygit2.Commit) and obj.parent_ids else None
            if parent in self._line:
                self._line[commit] = [parent] + self._line[parent][:ANCESTORS - 1]
            else:
                self._line[commit] = super().ancestors(commit)
        return self._line[commit]

    def note_text(self, commit: str) -> str:
        if commit not in self._text:
            # (the blob read at once: a note looked up by its commit costs 0.8 ms, the blob 0.25 ms)
            blob = self._ids.get(commit) and self.repo.get(self._ids[commit])
            self._text[commit] = (blob.data.decode("utf-8", "replace") if isinstance(blob, pygit2.Blob)
                                  else super().note_text(commit))
        return self._text[commit]

    def read(self, commit: str):
        if commit not in self._read:
            self._read[commit] = super().read(commit)
        return self._read[commit]


def index_path(repo: pygit2.Repository) -> Path:
    """`.git/perf/index.db`; when that is not writable (collection ran as root, the dashboard runs as
    you) an index per repository under ~/.cache/git-perf/ instead: the dashboard never needs root."""
    try:
        d = perf_dir(repo)
        if os.access(d, os.W_OK) and (not (d / "index.db").exists() or os.access(d / "index.db", os.W_OK)):
            return d / "index.db"
    except OSError:
        pass
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "git-perf"
    cache.mkdir(parents=True, exist_ok=True)
    return cache / f"index-{hashlib.sha256(repo.path.encode()).hexdigest()[:16]}.db"


def _note_ids(repo: pygit2.Repository) -> dict[str, str]:
    try:
        return {str(n.annotated_id): str(n.id) for n in repo.notes(NOTES_REF)}
    except (KeyError, pygit2.GitError):
        return {}


def _first_parent_line(repo: pygit2.Repository) -> list[pygit2.Commit]:
    """HEAD's first-parent line, oldest first."""
    if repo.head_is_unborn:
        return []
    return list(first_parent(repo, str(repo.head.target)))[::-1]


def _summaries(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """One row per (comparison key, function): center of the runs' totals and their range.  Profiles
    of different modes are different series: an estimate is never averaged with an exact total."""
    groups = checks.group(profiles)
    rows = []
    for key, ps in groups.items():
        names: dict[str, list] = {}
        for p in ps:
            for f in p.profile.functions:
                names.setdefault(f.name, []).append(f)
        for name, fs in names.items():
            totals = [float(f.total_ns) for f in fs]
            lo, hi = inference.center_interval(totals)
            rows.append({
                "commit": commit, "config_key": key, "workload": ps[0].profile.header.workload, "name": name,
                "plan": ps[0].profile.plan.describe(),
                "runs": len(fs), "count": inference.center([f.count for f in fs]), "total_ns": inference.center(totals),
                "total_min": min(totals), "total_max": max(totals), "ci_low": lo, "ci_high": hi,
                "exclusive_ns": inference.center([float(f.exclusive_ns) for f in fs]),
                "sampled": int(any(f.sampled for f in fs)),
                "location": next((f.location for f in fs if f.location), ""),
            })
    return rows


def _profile_row(p: StoredProfile, siblings: list[StoredProfile]) -> dict:
    """One profile; a cheaper one (sampled, hybrid, ...) with a full trace of the same configuration
    on the same commit also gets its accuracy against it (time shares, accuracy.py)."""
    h = p.profile.header
    metrics = {**p.profile.metrics.as_dict(), "accuracy": None}
    full = next((s.profile for s in siblings if s.profile.config_key == h.config_key and s.profile.plan.mode == Mode.TRACE
                 and not s.profile.plan.methods and not s.profile.header.partial), None)
    if full is not None and (p.profile.plan.mode != Mode.TRACE or p.profile.plan.methods):
        metrics["accuracy"] = accuracy.compare(accuracy.shares(full.functions), accuracy.shares(p.profile.functions))
    return {"id": p.id, "commit": p.commit, "line_no": p.line_no, "workload": h.workload, "config_key": h.config_key,
            "engine": h.engine, "mode": p.profile.plan.mode, "pipeline": p.profile.plan.pipeline,
            "partial": h.partial, "started": h.started, "functions": len(p.profile.functions),
            "metrics": json.dumps(metrics), "changed": json.dumps(list(p.profile.plan.changed))}


def _first_line(c: pygit2.Commit) -> str:
    return c.message.splitlines()[0] if c.message else ""


def _config_digest(cfg: CheckConfig) -> str:
    return hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode()).hexdigest()[:16]


MIN_SERIES = 10  # sampled calls a function's series needs for the function page's models


def _series_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per function, the first series of sampled calls long enough to fit models to (the function
    page draws the newest commit's)."""
    out: dict[str, dict] = {}
    for p in profiles:
        for f in p.profile.functions:
            if f.name not in out and len(f.series) >= MIN_SERIES and len({o for o, _ in f.series}) >= 3:
                out[f.name] = {"commit": commit, "name": f.name, "series": json.dumps(f.series)}
    return list(out.values())


# A run's calibrated probe and sample time is taken out of its wall time up to this share of it.  Wider
# than a function's CORRECTABLE_SHARE: every run of a workload on one machine is corrected with the same
# calibration, so its error moves the points of a timeline together (the demo's 5 ms `gate` runs of
# paired checks, stack-sampled at ~25 kHz, are 31-45% calibrated probe and sample time; a full trace of
# its `small` workload 95%).
TIMELINE_SHARE = 0.5


def native_run_s(p: Profile) -> float | None:
    """A run's time at native speed: its wall time less its waits for a CPU (`Metrics.WAIT`: another
    process's turn on a busy machine) and the calibrated time of its probes and samples
    (`Metrics.predicted_overhead_s`), comparable across probe plans.  None when that is not a
    correction but most of the run (a full trace of nanosecond functions: more than TIMELINE_SHARE
    of it), or unknown (bursty runs, a crash)."""
    m = p.metrics
    if not p.complete or m.PRT <= 0 or p.plan.mode == Mode.BURSTY:
        return None
    probes = m.predicted_overhead_s
    if probes <= 0 and p.plan.mode != Mode.STACK:
        return None  # probed, but not calibrated: the probes' share is not known
    return m.PRT - m.WAIT - probes if probes <= TIMELINE_SHARE * m.PRT else None


def _native_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per workload and machine: the native run time of all its runs on the commit, whatever plan
    measured them (the overview's one timeline per workload), and how many runs were left out."""
    by: dict[tuple[str, str], list[float | None]] = {}
    for sp in profiles:
        h = sp.profile.header
        if sp.profile.complete:  # (a crashed run measures another amount of work: not a point at all)
            by.setdefault((h.workload, h.machine), []).append(native_run_s(sp.profile))
    rows = []
    for (wl, machine), values in sorted(by.items()):
        ok = [v * 1e9 for v in values if v is not None]
        lo, hi = inference.center_interval(ok) if ok else (None, None)
        rows.append({"commit": commit, "workload": wl, "machine": machine, "runs": len(ok),
                     "left_out": len(values) - len(ok), "native_ns": inference.center(ok) if ok else None,
                     "ci_low": lo, "ci_high": hi})
    return rows


TRACED, SAMPLED = "inclusive at native speed (traced)", "own time (stack samples)"


def _function_native_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per workload, machine and function: its time in the measure comparable across plans that each
    run gives -- traced: inclusive time less the calibrated probe time (when that is at most
    CORRECTABLE_SHARE of it); stack-sampled: its own time, the samples' share of the run -- one row per
    kind, the center of the runs with its interval (the function page's series)."""
    by: dict[tuple[str, str, str, str], list[float]] = {}
    for sp in profiles:
        if not sp.profile.complete:
            continue
        h = sp.profile.header
        for f in sp.profile.functions:
            if f.sampled:
                by.setdefault((h.workload, h.machine, f.name, SAMPLED), []).append(float(f.total_ns))
            elif f.count and f.correctable:
                by.setdefault((h.workload, h.machine, f.name, TRACED), []).append(float(f.native_ns))
    rows = []
    for (wl, machine, name, kind), values in by.items():
        lo, hi = inference.center_interval(values)
        rows.append({"commit": commit, "workload": wl, "machine": machine, "name": name, "kind": kind,
                     "runs": len(values), "total_ns": inference.center(values), "ci_low": lo, "ci_high": hi})
    return rows


def _stack_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per workload, the call stacks of all its profiles on the commit summed (the flame graphs),
    bounded again: rounds of a paired check each keep their own top stacks."""
    return [{"commit": commit, "workload": wl, "stack": s, "samples": n}
            for wl, st in stacks.per_workload(p.profile for p in profiles).items()
            for s, n in stacks.bound(st, limit=2 * stacks.MAX_STACKS).items()]


def _connect(path: Path) -> sqlite_utils.Database:
    # a reader waits for a writer's commit instead of failing at once (WAL: only checkpoints block)
    return sqlite_utils.Database(sqlite3.connect(str(path), timeout=60))


# The three tables with a row per function and commit are most of the index: each is stored as
# `<name>_rows`, its text columns (commit, workload, function, and strings repeated on every row such as
# a change's method) as integer ids of `texts`, clustered by its key (WITHOUT ROWID: a key stored once,
# not again in an index), nanoseconds whole (sqlite stores a whole REAL in 1-6 bytes, not 8); a view
# with the table's own name and columns is what queries read.  1,000 commits x 200 functions
# (bench/dashboard.py): 191.8 MiB with text columns and rowids, 44.9 MiB so (ARCHITECTURE.md §11).
_FUNCTIONS = {
    "columns": {"commit": str, "config_key": str, "workload": str, "name": str, "plan": str, "runs": int,
                "count": float, "total_ns": float, "total_min": float, "total_max": float, "ci_low": float,
                "ci_high": float, "exclusive_ns": float, "sampled": int, "location": str},
    "key": ("commit", "config_key", "name"), "by": [("name",)],
    "ns": ("total_ns", "total_min", "total_max", "ci_low", "ci_high", "exclusive_ns")}
_FUNCTION_NATIVES = {
    "columns": {"commit": str, "workload": str, "machine": str, "name": str, "kind": str, "runs": int,
                "total_ns": float, "ci_low": float, "ci_high": float},
    "key": ("commit", "workload", "machine", "name", "kind"), "by": [("name",)], "ns": ("total_ns", "ci_low", "ci_high")}
_CHANGES = {
    "columns": {"commit": str, "workload": str, "function": str, "type": str, "relative": float, "ci_low": float,
                "ci_high": float, "confidence": float, "absolute_ns": float, "base_ns": float, "target_ns": float,
                "exclusive_delta_ns": float, "method": str, "noise": str, "changed": int, "since": str,
                "location": str, "measure": str, "rank": int, "instr_base": float, "instr_target": float,
                "share": float},
    "key": ("commit", "workload", "function"), "by": [("function",), ("type",)],
    # (most rows are no-change, which no query looks up by type: a query names `type != 'no-change'`
    # for sqlite to use the index)
    "where": {"type": "[type] != 'no-change'"},
    "ns": ("absolute_ns", "base_ns", "target_ns", "exclusive_delta_ns"),
    "plain": ("type",)}  # (as text: the regressions page and the timeline's marks find rows by it in its index)
_COMPACT = {"functions": _FUNCTIONS, "function_natives": _FUNCTION_NATIVES, "changes": _CHANGES}
for _t in _COMPACT.values():
    _t["text"] = tuple(c for c, typ in _t["columns"].items() if typ is str and c not in _t.get("plain", ()))


def _whole(v: float | None) -> float | int | None:
    return round(v) if v is not None and math.isfinite(v) else v


def _create_compact(db: sqlite_utils.Database, name: str, t: dict) -> None:
    cols = ", ".join(f"[{c}] {'TEXT' if c in t.get('plain', ()) else 'INTEGER' if typ in (str, int) else 'REAL'}"
                     for c, typ in t["columns"].items())
    db.execute(f"create table [{name}_rows] ({cols}, primary key ({', '.join(f'[{c}]' for c in t['key'])})) "
               "without rowid")
    for by in t["by"]:
        where = t.get("where", {}).get(by[0])
        db.execute(f"create index [{name}_by_{'_'.join(by)}] on [{name}_rows] ({', '.join(f'[{c}]' for c in by)})"
                   + (f" where {where}" if where else ""))
    shown = ", ".join(f"[t_{c}].text as [{c}]" if c in t["text"] else f"r.[{c}]" for c in t["columns"])
    # inner joins for the key's columns (never null): `name in (...)` then starts from texts' index
    joins = " ".join(f"{'join' if c in t['key'] else 'left join'} texts [t_{c}] on [t_{c}].id = r.[{c}]"
                     for c in t["text"])
    db.execute(f"create view [{name}] as select {shown} from [{name}_rows] r {joins}")


class IndexQuery:
    """Read-only queries over the index: what the pages and the API read (they never touch the notes).
    One per request (`web.db.get_index`); `close()` when done."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.db = _connect(self.path)

    def close(self) -> None:
        self.db.close()

    def commits(self) -> list[dict]:
        """HEAD's first-parent line, oldest first, with each commit's profiles and check result."""
        return list(self.db.query(
            "select c.sha, c.seq, c.subject, c.author, c.date, c.parent, "
            "(select count(*) from profiles p where p.[commit] = c.sha) as profiles, "
            "k.result, k.base from commits c left join checks k on k.[commit] = c.sha order by c.seq"))

    def commit_info(self, sha: str) -> dict | None:
        rows = list(self.db.query("select * from commits where sha = ?", [sha]))
        return rows[0] if rows else None

    def configurations(self) -> list[dict]:
        """Comparison keys (binary|workload|engine|machine|mode|plan) with a description of the plan and
        how many commits each has."""
        return list(self.db.query(
            "select config_key, workload, max(plan) as plan, count(distinct [commit]) as commits from functions "
            "where name = ? group by config_key order by workload, commits desc", [ROOT]))

    def timeline(self, config_key: str, names: Iterable[str]) -> dict[str, list[dict]]:
        """Per function: its summary on every commit of HEAD's line that has one, in commit order."""
        names = list(names)
        if not names:
            return {}
        rows = self.db.query(
            "select f.name, f.[commit], c.seq, c.subject, c.author, c.date, f.runs, f.total_ns, f.total_min, "
            "f.total_max, f.ci_low, f.ci_high, f.exclusive_ns from functions f join commits c on c.sha = f.[commit] "
            f"where f.config_key = ? and f.name in ({','.join('?' * len(names))}) order by c.seq",
            [config_key, *names])
        out: dict[str, list[dict]] = {n: [] for n in names}
        for r in rows:
            out[r["name"]].append(r)
        return out

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

    def native_timeline(self, workload: str, machine: str) -> list[dict]:
        """A workload's native run time on every commit of HEAD's line that has one, in commit order
        (as `timeline` rows: total_ns is the native time)."""
        return list(self.db.query(
            "select n.[commit], c.seq, c.subject, c.author, c.date, n.runs, n.native_ns as total_ns, n.ci_low, "
            "n.ci_high from natives n join commits c on c.sha = n.[commit] where n.workload = ? and n.machine = ? "
            "and n.native_ns is not null order by c.seq", [workload, machine]))

    def marks(self, workload: str) -> list[dict]:
        """A workload's function verdicts (degradations, optimizations, accepted ones) with the verdict
        its check gave the workload as a whole (`result`; the timeline draws one marker a commit from
        it: a function slower inside a run that got faster is marked as the faster run it is)."""
        return list(self.db.query(
            "select ch.*, c.seq, v.result from changes ch join commits c on c.sha = ch.[commit] join verdicts v on "
            "v.[commit] = ch.[commit] and v.workload = ch.workload where ch.workload = ? and ch.type != 'no-change' "
            "and ch.type in ('degradation', 'optimization', 'accepted') order by c.seq, ch.rank", [workload]))

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

    def function_history(self, name: str) -> list[dict]:
        """One function on every commit (HEAD's line first, in order; other commits after)."""
        return list(self.db.query(
            "select f.*, c.seq, c.subject, c.author, c.date from functions f left join commits c on c.sha = f.[commit] "
            "where f.name = ? order by f.config_key, c.seq is null, c.seq", [name]))

    def function_series(self, name: str) -> dict[tuple[str, str], dict[str, list[dict]]]:
        """(workload, machine) -> measure -> the function's rows along HEAD's line, in commit order."""
        out: dict[tuple[str, str], dict[str, list[dict]]] = {}
        for r in self.db.query(
                "select n.*, c.seq, c.subject, c.author, c.date from function_natives n join commits c on "
                "c.sha = n.[commit] where n.name = ? order by n.workload, n.machine, n.kind, c.seq", [name]):
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

    def function_changes(self, name: str) -> list[dict]:
        return list(self.db.query(
            "select ch.*, c.seq, c.subject from changes ch left join commits c on c.sha = ch.[commit] "
            "where ch.function = ? order by c.seq desc", [name]))

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
            "desc) as rk from functions) where rk <= ? union select function from changes where type != 'no-change' "
            "order by name", [limit])]

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


@contextmanager
def _update_lock(path: Path) -> Iterator[None]:
    """One updater at a time, across processes (serve's threads, an export, a second serve)."""
    with open(f"{path}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass(frozen=True)
class _Pending:
    """What an update has to do, from the notes' ids and HEAD against what the index last saw."""

    current: dict[str, str]  # commit -> note blob id
    changed: list[str]
    removed: list[str]
    head: str
    new_head: bool
    recheck_all: bool
    rebuild: bool

    @property
    def nothing(self) -> bool:
        return not (self.changed or self.removed or self.new_head or self.recheck_all or self.rebuild)


class Index(IndexQuery):
    """The sqlite index of one repository: `update()` brings it up to date with the notes."""

    def __init__(self, repo: pygit2.Repository, cfg: CheckConfig, path: Path | None = None):
        self.repo = repo
        self.cfg = cfg
        self._texts: dict[str, int] | None = None  # text -> id in `texts`, while an update runs
        super().__init__(Path(path) if path else index_path(repo))

    def _discard(self) -> None:
        self.db.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        self.db = _connect(self.path)

    def _meta(self) -> dict[str, str]:
        if "meta" not in self.db.table_names():
            return {}
        return {r["key"]: r["value"] for r in self.db["meta"].rows}

    def _create(self) -> None:
        for v in self.db.view_names():
            self.db[v].drop()
        for t in self.db.table_names():
            self.db[t].drop()
        db = self.db
        db.enable_wal()  # pages keep reading while an update writes
        db["meta"].create({"key": str, "value": str}, pk="key")
        db["texts"].create({"id": int, "text": str}, pk="id")
        db["texts"].create_index(["text"], unique=True)
        db["notes"].create({"commit": str, "oid": str, "bad_lines": int, "subject": str}, pk="commit")
        db["commits"].create({"sha": str, "seq": int, "subject": str, "author": str, "date": int, "parent": str},
                             pk="sha")
        db["profiles"].create({"id": str, "commit": str, "line_no": int, "workload": str, "config_key": str,
                               "engine": str, "mode": str, "pipeline": str, "partial": str, "started": float,
                               "functions": int, "metrics": str, "changed": str}, pk="id")
        # config_key here is the comparison key (core.model.comparison_key): one series per plan
        _create_compact(db, "functions", _FUNCTIONS)
        db["series"].create({"commit": str, "name": str, "series": str}, pk=("commit", "name"))
        db["stacks"].create({"commit": str, "workload": str, "stack": str, "samples": int},
                            pk=("commit", "workload", "stack"))
        _create_compact(db, "function_natives", _FUNCTION_NATIVES)
        db["natives"].create({"commit": str, "workload": str, "machine": str, "runs": int, "left_out": int,
                              "native_ns": float, "ci_low": float, "ci_high": float},
                             pk=("commit", "workload", "machine"))
        db["checks"].create({"commit": str, "base": str, "result": str, "data": str}, pk="commit")
        # each workload's verdict by the check's own rule (`checks.result_of`): the timeline's one marker
        db["verdicts"].create({"commit": str, "workload": str, "result": str}, pk=("commit", "workload"))
        _create_compact(db, "changes", _CHANGES)
        db["profiles"].create_index(["commit"])
        db["series"].create_index(["name"])

    def _pending(self, rebuild: bool, say: Progress, repair: bool = True) -> _Pending:
        try:
            meta = self._meta()
        except sqlite3.DatabaseError as e:  # the index is derived: a damaged one is replaced, not repaired
            if not repair:  # (only under the update lock: other requests may be reading it)
                raise
            say(f"index {self.path} is unreadable ({e}): rebuilding it from the notes")
            self._discard()
            meta = {}
        rebuild = rebuild or meta.get("schema") != str(SCHEMA)
        known = {} if rebuild else {r["commit"]: r["oid"] for r in self.db["notes"].rows}
        current = _note_ids(self.repo)
        head = str(self.repo.head.target) if not self.repo.head_is_unborn else ""
        return _Pending(current, [c for c, oid in current.items() if known.get(c) != oid],
                        [c for c in known if c not in current], head, rebuild or head != meta.get("head"),
                        not rebuild and meta.get("check_config") != _config_digest(self.cfg), rebuild)

    def stale(self) -> bool:
        """Whether the notes or HEAD moved since the last update (cheap: note ids, no note read)."""
        try:
            return not self._pending(False, silent, repair=False).nothing
        except sqlite3.DatabaseError:
            return True  # damaged: `update` replaces it, under the lock

    def update(self, rebuild: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the index up to date with the notes (and HEAD's line); `rebuild` starts from scratch.
        Under the update lock, so concurrent callers wait and then find nothing left to do."""
        t0 = time.perf_counter()
        say = progress or silent
        with _update_lock(self.path):
            todo = self._pending(rebuild, say)
            if todo.nothing:
                return UpdateStats(len(todo.current), 0, 0, 0, time.perf_counter() - t0, False)
            if todo.rebuild:  # a new file: tables dropped in place would leave the old one's size
                self._discard()
                self._create()
            checked = self._apply(todo, say)
            if todo.rebuild:  # pages left part-full by the inserts: 56.0 -> 44.9 MiB in 0.25 s (bench/dashboard.py)
                self.db.execute("vacuum")
        return UpdateStats(len(todo.current), len(todo.changed), len(todo.removed), checked,
                           time.perf_counter() - t0, todo.rebuild)

    def _apply(self, todo: _Pending, say: Progress) -> int:
        """One transaction: readers see the index before or after, never half.  Returns the number of
        commits checked."""
        store = CachingStore(self.repo, todo.current)
        line = _first_parent_line(self.repo)
        self._texts = None  # (read again: another process may have updated the index since)
        with self.db.conn:
            if todo.new_head:
                self._insert_line(line)
            for c in todo.removed + todo.changed:
                for t in ("notes", "profiles", "series", "stacks", "natives", "checks", "verdicts"):
                    self.db.execute(f"delete from {t} where [commit] = ?", [c])
                for t in _COMPACT:
                    self.db.execute(f"delete from [{t}_rows] where [commit] = (select id from texts where text = ?)", [c])
            orphans = set()
            for i, c in enumerate(todo.changed):
                if len(todo.changed) > 50 and i % 100 == 0:
                    say(f"reading notes: {i}/{len(todo.changed)}")
                if not self._insert_note(c, todo.current[c], store):
                    orphans.add(c)
            if orphans:
                say(f"warning: {len(orphans)} note(s) on objects that are not commits of this repository (an amended "
                    f"and collected commit, or notes pulled for a branch not fetched), e.g. {min(orphans)[:12]}: skipped")
            to_check = set(todo.current) if todo.recheck_all else self._affected(todo.changed + todo.removed, line,
                                                                                set(todo.current))
            # (only the commits to check are looked up: an update after one new note checks a dozen, not all)
            to_check = {c for c in to_check if c in todo.current and c not in orphans
                        and isinstance(self.repo.get(c), pygit2.Commit)}
            seq = {str(c.id): i for i, c in enumerate(line)}  # oldest first: a parent's ancestors serve its child
            for i, c in enumerate(sorted(to_check, key=lambda c: (seq.get(c, len(seq)), c))):
                if len(to_check) > 50 and i % 100 == 0:
                    say(f"checking commits: {i}/{len(to_check)}")
                self._store_check(c, checks.check(store, c, replace(self.cfg, votes=False)))
            self._insert("meta", [{"key": "schema", "value": str(SCHEMA)}, {"key": "head", "value": todo.head},
                                  {"key": "check_config", "value": _config_digest(self.cfg)}])
        return len(to_check)

    def _insert_line(self, line: list[pygit2.Commit]) -> None:
        self.db.execute("delete from commits")
        self._insert("commits", [
            {"sha": str(c.id), "seq": i, "subject": _first_line(c), "author": c.author.name, "date": c.commit_time,
             "parent": str(c.parents[0].id) if c.parents else ""} for i, c in enumerate(line)])

    def _insert_note(self, c: str, oid: str, store: NotesStore) -> bool:
        """One note's rows; False (and only the note's id, so that it is not read again) when it is on
        an object that is not a commit of this repository."""
        commit = self.repo.get(c)
        if not isinstance(commit, pygit2.Commit):
            self._insert("notes", [{"commit": c, "oid": oid, "bad_lines": 0, "subject": ""}])
            return False
        good, bad = store.read(c)
        self._insert("notes", [{"commit": c, "oid": oid, "bad_lines": len(bad), "subject": _first_line(commit)}])
        self._insert("profiles", [_profile_row(p, good) for p in good])
        self._insert_compact("functions", _summaries(c, good))
        self._insert("series", _series_rows(c, good))
        self._insert("stacks", _stack_rows(c, good))
        self._insert("natives", _native_rows(c, good))
        self._insert_compact("function_natives", _function_native_rows(c, good))
        return True

    def _insert(self, table: str, rows: list[dict]) -> None:
        """INSERT OR REPLACE inside the caller's transaction (sqlite-utils' insert_all commits each
        batch itself, and converts every value: 3x slower for the index's ~10^5 rows)."""
        if rows:
            cols = list(rows[0])
            self.db.conn.executemany(
                f"insert or replace into [{table}] ({', '.join(f'[{c}]' for c in cols)}) "
                f"values ({', '.join('?' * len(cols))})", [tuple(r[c] for c in cols) for r in rows])

    def _insert_compact(self, table: str, rows: list[dict]) -> None:
        """Rows of a `_COMPACT` table: its text columns as ids of `texts`, its nanoseconds whole."""
        if not rows:
            return
        texts, ns = _COMPACT[table]["text"], _COMPACT[table]["ns"]
        ids = self._text_ids()
        new = {r[c] for r in rows for c in texts if r[c] is not None and r[c] not in ids}
        if new:
            start = len(ids) + 1
            self.db.conn.executemany("insert into texts (id, text) values (?, ?)", enumerate(sorted(new), start))
            ids.update((t, i) for i, t in enumerate(sorted(new), start))
        cols = list(rows[0])
        conv = [(lambda v: None if v is None else ids[v]) if c in texts else
                _whole if c in ns else None for c in cols]
        self.db.conn.executemany(
            f"insert or replace into [{table}_rows] ({', '.join(f'[{c}]' for c in cols)}) "
            f"values ({', '.join('?' * len(cols))})",
            [tuple(v if f is None else f(v) for f, v in zip(conv, (r[c] for c in cols))) for r in rows])

    def _text_ids(self) -> dict[str, int]:
        if self._texts is None:
            self._texts = {r[1]: r[0] for r in self.db.conn.execute("select id, text from texts")}
        return self._texts

    def _affected(self, touched: list[str], line: list[pygit2.Commit], noted: set[str]) -> set[str]:
        """The touched commits and, on HEAD's line, the next `history + 1` noted commits after each:
        their baseline or history may be a touched commit."""
        out = set(touched)
        order = [str(c.id) for c in line if str(c.id) in noted or str(c.id) in out]
        pos = {c: i for i, c in enumerate(order)}
        for c in touched:
            if c in pos:
                out.update(order[pos[c] + 1: pos[c] + 2 + self.cfg.history])
        return out

    def _store_check(self, commit: str, r: checks.CheckResult) -> None:
        """The check's verdict and every function's change (no-change included: the commit page's
        table shows each function's change vs the baseline with its interval)."""
        data = {"result": r.result, "base": r.base, "warnings": list(r.warnings),
                "workloads": [p.to_dict() for p in r.pairs]}
        self._insert("checks", [{"commit": commit, "base": r.base or "", "result": r.result, "data": json.dumps(data)}])
        self._insert("verdicts", [{"commit": commit, "workload": p.workload,
                                   "result": checks.result_of([p], [c for c in r.changes if c.workload == p.workload])}
                                  for p in r.pairs])
        self._insert_compact("changes", [_change_row(commit, i, c.to_dict()) for i, c in enumerate(r.changes)])

CHANGE_COLUMNS = ("workload", "function", "type", "relative", "ci_low", "ci_high", "confidence", "absolute_ns",
                  "base_ns", "target_ns", "exclusive_delta_ns", "method", "noise", "location", "measure", "share")


def _change_row(commit: str, rank: int, d: dict) -> dict:
    """A `Change.to_dict()` as a row of the changes table (the columns the pages query)."""
    instr = d.get("instructions") or (None, None)
    return {"commit": commit, **{k: d[k] for k in CHANGE_COLUMNS}, "changed": int(d["changed"]),
            "since": d["since"] or "", "rank": rank, "instr_base": instr[0], "instr_target": instr[1]}
