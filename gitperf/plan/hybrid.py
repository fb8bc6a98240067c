"""`collect --max-overhead`: from what is known before the run to a hybrid plan (ARCHITECTURE.md §8).

Inputs: a short stack-sampling pilot of the workload (its native run time, and where the time
goes), the exact call counts of the baseline's profile (or of a counting pass, for changed functions
no profile counted), the calibrated cost of one probed call per
entry class and of one stack sample, and the functions the change touched.  The solvers are in
`budget.py`; this module turns profiles into their items and their choice into a plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gitperf.core.config import MAX_OVERHEAD_PCT
from gitperf.core.model import ROOT, Mode, PlanRecord, Profile
from gitperf.plan import budget
from gitperf.plan.costs import SAMPLE_KEY, call_costs
from gitperf.plan.probes import ProbePlan, as_hybrid

@dataclass(frozen=True)
class Pilot:
    """What the pilot measured (`collect.pilot`)."""

    native_s: float  # run time of the workload with only the pilot's timer, its samples' cost taken out
    shares: dict[str, float]  # function -> share of the samples (exclusive time)
    partial: str = ""  # why the last run ended early ("" = every run completed)
    stderr: str = ""  # of that run: its last lines

    def budget_ns(self, max_overhead: float) -> float:
        """What the probes may add: a fraction of the native run time."""
        return max_overhead * self.native_s * 1e9


def parse_percent(text: str) -> float:
    """'5%' or '5' -> 0.05.  A ValueError names what is wrong."""
    t = text.strip().removesuffix("%").strip()
    try:
        pct = float(t)
    except ValueError:
        raise ValueError(f"expected a percentage such as 5% or 2.5, got {text!r}") from None
    if not (0 < pct <= MAX_OVERHEAD_PCT) or not math.isfinite(pct):
        raise ValueError(f"the overhead budget must be above 0% and at most {MAX_OVERHEAD_PCT:g}%, got {text!r}")
    return pct / 100


def known_calls(profile: Profile | None) -> dict[str, float]:
    """Calls per run of every function the profile traced (0 when it was traced and never called);
    functions it only sampled, or did not probe, are unknown (absent)."""
    if profile is None:
        return {}
    p = profile.plan
    traced = set(p.traced) if p.mode == Mode.HYBRID else set() if p.mode == Mode.STACK else set(p.probed)
    out = {n: 0.0 for n in traced}
    for f in profile.functions:
        if f.count:  # exact, or (bursty) an unbiased estimate: either ranks frequencies
            out[f.name] = float(f.count)
    return out


def uncounted(candidates: tuple[str, ...], calls: dict[str, float], changed: tuple[str, ...],
              watch: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The changed and watched functions no earlier profile counted: they weigh most, and a function
    whose call frequency is unknown cannot be traced, so a counting pass measures them first."""
    cand = set(candidates)
    return tuple(sorted(n for n in {*changed, *watch} if n in cand and n not in calls and n != ROOT))


def counting_deadline(native_s: float, max_overhead: float) -> float:
    """When the counting pass is stopped: after the native run time plus twice the budget, plus 0.2 s
    of start-up noise.  A pass still running by then has spent more than the whole budget on its
    probes, which is all the planner needs to know (a function is traced on every call or not at all)."""
    return native_s * (1 + 2 * max_overhead) + 0.2


def counts_from_pass(counts: dict[str, int], finished: bool, call_cost_ns: dict[str, float],
                     budget_ns: float) -> dict[str, float]:
    """Calls per run from the counting pass.  A finished pass counted every call.  One stopped at
    its deadline (or by a crash) gives lower bounds, which settle only the functions whose calls so
    far already cost more than the whole budget; the others stay unknown."""
    if finished:
        return {n: float(c) for n, c in counts.items()}
    return {n: float(c) for n, c in counts.items() if c * call_cost_ns.get(n, 0.0) > budget_ns}


def inclusive_shares(profile: Profile | None, pilot: Pilot) -> dict[str, float]:
    """Share of the root's time per function: the baseline's inclusive time where it traced the
    function, else the pilot's exclusive share (a lower bound of the inclusive one)."""
    out = dict(pilot.shares)
    root = profile.function(ROOT) if profile else None
    if root and root.total_ns and not root.sampled:
        for f in profile.functions:
            if not f.sampled and f.count:
                out[f.name] = max(out.get(f.name, 0.0), min(f.total_ns / root.total_ns, 1.0))
    return out


@dataclass(frozen=True)
class Kept:
    """An earlier collection's budgeted plan, kept for this one (`kept`)."""

    commit: str
    traced: frozenset[str]
    stack_hz: int


def kept(commit: str, earlier: PlanRecord | None, names: set[str], max_overhead: float) -> Kept | None:
    """The plan of the nearest earlier collection of this workload (`earlier`, of `commit`), kept when
    it was chosen under the same budget and this binary still has every function it traced: a
    workload's history then keeps one plan, and consecutive commits compare at defaults (profiles of
    two plans never do; a plan chosen anew per commit from its own pilot differed almost every time:
    ARCHITECTURE.md §8).  None: choose anew (no such plan, another budget, or a traced function gone)."""
    if (earlier is None or earlier.mode != Mode.HYBRID or earlier.pipeline == "paired"
            or earlier.params.get("max_overhead") != max_overhead or not set(earlier.traced) <= names):
        return None
    hz = earlier.params.get("stack_hz")
    return Kept(commit, frozenset(earlier.traced), int(hz)) if isinstance(hz, (int, float)) else None


def keep(plan: ProbePlan, k: Kept, pilot: Pilot, max_overhead: float) -> tuple[ProbePlan, dict]:
    """The kept plan (`kept`) made for this binary from `plan` (its changed and removed functions
    set), and the parameters its profiles record."""
    return as_hybrid(plan, k.traced, k.stack_hz), {"max_overhead": max_overhead, "budget_ns": pilot.budget_ns(max_overhead),
                       "native_s": pilot.native_s, "plan_from": k.commit}


def chosen_params(choice: budget.Choice, rates: budget.Choice, pilot: Pilot, max_overhead: float,
                  counted: int) -> dict:
    """The parameters the profiles of a plan chosen anew record (`choose`'s choice, the rates form's
    bound beside it, and how many functions the counting pass counted)."""
    return {"max_overhead": max_overhead, "budget_ns": choice.budget_ns, "predicted_ns": choice.predicted_ns,
            "native_s": pilot.native_s, "value": choice.value, "bound": choice.bound, "rates_value": rates.value,
            "counted": float(counted)}


@dataclass(frozen=True)
class Inputs:
    """What the hybrid planner weighs, function by function."""

    candidates: tuple[str, ...]  # the functions that may be traced
    max_overhead: float  # fraction of native run time
    pilot: Pilot
    cost_ns: dict[str, float]  # the calibration: ns per traced call by entry class, and per stack sample
    calls: dict[str, float]  # known calls per run (unknown: absent)
    shares: dict[str, float]  # share of the root's time per function
    changed: tuple[str, ...] = ()
    levels: dict[str, int] = field(default_factory=dict)  # call-graph level (when analysed)
    watch: tuple[str, ...] = ()


def choose(plan: ProbePlan, x: Inputs) -> tuple[ProbePlan, budget.Choice, budget.Choice]:
    """The hybrid plan: trace-or-sample (one shared timer) over the candidates; every function of
    `plan` stays in it so that samples can be attributed anywhere.  Also returns the rates form's
    solution on the same budget (its value bounds what any choice could get)."""
    per_call = call_costs(plan, x.cost_ns)
    sample_ns = x.cost_ns.get(SAMPLE_KEY, 0.0)
    w = budget.weights(x.candidates, x.changed, x.shares, x.levels, {n: budget.CHANGED_WEIGHT for n in x.watch})
    items = [budget.Item(n, 1.0 if n == ROOT else x.calls.get(n, math.inf),
                         per_call.get(n, x.cost_ns.get("singlestep", 0.0)), w[n]) for n in x.candidates]
    budget_ns = x.pilot.budget_ns(x.max_overhead)
    # The timer runs while the (slowed) program runs: count its samples over the budgeted run time.
    duration = x.pilot.native_s * (1 + x.max_overhead)
    choice = budget.trace_or_sample(items, budget_ns, duration, sample_ns, always=(ROOT,))
    rates = budget.rates_choice(items, budget_ns, duration, sample_ns, always=(ROOT,))
    return as_hybrid(plan, choice.traced, choice.stack_hz), choice, rates
