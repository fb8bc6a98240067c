"""The noise models of a comparison (ARCHITECTURE.md §10): how much a function's difference of
centers varies when nothing changed.  Pure: sides in, spreads out.

* `Shift`: what all functions of one pair share: their log ratios, the common shift (the median log
  ratio), the cross-section spread of the residuals, each function's replicate spread and its prior.
* `center_spreads`: the SD of the difference of centers resampled from the runs of this pair's
  sessions and the history's (heavy-tailed and two-moded functions).
* `session_noise`: how much each function's residual moves from one session to the next in the
  history, moderated by empirical Bayes towards functions of its size (`inference.squeeze`, limma's
  moderated t with its trend), widened when this pair is noisier than the history (`Sessions.pair_scale`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from gitperf.checks.sides import Side, Sides
from gitperf.core.config import CheckConfig
from gitperf.core.model import ROOT, StoredProfile
from gitperf.stats import inference


MIN_HISTORY = 4  # commits before the history's spread is trusted as a noise estimate


NOISE_FLOOR = 0.01  # 1%: timer and scheduling jitter never allow a tighter estimate


MODERATION_DF = 4  # weight (in degrees of freedom) of the all-function spread in each function's noise


@dataclass(frozen=True)
class Shift:
    """What all functions of the pair share: the common shift of their log ratios and the spreads."""

    log_ratio: dict[str, float]  # log(target center / base center) per function
    common: float  # the median log ratio of the functions above min_absolute_ns
    both: dict[str, tuple[Side, Side]] = field(repr=False)  # the sides the spreads below are read from
    sizes: dict[str, float] | None  # per function: its base center (unpaired runs; None paired): `replicates`
    big: list[str]  # the functions (not the root) above min_absolute_ns on both sides: the common shift's
    # per function: the SE of its difference of centers, resampled from the runs (`center_spreads`:
    # unpaired runs, where the test reads it)
    centers: dict[str, inference.Noise] = field(default_factory=dict)

    # The spreads below are computed when a test first asks: where the history's sessions hold every
    # function's noise (`alike`, most of the index's checks) only the root's replicates are read.
    @functools.cached_property
    def cross(self) -> inference.Noise | None:
        """The cross-section spread of the residuals of the `big` functions."""
        return inference.cross_section_sigma([self.log_ratio[n] - self.common for n in self.big])

    @functools.cached_property
    def within(self) -> dict[str, inference.Noise | None]:
        """Per function: its replicate spread (`within`)."""
        return within(self.both)

    def within_of(self, n: str) -> inference.Noise | None:
        """One function's replicate spread: the root's alone where no other function asked (each
        function's spread is its own runs': the same alone or among all)."""
        return within({n: self.both[n]})[n] if n == ROOT and "within" not in self.__dict__ else self.within[n]

    @functools.cached_property
    def replicates(self) -> dict[str, inference.Prior]:
        """Per function: its replicate variance's prior (unpaired runs; {} paired)."""
        if not self.sizes:
            return {}
        return priors(list(self.within), {n: (w.sigma, w.df) for n, w in self.within.items() if w}, self.sizes)


def within(both: dict[str, tuple[Side, Side]]) -> dict[str, inference.Noise | None]:
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


def shift_of(both: dict[str, tuple[Side, Side]], cfg: CheckConfig, sizes: dict[str, float] | None) -> Shift:
    """The pair's common shift and spreads; with `sizes` (each function's base center: unpaired runs,
    whose tests read the replicate spreads) also the replicate spreads' priors (`Shift.replicates`)."""
    centers = {n: (t.total, b.total) for n, (t, b) in both.items()}
    # a function absent from some runs can have a median of 0: 1 ns keeps the log finite
    d = {n: math.log(max(ct, 1.0) / max(cb, 1.0)) for n, (ct, cb) in centers.items()}
    big = [n for n, (ct, cb) in centers.items() if n != ROOT and min(ct, cb) >= cfg.min_absolute_ns]
    common = inference.median([d[n] for n in big]) if len(big) >= 5 else 0.0
    return Shift(log_ratio=d, common=common, both=both, sizes=sizes, big=big)


def center_scale(t: Side, b: Side) -> float:
    """The standard error of the difference of the two centers, in units of one run's SD."""
    return _center_scale(len(t.totals), len(b.totals))


@functools.lru_cache(maxsize=64)
def _center_scale(target_runs: int, base_runs: int) -> float:  # (every function's test asks: a few run counts)
    return math.sqrt(inference.center_var(target_runs) + inference.center_var(base_runs))


def priors(names: list[str], noise: dict[str, tuple[float, float]], sizes: dict[str, float]) -> dict[str, inference.Prior]:
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


def runs_of(session: list[StoredProfile], name: str, native: bool) -> list[float]:
    """A function's time in each run of a history session that measured it (`Profile.times`)."""
    return [float(v) for p in session if (v := p.profile.time_of(name, native)) is not None]


def center_spreads(sides: Sides, both: dict[str, tuple[Side, Side]]) -> dict[str, inference.Noise]:
    """Each function's SD of the difference of the two sides' centers, resampled from its runs'
    deviations in this pair's sessions and the history's (`inference.center_diff_sds`), with the
    degrees of freedom of those deviations; the functions whose sessions hold as many of its runs at
    once."""
    shapes: dict[tuple[int, ...], list[str]] = {}
    runs: dict[str, list[list[float]]] = {}
    for n, (t, b) in both.items():
        runs[n] = [t.totals, b.totals] + [runs_of(h, n, t.native) for h in sides.history]
        shapes.setdefault(tuple(map(len, runs[n])), []).append(n)
    out: dict[str, inference.Noise] = {}
    for shape, names in shapes.items():
        df = sum(k - 1 for k in shape if k >= 2)
        if shape[0] and shape[1] and df >= 2:
            logs = [np.log(np.maximum([runs[n][i] for n in names], 1.0)) for i, k in enumerate(shape) if k >= 2]
            sds = inference.center_diff_sds(logs, shape[0], shape[1])
            out.update((n, inference.Noise(float(sd), df, "runs resampled")) for n, sd in zip(names, sds))
    return out


# Successive differences of a series are correlated (-0.5 between neighbours), and Qn's log varies more
# than a classical variance's: the spread of n such differences varies as a chi-square with 0.55 (n - 1)
# degrees of freedom (simulated, 6,000 normal series of 6 to 21 points: 0.48-0.59; the classical SD
# below `inference.ROBUST_FROM` differences keeps its n - 1).  What the test and `squeeze` are told, or
# the latter reads that spread as functions differing in noise.
SUCCESSIVE_DF = 0.55


@dataclass(frozen=True)
class Sessions:
    """How much each function's residual moves from one session to the next, from the history."""

    noise: dict[str, inference.Noise]  # per function: its session SD, moderated across functions
    pair_scale: float  # this pair's spread of residuals over the history's typical one (MADs; at least 1)
    runs: float  # the history's sessions' runs (median)


def session_noise(levels: list[dict[str, float]], big: list[str], now: dict[str, float], runs: float) -> Sessions | None:
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
    of its exactly measured functions (`is_exact`) above the history's typical spread of theirs, MADs
    both) widens every test by that factor."""
    if len(levels) < MIN_HISTORY or len(big) < 5:
        return None
    names = list(levels[0])
    col = {n: i for i, n in enumerate(names)}
    m = np.full((len(levels), len(names)), np.nan)
    for r, lv in enumerate(levels):  # (arrays from iterators: a third cheaper than numpy reading two lists)
        m[r, np.fromiter(map(col.__getitem__, lv), np.intp, len(lv))] = np.fromiter(lv.values(), float, len(lv))
    logs = np.log(np.maximum(m, 1.0))
    diffs = logs[:-1] - logs[1:]  # one row per consecutive pair, NaN where a side lacks the function
    at = [col[n] for n in big]
    diffs = diffs[np.sum(~np.isnan(diffs[:, at]), axis=1) >= 5]  # (pairs with too few shared functions: none)
    if not len(diffs):
        return None
    resid = diffs - _row_medians(diffs[:, at])[:, None]
    return Sessions(_moderated(resid, names, levels[0]), _pair_scale(resid[:, [col[n] for n in now]], list(now.values())),
                    runs)


def _moderated(resid: np.ndarray, names: list[str], sizes: dict[str, float]) -> dict[str, inference.Noise]:
    """Each function's spread of its residuals (`resid`'s column, one row per consecutive pair of
    sessions), moderated towards functions of its size (`priors`' rule, all functions at once)."""
    cols, sds, dfs = [], [], []
    seen = np.sum(~np.isnan(resid), axis=0)
    for k in set(seen.tolist()) - set(range(MIN_HISTORY - 1)):  # (all functions of k pairs at once)
        at = np.flatnonzero(seen == k)
        of = resid[:, at].T
        sd, df = inference.spreads(of[~np.isnan(of)].reshape(len(at), k))  # (each row's k values, in order)
        cols.append(at)
        sds.append(sd)
        dfs.append(np.full(len(at), SUCCESSIVE_DF * (k - 1) if k >= inference.ROBUST_FROM else df))
    if not cols:
        return {}
    at, df = np.concatenate(cols).tolist(), np.concatenate(dfs)
    var = np.array([sd ** 2 for sd in np.concatenate(sds).tolist()])  # (Python's pow, as `priors`: numpy's
    # x*x differs from it in the last bit of about one square in 1,200)
    fit = inference.squeeze_fit(var, df, [sizes[names[j]] for j in at], MODERATION_DF)
    source = "history (moderated)" if fit else "history"
    if fit:
        var, df = inference.moderate_all(*fit, var, df)
    return {names[j]: inference.Noise(sd, d, source) for j, sd, d in zip(at, np.sqrt(var / 2).tolist(), df.tolist())}


# A function's residual tells how noisy the machine was only where its own measurement is exact:
# traced, or sampled so often that its samples' error of the log ratio is under 5% (some 800 samples
# a side).  At defaults the demo's and Lua's sampled functions have 1-40 samples a run: their
# residuals spread by which counts the pair drew, and by the neighbours a commit's new code layout
# moves.  Read as a busy pair, that spread widened every test 1.5-3.5x in a third of the demo's
# slowdown checks and hid the slowdown (bench/resample.py: flagged in 165 of 333 draws at six
# sessions of history, 259 without it; in CI the checksum's 2.6x, ±3% over six sessions, at ±60%).
EXACT_SD = 0.05


def is_exact(t: Side, b: Side) -> bool:
    """Whether a function's log ratio carries no sampling error beyond EXACT_SD."""
    return t.sampled_var + b.sampled_var <= EXACT_SD ** 2


def _pair_scale(resid: np.ndarray, now: list[float]) -> float:
    """How much noisier this pair's residuals are than the history's (`resid`: one row per
    consecutive pair of sessions, the same functions as `now`): the ratio of the MADs, at least 1;
    1 with fewer than five functions, which tell luck from a busy machine no better than chance."""
    resid = resid[~np.isnan(resid).all(axis=1)]
    if len(now) < 5 or not len(resid):
        return 1.0
    typical = inference.median(_row_medians(np.abs(resid)))
    spread_now = inference.median(np.abs(np.asarray(now) - inference.median(now)))
    return max(1.0, spread_now / typical) if typical > 0 else 1.0


def _row_medians(m: np.ndarray) -> np.ndarray:
    """Each row's median without its NaNs (np.nanmedian costs 10x np.median when there are none:
    it takes each row apart; the index calls this three times a check)."""
    return np.nanmedian(m, axis=1) if np.isnan(m).any() else inference.row_medians(m)
