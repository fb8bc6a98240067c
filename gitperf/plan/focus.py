"""The paired check's plan (ARCHITECTURE.md §10a): which functions of two builds to trace, which to
leave to the stack samples, and one probe plan for both sides.  Pure: measurements in, plan out
(the pilots and the counting run that measure are `collect.paired`'s).

* **Focus.** The functions whose machine code differs between the two builds (`analysis.bindiff`),
  new ones, and their direct callers up to a depth; the root always.  Everything else is covered
  by stack samples in the same runs.
* **Affordable and measurable** (`why_not`, `choose`).  A function whose calls would cost more than
  the time budget (`TRACE_BUDGET` x native, at least `TRACE_FLOOR_S`) is sampled instead, so a hot
  changed function does not make every run take seconds; so is a function whose probed time would
  be mostly probe, which no calibration takes out reliably, while its samples measure native time:
  a leaf whose own time per call is less than the part of its probe inside its measured interval,
  or any function whose probes were more than `MAX_PROBE_SHARE` of its time in the counting run.
* **The same probes on both sides.** A changed function's entry instruction can change class (on
  Lua, a busy loop added to `auxsort` turned its single-stepped entry into an emulated one: 12942
  calls x ~20 us of probe on one side only, a base run 4x longer than the target's).  Every sampled
  function's time carries that difference, so such a function is sampled, not traced, when the
  difference exceeds `ENTRY_MISMATCH_SHARE` of the run.  The plan's fingerprint (`spec_of`) is the
  chosen names, mode and timer: both sides share it, though a new function exists in the target only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from gitperf.analysis import bindiff
from gitperf.analysis.elf import BinaryInfo
from gitperf.core.config import CollectConfig
from gitperf.core.model import ROOT, Mode, fingerprint_of
from gitperf.plan.costs import SAMPLE_KEY, call_costs
from gitperf.plan.optimize import Optimized
from gitperf.plan.probes import ProbePlan, as_hybrid, make_plan, with_library_functions

# The shared timer for everything not traced: as fast as SAMPLING_SHARE of a run allows at the
# calibrated cost of a sample, between STACK_HZ (also the pilot runs' rate) and MAX_STACK_HZ.  Why
# so fast, with the figures: ARCHITECTURE.md §10a ("The rate is as high as ...").
STACK_HZ = 1999
MAX_STACK_HZ = 9999
SAMPLING_SHARE = 0.15
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
    changed: tuple[str, ...]  # different code
    new: tuple[str, ...]
    callers: tuple[str, ...]
    traced: tuple[str, ...]  # what the shared plan traces (the root included)
    sampled: dict[str, str]  # focus functions left to the stack samples, and why
    # per caller: the changed and new functions it calls, directly or within the depth it was traced for
    reaches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stack_hz: int = STACK_HZ  # the shared sampling rate
    calls: dict[str, float] = field(default_factory=dict)  # the counting run's calls a run (absent: not counted)
    # base name -> target name: same code (not focus), or a clone renumbered (focus when its code changed)
    renamed: dict[str, str] = field(default_factory=dict)
    inlined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # removed function -> inlined into (bindiff)
    libraries: str = ""  # what differs in the project's own shared libraries (`bindiff.library_changes`)
    # their changed and new functions: focus functions as the binary's are, traced on the library file
    # where chosen (`with_library_functions`), else sampled
    library_changed: tuple[str, ...] = ()
    # their removed functions: in the base's plan only (`side_plan`), which tells them removed where only
    # samples caught them (a plan of the binary shows its own removed functions: it probes all of them)
    library_removed: tuple[str, ...] = ()

    @property
    def reached(self) -> bool:
        """Whether the workload ran any changed or new function (by the counting run; one it could not
        count is taken as run), or the binary's own libraries differ (the run as a whole is measured)."""
        return bool(self.libraries) or any(self.resolvable(n) for n in self.changed + self.new)

    def every_round(self, name: str) -> bool:
        """Whether `name` is what the check is for, never given up as out of reach: a changed function,
        or the run as a whole where only the project's libraries changed (its own code is the base's, so
        it is not among `changed`, which "changed in this commit" shows)."""
        return name in self.changed or (name == ROOT and bool(self.libraries))

    @property
    def decisive(self) -> set[str]:
        """The functions a paired check must decide (callers only inform)."""
        return {*self.changed, *self.new, ROOT}

    def resolvable(self, name: str) -> bool:
        """Whether more rounds can measure `name`: the workload calls it.  A function the counting run
        saw no call of gets no sample, nor a traced call: traced or not, no round measures it (on
        libdeflate's a50c51b, three changed compressors its workload's level never runs held all 60
        rounds).  One it could not count is called so often that counting cost too much."""
        return self.calls.get(name, 1.0) > 0

    def not_run(self) -> tuple[str, ...]:
        """The changed and new functions the counting run saw no call of: no round measures them."""
        return tuple(n for n in self.changed + self.new if not self.resolvable(n))


@dataclass(frozen=True)
class Candidates:
    """What the two builds' machine code says: changed and new functions, their callers up to a
    depth, and the target's direct calls."""

    changed: frozenset[str]
    new: frozenset[str]
    callers: frozenset[str]
    calls: dict[str, frozenset[str]]
    depth: int
    diff: bindiff.BinDiff = field(default_factory=bindiff.BinDiff)  # what the two builds' code differs in
    libraries: str = ""  # what differs in the project's own shared libraries (the run as a whole is measured)
    library_changed: frozenset[str] = frozenset()  # their changed and new functions
    library_removed: frozenset[str] = frozenset()  # and their removed ones (only the base's libraries have them)

    @property
    def in_order(self) -> list[str]:
        """Priority order for tracing: changed, new, the libraries' changed and new, callers."""
        return sorted(self.changed) + sorted(self.new) + sorted(self.library_changed) + sorted(self.callers)

    def reaches(self) -> dict[str, tuple[str, ...]]:
        code = bindiff.Code({}, self.calls)
        focus = self.changed | self.new | self.library_changed
        return {c: tuple(sorted(code.callees(c, self.depth) & focus)) for c in self.callers}


def candidates(base: BinaryInfo, target: BinaryInfo, depth: int) -> Candidates:
    """From the machine-code diff of the two builds.  Identical code runs alike, so the source diff
    adds nothing here (it would add the function before a changed comment); code inlined into a
    caller changes the caller's code, which the diff sees."""
    d = bindiff.diff(base, target)
    changed, new = frozenset(d.changed), frozenset(d.new)
    callers = bindiff.Code({}, d.target_calls).callers(changed | new, depth) - changed - new
    return Candidates(changed, new, frozenset(callers), d.target_calls, depth, d)


def stack_hz(cost_ns: dict[str, float]) -> int:
    """The paired check's sampling rate on this machine (see SAMPLING_SHARE)."""
    per_sample = cost_ns.get(SAMPLE_KEY, 0.0)
    if per_sample <= 0:
        return STACK_HZ
    return int(min(MAX_STACK_HZ, max(STACK_HZ, SAMPLING_SHARE / (per_sample * 1e-9))))


@dataclass(frozen=True)
class Costs:
    """What decides whether a candidate is worth tracing: its calls and own native time (pilots),
    its probe share in the counting run, the probe cost of one call on each side."""

    calls: dict[str, float]
    own: dict[str, float]  # ns a run
    probe_share: dict[str, float]
    per_call: dict[str, float]  # this side (the target)
    inside: dict[str, float]
    base_per_call: dict[str, float]
    native_ns: float
    budget_ns: float = 0.0  # probe time a run may take
    why_uncounted: dict[str, str] = field(default_factory=dict)  # candidates the counting run could not count


def budget_ns(native_s: float) -> float:
    """Probe time a run may take (TRACE_BUDGET, TRACE_FLOOR_S)."""
    return max(native_s * TRACE_BUDGET, TRACE_FLOOR_S) * 1e9


def why_not(n: str, leaf: bool, c: Costs) -> str:
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


def _probe_ns(c: Costs, names: list[str]) -> float:
    return sum(c.calls.get(n, 0.0) * c.per_call.get(n, 0.0) for n in names)


def choose(cands: Candidates, c: Costs) -> tuple[tuple[str, ...], dict[str, str]]:
    """The candidates (in priority order) that are worth tracing and fit the time budget; the
    others, with why they are only sampled."""
    chosen, sampled = [ROOT], {}
    for n in cands.in_order:
        if n == ROOT:
            continue
        if n not in c.calls:
            sampled[n] = c.why_uncounted.get(n, "call count unknown")
        elif reason := why_not(n, not cands.calls.get(n), c):
            sampled[n] = reason
        elif len(chosen) > MAX_FOCUS:
            sampled[n] = f"more than {MAX_FOCUS} focus functions"
        elif _probe_ns(c, chosen + [n]) > c.budget_ns:  # (a count cut off by the pass's deadline is a floor: said so)
            sampled[n] = c.why_uncounted.get(n) or (
                f"{c.calls[n]:.0f} calls x {c.per_call[n] / 1e3:.1f} us would take {c.calls[n] * c.per_call[n] / 1e9:.2f} s "
                f"of probes a run (budget {c.budget_ns / 1e9:.2f} s)")
        else:
            chosen.append(n)
    return tuple(sorted(chosen)), sampled


def focus(cands: Candidates, c: Costs, hz: int) -> Focus:
    traced, sampled = choose(cands, c)
    return Focus(tuple(sorted(cands.changed)), tuple(sorted(cands.new)), tuple(sorted(cands.callers)), traced,
                 sampled, cands.reaches(), hz, dict(c.calls), dict(cands.diff.renamed), dict(cands.diff.inlined),
                 cands.libraries, tuple(sorted(cands.library_changed)), tuple(sorted(cands.library_removed)))


def spec_of(f: Focus) -> str:
    """The shared plan's fingerprint: traced names, mode and timer (not the binaries' addresses)."""
    return fingerprint_of(str(Mode.HYBRID), list(f.traced), f.stack_hz, "paired")


def side_plan(binary: BinaryInfo, cfg: CollectConfig, cost_ns: dict[str, float], f: Focus,
              base_commit: str) -> Optimized:
    """The shared plan against one side's binary: every function present (samples land anywhere),
    the focus traced where this binary has it.  Its `changed` lists the focus functions this side's
    build has (of the binary and of its own libraries, their removed functions too): a function in the
    target's list and not in the base's is new, one in the base's only removed (`checks.sides.lacks`
    reads it so where only samples caught it)."""
    plan = with_library_functions(make_plan(binary, replace(cfg, mode=Mode.TRACE, pipeline="none")), binary,
                                  f.traced)
    names = set(plan.names)
    was = {new: old for old, new in f.renamed.items()}
    # a function the target renamed (or a clone the compiler renumbered) is probed under its name here
    here = [n if n in names else was.get(n, n) for n in f.traced + f.changed + f.new]
    traced, changed = here[:len(f.traced)], here[len(f.traced):]
    in_libraries = {g.name for lib in binary.libraries for g in lib.functions}
    plan = replace(as_hybrid(plan, (n for n in traced if n in names), f.stack_hz),
                   changed=tuple(n for n in changed if n in names) + tuple(
                       n for n in f.library_changed + f.library_removed if n in in_libraries))
    plan = replace(plan, probe_cost=call_costs(plan, cost_ns))
    reasons = {n: f"stack-sampled, not traced: {why}" for n, why in f.sampled.items()}
    return Optimized(plan, "paired", ("diff-focus",), reasons, renamed=dict(f.renamed), inlined=dict(f.inlined),
                     base=base_commit,
                     params={"focus_callers": float(len(f.callers))})


def counting_plan(binary: BinaryInfo, library: Iterable[str] = ()) -> ProbePlan:
    """Every function, default parameters, and those of `library` the project's own libraries have:
    what pilots and the counting run probe from."""
    return with_library_functions(make_plan(binary, CollectConfig()), binary, library)
