"""`.gitperf.toml`: the project's configuration, versioned with the code it measures (ARCHITECTURE.md §3).

Every value has a default.  Validation is strict (unknown keys are typos, not silence) and every
error names the file, the key, the bad value and what was expected.  A value's type and bounds are
stated once, on its field's annotation (`Literal` choices, `msgspec.Meta` bounds), and read by
`core.typed`, the reader of notes and check records too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from msgspec import Meta

from gitperf.core import typed
from gitperf.core.errors import ConfigError
from gitperf.core.model import Mode

FILENAME = ".gitperf.toml"
MODES = tuple(m.value for m in Mode if m != Mode.HYBRID)  # hybrid comes from --max-overhead, not --mode
PIPELINES = ("none", "basic", "advanced", "full")
STRATEGIES = ("userspace", "funcs")
MAX_OVERHEAD_PCT = 1000.0  # the budget's ceiling, in the file and on the command line (plan.hybrid.parse_percent)
# Upper bounds: a value past them is a typo, and some (a timeout past ~292 years of ns, a period past
# what a BPF constant holds) fail far from the file that set them.
DAY_S = 86_400.0


# Alignments GCC and clang take (-falign-functions=N): 0 (off) or a power of two up to a page
Alignment = Annotated[Literal[(0,) + tuple(2 ** k for k in range(13))],
                      Meta(description="0 (off) or a power of two up to 4096")]


@dataclass(frozen=True)
class BuildConfig:
    command: str = "make"  # shell command run at the work tree's root ("" = nothing to build)
    binary: str = ""  # path of the ELF to probe, relative to the root
    # compile with NOP-padded function entries, the padding each compiler links with (git.pad), through
    # compiler wrappers on the build's PATH (git.worktree.run_build)
    probe_pad: bool = False
    # with probe_pad: every function starts on an N-byte boundary (-falign-functions=N; 0 = as the
    # build aligns them), so that code moved before a function cannot shift its loops (§10e)
    align_functions: Alignment = 0


# A bare `collect` probes within this budget (percent of the native run time): a full trace of a
# program with nanosecond functions is mostly probe time (95% on the demo's `small`), which is not
# what a user wants to read as their program's profile.  5% matches check.min_relative: probes may
# add what a check would never call a change.
DEFAULT_MAX_OVERHEAD = 5.0


@dataclass(frozen=True)
class Workload:
    name: str
    command: str  # shell command; it may run the binary several times, in several processes
    # runs per collection; 0 (not in the file): as the overhead budget's pilot affords (collect.collection.runs)
    repeat: Annotated[int, Meta(gt=0, le=1_000)] = 0
    # a timeout below 0.01 s kills every run at once (`timeout = 1e-300` stored a partial profile and passed)
    timeout: Annotated[float, Meta(ge=0.01, le=DAY_S)] = 300.0
    # the exit statuses of a run that finished as intended (a test driver that exits 1 when a case
    # fails, by design); any other fails the collection and the check (collect.collection.failed)
    exit_codes: Annotated[tuple[Annotated[int, Meta(ge=0, le=255)], ...], Meta(min_length=1)] = (0,)

    @property
    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", self.command]


@dataclass(frozen=True)
class CollectConfig:
    engine: Literal["bcc"] = "bcc"
    # userspace: every function defined in the binary; funcs: `functions`
    strategy: Literal[STRATEGIES] = "userspace"
    functions: tuple[str, ...] = ()
    mode: Literal[MODES] = Mode.TRACE
    pipeline: Literal[PIPELINES] = "none"
    # mode=sample: record every n-th call of each function (all are counted)
    sample_every: Annotated[int, Meta(gt=0, le=10 ** 6)] = 1
    record_limit: Annotated[int, Meta(gt=0, le=10 ** 9)] = 1000  # mode=dynamic: stop recording a function after this many calls
    reenable: bool = False  # mode=dynamic: re-enable with doubling back-off
    period_ms: Annotated[float, Meta(gt=0, le=3_600_000.0)] = 100.0  # mode=timed/bursty: period
    # mode=timed/bursty: recording window / burst length within a period
    window_ms: Annotated[float, Meta(gt=0, le=3_600_000.0)] = 10.0
    # perf_event stack sampling frequency (0 = off, except in mode=stack); at most the kernel's default
    # perf_event_max_sample_rate
    stack_hz: Annotated[int, Meta(ge=0, le=100_000)] = 0
    series_limit: Annotated[int, Meta(gt=0, le=10 ** 6)] = 200  # sampled calls kept per function in the profile (at most)
    # percent of native run time the probes may add (> 0: the hybrid plan, ARCHITECTURE.md §8).  The
    # default keeps what a profile measures mostly the program's own time; a `mode` set in the file
    # (or --mode) without max_overhead turns it off (see `parse`)
    max_overhead: Annotated[float, Meta(ge=0, le=MAX_OVERHEAD_PCT)] = DEFAULT_MAX_OVERHEAD
    watch: tuple[str, ...] = ()  # max_overhead: functions worth tracing as much as changed ones


@dataclass(frozen=True)
class CheckConfig:
    min_relative: Annotated[float, Meta(ge=0, le=10.0)] = 0.05  # smaller relative changes are never called degradations
    min_absolute_ns: Annotated[int, Meta(ge=0, le=3_600 * 10 ** 9)] = 10_000
    # nor changes adding less than this share of the workload's run.  Between sessions of one build
    # (git perf noise, the demo's `small`, 632 ms a run probed), functions that allocate or print
    # (ht_new, report_top, report_summary, checksum_all) moved by 95-165 us together in one session
    # of seven: 0.015-0.026% of the run, each "significant" (5 of 42 A/A pairs alarmed in one run)
    min_share: Annotated[float, Meta(ge=0, le=1.0)] = 0.0005
    # a probability: below a half no verdict would be likelier right than wrong; above 0.9999 no check
    # of a few dozen rounds could ever reach it
    confidence: Annotated[float, Meta(ge=0.5, le=0.9999)] = 0.99
    direction: Literal["lower", "higher"] = "lower"  # lower time is better
    history: Annotated[int, Meta(gt=0, le=1_000)] = 10
    # the other methods' votes and the bootstrap of the mean call beside each verdict: they never
    # change it and cost ~90% of a check's time (the dashboard's index turns them off)
    votes: bool = True
    # `check --collect` builds both sides itself, in fresh worktrees, with NOP-padded function entries
    # (build.probe_pad): a traced call then costs ~1 us instead of ~10 (ARCHITECTURE.md §6), whatever
    # the user's own builds do, and the two sides can never differ in instrumentation
    probe_pad: bool = True
    # check --collect also counts each side's instructions under callgrind (checks.witness), when
    # valgrind is installed and one run is predicted within engine.callgrind.BUDGET_S: "off" skips it
    witness: Literal["instructions", "off"] = "instructions"
    # the check's builds align every function to this many bytes (build.align_functions; 0 = off)
    align_functions: Alignment = 0


@dataclass(frozen=True)
class HookConfig:
    commits: Literal["range", "tip", "all"] = "range"
    max_commits: Annotated[int, Meta(gt=0, le=1_000)] = 5
    on_cannot_collect: Literal["allow", "reject"] = "allow"
    on_not_enough_data: Literal["allow", "reject"] = "allow"
    push_notes: bool = False
    workloads: tuple[str, ...] = ()  # which workloads the hook collects and checks (() = all)
    # rounds of the paired check (0 = until the changed functions are decided; 1 is refused in `parse`)
    rounds: Annotated[int, Meta(ge=0, le=1_000)] = 0
    # measure again even when the pushed commit has a stored paired check against its parent
    recollect: bool = False


@dataclass(frozen=True)
class Config:
    path: str
    build: BuildConfig = field(default_factory=BuildConfig)
    workloads: tuple[Workload, ...] = ()
    collect: CollectConfig = field(default_factory=CollectConfig)
    check: CheckConfig = field(default_factory=CheckConfig)
    hook: HookConfig = field(default_factory=HookConfig)
    digest: str = ""  # sha256 of the file's text (first 12 hex digits): which configuration produced a profile

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        names = ", ".join(w.name for w in self.workloads) or "none"
        raise ConfigError(self.path, "workload", f"no workload named '{name}' (defined: {names})")


def valid_workload_name(name: str) -> bool:
    """A workload's name: not empty, no `|` (it separates the fields of a comparison key), nothing a
    terminal would obey.  The configuration's and `collect --workload`'s alike."""
    return bool(name.strip()) and "|" not in name and name.isprintable()


def _table(cls, table, path: str, where: str, required: tuple[str, ...] = ()):
    """A section of the file as `cls`: no key it does not know, the `required` ones there, every value
    of its field's type and within the bounds stated on the field (`core.typed`)."""
    if not isinstance(table, dict):
        raise ConfigError(path, where, f"expected a table, got {table!r}")
    known = [f.name for f in dataclasses.fields(cls) if f.name != "path"]
    for key in table:
        if key not in known:
            raise ConfigError(path, f"{where}.{key}", f"unknown key (known keys: {', '.join(known)})")
    for key in required:
        if key not in table:
            raise ConfigError(path, f"{where}.{key}", "missing (required)")
    try:
        return typed.read(table, cls)
    except typed.Invalid as e:
        raise ConfigError(path, f"{where}.{e.where}", e.reason) from None


def parse(text: str, path: str = FILENAME) -> Config:
    text = text.removeprefix("\ufeff")  # a byte-order mark (some Windows editors write one) is no TOML
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, "", f"not valid TOML: {e}") from None
    known = {"build", "workload", "collect", "check", "hook"}
    for key in data:
        if key not in known:
            raise ConfigError(path, key, f"unknown section (known: {', '.join(sorted(known))})")
    workloads_raw = data.get("workload", [])
    if not isinstance(workloads_raw, list):
        raise ConfigError(path, "workload", "expected [[workload]] tables")
    workloads = []
    for i, w in enumerate(workloads_raw):
        wl = _table(Workload, w, path, f"workload[{i}]", required=("name", "command"))
        if not valid_workload_name(wl.name):
            raise ConfigError(path, f"workload[{i}].name", f"expected a non-empty name without '|' or control "
                                                           f"characters, got {wl.name!r}")
        try:
            shlex.split(wl.command)
        except ValueError as e:
            raise ConfigError(path, f"workload[{i}].command", f"cannot parse {wl.command!r}: {e}") from None
        if any(o.name == wl.name for o in workloads):
            raise ConfigError(path, f"workload[{i}].name", f"duplicate workload name {wl.name!r}")
        workloads.append(wl)
    collect = _table(CollectConfig, data.get("collect", {}), path, "collect")
    if "mode" in data.get("collect", {}) and "max_overhead" not in data["collect"]:
        collect = dataclasses.replace(collect, max_overhead=0.0)  # a mode chosen in the file is a fixed plan
    if collect.window_ms > collect.period_ms:
        raise ConfigError(path, "collect.window_ms", f"must not exceed collect.period_ms ({collect.period_ms})")
    hook = _table(HookConfig, data.get("hook", {}), path, "hook")
    if hook.rounds == 1:  # as `check --collect --rounds`: a spread needs two pairs
        raise ConfigError(path, "hook.rounds", "expected 0 (until decided) or at least 2, got 1")
    return Config(
        path=path,
        build=_table(BuildConfig, data.get("build", {}), path, "build"),
        workloads=tuple(workloads),
        collect=collect,
        check=_table(CheckConfig, data.get("check", {}), path, "check"),
        hook=hook,
        digest=hashlib.sha256(text.encode()).hexdigest()[:12],
    )


def load(root: str | Path) -> Config | None:
    """The configuration at the work tree's root, or None when there is no file."""
    p = Path(root) / FILENAME
    if not p.exists():
        return None
    return load_file(p)


def load_file(p: Path) -> Config:
    """A configuration file (`--config FILE`)."""
    if not p.is_file():
        raise ConfigError(str(p), "", "no such file")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(str(p), "", f"cannot read: {e}") from None
    return parse(text, str(p))


TEMPLATE = '''\
# git perf configuration (docs/GUIDE.md in git perf).  Every key is optional unless noted.

[build]
# Shell command that builds the program, run at the repository root, in a fresh worktree for a
# check (so it configures what it needs).  "" = nothing to build.
command = "{build}"
# The ELF binary to probe, relative to the repository root.  Build it with -g and do not strip it.
binary = "{binary}"
# Cheaper probes for `git perf collect` (check --collect has its own: [check] probe_pad, below): with
# true every function starts with NOPs, which uprobes emulate, instead of an instruction the kernel
# single-steps (`git perf collect` says how many probed functions are single-stepped and what they
# cost; 3-10x cheaper a call on the machines we measured).  true adds the padding each compiler links
# with (-fpatchable-function-entry=5, or -pg -mfentry -mnop-mcount where C++ templates would not link
# with it) to every compiler the build runs by name (cc, gcc, clang, c++, ...): git perf puts
# wrappers for them first on the build command's PATH.  After switching it, make sure the build
# recompiles everything (a `make clean` in the build command, or a fresh build directory).
probe_pad = false               # collect's builds: your build as it is
align_functions = 0             # with probe_pad: every function on an N-byte boundary (0 = the build's own)

# One table per workload; each becomes one profile per collection.
[[workload]]
name = "default"                # required; used to compare profiles across commits
command = "{command}"           # required; a shell command (may run the binary several times)
# repeat = 3                    # runs per collection (default: 3 where three take under 30 s at native
                                # speed, measured by the overhead budget's pilot; else 1): check uses medians
timeout = 300                   # seconds before the run is killed and the profile marked partial
# exit_codes = [0, 1]           # exit statuses of a run that finished as intended (default: 0 only)

[collect]
engine = "bcc"                  # eBPF via bcc (needs root or CAP_BPF+CAP_PERFMON)
strategy = "userspace"          # userspace = every function in the binary; funcs = the list below
# functions = ["parse", "hash_insert"]
# By default a collection stays within max_overhead: a pilot run measures the native time, then the
# functions worth their calibrated probe cost are traced (changed ones first) and the rest
# stack-sampled.  A fixed mode instead (and max_overhead = 0): "trace" counts every call exactly, but
# on programs with short functions most of what it measures is probe time (show says how much).
# mode = "trace"                # trace | sample | dynamic | timed | bursty | stack
pipeline = "none"               # none | basic | advanced | full
sample_every = 1                # mode=sample: keep every n-th call record (all calls are counted)
record_limit = 1000             # mode=dynamic: stop recording a function after this many calls
period_ms = 100.0               # mode=timed|bursty: period ...
window_ms = 10.0                # ... and the recording window (burst) inside it
stack_hz = 0                    # perf_event stack sampling frequency for untraced code (0 = off)
max_overhead = 5                # percent of native time: trace what it allows, sample the rest (0 = off)
# watch = ["parse"]             # max_overhead: trace these first, like functions the change touched

[check]
min_relative = 0.05             # relative changes below this are never degradations
min_absolute_ns = 10000         # nor are absolute changes below this
min_share = 0.0005              # nor changes adding less than this share of the run's time (0.05%)
confidence = 0.99
direction = "lower"             # lower | higher is better
votes = true                    # other methods' opinions beside each verdict (slower; never change it)
probe_pad = true                # check --collect's builds (its own worktrees, both sides alike): padded entries
witness = "instructions"        # check --collect also counts instructions under callgrind | "off"
align_functions = 0             # check --collect aligns every function to N bytes (0 = off; docs §10e)

[hook]                          # the pre-push hook runs `git perf check --collect` on what a push brings
commits = "range"               # range: the pushed tip against the remote's, naming the commit responsible
                                # | tip: the tip against its parent | all: each commit (up to max_commits)
max_commits = 5                 # commits checked one by one (all; range: to name the commit responsible)
on_cannot_collect = "allow"     # allow | reject the push when this machine cannot collect
on_not_enough_data = "allow"
push_notes = false              # also push refs/notes/perf to the remote
recollect = false               # true: measure again though the commit's paired check is stored
# workloads = ["small"]         # which workloads the hook collects and checks (default: all)
# rounds = 5                    # rounds of the hook's paired check (default: until decided, 3 to 60)
'''


def _quoted(s: str) -> str:
    """`s` inside a TOML basic string."""
    return s.replace("\\", "\\\\").replace('"', '\\"')


def template(binary: str = "build/app", command: str = "./build/app", build: str = "make") -> str:
    return TEMPLATE.format(binary=_quoted(binary), command=_quoted(command), build=_quoted(build))
