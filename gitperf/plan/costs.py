"""The cost model of probes: what one traced call or one stack sample costs, by the function's
entry-instruction class (ARCHITECTURE.md §6).  The numbers are measured by `engine.calibrate`."""

from __future__ import annotations

from gitperf.plan.probes import ProbePlan

SAMPLE_KEY = "stack_sample"  # the calibration's key for the cost of one perf_event stack sample


def call_costs(plan: ProbePlan, cost_ns: dict[str, float]) -> dict[str, float]:
    """Calibrated cost (ns) of one traced call of each of the plan's functions, by its entry class."""
    default = cost_ns.get("singlestep", 0.0)
    return {f.name: cost_ns.get(f.entry, default) for f in plan.functions}


def inside_costs(plan: ProbePlan, cost_ns: dict[str, float]) -> dict[str, float]:
    """The part (ns) of a function's own probed call that lands inside its measured interval, by its
    entry class (calibrated on empty functions, whose measured time is all probe)."""
    default = cost_ns.get("singlestep_in", 0.0)
    return {f.name: cost_ns.get(f"{f.entry}_in", default) for f in plan.functions}
