"""One commit of `collect --range`, in a process of its own (its own worktree and probes, so that
`-j N` collections cannot disturb each other's engine): the `CollectRequest` arrives as JSON on
standard input, exactly as the user's command built it; the exit code is the error's."""

from __future__ import annotations

import signal
import sys
from typing import Callable

from gitperf.collect.collection import collect
from gitperf.collect.context import CollectRequest
from gitperf.core.errors import GitPerfError
from gitperf.core.progress import silent
from gitperf.engine.base import Engine
from gitperf.engine.bcc_engine import BccEngine
from gitperf.git.repo import open_repo


def _terminated(_signum, _frame):
    raise KeyboardInterrupt  # like Ctrl-C: probes detached, nothing stored


def main(engine: Callable[..., Engine] = BccEngine) -> int:
    """One commit's collection with `engine(force_per_probe=...)` (a test's fake engine runs its own)."""
    signal.signal(signal.SIGTERM, _terminated)
    req = CollectRequest.from_json(sys.stdin.read())
    try:
        collect(open_repo("."), req, engine(force_per_probe=req.per_probe), silent)
    except GitPerfError as e:
        print(f"git perf: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
