"""The data model shared by every stage (DESIGN.md §5): one immutable profile per
(commit, configuration, run).

Only plain data lives here; encoding to a note line is in `codec.py`.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from functools import cached_property


@dataclass(frozen=True)
class Header:
    tool_version: str
    commit: str
    binary: str  # path as given in the configuration (relative to the work tree) or absolute ad hoc
    build_id: str
    command: tuple[str, ...]
    workload: str
    engine: str
    machine: str  # fingerprint of the hardware: profiles from other machines are not comparable
    kernel: str
    started: float  # unix time
    finished: float
    exit_status: int | None = 0  # of the workload; None when it was killed (timeout)
    partial: str = ""  # why the profile is incomplete ("" = complete): crash, timeout, ...

    @property
    def config_key(self) -> str:
        """Which profiles can be compared: same binary, workload, engine and machine."""
        name = self.binary.rsplit("/", 1)[-1]
        return f"{name}|{self.workload}|{self.engine}|{self.machine}"


@dataclass(frozen=True)
class Metrics:
    """The thesis' evaluation metrics (times in seconds, sizes in bytes)."""

    PT: float = 0.0  # profiling time: the whole collect command for this workload
    CPT: float = 0.0  # collection phase time: probes attached until results read
    PRT: float = 0.0  # program run time (wall clock of the workload under probes)
    RDV: int = 0  # raw data volume: bytes of records and maps read from the kernel
    PS: int = 0  # profile size: bytes of the encoded note line
    OO: float = 0.0  # optimization overhead: planning time
    ORE: float = 0.0  # overhead of resource extraction: binary/call-graph analysis time
    PL: int = 0  # probe locations: functions probed
    PLR: int = 0  # probe locations reached: probed functions called at least once
    HC: float = 0.0  # hotspot coverage: share of exclusive time in functions that were probed
    TLC: float = 0.0  # top-level coverage: share of the root's inclusive time seen in its callees
    dropped: int = 0  # sampled records lost (ring buffer full): counted in BPF, never silent
    records: int = 0  # sampled call records delivered
    stack_samples: int = 0  # perf_event samples taken
    untimed: int = 0  # calls nested deeper than the kernel's 64 return probes: counted, not timed
    attach_s: float = 0.0
    detach_s: float = 0.0
    predicted_overhead_s: float = 0.0  # calls x calibrated per-hit cost of each entry class (+ samples x cost)
    native_s: float = 0.0  # --max-overhead: the pilot's run time at native speed (0 = not measured)

    @property
    def measured_overhead(self) -> float | None:
        """PRT / native - 1 against the pilot run (one native run: as noisy as the machine)."""
        return self.PRT / self.native_s - 1 if self.native_s > 0 else None

    def as_dict(self) -> dict:
        """The fields and the derived measured overhead (for --json and the dashboard index)."""
        return {**asdict(self), "measured_overhead": self.measured_overhead}


@dataclass(frozen=True)
class FunctionStats:
    """Per-function results.  `count`, `total_ns`, `exclusive_ns` are exact kernel aggregates
    unless `sampled` is true, in which case `ci_low`/`ci_high` bound the estimate of `total_ns`.

    `total_ns` sums the inclusive time of every call, so a recursive function counts its nested
    calls' time again; `exclusive_ns` is additive and never double counts."""

    name: str
    count: int
    total_ns: int
    exclusive_ns: int
    min_ns: int = 0
    max_ns: int = 0
    hist: tuple[int, ...] = ()  # log2 buckets of inclusive duration: hist[i] counts [2^i, 2^(i+1)) ns
    sampled: bool = False
    ci_low: float | None = None
    ci_high: float | None = None
    # bounded series of sampled calls: (call ordinal within this function, inclusive ns)
    series: tuple[tuple[int, int], ...] = ()
    stack_samples: int = 0  # perf_event samples whose instruction pointer fell in this function
    location: str = ""  # "file:line" of the definition when DWARF has it
    recorded: int = 0  # calls recorded in the kernel's ring buffer (before the series was thinned)

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0


@dataclass(frozen=True)
class PlanRecord:
    """The plan that was used, as stored in the profile (DESIGN.md §12 `plan`)."""

    probed: tuple[str, ...] = ()
    removed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # method -> names
    changed: tuple[str, ...] = ()
    strategy: str = "userspace"
    mode: str = "trace"  # trace | sample | dynamic | timed | bursty | stack | hybrid
    params: dict[str, float] = field(default_factory=dict)
    pipeline: str = "none"
    methods: tuple[str, ...] = ()  # the optimization methods that ran, in order
    reasons: dict[str, str] = field(default_factory=dict)  # removed function -> why
    renamed: dict[str, str] = field(default_factory=dict)  # diff tracing: base name -> name here
    sample_every: dict[str, int] = field(default_factory=dict)  # per-function periods (dynamic sampling)
    base: str = ""  # the commit diff tracing and the baseline statistics came from
    traced: tuple[str, ...] = ()  # hybrid: the functions traced on every call (the rest: stack samples)


@dataclass(frozen=True)
class Profile:
    header: Header
    metrics: Metrics
    plan: PlanRecord
    functions: tuple[FunctionStats, ...]
    calibration: dict[str, float] = field(default_factory=dict)  # entry class -> ns per hit

    @property
    def config_key(self) -> str:
        return self.header.config_key

    def function(self, name: str) -> FunctionStats | None:
        return self._by_name.get(name)

    @cached_property
    def _by_name(self) -> dict[str, FunctionStats]:
        """Name -> stats (checks look up every function in every profile: a scan would be quadratic)."""
        return {f.name: f for f in self.functions}


def content_id(line: str) -> str:
    """A profile's identity is the hash of its encoded content."""
    return hashlib.sha256(line.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class StoredProfile:
    """A profile read back from the notes, with where it came from."""

    commit: str
    line_no: int
    id: str
    profile: Profile
