"""The one verdict pipeline (ARCHITECTURE.md §10, "One pipeline"): what happens to one workload's
measurements after they are taken, in this order, for every check — `check` from stored profiles,
`check --collect` and its stop rule after each round, the index and the pre-push hook:

1. **compare** (`compare.compare_workload`): every function's time change, its interval and confidence,
   a function the commit renamed (or a clone the compiler renumbered) under its new name on both
   sides (`compare.in_target_names`);
2. **witness** (`witness.annotate`): the instruction counts beside each, and the first witness rule
   that applies (conflict, placement, instructions);
3. **gone** (`gone.regroup`): removed functions that were inlined said so, those a surviving caller
   no longer calls told as one line under it;
4. **locate** (`locate`): a changed function left to the stack samples gets its traced caller's
   degradation when that caller singles it out;
5. **share** (`shares`): each time verdict as a share of the run's own change;
6. **accept** (`check.conclude`, over all workloads): an accepted commit's degradations are `accepted`.

The set of changed functions all steps and the stop rule share comes from one place (`changed`): for
a paired check, the machine-code diff of its two builds as its plan stored it (`PlanRecord.changed`:
changed and new functions, renames and relocations left out, `analysis.bindiff`); for profiles
collected one commit at a time, the source diff's functions and the plan's diff tracing.  What locate
needs (which functions were traced, which changed functions each caller reaches) is stored in the
plan too (`PlanRecord.traced`, `PlanRecord.reaches`), so a check recomputed from the notes decides as
the paired check did.
"""

from __future__ import annotations

import math
from typing import Callable

from msgspec.structs import replace

from gitperf.checks import gone, witness
from gitperf.checks.change import DEGRADATION, OPTIMIZATION, Change
from gitperf.checks.compare import compare_workload
from gitperf.checks.sides import Sides, in_target_names
from gitperf.core.config import CheckConfig
from gitperf.core.model import ROOT, Profile

# A caller's degradation is located in its one changed callee when the caller's own (exclusive) time
# took at most this share of what its inclusive time gained: the rest went into its callees.
LOCATED_EXCLUSIVE = 0.25


def paired(profiles: list[Profile]) -> bool:
    """Whether these runs are one side of a paired check (its plan stored the two builds' diff)."""
    return bool(profiles) and all(p.plan.pairing for p in profiles)


def changed(target: list[Profile], source_diff: Callable[[], set[str]]) -> frozenset[str]:
    """The functions the commit changed, for every step and the stop rule: a paired check's
    machine-code diff (`PlanRecord.changed`), else the source diff's functions (`source_diff`, called
    only then) with what the plans' diff tracing found."""
    stored = {n for p in target for n in p.plan.changed}
    return frozenset(stored if paired(target) else stored | source_diff())


def judge(sides: Sides, cfg: CheckConfig, changed_set: frozenset[str], opinions: bool = True) -> list[Change]:
    """Steps 1-3 for one workload (the module's docstring); `opinions`: the other methods' votes too."""
    sides = in_target_names(sides)
    found = compare_workload(sides, cfg, changed_set, opinions)
    found = witness.annotate(found, sides.target, sides.base)
    plan = sides.target[0].profile.plan if sides.target else None
    found = gone.regroup(found, plan, sides.base, sides.target)
    found = locate(found, set(plan.traced), plan.reaches) if plan else found
    return shares(found)


def shares(changes: list[Change]) -> list[Change]:
    """Each time verdict's added (or saved) ns a run as a share of the run's own change (`Change.share`:
    "+1.2 ms a run, 27% of the slowdown"), where the run as a whole (the root) moved the same way by a
    verdict of its own; an estimate within the noise is no denominator.  Shares of nested functions
    overlap (a caller's inclusive time holds its callee's), so they need not add up to 100%.  A share
    above 1 says time moved here from other functions, which only intervals apart show: where the
    function's gain and the run's agree within their intervals it is 1, all of the run's change (a
    +17.46 ms gain beside the run's +12 ms was once called moved time; callgrind had 68.65 M of the
    run's 68.84 M added instructions in that function: nothing had moved)."""
    root = next((c for c in changes if c.function == ROOT and c.type in (DEGRADATION, OPTIMIZATION)), None)
    if root is None or not root.absolute_ns:
        return changes
    return [replace(c, share=_share(c, root))
            if c.type == root.type and c.function != ROOT and math.isfinite(c.absolute_ns) else c for c in changes]


def _share(c: Change, root: Change) -> float:
    share = c.absolute_ns / root.absolute_ns
    if share <= 1:
        return share
    # the function's gain at its smallest against the run's at its largest (ns; a saving: both negative)
    least = min(abs(c.base_ns * c.ci_low), abs(c.base_ns * c.ci_high))
    most = max(abs(root.base_ns * root.ci_low), abs(root.base_ns * root.ci_high))
    return share if math.isfinite(least) and least > most else 1.0


def locate(changes: list[Change], traced: set[str], reaches: dict[str, tuple[str, ...]]) -> list[Change]:
    """A changed function left to the stack samples has few of them: a slowdown of it may show only
    in a traced caller's inclusive time.  When that caller degraded, its own time did not grow
    (exclusive delta at most LOCATED_EXCLUSIVE of the gain), and of everything it calls (`reaches`:
    the changed and new functions within the depth it was traced for) only this one function has
    different code, the gain is located there: the function gets the caller's degradation (its added
    ns, interval and confidence), its values before and after moved by that gain, and its relative
    change against its own sampled time."""
    by = {c.function: c for c in changes}
    out = list(changes)
    for caller, reached in sorted(reaches.items()):
        c = by.get(caller)
        if c is None or c.type != DEGRADATION or len(reached) != 1 or caller not in traced:
            continue
        f = by.get(reached[0])
        if (f is None or f not in out or f.function in traced or f.type in (DEGRADATION, OPTIMIZATION)
                or f.base_ns <= 0 or c.exclusive_delta_ns > LOCATED_EXCLUSIVE * c.absolute_ns):
            continue  # (`f not in out`: already located through another caller)
        scale = c.base_ns / f.base_ns  # the caller's relative change, in units of the function's own time
        out[out.index(f)] = replace(
            f, type=DEGRADATION, relative=c.absolute_ns / f.base_ns, absolute_ns=c.absolute_ns,
            target_ns=f.base_ns + c.absolute_ns,
            exclusive_delta_ns=c.absolute_ns - max(c.exclusive_delta_ns, 0.0),  # ranks it before the caller
            ci_low=c.ci_low * scale, ci_high=c.ci_high * scale, confidence=c.confidence,
            method=f"located through {caller}: its inclusive time {c.relative:+.1%} "
                   f"[{c.ci_low:+.1%}, {c.ci_high:+.1%}], its own time {c.exclusive_delta_ns / 1e3:+.0f} us, "
                   f"and of what it calls only {f.function} changed; relative to {f.function}'s sampled time",
            per_call_ci=None, measure=f"{f.measure or 'time per run'}, after: plus the gain located through {caller}")
    return out
