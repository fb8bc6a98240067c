"""Paired, diff-focused collection (ARCHITECTURE.md §10a): a commit and its base built side by
side, one probe plan for both derived from what the commit changed, and their runs interleaved.

* **Focus.** The functions whose machine code differs between the two builds (`analysis.bindiff`),
  new ones, and their direct callers up to a depth; the root always.  Everything else is covered
  by stack samples in the same runs.
* **Affordable and measurable.** A counting run of the target with the focus traced gives exact
  calls, and `PILOT_RUNS` stack-sampled runs each function's own native time.  A function whose
  calls would cost more than the time budget (`TRACE_BUDGET` x native, at least `TRACE_FLOOR_S`)
  is sampled instead, so a hot changed function does not make every run take seconds; so is a
  function whose probed time would be mostly probe, which no calibration takes out reliably, while
  its samples measure native time: a leaf whose own time per call is less than the part of its
  probe inside its measured interval, or any function whose probes were more than
  `MAX_PROBE_SHARE` of its time in the counting run.
* **The same probes on both sides.** A changed function's entry instruction can change class (on
  Lua, a busy loop added to `auxsort` turned its single-stepped entry into an emulated one: 12942
  calls x ~20 us of probe on one side only, a base run 4x longer than the target's).  Every sampled
  function's time carries that difference, so such a function is sampled, not traced, when the
  difference exceeds `ENTRY_MISMATCH_SHARE` of the run.
  The plan's fingerprint is the chosen names, mode and timer: both sides share it,
  though a new function exists in the target only.
* **Interleaved.** Round r runs base then target (odd rounds: target then base), so a machine that
  is busy for a while spoils both sides of a round alike; each profile records its round, and the
  check pairs them (`checks.paired`).

This module prepares and runs rounds; when to stop is the caller's decision (it needs the checks).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field, replace

from gitperf.analysis import bindiff
from gitperf.collect.budgeted import count_pass
from gitperf.collect.collection import project_config
from gitperf.collect.context import CollectContext, CollectRequest, Target
from gitperf.collect.profile import profile_run
from gitperf.core.config import CollectConfig, Workload
from gitperf.core.model import ROOT, Mode, Profile
from gitperf.engine.base import Session
from gitperf.git.repo import perf_dir
from gitperf.git.worktree import checkout, run_build
from gitperf.plan.costs import SAMPLE_KEY, call_costs, inside_costs
from gitperf.plan.optimize import Optimized
from gitperf.plan.probes import ProbePlan, make_plan

# The shared timer for everything not traced.  A sampled function's interval narrows as 1/sqrt of its
# samples (Lua's internshrstr, 1 ms of a 21 ms run: ~40 samples over 15 rounds at 1999 Hz, an interval
# of -25% .. +120%), and each sample costs what the calibration measured (`stack_sample`: 13-14 us
# here, 21-34 us on busier VMs), on both sides alike: the rate is as high as SAMPLING_SHARE of a run
# allows, between STACK_HZ (also the pilot runs' rate) and MAX_STACK_HZ.  A round's time is mostly the
# engine's per-run work, not the run (Lua: ~0.8 s a round for two 30 ms runs), so a faster timer costs
# the check little: +30% of Lua's auxsort (~5 samples a run at 4999 Hz) went unfound over 60 rounds
# (301 -> 340 samples), and was found at 9999 Hz in two checks of two (+36%, +38%).
STACK_HZ = 1999
MAX_STACK_HZ = 9999
SAMPLING_SHARE = 0.15
PILOT_RUNS = 3  # stack-sampled runs that estimate each function's own native time before planning
TRACE_BUDGET = 1.0  # probes may double a run (both sides pay the same; it costs only time)
TRACE_FLOOR_S = 0.2  # ... and at least this much, so that short workloads can trace their focus
MAX_FOCUS = 32  # traced functions at most (changed ones first): each adds probe time to its callers
# Probed time is compared where probes are more than a fifth of a function's time (checks.compare), and
# a native change of x shows in it as (1 - share) x: beyond a half, the samples measure it better.
# (Lua's internshrstr, 89k calls of ~34 ns: probes 48 of 45-69 ms measured.)
MAX_PROBE_SHARE = 0.5
# A probe-cost difference between the sides of more than 1% of the run would shift every sampled
# function's estimate by as much (their time is their share of the samples x the run time).
ENTRY_MISMATCH_SHARE = 0.01


@dataclass(frozen=True)
class Focus:
    changed: tuple[str, ...]  # different code, or touched by the source diff
    new: tuple[str, ...]
    callers: tuple[str, ...]
    traced: tuple[str, ...]  # what the shared plan traces (the root included)
    sampled: dict[str, str]  # focus functions left to the stack samples, and why
    # per caller: the changed and new functions it calls, directly or within the depth it was traced for
    reaches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stack_hz: int = STACK_HZ  # the shared sampling rate


@dataclass(frozen=True)
class Side:
    ctx: CollectContext
    plan: Optimized  # the shared plan, resolved against this side's binary
    session: Session | None = None  # the program loaded for that plan, for all rounds


@dataclass(frozen=True)
class Pair:
    base: Side
    target: Side
    focus: Focus
    workload: Workload
    # marks both sides' profiles of this paired check (`checks.check.partners` pairs them by it)
    pairing: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


def open_side(repo, req: CollectRequest, commit: str, engine, progress, stack: ExitStack) -> CollectContext:
    """Check `commit` out (for as long as `stack` lives), build it, and build its collection context."""
    target = Target(repo, replace(req, rev=commit), commit, engine, progress, perf_dir(repo))
    root = stack.enter_context(checkout(repo, commit))
    cfg = project_config(target, root)
    if cfg.build.command and not req.no_build:
        progress(f"building {commit[:12]}: {cfg.build.command}")
        run_build(cfg.build, root, commit, target.cache_dir)
    return CollectContext.build(target, cfg, root, root / cfg.build.binary)


def find_focus(base: CollectContext, target: CollectContext,
               depth: int) -> tuple[set[str], set[str], set[str], dict[str, frozenset[str]]]:
    """(changed, new, callers) from the machine-code diff of the two builds.  Identical code runs
    alike, so the source diff adds nothing here (it would add the function before a changed comment);
    code inlined into a caller changes the caller's code, which the diff sees."""
    d = bindiff.diff(base.binary, target.binary)
    changed = set(d.changed)
    callers = bindiff.Code({}, d.target_calls).callers(changed | set(d.new), depth) - changed - set(d.new)
    return changed, set(d.new), callers, d.target_calls


def _cost(calls: dict[str, float], per_call: dict[str, float], names: list[str]) -> float:
    return sum(calls.get(n, 0.0) * per_call.get(n, 0.0) for n in names)


def stack_hz(cost_ns: dict[str, float]) -> int:
    """The paired check's sampling rate on this machine (see SAMPLING_SHARE)."""
    per_sample = cost_ns.get(SAMPLE_KEY, 0.0)
    if per_sample <= 0:
        return STACK_HZ
    return int(min(MAX_STACK_HZ, max(STACK_HZ, SAMPLING_SHARE / (per_sample * 1e-9))))


def own_times(ctx: CollectContext, wl: Workload, plan: ProbePlan) -> tuple[float, dict[str, float]]:
    """Native run time (s) and each function's own native time per run (ns), from PILOT_RUNS runs
    stack-sampled at STACK_HZ (one program load for all)."""
    stack = replace(plan, mode=Mode.STACK, stack_hz=STACK_HZ)
    samples: dict[str, int] = {}
    total, wall = 0, 0.0
    with ctx.target.engine.session(ctx.binary, stack, lambda _m: None) as s:
        for _ in range(PILOT_RUNS):
            raw = s.collect(ctx.runner(wl))
            wall += raw.run.wall_s
            total += raw.samples_total
            for f, r in zip(stack.functions, raw.functions):
                samples[f.name] = samples.get(f.name, 0) + r.stack_samples
    native_ns = wall / PILOT_RUNS * 1e9
    return wall / PILOT_RUNS, {n: k / max(total, 1) * native_ns for n, k in samples.items()}


@dataclass(frozen=True)
class _Costs:
    """What decides whether a candidate is worth tracing: its calls and own native time (pilots),
    its probe share in the counting run, the probe cost of one call on each side."""

    calls: dict[str, float]
    own: dict[str, float]  # ns a run
    probe_share: dict[str, float]
    per_call: dict[str, float]  # this side (the target)
    inside: dict[str, float]
    base_per_call: dict[str, float]
    native_ns: float


def _why_not(n: str, leaf: bool, c: _Costs) -> str:
    """Why a counted candidate is not traced ("" = it may be, budget permitting)."""
    calls = c.calls[n]
    own_per_call = c.own.get(n, 0.0) / max(calls, 1.0)
    if leaf and calls and own_per_call < c.inside[n]:
        return (f"its probe ({c.inside[n] / 1e3:.1f} us inside each call) would outweigh its own time "
                f"(~{own_per_call:.0f} ns a call): its samples measure it instead")
    if c.probe_share.get(n, 0.0) > MAX_PROBE_SHARE:
        return (f"probes were {min(c.probe_share[n], 1):.0%} of its measured time in the counting run: its "
                "samples measure it instead")
    diff = calls * abs(c.per_call[n] - c.base_per_call.get(n, c.per_call[n]))
    if diff > ENTRY_MISMATCH_SHARE * c.native_ns:
        return (f"its entry instruction changed class, so its probes would cost {diff / 1e6:.1f} ms a run more on "
                f"one side ({c.base_per_call[n] / 1e3:.1f} us a call in the base, {c.per_call[n] / 1e3:.1f} us "
                "here), which every sampled function's time would carry")
    return ""


def choose_traced(ctx: CollectContext, wl: Workload, candidates: list[str], calls_of: dict[str, frozenset[str]],
                  base_per_call: dict[str, float]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The candidates (in priority order) that are worth tracing and fit the time budget, from
    stack-sampled pilots and a counting run of this side (the target); the others, with why they
    are only sampled.  `base_per_call`: the probe cost of a call of each function in the base."""
    plan = make_plan(ctx.binary, CollectConfig())
    native_s, own = own_times(ctx, wl, plan)
    budget_ns = max(native_s * TRACE_BUDGET, TRACE_FLOOR_S) * 1e9
    deadline = min(native_s + 2 * budget_ns / 1e9 + 0.2, wl.timeout)
    counted = count_pass(ctx, plan, tuple(n for n in candidates if n != ROOT), ctx.runner(wl, deadline), budget_ns)
    calls, per_call = counted.calls, call_costs(plan, ctx.cost_ns)
    costs = _Costs(calls, own, counted.probe_share, per_call, inside_costs(plan, ctx.cost_ns), base_per_call,
                   native_s * 1e9)
    chosen, sampled = [ROOT], {}
    for n in candidates:
        if n == ROOT:
            continue
        if n not in calls:
            sampled[n] = counted.why.get(n, "call count unknown")
        elif reason := _why_not(n, not calls_of.get(n), costs):
            sampled[n] = reason
        elif len(chosen) > MAX_FOCUS:
            sampled[n] = f"more than {MAX_FOCUS} focus functions"
        elif _cost(calls, per_call, chosen + [n]) > budget_ns:
            sampled[n] = (f"{calls[n]:.0f} calls x {per_call[n] / 1e3:.1f} us would take "
                          f"{calls[n] * per_call[n] / 1e9:.2f} s of probes a run (budget {budget_ns / 1e9:.2f} s)")
        else:
            chosen.append(n)
    return tuple(sorted(chosen)), sampled


def focus_of(base: CollectContext, target: CollectContext, wl: Workload, depth: int) -> Focus:
    changed, new, callers, calls_of = find_focus(base, target, depth)
    order = sorted(changed) + sorted(new) + sorted(callers)
    target.progress(f"focus: changed {', '.join(sorted(changed)) or '-'}; new {', '.join(sorted(new)) or '-'}; "
                    f"callers {', '.join(sorted(callers)) or '-'}")
    base_costs = call_costs(make_plan(base.binary, CollectConfig()), base.cost_ns)
    traced, sampled = choose_traced(target, wl, order, calls_of, base_costs)
    for n, why in sampled.items():
        target.progress(f"  {n}: stack-sampled, not traced: {why}")
    code = bindiff.Code({}, calls_of)
    reaches = {c: tuple(sorted(code.callees(c, depth) & (changed | new))) for c in callers}
    return Focus(tuple(sorted(changed)), tuple(sorted(new)), tuple(sorted(callers)), traced, sampled, reaches,
                 stack_hz(base.cost_ns))


def spec_of(focus: Focus) -> str:
    """The shared plan's fingerprint: traced names, mode and timer (not the binaries' addresses)."""
    text = json.dumps([str(Mode.HYBRID), list(focus.traced), focus.stack_hz, "paired"])
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def side_plan(ctx: CollectContext, focus: Focus, base_commit: str) -> Optimized:
    """The shared plan against this side's binary: every function present (samples land anywhere),
    the focus traced where this binary has it."""
    plan: ProbePlan = make_plan(ctx.binary, replace(ctx.collect, mode=Mode.TRACE, pipeline="none"))
    names = set(plan.names)
    plan = replace(plan, mode=Mode.HYBRID, traced=frozenset(n for n in focus.traced if n in names),
                   stack_hz=focus.stack_hz, sample_every=1, every_by={}, period_ns=0, window_ns=0,
                   changed=tuple(n for n in focus.changed + focus.new if n in names))
    plan = replace(plan, probe_cost=call_costs(plan, ctx.cost_ns))
    reasons = {n: f"stack-sampled, not traced: {why}" for n, why in focus.sampled.items()}
    return Optimized(plan, "paired", ("diff-focus",), reasons, base=base_commit,
                     params={"focus_callers": float(len(focus.callers))})


def load(pair: Pair, stack: ExitStack) -> Pair:
    """The pair with each side's program compiled and loaded once, for as long as `stack` lives."""
    def loaded(side: Side) -> Side:
        s = stack.enter_context(side.ctx.target.engine.session(side.ctx.binary, side.plan.plan, lambda _m: None))
        return replace(side, session=s)
    return replace(pair, base=loaded(pair.base), target=loaded(pair.target))


def run_round(pair: Pair, r: int, spec: str) -> tuple[Profile, Profile]:
    """One round: both sides once, base first on even rounds.  Returns (base, target) profiles."""
    order = (pair.base, pair.target) if r % 2 == 0 else (pair.target, pair.base)
    out = {}
    for side in order:
        opt = replace(side.plan, params={**side.plan.params, "round": float(r), "pairing": pair.pairing})
        p = profile_run(side.ctx, opt, pair.workload, side.session)
        out[side.ctx.target.commit] = replace(p, plan=replace(p.plan, spec=spec))
    return out[pair.base.ctx.target.commit], out[pair.target.ctx.target.commit]


def prepare(base: CollectContext, target: CollectContext, wl: Workload, depth: int) -> Pair:
    t0 = time.perf_counter()
    focus = focus_of(base, target, wl, depth)
    base_commit = base.target.commit
    pair = Pair(Side(base, side_plan(base, focus, base_commit)), Side(target, side_plan(target, focus, base_commit)),
                focus, wl)
    target.progress(f"plan: {len(focus.traced)} traced ({', '.join(focus.traced)}), the rest stack-sampled at "
                    f"{focus.stack_hz} Hz; prepared in {time.perf_counter() - t0:.1f} s")
    return pair

