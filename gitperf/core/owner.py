"""Whom git perf acts for when it runs as root in a repository another user owns (ARCHITECTURE.md §6a).

Collection needs root (`sudo git perf check --collect`, a pre-push hook under sudo); nothing else
does.  So in a repository whose git directory another user owns, the project's own commands — its
build and its workloads, under probes or callgrind — run as that owner with the owner's home, and
whatever git perf wrote into the repository as root (worktrees, `.git/perf`, notes refs, objects) is
handed back to the owner when the command ends (`give_back`; and when the next one starts, after a
SIGKILL).  Before (issue #59): 42-47 paths under `.git` stayed root's, the owner's `git gc` exited 128
and every workload ran as root.
"""

from __future__ import annotations

import os
import pwd
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    """The repository's owner, when we run as root and it is not root."""

    uid: int
    gid: int

    @staticmethod
    def of(git_dir: Path) -> Owner | None:
        """The owner of `git_dir` (the common git directory), when we are root and it is not: a build
        or a workload runs the project's own commands, which need no privileges.  None: they run as
        we do."""
        if os.geteuid() != 0:
            return None
        try:
            st = os.stat(git_dir)
        except OSError:
            return None
        return Owner(st.st_uid, st.st_gid) if st.st_uid != 0 else None

    def give(self, path: Path) -> int:
        """`path` and everything under it made the owner's; returns how many paths were root's.  Only
        root's paths are touched (a walk of a large `.git` is ~1 s per 100,000 files)."""
        given = 0
        for d, dirs, files in os.walk(path):
            for name in [d, *(os.path.join(d, f) for f in dirs + files)]:
                with suppress(OSError):
                    if os.lstat(name).st_uid == 0:
                        os.lchown(name, self.uid, self.gid)
                        given += 1
        return given

    def env(self, env: dict | None) -> dict:
        """An environment with the owner's home and name (not root's)."""
        try:
            pw = pwd.getpwuid(self.uid)
            home, name = pw.pw_dir, pw.pw_name
        except KeyError:  # a uid without a passwd entry (a container's)
            home, name = "/", str(self.uid)
        return {**(env if env is not None else os.environ), "HOME": home, "USER": name, "LOGNAME": name}

    def become(self) -> None:
        """In a child between fork and exec: the owner for good (no way back to root).  The kernel
        clears a process's parent-death signal when its user or group id changes (prctl(2)): the one
        asked for before (`proc.die_with_parent`: a build or workload dying with a SIGKILLed git perf)
        is asked for again, or the owner's workload outlived us."""
        from gitperf.core.proc import die_with_parent, parent_death_signal
        dying = parent_death_signal()
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)
        if dying:
            die_with_parent(dying)


def give_back(git_dir: Path) -> int:
    """Whatever root left in the repository's git directory made its owner's again (nothing when we
    are not root, or the owner is root); returns how many paths were handed back."""
    owner = Owner.of(git_dir)
    return owner.give(git_dir) if owner is not None else 0
