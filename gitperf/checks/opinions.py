"""The opinions beside a verdict (ARCHITECTURE.md §10): the thesis' methods (average amount,
integral comparison of models, local statistics), a Mann-Whitney test over the sampled calls, a
bootstrap of the mean call, the robust z-score against the history and change-point detection.
They are reported as votes; they never decide."""

from __future__ import annotations

import numpy as np

from gitperf.checks.change import DEGRADATION, NO_CHANGE, OPTIMIZATION, UNKNOWN
from gitperf.checks.sides import Side
from gitperf.core.config import CheckConfig
from gitperf.stats import models
from gitperf.stats.votes import bootstrap_ratio_ci, change_points, mann_whitney_slower


HISTORY_Z = 3.5  # Iglewicz & Hoaglin's outlier cut-off for the modified z-score


def _vote(rel: float, threshold: float) -> str:
    """A method's verdict on a relative change of time (lower is better)."""
    return DEGRADATION if rel >= threshold else OPTIMIZATION if rel <= -threshold else NO_CHANGE


def _votes(t: Side, b: Side, cfg: CheckConfig) -> dict[str, str]:
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
        slower = mann_whitney_slower(ts, bs)
        faster = mann_whitney_slower(bs, ts)
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


def opinions_of(t: Side, b: Side, z: float | None, cfg: CheckConfig, sign: int):
    """The other methods' votes and the bootstrap interval of the mean call (they never decide)."""
    votes = _votes(t, b, cfg)
    per_call = None
    if len(t.series) >= 10 and len(b.series) >= 10:
        per_call = bootstrap_ratio_ci([v for _, v in t.series], [v for _, v in b.series])
        up, down = per_call[0] >= cfg.min_relative, per_call[1] <= -cfg.min_relative  # the whole interval moved
        votes["bootstrap-mean"] = (DEGRADATION if (up if sign > 0 else down) else
                                   OPTIMIZATION if (down if sign > 0 else up) else NO_CHANGE)
    if z is not None:
        votes["history-z"] = (DEGRADATION if sign * z >= HISTORY_Z else OPTIMIZATION if sign * z <= -HISTORY_Z
                              else NO_CHANGE)
    return votes, per_call


def level_shift_since(history: list[tuple[str, float]], now: float, alpha: float, sign: int) -> str | None:
    """Where a level shift towards `now` began in the history ((commit, value) pairs, nearest first;
    change-point detection); None when it began at the target or no commit is known."""
    if len(history) < 2:
        return None
    series = [v for _, v in reversed(history)] + [now]  # oldest first
    order = [c for c, _ in reversed(history)] + [""]
    shifts = [c for c in change_points(series, window=5, alpha=alpha) if sign * (c.after - c.before) > 0]
    return (order[shifts[-1].index] or None) if shifts else None
