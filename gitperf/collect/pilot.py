"""The pilot both planners start from (a budgeted `collect`, `collect.budgeted`; a paired check,
`collect.paired`): the workload at native speed under a stack-sampling timer alone -- how long it
runs and where its time goes.

One measurement with one set of knobs: PILOT_HZ (the paired plan's shared rate, `plan.focus.STACK_HZ`:
a 25 ms run gets ~50 samples, where 99 Hz gave the budget 2), up to PILOT_RUNS runs in one program
load but no more once the runs add up to PILOT_S (a second at 1999 Hz is ~2,000 samples: enough to
weigh functions by).  The samples' calibrated cost is taken out of the run time, so the native time
the budget is a share of does not include the pilot's own timer.
"""

from __future__ import annotations

from dataclasses import replace

from gitperf.analysis.elf import BinaryInfo
from gitperf.core.model import Mode
from gitperf.engine.base import Engine, RunWorkload
from gitperf.plan.costs import SAMPLE_KEY
from gitperf.plan.focus import STACK_HZ
from gitperf.plan.hybrid import Pilot
from gitperf.plan.probes import ProbePlan

PILOT_HZ = STACK_HZ
PILOT_RUNS = 3
PILOT_S = 1.0


def run_pilot(engine: Engine, binary: BinaryInfo, plan: ProbePlan, run: RunWorkload,
              cost_ns: dict[str, float]) -> Pilot:
    """The workload's native run time (the mean of its pilot runs, less the calibrated cost of the
    samples, `cost_ns[SAMPLE_KEY]`) and each function's share of the samples.  A partial run ends the
    pilot (`Pilot.partial`): the caller says whether that is fatal."""
    stack = replace(plan, mode=Mode.STACK, stack_hz=PILOT_HZ)
    samples: dict[str, int] = {}
    total, walls = 0, []
    with engine.session(binary, stack, lambda _m: None) as session:
        while len(walls) < PILOT_RUNS and sum(walls) < PILOT_S:
            raw = session.collect(run)
            walls.append(max(raw.run.wall_s - raw.samples_total * cost_ns.get(SAMPLE_KEY, 0.0) / 1e9, 0.0))
            total += raw.samples_total
            for f, r in zip(stack.functions, raw.functions):
                if r.stack_samples:
                    samples[f.name] = samples.get(f.name, 0) + r.stack_samples
            if raw.run.partial:
                return Pilot(sum(walls) / len(walls), _shares(samples, total), raw.run.partial, raw.run.stderr)
    return Pilot(sum(walls) / len(walls), _shares(samples, total))


def _shares(samples: dict[str, int], total: int) -> dict[str, float]:
    return {n: k / max(total, 1) for n, k in samples.items()}
