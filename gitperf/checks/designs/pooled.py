"""The pooled design (ARCHITECTURE.md §10): paired rounds in which a function is covered by stack
samples only, a few a run: each side's samples pooled over its runs, inclusive of the function's
callees, against the spread of the rounds' run times (`pooled_tests`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from gitperf.checks.decision import Tested
from gitperf.checks.designs.paired import Rounds
from gitperf.checks.sides import Side, Sides
from gitperf.core.model import StoredProfile
from gitperf.stats import inference
from gitperf.stats.timing import Pool, Timing, on_cpu_ns, timings


MIN_POOLED_ROUNDS = 3  # pooled samples: the run-time ratio's spread over the rounds needs three


# Identical machine code can still run at a different speed in another build: where its code landed
# (pages, cache sets) is not its code.  A function the diff did not change is compared with this much
# more spread between the two builds: only a change well beyond it is a verdict (the A/A figures:
# ARCHITECTURE.md §10, "Paired rounds").
PLACEMENT_SPREAD = 0.2


def _stats(profiles: list[StoredProfile], n: str) -> list:
    return [f for p in profiles if (f := p.profile.function(n))]


def _own_samples(profiles: list[StoredProfile], n: str) -> int:
    """The samples the kernel counted in `n`'s code, not those taken in a library it called (which the
    stack gives it, a stale return address sometimes wrongly)."""
    return sum(f.stack_samples - f.library_samples for f in _stats(profiles, n))


def _counts(profiles: list[StoredProfile], pool: Pool | None) -> tuple[int, Callable[[str], int]]:
    """One side's stack samples pooled over its runs: all of them, and per function its samples
    (inclusive, from `pool`: every sample whose stack holds it, once; else its own code's)."""
    if pool is not None:
        return pool.total, lambda n: pool.holding(n, _stats(profiles, n))
    return sum(p.profile.metrics.stack_samples for p in profiles), lambda n: _own_samples(profiles, n)


def rooted_share(profiles: list[StoredProfile]) -> float:
    """The share of a side's stack samples (probe time aside) whose stack unwound to the root (1 with
    no samples): the rest stop early, in a library built without frame pointers, and count for the
    frames found below the cut only."""
    m = [p.profile.metrics for p in profiles]
    taken = sum(x.stack_samples - x.probe_samples for x in m)
    return min(sum(x.rooted_samples for x in m) / taken, 1.0) if taken > 0 else 1.0


def pooled_tests(sides: Sides, rs: Rounds | None, both: dict[str, tuple[Side, Side]],
            changed: frozenset[str]) -> dict[str, Tested]:
    """Paired rounds, functions only stack samples cover on both sides: a few samples a run make
    per-round ratios useless, so each side's samples are pooled over its runs.  A function's time is
    its share of the samples x run time, **inclusive of its callees**: every sample whose stack holds
    it counts, once (`core.stacks.inclusive`, as `perf report --children`), so a new callee's time and
    a library's are its caller's too (a C++ member slowed 3x through a new `std::map` lookup and
    `memcmp` had gained nothing in its own code).  The log ratio of the pooled shares (multinomial:
    variance 1/k_t + 1/k_b) plus the center of the per-round log ratios of run time (its spread over
    the rounds).  A stack cut short (a library without frame pointers: `rooted_share`, which the check
    reports) counts for the frames found below the cut, so an inclusive count is never less than the
    own-code one.  Where a profile has no stacks (taken before they were kept), own-code samples
    are compared, on both sides (like with like), and the noise says so.  A function the diff did
    not change carries PLACEMENT_SPREAD besides."""
    if not rs or len(rs) < MIN_POOLED_ROUNDS:
        return {}
    inclusive = all(p.profile.stacks for p in sides.target + sides.base)
    both_sides = _Pooled.of(sides, rs, inclusive)
    out = {}
    for n, (t, b) in both.items():
        if not (t.sampled and b.sampled):
            continue
        # inclusive where the kept stacks hold its samples (or the kernel counted them in its code) on
        # both sides; else, without stacks, its own code's samples as the kernel counted them
        how = next((h for h in (inclusive, False) if all(total and (count(n) or side.unseen) for (total, count), side
                                                          in zip(both_sides.pools[h], (t, b)))), None)
        if how is None:
            continue  # a ratio needs a sample on each side (or a target `unseen`); the unpaired test decides
        # (a few samples are still the pooled estimate, with the wide interval they carry: the median of
        # per-round ratios of a function caught once in 30 runs read -0.5% where its pooled samples,
        # the time `show` prints, read 3.3 us -> 22.7 us, Lua's luaH_getn)
        out[n] = _tested(n, both_sides, how, 0.0 if n in changed else PLACEMENT_SPREAD)
    return out


@dataclass(frozen=True)
class _Pooled:
    """What every function's pooled test of one comparison shares: per kind (inclusive or own code)
    the target's and the base's `_counts`, the rounds' run-time log ratio and its variance, each side's
    figures as `show` prints them (base, target) and the base's time on a CPU."""

    pools: dict[bool, tuple]
    wall: float
    wall_var: float
    timed: tuple[dict[str, Timing], dict[str, Timing]]
    base_cpu: float

    @staticmethod
    def of(sides: Sides, rs: Rounds, inclusive: bool) -> _Pooled:
        target, base = [p.profile for p in sides.target], [p.profile for p in sides.base]
        pool_t, pool_b = (Pool.of(target), Pool.of(base)) if inclusive else (None, None)
        pools = {how: (_counts(sides.target, pool_t if how else None), _counts(sides.base, pool_b if how else None))
                 for how in {inclusive, False}}
        walls = [math.log(max(t.profile.metrics.PRT, 1e-9) / max(b.profile.metrics.PRT, 1e-9)) for t, b in rs.pairs()]
        spread = inference.spread(walls)[0] ** 2 * inference.center_var(len(walls))
        return _Pooled(pools, inference.center(walls), spread, (timings(base, pool_b), timings(target, pool_t)),
                       inference.center([on_cpu_ns(p) for p in base]))


def _tested(n: str, both: _Pooled, inclusive: bool, placement: float) -> Tested:
    """One function's pooled test (`pooled_tests`), in `inclusive` or own-code samples."""
    (total_t, count_t), (total_b, count_b) = both.pools[inclusive]
    k_t, k_b = count_t(n), count_b(n)
    # no sample on the target (`sides.unseen`): half a sample on each side (Haldane's correction), the
    # log ratio and its variance finite; its interval is then as wide as so few samples leave it
    at_t, at_b = (k_t, k_b) if k_t else (0.5, k_b + 0.5)
    stat = math.log((at_t / total_t) / (at_b / total_b)) + both.wall
    between = f", ±{placement:.0%} between builds" if placement else ""
    what = "inclusive" if inclusive else "own code"
    none = "" if k_t else "; none on the target: half a sample added to each side"
    tb, tt = both.timed[0][n], both.timed[1].get(n)
    # stack-only on both sides (a target without samples of it too): show's figures
    alike = tb.calls is None and (tt is None or tt.calls is None)
    base_ns = (tb.inclusive_ns if inclusive else tb.exclusive_ns) if alike else k_b / total_b * both.base_cpu
    return Tested(n, stat, math.sqrt(1 / at_t + 1 / at_b + both.wall_var + placement ** 2), math.inf,
                  f"pooled samples {k_b} -> {k_t} ({what}{none}){between}", base_ns=base_ns,
                  measure=f"{what} time per run (stack samples x time on a CPU)",
                  # own time in the same measure (shares of the same samples): within its inclusive
                  exclusive=(tb.exclusive_ns, tt.exclusive_ns if tt else 0.0) if alike and inclusive else None)
