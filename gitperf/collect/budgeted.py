"""`--max-overhead` (ARCHITECTURE.md §8): the pilot (`collect.pilot`), call counts
(from earlier profiles, or a counting run of the changed and watched functions), then the hybrid
plan of `plan.hybrid`."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from gitperf.collect.context import CollectContext
from gitperf.collect.pilot import PILOT_HZ, run_pilot
from gitperf.core.config import Workload
from gitperf.core.errors import GitPerfError
from gitperf.core.fmt import names
from gitperf.core.model import ROOT, Mode
from gitperf.engine.base import RunWorkload
from gitperf.git import sourcediff
from gitperf.git.repo import diff_base, resolve_commit
from gitperf.plan import hybrid
from gitperf.plan.costs import call_costs, inside_costs
from gitperf.plan.optimize import Optimized
from gitperf.plan.probes import ProbePlan, as_hybrid


@dataclass(frozen=True)
class Counted:
    """What a counting pass found: the calls it settled, why the others will not be traced, and
    (when it ran to the end) each function's calibrated probe time as a share of its measured time."""

    calls: dict[str, float]
    why: dict[str, str]
    probe_share: dict[str, float]
    # whether the binary's root function ran (a run stopped early may not have reached it yet), and
    # the workload's exit status
    ran: bool = True
    exit_status: int | None = 0


def count_pass(ctx: CollectContext, plan: ProbePlan, names: tuple[str, ...], run: RunWorkload,
               budget_ns: float) -> Counted:
    """The workload once with only `names` (and the root) traced and no timer (`run` stops it at
    its deadline)."""
    per_call = call_costs(plan, ctx.cost_ns)
    count_plan = replace(as_hybrid(plan, names, 0), probe_cost=per_call)
    raw = ctx.target.engine.collect(ctx.binary, count_plan, run, lambda _m: None)
    counts = {f.name: r.count for f, r in zip(count_plan.functions, raw.functions) if f.name in names}
    settled = hybrid.counts_from_pass(counts, not raw.run.partial, per_call, budget_ns)
    if not raw.run.partial:
        inside = inside_costs(plan, ctx.cost_ns)
        shares = {f.name: (r.probe_ns + r.outer * inside[f.name]) / r.total_ns
                  for f, r in zip(count_plan.functions, raw.functions) if f.name in names and r.total_ns}
        root = [r.count for f, r in zip(count_plan.functions, raw.functions) if f.name == ROOT]
        return Counted(settled, {}, shares, not root or bool(root[0]), raw.run.exit_status)
    stopped = f"the counting pass ended early ({raw.run.partial}) after {raw.run.wall_s:.2f} s"
    why = {n: f"tracing costs at least {settled[n] * per_call[n] / 1e6:.3g} ms ({stopped} at {settled[n]:.0f} "
              f"calls), more than the {budget_ns / 1e6:.3g} ms budget" if n in settled
           else f"call frequency unknown: {stopped}, too early to rule tracing out" for n in names}
    return Counted(settled, why, {})


def _changed(ctx: CollectContext, opt: Optimized) -> tuple[str, ...]:
    """The functions the change touched: diff tracing's when a pipeline ran it, else the source diff's."""
    if "diff-tracing" in opt.methods or ctx.target.req.adhoc:
        return opt.plan.changed
    try:
        base = diff_base(ctx.target.repo, ctx.target.commit, ctx.target.req.base)
        return tuple(sorted(sourcediff.changed_functions(ctx.target.repo, base, ctx.target.commit,
                                                         ctx.subject.locations))) if base else ()
    except GitPerfError as e:
        ctx.progress(f"  the change's functions are unknown ({e}); weighing by time alone")
        return opt.plan.changed


def _baseline(ctx: CollectContext, wl: Workload):
    """Call counts: this commit's own traced profiles are the best source, else the baseline's."""
    counted = lambda p: len(hybrid.known_calls(p)) > 1  # noqa: E731 - more than the root
    history, key = ctx.history, ctx.config_key(wl)
    found = history.nearest(key, ctx.target.commit, counted)
    if found[1] is None:
        base = ctx.target.req.base
        found = history.nearest(key, base and resolve_commit(ctx.target.repo, base), counted)
    return found


def _counting_run(ctx: CollectContext, plan: ProbePlan, todo: tuple[str, ...], wl: Workload,
                  pilot: hybrid.Pilot) -> tuple[dict[str, float], dict[str, str]]:
    deadline = min(hybrid.counting_deadline(pilot.native_s, ctx.max_overhead), wl.timeout)
    ctx.progress(f"  counting pass: calls of {names(todo)} (changed or watched; no earlier profile counted "
                 f"{'it' if len(todo) == 1 else 'them'}), stopped after {deadline:.2f} s")
    counted = count_pass(ctx, plan, todo, ctx.runner(wl, deadline), pilot.budget_ns(ctx.max_overhead))
    return counted.calls, counted.why


def _earlier_plan(ctx: CollectContext, wl: Workload) -> hybrid.Kept | None:
    """The budgeted plan this workload's history keeps (`hybrid.kept`): the one the request hands in
    (`keep_plans`), else of this commit's own earlier collection, else of the nearest ancestor's; None
    with --replan."""
    if ctx.target.req.replan:
        return None
    for name, hz, traced in ctx.target.req.keep_plans:
        if name == wl.name:
            return hybrid.Kept(ctx.target.commit, frozenset(traced), int(hz))
    same = lambda p: p.plan.mode == Mode.HYBRID and p.plan.params.get("max_overhead") == ctx.max_overhead  # noqa: E731
    history, key = ctx.history, ctx.config_key(wl)
    sha, earlier = history.nearest(key, ctx.target.commit, same)
    if earlier is None and not ctx.target.req.adhoc:
        sha, earlier = history.nearest(key, None, same)
    return hybrid.kept(sha, earlier.plan if earlier else None, set(ctx.binary.by_name()), ctx.max_overhead)


def budgeted(ctx: CollectContext, plan: ProbePlan, opt: Optimized, wl: Workload) -> Optimized:
    """--max-overhead: the pilot (`collect.pilot`), then the hybrid plan (plan.hybrid):
    the one the workload's history keeps, else one chosen from the pilot and the call counts."""
    t0 = time.perf_counter()
    ctx.progress(f"overhead budget {ctx.max_overhead:.1%}: pilot of {wl.name} with {PILOT_HZ} Hz stack sampling")
    pilot = run_pilot(ctx.target.engine, ctx.binary, plan, ctx.runner(wl), ctx.cost_ns)
    if pilot.partial:
        ctx.progress(f"  warning: the pilot run is partial ({pilot.partial}); its run time may mislead the budget")
    changed = _changed(ctx, opt)
    if kept := _earlier_plan(ctx, wl):
        ctx.progress(f"  keeping the plan of {kept.commit[:12]}: {len(kept.traced)} function(s) traced, stack "
                     f"sampling at {kept.stack_hz} Hz (profiles of one plan compare; --replan chooses anew)")
        new_plan, params = hybrid.keep(replace(plan, changed=changed, removed=opt.plan.removed), kept, pilot,
                                       ctx.max_overhead)
        return replace(opt, plan=new_plan, params=params, native_s=pilot.native_s,
                       oo=opt.oo + time.perf_counter() - t0)
    stats_commit, base_profile = _baseline(ctx, wl)
    calls = hybrid.known_calls(base_profile)
    todo = hybrid.uncounted(opt.plan.names, calls, changed, ctx.collect.watch)
    settled, pass_why = _counting_run(ctx, plan, todo, wl, pilot) if todo else ({}, {})
    inputs = hybrid.Inputs(opt.plan.names, ctx.max_overhead, pilot, ctx.cost_ns, {**calls, **settled},
                           hybrid.inclusive_shares(base_profile, pilot), changed, opt.levels, ctx.collect.watch)
    new_plan, choice, rates = hybrid.choose(replace(plan, changed=changed, removed=opt.plan.removed), inputs)
    ctx.progress(f"  native {pilot.native_s * 1e3:.0f} ms; budget {choice.budget_ns / 1e6:.2f} ms: tracing "
                 f"{len(choice.traced)} function(s) ({choice.tracing_ns / 1e6:.2f} ms predicted), stack sampling "
                 f"at {choice.stack_hz} Hz ({choice.sampling_ns / 1e6:.2f} ms); call counts "
                 + (f"from {stats_commit[:12]}" if stats_commit else "unknown (no earlier profile)")
                 + (f"; {len(settled)} of {len(todo)} from the counting pass" if todo else ""))
    why = {**choice.why, **{n: r for n, r in pass_why.items() if n in choice.why}}
    reasons = {**opt.reasons, **{n: f"sampled, not traced: {r}" for n, r in why.items()}}
    params = hybrid.chosen_params(choice, rates, pilot, ctx.max_overhead, len(todo))
    return replace(opt, plan=new_plan, reasons=reasons, params=params, native_s=pilot.native_s,
                   oo=opt.oo + time.perf_counter() - t0)
