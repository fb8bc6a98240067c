"""Text and JSON views of profiles (the CLI's output).  Pure functions: data in, text out."""

from __future__ import annotations

from gitperf.checks.noise import NoiseReport
from gitperf.core import stacks
from gitperf.core.fmt import fmt_bytes, fmt_ns, printable, table
from gitperf.core.model import CORRECTABLE_SHARE, ROOT, Profile, StoredProfile, comparison_key
from gitperf.stats import inference
from gitperf.stats.timing import stack_only, timings


def metrics_line(p: Profile) -> str:
    m = p.metrics
    # HC 0 with functions left out: no full trace of this configuration to measure it against
    hc = "-" if m.HC == 0 else f"{m.HC:.1%}"
    return (f"PT {m.PT:.2f}s  CPT {m.CPT:.2f}s  PRT {m.PRT:.3f}s  RDV {fmt_bytes(m.RDV)}  PS {fmt_bytes(m.PS)}  "
            f"PL {m.PL}  PLR {m.PLR}  HC {hc}  TLC {m.TLC:.1%}  attach {m.attach_s * 1e3:.0f} ms  "
            f"detach {m.detach_s * 1e3:.0f} ms  probe cost (predicted) {m.predicted_overhead_s:.2f}s"
            # the measured counterpart of the prediction: samples that caught the kernel handling a probe
            + (f"  samples {m.stack_samples} ({m.probe_samples / m.stack_samples:.0%} in probe handling)"
               if m.stack_samples else "")
            + _budget(p))


def _budget(p: Profile) -> str:
    """--max-overhead: the budget, what was predicted, and what the run measured against the pilot."""
    m, budget = p.metrics, p.plan.params.get("max_overhead")
    if not budget or not m.native_s:
        return ""
    return (f"\n    budget {budget:.1%} of native {m.native_s * 1e3:.0f} ms: predicted "
            f"{m.predicted_overhead_s / m.native_s:+.1%}, measured {m.measured_overhead:+.1%} (one native run: "
            f"±run-to-run noise); traced {', '.join(p.plan.traced) or '-'}, the rest stack-sampled at "
            f"{p.plan.params.get('stack_hz', 0):.0f} Hz"
            + (f"; a counting pass first counted the calls of {p.plan.params['counted']:.0f} changed or watched "
               f"function(s)" if p.plan.params.get("counted") else ""))


def probe_share(p: Profile) -> str:
    """How much of the measured run is the probes' own time (calibrated), and the native estimate."""
    root = p.function(ROOT)
    if root is None or not root.total_ns or not root.probe_ns:
        return ""
    share = root.probe_ns / root.total_ns
    head = f"{ROOT}: {fmt_ns(root.total_ns)} measured, {root.nested} probed calls inside: "
    if share > 1:
        return (head + f"the calibrated probe time ({fmt_ns(root.probe_ns)}) exceeds the measured time: the "
                "calibration overstates what the probes cost in this run, and these times measure the probes, not "
                "the program (`git perf check --collect` probes only what changed)")
    if share > CORRECTABLE_SHARE:
        return (head + f"~{share:.0%} of it is the probes' own time, too much to take out reliably; these times "
                "measure the probes as much as the program (`git perf check --collect` probes only what changed)")
    return head + f"~{fmt_ns(root.probe_ns)} ({share:.0%}) probe time, native estimate {fmt_ns(root.native_ns)}"


def _warnings(p: Profile) -> list[str]:
    out = []
    if p.header.partial:
        out.append(f"PARTIAL: {p.header.partial} (exit status {p.header.exit_status})")
        out.extend(f"  stderr | {line}" for line in p.header.stderr.splitlines())
    if p.metrics.dropped:
        out.append(f"{p.metrics.dropped} sampled call records were lost (ring buffer full); "
                   "aggregates are still exact")
    if p.metrics.untimed:
        out.append(f"{p.metrics.untimed} calls nested deeper than 64 probed frames were counted but not timed")
    if (share := unwound_share(p)) is not None and share < UNWOUND_ENOUGH:
        out.append(f"only {share:.0%} of the stack samples in the binary unwound to {ROOT}: call paths "
                   "(show --folded, flame graphs) are cut short; build with -fno-omit-frame-pointer")
    return out


# Below this share of the samples in the binary unwinding to the root, a profile's call paths are
# called incomplete.  Built with frame pointers the demo's gate workload unwinds ~70% (glibc's own
# functions keep no frame pointer: a walk from inside some of them stops at the binary's frame).
UNWOUND_ENOUGH = 0.5


def unwound_share(p: Profile) -> float | None:
    """Of the samples with a frame of the binary, the share whose walk reached the root (None: too few
    such samples to say, or a profile from before stacks were stored)."""
    framed = sum(n for s, n in p.stacks.items() if not s.startswith("["))
    if framed < 50:
        return None
    return min(p.metrics.rooted_samples / framed, 1.0)


def folded_text(profiles: list[StoredProfile]) -> str:
    """Every workload's stacks summed over its profiles, in the folded format (flamegraph.pl, inferno,
    speedscope), names readable; under a root frame named after the workload when there are several."""
    summed = stacks.per_workload(sp.profile for sp in profiles)
    out = []
    for name, st in summed.items():
        out += stacks.lines(stacks.for_people(st), prefix=name if len(summed) > 1 else "")
    return "\n".join(out)


SINGLE_STEPPED = ("singlestep", "endbr")  # entry classes the kernel steps out of line (analysis.elf)


def single_stepped(p: Profile) -> str:
    """How many probed functions have a single-stepped entry and what their calls cost, by the
    calibration: the reason a trace is slow, and what NOP-padded entries would save."""
    names = {n: cls for cls in SINGLE_STEPPED for n in p.plan.entries.get(cls, ())}
    if not names:
        return ""
    by_name = {f.name: f for f in p.functions if not f.sampled}
    calls = {n: by_name[n].count for n in names if n in by_name}
    cost_s = sum(c * p.calibration.get(names[n], 0.0) for n, c in calls.items()) / 1e9
    pad_s = sum(calls.values()) * p.calibration.get("nop", 0.0) / 1e9
    kinds = ", ".join(f"{cls} {sum(1 for c in names.values() if c == cls)}" for cls in SINGLE_STEPPED
                      if cls in names.values())
    saving = (f" (~{pad_s:.2f} s with NOP-padded entries: build.probe_pad = true, or add"
              " -fpatchable-function-entry=5 to the compiler flags of a C program)"
              if pad_s < cost_s else "")
    return (f"entry probes: {len(names)} probed functions are single-stepped ({kinds}); their "
            f"{sum(calls.values()):,} calls cost ~{cost_s:.2f} s of probe time{saving}")


def collect_summary(commit: str, stored) -> str:
    lines = [f"commit {commit}"]
    for c in stored:
        p = c.profile
        lines.append(f"  {c.id}  {p.header.workload}  ({p.plan.mode}, {p.plan.params.get('attach', '?')})")
        lines.append("    " + metrics_line(p))
        if share := probe_share(p):
            lines.append("    " + share)
        if stepped := single_stepped(p):
            lines.append("    " + stepped)
        lines += ["    warning: " + w for w in _warnings(p)]
        top = sorted(p.functions, key=lambda f: f.exclusive_ns, reverse=True)[:5]
        lines.append("    hottest (exclusive): " + ", ".join(f"{f.name} {fmt_ns(f.exclusive_ns)}" for f in top))
    return "\n".join(lines)


def model_summary(f) -> str:
    """The best regression of a function's sampled calls (duration over call ordinal) and how well
    every model kind fits: "linear R² 0.93 (regressogram 0.95, kernel:gaussian 0.96, ...)"."""
    from gitperf.stats.models import fit_all
    xs, ys = [o for o, _ in f.series], list(f.series_ns)
    if len(ys) < 10 or len(set(xs)) < 3:
        return ""
    ms = fit_all(xs, ys)
    best = ms[0]
    rest = ", ".join(f"{m.kind} {m.r2:.2f}" for m in ms[1:])
    return f"{best.kind.split(':', 1)[1]} R² {best.r2:.2f}{'' if best.reliable else ' (unreliable)'} ({rest})"


def sessions(profiles: list[StoredProfile]) -> list[list[StoredProfile]]:
    """Runs grouped by session: the rounds of one paired check (its `pairing` id), or the plain
    collections of one workload under one plan; in note order."""
    out: dict[tuple, list[StoredProfile]] = {}
    for sp in profiles:
        p = sp.profile
        out.setdefault((p.header.workload, comparison_key(p), p.plan.pairing), []).append(sp)
    return list(out.values())


def show_text(commit: str, profiles: list[StoredProfile], top: int = 25, models: bool = False,
              runs: bool = False) -> str:
    """`git perf show`: one block per session (every run with `runs`)."""
    if not profiles:
        return f"commit {commit}: no profiles (collect with `git perf collect {commit[:12]}`)"
    lines = [f"commit {commit}"]
    for group in ([[sp] for sp in profiles] if runs else sessions(profiles)):
        lines += _run_block(group[0], top, models) if len(group) == 1 else _session_block(group, top)
    return "\n".join(lines)


SESSION_TIMES = ("  times a run, as `check` and `diff` print them: traced, the median of the runs (probe time taken "
                 "out where it is at most a fifth); stack-sampled, the samples pooled over the runs")
ESTIMATED = ("  ~: estimated from stack samples (calls not counted; inclusive and exclusive: the samples' share "
             "of the run's time on a CPU)")


def _run_block(sp: StoredProfile, top: int, models: bool) -> list[str]:
    p = sp.profile
    h = p.header
    lines = ["", f"profile {sp.id}  workload {h.workload}  engine {h.engine}  mode {p.plan.mode}  "
                 f"machine {h.machine}  kernel {h.kernel}  plan {p.plan.describe()}", "  " + metrics_line(p)]
    if h.config:
        lines.append(f"  configuration: {h.config} (the commit has no .gitperf.toml of its own)")
    if p.plan.pad:
        lines.append(f"  built with padded function entries: {p.plan.pad}")
    if h.environment:
        lines.append(f"  environment: {printable(h.environment)}")
    if share := probe_share(p):
        lines.append("  " + share)
    lines += ["  warning: " + w for w in _warnings(p)]
    funcs = sorted(p.functions, key=lambda f: f.exclusive_ns, reverse=True)
    timed = timings([p])
    if top:
        funcs = funcs[:top]
    rows = []
    for f in funcs:
        calls = (f"~{f.count}" if f.count else "-") if f.sampled else str(f.count)  # "-": only stack-sampled
        if f.outer_calls:  # recursive: total and mean are over the outermost calls
            calls += f" ({f.outer_calls} outermost)"
        est = f"[{fmt_ns(f.ci_low)} .. {fmt_ns(f.ci_high)}]" if f.sampled and f.ci_low is not None else ""
        native = fmt_ns(f.native_ns) if f.probe_ns > 0 and f.correctable else "-"
        t = timed[f.name]
        if stack_only(f):  # (a traced function's columns are what was measured, native apart)
            total = "-" if t.inclusive_ns is None else "~" + fmt_ns(t.inclusive_ns)
            own = "~" + fmt_ns(t.exclusive_ns)
        else:
            total, own = fmt_ns(f.total_ns), fmt_ns(f.exclusive_ns)
        rows.append([f.name, calls, total, native, own, fmt_ns(f.mean_ns) if f.count else "-", est])
    lines.append(table(["function", "calls", "inclusive", "native est.", "exclusive", "mean", ""], rows, "lrrrrrl"))
    if any(stack_only(f) for f in funcs):
        lines.append(ESTIMATED)
    if models:
        lines += [f"  model of {f.name}: {m}" for f in funcs if (m := model_summary(f))]
    return lines


def _session_block(group: list[StoredProfile], top: int) -> list[str]:
    """Several runs of one session: medians over the runs, the run time's interval, the warnings of
    any run once."""
    first = group[0].profile
    h, pairing = first.header, first.plan.pairing
    prt = [sp.profile.metrics.PRT * 1e9 for sp in group]
    lo, hi = inference.center_interval(prt)
    band = f" [{fmt_ns(lo)} .. {fmt_ns(hi)}]" if lo is not None else ""
    what = f"paired check {pairing}" if pairing else "collections"
    lines = ["", f"session: {what}, {len(group)} runs  workload {h.workload}  engine {h.engine}  mode {first.plan.mode}"
                 f"  machine {h.machine}  plan {first.plan.describe()}",
             f"  run time: median {fmt_ns(inference.center(prt))}{band} (95% interval of the median); "
             f"`show --runs` lists every run"]
    if first.plan.pad:
        lines.append(f"  built with padded function entries: {first.plan.pad}")
    lines += ["  warning: " + w for w in dict.fromkeys(w for sp in group for w in _warnings(sp.profile))]
    timed = timings([sp.profile for sp in group])
    names = sorted(timed, key=lambda n: -timed[n].exclusive_ns)[:top or None]
    rows = []
    for n in names:
        t = timed[n]
        mark = "~" if t.sampled and t.calls is None else ""
        rows.append([n, f"{t.runs}", "-" if t.calls is None else f"{t.calls:.0f}",
                     "-" if t.inclusive_ns is None else mark + fmt_ns(t.inclusive_ns), mark + fmt_ns(t.exclusive_ns)])
    lines.append(table(["function", "runs", "calls (median)", "inclusive", "exclusive"], rows, "lrrrr"))
    lines.append(SESSION_TIMES)
    estimated = any(t.calls is None for t in timed.values())
    if estimated:
        lines.append(ESTIMATED)
    return lines


def profile_json(sp: StoredProfile) -> dict:
    import dataclasses
    p = sp.profile
    funcs = []
    timed = timings([p])
    for f in p.functions:
        d = {"name": f.name, "count": f.count, "total_ns": f.total_ns, "exclusive_ns": f.exclusive_ns,
             "min_ns": f.min_ns, "max_ns": f.max_ns, "sampled": f.sampled, "hist_log2": list(f.hist),
             "series_len": len(f.series_ns), "stack_samples": f.stack_samples, "recorded": f.recorded,
             "location": f.location, "probe_ns": f.probe_ns, "native_ns": f.native_ns, "nested": f.nested,
             "outer_calls": f.outer_calls or f.count, "mean_ns": f.mean_ns,
             # (total_ns of a stack-only function is its own time: this is its stacks' inclusive share)
             "inclusive_ns": timed[f.name].inclusive_ns if stack_only(f) else float(f.total_ns),
             "counted": not stack_only(f)}
        if f.sampled:
            d.update(ci_low=f.ci_low, ci_high=f.ci_high)
        funcs.append(d)
    return {"id": sp.id, "workload": p.header.workload, "engine": p.header.engine, "config_key": p.config_key,
            "comparison_key": comparison_key(p), "plan_label": p.plan.describe(),
            "header": dataclasses.asdict(p.header),
            "metrics": p.metrics.as_dict(),
            "plan": dataclasses.asdict(p.plan), "functions": funcs}


def session_json(group: list[StoredProfile]) -> dict:
    """A session's functions a run, as its table in `show` prints them (`stats.timing`)."""
    import msgspec
    p = group[0].profile
    return {"workload": p.header.workload, "comparison_key": comparison_key(p), "pairing": p.plan.pairing,
            "runs": len(group), "profiles": [sp.id for sp in group],
            "functions": [{"name": n, **msgspec.structs.asdict(t)} for n, t in timings([sp.profile for sp in group]).items()]}


def show_json(commit: str, profiles: list[StoredProfile]) -> dict:
    return {"commit": commit, "profiles": [profile_json(sp) for sp in profiles],
            "sessions": [session_json(g) for g in sessions(profiles)]}


def noise_text(r: NoiseReport, top: int = 20) -> str:
    """`git perf noise`: one workload's A/A figures and the thresholds that fit."""
    rows = [[f.name, fmt_ns(f.time_ns), f"{f.session_cv:.1%}", f"{f.run_cv:.1%}", f"{f.detectable:+.0%}",
             str(f.false_alarms)] for f in r.functions[:top or None]]
    return "\n".join([
        f"workload {r.workload}: {r.sessions} sessions x {r.runs_per_session} run(s); each against the one before: "
        f"{r.consecutive_with_false_alarm} false alarm(s) in {r.consecutive_checks} checks; all {r.pairs} ordered "
        f"pairs: {r.pairs_with_false_alarm}",
        table(["function", "time/run", "between sessions", "between runs", "detectable", "false alarms"], rows,
              "lrrrrr"),
        f"  recommended: [check] min_relative = {r.recommended_min_relative:.2f}; "
        f"[[workload]] repeat = {r.recommended_repeat}"])
