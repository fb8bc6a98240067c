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


@dataclass
class _Checked:
    """What the A/A checks of every ordered pair of sessions said: alarms per function, each function's
    statistics and relative changes (where it has one: a withheld, new or removed function has none),
    and the pairs with an alarm (all, and the consecutive ones)."""

    alarms: dict[str, int]
    resid: dict[str, list[float]]
    rel: dict[str, list[float]]
    bad_pairs: int = 0
    bad_consecutive: int = 0


def _check_pairs(workload: str, wrap: list[list[StoredProfile]], cfg: CheckConfig,
                 consecutive: set[tuple[int, int]]) -> _Checked:
    out = _Checked({}, {}, {})
    for a, b in itertools.permutations(range(len(wrap)), 2):
        # the other sessions stand in for the history a real check would have, nearest first
        history = [wrap[k] for k in sorted(range(len(wrap)), key=lambda k: (abs(k - a), k)) if k not in (a, b)]
        found = checks.compare_workload(checks.Sides(workload, wrap[b], wrap[a], history), cfg, opinions=False)
        if any(c.type == checks.DEGRADATION for c in found):
            out.bad_pairs += 1
            out.bad_consecutive += (a, b) in consecutive
        for c in found:
            if c.type == checks.DEGRADATION:
                out.alarms[c.function] = out.alarms.get(c.function, 0) + 1
            if c.base_ns > 0 and c.target_ns > 0 and math.isfinite(c.relative) and math.isfinite(c.statistic):
                out.resid.setdefault(c.function, []).append(c.statistic)
                out.rel.setdefault(c.function, []).append(abs(c.relative))
    return out


def _function_noise(name: str, sessions: list[list[Profile]], checked: _Checked, z: float) -> FunctionNoise | None:
    """One function's spreads between sessions and runs, and the change it would take to detect."""
    per_session = [[float(f.total_ns) for p in s if (f := p.function(name)) is not None] for s in sessions]
    per_session = [v for v in per_session if v and min(v) > 0]
    if len(per_session) < 2:
        return None
    medians = [inference.center(v) for v in per_session]
    session_sd = float(np.std(np.log(medians), ddof=1))
    run = inference.pooled_replicate_sigma(per_session)
    resid = checked.resid.get(name, [])
    pair_sd = float(np.std(resid, ddof=1)) if len(resid) > 1 else session_sd * math.sqrt(2)
    return FunctionNoise(name, float(np.median(medians)), session_sd, run.sigma if run else 0.0,
                         math.expm1(z * pair_sd), checked.alarms.get(name, 0))


def analyse(workload: str, sessions: list[list[Profile]], cfg: CheckConfig, commit: str = "0" * 40) -> NoiseReport:
    """A/A analysis of `sessions` (each a list of runs' profiles of one workload, same commit)."""
    wrap = [[StoredProfile(commit, i, f"s{k}r{i}", p) for i, p in enumerate(s)] for k, s in enumerate(sessions)]
    consecutive = {((i - 1) % len(wrap), i) for i in range(len(wrap))} if len(wrap) > 2 else {(0, 1)}
    checked = _check_pairs(workload, wrap, cfg, consecutive)
    names = sorted({f.name for s in sessions for p in s for f in p.functions})
    # the one-sided quantile a function must clear after Holm's worst case, plus the power quantile
    z = -special.ndtri((1 - cfg.confidence) / max(len(names), 1)) - special.ndtri(1 - POWER)
    rows = sorted((r for n in names if (r := _function_noise(n, sessions, checked, z)) is not None),
                  key=lambda r: -r.time_ns)
    big = [r for r in rows if r.time_ns >= cfg.min_absolute_ns]
    # Threshold: the change that noise alone reaches in 5% of A/A checks, for the typical function
    # (median over functions above min_absolute_ns).  Below it, a "change" is mostly luck; the
    # statistical test already guards against it, the threshold makes the guard explicit.
    p95 = [float(np.quantile(checked.rel[r.name], 0.95)) for r in big if len(checked.rel.get(r.name, [])) >= 2]
    rec = max(cfg.min_relative, math.ceil(float(np.median(p95)) * 100) / 100) if p95 else cfg.min_relative
    runs = len(sessions[0]) if sessions else 0
    # Medians need three runs to shrug off one disturbed run; more runs only help the within-session part.
    rec_repeat = max(3, runs) if any(r.run_cv > 0.05 for r in big) else max(1, runs)
    pairs = len(wrap) * (len(wrap) - 1)
    return NoiseReport(workload, len(sessions), runs, pairs, checked.bad_pairs, len(consecutive),
                       checked.bad_consecutive, tuple(rows), rec, rec_repeat)
