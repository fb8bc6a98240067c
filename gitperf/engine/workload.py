"""Running a workload: its own session (Ctrl-C reaches git perf, which then cleans up), its own
cgroup v2 (so probes count only this collection's processes, even when another collection runs the
same binary at the same time), a timeout, and a kill of everything it started on every exit path.
"""

from __future__ import annotations

import collections
import os
import resource
import signal
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from gitperf.core.owner import Owner
from gitperf.core.proc import alive, in_child, keep_tail, signals_held
from gitperf.engine import launcher


@dataclass(frozen=True)
class RunResult:
    exit_status: int | None  # None when killed by us (timeout); negative: killed by that signal
    wall_s: float
    timed_out: bool
    # CPU seconds (user + system) of the workload's processes: probe traps and samples are charged
    # to the task they interrupt, so this shows their cost without the VM's scheduling noise
    cpu_s: float = 0.0
    stderr: str = ""  # the last lines it wrote to stderr (STDERR_LINES, each cut at STDERR_LINE bytes)
    expected: tuple[int, ...] = (0,)  # the exit statuses of a run that finished as intended

    @property
    def partial(self) -> str:
        """Why a profile of this run is incomplete, or "" when the run finished normally."""
        if self.timed_out:
            return "timeout"
        status = self.exit_status
        if status is None or status in self.expected:
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


def cgroup2_root() -> Path | None:
    """Where cgroup v2 is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems)."""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return Path(fields[1])
    except OSError:
        pass
    return None


def _remove(path: Path) -> bool:
    for _ in range(100):  # rmdir fails while dying processes are still listed
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)
    return False


def sweep_scopes(parent: Path) -> list[Path]:
    """Kill what is left in the cgroups of collections that died (SIGKILL: a workload that outlives
    its collector, forever if it hangs) and remove those cgroups.  Returns the ones removed."""
    swept = []
    for d in parent.glob("run-*"):
        try:
            pid = int(d.name.split("-")[1])
        except (IndexError, ValueError):
            continue
        if not alive(pid):
            Scope(d, 0).kill_all()
            if _remove(d):
                swept.append(d)
    return swept


@contextmanager
def scope() -> Iterator[Scope]:
    """A fresh cgroup for one run; removed afterwards (after killing any leftover process)."""
    root = cgroup2_root()
    if root is None or not os.access(root, os.W_OK):
        yield Scope(None, 0)
        return
    sweep_scopes(root / "gitperf")
    path = root / "gitperf" / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir(parents=True)
    except OSError:
        yield Scope(None, 0)
        return
    try:  # from the moment it exists: Ctrl-C at any point after leaves no cgroup behind
        yield Scope(path, os.stat(path).st_ino)  # a cgroup's id is its kernfs inode number
    finally:
        Scope(path, 0).kill_all()
        _remove(path)


@dataclass(frozen=True)
class Command:
    """A workload's command line, run in `cwd` with `env` (None: ours), as `user` when given (the
    repository's owner when we run as root for them: `core.owner`)."""

    argv: list[str]
    cwd: str
    env: dict | None = None
    user: Owner | None = None
    expected: tuple[int, ...] = (0,)  # exit statuses of a run that finished as intended (`Workload.exit_codes`)


STDERR_LINES = 8  # what a failing workload's error shows of its stderr (a ring: memory stays bounded)
STDERR_LINE = 300


def _spawn(cmd: Command, where: Scope) -> subprocess.Popen:
    """The workload started in its own session and `where`'s cgroup, dying with us, as its user:
    through the launcher, with vfork (`engine.launcher`), else set up in Python between fork and exec."""
    procs = str(where.path / "cgroup.procs") if where.path else None

    def enter_scope() -> None:  # runs in the child between fork and exec
        in_child(mask)  # the signals we held back, and dying with us (SIGKILL of the collector)
        if procs:
            with open(procs, "w") as fh:
                fh.write(str(os.getpid()))
        if cmd.user is not None:  # (after joining the cgroup, which takes root)
            cmd.user.become()

    proc = None
    ready, readied = os.pipe()
    try:  # Ctrl-C or SIGTERM during the fork arrives once Popen has returned, and kills the workload
        with signals_held() as mask:
            argv = launcher.wrapped(cmd.argv, where.path, cmd.user, mask, readied)
            proc = subprocess.Popen(argv or cmd.argv, cwd=cmd.cwd, env=cmd.user.env(cmd.env) if cmd.user else cmd.env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=None if argv else enter_scope,
                                    pass_fds=(readied,) if argv else ())
        os.close(readied)
        readied = -1
        os.read(ready, 1)  # end of file once the launcher executed the workload (or failed): its clock starts
    except BaseException:
        if proc is not None:
            _kill(proc, where)
        raise
    finally:
        os.close(ready)
        if readied >= 0:
            os.close(readied)
    return proc


# Runs going on in this process's threads (`callgrind.run_all`), for `kill_running`
_RUNNING: dict[int, tuple[subprocess.Popen, Scope]] = {}
_RUNNING_LOCK = threading.Lock()


def kill_running() -> None:
    """Kill every workload this process's threads are running (an interrupt reaches the main thread
    only: the others' runs would go on to their end)."""
    with _RUNNING_LOCK:
        going = list(_RUNNING.values())
    for proc, where in going:
        _signal_all(proc, where)  # (each run's own thread reaps it)


def run(cmd: Command, timeout: float, where: Scope) -> RunResult:
    """Run one workload to completion (or timeout).  KeyboardInterrupt kills it and propagates."""
    proc = _spawn(cmd, where)
    with _RUNNING_LOCK:
        _RUNNING[proc.pid] = (proc, where)
    try:
        return _wait(cmd, proc, timeout, where)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(proc.pid, None)


def _wait(cmd: Command, proc: subprocess.Popen, timeout: float, where: Scope) -> RunResult:
    # The clock starts once the workload has been executed (`_spawn`: the fork, the move into the
    # cgroup and the change of user are not the program's run time).  The wait blocks in waitpid with
    # a timer thread for the timeout: Popen.wait(timeout) polls with sleeps of up to 50 ms, which made
    # run times jump by 0.05 s (measured: 0.166 s runs reported as 0.215 s about half the time).
    t0, cpu0 = time.perf_counter(), _children_cpu()
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
    reader = threading.Thread(target=keep_tail, args=(proc.stderr, tail, STDERR_LINE), daemon=True)
    reader.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _signal_all(proc, where)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        status = proc.wait()
        wall = time.perf_counter() - t0
        # (children reaped by this process meanwhile count too: a collection runs one workload at a time)
        cpu = _children_cpu() - cpu0
    except BaseException:
        _kill(proc, where)
        raise
    finally:
        timer.cancel()
    if expired.is_set() or status:  # what it said is the reason: wait for its last lines (not forever:
        reader.join(1.0)            # a process it left behind may hold the pipe)
    if expired.is_set():
        return RunResult(None, wall, True, cpu, "\n".join(tail), cmd.expected)
    return RunResult(status, wall, False, cpu, "\n".join(tail) if status else "", cmd.expected)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _signal_all(proc: subprocess.Popen, where: Scope) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    where.kill_all()


def _kill(proc: subprocess.Popen, where: Scope) -> None:
    _signal_all(proc, where)
    proc.wait()
