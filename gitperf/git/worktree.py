"""Getting a binary for a revision: the work tree itself when REV is the clean checked-out HEAD,
otherwise a temporary `git worktree` that is removed afterwards (the user's tree is never touched)."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pygit2

from gitperf.core import scratch
from gitperf.core.config import BuildConfig
from gitperf.core.errors import BuildError
from gitperf.core.owner import Owner
from gitperf.core.proc import alive, in_child, keep_tail, signals_held
from gitperf.git import pad
from gitperf.git.state import KEPT, build_lock, ccache, locked, pad_shims


def is_clean_head(repo: pygit2.Repository, commit: str) -> bool:
    if repo.is_bare or repo.head_is_unborn or str(repo.head.target) != commit:
        return False
    flags = pygit2.GIT_STATUS_IGNORED | pygit2.GIT_STATUS_WT_NEW  # untracked files do not change a build
    return all(f & flags for f in repo.status().values())


def sweep_leftovers(repo: pygit2.Repository) -> list[str]:
    """Remove what collections that died without cleaning up (SIGKILL, a power cut) left: this
    repository's temporary worktrees (gitperf-wt-PID-XXXX/<commit>) whose owning process is gone,
    then every scratch directory of a process that is gone (`core.scratch.sweep`).  Returns their paths."""
    cwd = repo.workdir or repo.path
    r = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=cwd, capture_output=True, text=True)
    swept = []
    for line in r.stdout.splitlines():
        path = Path(line[len("worktree "):]) if line.startswith("worktree ") else None
        pid = scratch.owning_pid(path.parent, "wt") if path else None
        if pid is not None and not alive(pid):
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=cwd, capture_output=True)
            shutil.rmtree(path.parent, ignore_errors=True)
            swept.append(str(path))
    if swept:
        subprocess.run(["git", "worktree", "prune"], cwd=cwd, capture_output=True)
    return swept + scratch.sweep()


@contextmanager
def checkout(repo: pygit2.Repository, commit: str, fresh: bool = False) -> Iterator[Path]:
    """A directory holding `commit`'s tree: the work tree when it is clean at that commit (and not
    `fresh`: its build products were made with whatever flags the user's last build had)."""
    if not fresh and is_clean_head(repo, commit):
        yield Path(repo.workdir)
        return
    tmp = scratch.make("wt")
    target = tmp / commit[:12]
    cwd = repo.workdir or repo.path
    r = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(target), commit], cwd=cwd,
                       capture_output=True, text=True)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(f"cannot check out {commit[:12]} into a temporary worktree: {r.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(target)], cwd=cwd, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=cwd, capture_output=True)


COMPILERS = ("cc", "gcc", "c++", "g++", "clang", "clang++")


@dataclass(frozen=True)
class Built:
    """How a build went: the padding each wrapped compiler used (`pad.describe`, "" = unpadded), and
    what the user should know of it ("" = nothing)."""

    pad: str = ""
    note: str = ""
    # what the build made that a collection runs, by path relative to the tree: "size:sha256" each
    # (the binary and the project's own libraries): a kept build is reused only while they are these
    outputs: dict[str, str] = field(default_factory=dict)


def probe_pad_path(lock_dir: Path, align: int = 0) -> tuple[str, dict[str, pad.Pad]]:
    """A PATH whose first directory wraps every compiler found on ours so that it compiles with the
    padding it links with (`pad.choose`) and `align` (`pad.always`), and those paddings.  Wrappers rather than CFLAGS: a
    makefile's `CFLAGS ?= -O2 -g` would lose its own flags to an exported CFLAGS, and Lua's sets CC and
    CFLAGS outright.  The directory persists (under .git/perf): a build system that records the
    compiler's path (cmake) keeps finding it."""
    path = os.environ.get("PATH", os.defpath)
    shims = pad_shims(lock_dir, align)  # one directory per script text
    shims.mkdir(parents=True, exist_ok=True)
    pads = {}
    launcher = shutil.which("ccache", path=path) or ""
    for name in COMPILERS:
        real = shutil.which(name, path=path)
        if real is None or Path(real).parent.name.startswith("probe-pad-bin"):
            continue
        pads[name] = pad.choose(real, lock_dir)
        via = launcher if os.path.basename(os.path.realpath(real)) != "ccache" else ""  # (ccache's own gcc link)
        text = pad.shim(real, pads[name], align, via)
        shim = shims / name
        if not shim.exists() or shim.read_text() != text:
            tmp = shims / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(shim)  # atomic: a concurrent build never runs half a script
    return f"{shims}{os.pathsep}{path}", pads


def cache_env(root: Path, lock_dir: Path) -> dict[str, str]:
    """What a wrapped build's compilers read: the work tree (`pad.TREE_VAR`), and ccache's cache under
    .git/perf, paths under the tree hashed relative to it (ARCHITECTURE.md §6a)."""
    tree = str(root.resolve())
    return {pad.TREE_VAR: tree, "CCACHE_DIR": str(ccache(lock_dir)), "CCACHE_BASEDIR": tree,
            "CCACHE_MAXSIZE": CCACHE_MAXSIZE}


CCACHE_MAXSIZE = "2G"  # ninja's objects are ~30 MB a configuration: dozens of commits' worth
BUILD_LINES, BUILD_LINE = 40, 400  # what is kept of a build's output (a ring: it may print 300 MB)


def _build(command: str, root: Path, env: dict | None, timeout: float, owner: Owner | None = None,
           ) -> subprocess.CompletedProcess:
    """The build command in a process group of its own, all of it killed when we stop waiting (Ctrl-C,
    SIGTERM, the timeout): make's compilers are grandchildren, which killing the shell leaves running.
    Its output (stdout and stderr as one stream) is kept as its last lines, in `stdout`.  As `owner`
    when given."""
    proc = None
    tail: collections.deque[str] = collections.deque(maxlen=BUILD_LINES)

    def child(mask: set) -> None:
        in_child(mask)
        if owner is not None:
            owner.become()
    try:
        with signals_held() as mask:  # Ctrl-C during the fork: held, then it kills the build
            proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=root, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=owner.env(env) if owner else env,
                                    start_new_session=True, preexec_fn=lambda: child(mask))
        reader = threading.Thread(target=keep_tail, args=(proc.stdout, tail, BUILD_LINE), daemon=True)
        reader.start()
        proc.wait(timeout=timeout)
        reader.join(5.0)  # (a daemon it started may keep the pipe open: its last lines are what we have)
    except BaseException:
        if proc is not None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, "\n".join(tail), "")


def _in_our_worktree(root: Path) -> bool:
    return scratch.owning_pid(root.parent, "wt") is not None or root.parent.parent.name == KEPT


def _failure(r: subprocess.CompletedProcess, commit: str, command: str) -> str:
    tail = "\n".join(r.stdout.strip().splitlines()[-15:])  # (`_build` kept both streams in stdout)
    return f"build of {commit[:12]} failed (exit {r.returncode}): {command}\n{tail}"


def _scrub(root: Path) -> None:
    """Our temporary worktree as checked out: a padded build's objects must not meet an unpadded one."""
    for argv in (["git", "reset", "-q", "--hard"], ["git", "clean", "-q", "-xffd"]):
        subprocess.run(argv, cwd=root, capture_output=True)


def _build_padded(build: BuildConfig, root: Path, lock_dir: Path, timeout: float, owner: Owner | None,
                  ) -> tuple[subprocess.CompletedProcess, Built]:
    """The build with padded entries; when it fails and unpadded succeeds (in our worktree, scrubbed),
    that one, with a note: a failure our flags caused is never the user's (ARCHITECTURE.md §6)."""
    command, align = build.command, build.align_functions
    path, pads = probe_pad_path(lock_dir, align)
    if owner is not None:
        ccache(lock_dir).mkdir(exist_ok=True)
        owner.give(ccache(lock_dir))
    r = _build(command, root, {**os.environ, **cache_env(root, lock_dir), "PATH": path}, timeout, owner)
    if r.returncode == 0 or not _in_our_worktree(root):
        return r, Built(pad=pad.describe(pads, align))
    _scrub(root)
    plain = _build(command, root, None, timeout, owner)
    if plain.returncode != 0:
        return plain, Built()
    last = r.stdout.strip().splitlines()[-1:] or [""]
    return plain, Built(note=f"the build failed with git perf's NOP-padded entries ({pad.describe(pads, align)}: "
                             f"{last[0][:160]}); rebuilt without them: traced calls cost more (ARCHITECTURE.md §6)")


def run_build(build: BuildConfig, root: Path, commit: str, lock_dir: Path, timeout: float = 1800) -> Built:
    """Run the build command at `root` (padded when `build.probe_pad`), as the repository's owner when
    we run as root for another user (`Owner`).  Builds of one directory are serialised (two
    collections at once in one work tree would otherwise race inside make); the second build is then
    a no-op."""
    command = build.command
    if not command.strip():
        return Built()
    lock = build_lock(lock_dir, root)
    owner = Owner.of(lock_dir.parent)
    if owner is not None and _in_our_worktree(root):
        owner.give(root)  # checked out by us, as root: the owner's build writes into it
    try:
        with locked(lock):
            try:
                r, done = (_build_padded(build, root, lock_dir, timeout, owner)
                           if build.probe_pad else (_build(command, root, None, timeout, owner), Built()))
            finally:
                if _in_our_worktree(root):  # our temporary worktree: no other build waits on it
                    lock.unlink(missing_ok=True)
    except subprocess.TimeoutExpired:
        raise BuildError(f"build of {commit[:12]} did not finish in {timeout:.0f}s: {command}") from None
    if r.returncode != 0:
        raise BuildError(_failure(r, commit, command))
    return done
