"""What each side of a comparison measured (ARCHITECTURE.md §10): one workload's target and base
runs (`Sides`), and per function its runs on one side (`Side`): times, own times, calls, the
sampling and probe-calibration error they carry.

Times are native estimates (`FunctionStats.native_ns`: inclusive time less the calibrated probe
time inside it); the calibration's uncertainty enters the test where the two sides' probe shares
differ (`extra_var`).  Where probes are more than a fifth of a function's measured time
(`CORRECTABLE_SHARE`) the estimate would be mostly error, and the function is compared on its
probed time if its probes cost the same on both sides, else not at all: its verdict is withheld
(`_sides`).  `pair` says which functions have two comparable sides; new, removed and withheld ones
become simple changes."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import msgspec
import numpy as np

from gitperf.checks.change import NEW, REMOVED, UNKNOWN, Change
from gitperf.core import stacks
from gitperf.core.model import ROOT, FunctionStats, Profile, StoredProfile
from gitperf.stats import inference, timing
from gitperf.stats.estimate import Z95
from gitperf.stats.timing import Runs, run_times


@dataclass(frozen=True)
class Sides:
    """What one workload's comparison looks at: the target's and the base's runs (profiles of one
    comparison key) and the history before the base, nearest first."""

    workload: str
    target: list[StoredProfile]
    base: list[StoredProfile]
    history: list[list[StoredProfile]] = field(default_factory=list)
    history_commits: list[str] = field(default_factory=list)


def _renamed(sp: StoredProfile, new: dict[str, str]) -> StoredProfile:
    p = sp.profile
    frames = lambda stack: stacks.SEP.join(new.get(f, f) for f in stack.split(stacks.SEP))  # noqa: E731
    plan = replace(p.plan, probed=tuple(new.get(n, n) for n in p.plan.probed),
                   traced=tuple(new.get(n, n) for n in p.plan.traced),
                   changed=tuple(new.get(n, n) for n in p.plan.changed))  # (`lacks` compares the sides' lists)
    functions = tuple(msgspec.structs.replace(f, name=new.get(f.name, f.name)) for f in p.functions)
    profile = replace(p, plan=plan, functions=functions,
                      stacks={frames(k): v for k, v in p.stacks.items()},
                      instructions=tuple(replace(i, functions={new.get(n, n): v for n, v in i.functions.items()})
                                         for i in p.instructions))
    return replace(sp, profile=profile)


def in_target_names(sides: Sides) -> Sides:
    """The base's and the history's functions under the names the target gives them, where the
    target's diff tracing matched a function across a rename or a compiler clone's new number
    (`PlanRecord.renamed`): one function compared with itself, not a removed one and a new one."""
    new = {old: n for p in sides.target for old, n in p.profile.plan.renamed.items()}
    if not new:
        return sides
    return replace(sides, base=[_renamed(p, new) for p in sides.base],
                   history=[[_renamed(p, new) for p in ps] for ps in sides.history])


class Side(msgspec.Struct):
    """One function on one side, per run.  (A Struct, not a dataclass: a check builds two a function,
    and its `__init__` costs half a dataclass's: 0.29 against 0.66 us with these fields.)"""

    totals: list[float]
    exclusive: list[float]
    counts: list[float]
    series: list[tuple[int, int]] = []  # (msgspec copies an empty default for each side)
    location: str = ""
    sampled_var: float = 0.0  # variance of log(total) from sampling (0 when the totals are exact)
    sampled: bool = False  # estimated from samples in some profile (not traced there)
    native: bool = True  # times are native estimates (probe time taken out); else probed times
    probe: float = 0.0  # center of the runs' probe time (ns)
    probe_se: float = 0.0  # its standard error (`inference.center_se`; asked for probed times only)
    probe_share: float = 0.0  # d log(time) / d log(probe cost): probe/native or probe/total (center of the runs)
    calibration_sd: float = 0.0  # relative uncertainty of the calibrated probe costs
    # the centers of the runs' totals, exclusive times and counts, which every test and change of the
    # side asks for (a side is the target of one check and the base of the next): computed once
    total: float = 0.0
    own: float = 0.0
    calls: float = 0.0
    unseen: bool = False  # stack-sampled, and no sample of it in any run (`unseen`): a count of 0

    @staticmethod
    def absent(runs: int) -> Side:
        return Side([0.0] * runs, [0.0] * runs, [0.0] * runs)


def absent_is_zero(p: Profile, name: str) -> bool:
    """A run that lacks `name` measured it as 0 where its plan traced it (else it may have escaped the samples)."""
    return p.plan.is_traced(name)


# The calibration's spread between repetitions is 15-20% of a probe's cost on these VMs (CLASS_sd /
# CLASS), and what is left after taking probe time out carries all of the run's noise: at a half, the
# demo's full-trace A/A test (90 pairs of sessions) had 8 false alarms, at a fifth it stays within its
# level.  Beyond that share the estimate would be mostly error.  Such a function (a full trace of
# ns-scale functions: up to 99% probe time) is compared on its probed time, which like-with-like plans
# keep comparable.  (`core.model.CORRECTABLE_SHARE`, `FunctionStats.correctable`.)
# The calibration is measured once and serves runs taken hours later: its error against a run is the
# drift of the probe cost, which the spread of its three back-to-back repetitions can understate.
# 14 calibrations of each entry class within one hour on this VM: robust spread (MAD) 12-16% of the
# cost; single-stepped entries from 18 to 32 us around a median of 21 us.
CALIBRATION_DRIFT = 0.15


# Nor do the probes of two builds cost the same in interleaved runs, whatever the calibration says: on
# the demo's comment-only commit (byte-identical text and data), `insertion_sort`, ~95% probe time,
# measured +10.7% in 4 of 5 interleaved pairs, and the same two builds +1% over 8 more pairs (a
# property of where each build landed, not of its code).  Each side's probe time carries its own
# error of this relative size, independent of the other side's.
PROBE_COST_SPREAD = 0.05


AUTO, PROBED = "auto", "probed"  # which time `_measure_side` reads: see CORRECTABLE_SHARE, PROBE_MATCH


# Probed times are comparable only if the probes cost the same on both sides: the same entry class
# (a commit that adds a local variable can turn a single-stepped `mov` entry into an emulated `push`:
# 5 us a call cheaper here) and as many probed calls inside.  Probe times within 2% of the function's
# time count as the same.
PROBE_MATCH = 0.02


class _Measured(dict):
    """One side's functions, each measured (`_measure_side`) the first time it is asked for (None: no
    run measured it)."""

    def __init__(self, runs: Runs, time_of: str):
        super().__init__(_exact_sides(runs, time_of))
        self.runs, self.time_of = runs, time_of

    def __missing__(self, name: str) -> Side | None:
        side = self[name] = _measure_side(self.runs, name, self.time_of)
        return side


@functools.lru_cache(maxsize=8)
def _sides_of(runs: Runs, time_of: str = AUTO) -> _Measured:
    """One side's functions, remembered for the last few sides: the index checks its line in order, and
    a commit's target side is its child's base.  (Asked once a side, not once a function: the cache's
    key hashes and compares the runs in Python.)"""
    return _Measured(runs, time_of)


def _measured_by(runs: Runs, name: str) -> tuple[list[FunctionStats], list[Profile]]:
    """`name`'s statistics in the runs that have it, and the runs that measured it: present, or absent
    as 0 (`absent_is_zero`)."""
    fs: list[FunctionStats] = []
    probed: list[Profile] = []
    for p in runs:
        if (f := p.function(name)) is not None:
            fs.append(f)
            probed.append(p)
        elif absent_is_zero(p, name):
            probed.append(p)
    return fs, probed


def _sampled_var(fs: list[FunctionStats]) -> float:
    """The variance of the log of the runs' mean that their sampling adds: stored intervals are 95%
    (Wilson for samples; bursts' t intervals are wider, so their variance is overstated here:
    conservative)."""
    return sum(((math.log(f.ci_high) - math.log(f.ci_low)) / (2 * Z95)) ** 2 / len(fs) ** 2
               for f in fs if f.sampled and f.ci_low and f.ci_high and f.ci_low > 0)


def _measure_side(runs: Runs, name: str, time_of: str) -> Side | None:
    fs, probed = _measured_by(runs, name)
    if not probed:
        return None  # not measured here: neither present nor absent
    missing = [0.0] * (len(probed) - len(fs))
    measured, native, probes = run_times(fs, native_allowed=time_of == AUTO)
    # how much log(time) moves with a relative error of the probe cost: native = total - probe moves
    # by probe/native, a probed total by probe/total (at most all of it)
    shares = [p / max(t, 1) if native else min(p / max(t, 1), 1.0) for p, t in zip(probes, measured) if p]
    totals = measured + missing
    exclusive = [float(f.exclusive_ns) for f in fs] + missing
    counts = [float(f.count) for f in fs] + missing
    sampled = any(f.sampled for f in fs)
    return Side(totals=totals, exclusive=exclusive, counts=counts, total=inference.center(totals),
                 own=inference.center(exclusive), calls=inference.center(counts),
                 series=_calls(fs),
                 location=next((f.location for f in fs if f.location), ""),
                 sampled_var=_sampled_var(fs) if sampled else 0.0, sampled=sampled,
                 probe_share=inference.center(shares) if shares else 0.0,
                 calibration_sd=max([CALIBRATION_DRIFT] + [p.calibration_sd for p in probed])
                 if native else 0.0, native=native,
                 probe=inference.center(probes) if fs else 0.0,
                 probe_se=inference.center_se(probes) if time_of == PROBED else 0.0)


def _calls(fs: list[FunctionStats]) -> list[tuple[int, int]]:
    """The runs' sampled calls, (ordinal, ns) each, of the functions that kept some (`series` builds
    the pairs, and every side of every function asks: most have none)."""
    return [s for f in fs if f.series_ns for s in f.series]


def _exact_sides(runs: Runs, time_of: str) -> dict[str, Side]:
    """`_measure_side` of every function that each run counted (`timing.exact`), from its arrays."""
    e = timing.exact(runs, time_of == AUTO)
    # a probe's share of the time it is in (`_measure_side`): rows of probed calls in every run or in none
    shares = e.probes / np.maximum(e.times, 1.0)
    shares = np.where(e.native[:, None], shares, np.minimum(shares, 1.0))
    every, some = e.probes.all(axis=1), e.probes.any(axis=1)
    share = np.where(every, inference.row_medians(shares), 0.0).tolist()
    calibration = max([CALIBRATION_DRIFT] + [p.calibration_sd for p in runs])
    probes = e.probes.tolist() if time_of == PROBED else None
    rows = zip(e.names, e.stats, e.native.tolist(), (some & ~every).tolist(), e.times.tolist(),
               e.exclusive.tolist(), e.counts.tolist(), e.total.tolist(), e.own.tolist(), e.calls.tolist(),
               inference.row_medians(e.probes).tolist())
    out = {}
    for i, (name, fs, native, mixed, totals, exclusive, counts, total, own, calls, probe) in enumerate(rows):
        if mixed:  # (probed calls in some runs, not in all)
            out[name] = _measure_side(runs, name, time_of)
            continue
        out[name] = Side(
            totals=totals, exclusive=exclusive, counts=counts, total=total, own=own, calls=calls,
            series=_calls(fs),
            location=fs[0].location or next((f.location for f in fs if f.location), ""),
            probe_share=share[i], calibration_sd=calibration if native else 0.0, native=native, probe=probe,
            probe_se=inference.center_se(probes[i]) if probes else 0.0)
    return out


def _library_only(profiles: list[StoredProfile], name: str) -> bool:
    """Whether the side that has `name` has it as a function of the project's own libraries: only
    sampled, never counted, in no plan (`collect.profile._library_functions`).  A side without samples
    in it shows nothing of whether it still exists (on zlib's f8719f5, gz_avail read "new" with the
    same instructions on both sides)."""
    found = [f for p in profiles if (f := p.profile.function(name))]
    return (bool(found) and all(f.sampled and not f.count for f in found)
            and not any(name in p.profile.plan.probed for p in profiles))


def _not_in_binary(profiles: list[StoredProfile], name: str) -> bool:
    """Profiles that probed every function of their binary (strategy userspace) and did not leave
    `name` out on purpose show that the binary has no such function."""
    return all(p.profile.plan.strategy == "userspace" and name not in p.profile.plan.probed and
               not any(name in names for names in p.profile.plan.removed.values()) for p in profiles)


def _sides(target: _Measured, base: _Measured, n: str) -> tuple[Side | None, Side | None, bool]:
    """One function's two sides and whether they can be compared: in native estimates where both
    are correctable; else in probed time where the probes cost the same on both sides; else not.
    Native estimates of a function that is mostly probe time are mostly calibration error, and a
    calibration's error is a bias shared by every run, not noise: an overstated probe cost takes
    more out of the side with more probed calls, so a commit that makes fewer calls looks slower
    (the demo's speed-up did, in CI)."""
    t, b = target[n], base[n]
    if not t or not b or (t.native and b.native):
        return t, b, True
    tp, bp = _sides_of(target.runs, PROBED)[n], _sides_of(base.runs, PROBED)[n]
    return tp, bp, probes_alike(tp, bp)


def probes_alike(t: Side, b: Side) -> bool:
    """Whether the two sides' probes cost the same (PROBE_MATCH), shown by their runs: the difference of
    their probe times' centers, bounded above at 97.5% by the centers' standard errors.  The runs' probe
    times can vary (a root timed by the run, whose probe time comes from its samples): on ninja's `main`
    the centers lay 2.2% of its time apart, and a bare comparison of the two read "alike" in two checks
    of five and "not" in the others as rounds accumulated, turning its degradation into a withheld
    comparison and back (issue #55: `bench/repeatability.py`).  Withheld until the runs show the
    probes alike: as rounds accumulate the bound closes in on the true difference, so the outcome
    settles on one side of the line rather than crossing it with the centers' noise (a true difference
    at the line itself can still cross it)."""
    gap = abs(t.probe - b.probe) + Z95 * math.hypot(t.probe_se, b.probe_se)
    return gap <= PROBE_MATCH * min(t.total, b.total)


def run_time(sides: Sides) -> float:
    """The workload's time a run on the base side: its root function's, native where the probes
    allow, else probed (an upper bound of the native run); 0 when no run measured the root.  What
    `check.min_share` is a share of."""
    s = _sides_of(Runs(p.profile for p in sides.base))[ROOT]
    return s.total if s is not None else 0.0


WITHHELD = ("probes differ between the sides and outweigh its own time: neither its probed times nor its "
            "native estimates are comparable (check --collect probes only what changed)")


def pair(sides: Sides) -> tuple[list[Change], dict[str, tuple[Side, Side]]]:
    """Every function seen on either side: new and removed ones as simple changes, and the ones
    measured on both sides, to be tested."""
    names = sorted(set().union(*(p.profile.names() for p in sides.target + sides.base)))
    simple: list[Change] = []
    both = {}
    target, base = _sides_of(Runs(p.profile for p in sides.target)), _sides_of(Runs(p.profile for p in sides.base))
    for n in names:
        t, b, like = _sides(target, base, n)
        if t is None or b is None:  # (a side that did not measure it: absent there, or not caught)
            t, b = _or_absent(t, b, sides.target, sides.base, n), _or_absent(b, t, sides.base, sides.target, n)
            t = t if t is not None or b is None else unseen(b, sides.target, n)
        if t is None or b is None or not (any(t.totals) or any(b.totals)):
            continue
        if t.sampled != b.sampled and any(t.totals) and any(b.totals):
            # hybrid: traced (inclusive time, exact) on one side, sampled (exclusive estimate) on the
            # other - two different quantities, never a change
            continue
        kind, why = ((NEW, "present only in target") if not any(b.totals) else
                     (REMOVED, "not called in target") if not any(t.totals) and not t.unseen else
                     (UNKNOWN, WITHHELD) if not like else ("", ""))
        if kind:
            simple.append(_simple(sides.workload, n, kind, (t, b), why))
        else:
            both[n] = (t, b)
    return simple, both


def unseen(base: Side, target: list[StoredProfile], name: str) -> Side | None:
    """The target side of a function the commit changed that a paired check stack-sampled on both
    sides and caught on the base only: a count of 0 samples, for the pooled test (`designs.pooled`),
    not a function gone.  The diff says it is in both builds (changed, not removed); the shared plan
    sampled it on both; every target run took samples.  cJSON's 3ece4c8 left `cJSON_AddItemToArray`
    199 ms of samples a run on the base and none on the target (~0 ns a call, so the plan sampled it),
    and the check named `main` alone.  None where any of that does not hold (the base caught nothing
    either: nothing to compare; a target without a base value has no relative change)."""
    if not (base.sampled and any(base.totals) and target):
        return None
    for p in (sp.profile for sp in target):
        if not (p.plan.pairing and name in p.plan.changed and not p.plan.is_traced(name) and p.metrics.stack_samples):
            return None
    zeros = [0.0] * len(target)
    return Side(zeros, list(zeros), list(zeros), sampled=True, unseen=True)


def _or_absent(mine: Side | None, other: Side | None, profiles: list[StoredProfile], others: list[StoredProfile],
               name: str) -> Side | None:
    """A side that did not measure `name` as absent (zero a run) where its profiles show the binary has
    no such function and the other side's is not one of the project's libraries' sampled ones, or a
    paired check's diff says its build lacks it (`lacks`)."""
    if mine is None and other is not None and (lacks(profiles, others, name) or (
            _not_in_binary(profiles, name) and not _library_only(others, name))):
        return Side.absent(len(profiles))
    return mine


def lacks(profiles: list[StoredProfile], others: list[StoredProfile], name: str) -> bool:
    """Whether a paired check's diff says the build of `profiles` lacks `name` and the build of
    `others` has it: each side's plan lists the changed and new functions its own build has
    (`plan.focus.side_plan`).  A new function only stack samples caught was otherwise no row at all:
    tinyxml2's b2e08e4 moved its printer's output into a new `XMLPrinter::Write` (5.7 ms a run of
    samples) and `Putc` in its library, and the check named neither."""
    return (bool(profiles) and bool(others) and all(p.profile.plan.pairing for p in profiles + others)
            and all(name in p.profile.plan.changed for p in others)
            and not any(name in p.profile.plan.changed for p in profiles))


def _simple(workload: str, name: str, kind: str, sides: tuple[Side, Side], why: str) -> Change:
    t, b = sides
    mt, mb = t.total, b.total
    relative = {NEW: math.inf, REMOVED: -1.0}.get(kind, math.nan)
    return Change(workload=workload, function=name, type=kind, relative=relative,
                  absolute_ns=mt - mb, exclusive_delta_ns=t.own - b.own,
                  confidence=1.0, ci_low=math.nan, ci_high=math.nan, method=why, location=t.location or b.location,
                  base_ns=mb, target_ns=mt, base_calls=b.calls,
                  target_calls=t.calls)


def extra_var(t: Side, b: Side, sampling: bool = True) -> float:
    """Variance of the log ratio that is not run-to-run noise: sampling (unless the noise it is added to
    was measured between sessions sampled alike, which holds it: `sampling`), the calibration's error
    in the probe time taken out, and each side's own probe cost.  One calibration serves both sides, so
    its error cancels but for the difference of the two sides' probe shares (log native =
    log(total - probe), d = -share x error); the sides' own deviations (PROBE_COST_SPREAD) do not cancel."""
    calib = (t.probe_share - b.probe_share) * max(t.calibration_sd, b.calibration_sd)
    own = (t.probe_share ** 2 + b.probe_share ** 2) * PROBE_COST_SPREAD ** 2
    return (t.sampled_var + b.sampled_var if sampling else 0.0) + calib ** 2 + own
