"""An engine for the orchestration tests (issue #35): the workload runs for real, in a real scope
(its processes, signals, timeouts and failures are real), and the numbers are made up.

`engine.base`'s protocols are all it implements: a session per plan, one `collect` per run.  What it
reports of a run:

* the root's inclusive time is the run's measured wall time (a slower program is slower here too), or
  `FakeEngine.run_ns`;
* every other traced function is called `CALLS` times and shares `SHARE` of the run evenly,
  exclusive = inclusive (no callees);
* a function the plan only samples gets its share as stack samples at the plan's rate;
* every value carries a small seeded jitter (`JITTER`, log-normal: `FakeEngine.jitter` sets another),
  so that spreads are never zero.

Every session and run is logged (`FakeEngine.log`) so that a test can assert the order of runs, and
`fail_at` raises KeyboardInterrupt at the n-th run (0-based), as a Ctrl-C would arrive there.

`invoke(engine, ARGS)` is `git perf ARGS` in this process collecting with it (through click's context
object: `collector`); `python tests/fakeengine.py ARGS...` is `git perf ARGS...` with it, for the tests
that send signals to a real process (and `python tests/fakeengine.py worker`, a range's worker).
"""

from __future__ import annotations

import math
import random
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from click.testing import CliRunner, Result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (run as a script: the checkout's gitperf)
from gitperf.analysis.elf import BinaryInfo  # noqa: E402
from gitperf.cli import main  # noqa: E402
from gitperf.cli.app import Collector  # noqa: E402
from gitperf.core.progress import Progress  # noqa: E402
from gitperf.engine.base import RawCollection, RawFunction, RunWorkload  # noqa: E402
from gitperf.engine.workload import scope  # noqa: E402
from gitperf.plan.probes import ProbePlan  # noqa: E402

CALLS = 10  # calls of each traced function a run
SHARE = 0.5  # of the run's time, split evenly between the functions other than the root
JITTER = 0.01  # relative sd of every made-up time
# The fake's calibration (ns; no run of the calibration program, whose self-timed
# loop the fake cannot see): near this VM's measured costs (a push-class entry ~1.3 us, ~0.3 us a
# stack sample), so that plans and budgets come out as under the real engine.
COSTS = {**{c: 1300.0 for c in ("push", "nop", "nop5", "branch", "endbr")}, "singlestep": 4000.0,
         **{f"{c}_in": 500.0 for c in ("push", "nop", "nop5", "branch", "endbr", "singlestep")},
         **{f"{c}_sd": 200.0 for c in ("push", "nop", "nop5", "branch", "endbr", "singlestep")},
         "stack_sample": 300.0}


@dataclass(frozen=True)
class Run:
    """One logged run: which binary under which plan."""

    binary: str
    mode: str
    functions: tuple[str, ...]


@dataclass
class FakeEngine:
    name: str = "fake"
    fail_at: int | None = None  # raise KeyboardInterrupt at this run (0-based)
    main_until: int | None = None  # from this run on (0-based) the workload no longer reaches main
    seed: int = 0
    jitter: float = JITTER  # sd of every made-up time's log: large, a function no number of rounds resolves
    # made-up times from this run time (ns) rather than the run's measured wall time (0): a test's
    # numbers then depend on the seed alone, not on how busy the machine is
    run_ns: float = 0.0
    log: list[Run] = field(default_factory=list)
    sessions: int = 0

    def check(self) -> None:
        """Every machine can run the fake."""

    def calibration(self, machine: str, progress: Progress) -> dict[str, float]:
        """COSTS: no run of the calibration program, whose self-timed loop the fake cannot see."""
        return dict(COSTS)

    def collect(self, binary: BinaryInfo, plan: ProbePlan, run: RunWorkload, progress: Progress) -> RawCollection:
        with self.session(binary, plan, progress) as s:
            return s.collect(run)

    @contextmanager
    def session(self, binary: BinaryInfo, plan: ProbePlan, progress: Progress,
                alternating: bool = False) -> Iterator[FakeSession]:
        self.sessions += 1
        progress(f"loading the fake engine ({len(plan.probed_ids())} functions)")
        yield FakeSession(self, binary, plan, random.Random(self.seed + self.sessions))


@dataclass
class FakeSession:
    engine: FakeEngine
    binary: BinaryInfo
    plan: ProbePlan
    rng: random.Random

    def collect(self, run: RunWorkload) -> RawCollection:
        log = self.engine.log
        if self.engine.fail_at is not None and len(log) == self.engine.fail_at:
            raise KeyboardInterrupt
        log.append(Run(str(self.binary.path), self.plan.mode, self.plan.names))
        t0 = time.perf_counter()
        with scope() as where:
            result = run(where)
        wall_ns = self.engine.run_ns or result.wall_s * 1e9
        others = max(len(self.plan.functions) - (self.plan.root is not None), 1)
        funcs = [self._function(i, f.name, wall_ns, others) for i, f in enumerate(self.plan.functions)]
        samples = sum(r.stack_samples for r in funcs)
        root = self.plan.functions[self.plan.root].name if self.plan.root is not None else None
        stacks = {((root, f.name) if root and f.name != root else (f.name,)): r.stack_samples
                  for f, r in zip(self.plan.functions, funcs) if r.stack_samples}
        return RawCollection(functions=funcs, run=result, attach_s=0.0, detach_s=0.0,
                             collection_s=time.perf_counter() - t0, raw_bytes=0, records=0, dropped=0, overflow=0,
                             unmatched=0, stack_samples=samples, unknown_samples=0, attach_method="fake",
                             attached_s=result.wall_s, stacks=stacks, rooted_samples=samples if root else 0)

    def _function(self, i: int, name: str, wall_ns: float, others: int) -> RawFunction:
        jitter = math.exp(self.rng.gauss(0, self.engine.jitter))
        own = wall_ns * (1 - SHARE if i == self.plan.root else SHARE / others) * jitter
        samples = round(own / 1e9 * self.plan.stack_hz)
        if not self.plan.is_traced(name):
            return RawFunction(stack_samples=samples)
        if i == self.plan.root:
            if self.engine.main_until is not None and len(self.engine.log) > self.engine.main_until:
                return RawFunction()  # (the run logged before its functions: log[-1] is this one)
            total = round(wall_ns * jitter)
            return RawFunction(count=1, timed=1, outer=1, total_ns=total, exclusive_ns=round(own), min_ns=total,
                               max_ns=total, stack_samples=samples)
        per = round(own / CALLS)
        return RawFunction(count=CALLS, timed=CALLS, outer=CALLS, total_ns=per * CALLS, exclusive_ns=per * CALLS,
                           min_ns=per, max_ns=per, series=[(k, per) for k in range(CALLS)], stack_samples=samples)


def collector(engine: FakeEngine) -> Collector:
    """What `git perf` collects with when invoked with `obj=collector(engine)`: `engine`, every time a
    command asks for one (the pre-push hook's checks too); each commit of `collect --range` with a
    fake engine of its own, in a worker process of this file's."""
    return Collector(engine=lambda per_probe=False: engine, worker=(sys.executable, __file__, "worker"))


def invoke(engine: FakeEngine, args: list[str], **kw) -> Result:
    """`git perf ARGS` in this process (click's CliRunner), collecting with `engine`."""
    return CliRunner().invoke(main, args, obj=collector(engine), **kw)


if __name__ == "__main__":
    if sys.argv[1:] == ["worker"]:  # one commit of `collect --range` (`collect.worker`)
        from gitperf.collect import worker
        sys.exit(worker.main(lambda force_per_probe=False: FakeEngine()))
    sys.exit(main(prog_name="git perf", obj=collector(FakeEngine())))
