"""A commit's history as one collection reads it (ARCHITECTURE.md §7, issue #35): its first-parent
ancestors listed once and each one's note decoded at most once, whichever planning step asks — the
pipeline's baseline statistics, the budget's call counts and the plan its history keeps, the nearest
full trace.  Three walks of up to 200 ancestors each, uncached, were one plain `collect`'s reads.

A `History` lives for one collection of one commit, before anything is stored: what it read does not
change under it."""

from __future__ import annotations

from typing import Callable

from gitperf.core.model import ROOT, Profile
from gitperf.git.repo import ancestors
from gitperf.store.notes import NotesStore

LIMIT = 200  # ancestors planning looks back through for a profile of its configuration


class History:
    def __init__(self, store: NotesStore, commit: str, limit: int = LIMIT):
        self.store, self.commit, self.limit = store, commit, limit
        self._ancestors: list[str] | None = None
        self._complete: dict[str, list[Profile]] = {}

    def ancestors(self) -> list[str]:
        """First-parent ancestors of the commit, nearest first (walked once)."""
        if self._ancestors is None:
            self._ancestors = ancestors(self.store.repo, self.commit, limit=self.limit)
        return self._ancestors

    def complete(self, sha: str) -> list[Profile]:
        """The profiles of `sha` that ran to the end (no crash, no timeout), its note read once.  Every
        configuration's: a collection asks for its workloads' keys one after another."""
        if sha not in self._complete:
            self._complete[sha] = [p.profile for p in self.store.read(sha)[0] if not p.profile.header.partial]
        return self._complete[sha]

    def nearest(self, config_key: str, base: str | None = None,
                want: Callable[[Profile], bool] = lambda _p: True) -> tuple[str, Profile | None]:
        """The nearest ancestor (or only `base`, which may be the commit itself) with a complete profile
        of this configuration key that `want`s; of several runs, the one with the median root time."""
        for sha in [base] if base else self.ancestors():
            ps = [p for p in self.complete(sha) if p.config_key == config_key and want(p)]
            if ps:
                ps.sort(key=lambda p: (p.function(ROOT).total_ns if p.function(ROOT) else 0))
                return sha, ps[len(ps) // 2]
        return "", None
