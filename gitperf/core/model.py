"""The data model shared by every stage (ARCHITECTURE.md §5): one immutable profile per
(commit, configuration, run), and the one rule for which profiles may be compared.

Only plain data lives here; encoding to a note line is in `codec.py` (which reads a line's functions
straight into `FunctionStats`, under the keys `FUNCTION_KEYS` gives them).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from collections.abc import KeysView
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Literal

import msgspec
import numpy as np

from gitperf.core.typed import Amount, Count, Real, Signed

ROOT = "main"  # the root function: every plan probes it, and its inclusive time is the workload's total


class Mode(StrEnum):
    """How a plan probes (ARCHITECTURE.md §6).  A StrEnum: stored in notes and compared as its string."""

    TRACE = "trace"  # every call aggregated in the kernel; per-call series bounded by dynamic probing
    SAMPLE = "sample"  # every call counted, every n-th recorded
    DYNAMIC = "dynamic"  # recording stops after a threshold (optionally re-enabled with back-off)
    TIMED = "timed"  # recording only in periodic windows
    BURSTY = "bursty"  # probes attached only during bursts: counts and times are estimates
    STACK = "stack"  # perf_event stack samples only (the root is probed for symbolisation)
    HYBRID = "hybrid"  # a traced set under an overhead budget, stack samples for the rest


# The plan parameters that change what a probed call costs or what is recorded (PlanRecord.params).
PLAN_PARAMS = ("sample_every", "record_limit", "period_ns", "window_ns", "stack_hz", "attach")

# PlanRecord.totals of every profile the engine writes now: recursion counted once per outermost call
OUTERMOST = "outermost"

# Modes in which only some functions are traced and the rest are covered by stack samples.
PARTLY_TRACED = frozenset({Mode.STACK, Mode.HYBRID})


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
    started: Real  # unix time
    finished: Real
    exit_status: Signed | None = 0  # of the workload; None when it was killed (timeout)
    partial: str = ""  # why the profile is incomplete ("" = complete): crash, timeout, ...
    # the configuration that produced it when not the commit's own: a commit from before the project
    # adopted git perf is collected with the working tree's .gitperf.toml or --config FILE
    config: str = ""
    # of a partial run: the last lines the workload wrote to stderr, what says why ("" otherwise)
    stderr: str = ""
    # what else the times depend on, for people (collect.context.environment): CPU, kernel, libc,
    # frequency governor, the compilers that built the binary
    environment: str = ""

    @property
    def config_key(self) -> str:
        """Which profiles can be compared: same binary, workload, engine and machine."""
        name = self.binary.rsplit("/", 1)[-1]
        return f"{name}|{self.workload}|{self.engine}|{self.machine}"


def command_id(command: tuple[str, ...]) -> str:
    """A workload command's identity in a comparison key: 8 hex digits of its SHA-256."""
    return hashlib.sha256("\0".join(command).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Metrics:
    """The thesis' evaluation metrics (times in seconds, sizes in bytes)."""

    PT: Amount = 0.0  # profiling time: the whole collect command for this workload
    CPT: Amount = 0.0  # collection phase time: probes attached until results read
    PRT: Amount = 0.0  # program run time (wall clock of the workload under probes)
    RDV: Count = 0  # raw data volume: bytes of records and maps read from the kernel
    PS: Count = 0  # profile size: bytes of the encoded note line
    OO: Amount = 0.0  # optimization overhead: planning time
    ORE: Amount = 0.0  # overhead of resource extraction: binary/call-graph analysis time
    PL: Count = 0  # probe locations: functions probed
    PLR: Count = 0  # probe locations reached: probed functions called at least once
    HC: Amount = 0.0  # hotspot coverage: share of a full trace's exclusive time in the functions traced (0: unknown)
    TLC: Amount = 0.0  # top-level coverage: share of the root's inclusive time seen in its callees
    dropped: Count = 0  # sampled records lost (ring buffer full): counted in BPF, never silent
    records: Count = 0  # sampled call records delivered
    stack_samples: Count = 0  # perf_event samples taken
    probe_samples: Count = 0  # of them, taken while the kernel handled a probe (probe time, no function's)
    rooted_samples: Count = 0  # of them, those whose stack unwound to the root (`Profile.stacks` holds them all)
    untimed: Count = 0  # calls nested deeper than the kernel's 64 return probes: counted, not timed
    attach_s: Amount = 0.0
    detach_s: Amount = 0.0
    predicted_overhead_s: Amount = 0.0  # calls x calibrated per-hit cost of each entry class (+ samples x cost)
    native_s: Amount = 0.0  # --max-overhead: the pilot's run time at native speed (0 = not measured)
    # of PRT, seconds the root's calls waited, runnable, for a CPU (a busy machine's; left out of
    # every function's time: ARCHITECTURE.md §6)
    WAIT: Amount = 0.0

    @property
    def measured_overhead(self) -> float | None:
        """PRT / native - 1 against the pilot run (one native run: as noisy as the machine)."""
        return self.PRT / self.native_s - 1 if self.native_s > 0 else None

    def as_dict(self) -> dict:
        """The fields and the derived measured overhead (for --json and the dashboard index)."""
        return {**asdict(self), "measured_overhead": self.measured_overhead}


# Most sampled calls of one function a profile keeps (`collect.profile.SERIES_BUDGET`, shared by all of
# them); a longer series in a pulled line is thinned to it on read: 1,000,000 calls in an 8 KB line made
# every reader of its commit take 3 s and 450 MB (bench/hostile.py).
MAX_SERIES = 8000

# A function's fields under the keys a note line spells them with (`core.codec`).  FunctionStats is
# read straight from a line, as a msgspec Struct, checked against its annotations as it is read: the
# index reads ~600 of them a commit, and building them from a separate line type once took 9 of its
# 72 M instructions a commit (docs/MEASUREMENTS.md, "Counted, not sampled").
FUNCTION_KEYS = {"name": "n", "count": "c", "total_ns": "t", "exclusive_ns": "x", "min_ns": "lo", "max_ns": "hi",
                 "hist": "h", "sampled": "s", "ci": "ci", "series_gaps": "so", "series_ns": "sd",
                 "stack_samples": "ss", "library_samples": "ls", "location": "loc", "recorded": "rec",
                 "probe_ns": "pc", "nested": "nc", "outer_calls": "oc", "by_run": "br"}


class FunctionStats(msgspec.Struct, frozen=True, rename=FUNCTION_KEYS):
    """Per-function results.  `count`, `total_ns`, `exclusive_ns` are exact kernel aggregates
    unless `sampled` is true, in which case `ci` bounds the estimate of `total_ns`.

    `total_ns` sums the inclusive time of the outermost calls: a call of a recursive function (direct or
    mutual) nested in another call of it is inside that call's time already and is not counted again,
    so no function's total exceeds its root's.  `exclusive_ns` sums every call's own time."""

    name: str
    count: Count
    total_ns: Count
    exclusive_ns: Signed
    min_ns: Count = 0
    max_ns: Count = 0
    hist: tuple[Count, ...] = ()  # log2 buckets of inclusive duration: hist[i] counts [2^i, 2^(i+1)) ns
    sampled: bool | Literal[0, 1] = False  # (a line writes 1: a bool once made, `__post_init__`)
    ci: tuple[Real | None, Real | None] | None = None  # (low, high) of a sampled total_ns
    # a bounded series of sampled calls, as a line keeps it (`series` reads it as pairs): each call's
    # ordinal within this function less the previous one's, and each call's inclusive ns
    series_gaps: tuple[Count, ...] = ()
    series_ns: tuple[Count, ...] = ()
    stack_samples: Count = 0  # perf_event samples given to this function: in its own code or a library it called
    # of stack_samples: taken in a library the function called (given to it from the stack, which a
    # stale return address can fool; `checks.compare` compares two builds on the others only)
    library_samples: Count = 0
    location: str = ""  # "file:line" of the definition when DWARF has it
    recorded: Count = 0  # calls recorded in the kernel's ring buffer (before the series was thinned)
    # calibrated estimate of the probes' own time inside total_ns: the function's own entry/return share
    # plus every probed call nested in its calls (ARCHITECTURE.md §6); total_ns - probe_ns is native time.
    # It can exceed total_ns where the calibration overestimates this run's probes (it is not capped)
    probe_ns: Count = 0
    nested: Count = 0  # probed calls nested in its outermost calls (exact kernel count)
    # the outermost calls, when recursion made them fewer than the timed calls (0: every call was one)
    outer_calls: Count = 0
    # the root never returned (the program called exit() inside it: ninja's real_main does), so no call
    # was timed: total_ns is the run's wall time instead (`collect.profile.build_functions`)
    by_run: bool | Literal[0, 1] = False

    def __post_init__(self):
        # (run for every function a note holds: the common case costs two tests)
        if self.sampled.__class__ is not bool or self.by_run.__class__ is not bool:
            msgspec.structs.force_setattr(self, "sampled", self.sampled == 1)
            msgspec.structs.force_setattr(self, "by_run", self.by_run == 1)
        if len(self.series_gaps) != len(self.series_ns):  # (msgspec says which function: "- at `$.f[3]`")
            raise ValueError(f"series has {len(self.series_gaps)} ordinals but {len(self.series_ns)} durations")
        if len(self.series_ns) > MAX_SERIES:  # evenly thinned, as collect thins what it keeps
            calls = self.series
            keep = [calls[int(k * len(calls) / MAX_SERIES)] for k in range(MAX_SERIES)]
            msgspec.structs.force_setattr(self, "series_gaps", _gaps([o for o, _ in keep]))
            msgspec.structs.force_setattr(self, "series_ns", tuple(d for _, d in keep))

    @property
    def series(self) -> tuple[tuple[int, int], ...]:
        """The sampled calls as (call ordinal within this function, inclusive ns), in call order."""
        return tuple(zip(itertools.accumulate(self.series_gaps), self.series_ns))

    @property
    def ci_low(self) -> float | None:
        return self.ci[0] if self.ci else None

    @property
    def ci_high(self) -> float | None:
        return self.ci[1] if self.ci else None

    @property
    def mean_ns(self) -> float:
        """Inclusive time per outermost call (per call, for a function that did not recurse)."""
        calls = self.outer_calls or self.count
        return self.total_ns / calls if calls else 0.0

    # (`stats.timing.run_times` applies these two properties' rule to many runs' values at once, for
    # the index's hot path: a change here is a change there, which a test holds them to)
    @property
    def native_ns(self) -> int:
        """Inclusive time with the calibrated probe time taken out: an estimate of the native time."""
        return max(self.total_ns - self.probe_ns, 0)

    @property
    def correctable(self) -> bool:
        """Whether `native_ns` is a usable estimate (probes at most CORRECTABLE_SHARE of the time)."""
        return self.probe_ns <= CORRECTABLE_SHARE * self.total_ns


# Probe time is taken out of a function's measured time only up to this share of it; beyond, the
# estimate would be mostly calibration error (why a fifth: ARCHITECTURE.md §10, "Which time").
CORRECTABLE_SHARE = 0.2


def series_fields(calls) -> dict[str, tuple[int, ...]]:
    """FunctionStats' two series fields for sampled calls given as (call ordinal, inclusive ns) in
    call order: `FunctionStats(..., **series_fields(calls))`."""
    return {"series_gaps": _gaps([o for o, _ in calls]), "series_ns": tuple(d for _, d in calls)}


def _gaps(ordinals: list[int]) -> tuple[int, ...]:
    """Each ordinal less the one before it (the first less 0): growing ordinals as small numbers."""
    return tuple(o - p for p, o in zip([0] + ordinals[:-1], ordinals))


@dataclass(frozen=True)
class PlanRecord:
    """The plan that was used, as stored in the profile (ARCHITECTURE.md §5)."""

    probed: tuple[str, ...] = ()
    removed: dict[str, tuple[str, ...]] = field(default_factory=dict)  # method -> names
    changed: tuple[str, ...] = ()
    strategy: str = "userspace"
    mode: str = Mode.TRACE
    params: dict[str, Amount | str | None] = field(default_factory=dict)  # numbers; the attach method a name
    pipeline: str = "none"
    methods: tuple[str, ...] = ()  # the optimization methods that ran, in order
    reasons: dict[str, str] = field(default_factory=dict)  # removed function -> why
    renamed: dict[str, str] = field(default_factory=dict)  # diff tracing: base name -> name here
    # a paired check's diff: base functions gone as functions, their code inlined into these here
    inlined: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sample_every: dict[str, Count] = field(default_factory=dict)  # per-function periods (dynamic sampling)
    base: str = ""  # the commit diff tracing and the baseline statistics came from
    traced: tuple[str, ...] = ()  # hybrid: the functions traced on every call (the rest: stack samples)
    # paired check: per traced caller, the changed and new functions it reaches within the depth it was
    # traced for (`checks.verdict.locate` reads it; not part of the fingerprint, the plan's spec is)
    reaches: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # entry-instruction class -> the probed functions of that class (analysis.elf.classify), every
    # class but `push`, which is what a function not listed here starts with
    entries: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The plan as it was asked for, when one plan serves several binaries (`check --collect`: the same
    # functions by name on both sides, though a new function exists in one of them only): its
    # fingerprint.  "" = derive it from what was probed (`fingerprint`).
    spec: str = ""
    # How a function's total_ns was summed: OUTERMOST (a recursive function's outermost calls only), or
    # "" in profiles from before that (every call, nested ones again).  Part of the fingerprint: the two
    # disagree on every recursive function, so they are never compared.
    totals: str = ""
    # The NOP padding of function entries the binary was built with (git.pad.describe: each wrapped
    # compiler's, e.g. "c++=mfentry cc=patchable"; "" = unpadded).  Part of the fingerprint: a padded
    # entry changes what every traced call costs, and each padding its own way.
    pad: str = ""
    # A paired check's session: the round this run was (0-based; base and target alternate who runs
    # first) and the id both sides' profiles of one check carry (`checks.check.partners` pairs by it).
    # None and "" outside a paired check.  Notes from before these fields kept them in `params`
    # (`core.codec` moves them here).
    round: Count | None = None
    pairing: str = ""

    @cached_property  # (asked for every profile of a check's base and history: the index asks ~40 a commit)
    def fingerprint(self) -> str:
        """Which functions were probed and how: two profiles are comparable only with the same
        fingerprint (ARCHITECTURE.md §5).  A traced call costs microseconds, far more than most
        functions' own work, so a caller's inclusive time depends on which callees were probed.
        How the totals were summed (`totals`) and the binary's entry padding (`pad`) are part of it,
        whichever way the plan was made."""
        probed = self.spec or self._probed_fingerprint()
        if not self.totals:
            return probed
        return hashlib.sha1(f"{probed}|{self.totals}{'|' + self.pad if self.pad else ''}".encode()).hexdigest()[:10]

    def _probed_fingerprint(self) -> str:
        if self.mode in PARTLY_TRACED:
            names = sorted(self.traced_names)
        elif self.strategy == "userspace" and not self.methods:
            names = ["*"]  # every function of the binary, whichever those are
        else:
            names = sorted(self.probed)
        how = {k: self.params.get(k) for k in PLAN_PARAMS}
        return fingerprint_of(str(self.mode), names, how, sorted(self.sample_every.items()))

    def describe(self) -> str:
        """The plan in a few words, for labels: "trace all", "hybrid: 3 traced, 499 Hz", ..."""
        hz = f", {self.params['stack_hz']:.0f} Hz" if self.params.get("stack_hz") else ""
        if self.mode in PARTLY_TRACED:
            return f"{self.mode}: {len(self.traced_names)} traced{hz}"
        if self.strategy == "userspace" and not self.methods:
            return f"{self.mode} all{hz}"
        return f"{self.mode} {len(self.probed)} functions" + (f" ({self.pipeline})" if self.methods else "") + hz

    def is_traced(self, name: str) -> bool:
        """Would this profile hold `name` had it been called?  Yes where it was traced; a function that
        only stack samples cover (stack, hybrid) may just have escaped the samples."""
        return name in self.traced_names

    @cached_property
    def traced_names(self) -> frozenset[str]:
        """The names `is_traced` holds for (a set: a check asks of every function of every run)."""
        return frozenset({*self.traced, ROOT}) if self.mode in PARTLY_TRACED else frozenset(self.probed)


@dataclass(frozen=True)
class InstructionCounts:
    """One run of the workload under callgrind (the instruction witness, ARCHITECTURE.md §10b): per
    function of the binary, (calls, exclusive, inclusive) instructions, calls into libraries charged
    to the caller; or why there are none (`error`: valgrind could not run it)."""

    total: Count = 0  # instructions of the whole run, libraries included
    functions: dict[str, tuple[Count, Count, Count]] = field(default_factory=dict)
    error: str = ""
    # a base run that had no second beside it: the commit whose paired check ran its base twice and
    # counted every function alike (a deterministic program: its A/A spread is 0, `collect.paired.learnt`)
    spread_from: str = ""


# `Profile.numbers`' columns (`sampled` last: the counted functions' table takes the others, `stats.timing.exact`)
NUMBERS = ("total_ns", "probe_ns", "exclusive_ns", "count", "sampled")
_NUMBERS = operator.attrgetter(*NUMBERS)


@dataclass(frozen=True)
class Profile:
    header: Header
    metrics: Metrics
    plan: PlanRecord
    functions: tuple[FunctionStats, ...]
    calibration: dict[str, Amount] = field(default_factory=dict)  # entry class -> ns per hit
    # callgrind runs of this side of a paired check (kept on its first round's profile only)
    instructions: tuple[InstructionCounts, ...] = ()
    # folded call stacks of the stack samples -> samples, bounded (core.stacks)
    stacks: dict[str, Count] = field(default_factory=dict)

    @property
    def config_key(self) -> str:
        return self.header.config_key

    @cached_property  # (asked of every profile of a check's base and history: ~40 a commit in the index)
    def comparison_key(self) -> str:
        """`comparison_key`'s value for this profile."""
        return f"{self.config_key}|{self.plan.mode}|{self.plan.fingerprint}|{command_id(self.header.command)}"

    @property
    def complete(self) -> bool:
        """Partial runs (crash, timeout) measure a different amount of work: never a baseline or target."""
        return not self.header.partial

    @property
    def collected(self) -> bool:
        """A complete run of a collection (`collect`, `--range`, CI), not a round of a paired check:
        those ran on its padded builds under its shared plan and compare with nothing collected (on
        lz4, `collect --range` skipped exactly the commits `check --collect` had checked)."""
        return self.complete and not self.plan.pairing

    def function(self, name: str) -> FunctionStats | None:
        return self._by_name.get(name)

    def names(self) -> KeysView[str]:
        """Its functions' names (a set-like view)."""
        return self._by_name.keys()

    def functions_named(self, names: list[str]) -> list[FunctionStats | None]:
        """`function` of each name, in order (a side's functions at once: `stats.timing.exact`)."""
        return list(map(self._by_name.get, names))

    @cached_property
    def function_names(self) -> list[str]:
        """Its functions' names in their order."""
        return [f.name for f in self.functions]

    @cached_property
    def numbers(self) -> np.ndarray:
        """Its functions' `NUMBERS`, a row each in their order (floats: whole nanoseconds are exact below
        2 ** 53): what the index's readers take of every function of every run at once (`stats.timing.exact`,
        the function page's natives), read from the functions once."""
        v = np.fromiter(itertools.chain.from_iterable(map(_NUMBERS, self.functions)), float,
                        len(NUMBERS) * len(self.functions)).reshape(len(self.functions), len(NUMBERS))
        v.flags.writeable = False  # (shared by every reader of the profile)
        return v

    @cached_property
    def _by_name(self) -> dict[str, FunctionStats]:
        """Name -> stats (checks look up every function in every profile: a scan would be quadratic)."""
        return {f.name: f for f in self.functions}

    def time_of(self, name: str, native: bool) -> int | None:
        """`times(native).get(name)` without building every function's (a few functions of a run: the
        root's runs in each history session)."""
        f = self._by_name.get(name)
        return None if f is None else f.native_ns if native else f.total_ns

    def times(self, native: bool) -> dict[str, int]:
        """Name -> `native_ns` (native) or `total_ns`: what a check reads of every function of every run
        of a commit and its ten predecessors (the dashboard's index checks each commit)."""
        return self._times[native]

    @cached_property
    def calibration_sd(self) -> float:
        """The calibration's relative uncertainty: the largest spread between its repetitions over the
        cost of any entry class (0 for a calibration without repetitions).  (A check reads it for
        every function of every run: once a profile.)"""
        cal = self.calibration
        return max((cal[f"{k}_sd"] / v for k, v in cal.items()
                    if f"{k}_sd" in cal and isinstance(v, (int, float)) and v > 0), default=0.0)

    @cached_property
    def _times(self) -> dict[bool, dict[str, int]]:
        return {True: {f.name: f.native_ns for f in self.functions}, False: {f.name: f.total_ns for f in self.functions}}


def fingerprint_of(*parts) -> str:
    """The fingerprint of a probe plan's parts (mode, names, parameters), whoever describes the plan:
    a stored record (`PlanRecord.fingerprint`) or a paired check's shared plan (`plan.focus.spec_of`).
    Ten hex digits of the SHA-1 of their JSON; the values of stored notes depend on it staying so."""
    return hashlib.sha1(json.dumps(list(parts), sort_keys=True).encode()).hexdigest()[:10]


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


def comparison_key(p: Profile) -> str:
    """The one rule for which profiles may be compared (checks, diff, report, noise, the index):
    same binary name, workload, engine and machine (`Header.config_key`), same mode, the same probe
    plan (`PlanRecord.fingerprint`) and the same workload command: a workload whose command changed
    under its name starts a new series (a 5-round check of a 10 s command once became the stored
    verdict of a 0.2 s workload of the same name).  binary|workload|engine|machine|mode|plan|command."""
    return p.comparison_key
