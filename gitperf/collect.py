"""`git perf collect`: configuration -> build -> analysis -> plan -> engine -> profiles -> notes.

Profiles are written only after every requested run finished (or was marked partial), so an
interrupted collection writes nothing."""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from gitperf import __version__, codec, elf, estimate, hybrid, sourcediff, workload
from gitperf.build import checkout, run_build
from gitperf.config import CollectConfig, Config, Workload, load as load_config
from gitperf.engine.base import Engine, RawCollection
from gitperf.errors import CollectionAborted, ConfigError, GitPerfError, InputError
from gitperf.model import FunctionStats, Header, Metrics, PlanRecord, Profile, content_id
from gitperf.optimize import Optimized, baseline_profile, diff_base, optimize
from gitperf.plan import ProbePlan, make_plan
from gitperf.engine import calibrate
from gitperf.store import NotesStore, perf_dir, resolve_commit

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CollectRequest:
    rev: str = "HEAD"
    workloads: tuple[str, ...] = ()  # names; () = all configured
    funcs: tuple[str, ...] = ()
    mode: str | None = None
    repeat: int | None = None
    timeout: float | None = None
    binary: str | None = None  # ad hoc: the ELF to probe
    no_build: bool = False
    command: tuple[str, ...] = ()  # ad hoc: the workload's command line
    adhoc_name: str = "adhoc"
    pipeline: str | None = None  # overrides collect.pipeline
    optimization_on: tuple[str, ...] = ()
    optimization_off: tuple[str, ...] = ()
    optimization_args: tuple[str, ...] = ()  # NAME=VALUE
    base: str | None = None  # diff tracing and baseline statistics against this commit
    max_overhead: float | None = None  # fraction of native run time (0.05 = 5%); None = collect.max_overhead


@dataclass(frozen=True)
class Collected:
    id: str
    profile: Profile
    line_bytes: int


def machine_fingerprint() -> str:
    """Hardware identity: profiles from different hardware are not comparable."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 30)
    return hashlib.sha1(f"{platform.machine()}|{cpu}|{os.cpu_count()}|{mem}".encode()).hexdigest()[:12]


# The profile keeps at most this many sampled calls in all, shared among the functions that were
# called (at least SERIES_FLOOR each): ~2.5 bytes a call compressed keeps a 1000-function profile
# within tens of kilobytes (DESIGN.md §5).
SERIES_BUDGET = 8000
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


def build_functions(plan: ProbePlan, raw: RawCollection, locations: dict[str, str] | None = None,
                    cost_ns: dict[str, float] | None = None) -> list[FunctionStats]:
    """Raw kernel data -> per-function results, exact where the kernel saw every call."""
    locations = locations or {}
    out = []
    reached = sum(1 for r in raw.functions if r.series) or 1
    per_function = min(plan.series_limit, max(SERIES_FLOOR, SERIES_BUDGET // reached))
    duty = burst_duty(plan, raw, cost_ns)
    total_samples = sum(r.stack_samples for r in raw.functions) + raw.unknown_samples
    wall_ns = raw.run.wall_s * 1e9
    for f, r in zip(plan.functions, raw.functions):
        if not r.count and not r.stack_samples:
            continue
        kw = dict(name=f.name, count=r.count, total_ns=r.total_ns, exclusive_ns=r.exclusive_ns, min_ns=r.min_ns,
                  max_ns=r.max_ns, hist=tuple(r.hist), series=_thin(r.series, per_function), recorded=len(r.series),
                  stack_samples=r.stack_samples, location=locations.get(f.name, ""))
        if not plan.is_traced(f.name):
            # Only stack samples: exclusive time = share of samples x wall time, with its interval.
            est = estimate.sample_share(r.stack_samples, total_samples, wall_ns)
            kw.update(count=0, total_ns=round(est.value), exclusive_ns=round(est.value), sampled=True,
                      ci_low=est.low, ci_high=est.high)
        elif plan.mode in ("hybrid", "stack"):
            # Traced: exact calls and inclusive time.  Its kernel exclusive time would include every
            # untraced callee's; the samples' share keeps exclusive time additive across functions.
            est = estimate.sample_share(r.stack_samples, total_samples, wall_ns)
            kw.update(exclusive_ns=round(est.value))
        elif duty < 1.0:
            # Bursty: the kernel saw calls only while the probes were live; scale up (unbiased when the
            # bursts' phase is independent of the calls), with the interval of the thinning.
            count = estimate.burst_sum([c for c, _t in r.bursts] or [r.count], duty)
            total = estimate.burst_sum([t for _c, t in r.bursts] or [r.total_ns], duty)
            kw.update(count=round(count.value), total_ns=round(total.value),
                      exclusive_ns=round(r.exclusive_ns / duty), sampled=True, ci_low=total.low, ci_high=total.high)
        out.append(FunctionStats(**kw))
    return out


def burst_duty(plan: ProbePlan, raw: RawCollection, cost_ns: dict[str, float] | None = None) -> float:
    """The fraction of the program's work done while the probes were live.  Measured, not the
    nominal window/period: attaching takes milliseconds, and the program runs slower while probed,
    so the live share of wall time overstates the share of work by the probes' own cost (each seen
    call x the calibrated cost of its entry class)."""
    if plan.mode != "bursty" or not plan.period_ns:
        return 1.0
    wall, live = raw.run.wall_s, raw.attached_s
    if live <= 0 or wall <= 0:
        return plan.window_ns / plan.period_ns
    per_call = calibrate.call_costs(plan, cost_ns or {})
    probe_s = sum(r.count * per_call[f.name] for f, r in zip(plan.functions, raw.functions)) / 1e9
    probe_s = min(probe_s, 0.95 * live)  # the calibration is an average: never explain away all live time
    return min(max((live - probe_s) / (wall - probe_s), 1e-6), 1.0)


def coverage(plan: ProbePlan, funcs: list[FunctionStats]) -> tuple[float, float]:
    """HC: share of the root's inclusive time found in other probed functions' exclusive time.
    TLC: share of the root's inclusive time spent in its (probed) callees."""
    root = next((f for f in funcs if f.name == "main"), None)
    if root is None or root.total_ns == 0:
        return 0.0, 0.0
    others = sum(f.exclusive_ns for f in funcs if f.name != "main" and not f.sampled)
    return min(others / root.total_ns, 1.0), (root.total_ns - root.exclusive_ns) / root.total_ns


def predicted_overhead(plan: ProbePlan, funcs: list[FunctionStats], cost_ns: dict[str, float],
                       samples: int = 0) -> float:
    """Seconds the probes should have added: traced calls x calibrated cost of the entry's class,
    plus stack samples x the calibrated cost of one."""
    per_call = calibrate.call_costs(plan, cost_ns)
    calls = sum(f.count * per_call.get(f.name, 0.0) for f in funcs if not f.sampled)
    return (calls + samples * cost_ns.get(calibrate.SAMPLE_KEY, 0.0)) / 1e9


def profile_run(engine: Engine, binary: elf.BinaryInfo, plan: ProbePlan, wl: Workload, cwd: str,
                header_base: dict, ore: float, oo: float, progress: Progress, env: dict | None,
                cost_ns: dict[str, float], locations: dict[str, str] | None = None,
                optimized: Optimized | None = None) -> Profile:
    t0 = time.perf_counter()
    started = time.time()
    raw = engine.collect(binary, plan, lambda where: workload.run(wl.argv, cwd, wl.timeout, where, env), progress)
    funcs = build_functions(plan, raw, locations, cost_ns)
    hc, tlc = coverage(plan, funcs)
    header = Header(**header_base, workload=wl.name, command=tuple(wl.argv), started=started,
                    finished=time.time(), exit_status=raw.run.exit_status, partial=raw.run.partial)
    metrics = Metrics(
        PT=time.perf_counter() - t0 + ore + oo, CPT=raw.collection_s, PRT=raw.run.wall_s, RDV=raw.raw_bytes,
        OO=oo, ORE=ore, PL=len(plan.functions) if plan.mode != "stack" else 1,
        PLR=sum(1 for f in funcs if f.count), HC=hc, TLC=tlc, dropped=raw.dropped, records=raw.records,
        stack_samples=raw.stack_samples, untimed=raw.overflow, attach_s=raw.attach_s, detach_s=raw.detach_s,
        predicted_overhead_s=predicted_overhead(plan, funcs, cost_ns, raw.stack_samples)
        if plan.mode != "bursty" else 0.0, native_s=optimized.native_s if optimized else 0.0,
    )
    record = PlanRecord(probed=plan.names, removed=plan.removed, changed=plan.changed, strategy=plan.strategy,
                        mode=plan.mode, params={"sample_every": plan.sample_every, "record_limit": plan.record_limit,
                                                "period_ns": plan.period_ns, "window_ns": plan.window_ns,
                                                "stack_hz": plan.stack_hz, "attach": raw.attach_method,
                                                **(optimized.params if optimized else {})},
                        traced=tuple(sorted(plan.traced)))
    if optimized is not None and (optimized.methods or optimized.reasons):
        record = replace(record, pipeline=optimized.pipeline, methods=optimized.methods, reasons=optimized.reasons,
                         renamed=optimized.renamed, sample_every=dict(plan.every_by), base=optimized.base)
    profile = Profile(header, metrics, record, tuple(funcs), calibration=dict(cost_ns))
    size = len(codec.encode(profile))
    return replace(profile, metrics=replace(metrics, PS=size))


def _adhoc_config(req: CollectRequest) -> Config:
    if not req.command:
        raise InputError("ad hoc collection needs the workload's command after `--`, e.g. "
                         "git perf collect --binary ./app --no-build -- ./app input.txt")
    wl = Workload(name=req.adhoc_name, command=shlex.join(req.command), timeout=req.timeout or 300.0)
    return Config(path="(command line)", workloads=(wl,))


def collect(repo, req: CollectRequest, engine: Engine, progress: Progress, store: NotesStore | None = None,
            keep: bool = True) -> tuple[str, list[Collected]]:
    """Collect and store profiles of `req.rev`; returns the commit and what was stored
    (with keep=False: what was collected, nothing is written)."""
    commit = resolve_commit(repo, req.rev)
    engine.check()  # fail fast (exit 4) before any build
    store = store or NotesStore(repo)
    cache_dir = perf_dir(repo)  # build locks and the probe-cost calibration
    adhoc = req.binary is not None
    profiles: list[Profile] = []
    try:
        if adhoc and req.no_build:
            cfg = _adhoc_config(req)
            profiles = _collect_in(repo, Path.cwd(), Path(req.binary), cfg, req, commit, engine, progress, cache_dir)
        else:
            with checkout(repo, commit) as root:
                cfg = _adhoc_config(req) if adhoc else load_config(root)
                if cfg is None:
                    raise ConfigError(str(root / ".gitperf.toml"), "",
                                      "not found in this commit: run `git perf init`, or collect ad hoc with "
                                      "--binary PATH --no-build -- CMD ARGS...")
                build_cmd = "" if req.no_build else cfg.build.command
                if build_cmd:
                    progress(f"building {commit[:12]}: {build_cmd}")
                    run_build(build_cmd, root, commit, cache_dir)
                binary = Path(req.binary) if adhoc else root / cfg.build.binary
                if not adhoc and not cfg.build.binary:
                    raise ConfigError(cfg.path, "build.binary", "missing: which ELF file should be probed?")
                profiles = _collect_in(repo, root, binary, cfg, req, commit, engine, progress, cache_dir)
    except KeyboardInterrupt:
        raise CollectionAborted("interrupted: probes detached, workload killed, nothing was stored") from None
    stored = []
    for p in profiles:
        line = codec.encode(p)
        stored.append(Collected(store.add_line(commit, line) if keep else content_id(line), p, len(line)))
    return commit, stored


def _collect_in(repo, root: Path, binary_path: Path, cfg: Config, req: CollectRequest, commit: str,
                engine: Engine, progress: Progress, cache_dir: Path) -> list[Profile]:
    t0 = time.perf_counter()
    binary = elf.load(binary_path)
    locations = elf.source_locations(binary.path)
    ore = time.perf_counter() - t0
    ccfg: CollectConfig = cfg.collect if req.mode is None else replace(cfg.collect, mode=req.mode)
    max_overhead = req.max_overhead if req.max_overhead is not None else ccfg.max_overhead / 100
    if max_overhead:  # the hybrid plan is cut from the full trace plan
        ccfg = replace(ccfg, mode="trace")
    t1 = time.perf_counter()
    plan = make_plan(binary, ccfg, req.funcs)
    oo = time.perf_counter() - t1
    wls = [cfg.workload(n) for n in req.workloads] if req.workloads else list(cfg.workloads)
    if not wls:
        raise ConfigError(cfg.path, "workload", "no workloads defined: add a [[workload]] table")
    header_base = dict(tool_version=__version__, commit=commit, binary=os.path.relpath(binary.path, root)
                       if binary.path.startswith(str(root)) else binary.path, build_id=binary.build_id,
                       engine=engine.name, machine=machine_fingerprint(), kernel=platform.release())
    env = dict(os.environ, GITPERF_COMMIT=commit)
    cost_ns = calibrate.costs(engine, cache_dir, progress)
    out = []
    runs = [(wl, i) for wl in wls for i in range(req.repeat or wl.repeat)]
    optimized: dict[str, Optimized] = {}  # per workload: its baseline statistics differ
    pipeline = req.pipeline or ccfg.pipeline
    for k, (wl, i) in enumerate(runs, start=1):
        if req.timeout:
            wl = replace(wl, timeout=req.timeout)
        if wl.name not in optimized:
            key = Header(**header_base, workload=wl.name, command=(), started=0, finished=0).config_key
            optimized[wl.name] = optimize(repo, commit, binary, plan, cfg, key, pipeline, req.optimization_on,
                                          req.optimization_off, req.optimization_args, req.base, locations,
                                          cache_dir, progress, from_commit=req.binary is None)
            if max_overhead:
                optimized[wl.name] = budgeted(repo, commit, engine, binary, plan, optimized[wl.name], wl, str(root),
                                              env, cost_ns, locations, max_overhead, key, req, ccfg.watch, progress)
        opt = optimized[wl.name]
        progress(f"[{k}/{len(runs)}] workload {wl.name} (run {i + 1}): {wl.command}")
        p = profile_run(engine, binary, opt.plan, wl, str(root), header_base, ore + opt.ore, oo + opt.oo, progress,
                        env, cost_ns, locations, opt)
        if p.header.partial:
            progress(f"  warning: run is partial ({p.header.partial}); the profile is kept and marked")
        out.append(p)
    return out


def run_pilot(engine: Engine, binary: elf.BinaryInfo, plan: ProbePlan, run, progress: Progress) -> hybrid.Pilot:
    """The workload once with only a slow sampling timer: its native run time and where it goes."""
    pilot_plan = replace(plan, mode="stack", stack_hz=hybrid.PILOT_HZ)
    raw = engine.collect(binary, pilot_plan, run, lambda _m: None)
    if raw.run.partial:
        progress(f"  warning: the pilot run is partial ({raw.run.partial}); its run time may mislead the budget")
    total = max(sum(r.stack_samples for r in raw.functions) + raw.unknown_samples, 1)
    return hybrid.Pilot(raw.run.wall_s, {f.name: r.stack_samples / total
                                         for f, r in zip(pilot_plan.functions, raw.functions) if r.stack_samples})


def count_pass(engine: Engine, binary: elf.BinaryInfo, plan: ProbePlan, names: tuple[str, ...], run,
               budget_ns: float, cost_ns: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """The workload once with only `names` (and the root) traced and no timer (`run` stops it at
    its deadline).  Returns the calls it settled (hybrid.counts_from_pass) and, when it ended early,
    why each of `names` will not be traced."""
    count_plan = replace(plan, mode="hybrid", traced=frozenset(names), stack_hz=0, sample_every=1, every_by={},
                         period_ns=0, window_ns=0)
    raw = engine.collect(binary, count_plan, run, lambda _m: None)
    counts = {f.name: r.count for f, r in zip(count_plan.functions, raw.functions) if f.name in names}
    per_call = calibrate.call_costs(plan, cost_ns)
    settled = hybrid.counts_from_pass(counts, not raw.run.partial, per_call, budget_ns)
    if not raw.run.partial:
        return settled, {}
    stopped = f"the counting pass ended early ({raw.run.partial}) after {raw.run.wall_s:.2f} s"
    why = {n: f"tracing costs at least {settled[n] * per_call[n] / 1e6:.3g} ms ({stopped} at {settled[n]:.0f} "
              f"calls), more than the {budget_ns / 1e6:.3g} ms budget" if n in settled
           else f"call frequency unknown: {stopped}, too early to rule tracing out" for n in names}
    return settled, why


def budgeted(repo, commit: str, engine: Engine, binary: elf.BinaryInfo, plan: ProbePlan, opt: Optimized,
             wl: Workload, cwd: str, env: dict, cost_ns: dict[str, float], locations: dict[str, str],
             max_overhead: float, config_key: str, req: CollectRequest, watch: tuple[str, ...],
             progress: Progress) -> Optimized:
    """--max-overhead: a pilot run with a slow sampling timer, then the hybrid plan (hybrid.py)."""
    t0 = time.perf_counter()
    progress(f"overhead budget {max_overhead:.1%}: pilot run of {wl.name} with {hybrid.PILOT_HZ} Hz stack sampling")
    pilot = run_pilot(engine, binary, plan, lambda where: workload.run(wl.argv, cwd, wl.timeout, where, env), progress)
    # Call counts: this commit's own traced profiles are the best source, else the baseline's.
    counted = lambda p: len(hybrid.known_calls(p)) > 1  # noqa: E731 - more than the root
    stats_commit, base_profile = baseline_profile(repo, commit, config_key, commit, counted)
    if base_profile is None:
        stats_commit, base_profile = baseline_profile(repo, commit, config_key,
                                                      req.base and resolve_commit(repo, req.base), counted)
    changed = opt.plan.changed
    if "diff-tracing" not in opt.methods and req.binary is None:
        try:
            base = diff_base(repo, commit, req.base)
            changed = tuple(sorted(sourcediff.changed_functions(repo, base, commit, locations))) if base else ()
        except GitPerfError as e:
            progress(f"  the change's functions are unknown ({e}); weighing by time alone")
    calls = hybrid.known_calls(base_profile)
    todo = hybrid.uncounted(opt.plan.names, calls, changed, watch)
    settled, pass_why = {}, {}
    if todo:
        deadline = min(hybrid.counting_deadline(pilot.native_s, max_overhead), wl.timeout)
        progress(f"  counting pass: calls of {', '.join(todo)} (changed or watched; no earlier profile counted "
                 f"{'it' if len(todo) == 1 else 'them'}), stopped after {deadline:.2f} s")
        settled, pass_why = count_pass(engine, binary, plan, todo,
                                       lambda where: workload.run(wl.argv, cwd, deadline, where, env),
                                       pilot.budget_ns(max_overhead), cost_ns)
        calls = {**calls, **settled}
    new_plan, choice, rates = hybrid.choose(
        replace(plan, changed=changed, removed=opt.plan.removed), opt.plan.names, max_overhead, pilot, cost_ns,
        calls, hybrid.inclusive_shares(base_profile, pilot), changed, opt.levels, watch)
    native_ms = pilot.native_s * 1e3
    progress(f"  native {native_ms:.0f} ms; budget {choice.budget_ns / 1e6:.2f} ms: tracing "
             f"{len(choice.traced)} function(s) ({choice.tracing_ns / 1e6:.2f} ms predicted), stack sampling "
             f"at {choice.stack_hz} Hz ({choice.sampling_ns / 1e6:.2f} ms); call counts "
             + (f"from {stats_commit[:12]}" if stats_commit else "unknown (no earlier profile)")
             + (f"; {len(settled)} of {len(todo)} from the counting pass" if todo else ""))
    why = {**choice.why, **{n: r for n, r in pass_why.items() if n in choice.why}}
    reasons = {**opt.reasons, **{n: f"sampled, not traced: {r}" for n, r in why.items()}}
    params = {"max_overhead": max_overhead, "budget_ns": choice.budget_ns, "predicted_ns": choice.predicted_ns,
              "native_s": pilot.native_s, "value": choice.value, "bound": choice.bound, "rates_value": rates.value,
              "counted": float(len(todo))}
    return replace(opt, plan=new_plan, reasons=reasons, params=params, native_s=pilot.native_s,
                   oo=opt.oo + time.perf_counter() - t0)
