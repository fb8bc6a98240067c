"""Statistics for the checks (ARCHITECTURE.md §10).  Pure functions over plain numbers; no I/O.

Times are compared on a log scale: run-to-run noise on a shared machine is multiplicative (a
busy machine makes every call a few percent slower), so log(target / base) is roughly normal with a
spread that does not depend on the function's size.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import msgspec
import numpy as np
from scipy import special

# MAD -> standard deviation for normal data.
MAD_TO_SD = 1.4826
NORMAL_Q3 = 0.6744897501960817  # the standard normal's third quartile


class Noise(msgspec.Struct):  # (a Struct: a check builds one a function; `checks.sides.Side` says why)
    """Run-to-run standard deviation of log(time) and where the estimate came from."""

    sigma: float
    df: float  # degrees of freedom of the estimate (inf = assumed, not estimated)
    source: str  # "replicates" | "history" | "cross-section" | "prior"


def center(values) -> float:
    """Mean of one or two runs; the median from three on, so one disturbed run (another process
    hogging the machine for a second) does not move the result.  (Plain Python: a handful of runs
    per call and ~10^5 calls when the dashboard's index checks a long history; np.median costs 50x.)"""
    v = sorted(values)
    n = len(v)
    if n < 3:
        return float(sum(v)) / n
    return float(v[n // 2]) if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def center_se(values: Sequence[float]) -> float:
    """The standard error of `center(values)`: their spread (1.4826 MAD from three values on, robust
    as the median is; the classical SD below) times `center_var`'s factor."""
    n = len(values)
    if n < 2:
        return 0.0
    if n < 3:
        sd = float(np.std(values, ddof=1))
    else:
        med = center(values)
        sd = MAD_TO_SD * center([abs(x - med) for x in values])
    return sd * math.sqrt(center_var(n))


def center_var(n: int) -> float:
    """Variance of `center` over n runs, in units of one run's variance (pi/2 / n for the median:
    its asymptotic efficiency, conservative for small n)."""
    return 1 / n if n < 3 else math.pi / 2 / n


# Qn is 82% efficient at the normal (Rousseeuw & Croux 1993): n values give it about 0.82 (n - 1)
# degrees of freedom.  Below ROBUST_FROM values it is erratic (of three, it is the smallest of the
# three distances), so the classical SD serves there.
QN_EFFICIENCY = 0.82
ROBUST_FROM = 5


def spread(values: Sequence[float]) -> tuple[float, float]:
    """SD of a handful of values (per-round log ratios) and its degrees of freedom, robust from
    ROBUST_FROM values on.  On a shared 2-vCPU VM one run in five to eight took 1.5x as long as its
    neighbours (Lua, 30 ms runs): over fifteen paired rounds the classical SD of `main`'s log ratios
    was 0.185, Qn 0.068 - the disturbed rounds, not the others, set the noise level."""
    n = len(values)
    if n < 2:
        return 0.0, 0.0
    if n < ROBUST_FROM:
        return float(np.std(values, ddof=1)), n - 1.0
    return qn_scale(values), QN_EFFICIENCY * (n - 1)


@dataclass
class Prior:
    """The distribution a function's own variance is drawn from (`squeeze`): a scaled inverse
    chi-square with `df` degrees of freedom around `var` (df inf: its noise is its neighbours')."""

    var: float
    df: float

    def moderate(self, var: float, df: float) -> tuple[float, float]:
        """A function's variance estimate (with `df`) moderated towards the prior: the posterior
        mean, and its degrees of freedom."""
        if math.isinf(self.df):
            return self.var, math.inf
        return (self.df * self.var + df * var) / (self.df + df), self.df + df


def _trigamma(y):
    """The trigamma function: Hurwitz's zeta(2, y), which is what `special.polygamma(1, y)` computes
    through a Python wrapper at 7x the cost (equal to the last bit on 200,000 values from 1e-6 to 1e9)."""
    if not isinstance(y, np.ndarray):
        return float(special.zeta(2, y))
    values, at = np.unique(y, return_inverse=True)  # (an array's dfs take a few values; zeta ~0.2 us each)
    return special.zeta(2, values)[at]


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method as in limma's trigammaInverse)."""
    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = _trigamma(y)
        step = tri * (1 - tri / x) / (-2.0 * float(special.zeta(3, y)))  # (the tetragamma function)
        y += step
        if -step / y < 1e-8:
            break
    return y


VAR_FLOOR = 1e-8  # (a variance of exactly 0, from identical values, has no logarithm)
TREND_WINDOW = 8  # the running median of the log variances spans an eighth of the functions...
TREND_MIN = 11  # ...and at least this many


def row_medians(m: np.ndarray) -> np.ndarray:
    """`np.median(m, axis=1)` of a matrix without NaNs, to the last bit (the middle value, or the mean
    of the two: 5,000 random matrices), at a third of its cost: its general path's overhead was most
    of the ~30 us it took on the index's 10 x 200 and 176 x 25 matrices, several times a check."""
    n = m.shape[1]
    if n < 2:
        return np.median(m, axis=1)
    k = n // 2
    if n % 2:
        return np.partition(m, k, axis=1)[:, k]
    p = np.partition(m, (k - 1, k), axis=1)
    return (p[:, k - 1] + p[:, k]) / 2


def median(values) -> float:
    """`float(np.median(values))` to the last bit, at a fifth of its cost (one row of `row_medians`;
    numpy's own where there are NaNs or no values)."""
    v = np.asarray(values, float)
    if not len(v) or np.isnan(v).any():
        return float(np.median(v))
    return float(row_medians(v[None, :])[0])


def running_median(x: np.ndarray, half: int) -> np.ndarray:
    """The median of each value's window of `half` values either side (fewer at the ends)."""
    n = len(x)
    out = np.empty(n)
    if n > 2 * half + 1:
        out[half:n - half] = row_medians(np.lib.stride_tricks.sliding_window_view(x, 2 * half + 1))
        ends = list(range(half)) + list(range(n - half, n))
    else:
        ends = range(n)
    values = x.tolist()  # (the ends' few short windows: statistics.median is 20x np.median's overhead here)
    for i in ends:
        out[i] = statistics.median(values[max(0, i - half): i + half + 1])
    return out


def squeeze(variances: Sequence[float], dfs: Sequence[float], sizes: Sequence[float],
            min_df: float = 0.0) -> list[Prior] | None:
    """Empirical Bayes over many functions' variance estimates (Smyth 2004; limma's `fitFDist` by
    moments of the log variances, with its `trend`): each function's prior variance is the running
    median of the log variances of functions of about its size (`sizes`), the prior's weight what the
    spread around that trend leaves after the estimates' own sampling spread.  Where the functions'
    noise is alike, the weight is large and every function borrows its neighbours' precision; where
    it differs, the weight is small and each keeps its own.  Small functions are the noisy ones (Lua's
    under 50 us: 50-100% between sessions beside 2-5% for the large): the trend keeps a small function
    from being moderated towards a large one's noise.  `min_df` bounds the weight from below (the
    fit's own noise).  One prior per estimate, in order; None under three estimates."""
    fit = squeeze_fit(variances, dfs, sizes, min_df)
    if fit is None:
        return None
    prior_vars, d0 = fit
    return [Prior(v, d0) for v in prior_vars.tolist()]  # (numpy scalars one by one: 9 us each)


def squeeze_fit(variances: Sequence[float], dfs: Sequence[float], sizes: Sequence[float],
                min_df: float = 0.0) -> tuple[np.ndarray, float] | None:
    """`squeeze`'s priors as arrays: every estimate's prior variance, and the weight they share."""
    v = np.maximum(np.asarray(variances, float), VAR_FLOOR)
    d = np.asarray(dfs, float)
    if len(v) < 3:
        return None
    e = np.log(v) - special.digamma(d / 2) + np.log(d / 2)
    order = np.argsort(np.asarray(sizes, float), kind="stable")
    half = max(TREND_MIN, len(e) // TREND_WINDOW) // 2
    trend = np.empty(len(e))
    trend[order] = running_median(e[order], half)
    excess = float(np.mean((e - trend) ** 2) * len(e) / (len(e) - 1) - np.mean(_trigamma(d / 2)))
    d0 = 2 * _trigamma_inverse(excess) if excess > 0 else math.inf
    d0 = max(d0, min_df)
    shift = float(special.digamma(d0 / 2)) - math.log(d0 / 2) if math.isfinite(d0) else 0.0
    return np.exp(trend + shift), d0


def moderate_all(prior_vars: np.ndarray, d0: float, variances, dfs) -> tuple[np.ndarray, np.ndarray]:
    """`Prior.moderate` of many estimates at once, towards their priors (`squeeze_fit`), to the last bit."""
    if math.isinf(d0):
        return prior_vars, np.full(len(prior_vars), math.inf)
    return (d0 * prior_vars + dfs * variances) / (d0 + dfs), d0 + dfs


def p_slower(stat: float, se: float, df: float) -> float:
    """One-sided p-value of "no increase" for a log-scale statistic with standard error `se`
    (normal when the noise estimate has infinite degrees of freedom, else Student's t)."""
    z = stat / se if se else math.copysign(math.inf, stat)
    # scipy.special directly: the same functions as sps.norm.sf / sps.t.sf without ~100 µs of overhead
    return float(special.ndtr(-z) if math.isinf(df) else special.stdtr(df, -z))


def p_slowers(stats: Sequence[float], ses: Sequence[float], dfs: Sequence[float]) -> list[float]:
    """`p_slower` of many statistics at once (a check's ~200 functions, twice: scipy's functions
    cost ~1 us a call, the same on an array of them)."""
    stat, se, df = (np.asarray(x, float) for x in (stats, ses, dfs))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se != 0, stat / np.where(se != 0, se, 1.0), np.copysign(np.inf, stat))
    normal = np.isinf(df)
    return np.where(normal, special.ndtr(-z), special.stdtr(np.where(normal, 1.0, df), -z)).tolist()


def interval(d: float, se: float, df: float, confidence: float) -> tuple[float, float]:
    """Two-sided interval of the relative change exp(d) - 1."""
    q = _quantile(df, 0.5 + confidence / 2)
    return _expm1(d - q * se), _expm1(d + q * se)


def intervals(d: Sequence[float], se: Sequence[float], df: Sequence[float], confidence: float) -> list[tuple[float, float]]:
    """`interval` of many statistics (a check's every function): the same bounds, a quantile per df."""
    q = {f: _quantile(f, 0.5 + confidence / 2) for f in set(df)}
    return [(_expm1(x - q[f] * s), _expm1(x + q[f] * s)) for x, s, f in zip(d, se, df)]


@functools.lru_cache(maxsize=1024)
def _quantile(df: float, p: float) -> float:
    """Student's t quantile (normal at infinite df).  Remembered: the index asks for one interval per
    function and commit, nearly all with the same few degrees of freedom."""
    return float(special.ndtri(p) if math.isinf(df) else special.stdtrit(df, p))


def _expm1(x: float) -> float:
    """exp(x) - 1, infinite beyond what a float holds (an interval may be that wide: a native estimate
    whose calibration error is many times its size)."""
    return math.expm1(x) if x < 700 else math.inf


# The median of pairwise differences varies as a classical SD with 0.68-0.75 of its degrees of freedom
# (simulated: two sides of 3, 5 and 10 normal runs, 4,000 draws each; the variance of its log against
# the chi-square's trigamma): what `squeeze` must be told, or it reads that spread as functions differing.
PAIRS_EFFICIENCY = 0.7


def _pairs_sd(pairs: list[float]) -> float:
    """The SD from pairwise |differences| within groups: |x_i - x_j| / sqrt 2 is half-normal, whose
    median is 0.6745 sigma."""
    return statistics.median(pairs) / (math.sqrt(2) * NORMAL_Q3)


def pooled_replicate_sigma(groups: Sequence[Sequence[float]]) -> Noise | None:
    """SD of log(total) from commits measured more than once (pooled within-commit spread).

    Where every group has three runs or more its center is the median, and so the spread is robust
    too: the median of all within-group pairwise |differences| (|x_i - x_j| / sqrt 2 is half-normal,
    whose median is 0.6745 sigma).  One disturbed run among five then shifts the spread by little
    rather than doubling it; a classical SD would let that run hide a real 50% change.  With one or
    two runs (mean centers) it is the pooled classical SD.  Plain Python: groups are a few runs."""
    logs = [[math.log(max(float(x), 1.0)) for x in g] for g in groups if len(g) >= 2]
    df = sum(len(g) - 1 for g in logs)
    if df < 2:
        return None
    if all(len(g) >= 3 for g in logs):
        pairs = [abs(a - b) for g in logs for a, b in itertools.combinations(g, 2)]
        return Noise(_pairs_sd(pairs), PAIRS_EFFICIENCY * df, "replicates")
    return pooled_classical_sigma(groups, "replicates")


def pooled_classical_sigma(groups: Sequence[Sequence[float]], source: str) -> Noise | None:
    """The pooled classical SD of log(value) within groups (of two values or more): every value
    counts, the minority a robust spread leaves out included."""
    logs = [[math.log(max(float(x), 1.0)) for x in g] for g in groups if len(g) >= 2]
    df = sum(len(g) - 1 for g in logs)
    if df < 2:
        return None
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    return Noise(math.sqrt(ss / df), df, source)


CENTER_DRAWS = 1000  # resamples of `center_diff_sds`: its SD's own error is ~1/sqrt(2 x 1000) = 2%


def center_diff_sds(sessions: list[np.ndarray], n_target: int, n_base: int) -> np.ndarray:
    """Per function, the SD of center(n_target runs) - center(n_base runs) when both sides' runs are
    drawn from its pooled within-session deviations (`sessions`: one matrix per session, functions x
    its runs, of log values; each session's center taken out, scaled by sqrt(k / (k - 1)) for its k
    runs: a mean would spread one disturbed run over its session's other runs).  What a difference of two medians really spreads by when a function's runs are heavy-tailed
    or two-moded, which the robust spread of its runs (`pooled_replicate_sigma`) reads as its typical
    run: the demo's `text_free_words` ran 200-300 us, and 400-1150 us in a third of the runs, so two
    sessions' medians of five often fell in different modes, +151% at a robust ±12.8% (a finding in
    7% of A/A checks of the five-run histories the tests collect; bench/shorthistory.py).  A seeded
    resample: the same runs give the same answer."""
    dev = np.concatenate([(g - _centers(g)[:, None]) * math.sqrt(g.shape[1] / (g.shape[1] - 1))
                          for g in sessions if g.shape[1] >= 2], axis=1)
    t, b = (_centers(dev[:, p]) for p in _picks(dev.shape[1], n_target, n_base))
    return np.std(t - b, axis=1, ddof=1)


@functools.lru_cache(maxsize=16)
def _picks(deviations: int, n_target: int, n_base: int) -> tuple[np.ndarray, np.ndarray]:
    """`center_diff_sds`' seeded draws of the deviations' columns, which depend on the counts alone (the
    index asks with the same few counts every check: drawing them was 40% of its cost)."""
    rng = np.random.default_rng(0)
    picks = tuple(rng.integers(0, deviations, (CENTER_DRAWS, n)) for n in (n_target, n_base))
    for p in picks:
        p.flags.writeable = False  # (shared between calls)
    return picks


def _centers(v: np.ndarray) -> np.ndarray:
    """`center` along the last axis (of three: the middle one by min and max, the same value as
    np.median's partition at a sixth of its cost; `center_diff_sds` takes 2 x 1,000 of them a function)."""
    if v.shape[-1] == 3:
        a, b, c = v[..., 0], v[..., 1], v[..., 2]
        return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
    return v.mean(axis=-1) if v.shape[-1] < 3 else np.median(v, axis=-1)


def pooled_replicate_sigmas(a, b) -> tuple[np.ndarray, float]:
    """`pooled_replicate_sigma` of the two groups (row i of `a`, row i of `b`) of many functions at
    once, every group of three runs or more (matrices: functions x runs)."""
    la, lb = (np.log(np.maximum(np.asarray(x, float), 1.0)) for x in (a, b))
    pairs = [np.abs(g[:, i] - g[:, j]) for g in (la, lb) for i, j in zip(*_pairs(g.shape[1]))]
    df = PAIRS_EFFICIENCY * (la.shape[1] - 1 + lb.shape[1] - 1)
    d = np.column_stack(pairs)
    return (np.median(d, axis=1) if np.isnan(d).any() else row_medians(d)) / (math.sqrt(2) * NORMAL_Q3), df


def history_sigma(values: Sequence[float], min_points: int) -> Noise | None:
    """Noise from consecutive commits' values: the SD of successive log differences / sqrt(2), the
    larger of a robust one (Qn) and the classical one without the largest difference.

    Successive differences ignore slow drift, and either estimate ignores the odd real change (Qn any
    minority of the differences, the other the largest), so a history that contains a regression
    still yields the noise level rather than the regression's size.  Qn alone also ignores noise that
    comes in two modes, which is what a check then meets: on a VM whose vCPUs ran the demo at 24 or at
    30 ms, a history of six sessions that happened to fall in one mode read ±3.5% and the next session
    in the other mode was a -21% "optimization" (resampled sessions of a demo history: 6 of 3,000 A/A
    checks; 1 with the trimmed spread beside Qn)."""
    if len(values) < min_points:
        return None
    diffs = np.diff(np.log(np.maximum(np.asarray(values, float), 1.0)))
    trimmed = np.sort(np.abs(diffs))[:-1]
    sd = max(qn_scale(diffs), math.sqrt(float(np.mean(trimmed ** 2))))
    return Noise(sd / math.sqrt(2), max(len(diffs) - 1, 1), "history")


def cross_section_sigma(residuals: Sequence[float]) -> Noise | None:
    """Noise from one pair of collections: the robust spread, across functions, of each function's
    log(target/base) minus the common shift.  Most functions do not change in a commit, so this is
    how much one function's ratio wanders by luck; the MAD ignores the few that did change."""
    r = np.asarray(residuals, float)
    if len(r) < 5:
        return None
    return Noise(qn_scale(r), len(r) - 1, "cross-section")


def spreads(rows) -> tuple[np.ndarray, float]:
    """`spread` of every row of a matrix (rows of one length) at once, and their degrees of freedom."""
    v = np.asarray(rows, float)
    n = v.shape[1]
    if n < 2:
        return np.zeros(len(v)), 0.0
    if n < ROBUST_FROM:
        return np.std(v, axis=1, ddof=1), n - 1.0
    return _qn_rows(v), QN_EFFICIENCY * (n - 1)


def qn_scale(x: Sequence[float]) -> float:
    """Rousseeuw & Croux's Qn: a robust SD with 82% efficiency at the normal (the MAD has 37%, which
    with the ~20 functions of a small program makes the noise estimate, and so the power, erratic).
    The k-th smallest pairwise distance, k = C(h, 2) with h = n // 2 + 1, times 2.2219 and the
    finite-sample factor that makes it unbiased at the normal (`qn_factor`)."""
    v = np.asarray(x, float)
    return float(_qn_rows(v[None, :])[0]) if len(v) >= 2 else 0.0


def _qn_rows(v: np.ndarray) -> np.ndarray:
    """`qn_scale` of every row of a matrix (rows of n >= 2 values) at once."""
    n = v.shape[1]
    i, j = _pairs(n)
    h = n // 2 + 1
    k = h * (h - 1) // 2
    return 2.2219 * np.partition(np.abs(v[:, i] - v[:, j]), k - 1, axis=1)[:, k - 1] * qn_factor(n)


# Croux & Rousseeuw (1992), "Time-efficient algorithms for two highly robust estimators of scale",
# Table 1 (simulated d_n for n <= 9); above it n / (n + 1.4) for odd n and n / (n + 3.8) for even n.
_QN_SMALL = {2: 0.399, 3: 0.994, 4: 0.512, 5: 0.844, 6: 0.611, 7: 0.857, 8: 0.669, 9: 0.872}


def qn_factor(n: int) -> float:
    """The finite-sample correction of Qn (simulated in tests/test_statistics.py for n = 3..60)."""
    if n in _QN_SMALL:
        return _QN_SMALL[n]
    return n / (n + 1.4) if n % 2 else n / (n + 3.8)


def holm(pvalues: Sequence[float], weights: Sequence[float] | None = None, total: float | None = None) -> list[float]:
    """(Weighted) Holm-Bonferroni adjusted p-values: family-wise error control over all functions
    checked.  Without it, 40 functions tested at 1% raise a false alarm in a third of clean commits.
    Weights (Holm 1979, weighted form) give some hypotheses a larger share of the error budget; the
    family-wise level holds for any fixed non-negative weights.  `total`: the budget the weights are
    shares of, when they add up to less (a share kept for hypotheses not tested; default their sum)."""
    m = len(pvalues)
    w = [1.0] * m if weights is None else [max(float(x), 1e-12) for x in weights]
    order = sorted(range(m), key=[p / x for p, x in zip(pvalues, w)].__getitem__)
    remaining = sum(w) if total is None else max(total, sum(w))
    adjusted = [0.0] * m
    running = 0.0
    for i in order:
        p = pvalues[i] * remaining / w[i]  # (running = max(running, min(1.0, p)), NaN as 1, without two calls)
        adjusted[i] = running = (p if p < 1.0 else 1.0) if not p <= running else running
        remaining -= w[i]
    return adjusted


def center_interval(totals: list[float], confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Interval of the center of one session's runs (the timeline's band, `show`'s sessions): the runs'
    own spread on the log scale, Student's t with n - 1 degrees of freedom.  None with one run: no
    spread to go by."""
    n = len(totals)
    if n < 2:
        return None, None
    if n >= 3:  # (pooled_replicate_sigma of one group, inline; the index takes all its rows at once: center_intervals)
        logs = [math.log(max(float(x), 1.0)) for x in totals]
        sigma = _pairs_sd([abs(a - b) for a, b in itertools.combinations(logs, 2)])
    else:
        lt = np.log(np.maximum(totals, 1.0))
        sigma = float(abs(lt[0] - lt[1]) / math.sqrt(2))
    return center_interval_bounds(math.log(max(center(totals), 1.0)), sigma, _center_df(n), n, confidence)


# A timeline's prior weighs at least this many degrees of freedom (the fit over a few points is itself
# noisy; as the checks' MODERATION_DF).
LINE_MIN_DF = 4


def _center_df(n: int) -> float:
    """Degrees of freedom of one session's run-to-run spread in `center_interval` (n >= 2 runs)."""
    return PAIRS_EFFICIENCY * (n - 1) if n >= 3 else 1.0


def line_intervals(centers: Sequence[float], highs: Sequence[float | None], runs: Sequence[int],
                   confidence: float = 0.95) -> list[tuple[float | None, float | None]]:
    """The intervals of a timeline's points, in order (each a session's center, the upper bound of its
    `center_interval` and its runs), each point's run-to-run spread moderated along the line
    (`squeeze`, its trend over the points in order).  Three runs give a spread of ~1.4 degrees of
    freedom, whose t quantile (~6) drew lz4's band from 15 to 376 ms around a point of 76 ms; the band
    follows how much the runs of nearby commits spread instead, a point's own runs weighing what their
    degrees of freedom do.  Conservative, as the own intervals are (simulated, 3 runs a point: 99.8%
    of 10,000 points covered at 95%, the own intervals 99.3%; half their width).  A point of one run
    has none; under three points with a spread, each keeps its own."""
    q = 0.5 + confidence / 2
    own = {i: (math.log(max(c, 1.0)), n, _center_df(n)) for i, (c, h, n) in enumerate(zip(centers, highs, runs))
           if h is not None and math.isfinite(h) and n >= 2}
    # each point's spread back from its own interval: half = t(df) x sigma x sqrt(center_var(n)) (bounds
    # stored as whole nanoseconds may have rounded below the center)
    spread = {i: max(math.log(max(highs[i], 1.0)) - c, 0.0) / (_quantile(df, q) * math.sqrt(center_var(n)))
              for i, (c, n, df) in own.items()}
    priors = squeeze([s ** 2 for s in spread.values()], [df for _, _, df in own.values()], list(own), LINE_MIN_DF)
    # the prior is itself estimated from the line's degrees of freedom: it weighs at most as much (where
    # the fit finds the points' spreads alike, limma's weight is infinite, and a commit whose three runs
    # spread 5x more than every other's would be drawn as narrow as theirs)
    most = sum(df for _, _, df in own.values())
    out: list[tuple[float | None, float | None]] = [(None, None)] * len(centers)
    for k, (i, (c, n, df)) in enumerate(own.items()):
        var, df = (Prior(priors[k].var, min(priors[k].df, most)).moderate(spread[i] ** 2, df) if priors
                   else (spread[i] ** 2, df))
        out[i] = center_interval_bounds(c, math.sqrt(var), df, n, confidence)
    return out


def center_interval_bounds(log_center: float, sigma: float, df: float, n: int,
                           confidence: float) -> tuple[float, float]:
    """The interval of a center of n runs (log `log_center`) whose one run spreads `sigma` (log)."""
    lo, hi = interval(log_center, sigma * math.sqrt(center_var(n)), df, confidence)
    return lo + 1, hi + 1


@functools.lru_cache(maxsize=32)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (i, j) index arrays of every pair i < j of n values (`np.triu_indices`, which builds an n x n
    mask each call: three times a commit in the index's summaries and checks); read-only, being shared."""
    i, j = np.triu_indices(n, 1)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def center_intervals(rows: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`center` and `center_interval` of every row of a matrix (sessions of as many runs) at once:
    the index derives them for every function of every commit (two of a commit's ~30 ms at 200
    functions, row by row).  The bounds are NaN with one run."""
    n = rows.shape[1]
    centers = _centers(rows)
    if n < 2:
        return centers, np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    logs = np.log(np.maximum(rows, 1.0))
    if n >= 3:
        i, j = _pairs(n)
        sigma = _centers(np.abs(logs[:, i] - logs[:, j])) / (math.sqrt(2) * NORMAL_Q3)  # (their median)
    else:
        sigma = np.abs(logs[:, 0] - logs[:, 1]) / math.sqrt(2)
    half = _quantile(_center_df(n), 0.5 + confidence / 2) * (sigma * math.sqrt(center_var(n)))
    c = np.log(np.maximum(centers, 1.0))
    return centers, _expm1s(c - half) + 1, _expm1s(c + half) + 1


def _expm1s(x: np.ndarray) -> np.ndarray:
    """`_expm1` of every element."""
    return np.where(x < 700, np.expm1(np.minimum(x, 700)), np.inf)
