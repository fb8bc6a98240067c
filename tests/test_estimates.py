"""The sampled estimates against simulated ground truth (gitperf/estimate.py).

A simulated run is a timeline of calls with known durations, so every function's true exclusive time
and call count are known exactly.  Sampling it as the engine does (a periodic timer with a random
phase; bursts of probes with a random phase) and estimating many times tells whether an estimator is
unbiased (the mean of the estimates is within its standard error of the truth) and whether its
interval covers the truth at the nominal 95%.  The same checks reject a biased estimator and an
interval that is too narrow, so they are not vacuous.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from gitperf.stats import estimate

RUNS = 1500  # simulated runs per check: the coverage check's own noise is sqrt(.95*.05/1500) = 0.6%


class Run:
    """One simulated run: calls laid end to end (the program is always in some function), the
    function of each call drawn by its call rate, durations exponential around its mean."""

    def __init__(self, rng: np.random.Generator, funcs: dict[str, tuple[float, float]], calls: int):
        self.names = list(funcs)
        rate = np.array([funcs[n][0] for n in self.names])
        mean = np.array([funcs[n][1] for n in self.names])
        self.fid = rng.choice(len(self.names), size=calls, p=rate / rate.sum())
        self.dur = rng.exponential(mean[self.fid])
        self.end = np.cumsum(self.dur)
        self.start = self.end - self.dur
        self.wall = float(self.end[-1])

    def time(self, name: str) -> float:
        return float(self.dur[self.fid == self.names.index(name)].sum())

    def calls(self, name: str) -> int:
        return int((self.fid == self.names.index(name)).sum())

    def stack_samples(self, rng: np.random.Generator, period: float) -> tuple[dict[str, int], int]:
        """A periodic timer with a random phase, as perf_event's CPU clock: (hits by name, samples)."""
        t = np.arange(rng.uniform(0, period), self.wall, period)
        hit = self.fid[np.searchsorted(self.end, t, side="right")]
        counts = np.bincount(hit, minlength=len(self.names))
        return dict(zip(self.names, counts.tolist())), len(t)

    def bursts(self, rng: np.random.Generator, name: str, period: float, window: float,
               ) -> tuple[list[int], list[float]]:
        """Per burst, the calls of `name` that start while the probes are attached
        ([phase + k*period, phase + k*period + window)) and their summed durations."""
        phase = rng.uniform(-period, 0)
        k = np.floor((self.start - phase) / period).astype(int)
        mine = (np.mod(self.start - phase, period) < window) & (self.fid == self.names.index(name))
        m = int(np.floor((self.wall - phase) / period)) + 1
        return (np.bincount(k[mine], minlength=m).tolist(),
                np.bincount(k[mine], weights=self.dur[mine], minlength=m).tolist())


FUNCS = {"hot": (5.0, 3.0), "warm": (20.0, 0.4), "cold": (2.0, 0.1), "tiny": (40.0, 0.02)}
CALLS = 3000  # per run: ~1000 time units


def check(estimates: list[estimate.Estimate], truths: list[float]) -> tuple[float, float]:
    """(bias in standard errors, coverage) of estimates of varying truths: the relative error
    (estimate - truth) / truth averaged over runs."""
    rel = [(e.value - t) / t for e, t in zip(estimates, truths)]
    z = statistics.fmean(rel) / (statistics.stdev(rel) / math.sqrt(len(rel)))
    coverage = sum(e.covers(t) for e, t in zip(estimates, truths)) / len(truths)
    return z, coverage


def unbiased_and_nominal(z: float, coverage: float) -> bool:
    # |z| < 3.5: a 1-in-2000 false alarm for an unbiased estimator; coverage within 3 binomial
    # standard errors of 95% (periodic sampling may cover more: only under-coverage fails).
    return abs(z) < 3.5 and coverage >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / RUNS)


def simulate_stack(estimator, name: str, period: float = 0.7, seed: int = 1):
    rng = np.random.default_rng(seed)
    ests, truths = [], []
    for _ in range(RUNS):
        run = Run(rng, FUNCS, CALLS)
        hits, n = run.stack_samples(rng, period)
        ests.append(estimator(hits[name], n, run.wall))
        truths.append(run.time(name))
    return check(ests, truths)


def test_sample_share_is_unbiased_with_nominal_coverage():
    for name in ("hot", "warm", "cold"):
        z, cov = simulate_stack(estimate.sample_share, name)
        assert unbiased_and_nominal(z, cov), (name, z, cov)


def test_the_stack_check_rejects_a_biased_estimator_and_a_too_narrow_interval():
    # Add-one smoothing, (k+1)/(n+2), is a common "fix" for zero counts: biased toward 1/2.
    def smoothed(k, n, scale):
        e = estimate.sample_share(k, n, scale)
        v = scale * (k + 1) / (n + 2)
        return estimate.Estimate(v, e.low, e.high)

    z, _cov = simulate_stack(smoothed, "cold", period=5.0)
    assert abs(z) > 3.5, z

    # The Wald interval at half width: unbiased point, interval far too narrow.
    def narrow(k, n, scale):
        p = k / n
        h = 0.5 * estimate.Z95 * math.sqrt(p * (1 - p) / n)
        return estimate.Estimate(scale * p, scale * (p - h), scale * (p + h))

    z, cov = simulate_stack(narrow, "warm", period=5.0)
    assert abs(z) < 3.5, (z, cov)
    assert not unbiased_and_nominal(z, cov), (z, cov)


def simulate_bursts(estimator, name: str, seed: int = 2, window: float = 5.0, total: bool = False):
    """`estimator(per-burst values, 0.1)` over RUNS runs whose probes are live for `window` of every
    50 time units (nominally 10%): the calls of `name` (with `total`, their time) against the truth."""
    rng = np.random.default_rng(seed)
    ests, truths = [], []
    for _ in range(RUNS):
        run = Run(rng, FUNCS, CALLS)
        counts, totals = run.bursts(rng, name, 50.0, window)
        ests.append(estimator(totals if total else counts, 0.1))
        truths.append(run.time(name) if total else run.calls(name))
    return check(ests, truths)


def test_thinned_count_is_unbiased_with_nominal_coverage():
    for name in ("hot", "warm", "tiny"):
        z, cov = simulate_bursts(estimate.burst_sum, name)
        assert unbiased_and_nominal(z, cov), (name, z, cov)


def test_thinned_total_is_unbiased_with_nominal_coverage():
    z, cov = simulate_bursts(estimate.burst_sum, "warm", seed=3, total=True)
    assert unbiased_and_nominal(z, cov), (z, cov)


def test_the_burst_check_rejects_scaling_by_the_nominal_duty_when_less_was_live():
    # Attaching takes time: probes live for 4 of a nominal 5 ms window.  Scaling by the nominal
    # 10% under-counts by a fifth; the engine measures the live time for that reason.
    z, cov = simulate_bursts(estimate.burst_sum, "warm", seed=4, window=4.0)
    assert not unbiased_and_nominal(z, cov), (z, cov)
    assert z < -3.5, (z, cov)


def test_wilson_interval_edges():
    assert estimate.wilson(0, 0) == (0.0, 1.0)
    lo, hi = estimate.wilson(0, 100)
    # "rule of three": ~3/n
    assert lo < 1e-12
    assert 0.03 < hi < 0.04
    lo, hi = estimate.wilson(50, 100)
    assert lo < 0.5 < hi
    assert abs((lo + hi) / 2 - 0.5) < 1e-12
    e = estimate.burst_sum([0, 0, 0], 0.5)
    assert e.value == 0
    assert e.low == 0
    assert estimate.burst_sum([7], 0.1).high == math.inf  # one burst: no spread, no upper bound
    assert estimate.burst_sum([3, 4], 1.0) == estimate.Estimate(7, 7, 7)


def test_the_binomial_burst_interval_under_covers_phased_programs():
    """Why burst_sum takes the spread between bursts: the textbook interval for independently
    thinned calls, sqrt(k(1-f))/f, is far too narrow when a long call can fill a whole burst."""
    def binomial(counts, f):
        k = sum(counts)
        se = math.sqrt(max(k, 1) * (1 - f)) / f
        return estimate.Estimate(k / f, k / f - estimate.Z95 * se, k / f + estimate.Z95 * se)

    z, cov = simulate_bursts(binomial, "warm", seed=5)
    assert abs(z) < 3.5, (z, cov)
    assert cov < 0.85, (z, cov)
