"""Process facts the clean-up paths need (ARCHITECTURE.md §12): is a process alive, and tying a
child's life to its parent's, so that a SIGKILL of one does not leave the other running."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (dead, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    try:  # /proc/PID/stat: "pid (comm) state ..."; comm may hold spaces and parentheses
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def die_with_parent(sig: int) -> None:
    """Ask the kernel to send `sig` to this process when the thread that started it exits (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
