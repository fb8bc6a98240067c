"""The rows of many commits for the dashboard's index (ARCHITECTURE.md §11), derived on every CPU.

Each commit's rows are pure work on a read-only view of the notes: reading its note and deriving its
rows (`index_rows.note_rows`), checking it against its baseline and history (`index_rows.check_rows`).
A full build does that for every commit, so worker processes each take a run of consecutive commits
(a check reads the notes just before it: a run's own, but for its first few) and send back its rows as
columns of tuples, and the one process that writes the database (`views.index`) inserts them.  A
small update (a new note: a dozen commits to check) stays in the calling process: a spawned worker
takes ~0.5 s to start (its imports).
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import operator
import os
import signal
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import pygit2

from gitperf.core.config import CheckConfig
from gitperf.core.errors import GitPerfError
from gitperf.core.proc import die_with_parent
from gitperf.core.progress import Progress
from gitperf.store.caching import CachingStore
from gitperf.views import index_rows as rows
from gitperf.views.index_rows import Columns

PARALLEL_FROM = 100  # commits: fewer are derived in the calling process (a worker's start is ~25 commits' work)
# Beyond ~8 workers the writer is the bottleneck (1,000 commits: ~2 s of its inserts against ~16 s of
# the workers' CPU), and each worker holds ~120 MB of its own (bench/dashboard.py)
MAX_WORKERS = 8
RUN = 100  # commits at most in a run: progress is told after each
MIN_RUN = 20  # commits at least in a run of a worker (its first check reads `history` notes before it)


@dataclass(frozen=True)
class Source:
    """What rows are derived from: a repository's notes (commit -> the note's blob), the check's
    configuration, and the columns of each table that are nanoseconds (stored whole)."""

    path: str
    note_ids: dict[str, str]
    cfg: CheckConfig
    whole: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class Job:
    """One commit to derive: its note's rows when `oid` (the note's blob) is given, its check's when
    `check`."""

    commit: str
    oid: str | None
    check: bool


@dataclass
class Rows:
    """Rows of any number of commits, per table: its columns' names and values, a list per column (a
    column converts in one pass: nanoseconds here, texts to ids in the writer)."""

    tables: dict[str, tuple[tuple[str, ...], list[list]]] = field(default_factory=dict)
    commits: int = 0

    def add(self, table: str, given: list[dict] | Columns, whole: tuple[str, ...] = ()) -> None:
        """Rows of one table, as dicts or as columns; the columns in `whole` (nanoseconds) rounded to integers."""
        if not given:
            return
        columns = isinstance(given, Columns)
        cols = tuple(given if columns else given[0])
        have = self.tables.setdefault(table, (cols, [[] for _ in cols]))
        assert have[0] == cols, (table, have[0], cols)
        values = given.values() if columns else zip(*map(operator.itemgetter(*cols), given))
        for c, mine, col in zip(cols, have[1], values):
            mine.extend(_whole(col) if c in whole else col)


def _whole(column) -> list:
    """Nanoseconds rounded to integers; None, NaN and infinities kept as they are (most columns have
    none of them: the plain `round` of each first, at 60% of the cost)."""
    try:
        return list(map(round, column))
    except (TypeError, ValueError, OverflowError):  # (None; NaN; an infinity)
        return [round(v) if v is not None and math.isfinite(v) else v for v in column]


class _Deriver:
    """Derives runs of commits from one repository's notes, keeping the last few notes it read."""

    def __init__(self, source: Source):
        # (the last few dozen commits' notes: a check reads its baseline and `history` before it)
        self.store = CachingStore(pygit2.Repository(source.path), source.note_ids,
                                  keep=max(64, 4 * (source.cfg.history + 2)))
        self.cfg, self.whole = source.cfg, source.whole

    def __call__(self, jobs: list[Job]) -> Rows:
        out = Rows(commits=len(jobs))
        with _unverified_reads():
            self._derive(jobs, out)
        return out

    def _derive(self, jobs: list[Job], out: Rows) -> None:
        for job in jobs:
            derived = {}
            if job.oid is not None:
                derived |= rows.note_rows(self.store, job.commit, job.oid)
            if job.check:
                derived |= rows.check_rows(self.store, job.commit, self.cfg)
            for table, dicts in derived.items():
                out.add(table, dicts, self.whole.get(table, ()))


@contextmanager
def _unverified_reads() -> Iterator[None]:
    """libgit2 without hashing every object it reads again (`enable_strict_hash_verification`, on by
    default; git's own readers leave it to `git fsck`): a deriver only reads, and a damaged note still
    fails zlib's checksum and its line's own (`core.codec`).  The SHA-1 of each note and tree read was
    1.3% of a commit's instructions (`bench/indexcost.py`).  A process-wide option, back at libgit2's
    default after (git perf sets it nowhere else)."""
    pygit2.settings.enable_strict_hash_verification(False)
    try:
        yield
    finally:
        pygit2.settings.enable_strict_hash_verification(True)


def derive(source: Source, jobs: list[Job], say: Progress) -> Iterator[Rows]:
    """The rows of `jobs` (oldest first), in runs of consecutive commits, in any order."""
    workers = min(cpus(), MAX_WORKERS, len(jobs) // (PARALLEL_FROM // 4))  # (each a quarter of PARALLEL_FROM at least)
    if len(jobs) < PARALLEL_FROM or workers < 2:
        yield from _told(map(_Deriver(source), _runs(jobs, RUN)), len(jobs), say)
        return
    runs = _guided(jobs, workers)
    with ProcessPoolExecutor(workers, mp_context=_context(), initializer=_start, initargs=(source,)) as pool:
        try:
            done = as_completed([pool.submit(_derive_run, run) for run in runs])
            yield from _told((f.result() for f in done), len(jobs), say)
        except BrokenProcessPool as e:  # (a worker killed: the OOM killer, a `kill`)
            raise GitPerfError("a process deriving the index's rows was killed (out of memory?); the index was not "
                               "updated (it is derived from the notes: nothing is lost): run the command again") from e
        except BaseException:  # Ctrl-C, SIGTERM, an error: the workers end now (the writer's transaction rolls back)
            _terminate(pool)
            raise


def _terminate(pool: ProcessPoolExecutor) -> None:
    """End a pool's workers at once rather than after the runs they hold (seconds): `terminate_workers`
    from Python 3.14, its processes before."""
    if hasattr(pool, "terminate_workers"):
        pool.terminate_workers()
        return
    workers = list((getattr(pool, "_processes", None) or {}).values())  # (before shutdown forgets them)
    for p in workers:
        p.terminate()
    for p in workers:
        p.join(5)
    pool.shutdown(wait=False, cancel_futures=True)


def _runs(jobs: list[Job], size: int) -> list[list[Job]]:
    return [jobs[i:i + size] for i in range(0, len(jobs), size)]


def _guided(jobs: list[Job], workers: int) -> list[list[Job]]:
    """Runs that shrink towards the end (OpenMP's "guided" schedule): each a share of what is left,
    so that the workers finish together rather than one idling while another ends a long run; each at
    least MIN_RUN commits, as the first few of a run read the notes before it again."""
    out, i = [], 0
    while i < len(jobs):
        size = max(MIN_RUN, min(RUN, (len(jobs) - i) // (2 * workers)))
        out.append(jobs[i:i + size])
        i += size
    return out


def cpus() -> int:
    """The CPUs this process may run on (a container's or `taskset`'s share, not the machine's)."""
    return len(os.sched_getaffinity(0))


def _told(parts: Iterator[Rows], total: int, say: Progress) -> Iterator[Rows]:
    done = 0
    for part in parts:
        done += part.commits
        if total > 50:
            say(f"indexing commits: {done}/{total}")
        yield part


def _context() -> multiprocessing.context.BaseContext:
    """Workers forked where this process runs one thread (the CLI: they start at once, nothing
    imported again), spawned from a threaded one (the dashboard updates its index in a request's
    thread, and a fork copies the locks other threads hold in whatever state they are; a spawned
    worker imports the program's main module again, so a script that updates an index runs it under
    `if __name__ == "__main__"`, as multiprocessing asks)."""
    return multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")


_DERIVER: _Deriver | None = None  # a worker's own


# Python's cycle collector seldom while the index is built.  A build allocates millions of small objects
# that live to its end (decoded profiles, rows, changes) and hold no cycles; each of the 54 full
# collections of a 1,000-commit build walked all of them: 4.5 s of its 24.3 s (the same build with the
# collector off: 20.3 s, `bench/dashboard.py`'s history).  The writer's and each worker's thresholds.
FEW_COLLECTIONS = (100_000, 50, 1_000)


@contextmanager
def few_collections() -> Iterator[None]:
    """The collector at FEW_COLLECTIONS while the writer builds, as it was after."""
    before = gc.get_threshold()
    gc.set_threshold(*FEW_COLLECTIONS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _start(source: Source) -> None:
    global _DERIVER
    # Ctrl-C is the writer's to handle (it drops the runs not started); a forked worker has the CLI's
    # SIGTERM handler, and a writer killed outright leaves its workers waiting for runs: both end them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(signal.SIGKILL)
    gc.set_threshold(*FEW_COLLECTIONS)
    _DERIVER = _Deriver(source)


def _derive_run(jobs: list[Job]) -> Rows:
    assert _DERIVER is not None
    return _DERIVER(jobs)
