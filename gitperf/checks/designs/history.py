"""The unpaired design (ARCHITECTURE.md §10): runs of two separate collections, tested against the
noise the history shows between sessions.  On a shared machine the runs of one collection share its
luck: all of them may be 20% slower than the last collection's (measured on the demo).  So two levels:

* The workload's total (the root function) is tested against that session-to-session noise,
  estimated from the history, else assumed (PRIOR_SESSION_SIGMA): `test_root`.
* Every other function is tested on its *residual*: its log ratio minus the median log ratio of
  all functions (the common shift of this pair of sessions): `test_residual`.  Given `MIN_HISTORY`
  commits of history, its noise is its own session-to-session spread of that residual there
  (`noisemodel.session_noise`), moderated towards functions of its size and widened when this pair is
  noisier than the history; with less, the larger of its replicate spread (moderated the same way)
  and the cross-section spread of the residuals.  A function that got slower while the rest of the
  program did not stands out however lucky either session was.  (The runs of one session share more
  than its common shift: on the demo's full trace `text_generate` spread 10% between the runs of one
  session and 15% between sessions, and replicates alone raised 6 false alarms in 90 A/A pairs in CI.)
"""

from __future__ import annotations

import functools
import math

import numpy as np

from gitperf.checks.decision import Tested
from gitperf.checks.noisemodel import (MIN_HISTORY, NOISE_FLOOR, SUCCESSIVE_DF, Sessions, Shift, center_scale,
                                       runs_of)
from gitperf.checks.sides import Side, Sides, absent_is_zero, extra_var
from gitperf.core.model import ROOT, StoredProfile
from gitperf.stats import inference
from gitperf.stats.timing import Runs, exact


# Session-to-session SD of a workload's log total when there is no history to measure it: on these
# shared machines `main` of the demo had a CV of 5.3% over 8 collections of `default` and 6 of
# `small` one hour, and 9.7% over 10 of `small` the next.  On a 2-vCPU VM whose speed moves between
# two modes a session can fall wholly in either: 24 sessions of Lua at defaults (40 or 66 ms a run)
# spread 0.21 (the demo's 0.11), and at 0.12 the run was a finding in 9-11% of resampled A/A checks
# with under four commits of history, as often as in the checks of a real +21% slowdown
# (bench/resample.py --histories 0,1,2): no information.  Four commits of history replace it with a
# measurement.
PRIOR_SESSION_SIGMA = 0.20


def test_root(t: Side, b: Side, shift: Shift, history: list[float], runs: inference.Noise | None) -> Tested:
    """The workload total: against the session-to-session noise of the history (else the prior),
    moderated towards the spread of its runs (`root_runs`; ROOT_PRIOR_DF).  Its replicates' spread,
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
    w = _replicates(ROOT, center_scale(t, b), shift)
    if session_se >= w.sigma:
        se, df, label = session_se, noise.df, f"{noise.source} ±{noise.sigma * 100:.1f}%"
    elif history_noise is not None:
        df = df_h + w.df
        se = math.sqrt((df_h * session_se ** 2 + w.df * w.sigma ** 2) / df)
        label = f"history and {w.source} ±{se * 100:.1f}%"
    else:
        se, df, label = w.sigma, w.df, f"{w.source} ±{w.sigma * 100:.1f}%"
    return Tested(ROOT, shift.log_ratio[ROOT], math.sqrt(se ** 2 + extra_var(t, b)), df, label)


# The history's few sessions can all have fallen in one of a machine's modes: on a VM whose vCPUs ran
# the demo at 24 or at 30 ms, six sessions in the slow mode read ±3%, and the next session's three
# runs in the fast one were a -24% "optimization" (bench/resample.py: 23 of 3,000 resampled A/A checks
# of the demo's sessions, the run's own; of Lua's, 40 or 70 ms a run, 99).  Its runs show the modes
# the sessions missed (sessions of [23.3, 30.3, 29.0] ms): their classical spread, over the pair's and
# the history's sessions, weighs as two degrees of freedom in the history's estimate (2 of 3,000, Lua
# 0; the slowdowns as often flagged).  A quiet machine's runs spread little: its root test loses nothing.
ROOT_PRIOR_DF = 2


def root_runs(sides: Sides, t: Side, b: Side) -> inference.Noise | None:
    """The workload total's run-to-run spread (log, classical: the modes are the minority a robust
    one leaves out), pooled over this pair's sessions and the history's."""
    history = [[v for v in runs_of(h, ROOT, t.native) if v] for h in sides.history]
    return inference.pooled_classical_sigma([t.totals, b.totals] + history, "runs")


def sessions_alike(t: Side, b: Side, session: Sessions) -> bool:
    """Whether the history's sessions had as many runs as this pair: their spread holds its noise."""
    return len(t.totals) + len(b.totals) >= 2 * session.runs


_NO_REPLICATES = inference.Noise(0.0, math.inf, "replicates")


def _replicates(n: str, scale: float, shift: Shift) -> inference.Noise:
    """The standard error of a function's difference of centers from the runs of the sessions (the
    larger of the two estimates): its runs' robust spread (moderated towards functions of its size,
    but for the root) scaled to the centers (`scale`: `center_scale` of its sides), or the resampled
    centers (`center_spreads`), which a heavy-tailed or two-moded function needs."""
    w, out = shift.within_of(n), _NO_REPLICATES
    if w and n == ROOT:
        out = inference.Noise(w.sigma * scale, w.df, "replicates")
    elif w and n in shift.replicates:
        var, df = shift.replicates[n].moderate(w.sigma ** 2, w.df)
        out = inference.Noise(math.sqrt(var) * scale, df, "replicates")
    resampled = shift.centers.get(n)
    return resampled if resampled and resampled.sigma > out.sigma else out


def test_residual(n: str, t: Side, b: Side, shift: Shift, session: Sessions | None) -> Tested:
    """A function: its residual against its session-to-session spread in the history (`session_noise`:
    moderated, scaled to this pair), which holds the run-to-run noise of sessions of as many runs;
    else (too little history, or fewer runs than its sessions had) also its moderated replicate
    spread, or the cross-section spread of this pair's residuals."""
    scale = center_scale(t, b)
    noise = session.noise.get(n) if session else None
    # whether the history's sessions had as many runs: their spread holds this pair's noise, replicates' too
    alike = noise is not None and sessions_alike(t, b, session)
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
    return Tested(n, shift.log_ratio[n] - shift.common, math.sqrt(se ** 2 + extra_var(t, b, sampling)), df,
                  f"{label} ±{se * 100:.1f}%")


def history_levels(profiles: list[StoredProfile], both: dict[str, tuple[Side, Side]],
            native: bool | None) -> dict[str, float]:
    """Each function's center over one history commit's runs, in its sides' measure (`native`: the
    one of all of them, None where they differ)."""
    runs = Runs(p.profile for p in profiles)
    if native is not None and (lv := _commit_levels(runs, native)).keys() <= both.keys():
        return lv  # (no function besides: the commit's own, as it is; most history checks)
    lvs = {m: _commit_levels(runs, m) for m in (True, False) if native is None or m == native}
    return {n: lv[n] for n, (t, _b) in both.items() if n in (lv := lvs[t.native])}


# The index checks its line oldest first and each check reads its ten predecessors' levels: one
# commit's levels serve the next ten checks (half of the checks' time was this loop at 1,000 x 200).
# A check reads one measure of them (native, unless a function's probes outweigh it): each is
# computed when asked.
@functools.lru_cache(maxsize=128)
def _commit_levels(runs: Runs, native: bool) -> dict[str, float]:
    """Every function's center over one commit's runs, in native (or inclusive) time; a function a
    run lacks counts 0 where that run's plan traced it, and one that is 0 throughout is left out."""
    counted = exact(runs, True)  # (the functions every run counted: their centers at once)
    # (native: `Profile.times`' native_ns, total less probes whatever their share, as below)
    rows = np.maximum(counted.raw - counted.probes, 0.0) if native else counted.raw
    out = {n: c for n, c, nonzero in zip(counted.names, inference.row_medians(rows).tolist(), rows.any(axis=1).tolist())
           if nonzero}
    # (every run has the counted functions: one with no other has as many, as most commits' runs do)
    others = any(len(p.functions) > len(counted.names) for p in runs)
    names = {f.name for p in runs for f in p.functions}.difference(counted.names) if others else ()
    times = [p.times(native) for p in runs] if names else []  # (the others, one at a time: most commits have none)
    for n in names:
        v = [float(x) if (x := ts.get(n)) is not None else 0.0
             for ts, p in zip(times, runs) if n in ts or absent_is_zero(p, n)]
        if any(v):
            out[n] = inference.center(v)
    return out
