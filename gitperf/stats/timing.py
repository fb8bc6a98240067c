"""A function's time a run over a set of runs: the one estimator `show`, `diff`, `check` and `report`
print (ARCHITECTURE.md §10, "One scale").  Pure functions over profiles.

* A function traced in those runs: the center of its runs' inclusive times, native (the calibrated
  probe time taken out) where every run's estimate is usable (`FunctionStats.correctable`), else its
  probed time; a run whose plan traced it and that lacks it measured 0.  What `checks.sides` compares.
* A function only stack samples cover (calls not counted): inclusive, its samples pooled over the
  runs (a run without a sample of it included) as a share of every sample taken, times the center of
  the runs' time on a CPU, from every stack that holds it (once); exclusive, the same for the samples
  the kernel counted in its code (runs without stacks or counts: their own estimates averaged).  Pooled, not a
  median of the runs that caught it: a function sampled in 95 of 102 runs read 337 us as that median
  and 119 us pooled (the indexer's `_M_realloc_insert`), and only the pooled figure is a time a run.
  What the check's pooled design compares (`checks.designs.pooled`).

Shares of the same samples keep every sampled callee's inclusive time within its caller's, and every
function's exclusive within its inclusive.
"""

from __future__ import annotations

import functools
import itertools
import operator
from dataclasses import dataclass
from typing import Sequence

import msgspec
import numpy as np

from gitperf.core import stacks
from gitperf.core.model import CORRECTABLE_SHARE, NUMBERS, FunctionStats, Profile
from gitperf.stats import inference


def stack_only(f: FunctionStats) -> bool:
    """A function only stack samples measured: no call was counted, its time is its samples' share."""
    return f.sampled and not f.count


def on_cpu_ns(p: Profile) -> float:
    """The run's time on a CPU: its wall time less its waits for one (what the samples are shares of)."""
    return max(p.metrics.PRT - p.metrics.WAIT, 0.0) * 1e9


@dataclass(frozen=True)
class Pool:
    """Stack samples pooled over runs: every sample (`total`), and per function those whose stack
    holds it (`inclusive`, once a stack)."""

    total: int
    inclusive: dict[str, int]

    @staticmethod
    def of(profiles: Sequence[Profile]) -> Pool:
        merged = stacks.merge(p.stacks for p in profiles)
        return Pool(sum(merged.values()), stacks.inclusive(merged))

    def holding(self, name: str, fs: Sequence[FunctionStats]) -> int:
        """`name`'s inclusive samples: those whose kept stack holds it, never fewer than the kernel
        counted in its code over the runs (`fs`: its stats in them).  The kept stacks are bounded and may
        have lost a rare function's: the indexer's `_M_realloc_insert` held 4 samples in one side's
        stacks where the kernel had counted ~26 in its code, and read -91% [-98%, -63%] in the pooled
        test, an optimization on identical instructions, while the larger count read -43%.  What `show`
        prints (`timings`) and the pooled test compares (`checks.designs.pooled`)."""
        return max(self.inclusive.get(name, 0), sum(f.stack_samples for f in fs))


class Timing(msgspec.Struct):  # (a Struct: `checks.sides.Side` says why)
    """One function's time a run, in ns."""

    inclusive_ns: float | None  # None: a stack-only function in runs that kept no stacks
    exclusive_ns: float
    calls: float | None  # None: not counted (stack samples only)
    runs: int  # runs in which it was measured (caught by a sample, for a stack-only function)
    sampled: bool  # estimated from stack samples
    native: bool = False  # traced, with the calibrated probe time taken out


def by_name(profiles: Sequence[Profile]) -> dict[str, list[FunctionStats]]:
    """Each function's stats in the runs that have it, in the runs' order."""
    by: dict[str, list[FunctionStats]] = {}
    for p in profiles:
        for f in p.functions:
            by.setdefault(f.name, []).append(f)
    return by


class Runs(tuple):
    """One commit's runs as a cache key: the same profile objects (a profile holds dicts, so it has
    no hash of its own; identity is what a reader's cache hands out again)."""

    def __hash__(self):
        if "_hash" not in self.__dict__:  # (asked on every lookup of one of its functions)
            self.__dict__["_hash"] = hash(tuple(map(id, self)))
        return self.__dict__["_hash"]

    def __eq__(self, other):
        return len(self) == len(other) and all(a is b for a, b in zip(self, other))


@dataclass(frozen=True)
class Exact:
    """The functions that every one of a set of runs counted (none sampled in any run), as arrays: a row
    a function (`names`, `stats`: its stats in each run), a column a run.  `times` in `run_times`'
    measure, decided per row (`native`); `total`, `own`, `calls`: the centers of the rows' times,
    exclusive times and counts.  Most functions of a side are these, read at once by `timings` and a
    check's sides (`checks.sides`); the others one at a time."""

    names: list[str]
    stats: list[tuple[FunctionStats, ...]]
    raw: np.ndarray  # their inclusive times (`total_ns`)
    times: np.ndarray
    native: np.ndarray
    probes: np.ndarray
    exclusive: np.ndarray
    counts: np.ndarray
    total: np.ndarray
    own: np.ndarray
    calls: np.ndarray


_SAMPLED = operator.attrgetter("sampled")
_VALUES = operator.attrgetter(*NUMBERS[:4])  # (`exact`'s, in its order)


@functools.lru_cache(maxsize=8)
def exact(runs: Runs, native_allowed: bool) -> Exact:
    """`Exact` of `runs` (remembered for the last few: a commit's runs are the target of its check, the
    rows of its summaries and the base of its child's check)."""
    names, rows, values = _counted(runs)
    raw, probes, exclusive, counts = (values[:, :, k] for k in range(4))
    native = (probes <= CORRECTABLE_SHARE * raw).all(axis=1) & native_allowed
    times = np.where(native[:, None], np.maximum(raw - probes, 0.0), raw)
    out = Exact(names, rows, raw, times, native, probes, exclusive, counts,
                *(inference.row_medians(m) for m in (times, exclusive, counts)))
    for a in (raw, probes, exclusive, counts, times, native, out.total, out.own, out.calls):  # (read-only: shared)
        a.flags.writeable = False
    return out


def aligned_numbers(runs: Sequence[Profile]) -> np.ndarray | None:
    """The runs' `Profile.numbers` at once (function x run x number) where every run lists the same
    functions in the same order (the runs of one plan: most of them); None where they differ."""
    first = runs[0].function_names
    if any(p.function_names != first for p in runs[1:]):
        return None
    return np.stack([p.numbers for p in runs], axis=1)


def _counted(runs: Runs) -> tuple[list[str], list[tuple[FunctionStats, ...]], np.ndarray]:
    """The functions every run counted (in the first run's order), their stats in each run, and their
    `NUMBERS` but `sampled`, the last (function x run x number): from the runs' arrays where they line
    up (`aligned_numbers`), else one function at a time."""
    first = runs[0].function_names if runs else []
    if runs and (v := aligned_numbers(runs)) is not None:
        keep = (v[:, :, NUMBERS.index("sampled")] == 0).all(axis=1)
        rows = list(itertools.compress(zip(*(p.functions for p in runs)), keep.tolist()))
        return list(itertools.compress(first, keep.tolist())), rows, v[keep, :, :4]
    rows = [fs for fs in zip(*(p.functions_named(first) for p in runs))
            if None not in fs and not any(map(_SAMPLED, fs))]
    # (from one iterator of every value: numpy reads nested lists of ints at twice the cost)
    values = np.fromiter(itertools.chain.from_iterable(map(_VALUES, itertools.chain.from_iterable(rows))), float,
                         4 * len(rows) * len(runs)).reshape(len(rows), len(runs), 4)
    return [fs[0].name for fs in rows], rows, values


def timings(profiles: Sequence[Profile], pool: Pool | None = None,
            by: dict[str, list[FunctionStats]] | None = None) -> dict[str, Timing]:
    """Every function's time a run over `profiles` (runs of one configuration and plan); `pool`: their
    stacks pooled already; `by`: their functions `by_name` already."""
    by = by_name(profiles) if by is None else by
    if not by:
        return {}
    if pool is None and all(p.stacks for p in profiles):
        pool = Pool.of(profiles)
    cpu = inference.center([on_cpu_ns(p) for p in profiles])
    out, counted = {}, _exact_timings(exact(Runs(profiles), True))
    for name, fs in by.items():
        if name in counted:
            out[name] = counted[name]
        elif all(stack_only(f) for f in fs):
            out[name] = _sampled(name, fs, profiles, pool, cpu)
        else:
            out[name] = _traced(name, [f for f in fs if not stack_only(f)], profiles, len(fs) < len(profiles))
    return out


def run_times(fs: Sequence[FunctionStats], native_allowed: bool = True) -> tuple[list[float], bool, list[float]]:
    """A function's runs' times (`fs`: its stats in the runs that have it) in the measure `show` prints
    and a check compares: native estimates (`FunctionStats.native_ns`) where every run's is usable
    (`.correctable`) and `native_allowed`, else the probed totals; whether native; the probe times.
    (The two properties' rule on values read once: every function of every side the index checks
    asks, and the properties were a fifth of measuring a side.)"""
    raw, probes = [float(f.total_ns) for f in fs], [float(f.probe_ns) for f in fs]
    if native_allowed and all(p <= CORRECTABLE_SHARE * t for p, t in zip(probes, raw)):
        return [max(t - p, 0.0) for t, p in zip(raw, probes)], True, probes
    return raw, False, probes


def _exact_timings(e: Exact) -> dict[str, Timing]:
    """`_traced`'s figures of the functions every run counted, from their arrays."""
    runs, probed = e.times.shape[1], (e.native & e.probes.any(axis=1)).tolist()
    return {n: Timing(t, o, c, runs, False, p)
            for n, t, o, c, p in zip(e.names, e.total.tolist(), e.own.tolist(), e.calls.tolist(), probed)}


def _traced(name: str, fs: list[FunctionStats], profiles: Sequence[Profile], lacking: bool) -> Timing:
    """`lacking`: some run lacks the function (where its plan traced it, that run measured 0)."""
    zeros = [0.0] * (sum(1 for p in profiles if p.function(name) is None and p.plan.is_traced(name)) if lacking else 0)
    times, native, probes = run_times(fs)
    return Timing(inference.center(times + zeros), inference.center([float(f.exclusive_ns) for f in fs] + zeros),
                  inference.center([float(f.count) for f in fs] + zeros), len(fs), any(f.sampled for f in fs),
                  native and any(probes))


def _sampled(name: str, fs: list[FunctionStats], profiles: Sequence[Profile], pool: Pool | None,
             cpu: float) -> Timing:
    # own time: each run's estimate from the samples the kernel counted in its code (or a library it
    # called), a run without one as 0
    own = sum(float(f.exclusive_ns) for f in fs) / len(profiles)
    if pool is None or not pool.total:
        return Timing(None, own, None, len(fs), True)
    if counted := sum(f.stack_samples for f in fs):
        own = counted * cpu / pool.total  # (shares of the same pooled samples as the inclusive time)
    return Timing(max(pool.holding(name, fs) * cpu / pool.total, own), own, None, len(fs), True)
