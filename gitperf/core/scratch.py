"""Scratch directories in the system's temporary directory (ARCHITECTURE.md §12): the callgrind
witness's output, a compiler's padding probe, the calibration's programs, a revision's worktree.

Each is named by the process that made it, `gitperf-KIND-PID-XXXX`, so that the next git perf removes
what a killed one left (`sweep`): a SIGKILL runs no `finally`, and under sudo what git perf leaves in
/tmp is root's, which the user cannot remove from that sticky directory.  Before this, a day of
checks interrupted in their witness left 92 `gitperf-callgrind-*` and 66 `gitperf-pad-*` directories.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from gitperf.core.proc import alive

KINDS = ("callgrind", "pad", "calib", "wt", "spawn")
_NAME = re.compile(rf"gitperf-({'|'.join(KINDS)})-(\d+)-")


def make(kind: str) -> Path:
    """A new scratch directory of `kind` (one of KINDS) named by this process: the caller removes it."""
    assert kind in KINDS, kind
    return Path(tempfile.mkdtemp(prefix=f"gitperf-{kind}-{os.getpid()}-"))


@contextmanager
def directory(kind: str) -> Iterator[Path]:
    """A scratch directory for the block, removed after it (and by `sweep` if this process is killed)."""
    path = make(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def owning_pid(path: str | Path, kind: str | None = None) -> int | None:
    """The process a scratch directory (of `kind`, or any) was made by, from its name (None: not one
    of ours)."""
    m = _NAME.match(Path(path).name)
    return int(m.group(2)) if m and kind in (None, m.group(1)) else None


def sweep() -> list[str]:
    """Remove the scratch directories whose process is gone; returns their paths.  (A process id the
    kernel has since given to another process keeps its directory until that one ends too.)"""
    swept = []
    with os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            pid = owning_pid(entry.name)
            if pid is not None and entry.is_dir(follow_symlinks=False) and not alive(pid):
                shutil.rmtree(entry.path, ignore_errors=True)  # (fd-based on Linux: follows no link)
                swept.append(entry.path)
    return swept
