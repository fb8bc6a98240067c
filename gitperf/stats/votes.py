"""The statistics of the other methods' votes beside a check's verdict (`checks.opinions`, ARCHITECTURE.md
§10): the robust z-score against the history, level shifts in it (change points), a Mann-Whitney test
and a bootstrap interval of the sampled calls.  They never decide.  Pure functions over plain numbers."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special

from gitperf.stats.inference import MAD_TO_SD, p_slower


def robust_z(value: float, history: Sequence[float]) -> float:
    """(log value - median) / (1.4826 MAD) against earlier commits (Iglewicz & Hoaglin)."""
    h = [math.log(max(float(x), 1.0)) for x in history]  # plain Python: ~10 values, called per function
    med = statistics.median(h)
    mad = MAD_TO_SD * statistics.median([abs(x - med) for x in h])
    mad = max(mad, 0.01)  # a perfectly flat history would make any change infinitely significant
    return (math.log(max(value, 1.0)) - med) / mad


def bootstrap_ratio_ci(target: Sequence[float], base: Sequence[float], confidence: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(target) / mean(base) - 1 (relative change of the mean)."""
    a = np.asarray(target, float)
    b = np.asarray(base, float)
    rng = np.random.default_rng(seed)
    ma = a[rng.integers(0, len(a), (n_boot, len(a)))].mean(axis=1)
    mb = b[rng.integers(0, len(b), (n_boot, len(b)))].mean(axis=1)
    r = ma / np.maximum(mb, 1e-9) - 1
    alpha = (1 - confidence) / 2
    return float(np.quantile(r, alpha)), float(np.quantile(r, 1 - alpha))


def mann_whitney_slower(target: Sequence[float], base: Sequence[float]) -> float:
    """One-sided p-value that target's per-call durations are stochastically larger than base's."""
    if len(target) < 3 or len(base) < 3:
        return 1.0
    from scipy import stats as sps  # (here: scipy.stats takes 0.3 s to import, which `collect` need not pay)
    return float(sps.mannwhitneyu(target, base, alternative="greater").pvalue)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first index of the new level
    before: float  # mean of the window before
    after: float  # mean of the window after
    p: float


def change_points(values: Sequence[float], window: int = 5, alpha: float = 0.01) -> list[ChangePoint]:
    """Level shifts in a series (oldest first), in the style of Hunter/Otava: at every split, a Welch
    t-test between the `window` values before and after on log scale; keep the smallest p-values
    below `alpha` (Bonferroni over the splits), at least `window` apart."""
    x = np.log(np.maximum(np.asarray(values, float), 1.0))
    n = len(x)
    cands = []
    for i in range(3, n):
        a, b = x[max(0, i - window):i], x[i:i + window]
        if len(b) < min(window, 2) and i != n - 1:
            continue  # a short window only at the newest value, where a shift must be seen first
        if len(b) == 1:  # a shift at the newest commit: compare it with the window's spread
            sd = max(float(np.std(a, ddof=1)), 0.01)
            p = 2 * p_slower(abs(b[0] - a.mean()), sd * math.sqrt(1 + 1 / len(a)), len(a) - 1)
        else:
            if np.std(a) == 0 and np.std(b) == 0:
                p = 0.0 if a.mean() != b.mean() else 1.0
            else:
                p = welch_p(a, b)
        cands.append((p, i, float(np.exp(a.mean())), float(np.exp(b.mean()))))
    picked: list[ChangePoint] = []
    for p, i, before, after in sorted(cands):
        p = min(1.0, p * len(cands))  # Bonferroni over the splits tried
        if p >= alpha or math.isnan(p):
            break
        if all(abs(i - c.index) >= window for c in picked):
            picked.append(ChangePoint(i, before, after, p))
    return sorted(picked, key=lambda c: c.index)


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's t-test of equal means (two values a side at least, not both
    constant): scipy.stats.ttest_ind(equal_var=False)'s, from scipy.special.  scipy.stats took 1.2 s
    to import in each of the index's workers on a 2-vCPU VM, and its test ~100 us a split."""
    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    t = (float(b.mean()) - float(a.mean())) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))  # Welch-Satterthwaite
    return float(2 * special.stdtr(df, -abs(t)))
