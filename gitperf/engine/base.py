"""The engine interface (after the thesis' common engine interface) and the raw data an engine
returns.  `collect.profile` turns a `RawCollection` into a `Profile`; engines know nothing of git."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ContextManager, Protocol

from gitperf.analysis.elf import BinaryInfo
from gitperf.core.progress import Progress
from gitperf.engine.workload import RunResult, Scope
from gitperf.plan.probes import ProbePlan


@dataclass
class RawFunction:
    count: int = 0  # exact: counted at entry in the kernel
    timed: int = 0  # calls whose return was seen (== count unless cut off by exit/crash/burst)
    outer: int = 0  # of the timed calls, those with no call of the same function below them (recursion)
    total_ns: int = 0  # inclusive time of the outermost calls (a recursive call is inside its outer one)
    exclusive_ns: int = 0
    probe_ns: int = 0  # calibrated cost of the probed calls nested inside the outermost calls (kernel sum)
    nested: int = 0  # probed calls nested inside the outermost calls
    min_ns: int = 0
    max_ns: int = 0
    hist: list[int] = field(default_factory=list)
    series: list[tuple[int, int]] = field(default_factory=list)  # (ordinal, inclusive ns)
    stack_samples: int = 0
    library_samples: int = 0  # of stack_samples: taken in a library, given to the function from the stack
    bursts: list[tuple[int, int]] = field(default_factory=list)  # bursty: (calls, total ns) in each burst


@dataclass
class RawCollection:
    functions: list[RawFunction]  # indexed like plan.functions
    run: RunResult
    attach_s: float
    detach_s: float
    collection_s: float  # CPT: attach .. results read
    raw_bytes: int  # RDV
    records: int
    dropped: int
    overflow: int  # calls deeper than the shadow stack (counted, not timed)
    unmatched: int
    stack_samples: int
    unknown_samples: int  # samples outside the binary's functions
    attach_method: str  # "uprobe_multi" | "per-probe"
    attached_s: float = 0.0  # seconds the probes were live while the workload ran (bursty: < run time)
    probe_samples: int = 0  # samples taken while the kernel handled a probe: probe time, no function's
    # frames of the binary from the root down (core.stacks: LIBRARY, UNKNOWN) -> samples; probe time left out
    stacks: dict[tuple[str, ...], int] = field(default_factory=dict)
    rooted_samples: int = 0  # of the stacks' samples, those whose walk reached the plan's root
    # seconds the root's calls waited, runnable, for a CPU (another process's turn): left out of every
    # traced call's time, and of the run time that samples' shares are taken of
    waited_s: float = 0.0
    # samples taken in a function of the project's own shared libraries (BinaryInfo.libraries), by
    # its name: not a function of the plan, sampled and named as the binary's are
    library_functions: dict[str, int] = field(default_factory=dict)

    @property
    def on_cpu_s(self) -> float:
        """The run's wall time less its waits for a CPU: what the samples' shares are shares of."""
        return max(self.run.wall_s - self.waited_s, 0.0)

    @property
    def samples_total(self) -> int:
        """Every sample symbolised: the denominator of a function's share of the run time."""
        return (sum(r.stack_samples for r in self.functions) + sum(self.library_functions.values())
                + self.unknown_samples + self.probe_samples)


# The workload runner an engine calls once its probes are in place.
RunWorkload = Callable[[Scope], RunResult]


class Engine(Protocol):
    name: str

    def check(self) -> None:
        """Raise EnvironmentUnavailable (exit 4) with what to do when this machine cannot collect."""

    def calibration(self, machine: str, progress: Progress) -> dict[str, float]:
        """What this engine's probes and stack samples cost on this machine (`machine`: its fingerprint),
        in ns (`engine.calibrate`): what plans and the probe time taken out of a run are made of."""

    def collect(self, binary: BinaryInfo, plan: ProbePlan, run: RunWorkload, progress: Progress) -> RawCollection:
        """Attach, run the workload, read the results, detach: detach happens on every exit path."""

    def session(self, binary: BinaryInfo, plan: ProbePlan, progress: Progress,
                alternating: bool = False) -> ContextManager[Session]:
        """Prepare once (compile, load) for many runs under one plan; `collect` is one session's one run.
        `alternating`: its runs alternate with another session's runs of another binary, and nothing
        else runs this binary meanwhile (a paired check's side), so its probes may stay attached from
        its first run to its end."""


class Session(Protocol):
    def collect(self, run: RunWorkload) -> RawCollection:
        """One run under the session's plan (attach, run, read, detach, clear)."""
