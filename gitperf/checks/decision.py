"""The decision of one comparison (ARCHITECTURE.md §10): every design hands in a `Tested` statistic
per function; `decide` turns them into a `Result` each.

p-values are Holm-adjusted over the functions of a workload with weights (`error_budget`): a
slowdown is far likelier where the code changed, and the family-wise level holds for any fixed
weights.  A change is a degradation only if significant at `check.confidence` *and* its whole
interval lies beyond the threshold (`check.min_relative`, `check.min_absolute_ns`, `check.min_share` of
the run); wholly within it, no change; across it, unresolved (`verdict_of`).  An improvement is an
optimization and never fails."""

from __future__ import annotations

import math
from collections import Counter

import msgspec

from gitperf.checks.change import DEGRADATION, NO_CHANGE, OPTIMIZATION, UNRESOLVED
from gitperf.core.config import CheckConfig
from gitperf.core.model import ROOT
from gitperf.stats import inference


ROOT_SHARE = 0.25  # of the error budget, for the workload total


CHANGED_SHARE = 0.5  # of the error budget left after the root, for the functions the commit changed


class Tested(msgspec.Struct):  # (Structs, these two: `checks.sides.Side` says why)
    """One function's test statistic on the log scale, its standard error and where the noise came from."""

    name: str
    statistic: float
    se: float
    df: float
    noise: str
    # a test of the median call instead of the time a run: each side's center of calls x median call
    # (base, target; ns a run), so that the relative change x base is the time a run gained
    per_call: tuple[float, float] | None = None
    # the base value the relative change applies to (ns a run) when it is not the center of the base
    # side's totals (pooled inclusive samples), and what that value measures (`Change.measure`)
    base_ns: float | None = None
    measure: str = ""
    # own (exclusive) time before and after (ns a run) in the same measure, when the test has its own
    exclusive: tuple[float, float] | None = None


class Result(msgspec.Struct):
    """One test's outcome, scipy-style: the statistic (log ratio), its Holm-adjusted one-sided
    p-values, and the interval of the relative change at the check's confidence."""

    tested: Tested
    p_worse: float
    p_better: float
    ci: tuple[float, float]

    def pvalue(self, sign: int) -> float:
        """The p-value of the direction the statistic points to."""
        return self.p_worse if sign * self.tested.statistic > 0 else self.p_better


def decide(tested: list[Tested], changed: frozenset[str], cfg: CheckConfig, sign: int,
            run_ns: dict[str, float]) -> list[Result]:
    """Holm-adjusted one-sided p-values (with the weighted budget) and intervals; a function tested
    twice (time a run, median call) keeps the test with the smaller p-value — the median call's only
    where it agrees with the time a run (`_agrees`; `run_ns`: each function's base time a run)."""
    names = [x.name for x in tested]
    weights, total = error_budget(names, changed)
    stats, ses, dfs = [sign * x.statistic for x in tested], [x.se for x in tested], [x.df for x in tested]
    worse = inference.holm(inference.p_slowers(stats, ses, dfs), weights, total)
    better = inference.holm(inference.p_slowers([-x for x in stats], ses, dfs), weights, total)
    results = [Result(x, pw, pb, ci) for x, pw, pb, ci in
               zip(tested, worse, better, inference.intervals([x.statistic for x in tested], ses, dfs, cfg.confidence))]
    if len(set(names)) == len(names):
        return results  # (no function tested twice: nothing to choose)
    per_run = {r.tested.name: r for r in results if r.tested.per_call is None}
    best: dict[str, Result] = {}
    for r in results:
        if r.tested.per_call is not None and not _agrees(r, per_run.get(r.tested.name), run_ns.get(r.tested.name, 0.0)):
            continue
        if r.tested.name not in best or min(r.p_worse, r.p_better) < min(best[r.tested.name].p_worse,
                                                                           best[r.tested.name].p_better):
            best[r.tested.name] = r
    return list(best.values())


def _agrees(call: Result, run: Result | None, base_ns: float) -> bool:
    """Whether the time a run that a median call's change implies (calls x median call gained) lies
    within the interval of the same function's time a run.  Calls of several sizes (snappy's
    `Uncompress` of four files, 150 calls each) put the median between two of them, and a build that
    reorders the sizes moves it from one to the other: the median call read +51 ms a run (+232%)
    where the run gained ~2 ms, and its callee's -49 ms, each "significant".  Where the time a run is
    noisy (Lua's `luaH_resize`: a few huge calls) its interval is wide and the median call adds
    power; where it is tight and excludes what the median call implies, the median call measures
    something else."""
    if run is None:
        return True
    gained = math.expm1(call.tested.statistic) * call.tested.per_call[0]
    return run.ci[0] * base_ns <= gained <= run.ci[1] * base_ns


def floor_ns(cfg: CheckConfig, run_ns: float) -> float:
    """The smallest change a run (`run_ns`: the workload's time a run, in the measure the function's
    test uses; 0 = unknown) can call a verdict: `min_absolute_ns`, or `min_share` of the run."""
    return max(cfg.min_absolute_ns, cfg.min_share * run_ns)


def threshold(base_ns: float, cfg: CheckConfig, run_ns: float = 0.0) -> float:
    """The relative change a verdict must lie beyond: `min_relative`, or `floor_ns` of the run in units
    of the function's base value when that is more (infinite without a base value)."""
    return max(cfg.min_relative, floor_ns(cfg, run_ns) / base_ns) if base_ns > 0 else math.inf


BEYOND, WITHIN, ACROSS = "beyond", "within", "across"


def band(low: float, high: float, t: float) -> str:
    """Where an interval of a relative change lies against the threshold ±t: wholly beyond it (on one
    side), wholly within it, or across it (undefined bounds are across: nothing is excluded)."""
    if low >= t or high <= -t:
        return BEYOND
    return WITHIN if -t < low and high < t else ACROSS


def verdict_of(r: Result, t: float, cfg: CheckConfig, sign: int) -> tuple[str, float]:
    """One rule, three outcomes (ARCHITECTURE.md §10, "Three outcomes"), on the interval at the check's
    confidence against the threshold ±t (`threshold`): wholly beyond it, and significant after Holm, a
    degradation or optimization; wholly within it, no change; across it, unresolved.  As rounds
    accumulate the interval narrows around the change, so an outcome moves from unresolved to one of
    the other two, and not between them (a point estimate against the threshold flipped a re-check of
    the same pair: issue #55).  Returns the outcome and the confidence of the direction."""
    x, p = r.tested, r.pvalue(sign)
    where = band(r.ci[0], r.ci[1], t)
    if where == BEYOND and p <= 1 - cfg.confidence and sign * x.statistic != 0:
        return (DEGRADATION if sign * x.statistic > 0 else OPTIMIZATION), 1 - p
    return (NO_CHANGE if where == WITHIN else UNRESOLVED), 1 - p


def resolvable_from(low: float, high: float, t: float) -> float:
    """The smallest change these measurements could call a verdict: the threshold plus the interval's
    half-width (an interval as wide as this one, centred on a change that large, lies beyond ±t)."""
    return t + (high - low) / 2


UNRESOLVED_WORDS = "unresolved: "  # how `unresolved_words` begins (the index splits a method there)


def unresolved_words(low: float, high: float, t: float) -> str:
    """What an unresolved outcome says, the same in every view: the interval, the threshold it reaches
    across, and the smallest change these measurements could have called (`resolvable_from`)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{UNRESOLVED_WORDS}not measured on both sides, a change beyond ±{t:.0%} of any size could go unseen"
    return (f"{UNRESOLVED_WORDS}a change between {low:+.0%} and {high:+.0%} cannot be told from ±{t:.0%}; these "
            f"measurements resolve a change from ±{resolvable_from(low, high, t):.0%} (a re-check adds rounds)")


def holm_note(tested: list[Tested], changed: frozenset[str]) -> str:
    """What every function's method ends with: the family its test was corrected in."""
    k = len({x.name for x in tested if x.name in changed})
    functions = f"{k} function{'s' if k != 1 else ''}"
    return f", Holm over {len(tested)} tests" + (f" ({functions} changed in the diff)" if k else "")


def error_budget(names: list[str], changed: frozenset[str]) -> tuple[list[float], float]:
    """Holm weights and the budget they are shares of: the workload total gets ROOT_SHARE of the error
    budget (it answers the first question, "is the program slower?"), the functions the commit
    changed CHANGED_SHARE of the rest, the other functions what remains, split evenly within each
    group (a function's share split evenly between its tests).  The changed functions' share is
    theirs even when the commit changed none: a function the commit did not touch is tested at the
    same level whatever else it touched, so a commit that changed no function (a comment, a test, the
    docs) does not double the level of every other (`bench/dashboard.py`: 1 harmless commit of 991
    alarmed by a 4-sigma draw at twice the level).  Where no function is left untouched, the changed
    ones have all of the rest."""
    times = Counter(names)  # a function tested twice splits its share between its tests
    groups = {"root": [n for n in times if n == ROOT], "changed": [n for n in times if n != ROOT and n in changed]}
    groups["other"] = [n for n in times if n != ROOT and n not in changed]
    share = {"root": ROOT_SHARE} if groups["root"] else {}
    if groups["other"]:
        share.update(changed=(1 - ROOT_SHARE) * CHANGED_SHARE, other=(1 - ROOT_SHARE) * (1 - CHANGED_SHARE))
    elif groups["changed"]:
        share["changed"] = 1 - ROOT_SHARE
    each = {n: share[g] / len(ns) for g, ns in groups.items() for n in ns}  # (a function's share of its group's)
    return [each[n] / times[n] for n in names], sum(share.values())
