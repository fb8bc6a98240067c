"""Running a workload: its own session (Ctrl-C reaches git perf, which then cleans up), its own
cgroup v2 (so probes count only this collection's processes, even when another collection runs the
same binary at the same time), a timeout, and a kill of everything it started on every exit path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


@dataclass(frozen=True)
class RunResult:
    exit_status: int | None  # None when killed by us (timeout); negative: killed by that signal
    wall_s: float
    timed_out: bool

    @property
    def partial(self) -> str:
        """Why a profile of this run is incomplete, or "" when the run finished normally."""
        if self.timed_out:
            return "timeout"
        status = self.exit_status
        if status is None or status == 0:
            return ""
        # killed by a signal: -N from Popen, or 128+N when a shell ran the program and reported it
        sig = -status if status < 0 else status - 128 if 128 < status < 128 + signal.NSIG else 0
        if sig:
            try:
                return f"crashed: {signal.Signals(sig).name}"
            except ValueError:
                return f"crashed: signal {sig}"
        return f"failed: exit status {status}"


@dataclass(frozen=True)
class Scope:
    """Where a workload's processes live: a cgroup v2 directory, or nothing (no filtering)."""

    path: Path | None
    cgroup_id: int  # what bpf_get_current_cgroup_id() returns inside it; 0 = no filter

    def kill_all(self) -> None:
        if self.path is None:
            return
        kill = self.path / "cgroup.kill"
        try:
            if kill.exists():
                kill.write_text("1")
            else:
                for pid in (self.path / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _cgroup2_root() -> Path | None:
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems)."""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return Path(fields[1])
    except OSError:
        pass
    return None


@contextmanager
def scope() -> Iterator[Scope]:
    """A fresh cgroup for one run; removed afterwards (after killing any leftover process)."""
    root = _cgroup2_root()
    if root is None or not os.access(root, os.W_OK):
        yield Scope(None, 0)
        return
    path = root / "gitperf" / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir(parents=True)
    except OSError:
        yield Scope(None, 0)
        return
    s = Scope(path, os.stat(path).st_ino)  # a cgroup's id is its kernfs inode number
    try:
        yield s
    finally:
        s.kill_all()
        for _ in range(100):  # rmdir fails while dying processes are still listed
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.02)


def run(argv: list[str], cwd: str, timeout: float, where: Scope, env: dict | None = None,
        quiet: bool = True) -> RunResult:
    """Run one workload to completion (or timeout).  KeyboardInterrupt kills it and propagates."""
    procs = str(where.path / "cgroup.procs") if where.path else None

    def enter_scope() -> None:  # runs in the child between fork and exec
        if procs:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))

    out = subprocess.DEVNULL if quiet else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=enter_scope)
    try:
        status = proc.wait(timeout=timeout)
        return RunResult(status, time.perf_counter() - t0, False)
    except subprocess.TimeoutExpired:
        _kill(proc, where)
        return RunResult(None, time.perf_counter() - t0, True)
    except BaseException:
        _kill(proc, where)
        raise


def _kill(proc: subprocess.Popen, where: Scope) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    where.kill_all()
    proc.wait()
