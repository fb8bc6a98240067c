"""What planning reads of the repository (ARCHITECTURE.md §7), read here once per workload and handed
to `plan.optimize` as values (`Inputs`): the commit a change is measured against, the functions the
source diff touched, and the statistics of "earlier runs" -- the baseline commit's profile of the same
configuration, read from the notes through the collection's one `History`, nothing separate to keep
in sync.  Planning reads no note, no commit and no diff itself."""

from __future__ import annotations

from gitperf.collect.context import CollectContext
from gitperf.core.config import Workload
from gitperf.core.errors import GitPerfError
from gitperf.core.model import Mode
from gitperf.git import sourcediff
from gitperf.git.repo import diff_base
from gitperf.plan.optimize import Baseline, Inputs, planned
from gitperf.store.history import History


def planning_inputs(ctx: CollectContext, wl: Workload) -> Inputs:
    """What `optimize` reads for workload `wl` (nothing when the pipeline runs no method)."""
    chosen = planned(ctx.choice)
    if not chosen:
        return Inputs()
    target = ctx.target
    base = diff_base(target.repo, target.commit, target.req.base)
    touched, why = frozenset[str](), ""
    if "diff-tracing" in chosen and base:
        try:
            touched = frozenset(sourcediff.changed_functions(target.repo, base, target.commit, ctx.subject.locations))
        except GitPerfError as e:
            touched, why = None, str(e)
    return Inputs(base, touched, why, _statistics(ctx.history, ctx.config_key(wl), base, target.req.base, target.commit))


def baseline_stats(history: History, config_key: str, base: str | None = None) -> Baseline:
    """The baseline profile's statistics (`History.nearest`: of `base` only, when given)."""
    sha, profile = history.nearest(config_key, base)
    if profile is None:
        return Baseline()
    plan = profile.plan
    dropped = {n: plan.reasons.get(n, "dynamic baseline") for n in plan.removed.get("dynamic-baseline", ())}
    return Baseline(sha, {f.name: f for f in profile.functions}, dropped)


def _statistics(history: History, config_key: str, base: str, base_rev: str | None, commit: str) -> Baseline:
    """The baseline's statistics: the base's when --base names it, else the nearest ancestor's.  When
    no ancestor ran this configuration: the commit's own earlier runs, so that its later runs leave out
    the same hot functions its descendants will (else a check compares a side that probed them, its
    callers' inclusive times inflated by their probes, with one that did not)."""
    found = baseline_stats(history, config_key, base if base_rev else None)
    if not found.stats and not base_rev:
        found = baseline_stats(history, config_key, commit)
    return found


def full_trace_hotspots(history: History, config_key: str) -> dict[str, int]:
    """Exclusive ns per function of the nearest complete full trace (every function, every call) of
    this configuration: the reference hotspot coverage (HC) is measured against."""
    _sha, p = history.nearest(config_key, want=lambda p: p.plan.mode == Mode.TRACE and not any(p.plan.removed.values()))
    return {f.name: f.exclusive_ns for f in p.functions} if p else {}
