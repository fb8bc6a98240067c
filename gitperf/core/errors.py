"""Typed exceptions.  Each carries the exit code of ARCHITECTURE.md §12 and a message a user can act on."""

from __future__ import annotations

# Exit codes (documented in `git perf --help`).
EXIT_OK = 0
EXIT_DEGRADATION = 1
EXIT_USAGE = 2
EXIT_NOT_ENOUGH_DATA = 3
EXIT_CANNOT_COLLECT = 4


class GitPerfError(Exception):
    """Base class: `str(err)` is shown to the user as is."""

    exit_code = EXIT_USAGE


class ConfigError(GitPerfError):
    """A bad `.gitperf.toml`: names the file, the key, the value and what was expected."""

    def __init__(self, path: str, key: str, message: str):
        self.path, self.key = path, key
        where = f"{path}: {key}: " if key else f"{path}: "
        super().__init__(where + message)


class InputError(GitPerfError):
    """A bad binary, revision, note or argument."""


class NoteFormatError(InputError):
    """A note line that cannot be parsed (it is reported and skipped, never rewritten)."""


class BuildError(GitPerfError):
    """The project's build command failed for a revision."""


class EnvironmentUnavailable(GitPerfError):
    """This machine cannot collect: no root, no eBPF, no bcc, no kernel headers."""

    exit_code = EXIT_CANNOT_COLLECT


class CollectionAborted(GitPerfError):
    """Collection was interrupted (Ctrl-C); probes are detached and nothing was stored."""

    exit_code = 130


class StoreConflict(GitPerfError):
    """The notes ref kept moving under us; another writer is very busy.  Retry."""
