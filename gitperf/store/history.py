"""A commit's history as one collection reads it (ARCHITECTURE.md §7, issue #35): its first-parent
ancestors listed once and each one's note decoded at most once (`store.caching.CachingStore`),
whichever planning step asks — the pipeline's baseline statistics, the budget's call counts and the
plan its history keeps, the nearest full trace.  Three walks of up to 200 ancestors each, uncached,
were one plain `collect`'s reads.

A `History` lives for one collection of one commit, before anything is stored: what it read does not
change under it."""

from __future__ import annotations

from typing import Callable

import pygit2

from gitperf.core.model import ROOT, Profile
from gitperf.git.repo import ancestors
from gitperf.store.caching import CachingStore

LIMIT = 200  # ancestors planning looks back through for a profile of its configuration


class History:
    def __init__(self, repo: pygit2.Repository, commit: str, limit: int = LIMIT):
        self.store, self.commit, self.limit = CachingStore(repo), commit, limit
        self._ancestors: list[str] | None = None

    def ancestors(self) -> list[str]:
        """First-parent ancestors of the commit, nearest first (walked once)."""
        if self._ancestors is None:
            self._ancestors = ancestors(self.store.repo, self.commit, limit=self.limit)
        return self._ancestors

    def nearest(self, config_key: str, base: str | None = None,
                want: Callable[[Profile], bool] = lambda _p: True) -> tuple[str, Profile | None]:
        """The nearest ancestor (or only `base`, which may be the commit itself) with a complete profile
        of this configuration key that `want`s; of several runs, the one with the median root time."""
        for sha in [base] if base else self.ancestors():
            ps = [sp.profile for sp in self.store.read(sha)[0]
                  if sp.profile.complete and sp.profile.config_key == config_key and want(sp.profile)]
            if ps:
                ps.sort(key=lambda p: (p.function(ROOT).total_ns if p.function(ROOT) else 0))
                return sha, ps[len(ps) // 2]
        return "", None
