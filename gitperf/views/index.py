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

This module keeps the schema and the update; the rows come from `views.index_rows` (for many commits
through `views.index_build`'s workers), the queries from `views.index_query`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import pygit2
import sqlite_utils

from gitperf.core.config import CheckConfig
from gitperf.core.progress import Progress, silent
from gitperf.git.repo import first_parent
from gitperf.git.state import locked, perf_dir, user_cache
from gitperf.store.notes import NOTES_REF
from gitperf.views import index_build as build
from gitperf.views import index_rows as rows
from gitperf.views.index_query import IndexQuery, connect

SCHEMA = 20  # bump when the tables, their keys or what a row says change (20: a change's words): rebuilt from scratch


@dataclass(frozen=True)
class UpdateStats:
    notes: int  # commits with a note
    read: int  # notes (re)read this time
    removed: int
    checked: int  # commits whose check was (re)computed
    seconds: float
    rebuilt: bool


def index_path(repo: pygit2.Repository) -> Path:
    """`.git/perf/index.db`; when that is not writable (collection ran as root, the dashboard runs as
    you) an index per repository in the user's cache (`git.state.user_cache`) instead: the dashboard never
    needs root."""
    try:
        d = perf_dir(repo)
        if os.access(d, os.W_OK) and (not (d / "index.db").exists() or os.access(d / "index.db", os.W_OK)):
            return d / "index.db"
    except OSError:
        pass
    cache = user_cache()
    cache.mkdir(parents=True, exist_ok=True)
    return cache / f"index-{hashlib.sha256(repo.path.encode()).hexdigest()[:16]}.db"


def _note_ids(repo: pygit2.Repository) -> dict[str, str]:
    try:
        return {str(n.annotated_id): str(n.id) for n in repo.notes(NOTES_REF)}
    except (KeyError, pygit2.GitError):
        return {}


def _notes_tip(repo: pygit2.Repository) -> str:
    """The notes ref's commit ("" with no notes): every note written, amended or removed moves it."""
    try:
        ref = repo.references.get(NOTES_REF)
        return str(ref.resolve().target) if ref is not None else ""
    except (KeyError, pygit2.GitError):
        return ""


def _first_parent_line(repo: pygit2.Repository) -> list[pygit2.Commit]:
    """HEAD's first-parent line, oldest first."""
    if repo.head_is_unborn:
        return []
    return list(first_parent(repo, str(repo.head.target)))[::-1]


def _config_digest(cfg: CheckConfig) -> str:
    return hashlib.sha256(json.dumps(asdict(cfg), sort_keys=True).encode()).hexdigest()[:16]


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
                "exclusive_delta_ns": float, "method": str, "words": str, "noise": str, "changed": int, "since": str,
                "location": str, "measure": str, "rank": int, "instr_base": float, "instr_target": float,
                "share": float, "decided": str},
    "key": ("commit", "workload", "function"), "by": [("function",), ("type",)],
    # (most rows are no-change, which no query looks up by type: a query names `type != 'no-change'`
    # for sqlite to use the index)
    "where": {"type": "[type] != 'no-change'"},
    "ns": ("absolute_ns", "base_ns", "target_ns", "exclusive_delta_ns"),
    # as text in the row: `type`, which the regressions page and the timeline's marks find rows by in its
    # index; `words`, an unresolved change's own figures, which no other row repeats
    "plain": ("type", "words"),
    # what the view shows as `method`: the method's stem (shared by a check's rows), then its words.
    # Interned whole, 23,487 of 59,800 changes' methods were texts of their own, 9.4 of the index's
    # 24.7 MB with their unique index (300 commits of bench/dashboard.py's history)
    "tails": {"method": "words"}}
_COMPACT = {"functions": _FUNCTIONS, "function_natives": _FUNCTION_NATIVES, "changes": _CHANGES}
for _t in _COMPACT.values():
    _t["text"] = tuple(c for c, typ in _t["columns"].items() if typ is str and c not in _t.get("plain", ()))


def _create_compact(db: sqlite_utils.Database, name: str, t: dict) -> None:
    cols = ", ".join(f"[{c}] {'TEXT' if c in t.get('plain', ()) else 'INTEGER' if typ in (str, int) else 'REAL'}"
                     for c, typ in t["columns"].items())
    db.execute(f"create table [{name}_rows] ({cols}, primary key ({', '.join(f'[{c}]' for c in t['key'])})) "
               "without rowid")
    tails = t.get("tails", {})
    shown = ", ".join(_shown(c, t["text"], tails.get(c)) for c in t["columns"] if c not in tails.values())
    # inner joins for the key's columns (never null): `name in (...)` then starts from texts' index
    joins = " ".join(f"{'join' if c in t['key'] else 'left join'} texts [t_{c}] on [t_{c}].id = r.[{c}]"
                     for c in t["text"])
    db.execute(f"create view [{name}] as select {shown} from [{name}_rows] r {joins}")


def _shown(c: str, texts: tuple[str, ...], tail: str | None) -> str:
    """A column of a compact table's view: its text where it is stored as an id, and its tail's text
    after it ("; " between) where the row has one."""
    value = f"[t_{c}].text" if c in texts else f"r.[{c}]"
    return f"{value} || coalesce('; ' || r.[{tail}], '') as [{c}]" if tail else f"{value} as [{c}]"


def _create_indexes(db: sqlite_utils.Database) -> None:
    """The tables' secondary indexes.  A rebuild adds them after its rows: sorted once, not kept in
    order row by row (bench/dashboard.py's 1,000 commits: the inserts took 2.9 s with them, 2.2 s
    without, and adding them after 0.14 s)."""
    for name, t in _COMPACT.items():
        for by in t["by"]:
            where = t.get("where", {}).get(by[0])
            db.execute(f"create index if not exists [{name}_by_{'_'.join(by)}] on [{name}_rows] "
                       f"({', '.join(f'[{c}]' for c in by)})" + (f" where {where}" if where else ""))
    db.execute("create index if not exists [profiles_by_commit] on [profiles] ([commit])")
    db.execute("create index if not exists [commits_by_seq] on [commits] ([seq])")  # (a page's window of the line)
    db.execute("create index if not exists [series_by_name] on [series] ([name])")


@contextmanager
def _update_lock(path: Path) -> Iterator[None]:
    """One updater at a time, across processes (serve's threads, an export, a second serve)."""
    with locked(Path(f"{path}.lock")):
        yield


@dataclass(frozen=True)
class _Pending:
    """What an update has to do, from the notes' ids and HEAD against what the index last saw."""

    current: dict[str, str]  # commit -> note blob id
    tip: str  # the notes ref's commit when `current` was listed (`_notes_tip`)
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
        self.db = connect(self.path)

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
                              "native_ns": float, "ci_low": float, "ci_high": float, "measured": str},
                             pk=("commit", "workload", "machine"))
        db["checks"].create({"commit": str, "base": str, "result": str, "data": str}, pk="commit")
        # each workload's verdict by the check's own rule (`checks.result_of`): the timeline's one marker
        db["verdicts"].create({"commit": str, "workload": str, "result": str}, pk=("commit", "workload"))
        _create_compact(db, "changes", _CHANGES)

    def _pending(self, rebuild: bool, say: Progress) -> _Pending:
        """(Under the update lock: a damaged index is replaced here, while other requests may read it.)"""
        try:
            meta = self._meta()
        except sqlite3.DatabaseError as e:  # the index is derived: a damaged one is replaced, not repaired
            say(f"index {self.path} is unreadable ({e}): rebuilding it from the notes")
            self._discard()
            meta = {}
        rebuild = rebuild or meta.get("schema") != str(SCHEMA)
        known = {} if rebuild else {r["commit"]: r["oid"] for r in self.db["notes"].rows}
        tip = _notes_tip(self.repo)  # (before the notes are listed: a note written meanwhile moves it again)
        current = _note_ids(self.repo)
        head = self._head()
        return _Pending(current, tip, [c for c, oid in current.items() if known.get(c) != oid],
                        [c for c in known if c not in current], head, rebuild or head != meta.get("head"),
                        not rebuild and meta.get("check_config") != _config_digest(self.cfg), rebuild)

    def _head(self) -> str:
        return str(self.repo.head.target) if not self.repo.head_is_unborn else ""

    def _recorded(self, head: str, tip: str) -> list[dict]:
        """What `stale` compares: the meta rows of an index up to date with HEAD `head` and the notes
        ref's commit `tip`."""
        return [{"key": "schema", "value": str(SCHEMA)}, {"key": "head", "value": head},
                {"key": "check_config", "value": _config_digest(self.cfg)}, {"key": "notes_tip", "value": tip}]

    def stale(self) -> bool:
        """Whether the notes or HEAD moved since the last update: the notes ref's commit, HEAD, the schema
        and the check's configuration against what the update recorded.  Every page asks; listing the
        notes instead cost each ~25 ms at 10,000 commits (their ids, and the index's rows of them)."""
        try:
            meta = self._meta()
        except sqlite3.DatabaseError:
            return True  # damaged: `update` replaces it, under the lock
        return any(meta.get(r["key"]) != r["value"] for r in self._recorded(self._head(), _notes_tip(self.repo)))

    def update(self, rebuild: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the index up to date with the notes (and HEAD's line); `rebuild` starts from scratch.
        Under the update lock, so concurrent callers wait and then find nothing left to do."""
        t0 = time.perf_counter()
        say = progress or silent
        with _update_lock(self.path):
            todo = self._pending(rebuild, say)
            if todo.nothing:
                # (the notes ref moved with the same notes -- a note written again as it was -- or the
                # index predates `notes_tip`: recorded, so that `stale` stops asking)
                with self.db.conn:
                    self._insert("meta", self._recorded(todo.head, todo.tip))
                return UpdateStats(len(todo.current), 0, 0, 0, time.perf_counter() - t0, False)
            if todo.rebuild:  # a new file: tables dropped in place would leave the old one's size
                self._discard()
                self._create()
            with build.few_collections():
                checked = self._apply(todo, say)
            if todo.rebuild:  # pages left part-full by the inserts: 45.9 -> 44.4 MiB in 0.3 s (bench/dashboard.py)
                self.db.execute("vacuum")
        return UpdateStats(len(todo.current), len(todo.changed), len(todo.removed), checked,
                           time.perf_counter() - t0, todo.rebuild)

    def _apply(self, todo: _Pending, say: Progress) -> int:
        """One transaction: readers see the index before or after, never half.  Returns the number of
        commits checked."""
        line = _first_parent_line(self.repo)
        self._texts = None  # (read again: another process may have updated the index since)
        with self.db.conn:
            if todo.new_head:
                self._insert_line(line)
            for c in [] if todo.rebuild else todo.removed + todo.changed:  # (a rebuild's tables are new)
                for t in ("notes", "profiles", "series", "stacks", "natives", "checks", "verdicts"):
                    self.db.execute(f"delete from {t} where [commit] = ?", [c])
                for t in _COMPACT:
                    self.db.execute(f"delete from [{t}_rows] where [commit] = (select id from texts where text = ?)", [c])
            orphans = {c for c in todo.changed if not isinstance(self.repo.get(c), pygit2.Commit)}
            # (only the note's id, so that it is not read again)
            self._insert("notes", [{"commit": c, "oid": todo.current[c], "bad_lines": 0, "subject": ""} for c in orphans])
            if orphans:
                say(f"warning: {len(orphans)} note(s) on objects that are not commits of this repository (an amended "
                    f"and collected commit, or notes pulled for a branch not fetched), e.g. {min(orphans)[:12]}: skipped")
            to_check = set(todo.current) if todo.recheck_all else self._affected(todo.changed + todo.removed, line,
                                                                                set(todo.current))
            # (only the commits to check are looked up: an update after one new note checks a dozen, not all)
            to_check = {c for c in to_check if c in todo.current and c not in orphans
                        and isinstance(self.repo.get(c), pygit2.Commit)}
            changed = set(todo.changed) - orphans
            # oldest first: a commit's note is read once, for its rows, its check and the checks of the
            # commits after it that it is history to, and a parent's ancestors serve its child
            seq = {str(c.id): i for i, c in enumerate(line)}
            order = sorted(changed | to_check, key=lambda c: (seq.get(c, len(seq)), c))
            jobs = [build.Job(c, todo.current[c] if c in changed else None, c in to_check) for c in order]
            source = build.Source(self.repo.path, todo.current, self.cfg,
                                  {t: spec["ns"] for t, spec in _COMPACT.items()})
            for part in build.derive(source, jobs, say):
                for table, (cols, columns) in part.tables.items():
                    self._insert_columns(table, cols, columns)
            if todo.rebuild:  # (in the transaction: an index is never left without them)
                _create_indexes(self.db)
            self._insert("meta", self._recorded(todo.head, todo.tip))
        return len(to_check)

    def _insert_line(self, line: list[pygit2.Commit]) -> None:
        self.db.execute("delete from commits")
        self._insert("commits", [
            {"sha": str(c.id), "seq": i, "subject": rows.first_line(c), "author": c.author.name, "date": c.commit_time,
             "parent": str(c.parents[0].id) if c.parents else ""} for i, c in enumerate(line)])

    def _insert(self, table: str, dicts: list[dict]) -> None:
        rows = build.Rows()
        rows.add(table, dicts)
        for cols, columns in rows.tables.values():
            self._insert_columns(table, cols, columns)

    def _insert_columns(self, table: str, cols: tuple[str, ...], columns: list[list]) -> None:
        """INSERT OR REPLACE inside the caller's transaction (sqlite-utils' insert_all commits each
        batch itself, and converts every value: 3x slower for the index's ~10^5 rows).  A `_COMPACT`
        table's text columns are stored as ids of `texts` (its nanoseconds come whole: build.Rows)."""
        if table in _COMPACT:
            texts = _COMPACT[table]["text"]
            ids = self._text_ids([columns[i] for i, c in enumerate(cols) if c in texts])
            columns = [list(map(ids.get, col)) if c in texts else col  # (None, not a text, stays None)
                       for c, col in zip(cols, columns)]
            table = f"{table}_rows"
        self.db.conn.executemany(f"insert or replace into [{table}] ({', '.join(f'[{c}]' for c in cols)}) "
                                 f"values ({', '.join('?' * len(cols))})", zip(*columns))

    def _text_ids(self, columns: list[list]) -> dict[str, int]:
        """Every text's id in `texts`, those of `columns` added."""
        if self._texts is None:
            self._texts = {r[1]: r[0] for r in self.db.conn.execute("select id, text from texts")}
        ids = self._texts
        # (in the order met: a new commit's rows then go after the last one's, in the tables clustered by commit)
        new = [v for v in dict.fromkeys(itertools.chain.from_iterable(columns)) if v is not None and v not in ids]
        if new:
            start = len(ids) + 1
            self.db.conn.executemany("insert into texts (id, text) values (?, ?)", enumerate(new, start))
            ids.update((t, i) for i, t in enumerate(new, start))
        return ids

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
