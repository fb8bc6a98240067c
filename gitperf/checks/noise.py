"""`git perf noise`: how much do collections of the *same* commit differ on this machine (A/A),
what is the smallest change the checks can then detect, and which thresholds fit.

Every pair of sessions goes through the real check (`checks.compare_workload`), with the other
sessions as its history, so the false-alarm count printed is what `git perf check` would have said
about an unchanged commit with that much history behind it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special

from gitperf import checks
from gitperf.core.config import CheckConfig
from gitperf.core.model import Profile, StoredProfile
from gitperf.stats import inference

POWER = 0.9


@dataclass(frozen=True)
class FunctionNoise:
    name: str
    time_ns: float  # median inclusive time per run
    session_cv: float  # SD of log(total) between sessions (medians of each session's runs)
    run_cv: float  # SD of log(total) between runs of one session
    detectable: float  # smallest relative slowdown (beyond the program's common shift) that a check
    # between two sessions detects with 90% power, at the worst case of Holm's correction
    false_alarms: int  # A/A pairs in which the check called this function degraded


@dataclass(frozen=True)
class NoiseReport:
    workload: str
    sessions: int
    runs_per_session: int
    pairs: int  # every ordered pair of sessions
    pairs_with_false_alarm: int
    consecutive_checks: int  # each session against the one before it (the first against the last)
    consecutive_with_false_alarm: int
    functions: tuple[FunctionNoise, ...]
    recommended_min_relative: float
    recommended_repeat: int

    def to_dict(self) -> dict:
        return asdict(self)


def analyse(workload: str, sessions: list[list[Profile]], cfg: CheckConfig, commit: str = "0" * 40) -> NoiseReport:
    """A/A analysis of `sessions` (each a list of runs' profiles of one workload, same commit)."""
    wrap = [[StoredProfile(commit, i, f"s{k}r{i}", p) for i, p in enumerate(s)] for k, s in enumerate(sessions)]
    alarms: dict[str, int] = {}
    resid: dict[str, list[float]] = {}  # per function: its statistics and relative changes, where it has
    rel: dict[str, list[float]] = {}  # one (a withheld, new or removed function has none: NaN)
    bad_pairs = bad_consecutive = 0
    pairs = list(itertools.permutations(range(len(wrap)), 2))
    consecutive = {((i - 1) % len(wrap), i) for i in range(len(wrap))} if len(wrap) > 2 else {(0, 1)}
    for a, b in pairs:
        # the other sessions stand in for the history a real check would have, nearest first
        history = [wrap[k] for k in sorted(range(len(wrap)), key=lambda k: (abs(k - a), k)) if k not in (a, b)]
        found = checks.compare_workload(checks.Sides(workload, wrap[b], wrap[a], history), cfg, opinions=False)
        if any(c.type == checks.DEGRADATION for c in found):
            bad_pairs += 1
            bad_consecutive += (a, b) in consecutive
        for c in found:
            if c.type == checks.DEGRADATION:
                alarms[c.function] = alarms.get(c.function, 0) + 1
            if c.base_ns > 0 and c.target_ns > 0 and math.isfinite(c.relative) and math.isfinite(c.statistic):
                resid.setdefault(c.function, []).append(c.statistic)
                rel.setdefault(c.function, []).append(abs(c.relative))
    names = sorted({f.name for s in sessions for p in s for f in p.functions})
    n_tests = max(len(names), 1)
    # the one-sided quantile a function must clear after Holm's worst case, plus the power quantile
    z = -special.ndtri((1 - cfg.confidence) / n_tests) - special.ndtri(1 - POWER)
    rows = []
    for n in names:
        per_session = [[float(f.total_ns) for p in s if (f := p.function(n)) is not None] for s in sessions]
        per_session = [v for v in per_session if v and min(v) > 0]
        if len(per_session) < 2:
            continue
        medians = [inference.center(v) for v in per_session]
        session_sd = float(np.std(np.log(medians), ddof=1))
        run = inference.pooled_replicate_sigma(per_session)
        pair_sd = float(np.std(resid.get(n, [0.0]), ddof=1)) if len(resid.get(n, [])) > 1 else session_sd * math.sqrt(2)
        rows.append(FunctionNoise(n, float(np.median(medians)), session_sd, run.sigma if run else 0.0,
                                  math.expm1(z * pair_sd), alarms.get(n, 0)))
    rows.sort(key=lambda r: -r.time_ns)
    big = [r for r in rows if r.time_ns >= cfg.min_absolute_ns]
    # Threshold: the change that noise alone reaches in 5% of A/A checks, for the typical function
    # (median over functions above min_absolute_ns).  Below it, a "change" is mostly luck; the
    # statistical test already guards against it, the threshold makes the guard explicit.
    p95 = [float(np.quantile(rel[r.name], 0.95)) for r in big if len(rel.get(r.name, [])) >= 2]
    rec = max(cfg.min_relative, math.ceil(float(np.median(p95)) * 100) / 100) if p95 else cfg.min_relative
    runs = len(sessions[0]) if sessions else 0
    # Medians need three runs to shrug off one disturbed run; more runs only help the within-session part.
    rec_repeat = max(3, runs) if any(r.run_cv > 0.05 for r in big) else max(1, runs)
    return NoiseReport(workload, len(sessions), runs, len(pairs), bad_pairs, len(consecutive), bad_consecutive,
                       tuple(rows), rec, rec_repeat)
