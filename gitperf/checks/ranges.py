"""Paired checks of every first-parent commit of a range, each against its parent, shared out across
CI runners (ARCHITECTURE.md §10c, "A range, sharded"; issue #58).

A paired check compares a commit with its parent on one machine, so the commits of a range need no
common hardware: runner i of N checks the commits whose id, read as a number, is i-1 modulo N
(`shard`), the same commit going to the same runner whatever range it is part of.  Each check stores
its profiles and record in the commit's note as any `check --collect` does; the runners push their
notes and the union merge of `git perf pull` brings them into one history.  A commit that already
has a stored check against its parent (a runner's earlier, interrupted range; a pull) is not checked
again: a range is resumable, and each commit is checked once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pygit2

from gitperf.checks import record
from gitperf.checks.change import DEGRADATION, CheckResult
from gitperf.checks.paired import PairedOptions, check_collect
from gitperf.collect.context import Progress
from gitperf.core.config import CheckConfig
from gitperf.core.errors import EXIT_DEGRADATION, EXIT_OK, InputError
from gitperf.engine.base import Engine
from gitperf.git.repo import first_parent_range, parent
from gitperf.store.notes import NotesStore


@dataclass(frozen=True)
class Shard:
    """This runner's share of a range: the `index`-th (from 1) of `count`."""

    index: int = 1
    count: int = 1

    @staticmethod
    def parse(text: str) -> Shard:
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not m or not 1 <= int(m[1]) <= int(m[2]):
            raise InputError(f"--shard {text!r}: give I/N, this runner's number I from 1 to N runners (--shard 2/3)")
        return Shard(int(m[1]), int(m[2]))

    def takes(self, commit: str) -> bool:
        return int(commit[:15], 16) % self.count == self.index - 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard(commits: list[str], which: Shard) -> list[str]:
    """The commits of `commits` that runner `which` checks: N runners together take each one once."""
    return [c for c in commits if which.takes(c)]


@dataclass(frozen=True)
class RangeResult:
    """What a range's checks found: every commit this runner took, in order, with its check (run now,
    or stored before: `kept`), and the commits it left to the other runners or could not check."""

    spec: str
    shard: Shard
    checked: tuple[CheckResult, ...]
    kept: tuple[str, ...]  # of `checked`, the commits whose check was stored already (not run again)
    others: int  # commits of the range other runners take
    skipped: tuple[tuple[str, str], ...] = ()  # (commit, why): no parent to compare with

    @property
    def exit_code(self) -> int:
        """1 when any commit got slower, else 0 (a commit without enough data is said, not failed)."""
        return EXIT_DEGRADATION if any(r.result == DEGRADATION for r in self.checked) else EXIT_OK

    def to_dict(self, all_functions: bool = False) -> dict:
        return {"range": self.spec, "shard": str(self.shard), "exit_code": self.exit_code, "others": self.others,
                "kept": list(self.kept), "skipped": [{"commit": c, "why": w} for c, w in self.skipped],
                "checks": [r.to_dict(all_functions) for r in self.checked]}


@dataclass(frozen=True)
class RangeRequest:
    spec: str  # A..B
    shard: Shard
    opts: PairedOptions  # each commit's check (its rev and base are the commit and its parent)


def check_range(repo: pygit2.Repository, req: RangeRequest, cfg: CheckConfig, engine: Engine,
                progress: Progress) -> RangeResult:
    """`check --collect` of each commit of `req.spec` (A..B: first-parent, oldest first) that its shard
    takes, against its parent; a commit whose check against its parent is stored already keeps it
    (unless `opts.fresh`).  Each check is stored as it ends, so an interrupted range keeps what it
    finished."""
    spec, which, opts = req.spec, req.shard, req.opts
    every = first_parent_range(repo, spec)
    mine = shard(every, which)
    store = NotesStore(repo)
    checked, kept, skipped = [], [], []
    for k, commit in enumerate(mine, start=1):
        base = parent(repo, commit)
        say = f"[{k}/{len(mine)}] {commit[:12]}"
        if not base:
            skipped.append((commit, "the first commit: no parent to compare with"))
            progress(f"{say}: the first commit, no parent to compare with: skipped")
            continue
        stored = None if opts.fresh else record.newest(store, commit, base, opts.workloads)
        if stored is not None:
            progress(f"{say}: checked already ({stored.result.result}): kept")
            checked.append(stored.result)
            kept.append(commit)
            continue
        progress(f"{say}: checking against {base[:12]}")
        checked.append(check_collect(repo, replace(opts, rev=commit, base=None), cfg, engine,
                                     lambda m, s=say: progress(f"{s}: {m}")))
    return RangeResult(spec, which, tuple(checked), tuple(kept), len(every) - len(mine), tuple(skipped))
