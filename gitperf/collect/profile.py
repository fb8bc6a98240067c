"""Raw kernel data -> one `Profile` (ARCHITECTURE.md §5): exact aggregates where the kernel saw
every call, estimates with intervals where it did not, the thesis' metrics, and the plan used."""

from __future__ import annotations

import time
from dataclasses import replace

import msgspec

from gitperf.collect.context import CollectContext
from gitperf.core import codec, stacks
from gitperf.core.config import Workload
from gitperf.core.model import (MAX_SERIES, OUTERMOST, PARTLY_TRACED, ROOT, FunctionStats, Header, Metrics, Mode,
                                 PlanRecord, Profile, series_fields)
from gitperf.engine.base import RawCollection, RawFunction, Session
from gitperf.plan.costs import SAMPLE_KEY, call_costs, inside_costs
from gitperf.plan.optimize import Optimized
from gitperf.plan.probes import ProbePlan
from gitperf.stats import estimate

# The profile keeps at most this many sampled calls in all, shared among the functions that were
# called (at least SERIES_FLOOR each): ~2.5 bytes a call compressed keeps a 1000-function profile
# within tens of kilobytes (ARCHITECTURE.md §5).
SERIES_BUDGET = MAX_SERIES
SERIES_FLOOR = 8


def _quantize(ns: int) -> int:
    """Durations to 3 significant digits: far below run-to-run noise, and they compress 2-3x better."""
    if ns < 1000:
        return ns
    scale = 10 ** (len(str(ns)) - 3)
    return round(ns / scale) * scale


def _thin(series: list[tuple[int, int]], limit: int) -> tuple[tuple[int, int], ...]:
    """An evenly spaced subset of a series (already in call order)."""
    if len(series) > limit:
        step = len(series) / limit
        series = [series[int(i * step)] for i in range(limit)]
    return tuple((o, _quantize(d)) for o, d in series)


def _own_ns(r: RawFunction) -> int:
    """The kernel's own time, never above the inclusive time: a callee whose interval, net of its waits
    for a CPU (the scheduler's clock), outlasts its caller's by a few ns (the probes' clock) leaves the
    caller's own time clamped at 0 instead of negative, and the sum over a recursion then overshoots by
    that (fib: 72,459,274 own against 72,459,254 inclusive ns, once in CI)."""
    return min(r.exclusive_ns, r.total_ns) if r.total_ns else r.exclusive_ns


def build_functions(plan: ProbePlan, raw: RawCollection, locations: dict[str, str] | None = None,
                    cost_ns: dict[str, float] | None = None) -> list[FunctionStats]:
    """Raw kernel data -> per-function results, exact where the kernel saw every call."""
    locations = locations or {}
    out = []
    reached = sum(1 for r in raw.functions if r.series) or 1
    per_function = min(plan.series_limit, max(SERIES_FLOOR, SERIES_BUDGET // reached))
    duty = burst_duty(plan, raw, cost_ns)
    total_samples = raw.samples_total
    wall_ns = raw.on_cpu_s * 1e9  # (a wait for a CPU is no function's time: engine/probe.bpf.c, waited())
    inside = inside_costs(plan, cost_ns or {})
    for f, r in zip(plan.functions, raw.functions):
        if not r.count and not r.stack_samples:
            continue
        kw = dict(name=f.name, count=r.count, total_ns=r.total_ns, exclusive_ns=_own_ns(r), min_ns=r.min_ns,
                  max_ns=r.max_ns, hist=tuple(r.hist), recorded=len(r.series),
                  **series_fields(_thin(r.series, per_function)),
                  stack_samples=r.stack_samples, library_samples=r.library_samples,
                  location=locations.get(f.name, ""), nested=r.nested,
                  outer_calls=r.outer if r.outer != r.timed else 0,
                  # not capped at total_ns: the estimate must not depend on the run's luck, so that two
                  # runs with the same probes carry the same probe time (checks.compare.PROBE_MATCH)
                  probe_ns=round(r.probe_ns + r.outer * inside[f.name]))
        if not plan.is_traced(f.name):
            # Only stack samples: exclusive time = share of samples x run time, with its interval.
            est = estimate.sample_share(r.stack_samples, total_samples, wall_ns)
            kw.update(count=0, total_ns=round(est.value), exclusive_ns=round(est.value), sampled=True,
                      ci=(est.low, est.high), probe_ns=0, nested=0)
        elif plan.mode in PARTLY_TRACED:
            # Traced: exact calls and inclusive time.  Its kernel exclusive time would include every
            # untraced callee's; the samples' share keeps exclusive time additive across functions.
            # The share is of the whole run, off-CPU time included: under CPU contention (two checks
            # at once) it once put main's own time at 52.9 us against 40.6 us inclusive.  Own time
            # never exceeds the measured inclusive time.
            est = estimate.sample_share(r.stack_samples, total_samples, wall_ns)
            kw.update(exclusive_ns=min(round(est.value), r.total_ns))
        elif duty < 1.0:
            # Bursty: the kernel saw calls only while the probes were live; scale up (unbiased when the
            # bursts' phase is independent of the calls), with the interval of the thinning.
            count = estimate.burst_sum([c for c, _t in r.bursts] or [r.count], duty)
            total = estimate.burst_sum([t for _c, t in r.bursts] or [r.total_ns], duty)
            kw.update(count=round(count.value), total_ns=round(total.value),
                      exclusive_ns=round(r.exclusive_ns / duty), sampled=True, ci=(total.low, total.high),
                      probe_ns=round(kw["probe_ns"] / duty), nested=round(r.nested / duty))
        if (plan.root is not None and f is plan.functions[plan.root] and plan.is_traced(f.name) and r.count
                and not r.total_ns and not raw.run.partial):
            kw.update(_unreturned_root(plan, raw))
        out.append(FunctionStats(**kw))
    out += _library_functions(plan, raw, locations)
    return _root_probe_time(plan, out, cost_ns or {}, raw.stack_samples)


def _library_functions(plan: ProbePlan, raw: RawCollection, locations: dict[str, str]) -> list[FunctionStats]:
    """The project's own libraries' functions the samples landed in: sampled as an untraced function
    of the binary is, own time = share of samples x run time, with its interval (a name the binary
    has too keeps the binary's)."""
    names = set(plan.names)
    out = []
    for name, n in sorted(raw.library_functions.items()):
        if name in names:
            continue
        est = estimate.sample_share(n, raw.samples_total, raw.on_cpu_s * 1e9)
        out.append(FunctionStats(name=name, count=0, total_ns=round(est.value), exclusive_ns=round(est.value),
                                 stack_samples=n, sampled=True, ci=(est.low, est.high),
                                 location=locations.get(name, "")))
    return out


def _root_probe_time(plan: ProbePlan, funcs: list[FunctionStats], cost_ns: dict[str, float],
                     samples: int) -> list[FunctionStats]:
    """An unreturned root's probe time (`_unreturned_root`): what every traced call and sample cost
    the run, i.e. the run's predicted overhead."""
    if (root := next((f for f in funcs if f.by_run), None)) is None:
        return funcs
    probe = predicted_overhead(plan, funcs, cost_ns, samples) * 1e9
    return [msgspec.structs.replace(f, probe_ns=round(probe)) if f is root else f for f in funcs]


def _unreturned_root(plan: ProbePlan, raw: RawCollection) -> dict:
    """The root was entered and never returned: the program called exit() inside it (ninja's
    `main` calls `real_main`, which exits), so its uretprobe never fired and no call of it was timed.
    Its inclusive time is then the run's: the wall time, and as probe time what the probes added to
    the run (`build_functions`, once every function is built); its own time from the samples."""
    wall_ns = raw.run.wall_s * 1e9
    own = estimate.sample_share(raw.functions[plan.root].stack_samples, raw.samples_total, wall_ns).value
    return dict(count=1, total_ns=round(wall_ns), exclusive_ns=round(min(own, wall_ns)), min_ns=round(wall_ns),
                max_ns=round(wall_ns), by_run=True, outer_calls=0)


def burst_duty(plan: ProbePlan, raw: RawCollection, cost_ns: dict[str, float] | None = None) -> float:
    """The fraction of the program's work done while the probes were live.  Measured, not the
    nominal window/period: attaching takes milliseconds, and the program runs slower while probed,
    so the live share of wall time overstates the share of work by the probes' own cost (each seen
    call x the calibrated cost of its entry class)."""
    if plan.mode != Mode.BURSTY or not plan.period_ns:
        return 1.0
    wall, live = raw.run.wall_s, raw.attached_s
    if live <= 0 or wall <= 0:
        return plan.window_ns / plan.period_ns
    per_call = call_costs(plan, cost_ns or {})
    probe_s = sum(r.count * per_call[f.name] for f, r in zip(plan.functions, raw.functions)) / 1e9
    probe_s = min(probe_s, 0.95 * live)  # the calibration is an average: never explain away all live time
    return min(max((live - probe_s) / (wall - probe_s), 1e-6), 1.0)


def coverage(plan: ProbePlan, funcs: list[FunctionStats], hotspots: dict[str, int]) -> tuple[float, float]:
    """HC: the share of the program's own time, by a full trace (`hotspots`: exclusive ns per function,
    root left out), in the functions this plan traces; 1 when it traces every function, 0 when it
    leaves some out and no full trace is there to tell.  (Measured on the plan's own profile it
    could not fall: an unprobed callee's time shows up in its probed caller's exclusive time.)
    TLC: share of the root's inclusive time spent in its (probed) callees."""
    root = next((f for f in funcs if f.name == ROOT), None)
    if root is None or root.total_ns == 0:
        return 0.0, 0.0
    tlc = (root.total_ns - root.exclusive_ns) / root.total_ns
    if plan.mode == Mode.TRACE and not any(plan.removed.values()):
        return 1.0, tlc
    whole = sum(v for n, v in hotspots.items() if n != ROOT and v > 0)
    if not whole:
        return 0.0, tlc
    covered = sum(v for n, v in hotspots.items() if n != ROOT and v > 0 and n in plan.names and plan.is_traced(n))
    return covered / whole, tlc


def predicted_overhead(plan: ProbePlan, funcs: list[FunctionStats], cost_ns: dict[str, float],
                       samples: int = 0) -> float:
    """Seconds the probes should have added: traced calls x calibrated cost of the entry's class,
    plus stack samples x the calibrated cost of one."""
    per_call = call_costs(plan, cost_ns)
    calls = sum(f.count * per_call.get(f.name, 0.0) for f in funcs if not f.sampled)
    return (calls + samples * cost_ns.get(SAMPLE_KEY, 0.0)) / 1e9


def _metrics(ctx: CollectContext, opt: Optimized, raw: RawCollection, funcs: list[FunctionStats],
             elapsed: float) -> Metrics:
    plan = opt.plan
    hc, tlc = coverage(plan, funcs, opt.hotspots)
    return Metrics(
        PT=elapsed + ctx.ore + opt.ore + opt.oo, CPT=raw.collection_s, PRT=raw.run.wall_s, WAIT=raw.waited_s,
        RDV=raw.raw_bytes,
        OO=opt.oo, ORE=ctx.ore + opt.ore, PL=len(plan.functions) if plan.mode != Mode.STACK else 1,
        PLR=sum(1 for f in funcs if f.count), HC=hc, TLC=tlc, dropped=raw.dropped, records=raw.records,
        stack_samples=raw.stack_samples, probe_samples=raw.probe_samples, untimed=raw.overflow,
        rooted_samples=raw.rooted_samples,
        attach_s=raw.attach_s, detach_s=raw.detach_s,
        predicted_overhead_s=predicted_overhead(plan, funcs, ctx.cost_ns, raw.stack_samples)
        if plan.mode != Mode.BURSTY else 0.0, native_s=opt.native_s)


def entry_classes(plan: ProbePlan) -> dict[str, tuple[str, ...]]:
    """Entry class -> the probed functions that start with it (`push`, the common case, left out)."""
    out: dict[str, list[str]] = {}
    for i in plan.probed_ids():
        f = plan.functions[i]
        if f.entry != "push":
            out.setdefault(f.entry, []).append(f.name)
    return {cls: tuple(sorted(names)) for cls, names in sorted(out.items())}


def plan_record(opt: Optimized, attach_method: str) -> PlanRecord:
    """The plan as stored in the profile: what was probed, how, and (after a pipeline) why not the rest."""
    plan = opt.plan
    record = PlanRecord(probed=plan.names, removed=plan.removed, changed=plan.changed, strategy=plan.strategy,
                        mode=plan.mode, params={"sample_every": plan.sample_every, "record_limit": plan.record_limit,
                                                "period_ns": plan.period_ns, "window_ns": plan.window_ns,
                                                "stack_hz": plan.stack_hz, "attach": attach_method, **opt.params},
                        traced=tuple(sorted(plan.traced)), entries=entry_classes(plan), totals=OUTERMOST)
    if opt.methods or opt.reasons:
        record = replace(record, pipeline=opt.pipeline, methods=opt.methods, reasons=opt.reasons,
                         renamed=opt.renamed, inlined=opt.inlined, sample_every=dict(plan.every_by),
                         base=opt.base)
    return record


def profile_run(ctx: CollectContext, opt: Optimized, wl: Workload, session: Session | None = None) -> Profile:
    """One run of `wl` under `opt.plan` (in `session` when given: the program loaded for it), as a
    profile (its size, PS, measured on the encoded line)."""
    t0 = time.perf_counter()
    started = time.time()
    if session is None:
        raw = ctx.target.engine.collect(ctx.binary, opt.plan, ctx.runner(wl), ctx.progress)
    else:
        raw = session.collect(ctx.runner(wl))
    funcs = build_functions(opt.plan, raw, ctx.subject.locations, ctx.cost_ns)
    header = Header(**ctx.header_base, workload=wl.name, command=tuple(wl.argv), started=started,
                    finished=time.time(), exit_status=raw.run.exit_status, partial=raw.run.partial,
                    stderr=raw.run.stderr if raw.run.partial else "")
    metrics = _metrics(ctx, opt, raw, funcs, time.perf_counter() - t0)
    profile = Profile(header, metrics, replace(plan_record(opt, raw.attach_method), pad=ctx.pad), tuple(funcs),
                      calibration=dict(ctx.cost_ns),
                      stacks=stacks.bound(stacks.folded(raw.stacks)))
    return replace(profile, metrics=replace(metrics, PS=len(codec.encode(profile))))
