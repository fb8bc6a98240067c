"""The workload launcher (`spawn.c`): what starting a run takes besides the fork (the run's cgroup,
the repository's owner as its user, dying with git perf, the signal mask put back) in a small program,
built once a process into a scratch directory, so that `workload.run` starts each run with vfork, and
the launcher starts the command straight into its cgroup.  A fork of the collector (~250 MB resident:
bcc, LLVM, angr) with that set-up in Python, the move into the cgroup included, took ~26 ms of each of
Lua's runs, the launcher ~2 ms.  Without a C compiler the runs are started so, as before."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import subprocess
from pathlib import Path

from gitperf.core import scratch
from gitperf.core.owner import Owner

SOURCE = Path(__file__).with_name("spawn.c")


@functools.cache
def launcher() -> str | None:
    """The launcher's path (built on the first call of this process; removed as it exits, or by the
    next git perf's sweep when it is killed), or None where it cannot be built or run (no compiler, a
    temporary directory mounted noexec)."""
    where = scratch.make("spawn")
    exe = where / "gitperf-spawn"
    try:
        built = subprocess.run(["cc", "-O2", "-o", str(exe), str(SOURCE)], capture_output=True, timeout=60)
        runs = built.returncode == 0 and subprocess.run([str(exe)], capture_output=True, timeout=10).returncode == 127
    except (OSError, subprocess.TimeoutExpired):
        runs = False
    if not runs:
        shutil.rmtree(where, ignore_errors=True)
        return None
    atexit.register(shutil.rmtree, where, True)
    return str(exe)


def wrapped(command: list[str], cgroup: Path | None, user: Owner | None, mask: set[signal.Signals],
            ready: int) -> list[str] | None:
    """The command line that starts `command` through the launcher (None without one): in `cgroup`, as
    `user`, dying with this thread with SIGKILL, with `mask` blocked, closing `ready` (a pipe's write
    end) as it executes `command`; `spawn.c`."""
    exe = launcher()
    if exe is None:
        return None
    return [exe, str(cgroup) if cgroup else "-", str(user.uid) if user else "-", str(user.gid) if user else "-",
            str(int(signal.SIGKILL)), str(os.getpid()), ",".join(str(int(s)) for s in sorted(mask)) or "-",
            str(ready), "--", *command]
