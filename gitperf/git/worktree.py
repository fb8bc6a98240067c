"""Getting a binary for a revision: the work tree itself when REV is the clean checked-out HEAD,
otherwise a temporary `git worktree` that is removed afterwards (the user's tree is never touched)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Iterator

import pygit2

from gitperf.core.config import PROBE_PAD_FLAGS, BuildConfig
from gitperf.core.errors import BuildError
from gitperf.core.proc import alive, die_with_parent


def _is_clean_head(repo: pygit2.Repository, commit: str) -> bool:
    if repo.is_bare or repo.head_is_unborn or str(repo.head.target) != commit:
        return False
    flags = pygit2.GIT_STATUS_IGNORED | pygit2.GIT_STATUS_WT_NEW  # untracked files do not change a build
    return all(f & flags for f in repo.status().values())


_PREFIX = "gitperf-wt-"  # + the owning process id: gitperf-wt-PID-XXXX/<commit>


def sweep_worktrees(repo: pygit2.Repository) -> list[str]:
    """Remove the temporary worktrees of collections that died without cleaning up (SIGKILL, a
    power cut): those whose owning process is gone.  Returns their paths."""
    cwd = repo.workdir or repo.path
    r = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=cwd, capture_output=True, text=True)
    swept = []
    for line in r.stdout.splitlines():
        path = Path(line[len("worktree "):]) if line.startswith("worktree ") else None
        m = re.fullmatch(_PREFIX + r"(\d+)-.*", path.parent.name) if path else None
        if m and not alive(int(m.group(1))):
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=cwd, capture_output=True)
            shutil.rmtree(path.parent, ignore_errors=True)
            swept.append(str(path))
    if swept:
        subprocess.run(["git", "worktree", "prune"], cwd=cwd, capture_output=True)
    return swept


@contextmanager
def checkout(repo: pygit2.Repository, commit: str, fresh: bool = False) -> Iterator[Path]:
    """A directory holding `commit`'s tree: the work tree when it is clean at that commit (and not
    `fresh`: its build products were made with whatever flags the user's last build had)."""
    if not fresh and _is_clean_head(repo, commit):
        yield Path(repo.workdir)
        return
    tmp = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
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


def probe_pad_path(lock_dir: Path) -> str:
    """A PATH whose first directory wraps every compiler found on ours so that it compiles with
    PROBE_PAD_FLAGS.  Wrappers rather than CFLAGS: a makefile's `CFLAGS ?= -O2 -g` would lose its own
    flags to an exported CFLAGS, and Lua's sets CC and CFLAGS outright.  The directory persists
    (under .git/perf): a build system that records the compiler's path (cmake) keeps finding it."""
    path = os.environ.get("PATH", os.defpath)
    shims = lock_dir / "probe-pad-bin"
    shims.mkdir(parents=True, exist_ok=True)
    flags = " ".join(PROBE_PAD_FLAGS)
    for name in COMPILERS:
        real = shutil.which(name, path=path)
        if real is None or Path(real).parent == shims:
            continue
        text = f'#!/bin/sh\n# git perf build.probe_pad\nexec {shlex.quote(real)} {flags} "$@"\n'
        shim = shims / name
        if not shim.exists() or shim.read_text() != text:
            tmp = shims / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o755)
            tmp.replace(shim)  # atomic: a concurrent build never runs half a script
    return f"{shims}{os.pathsep}{path}"


def _build(command: str, root: Path, env: dict | None, timeout: float) -> subprocess.CompletedProcess:
    """The build command in a process group of its own, all of it killed when we stop waiting (Ctrl-C,
    SIGTERM, the timeout): make's compilers are grandchildren, which killing the shell leaves running."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True,
                            preexec_fn=lambda: die_with_parent(signal.SIGKILL))
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_build(build: BuildConfig, root: Path, commit: str, lock_dir: Path, timeout: float = 1800) -> None:
    """Run the build command at `root`.  Builds of one directory are serialised (two collections at
    once in one work tree would otherwise race inside make); the second build is then a no-op."""
    command = build.command
    if not command.strip():
        return
    lock = lock_dir / f"build-{hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]}.lock"
    try:
        with open(lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                env = {**os.environ, "PATH": probe_pad_path(lock_dir)} if build.probe_pad else None
                r = _build(command, root, env, timeout)
            finally:
                if root.parent.name.startswith(_PREFIX):  # our temporary worktree: no other build waits on it
                    lock.unlink(missing_ok=True)
    except subprocess.TimeoutExpired:
        raise BuildError(f"build of {commit[:12]} did not finish in {timeout:.0f}s: {command}") from None
    if r.returncode != 0:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise BuildError(f"build of {commit[:12]} failed (exit {r.returncode}): {command}\n{tail}")
