"""One workload, target runs against base runs (ARCHITECTURE.md §10): every function's change,
its confidence and the other methods' opinions.  Pure: profiles in, `Change`s out.

For every function the quantity compared is its inclusive time per run, on a log scale.  The rooms:

* `sides`: what each side measured (`Sides`, a function's `Side`) and which functions pair up;
* `noisemodel`: how much a difference of centers varies when nothing changed;
* `designs.paired`, `designs.pooled`, `designs.history`: one test design each (interleaved rounds;
  stack samples pooled over rounds; separate sessions against the history);
* `decision`: Holm over the tests, intervals, the verdict's rule; `opinions`: the votes beside it.

The steps (`compare_workload`): `sides.pair` (which functions have two comparable sides) ->
`_shared` (what all tests share: the `Rounds`, the common shift and spreads, the history) ->
`_tests` (one test per function, chosen by `DESIGN` from what its sides allow, and the changed
functions' median calls: a `Tested` statistic each) -> `decision.decide` (Holm, intervals: a
`Result` per function) -> `_change` (the verdict with its opinions).
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, replace

from gitperf.checks.change import DEGRADATION, UNRESOLVED, Change
from gitperf.checks.decision import Result, Tested, decide, holm_note, threshold, unresolved_words, verdict_of
from gitperf.checks.designs.history import history_levels, root_runs, sessions_alike, test_residual, test_root
from gitperf.checks.designs.paired import Rounds, call_tests, paired_diffs, paired_s0, test_paired
from gitperf.checks.designs.pooled import pooled_tests
from gitperf.checks.noisemodel import MIN_HISTORY, Sessions, Shift, center_spreads, is_exact, session_noise, shift_of
from gitperf.checks.opinions import level_shift_since, opinions_of
from gitperf.checks.sides import Side, Sides, pair, run_time
from gitperf.core.config import CheckConfig
from gitperf.core.model import ROOT
from gitperf.stats.votes import robust_z
from gitperf.stats.timing import Timing, timings


@dataclass(frozen=True)
class _Shared:
    """What every function's test and verdict in one comparison share, built once."""

    sides: Sides
    cfg: CheckConfig
    rounds: Rounds | None
    shift: Shift
    # the history's commits and each one's center per function, nearest first (a function's series is
    # read for the root's test, opinions and degradations only: `history`)
    levels: list[tuple[str, dict[str, float]]]
    paired: dict[str, list[float]]  # per function: its per-round log ratios (paired rounds)
    sign: int  # 1: lower is better ("higher": a larger value is better)
    opinions: bool
    sessions: Sessions | None  # the residuals' session-to-session noise in the history (unpaired tests)
    run_ns: float = 0.0  # the workload's time a run (`sides.run_time`: what check.min_share is a share of)

    @functools.cached_property
    def base_times(self) -> dict[str, Timing]:
        """The base side's times a run as `show` prints them (`stats.timing`; asked for only where a
        stack-sampled function's test has no base value of its own)."""
        return timings([p.profile for p in self.sides.base])

    def base_value(self, n: str, b: Side) -> float:
        """The value a function's relative change applies to where its test does not say: the center
        of its base runs, or for a stack-only function its samples pooled over them (`show`'s figure)."""
        t = self.base_times.get(n) if b.sampled else None
        return t.exclusive_ns if t is not None and t.calls is None else b.total

    @functools.cached_property
    def common_shift(self) -> str:
        """The common shift in words, which every unpaired change's method and measure quote."""
        return f"{math.expm1(self.shift.common):+.1%}"

    def history(self, n: str) -> list[tuple[str, float]]:
        """(commit, center) of function `n` in the history, nearest first; a commit it is missing from
        is skipped, so that each value keeps its commit for `since`."""
        return [(c, lv[n]) for c, lv in self.levels if n in lv]

    def values(self, n: str) -> list[float]:
        return [v for _, v in self.history(n)]


def _sizes(both: dict[str, tuple[Side, Side]]) -> dict[str, float]:
    return {n: b.total for n, (_t, b) in both.items()}


def _shared(sides: Sides, both: dict[str, tuple[Side, Side]], cfg: CheckConfig, opinions: bool) -> _Shared:
    # the history enters only through each commit's center (noise, robust z, change points)
    commits = sides.history_commits + [""] * (len(sides.history) - len(sides.history_commits))
    levels = [_sizes(both)]
    native = {t.native for t, _b in both.values()}
    levels += [history_levels(h, both, next(iter(native)) if len(native) == 1 else None) for h in sides.history]
    rs = Rounds.of(sides)
    shift = shift_of(both, cfg, None if rs else levels[0])  # (paired rounds test no replicate spreads)
    sessions = None
    if not rs:
        exact = {n: shift.log_ratio[n] - shift.common for n in shift.big if is_exact(*both[n])}
        sessions = session_noise(levels, shift.big, exact, statistics.median([len(h) for h in sides.history] or [0]))
        held = {n for n, v in both.items()
                if sessions and n in sessions.noise and sessions_alike(*v, sessions)} - {ROOT}
        shift = replace(shift, centers=center_spreads(sides, {n: v for n, v in both.items() if n not in held}))
    return _Shared(sides, cfg, rs, shift, list(zip(commits, levels[1:])), paired_diffs(rs, both),
                   1 if cfg.direction == "lower" else -1, opinions, sessions, run_time(sides))


# Which test a function gets, from what its two sides allow: (pooled samples on both sides, per-round
# values on both sides, the workload total).  Pooled samples take precedence: a sampled function's
# per-round values are a few samples each.
DESIGN = {(True, True, True): "pooled", (True, True, False): "pooled", (True, False, True): "pooled",
          (True, False, False): "pooled", (False, True, True): "paired", (False, True, False): "paired",
          (False, False, True): "session", (False, False, False): "residual"}


def _tests(sh: _Shared, both: dict[str, tuple[Side, Side]], changed: frozenset[str]) -> list[Tested]:
    """Each function's test (DESIGN), and the changed functions' median-call tests beside them."""
    pooled, s0 = pooled_tests(sh.sides, sh.rounds, both, changed), paired_s0(sh.paired, both, sh.cfg.min_absolute_ns)
    run = {"pooled": lambda n, t, b: pooled[n],
           "paired": lambda n, t, b: test_paired(n, sh.paired[n], s0[t.sampled or b.sampled], t, b),
           "session": lambda n, t, b: test_root(t, b, sh.shift, sh.values(n), root_runs(sh.sides, t, b)),
           "residual": lambda n, t, b: test_residual(n, t, b, sh.shift, sh.sessions)}
    out = [run[DESIGN[n in pooled, n in sh.paired, n == ROOT]](n, t, b) for n, (t, b) in both.items()
           if n in pooled or not t.unseen]  # (a count of 0 has the pooled test only)
    return out + call_tests(sh.rounds, both, changed)


def _method(sh: _Shared, r: Result, how: str) -> str:
    return _method_words(r.tested.name == ROOT and not sh.paired, bool(r.tested.per_call), bool(sh.paired),
                         sh.common_shift, how)


@functools.lru_cache(maxsize=64)  # (every function's change: a few kinds a check)
def _method_words(root_alone: bool, per_call: bool, paired: bool, shift: str, how: str) -> str:
    what = ("workload total vs session noise" if root_alone else "median call x calls, paired rounds" if per_call else
            "paired rounds" if paired else f"residual vs common shift {shift}")
    return what + how


def _change(sh: _Shared, sides: tuple[Side, Side], r: Result, method: str, changed: bool) -> Change:
    """One function's verdict with its interval, the history's opinion and the other methods' votes."""
    (t, b), x = sides, r.tested
    run_t = t.total  # the time a run, for the history's z-score and change points
    # one estimate for every number (ARCHITECTURE.md §10, "One estimate per number"): the base value
    # the test's change applies to, and the target value, change and interval all from the statistic
    mb = x.base_ns if x.base_ns is not None else x.per_call[0] if x.per_call else sh.base_value(x.name, b)
    mt = mb * math.exp(x.statistic)
    limit = threshold(mb, sh.cfg, sh.run_ns)
    kind, conf = verdict_of(r, limit, sh.cfg, sh.sign)
    if kind == UNRESOLVED:
        method += "; " + unresolved_words(*r.ci, limit)
    h = sh.values(x.name) if sh.opinions else []  # (the z-score is an opinion; the index asks for none)
    z = robust_z(run_t, h) if len(h) >= MIN_HISTORY else None
    votes, per_call = opinions_of(t, b, z, sh.cfg, sh.sign) if sh.opinions else ({}, None)
    since = level_shift_since(sh.history(x.name), run_t, 1 - sh.cfg.confidence, sh.sign) if kind == DEGRADATION else None
    return Change(
        workload=sh.sides.workload, function=x.name, type=kind, relative=math.expm1(x.statistic),
        absolute_ns=mt - mb, measure=x.measure or _measure(sh, t, b, x),
        exclusive_delta_ns=(x.exclusive[1] - x.exclusive[0] if x.exclusive else
                            t.own - b.own), confidence=conf,
        ci_low=r.ci[0], ci_high=r.ci[1], method=method, location=t.location or b.location, base_ns=mb, target_ns=mt,
        base_calls=b.calls, target_calls=t.calls,
        noise=x.noise + ("" if t.native else "; probed time"), history_z=z, since=since, votes=votes,
        changed=changed, statistic=x.statistic, per_call_ci=per_call)


def _measure(sh: _Shared, t: Side, b: Side, x: Tested) -> str:
    """What a change's before and after values are, when the test did not say (`Change.measure`)."""
    return _measure_words(t.sampled or b.sampled, t.native and b.native,
                          "" if x.name == ROOT or sh.paired else sh.common_shift)


@functools.lru_cache(maxsize=64)  # (every function's change: a few kinds a check)
def _measure_words(sampled: bool, native: bool, shift: str) -> str:
    if sampled:
        what = "own time per run (stack samples x time on a CPU)"
    else:
        what = "inclusive time per run" + (", probes taken out" if native else " (probed time)")
    return what + f", net of the common shift {shift}" if shift else what


def compare_workload(sides: Sides, cfg: CheckConfig, changed: frozenset[str] = frozenset(),
                     opinions: bool = True) -> list[Change]:
    """Every function of one workload: target runs vs base runs, with the history for the
    workload's noise, the robust z-score and change points (see the module's docstring)."""
    simple, both = pair(sides)  # 1. which functions have two comparable sides
    if not both:
        return simple
    sh = _shared(sides, both, cfg, opinions)  # 2. what all tests share: rounds, common shift, history
    tested = _tests(sh, both, changed)  # 3. one test per function (and median calls)
    run_ns = {x.name: x.base_ns if x.base_ns is not None else both[x.name][1].total
              for x in tested if x.per_call is None}
    results = decide(tested, changed, cfg, sh.sign, run_ns)  # 4. Holm, intervals, one result per function
    how = holm_note(tested, changed)
    return simple + [_change(sh, both[r.tested.name], r, _method(sh, r, how), r.tested.name in changed)
                     for r in results]  # 5. verdicts with opinions
