"""One workload, target runs against base runs (ARCHITECTURE.md §10): every function's change,
its confidence and the other methods' opinions.  Pure: profiles in, `Change`s out.

For every function the quantity compared is its inclusive time per run, on a log scale.  Two
levels, because on a shared machine the runs of one collection share its luck: all of them may be
20% slower than the last collection's (measured on the demo).

* The workload's total (the root function) is tested against that session-to-session noise,
  estimated from the history, else assumed (PRIOR_SESSION_SIGMA).
* Every other function is tested on its *residual*: its log ratio minus the median log ratio of
  all functions (the common shift of this pair of sessions).  Given `MIN_HISTORY` commits of
  history, its noise is its own session-to-session spread of that residual there (`_sessions`),
  moderated by empirical Bayes towards functions of its size (`inference.squeeze`, limma's moderated
  t with its trend) and widened when this pair is noisier than the history; with less, the larger of
  its replicate spread (moderated the same way) and the cross-section spread of the residuals.  A
  function that got slower while the rest of the program did not stands out however lucky either
  session was.  (The runs of one session share more than its common shift: on the demo's full trace
  `text_generate` spread 10% between the runs of one session and 15% between sessions, and
  replicates alone raised 6 false alarms in 90 A/A pairs in CI.)

p-values are Holm-adjusted over the functions of a workload with weights (`error_budget`): a
slowdown is far likelier where the code changed, and the family-wise level holds for any fixed
weights.  A change is a degradation only if significant at `check.confidence` *and* at least
`check.min_relative` and `check.min_absolute_ns`; an improvement is an optimization and never
fails.  The thesis' methods (average amount, integral comparison of models, local statistics), a
Mann-Whitney test over the sampled calls, a bootstrap of the mean call, the robust z-score against
the history and change-point detection are reported as votes beside the verdict.

**Paired rounds.** When both sides were collected in interleaved rounds (`check --collect`: every
profile records its round), round r's two runs ran back to back and share the machine's state, so
each function is tested on its per-round log ratios instead: their median against their spread
(robust: `inference.spread`; moderated towards the median spread of the functions measured the
same way).  No common shift is taken out: pairing already removes the session's luck, and a change
that slows every function shows in every function.  A changed function is also tested on its median
call (`_call_tests`), which a few huge calls cannot hide; its two tests share its error budget.

Times are native estimates (`FunctionStats.native_ns`: inclusive time less the calibrated probe
time inside it); the calibration's uncertainty enters the test where the two sides' probe shares
differ.  Where probes are more than a fifth of a function's measured time (`CORRECTABLE_SHARE`)
the estimate would be mostly error, and the function is compared on its probed time if its probes
cost the same on both sides, else not at all: its verdict is withheld (see `_sides`).

The steps (`compare_workload`): `_pair` (which functions have two comparable sides) -> `_shared`
(what all tests share: the `Rounds`, the common shift and spreads, the history) -> `_tests` (one
test per function, chosen by `DESIGN` from what its sides allow, and the changed functions' median
calls: a `Tested` statistic each) -> `_decide` (Holm, intervals: a `Result` per function) ->
`_change` (the verdict with its opinions).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from gitperf.checks.change import DEGRADATION, NEW, NO_CHANGE, OPTIMIZATION, REMOVED, UNKNOWN, Change
from gitperf.core.config import CheckConfig
from gitperf.core import stacks
from gitperf.core.model import ROOT, FunctionStats, Profile, StoredProfile
from gitperf.stats import inference, models
from gitperf.stats.estimate import Z95

MIN_HISTORY = 4  # commits before the history's spread is trusted as a noise estimate
HISTORY_Z = 3.5  # Iglewicz & Hoaglin's outlier cut-off for the modified z-score
NOISE_FLOOR = 0.01  # 1%: timer and scheduling jitter never allow a tighter estimate
# Session-to-session SD of a workload's log total when there is no history to measure it: on these
# shared machines `main` of the demo had a CV of 5.3% over 8 collections of `default` and 6 of
# `small` one hour, and 9.7% over 10 of `small` the next.  On a 2-vCPU VM whose speed moves between
# two modes a session can fall wholly in either: 24 sessions of Lua at defaults (40 or 66 ms a run)
# spread 0.21 (the demo's 0.11), and at 0.12 the run was a finding in 9-11% of resampled A/A checks
# with under four commits of history, as often as in the checks of a real +21% slowdown
# (bench/resample.py --histories 0,1,2): no information.  Four commits of history replace it with a
# measurement.
PRIOR_SESSION_SIGMA = 0.20
MODERATION_DF = 4  # weight (in degrees of freedom) of the all-function spread in each function's noise
CHANGED_SHARE = 0.5  # of the error budget left after the root, for the functions the commit changed
ROOT_SHARE = 0.25  # of the error budget, for the workload total


@dataclass(frozen=True)
class Sides:
    """What one workload's comparison looks at: the target's and the base's runs (profiles of one
    comparison key) and the history before the base, nearest first."""

    workload: str
    target: list[StoredProfile]
    base: list[StoredProfile]
    history: list[list[StoredProfile]] = field(default_factory=list)
    history_commits: list[str] = field(default_factory=list)


def _renamed(sp: StoredProfile, new: dict[str, str]) -> StoredProfile:
    p = sp.profile
    frames = lambda stack: stacks.SEP.join(new.get(f, f) for f in stack.split(stacks.SEP))  # noqa: E731
    plan = replace(p.plan, probed=tuple(new.get(n, n) for n in p.plan.probed),
                   traced=tuple(new.get(n, n) for n in p.plan.traced))
    profile = replace(p, plan=plan, functions=tuple(replace(f, name=new.get(f.name, f.name)) for f in p.functions),
                      stacks={frames(k): v for k, v in p.stacks.items()},
                      instructions=tuple(replace(i, functions={new.get(n, n): v for n, v in i.functions.items()})
                                         for i in p.instructions))
    return replace(sp, profile=profile)


def in_target_names(sides: Sides) -> Sides:
    """The base's and the history's functions under the names the target gives them, where the
    target's diff tracing matched a function across a rename or a compiler clone's new number
    (`PlanRecord.renamed`): one function compared with itself, not a removed one and a new one."""
    new = {old: n for p in sides.target for old, n in p.profile.plan.renamed.items()}
    if not new:
        return sides
    return replace(sides, base=[_renamed(p, new) for p in sides.base],
                   history=[[_renamed(p, new) for p in ps] for ps in sides.history])


@dataclass(frozen=True)
class _Side:
    """One function on one side, per run."""

    totals: list[float]
    exclusive: list[float]
    counts: list[float]
    series: list[tuple[int, int]] = field(default_factory=list)
    location: str = ""
    sampled_var: float = 0.0  # variance of log(total) from sampling (0 when the totals are exact)
    sampled: bool = False  # estimated from samples in some profile (not traced there)
    native: bool = True  # times are native estimates (probe time taken out); else probed times
    probe: float = 0.0  # center of the runs' probe time (ns)
    probe_share: float = 0.0  # d log(time) / d log(probe cost): probe/native or probe/total (center of the runs)
    calibration_sd: float = 0.0  # relative uncertainty of the calibrated probe costs
    # the centers of the runs' totals, exclusive times and counts, which every test and change of the
    # side asks for (a side is the target of one check and the base of the next): computed once
    total: float = 0.0
    own: float = 0.0
    calls: float = 0.0

    @staticmethod
    def absent(runs: int) -> _Side:
        return _Side([0.0] * runs, [0.0] * runs, [0.0] * runs)


@dataclass(frozen=True)
class _Shift:
    """What all functions of the pair share: the common shift of their log ratios and the spreads."""

    log_ratio: dict[str, float]  # log(target center / base center) per function
    common: float  # the median log ratio of the functions above min_absolute_ns
    both: dict[str, tuple[_Side, _Side]] = field(repr=False)  # the sides the spreads below are read from
    sizes: dict[str, float] | None  # per function: its base center (unpaired runs; None paired): `replicates`
    big: list[str]  # the functions (not the root) above min_absolute_ns on both sides: the common shift's
    # per function: the SE of its difference of centers, resampled from the runs (`center_spreads`:
    # unpaired runs, where the test reads it)
    centers: dict[str, inference.Noise] = field(default_factory=dict)

    # The spreads below are computed when a test first asks: where the history's sessions hold every
    # function's noise (`_alike`, most of the index's checks) only the root's replicates are read.
    @functools.cached_property
    def cross(self) -> inference.Noise | None:
        """The cross-section spread of the residuals of the `big` functions."""
        return inference.cross_section_sigma([self.log_ratio[n] - self.common for n in self.big])

    @functools.cached_property
    def within(self) -> dict[str, inference.Noise | None]:
        """Per function: its replicate spread (`_within`)."""
        return _within(self.both)

    def within_of(self, n: str) -> inference.Noise | None:
        """One function's replicate spread: the root's alone where no other function asked (each
        function's spread is its own runs': the same alone or among all)."""
        return _within({n: self.both[n]})[n] if n == ROOT and "within" not in self.__dict__ else self.within[n]

    @functools.cached_property
    def replicates(self) -> dict[str, inference.Prior]:
        """Per function: its replicate variance's prior (unpaired runs; {} paired)."""
        if not self.sizes:
            return {}
        return _priors(list(self.within), {n: (w.sigma, w.df) for n, w in self.within.items() if w}, self.sizes)


@dataclass(frozen=True)
class Tested:
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


def _absent_is_zero(p: Profile, name: str) -> bool:
    """A run that lacks `name` measured it as 0 where its plan traced it (else it may have escaped the samples)."""
    return p.plan.is_traced(name)


# The calibration's spread between repetitions is 15-20% of a probe's cost on these VMs (CLASS_sd /
# CLASS), and what is left after taking probe time out carries all of the run's noise: at a half, the
# demo's full-trace A/A test (90 pairs of sessions) had 8 false alarms, at a fifth it stays within its
# level.  Beyond that share the estimate would be mostly error.  Such a function (a full trace of
# ns-scale functions: up to 99% probe time) is compared on its probed time, which like-with-like plans
# keep comparable.  (`core.model.CORRECTABLE_SHARE`, `FunctionStats.correctable`.)
# The calibration is measured once and serves runs taken hours later: its error against a run is the
# drift of the probe cost, which the spread of its three back-to-back repetitions can understate.
# 14 calibrations of each entry class within one hour on this VM: robust spread (MAD) 12-16% of the
# cost; single-stepped entries from 18 to 32 us around a median of 21 us.
CALIBRATION_DRIFT = 0.15
# Nor do the probes of two builds cost the same in interleaved runs, whatever the calibration says: on
# the demo's comment-only commit (byte-identical text and data), `insertion_sort`, ~95% probe time,
# measured +10.7% in 4 of 5 interleaved pairs, and the same two builds +1% over 8 more pairs (a
# property of where each build landed, not of its code).  Each side's probe time carries its own
# error of this relative size, independent of the other side's.
PROBE_COST_SPREAD = 0.05


AUTO, PROBED = "auto", "probed"  # which time `_side` reads: see CORRECTABLE_SHARE, PROBE_MATCH
# Probed times are comparable only if the probes cost the same on both sides: the same entry class
# (a commit that adds a local variable can turn a single-stepped `mov` entry into an emulated `push`:
# 5 us a call cheaper here) and as many probed calls inside.  Probe times within 2% of the function's
# time count as the same.
PROBE_MATCH = 0.02


class _Runs(tuple):
    """One commit's runs as a cache key: the same profile objects (a profile holds dicts, so it has
    no hash of its own; identity is what a reader's cache hands out again)."""

    def __hash__(self):
        if "_hash" not in self.__dict__:  # (asked on every lookup of one of its functions)
            self.__dict__["_hash"] = hash(tuple(map(id, self)))
        return self.__dict__["_hash"]

    def __eq__(self, other):
        return len(self) == len(other) and all(a is b for a, b in zip(self, other))


def _side(runs: _Runs, name: str, time_of: str = AUTO) -> _Side | None:
    """One function's runs on one side (None: no run measured it).  Remembered for the last few
    sides: the index checks its line in order, and a commit's target side is its child's base."""
    memo = _sides_of(runs, time_of)
    if name not in memo:
        memo[name] = _measure_side(runs, name, time_of)
    return memo[name]


@functools.lru_cache(maxsize=8)
def _sides_of(_runs: _Runs, _time_of: str) -> dict[str, _Side | None]:
    return {}


def _measure_side(runs: _Runs, name: str, time_of: str) -> _Side | None:
    fs: list[FunctionStats] = []
    probed: list[Profile] = []  # the runs that measured it: present, or absent as 0
    for p in runs:
        if (f := p.function(name)) is not None:
            fs.append(f)
            probed.append(p)
        elif _absent_is_zero(p, name):
            probed.append(p)
    if not probed:
        return None  # not measured here: neither present nor absent
    missing = [0.0] * (len(probed) - len(fs))
    var = 0.0
    for f in fs:
        if f.sampled and f.ci_low and f.ci_high and f.ci_low > 0:
            # stored intervals are 95% (Wilson for samples; bursts' t intervals are wider, so their
            # variance is overstated here: conservative)
            var += ((math.log(f.ci_high) - math.log(f.ci_low)) / (2 * Z95)) ** 2 / len(fs) ** 2
    native = time_of == AUTO and all(f.correctable for f in fs)
    measured = [float(f.native_ns) for f in fs] if native else [float(f.total_ns) for f in fs]
    # how much log(time) moves with a relative error of the probe cost: native = total - probe moves
    # by probe/native, a probed total by probe/total (at most all of it)
    shares = [f.probe_ns / max(t, 1) if native else min(f.probe_ns / max(t, 1), 1.0)
              for f, t in zip(fs, measured) if f.probe_ns]
    totals = measured + missing
    exclusive = [float(f.exclusive_ns) for f in fs] + missing
    counts = [float(f.count) for f in fs] + missing
    return _Side(totals=totals, exclusive=exclusive, counts=counts, total=inference.center(totals),
                 own=inference.center(exclusive), calls=inference.center(counts),
                 series=[s for f in fs for s in f.series],
                 location=next((f.location for f in fs if f.location), ""),
                 sampled_var=var, sampled=any(f.sampled for f in fs),
                 probe_share=inference.center(shares) if shares else 0.0,
                 calibration_sd=max([CALIBRATION_DRIFT] + [p.calibration_sd for p in probed])
                 if native else 0.0, native=native,
                 probe=inference.center([float(f.probe_ns) for f in fs]) if fs else 0.0)


def _not_in_binary(profiles: list[StoredProfile], name: str) -> bool:
    """Profiles that probed every function of their binary (strategy userspace) and did not leave
    `name` out on purpose show that the binary has no such function."""
    return all(p.profile.plan.strategy == "userspace" and name not in p.profile.plan.probed and
               not any(name in names for names in p.profile.plan.removed.values()) for p in profiles)


def _vote(rel: float, threshold: float) -> str:
    """A method's verdict on a relative change of time (lower is better)."""
    return DEGRADATION if rel >= threshold else OPTIMIZATION if rel <= -threshold else NO_CHANGE


def _votes(t: _Side, b: _Side, cfg: CheckConfig) -> dict[str, str]:
    """The thesis' methods and a rank test over sampled calls, as independent opinions."""
    out = {}
    mt = sum(t.totals) / max(sum(t.counts), 1)
    mb = sum(b.totals) / max(sum(b.counts), 1)
    if mb > 0:
        out["average-amount"] = _vote(mt / mb - 1, cfg.min_relative)
    ts = [d for _, d in t.series]
    bs = [d for _, d in b.series]
    if len(ts) >= 10 and len(bs) >= 10:
        alpha = 1 - cfg.confidence
        slower = inference.mann_whitney_slower(ts, bs)
        faster = inference.mann_whitney_slower(bs, ts)
        out["mann-whitney"] = DEGRADATION if slower < alpha else OPTIMIZATION if faster < alpha else NO_CHANGE
        tx, bx = np.array([o for o, _ in t.series], float), np.array([o for o, _ in b.series], float)
        mt_model = models.best_regression(tx, ts)
        mb_model = models.best_regression(bx, bs)
        lo, hi = max(tx.min(), bx.min()), min(tx.max(), bx.max())
        if hi > lo:
            ib = mb_model.integral(lo, hi)
            if ib > 0:
                out["integral"] = _vote(mt_model.integral(lo, hi) / ib - 1, cfg.min_relative)
        out["local-statistics"] = _local_statistics((tx, np.array(ts, float)), (bx, np.array(bs, float)),
                                                    cfg.min_relative)
    return out


def _local_statistics(target, base, threshold: float, intervals: int = 4) -> str:
    """Split the shared x range of the two (x, y) series into sub-intervals and compare the medians
    inside each; the verdict is the one a majority of intervals with data agree on."""
    (tx, ty), (bx, by) = target, base
    lo, hi = max(tx.min(), bx.min()), min(tx.max(), bx.max())
    if hi <= lo:
        return UNKNOWN
    edges = np.linspace(lo, hi, intervals + 1)
    votes = []
    for a, z in zip(edges[:-1], edges[1:]):
        t = ty[(tx >= a) & (tx <= z)]
        b = by[(bx >= a) & (bx <= z)]
        if len(t) >= 3 and len(b) >= 3 and np.median(b) > 0:
            rel = float(np.median(t) / np.median(b) - 1)
            votes.append(_vote(rel, threshold))
    if not votes:
        return UNKNOWN
    top = max(set(votes), key=votes.count)
    return top if votes.count(top) * 2 > len(votes) else NO_CHANGE


def _sides(target: _Runs, base: _Runs, n: str) -> tuple[_Side | None, _Side | None, bool]:
    """One function's two sides and whether they can be compared: in native estimates where both
    are correctable; else in probed time where the probes cost the same on both sides; else not.
    Native estimates of a function that is mostly probe time are mostly calibration error, and a
    calibration's error is a bias shared by every run, not noise: an overstated probe cost takes
    more out of the side with more probed calls, so a commit that makes fewer calls looks slower
    (the demo's speed-up did, in CI)."""
    t, b = _side(target, n), _side(base, n)
    if not t or not b or (t.native and b.native):
        return t, b, True
    tp, bp = _side(target, n, PROBED), _side(base, n, PROBED)
    scale = min(tp.total, bp.total)
    return tp, bp, abs(tp.probe - bp.probe) <= PROBE_MATCH * scale


WITHHELD = ("probes differ between the sides and outweigh its own time: neither its probed times nor its "
            "native estimates are comparable (check --collect probes only what changed)")


def _pair(sides: Sides) -> tuple[list[Change], dict[str, tuple[_Side, _Side]]]:
    """Every function seen on either side: new and removed ones as simple changes, and the ones
    measured on both sides, to be tested."""
    names = sorted({f.name for p in sides.target + sides.base for f in p.profile.functions})
    simple: list[Change] = []
    both = {}
    target, base = _Runs(p.profile for p in sides.target), _Runs(p.profile for p in sides.base)
    for n in names:
        t, b, like = _sides(target, base, n)
        if t is None and b is not None and _not_in_binary(sides.target, n):
            t = _Side.absent(len(sides.target))
        if b is None and t is not None and _not_in_binary(sides.base, n):
            b = _Side.absent(len(sides.base))
        if t is None or b is None or not (any(t.totals) or any(b.totals)):
            continue
        if t.sampled != b.sampled and any(t.totals) and any(b.totals):
            # hybrid: traced (inclusive time, exact) on one side, sampled (exclusive estimate) on the
            # other - two different quantities, never a change
            continue
        if not any(b.totals):
            simple.append(_simple(sides.workload, n, NEW, (t, b), "present only in target"))
        elif not any(t.totals):
            simple.append(_simple(sides.workload, n, REMOVED, (t, b), "not called in target"))
        elif not like:
            simple.append(_simple(sides.workload, n, UNKNOWN, (t, b), WITHHELD))
        else:
            both[n] = (t, b)
    return simple, both


def _sizes(both: dict[str, tuple[_Side, _Side]]) -> dict[str, float]:
    return {n: b.total for n, (_t, b) in both.items()}


def _within(both: dict[str, tuple[_Side, _Side]]) -> dict[str, inference.Noise | None]:
    """Every function's replicate spread (`inference.pooled_replicate_sigma`), the functions with as
    many runs on each side (three or more) at once."""
    out: dict[str, inference.Noise | None] = {}
    shapes: dict[tuple[int, int], list[str]] = {}
    for n, (t, b) in both.items():
        shapes.setdefault((len(t.totals), len(b.totals)), []).append(n)
    for (nt, nb), names in shapes.items():
        if nt >= 3 and nb >= 3:
            sds, df = inference.pooled_replicate_sigmas([both[n][0].totals for n in names], [both[n][1].totals for n in names])
            out.update((n, inference.Noise(float(sd), df, "replicates")) for n, sd in zip(names, sds))
        else:
            out.update((n, inference.pooled_replicate_sigma([both[n][0].totals, both[n][1].totals])) for n in names)
    return out


def _shift(both: dict[str, tuple[_Side, _Side]], cfg: CheckConfig, sizes: dict[str, float] | None) -> _Shift:
    """The pair's common shift and spreads; with `sizes` (each function's base center: unpaired runs,
    whose tests read the replicate spreads) also the replicate spreads' priors (`_Shift.replicates`)."""
    centers = {n: (t.total, b.total) for n, (t, b) in both.items()}
    # a function absent from some runs can have a median of 0: 1 ns keeps the log finite
    d = {n: math.log(max(ct, 1.0) / max(cb, 1.0)) for n, (ct, cb) in centers.items()}
    big = [n for n, (ct, cb) in centers.items() if n != ROOT and min(ct, cb) >= cfg.min_absolute_ns]
    common = float(np.median([d[n] for n in big])) if len(big) >= 5 else 0.0
    return _Shift(log_ratio=d, common=common, both=both, sizes=sizes, big=big)


def _extra_var(t: _Side, b: _Side, sampling: bool = True) -> float:
    """Variance of the log ratio that is not run-to-run noise: sampling (unless the noise it is added to
    was measured between sessions sampled alike, which holds it: `sampling`), the calibration's error
    in the probe time taken out, and each side's own probe cost.  One calibration serves both sides, so
    its error cancels but for the difference of the two sides' probe shares (log native =
    log(total - probe), d = -share x error); the sides' own deviations (PROBE_COST_SPREAD) do not cancel."""
    calib = (t.probe_share - b.probe_share) * max(t.calibration_sd, b.calibration_sd)
    own = (t.probe_share ** 2 + b.probe_share ** 2) * PROBE_COST_SPREAD ** 2
    return (t.sampled_var + b.sampled_var if sampling else 0.0) + calib ** 2 + own


def _scale(t: _Side, b: _Side) -> float:
    """The standard error of the difference of the two centers, in units of one run's SD."""
    return math.sqrt(inference.center_var(len(t.totals)) + inference.center_var(len(b.totals)))


def _priors(names: list[str], noise: dict[str, tuple[float, float]], sizes: dict[str, float]) -> dict[str, inference.Prior]:
    """Each function's prior noise (`inference.squeeze`: its own spread's distribution among functions
    of its size), from `noise`: name -> (SD, df).  The weight is at least MODERATION_DF: with the ~20
    functions of a small program the fit's weight is itself noisy (simulated, 20 functions of equal
    noise: 1 in 20 fits below 5 degrees of freedom), and a function whose few values happened to lie
    close together must not keep that luck as its noise."""
    names = [n for n in names if n in noise]
    fit = inference.squeeze([noise[n][0] ** 2 for n in names], [noise[n][1] for n in names],
                            [sizes[n] for n in names], MODERATION_DF)
    return dict(zip(names, fit)) if fit else {}


def moderate(s: float, df: float, s0: float | None) -> tuple[float, float]:
    """A function's spread moderated towards the median spread of its kind (limma's moderated t):
    `s0` weighs as MODERATION_DF degrees of freedom.  (spread, degrees of freedom)."""
    if s0 is None:
        return s, df
    return math.sqrt((MODERATION_DF * s0 ** 2 + df * s ** 2) / (MODERATION_DF + df)), df + MODERATION_DF


def _test_root(t: _Side, b: _Side, shift: _Shift, history: list[float], runs: inference.Noise | None) -> Tested:
    """The workload total: against the session-to-session noise of the history (else the prior),
    moderated towards the spread of its runs (`_root_runs`; ROOT_PRIOR_DF).  Its replicates' spread,
    where larger, estimates the same variance from this pair's runs: pooled with the history's by
    their degrees of freedom (a spread of n successive differences has SUCCESSIVE_DF (n - 1));
    beside the prior it is taken alone.  (Taken alone beside a history, its 4 degrees of freedom from 3
    runs a side hid the demo's +38-53% run in histories collected at defaults on a VM whose vCPUs ran
    1.5x faster at some moments than at others: runs of one session ±10%, the sessions' centers ±3%.)"""
    history_noise = inference.history_sigma([b.total] + history, MIN_HISTORY)
    df_h = SUCCESSIVE_DF * (len(history) - 1)  # (len(history) + 1 values: that many differences)
    if history_noise is not None and runs is not None:
        var = (df_h * history_noise.sigma ** 2 + ROOT_PRIOR_DF * runs.sigma ** 2) / (df_h + ROOT_PRIOR_DF)
        df_h += ROOT_PRIOR_DF
        history_noise = inference.Noise(math.sqrt(var), df_h, "history (moderated)")
    noise = history_noise or inference.Noise(PRIOR_SESSION_SIGMA, math.inf, "prior")
    session_se = max(noise.sigma, NOISE_FLOOR) * math.sqrt(2)
    w = _replicates(ROOT, _scale(t, b), shift)
    if session_se >= w.sigma:
        se, df, label = session_se, noise.df, f"{noise.source} ±{noise.sigma * 100:.1f}%"
    elif history_noise is not None:
        df = df_h + w.df
        se = math.sqrt((df_h * session_se ** 2 + w.df * w.sigma ** 2) / df)
        label = f"history and {w.source} ±{se * 100:.1f}%"
    else:
        se, df, label = w.sigma, w.df, f"{w.source} ±{w.sigma * 100:.1f}%"
    return Tested(ROOT, shift.log_ratio[ROOT], math.sqrt(se ** 2 + _extra_var(t, b)), df, label)


# The history's few sessions can all have fallen in one of a machine's modes: on a VM whose vCPUs ran
# the demo at 24 or at 30 ms, six sessions in the slow mode read ±3%, and the next session's three
# runs in the fast one were a -24% "optimization" (bench/resample.py: 23 of 3,000 resampled A/A checks
# of the demo's sessions, the run's own; of Lua's, 40 or 70 ms a run, 99).  Its runs show the modes
# the sessions missed (sessions of [23.3, 30.3, 29.0] ms): their classical spread, over the pair's and
# the history's sessions, weighs as two degrees of freedom in the history's estimate (2 of 3,000, Lua
# 0; the slowdowns as often flagged).  A quiet machine's runs spread little: its root test loses nothing.
ROOT_PRIOR_DF = 2


def _runs_of(session: list[StoredProfile], name: str, native: bool) -> list[float]:
    """A function's time in each run of a history session that measured it (`Profile.times`)."""
    return [float(v) for p in session if (v := p.profile.times(native).get(name)) is not None]


def _root_runs(sides: Sides, t: _Side, b: _Side) -> inference.Noise | None:
    """The workload total's run-to-run spread (log, classical: the modes are the minority a robust
    one leaves out), pooled over this pair's sessions and the history's."""
    history = [[v for v in _runs_of(h, ROOT, t.native) if v] for h in sides.history]
    return inference.pooled_classical_sigma([t.totals, b.totals] + history, "runs")


def center_spreads(sides: Sides, both: dict[str, tuple[_Side, _Side]]) -> dict[str, inference.Noise]:
    """Each function's SD of the difference of the two sides' centers, resampled from its runs'
    deviations in this pair's sessions and the history's (`inference.center_diff_sds`), with the
    degrees of freedom of those deviations; the functions whose sessions hold as many of its runs at
    once."""
    shapes: dict[tuple[int, ...], list[str]] = {}
    runs: dict[str, list[list[float]]] = {}
    for n, (t, b) in both.items():
        runs[n] = [t.totals, b.totals] + [_runs_of(h, n, t.native) for h in sides.history]
        shapes.setdefault(tuple(map(len, runs[n])), []).append(n)
    out: dict[str, inference.Noise] = {}
    for shape, names in shapes.items():
        df = sum(k - 1 for k in shape if k >= 2)
        if shape[0] and shape[1] and df >= 2:
            logs = [np.log(np.maximum([runs[n][i] for n in names], 1.0)) for i, k in enumerate(shape) if k >= 2]
            sds = inference.center_diff_sds(logs, shape[0], shape[1])
            out.update((n, inference.Noise(float(sd), df, "runs resampled")) for n, sd in zip(names, sds))
    return out


def _alike(t: _Side, b: _Side, session: _Sessions) -> bool:
    """Whether the history's sessions had as many runs as this pair: their spread holds its noise."""
    return len(t.totals) + len(b.totals) >= 2 * session.runs


_NO_REPLICATES = inference.Noise(0.0, math.inf, "replicates")


def _replicates(n: str, scale: float, shift: _Shift) -> inference.Noise:
    """The standard error of a function's difference of centers from the runs of the sessions (the
    larger of the two estimates): its runs' robust spread (moderated towards functions of its size,
    but for the root) scaled to the centers (`scale`: `_scale` of its sides), or the resampled
    centers (`center_spreads`), which a heavy-tailed or two-moded function needs."""
    w, out = shift.within_of(n), _NO_REPLICATES
    if w and n == ROOT:
        out = inference.Noise(w.sigma * scale, w.df, "replicates")
    elif w and n in shift.replicates:
        var, df = shift.replicates[n].moderate(w.sigma ** 2, w.df)
        out = inference.Noise(math.sqrt(var) * scale, df, "replicates")
    resampled = shift.centers.get(n)
    return resampled if resampled and resampled.sigma > out.sigma else out


def _test_function(n: str, t: _Side, b: _Side, shift: _Shift, session: _Sessions | None) -> Tested:
    """A function: its residual against its session-to-session spread in the history (`_sessions`:
    moderated, scaled to this pair), which holds the run-to-run noise of sessions of as many runs;
    else (too little history, or fewer runs than its sessions had) also its moderated replicate
    spread, or the cross-section spread of this pair's residuals."""
    scale = _scale(t, b)
    noise = session.noise.get(n) if session else None
    # whether the history's sessions had as many runs: their spread holds this pair's noise, replicates' too
    alike = noise is not None and _alike(t, b, session)
    rep = _NO_REPLICATES if alike else _replicates(n, scale, shift)
    se_rep, df_rep = rep.sigma, rep.df
    if noise is not None:  # two sessions' luck, as for the root, scaled to this pair's
        se_s, df_s, label = noise.sigma * math.sqrt(2) * session.pair_scale, noise.df, noise.source
    else:
        se_s, df_s, label = (shift.cross.sigma, shift.cross.df, "cross-section") if shift.cross else (0.0, 0.0, "")
    se = max(se_rep, se_s, NOISE_FLOOR * scale)
    df, label = ((df_rep, rep.source) if se == se_rep else (df_s, label) if se == se_s else (math.inf, "floor"))
    # The samples' own error is in the history's spread already when its sessions were sampled alike:
    # added again, a periodic sampler's near-constant counts read as Poisson (the demo's checksum_block,
    # 3-4 samples a run in every run: ±34% from its intervals on top of its ±13% between sessions,
    # which hid its 2.8x in a history collected at defaults).
    sampling = not (alike and se == se_s)
    # ... but a few sessions can all have drawn alike by luck: the samples' own error is the floor of
    # what is left (the demo's small sampled functions, 1-4 samples a run, read -66% to -76% and +86%
    # against ±7-26% from six to ten sessions: 13 false findings in 4,000 resampled A/A checks, none with it)
    if not sampling and (floor := math.sqrt(t.sampled_var + b.sampled_var)) > se:
        se, label = floor, f"samples (beside {label})"
    return Tested(n, shift.log_ratio[n] - shift.common, math.sqrt(se ** 2 + _extra_var(t, b, sampling)), df,
                  f"{label} ±{se * 100:.1f}%")


# Successive differences of a series are correlated (-0.5 between neighbours), and Qn's log varies more
# than a classical variance's: the spread of n such differences varies as a chi-square with 0.55 (n - 1)
# degrees of freedom (simulated, 6,000 normal series of 6 to 21 points: 0.48-0.59; the classical SD
# below `inference.ROBUST_FROM` differences keeps its n - 1).  What the test and `squeeze` are told, or
# the latter reads that spread as functions differing in noise.
SUCCESSIVE_DF = 0.55


@dataclass(frozen=True)
class _Sessions:
    """How much each function's residual moves from one session to the next, from the history."""

    noise: dict[str, inference.Noise]  # per function: its session SD, moderated across functions
    pair_scale: float  # this pair's spread of residuals over the history's typical one (MADs; at least 1)
    runs: float  # the history's sessions' runs (median)


def _sessions(levels: list[dict[str, float]], big: list[str], now: dict[str, float], runs: float) -> _Sessions | None:
    """Session-to-session noise of every function's residual, from `levels` (each session's center
    per function: the base's, then the history's, nearest first; the base's has every function).
    Between consecutive sessions, a function's log change less that pair's common shift (the median
    over the `big` functions) is what the residual test sees between two sessions; its spread per
    function (robust from `inference.ROBUST_FROM` pairs on: a real change in the history is one
    outlier) is moderated towards the spread of functions of its size (`inference.squeeze`).  The
    unpaired flow's false alarms came from the extremes of a single estimate: on Lua, small functions
    at 50-100% between sessions were judged on the cross-section (2-5%: the typical function's); in a
    200-function synthetic history every function's own noisy estimate made a 40% slowdown
    undetectable.  A pair noisier than the history (a busy machine: the spread of the residuals `now`
    of its exactly measured functions (`_exact`) above the history's typical spread of theirs, MADs
    both) widens every test by that factor."""
    if len(levels) < MIN_HISTORY or len(big) < 5:
        return None
    names = list(levels[0])
    col = {n: i for i, n in enumerate(names)}
    m = np.full((len(levels), len(names)), np.nan)
    for r, lv in enumerate(levels):
        m[r, [col[n] for n in lv]] = list(lv.values())
    logs = np.log(np.maximum(m, 1.0))
    diffs = logs[:-1] - logs[1:]  # one row per consecutive pair, NaN where a side lacks the function
    at = [col[n] for n in big]
    diffs = diffs[np.sum(~np.isnan(diffs[:, at]), axis=1) >= 5]  # (pairs with too few shared functions: none)
    if not len(diffs):
        return None
    resid = diffs - _row_medians(diffs[:, at])[:, None]
    own: dict[str, tuple[float, float]] = {}
    seen = np.sum(~np.isnan(resid), axis=0)
    for k in set(seen.tolist()) - set(range(MIN_HISTORY - 1)):  # (all functions of k pairs at once)
        cols = np.flatnonzero(seen == k)
        of = resid[:, cols].T
        sds, df = inference.spreads(of[~np.isnan(of)].reshape(len(cols), k))  # (each row's k values, in order)
        df = SUCCESSIVE_DF * (k - 1) if k >= inference.ROBUST_FROM else df
        own.update((names[j], (float(sd), df)) for j, sd in zip(cols, sds))
    prior = _priors(list(own), own, levels[0])
    noise = {}
    for n, (sd, df) in own.items():
        var, df = prior[n].moderate(sd ** 2, df) if n in prior else (sd ** 2, df)
        noise[n] = inference.Noise(math.sqrt(var / 2), df, "history (moderated)" if n in prior else "history")
    return _Sessions(noise, _pair_scale(resid[:, [col[n] for n in now]], list(now.values())), runs)


# A function's residual tells how noisy the machine was only where its own measurement is exact:
# traced, or sampled so often that its samples' error of the log ratio is under 5% (some 800 samples
# a side).  At defaults the demo's and Lua's sampled functions have 1-40 samples a run: their
# residuals spread by which counts the pair drew, and by the neighbours a commit's new code layout
# moves.  Read as a busy pair, that spread widened every test 1.5-3.5x in a third of the demo's
# slowdown checks and hid the slowdown (bench/resample.py: flagged in 165 of 333 draws at six
# sessions of history, 259 without it; in CI the checksum's 2.6x, ±3% over six sessions, at ±60%).
EXACT_SD = 0.05


def _exact(t: _Side, b: _Side) -> bool:
    """Whether a function's log ratio carries no sampling error beyond EXACT_SD."""
    return t.sampled_var + b.sampled_var <= EXACT_SD ** 2


def _pair_scale(resid: np.ndarray, now: list[float]) -> float:
    """How much noisier this pair's residuals are than the history's (`resid`: one row per
    consecutive pair of sessions, the same functions as `now`): the ratio of the MADs, at least 1;
    1 with fewer than five functions, which tell luck from a busy machine no better than chance."""
    resid = resid[~np.isnan(resid).all(axis=1)]
    if len(now) < 5 or not len(resid):
        return 1.0
    typical = float(np.median(_row_medians(np.abs(resid))))
    spread_now = float(np.median(np.abs(np.asarray(now) - np.median(now))))
    return max(1.0, spread_now / typical) if typical > 0 else 1.0


def _row_medians(m: np.ndarray) -> np.ndarray:
    """Each row's median without its NaNs (np.nanmedian costs 10x np.median when there are none:
    it takes each row apart; the index calls this twice a check)."""
    return np.nanmedian(m, axis=1) if np.isnan(m).any() else np.median(m, axis=1)


def rounds(profiles: list[StoredProfile]) -> dict[int, StoredProfile] | None:
    """Round -> profile when every profile records a distinct round (paired collection)."""
    out = {p.profile.plan.round: p for p in profiles if p.profile.plan.round is not None}
    return out if out and len(out) == len(profiles) else None


MIN_PAIRED_ROUNDS = 2  # per-round ratios need two rounds for a spread
MIN_POOLED_ROUNDS = 3  # pooled samples: the run-time ratio's spread over the rounds needs three


@dataclass(frozen=True)
class Rounds:
    """Both sides' profiles round by round (built once per comparison): only when each side recorded
    distinct rounds and the two sides the same ones."""

    target: dict[int, StoredProfile]
    base: dict[int, StoredProfile]

    @staticmethod
    def of(sides: Sides) -> Rounds | None:
        rt, rb = rounds(sides.target), rounds(sides.base)
        return Rounds(rt, rb) if rt and rb and rt.keys() == rb.keys() else None

    def __len__(self) -> int:
        return len(self.target)

    def pairs(self) -> list[tuple[StoredProfile, StoredProfile]]:
        """(target, base) per round, in round order."""
        return [(self.target[r], self.base[r]) for r in sorted(self.target)]


def _value(p: StoredProfile, name: str, native: bool) -> float | None:
    t = p.profile.times(native).get(name)
    if t is not None:
        return float(t)
    return 0.0 if _absent_is_zero(p.profile, name) else None


def _paired_diffs(rs: Rounds | None, both: dict[str, tuple[_Side, _Side]]) -> dict[str, list[float]]:
    """Per function, the log ratio target/base of each round (only when the rounds pair up)."""
    if not rs or len(rs) < MIN_PAIRED_ROUNDS:
        return {}
    out = {}
    for n, (t, _b) in both.items():
        pairs = [(_value(pt, n, t.native), _value(pb, n, t.native)) for pt, pb in rs.pairs()]
        if all(t is not None and b is not None for t, b in pairs):
            out[n] = [math.log(max(t, 1.0) / max(b, 1.0)) for t, b in pairs]
    return out


def _test_paired(n: str, d: list[float], s0: float | None, t: _Side, b: _Side) -> Tested:
    """A function's per-round log ratios: their center against their moderated spread."""
    s, df = moderate(*inference.spread(d), s0)
    se = max(s, NOISE_FLOOR) * math.sqrt(inference.center_var(len(d)))
    return Tested(n, inference.center(d), math.sqrt(se ** 2 + _extra_var(t, b)), df,
                  f"paired rounds ±{s * 100:.1f}%")


# A changed function's median call is tested beside its time a run where every run recorded at least
# this many of its calls (why: ARCHITECTURE.md §10, "Median call").
MIN_CALLS_SEEN = 5


def _median_call(f: FunctionStats | None) -> tuple[float, float] | None:
    """(median, fastest) recorded call of a function in one run, when it recorded enough of them."""
    if f is None or len(f.series) < MIN_CALLS_SEEN:
        return None
    durations = [float(d) for _, d in f.series]
    return statistics.median(durations), min(durations)


def _call_tests(rs: Rounds | None, both: dict[str, tuple[_Side, _Side]], changed: frozenset[str]) -> list[Tested]:
    """Paired rounds, changed functions traced on both sides: per round, the log ratio of the two
    sides' median calls; their center against their spread.  The calls are probed time; the probes
    cost alike on both sides, except for each side's own deviation (PROBE_COST_SPREAD), whose share of
    a median call is at most the fastest call's."""
    if not rs or len(rs) < MIN_PAIRED_ROUNDS:
        return []
    out = []
    for n in sorted(changed & both.keys()):
        t, b = both[n]
        calls = [(_median_call(pt.profile.function(n)), _median_call(pb.profile.function(n))) for pt, pb in rs.pairs()]
        if t.sampled or b.sampled or not all(mt and mb for mt, mb in calls):
            continue
        d = [math.log(max(mt[0], 1.0) / max(mb[0], 1.0)) for mt, mb in calls]
        s, df = inference.spread(d)
        shares = [inference.center([m[1] for m in side]) / max(inference.center([m[0] for m in side]), 1.0)
                  for side in zip(*calls)]
        se = max(s, NOISE_FLOOR) * math.sqrt(inference.center_var(len(d)))
        own = sum(min(x, 1.0) ** 2 for x in shares) * PROBE_COST_SPREAD ** 2
        per_run = (inference.center([mb[0] for _, mb in calls]) * b.calls,
                   inference.center([mt[0] for mt, _ in calls]) * t.calls)
        out.append(Tested(n, inference.center(d), math.sqrt(se ** 2 + own), df,
                          f"median call, paired rounds ±{s * 100:.1f}%", per_run,
                          measure="median call x calls, per run (probed time)"))
    return out


# Identical machine code can still run at a different speed in another build: where its code landed
# (pages, cache sets) is not its code.  A function the diff did not change is compared with this much
# more spread between the two builds: only a change well beyond it is a verdict (the A/A figures:
# ARCHITECTURE.md §10, "Paired rounds").
PLACEMENT_SPREAD = 0.2


def _own_samples(profiles: list[StoredProfile], n: str) -> int:
    return sum(f.stack_samples - f.library_samples for p in profiles if (f := p.profile.function(n)))


@dataclass(frozen=True)
class _Pool:
    """One side's stack samples pooled over its runs: per function its samples (inclusive: every
    sample whose stack holds it, once; or own code only) out of `total`."""

    total: int
    samples: dict[str, int]
    inclusive: bool
    own: dict[str, int]  # (inclusive pools) samples in the function's own code or a library it called

    @staticmethod
    def of(profiles: list[StoredProfile], inclusive: bool) -> _Pool:
        if inclusive:
            merged = stacks.merge(p.profile.stacks for p in profiles)
            return _Pool(sum(merged.values()), stacks.inclusive(merged), True, stacks.own(merged))
        return _Pool(sum(p.profile.metrics.stack_samples for p in profiles), {}, False, {})

    def count(self, profiles: list[StoredProfile], n: str) -> int:
        return self.samples.get(n, 0) if self.inclusive else _own_samples(profiles, n)


def rooted_share(profiles: list[StoredProfile]) -> float:
    """The share of a side's stack samples (probe time aside) whose stack unwound to the root (1 with
    no samples): the rest stop early, in a library built without frame pointers, and count for the
    frames found below the cut only."""
    m = [p.profile.metrics for p in profiles]
    taken = sum(x.stack_samples - x.probe_samples for x in m)
    return min(sum(x.rooted_samples for x in m) / taken, 1.0) if taken > 0 else 1.0


def _pooled(sides: Sides, rs: Rounds | None, both: dict[str, tuple[_Side, _Side]],
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
    pt, pb = _Pool.of(sides.target, inclusive), _Pool.of(sides.base, inclusive)
    if not pt.total or not pb.total:
        return {}
    walls = [math.log(max(t.profile.metrics.PRT, 1e-9) / max(b.profile.metrics.PRT, 1e-9)) for t, b in rs.pairs()]
    wall, wall_var = inference.center(walls), inference.spread(walls)[0] ** 2 * inference.center_var(len(walls))
    base_wall = inference.center([p.profile.metrics.PRT for p in sides.base]) * 1e9
    what = "inclusive" if inclusive else "own code"
    out = {}
    for n, (t, b) in both.items():
        if not (t.sampled and b.sampled):
            continue
        k_t, k_b = pt.count(sides.target, n), pb.count(sides.base, n)
        if k_t + k_b < 10 or not k_t or not k_b:
            continue  # too few samples to say anything; the unpaired test (with its intervals) decides
        stat = math.log((k_t / pt.total) / (k_b / pb.total)) + wall
        placement = 0.0 if n in changed else PLACEMENT_SPREAD
        between = "" if n in changed else f", ±{placement:.0%} between builds"
        # own time in the same measure (shares of the same samples, the same run times): it never
        # exceeds the inclusive time of its side
        own = ((pb.own.get(n, 0) / pb.total * base_wall, pt.own.get(n, 0) / pt.total * base_wall * math.exp(wall))
               if inclusive else None)
        out[n] = Tested(n, stat, math.sqrt(1 / k_t + 1 / k_b + wall_var + placement ** 2), math.inf,
                        f"pooled samples {k_b} -> {k_t} ({what}){between}", base_ns=k_b / pb.total * base_wall,
                        measure=f"{what} time per run (stack samples x run time)", exclusive=own)
    return out


@dataclass(frozen=True)
class _Shared:
    """What every function's test and verdict in one comparison share, built once."""

    sides: Sides
    cfg: CheckConfig
    rounds: Rounds | None
    shift: _Shift
    # the history's commits and each one's center per function, nearest first (a function's series is
    # read for the root's test, opinions and degradations only: `history`)
    levels: list[tuple[str, dict[str, float]]]
    paired: dict[str, list[float]]  # per function: its per-round log ratios (paired rounds)
    sign: int  # 1: lower is better ("higher": a larger value is better)
    opinions: bool
    sessions: _Sessions | None  # the residuals' session-to-session noise in the history (unpaired tests)

    def history(self, n: str) -> list[tuple[str, float]]:
        """(commit, center) of function `n` in the history, nearest first; a commit it is missing from
        is skipped, so that each value keeps its commit for `since`."""
        return [(c, lv[n]) for c, lv in self.levels if n in lv]

    def values(self, n: str) -> list[float]:
        return [v for _, v in self.history(n)]


def _levels(profiles: list[StoredProfile], both: dict[str, tuple[_Side, _Side]],
            native: bool | None) -> dict[str, float]:
    """Each function's center over one history commit's runs, in its sides' measure (`native`: the
    one of all of them, None where they differ)."""
    runs = _Runs(p.profile for p in profiles)
    if native is not None and (lv := _commit_levels(runs, native)).keys() <= both.keys():
        return lv  # (no function besides: the commit's own, as it is; most history checks)
    lvs = {m: _commit_levels(runs, m) for m in (True, False) if native is None or m == native}
    return {n: lv[n] for n, (t, _b) in both.items() if n in (lv := lvs[t.native])}


# The index checks its line oldest first and each check reads its ten predecessors' levels: one
# commit's levels serve the next ten checks (half of the checks' time was this loop at 1,000 x 200).
# A check reads one measure of them (native, unless a function's probes outweigh it): each is
# computed when asked.
@functools.lru_cache(maxsize=128)
def _commit_levels(runs: _Runs, native: bool) -> dict[str, float]:
    """Every function's center over one commit's runs, in native (or inclusive) time; a function a
    run lacks counts 0 where that run's plan traced it, and one that is 0 throughout is left out."""
    names = {f.name for p in runs for f in p.functions}
    times, out = [p.times(native) for p in runs], {}
    for n in names:
        v = [float(x) if (x := ts.get(n)) is not None else 0.0
             for ts, p in zip(times, runs) if n in ts or _absent_is_zero(p, n)]
        if any(v):
            out[n] = inference.center(v)
    return out


def _shared(sides: Sides, both: dict[str, tuple[_Side, _Side]], cfg: CheckConfig, opinions: bool) -> _Shared:
    # the history enters only through each commit's center (noise, robust z, change points)
    commits = sides.history_commits + [""] * (len(sides.history) - len(sides.history_commits))
    levels = [_sizes(both)]
    native = {t.native for t, _b in both.values()}
    levels += [_levels(h, both, next(iter(native)) if len(native) == 1 else None) for h in sides.history]
    rs = Rounds.of(sides)
    shift = _shift(both, cfg, None if rs else levels[0])  # (paired rounds test no replicate spreads)
    sessions = None
    if not rs:
        exact = {n: shift.log_ratio[n] - shift.common for n in shift.big if _exact(*both[n])}
        sessions = _sessions(levels, shift.big, exact, statistics.median([len(h) for h in sides.history] or [0]))
        held = {n for n, v in both.items() if sessions and n in sessions.noise and _alike(*v, sessions)} - {ROOT}
        shift = replace(shift, centers=center_spreads(sides, {n: v for n, v in both.items() if n not in held}))
    return _Shared(sides, cfg, rs, shift, list(zip(commits, levels[1:])), _paired_diffs(rs, both),
                   1 if cfg.direction == "lower" else -1, opinions, sessions)


def _s0(sh: _Shared, both: dict[str, tuple[_Side, _Side]]) -> dict[bool, float | None]:
    """The moderation prior of paired spreads, per kind (sampled or not): the median spread of the
    functions above min_absolute_ns measured the same way.  Traced with traced, sampled with sampled:
    a sampled one's per-round values carry its few samples' noise (on Lua, a paired check's `main`
    went from ±2% to ±10% when they were mixed)."""
    out = {}
    for kind in (False, True):
        big = [n for n, (t, b) in both.items() if n in sh.paired and (t.sampled or b.sampled) == kind and
               min(t.total, b.total) >= sh.cfg.min_absolute_ns]
        sds = [inference.spread(sh.paired[n])[0] for n in big]
        out[kind] = float(np.median(sds)) if len(sds) >= 3 else None
    return out


# Which test a function gets, from what its two sides allow: (pooled samples on both sides, per-round
# values on both sides, the workload total).  Pooled samples take precedence: a sampled function's
# per-round values are a few samples each.
DESIGN = {(True, True, True): "pooled", (True, True, False): "pooled", (True, False, True): "pooled",
          (True, False, False): "pooled", (False, True, True): "paired", (False, True, False): "paired",
          (False, False, True): "session", (False, False, False): "residual"}


def _tests(sh: _Shared, both: dict[str, tuple[_Side, _Side]], changed: frozenset[str]) -> list[Tested]:
    """Each function's test (DESIGN), and the changed functions' median-call tests beside them."""
    pooled, s0 = _pooled(sh.sides, sh.rounds, both, changed), _s0(sh, both)
    run = {"pooled": lambda n, t, b: pooled[n],
           "paired": lambda n, t, b: _test_paired(n, sh.paired[n], s0[t.sampled or b.sampled], t, b),
           "session": lambda n, t, b: _test_root(t, b, sh.shift, sh.values(n), _root_runs(sh.sides, t, b)),
           "residual": lambda n, t, b: _test_function(n, t, b, sh.shift, sh.sessions)}
    out = [run[DESIGN[n in pooled, n in sh.paired, n == ROOT]](n, t, b) for n, (t, b) in both.items()]
    return out + _call_tests(sh.rounds, both, changed)


@dataclass(frozen=True)
class Result:
    """One test's outcome, scipy-style: the statistic (log ratio), its Holm-adjusted one-sided
    p-values, and the interval of the relative change at the check's confidence."""

    tested: Tested
    p_worse: float
    p_better: float
    ci: tuple[float, float]

    def pvalue(self, sign: int) -> float:
        """The p-value of the direction the statistic points to."""
        return self.p_worse if sign * self.tested.statistic > 0 else self.p_better


def _decide(tested: list[Tested], changed: frozenset[str], cfg: CheckConfig, sign: int,
            run_ns: dict[str, float]) -> list[Result]:
    """Holm-adjusted one-sided p-values (with the weighted budget) and intervals; a function tested
    twice (time a run, median call) keeps the test with the smaller p-value — the median call's only
    where it agrees with the time a run (`_agrees`; `run_ns`: each function's base time a run)."""
    weights, total = error_budget([x.name for x in tested], changed)
    stats, ses, dfs = [sign * x.statistic for x in tested], [x.se for x in tested], [x.df for x in tested]
    worse = inference.holm(inference.p_slowers(stats, ses, dfs), weights, total)
    better = inference.holm(inference.p_slowers([-x for x in stats], ses, dfs), weights, total)
    results = [Result(x, pw, pb, inference.interval(x.statistic, x.se, x.df, cfg.confidence))
               for x, pw, pb in zip(tested, worse, better)]
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


def _verdict(r: Result, base_ns: float, cfg: CheckConfig, sign: int) -> tuple[str, float]:
    """Degradation or optimization when significant and large enough; the confidence of the direction."""
    x, p = r.tested, r.pvalue(sign)
    rel, absolute = math.expm1(x.statistic), base_ns * math.expm1(x.statistic)
    large = abs(rel) >= cfg.min_relative and abs(absolute) >= cfg.min_absolute_ns
    if large and p <= 1 - cfg.confidence:
        return (DEGRADATION if sign * x.statistic > 0 else OPTIMIZATION if sign * x.statistic < 0 else NO_CHANGE), 1 - p
    return NO_CHANGE, 1 - p


def _opinions(t: _Side, b: _Side, z: float | None, cfg: CheckConfig, sign: int):
    """The other methods' votes and the bootstrap interval of the mean call (they never decide)."""
    votes = _votes(t, b, cfg)
    per_call = None
    if len(t.series) >= 10 and len(b.series) >= 10:
        per_call = inference.bootstrap_ratio_ci([v for _, v in t.series], [v for _, v in b.series])
        up, down = per_call[0] >= cfg.min_relative, per_call[1] <= -cfg.min_relative  # the whole interval moved
        votes["bootstrap-mean"] = (DEGRADATION if (up if sign > 0 else down) else
                                   OPTIMIZATION if (down if sign > 0 else up) else NO_CHANGE)
    if z is not None:
        votes["history-z"] = (DEGRADATION if sign * z >= HISTORY_Z else OPTIMIZATION if sign * z <= -HISTORY_Z
                              else NO_CHANGE)
    return votes, per_call


def _since(history: list[tuple[str, float]], now: float, alpha: float, sign: int) -> str | None:
    """Where a level shift towards `now` began in the history ((commit, value) pairs, nearest first;
    change-point detection); None when it began at the target or no commit is known."""
    if len(history) < 2:
        return None
    series = [v for _, v in reversed(history)] + [now]  # oldest first
    order = [c for c, _ in reversed(history)] + [""]
    shifts = [c for c in inference.change_points(series, window=5, alpha=alpha) if sign * (c.after - c.before) > 0]
    return (order[shifts[-1].index] or None) if shifts else None


def _holm(tested: list[Tested], changed: frozenset[str]) -> str:
    """What every function's method ends with: the family its test was corrected in."""
    k = len({x.name for x in tested if x.name in changed})
    return f", Holm over {len(tested)} tests" + (f" ({k} functions changed in the diff)" if k else "")


def _method(sh: _Shared, r: Result, how: str) -> str:
    what = ("workload total vs session noise" if r.tested.name == ROOT and not sh.paired else
            "median call x calls, paired rounds" if r.tested.per_call else
            "paired rounds" if sh.paired else f"residual vs common shift {math.expm1(sh.shift.common):+.1%}")
    return what + how


def _change(sh: _Shared, sides: tuple[_Side, _Side], r: Result, method: str, changed: bool) -> Change:
    """One function's verdict with its interval, the history's opinion and the other methods' votes."""
    (t, b), x = sides, r.tested
    run_t = t.total  # the time a run, for the history's z-score and change points
    # one estimate for every number (ARCHITECTURE.md §10, "One estimate per number"): the base value
    # the test's change applies to, and the target value, change and interval all from the statistic
    mb = x.base_ns if x.base_ns is not None else x.per_call[0] if x.per_call else b.total
    mt = mb * math.exp(x.statistic)
    kind, conf = _verdict(r, mb, sh.cfg, sh.sign)
    h = sh.values(x.name) if sh.opinions else []  # (the z-score is an opinion; the index asks for none)
    z = inference.robust_z(run_t, h) if len(h) >= MIN_HISTORY else None
    votes, per_call = _opinions(t, b, z, sh.cfg, sh.sign) if sh.opinions else ({}, None)
    since = _since(sh.history(x.name), run_t, 1 - sh.cfg.confidence, sh.sign) if kind == DEGRADATION else None
    return Change(
        workload=sh.sides.workload, function=x.name, type=kind, relative=math.expm1(x.statistic),
        absolute_ns=mt - mb, measure=x.measure or _measure(sh, t, b, x),
        exclusive_delta_ns=(x.exclusive[1] - x.exclusive[0] if x.exclusive else
                            t.own - b.own), confidence=conf,
        ci_low=r.ci[0], ci_high=r.ci[1], method=method, location=t.location or b.location, base_ns=mb, target_ns=mt,
        base_calls=b.calls, target_calls=t.calls,
        noise=x.noise + ("" if t.native else "; probed time"), history_z=z, since=since, votes=votes,
        changed=changed, statistic=x.statistic, per_call_ci=per_call)


def _measure(sh: _Shared, t: _Side, b: _Side, x: Tested) -> str:
    """What a change's before and after values are, when the test did not say (`Change.measure`)."""
    if t.sampled or b.sampled:
        what = "own time per run (stack samples)"
    else:
        what = "inclusive time per run" + (", probes taken out" if t.native and b.native else " (probed time)")
    return what if x.name == ROOT or sh.paired else what + f", net of the common shift {math.expm1(sh.shift.common):+.1%}"


def compare_workload(sides: Sides, cfg: CheckConfig, changed: frozenset[str] = frozenset(),
                     opinions: bool = True) -> list[Change]:
    """Every function of one workload: target runs vs base runs, with the history for the
    workload's noise, the robust z-score and change points (see the module's docstring)."""
    simple, both = _pair(sides)  # 1. which functions have two comparable sides
    if not both:
        return simple
    sh = _shared(sides, both, cfg, opinions)  # 2. what all tests share: rounds, common shift, history
    tested = _tests(sh, both, changed)  # 3. one test per function (and median calls)
    run_ns = {x.name: x.base_ns if x.base_ns is not None else both[x.name][1].total
              for x in tested if x.per_call is None}
    results = _decide(tested, changed, cfg, sh.sign, run_ns)  # 4. Holm, intervals, one result per function
    how = _holm(tested, changed)
    return simple + [_change(sh, both[r.tested.name], r, _method(sh, r, how), r.tested.name in changed)
                     for r in results]  # 5. verdicts with opinions


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
    of = {n: g for g, ns in groups.items() for n in ns}
    return [share[of[n]] / len(groups[of[n]]) / times[n] for n in names], sum(share.values())


def _simple(workload: str, name: str, kind: str, sides: tuple[_Side, _Side], why: str) -> Change:
    t, b = sides
    mt, mb = t.total, b.total
    relative = {NEW: math.inf, REMOVED: -1.0}.get(kind, math.nan)
    return Change(workload=workload, function=name, type=kind, relative=relative,
                  absolute_ns=mt - mb, exclusive_delta_ns=t.own - b.own,
                  confidence=1.0, ci_low=math.nan, ci_high=math.nan, method=why, location=t.location or b.location,
                  base_ns=mb, target_ns=mt, base_calls=b.calls,
                  target_calls=t.calls)
