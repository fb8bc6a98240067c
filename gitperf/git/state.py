"""Machine-local state (ARCHITECTURE.md §4, "Local state"): everything git perf keeps besides the notes,
in one place -- where each thing lives and how it is locked.

Under the repository's `.git/perf/` (`perf_dir`: shared by all its worktrees; what git perf writes
there as root is handed back to the repository's owner, `core.owner.give_back`):

| path | what | written by | lock (`locked`) |
|---|---|---|---|
| `notes.lock` | the notes' writers | `store.notes` | exclusive, waiting up to a minute (`NOTES_WAIT`) |
| `builds/KEY/`, `builds/KEY.lock` | kept builds | `git.buildcache` | exclusive to make or drop one, shared while in use; eviction skips one in use |
| `build-HASH.lock` | one build of a work tree at a time | `git.worktree` | exclusive |
| `pads.json`, `probe-pad-bin*/`, `ccache/` | which padding each compiler links with, the padded build's compiler shims and cache | `git.pad`, `git.worktree` | none: written whole, renamed into place |
| `callgraph-*.json`, `callgraph-rev-*.txt` | call graphs by build id, and commits' aliases | `analysis.callgraph` | none: written whole, renamed into place |
| `index.db`, `index.db.lock` | the dashboard's index | `views.index` | exclusive for an update; readers take sqlite's own |

In the user's own cache (`user_cache`): the probe calibration, per machine and kernel
(`engine.calibrate`), and the index of a repository whose `.git/perf/` the user cannot write.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

import pygit2

from gitperf.core.errors import GitPerfError
from gitperf.git.repo import common_dir

NOTES_WAIT = 60.0  # seconds a notes writer waits for another before it gives up


class Held(GitPerfError):
    """Another process holds a lock for longer than this one waits."""


def perf_dir(repo: pygit2.Repository) -> Path:
    """Machine-local state (`.git/perf/`), shared by all worktrees of the repository."""
    d = common_dir(repo) / "perf"
    d.mkdir(parents=True, exist_ok=True)
    return d


def user_cache() -> Path:
    """The user's own machine-local state (not a repository's): `$GITPERF_CACHE`, else
    `$XDG_CACHE_HOME/git-perf`, else `~/.cache/git-perf`."""
    if os.environ.get("GITPERF_CACHE"):
        return Path(os.environ["GITPERF_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "git-perf"


def notes_lock(repo: pygit2.Repository) -> Path:
    return perf_dir(repo) / "notes.lock"


def build_lock(perf: Path, root: Path) -> Path:
    """The lock of builds in the work tree `root`."""
    return perf / f"build-{hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]}.lock"


KEPT = "builds"  # .git/perf/builds/KEY/tree: worktrees of finished builds kept for reuse (git.buildcache)


def kept_builds(perf: Path) -> Path:
    return perf / KEPT


def kept_lock(perf: Path, key: str) -> Path:
    return kept_builds(perf) / f"{key}.lock"


def pad_shims(perf: Path, align: int = 0) -> Path:
    """The padded build's compiler shims: one directory per script text (`git.worktree`)."""
    return perf / ("probe-pad-bin" + (f"-align{align}" if align else ""))


def ccache(perf: Path) -> Path:
    return perf / "ccache"


def pads_cache(perf: Path) -> Path:
    """Which padding each compiler links with (`git.pad.usable`)."""
    return perf / "pads.json"


def callgraph_file(perf: Path, build_id: str) -> Path:
    return Path(perf) / f"callgraph-{build_id.replace(':', '-')}.json"


def callgraph_alias(perf: Path, alias: str) -> Path:
    """Which build id a commit's binary (`alias`: commit and binary name) was analysed as."""
    return Path(perf) / f"callgraph-rev-{alias.replace('/', '_')}.txt"


class Lock:
    """A held lock (`locked`): exclusive, or shared; an exclusive one can be shared from now on."""

    def __init__(self, fh: IO[str]):
        self._fh = fh

    def share(self) -> None:
        """Let others take the lock shared too (an exclusive holder that has finished changing things)."""
        fcntl.flock(self._fh, fcntl.LOCK_SH)


@contextmanager
def locked(path: Path, shared: bool = False, wait: float | None = None) -> Iterator[Lock]:
    """`path` locked (flock) for as long as the context lasts: exclusive or `shared`; waiting as long as
    it takes (`wait` None), else up to `wait` seconds (0: not at all) before raising `Held`."""
    kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with open(path, "a") as fh:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fh, kind | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Held(f"another git perf holds {path} for over {wait:.0f}s") from None
                time.sleep(0.01)
        try:
            yield Lock(fh)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
