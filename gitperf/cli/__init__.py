"""`git perf`: a thin click layer over the library (ARCHITECTURE.md §12); library errors carry their
exit code.  `app` holds the group and what its commands share; the commands live by what they touch:
`collecting` (build and profile), `checking` (judge), `reading` (what is stored, the dashboard),
`sharing` (the notes' remote, the pre-push hook)."""

from gitperf.cli.app import main
from gitperf.cli import checking, collecting, reading, sharing  # noqa: E402,F401  (each adds its commands to `main`)

__all__ = ["main"]
