"""Progress messages: every long operation takes a `Progress` (the CLI prints them to standard
error, `-q` drops them)."""

from __future__ import annotations

from typing import Callable

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
