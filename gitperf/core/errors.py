"""Typed exceptions.  Each carries the exit code of ARCHITECTURE.md §12 and a message a user can act on."""

from __future__ import annotations

# Exit codes (ARCHITECTURE.md §12; each command's --help lists the ones it returns).
EXIT_OK = 0
EXIT_DEGRADATION = 1
EXIT_USAGE = 2
EXIT_NOT_ENOUGH_DATA = 3
EXIT_CANNOT_COLLECT = 4
EXIT_INTERRUPTED = 130  # SIGINT or SIGTERM (143 only when git perf is killed before it can handle it)

EXIT_MEANINGS = {
    EXIT_OK: "success / no degradation",
    EXIT_DEGRADATION: "degradation found",
    EXIT_USAGE: "usage, configuration or input error",
    EXIT_NOT_ENOUGH_DATA: "not enough data to decide",
    EXIT_CANNOT_COLLECT: "this machine cannot collect (no eBPF, no privileges)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM): probes detached, nothing stored",
}


def epilog(*codes: int) -> str:
    """The "Exit codes" paragraph of a command's --help (click keeps lines after a \\b)."""
    return "\b\nExit codes:\n" + "".join(f"  {str(c).ljust(2)} {EXIT_MEANINGS[c]}\n" for c in sorted(codes))


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


class WorkloadFailed(GitPerfError):
    """A workload crashed, failed or timed out during a paired check: its time says nothing, so the
    check stops (exit 2) and stores nothing."""


class EnvironmentUnavailable(GitPerfError):
    """This machine cannot collect: no root, no eBPF, no bcc, no kernel headers."""

    exit_code = EXIT_CANNOT_COLLECT


class CollectionAborted(GitPerfError):
    """Collection was interrupted (Ctrl-C); probes are detached and nothing was stored."""

    exit_code = EXIT_INTERRUPTED


class StoreConflict(GitPerfError):
    """The notes ref kept moving under us; another writer is very busy.  Retry."""
