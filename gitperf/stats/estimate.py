"""Estimates from sampled data, each with a confidence interval from its sampling variance
(ARCHITECTURE.md §9, "sampling unbiasedness").  Pure functions; `collect.profile.build_functions` applies them.

Two sampling processes produce estimates in a profile:

* **stack samples** (perf_event timer): a function's share of samples estimates its share of run
  time.  k/n is unbiased for the share p whatever the program does, as long as the timer's phase is
  independent of the program; k is binomial(n, p) for independent sample times and less variable
  for a periodic timer, so the binomial (Wilson) interval is nominal or conservative.
* **bursts** (probes attached for a fraction f of the run): each call is seen with probability f
  when the bursts' phase is independent of the calls, so k/f (Horvitz-Thompson) is unbiased for the
  number of calls N, and a total seen in bursts over f for the run's total.  The variance comes
  from the spread between bursts (see `burst_sum`).

`tests/test_estimates.py` checks both against simulated ground truth, and shows the check fails for
a biased estimator.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from scipy import special

Z95 = 1.959963984540054  # two-sided 95% normal quantile


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def covers(self, truth: float) -> bool:
        return self.low <= truth <= self.high


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n (good coverage even for k near 0 or n)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def sample_share(k: int, n: int, scale: float = 1.0) -> Estimate:
    """A function's share of `n` stack samples (k of them), times `scale` (the run's wall time in ns
    gives its exclusive time).  The point estimate is k/n itself, not the Wilson center: k/n is the
    unbiased one."""
    if n <= 0:
        return Estimate(0.0, 0.0, scale)
    lo, hi = wilson(k, n)
    return Estimate(scale * k / n, scale * lo, scale * hi)


def burst_sum(per_burst: Sequence[float], fraction: float) -> Estimate:
    """A sum over the whole run (calls, or their inclusive ns) from its values in each of m bursts
    that together covered `fraction` of the run: sum/fraction, unbiased when the bursts' phase is
    independent of the program.

    The spread comes from the bursts themselves, not from assuming calls arrive independently:
    real programs run in phases, so one burst can see a hundred calls of a function and the next
    none (the simulation in tests/test_estimates.py shows the binomial interval covering only 76%
    of the time there).  Var = m s^2 (1 - f) / f^2, as for m windows drawn from the 1/f-times
    larger population of windows, with a Student t quantile on m - 1 degrees of freedom."""
    total = float(sum(per_burst))
    if fraction >= 1.0:
        return Estimate(total, total, total)
    f = max(fraction, 1e-9)
    m = len(per_burst)
    value = total / f
    if m < 2:  # one burst says nothing about the spread between bursts
        return Estimate(value, total, math.inf)
    se = math.sqrt(m * statistics.variance(per_burst) * (1 - f)) / f
    h = float(special.stdtrit(m - 1, 0.975)) * se
    return Estimate(value, max(total, value - h), value + h)
