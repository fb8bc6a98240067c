"""Process facts the clean-up paths need (ARCHITECTURE.md §12): is a process alive, and tying a
child's life to its parent's, so that a SIGKILL of one does not leave the other running."""

from __future__ import annotations

import collections
import ctypes
import os
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

_PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG = 1, 2  # linux/prctl.h
HELD = {signal.SIGINT, signal.SIGTERM}  # the signals that end a collection (cli: SIGTERM -> KeyboardInterrupt)


@contextmanager
def signals_held() -> Iterator[set]:
    """SIGINT and SIGTERM held back for the block (yields the mask before it, for the child to restore
    between fork and exec).  Ctrl-C while Popen forks would raise inside the interpreter's at-fork
    handlers, which swallow it ("Exception ignored in: <function _releaseLock>"): the run went on and
    was stored.  Held back, it arrives when the block ends, where the caller can kill what it started."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a held-back signal's handler runs here


def in_child(mask: set, dying: int = signal.SIGKILL) -> None:
    """Between fork and exec of a child started under `signals_held`: the signal mask from before the
    block restored (the child gets the signals we held back), and the child getting `dying` when its
    parent goes (a collector killed with SIGKILL takes its workload or build along)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    die_with_parent(dying)


def keep_tail(stream: IO[bytes], into: collections.deque, width: int) -> None:
    """Read `stream` to its end keeping its last lines in `into` (a deque with a maxlen), each cut at
    `width` bytes: a process printing 300 MB costs a few kilobytes (a reader thread's target)."""
    with stream:
        for line in iter(lambda: stream.readline(65536), b""):
            into.append(line.rstrip(b"\n")[:width].decode(errors="replace"))


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


def parent_death_signal() -> int:
    """The signal `die_with_parent` asked for (0: none)."""
    sig = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return sig.value
