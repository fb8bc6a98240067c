"""Builds kept for the next check (issue #38, ARCHITECTURE.md §6a).

`check --collect` builds both sides from scratch in fresh worktrees (`git.worktree.run_build`); on a
real project that was half of a check (ninja: two 16 s CMake builds; a 30-file C++ project: 60 s of
a 130 s check), and checking the same pair again, or the next commit against this one, built it all
again.  Here the worktree of a finished build stays under `.git/perf/builds/KEY/`, and a later build
asking for the same KEY runs nothing: KEY is the commit, the build configuration as the check uses it
(command, binary, padding, alignment), every compiler on PATH (path, size, modification time) and
the environment a build reads (`ENV`).  Anything else differing is another key, never a reuse (a
build once reused without the padding made every function "changed").

A build that did not finish (failed, interrupted, killed) has no `built.json` and is never reused;
the next build of its key starts from a fresh worktree.  A finished one is reused only while it is
what its commit builds (`damage`): its tree clean at the commit, and the binary and the project's own
libraries the files it recorded (size and SHA-256).  An edited tree rebuilt by hand was once reused
and its verdict stored over the right one (issue #59); anything else, or `--rebuild`, is built again
from a fresh worktree with one line saying why.  A kept build is used under a shared lock, so the
`KEEP` most recently used survive and an older one is removed only when nobody holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Iterator

import pygit2

from gitperf.core.config import BuildConfig
from gitperf.core.errors import BuildError
from gitperf.git import pad
from gitperf.git.state import Held, kept_builds, kept_lock, locked
from gitperf.git.worktree import COMPILERS, Built

KEEP = 6  # kept builds: both sides of three checks (ninja's: ~60 MB each)
# what a build reads besides its tree: make's and CMake's usual variables (a CFLAGS exported for one
# check must not reach the next through a kept build)
ENV = ("PATH", "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LIBS", "MAKEFLAGS", "CMAKE_GENERATOR",
       "CMAKE_BUILD_TYPE", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH")
DONE = "built.json"


def key(commit: str, build: BuildConfig, env: dict[str, str] | None = None) -> str:
    """What a reused build must share with the one that made it."""
    env = os.environ if env is None else env
    compilers = []
    for name in COMPILERS:
        real = shutil.which(name, path=env.get("PATH", os.defpath))
        if real:
            st = os.stat(real)
            compilers.append(f"{name}={os.path.realpath(real)}|{st.st_size}|{st.st_mtime_ns}")
    # (the wrappers' own flags too: a build kept by a git perf that added others is not this one's)
    flags = f"{pad.always(build.align_functions)} {pad.MAPPED_TREE}" if build.probe_pad else ""
    parts = [commit, build.command, build.binary, f"pad={build.probe_pad}", f"align={build.align_functions}",
             f"flags={flags}", *compilers, *(f"{k}={env.get(k, '')}" for k in ENV)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


@dataclass
class Slot:
    """A kept build's place: `root` holds the commit's tree; `built` is what its finished build
    said (None: not built yet — build at `root`, then `finish`); `dropped`: why the build kept under
    this key was not reused ("" = there was none, or it was)."""

    root: Path
    built: Built | None
    done: Path
    dropped: str = ""

    def finish(self, built: Built, outputs: list[Path] = ()) -> None:
        """Record the finished build with what it made that a collection runs (`outputs`: the binary
        and the project's own libraries; unreadable ones are left out, and a build recording none is
        never reused, `damage`)."""
        made = {}
        for path in outputs:
            with suppress(OSError, ValueError):
                made[str(path.relative_to(self.root))] = fingerprint(path)
        built = replace(built, outputs=made)
        tmp = self.done.with_suffix(f".{os.getpid()}")
        tmp.write_text(json.dumps(asdict(built)))
        tmp.replace(self.done)  # atomic: a killed writer leaves no half file that reads as done
        self.built = built


def _git(repo: pygit2.Repository, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo.workdir or repo.path, capture_output=True, text=True)


def _remove(repo: pygit2.Repository, place: Path) -> None:
    tree = place / "tree"
    if tree.exists():
        _git(repo, "worktree", "remove", "--force", str(tree))
    shutil.rmtree(place, ignore_errors=True)
    _git(repo, "worktree", "prune")


def _read(done: Path) -> Built | None:
    try:
        d = json.loads(done.read_text())
        outputs = d.get("outputs", {})
        return Built(pad=str(d.get("pad", "")), note=str(d.get("note", "")),
                     outputs={str(k): str(v) for k, v in outputs.items()})
    except (OSError, ValueError, AttributeError):
        return None  # absent or damaged: built again


def fingerprint(path: Path) -> str:
    """A build output as `Built.outputs` records it: "size:sha256" (a 10 MB binary hashes in ~10 ms)."""
    with open(path, "rb") as fh:
        return f"{os.fstat(fh.fileno()).st_size}:{hashlib.file_digest(fh, 'sha256').hexdigest()}"


def damage(tree: Path, commit: str, built: Built) -> str:
    """Why a kept build is not what `commit` builds ("" = it is): its tree moved or edited, an output
    it recorded gone or changed, or no record of its outputs (kept by an earlier version)."""
    if not built.outputs:
        return "it has no record of its binary (kept by an earlier git perf)"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, capture_output=True, text=True)
    if head.returncode != 0 or head.stdout.strip() != commit:
        return "its worktree is gone or at another commit"
    edited = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=tree,
                            capture_output=True, text=True).stdout.splitlines()
    if edited:
        return f"its tree was edited ({', '.join(ln[3:] for ln in edited[:3])}{', ...' if len(edited) > 3 else ''})"
    for rel, recorded in built.outputs.items():
        path = tree / rel
        try:
            now = fingerprint(path)
        except OSError:
            return f"{rel} is gone"
        if now != recorded:
            was, size = recorded.split(":")[0], now.split(":")[0]
            return f"{rel} changed since it was built ({f'{was} -> {size} bytes' if was != size else 'other bytes'})"
    return ""


@contextmanager
def slot(repo: pygit2.Repository, commit: str, key: str, cache_dir: Path, rebuild: bool = False) -> Iterator[Slot]:
    """The kept build of `key` (a worktree of `commit`), held for as long as the context lasts; a
    damaged one (`damage`), or any when `rebuild`, is dropped and its slot built again."""
    builds = kept_builds(cache_dir)
    place = builds / key
    builds.mkdir(parents=True, exist_ok=True)
    with locked(kept_lock(cache_dir, key)) as lock:
        done = place / DONE
        built, dropped = _read(done), ""
        if built is not None:
            dropped = "--rebuild asked for a new build" if rebuild else damage(place / "tree", commit, built)
            built = None if dropped else built
        if built is None:
            _remove(repo, place)  # a build that did not finish
            place.mkdir(parents=True)
            r = _git(repo, "worktree", "add", "--detach", "-q", str(place / "tree"), commit)
            if r.returncode != 0:
                shutil.rmtree(place, ignore_errors=True)
                raise BuildError(f"cannot check out {commit[:12]} into {place}: {r.stderr.strip()}")
        else:
            os.utime(done)  # most recently used
        s = Slot(place / "tree", built, done, dropped)
        ok = False
        try:
            if built is not None:
                lock.share()  # others may use it too; nobody removes it
            yield s
            ok = True
        finally:
            if s.built is None and not ok:
                _remove(repo, place)  # a failed or interrupted build: nothing to keep
    evict(repo, cache_dir)


def evict(repo: pygit2.Repository, cache_dir: Path, keep: int = KEEP) -> list[str]:
    """Remove all but the `keep` most recently used finished builds (and unfinished ones), skipping
    any in use.  Returns the keys removed."""
    builds = kept_builds(cache_dir)
    if not builds.is_dir():
        return []
    places = [p for p in builds.iterdir() if p.is_dir()]
    used = {p: (p / DONE).stat().st_mtime if (p / DONE).exists() else 0.0 for p in places}
    removed = []
    for place in sorted(places, key=used.get, reverse=True)[keep:]:
        with suppress(Held), locked(kept_lock(cache_dir, place.name), wait=0):
            _remove(repo, place)
            removed.append(place.name)
    return removed
