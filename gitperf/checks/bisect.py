"""`git perf bisect`: the first commit where a function's time jumped, collecting few commits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pygit2

from gitperf.core.errors import InputError
from gitperf.core.progress import Progress
from gitperf.git.repo import first_parent_range, resolve_commit
from gitperf.stats import inference
from gitperf.store.notes import NotesStore


@dataclass(frozen=True)
class Followed:
    """What bisect follows: one function's inclusive time per run in one workload."""

    workload: str
    function: str = "main"
    collect: Callable[[str], None] = lambda _c: None  # profiles a commit that has none yet


@dataclass(frozen=True)
class BisectResult:
    first_bad: str
    good: str
    bad: str
    metric: str
    values: dict[str, float]  # commit -> metric (ns per run) for the commits looked at
    collected: list[str]
    range_size: int

    def to_dict(self) -> dict:
        return {"first_bad": self.first_bad, "good": self.good, "bad": self.bad, "function": self.metric,
                "values_ns": self.values, "collected": self.collected, "range": self.range_size}


def metric(store: NotesStore, commit: str, workload: str, function: str) -> float | None:
    """A function's time per run in a commit's collected profiles (`Profile.collected`: a paired
    check's rounds measure it otherwise)."""
    vals = [float(f.total_ns) for p in store.read(commit)[0]
            if p.profile.collected and p.profile.header.workload == workload
            and (f := p.profile.function(function))]
    return inference.center(vals) if vals else None


def bisect(repo: pygit2.Repository, good: str, bad: str, followed: Followed, say: Progress) -> BisectResult:
    """The first commit in good..bad (first parent) whose `function` time per run is nearer BAD's
    level than GOOD's (geometric midpoint).  Assumes a single step between them; collects only the
    commits the binary search visits."""
    workload, function = followed.workload, followed.function
    store = NotesStore(repo)
    g, b = resolve_commit(repo, good), resolve_commit(repo, bad)
    line = first_parent_range(repo, f"{g}..{b}")
    if not line or line[-1] != b:
        raise InputError(f"{bad} is not a first-parent descendant of {good}")
    collected: list[str] = []
    values: dict[str, float] = {}

    def value(c: str) -> float:
        if c not in values:
            v = metric(store, c, workload, function)
            if v is None:
                followed.collect(c)
                collected.append(c)
                v = metric(store, c, workload, function)
            if v is None:
                raise InputError(f"no profile of {function} in workload {workload} at {c[:12]} after collecting")
            values[c] = v
        return values[c]

    vg, vb = value(g), value(b)
    if vb <= vg:
        raise InputError(f"{function} is not slower at {bad} ({vb / 1e6:.3f} ms) than at {good} "
                         f"({vg / 1e6:.3f} ms): nothing to bisect")
    mid_level = math.sqrt(vg * vb)
    lo, hi = -1, len(line) - 1  # line[lo] good (lo = -1 is GOOD itself), line[hi] bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = value(line[mid])
        verdict = "bad" if v > mid_level else "good"
        say(f"{line[mid][:12]}: {function} {v / 1e6:.3f} ms per run -> {verdict}")
        if v > mid_level:
            hi = mid
        else:
            lo = mid
    return BisectResult(line[hi], g, b, function, values, collected, len(line))
