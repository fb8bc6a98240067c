"""Progress messages: every long operation takes a `Progress` (the CLI prints them to standard
error, `-q` drops them)."""

from __future__ import annotations

import sys
from typing import Callable, TextIO

Progress = Callable[[str], None]


def silent(_msg: str) -> None:
    """A Progress that says nothing."""


# A progress line is read as it scrolls by: no line longer than this (the undecided list of a C++
# check once made one of 7,087 characters).  Lists in progress lines are bounded where they are made
# (`core.fmt.names`); this cuts whatever still runs over.
LINE_LIMIT = 200


def bounded(line: str, limit: int = LINE_LIMIT) -> str:
    """`line` cut to `limit` characters, with `…` where it was cut."""
    return line if len(line) <= limit else line[:limit - 1] + "…"


class StatusLine:
    """Progress on a terminal: each message replaces the last on one line, cropped to the terminal's
    width (rich's `Live`, transient: gone once `close` is called); a warning stays, above it.  The
    per-round lines scroll by only with `-v`, or where standard error is not a terminal (issue #60:
    77 lines for one check, one of them 1,681 characters)."""

    def __init__(self, stream: TextIO | None = None, render: Callable[[str], str] = str):
        from rich.console import Console
        from rich.live import Live
        self._console = Console(file=stream or sys.stderr, highlight=False, soft_wrap=False)
        self._live = Live(console=self._console, transient=True, auto_refresh=False, redirect_stdout=False,
                          redirect_stderr=False)
        self._render = render
        self._live.start()

    def __call__(self, msg: str) -> None:
        from rich.text import Text
        for line in msg.splitlines() or [""]:
            text = Text(self._render(f"git perf: {line.strip()}"), no_wrap=True, overflow="ellipsis")
            if line.lstrip().startswith(("warning", "error")):
                self._console.print(text, crop=True)
            else:
                self._live.update(text, refresh=True)

    def close(self) -> None:
        """The line erased (before anything else is printed)."""
        self._live.stop()
