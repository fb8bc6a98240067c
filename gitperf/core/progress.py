"""Progress messages: every long operation takes a `Progress` (the CLI prints them to standard
error, `-q` drops them)."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[str], None]


def silent(_msg: str) -> None:
    """A Progress that says nothing."""
