"""What a check finds (ARCHITECTURE.md §10): one `Change` per workload and function, the pairing of
each workload with its baseline, and the verdict.  Plain data with `to_dict()`, the one JSON shape
used by `check --json`, `report`, the dashboard's index and its API, and `from_dict()` beside it,
which reads that shape back (a check kept in a note, `checks.record`) or says why it cannot."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, fields
from enum import StrEnum
from functools import cmp_to_key

import msgspec

from gitperf.core import typed
from gitperf.core.errors import EXIT_DEGRADATION, EXIT_NOT_ENOUGH_DATA, EXIT_OK
from gitperf.core.model import ROOT
from gitperf.core.names import readable


class Verdict(StrEnum):
    """What a check says of a function (`Change.type`) and of a commit (`CheckResult.result`).  A
    `str`: JSON, sqlite and templates see the plain value."""

    DEGRADATION = "degradation"
    OPTIMIZATION = "optimization"
    NO_CHANGE = "no-change"
    UNKNOWN = "unknown"  # measured on both sides, but not comparably: the verdict is withheld
    NEW = "new"
    REMOVED = "removed"
    INLINED = "inlined"  # gone as a function, its code inlined into others (checks.gone)
    NOT_ENOUGH_DATA = "not-enough-data"  # a commit with no comparable baseline
    ACCEPTED = "accepted"  # a degradation recorded as intended with `git perf accept`
    # a function the diff changed whose time the check could not resolve, but whose instructions grew
    # beyond their A/A spread (checks.witness): named, never failing the check
    INSTRUCTIONS = "instructions"
    # time moved one way and the exact instruction counts beyond their A/A spread the other
    # (checks.witness): no verdict in time's direction, and the report says why
    CONFLICT = "conflict"
    # its interval reaches across the threshold: a change beyond it could be neither confirmed nor
    # excluded (checks.decision.verdict_of); more rounds resolve it.  Of a commit: the run or a function
    # it changed was left so, and nothing was a verdict.  Never fails a check.
    UNRESOLVED = "unresolved"


(DEGRADATION, OPTIMIZATION, NO_CHANGE, UNKNOWN, NEW, REMOVED, INLINED, NOT_ENOUGH_DATA, ACCEPTED, INSTRUCTIONS,
 CONFLICT, UNRESOLVED) = Verdict


def json_number(v):
    """JSON has no NaN or infinity: an undefined number is null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


class ResultFormatError(ValueError):
    """JSON that does not read as a check's result (`from_dict`): what was wrong, where."""


def read_field(v, typ, where: str):
    """`v` as the type of a result's field (`core.typed`: numbers, text, lists into tuples), or
    ResultFormatError naming `where`."""
    try:
        return typed.read(v, typ)
    except typed.Invalid as e:
        raise ResultFormatError(f"{where}{'.' + e.where if e.where else ''}: {e.reason}") from None


# the verdicts' order in a report (`Change.severity`)
_RANK = {DEGRADATION: 0, ACCEPTED: 0, OPTIMIZATION: 1, INSTRUCTIONS: 2, CONFLICT: 2, NEW: 3, REMOVED: 4, INLINED: 4,
         UNRESOLVED: 5, UNKNOWN: 5, NO_CHANGE: 6}


class Change(msgspec.Struct):  # (a Struct: every function of a check ends in one; `checks.sides.Side` says why)
    workload: str
    function: str
    type: str
    # One estimate (ARCHITECTURE.md §10, "One estimate per number"): target_ns = base_ns x (1 + relative),
    # absolute_ns = target_ns - base_ns, ci_low <= relative <= ci_high, all in what `measure` says
    relative: float  # estimated change of `measure`
    absolute_ns: float  # the same in ns
    exclusive_delta_ns: float  # same for exclusive time: where the time was added
    confidence: float  # 1 - Holm-adjusted p-value of the change's direction
    ci_low: float  # interval of `relative` at the configured confidence
    ci_high: float
    method: str
    location: str = ""
    base_ns: float = 0.0
    target_ns: float = 0.0
    base_calls: float = 0.0
    target_calls: float = 0.0
    noise: str = ""  # where the run-to-run spread came from, and its size
    history_z: float | None = None  # robust z-score against the history (with the other methods' votes)
    since: str | None = None  # commit where a level shift in the history began (change-point)
    votes: dict[str, str] = {}  # other methods' verdicts (msgspec copies an empty default for each)
    changed: bool = False  # the commit's diff touches this function
    statistic: float = 0.0  # what was tested: log ratio (root) or log ratio minus the common shift
    per_call_ci: tuple[float, float] | None = None  # bootstrap 95% interval of the mean call's change
    instructions: tuple[float, float] | None = None  # inclusive instructions a run (base, target): callgrind
    # what base_ns and target_ns are: "inclusive time per run", "own time per run (stack samples)", ...
    measure: str = ""
    # its inclusive instructions moved beyond their A/A spread the way its time did (checks.witness):
    # named as a cause, read before the time verdicts the instructions do not back that add as much (`report_order`)
    cause: bool = False
    # what decided a time verdict where the instruction witness ran, in a few words (checks.witness:
    # "time and instructions (a cause)", or time and why the instructions did not overrule it); ""
    # where there were no counts: time alone
    decided: str = ""
    # a removed function's caller in the base, and the removed functions told on this one row with it
    # (this one first): what a change stopped calling (checks.gone)
    caller: str = ""
    members: tuple[str, ...] = ()
    # absolute_ns as a share of the run's own change in the same direction (checks.verdict.shares;
    # None: the run as a whole did not move by a verdict of its own)
    share: float | None = None

    @property
    def asked(self) -> bool:
        """Whether the check asks about this function: the run as a whole, or one the commit changed."""
        return self.changed or self.function == ROOT

    @property
    def severity(self) -> tuple:
        """The kind's place in a report (degradations first), then, within a kind that has no time
        verdict, the most time first.  Time verdicts are ordered by what they add to a run
        (`report_order`)."""
        return _RANK[self.type], -abs(self.absolute_ns) if math.isfinite(self.absolute_ns) else 0.0

    def gain_halfwidth(self) -> float:
        """Half the interval of what it adds to a run, in ns (0 where undefined)."""
        w = (self.ci_high - self.ci_low) / 2 * self.base_ns
        return w if math.isfinite(w) else 0.0

    def to_dict(self) -> dict:
        # (fields one level deep, not `asdict`: its deep copy was a third of building the dashboard's index)
        d = {f: json_number(getattr(self, f)) for f in self.__struct_fields__ if f != "statistic"}
        d["votes"] = dict(self.votes)
        d["members"] = list(self.members)
        d["name"] = readable(self.function)  # `function` is the symbol: the identity across commits
        d["per_call_ci"] = list(self.per_call_ci) if self.per_call_ci else None
        d["instructions"] = list(self.instructions) if self.instructions else None
        return d

    @classmethod
    def from_dict(cls, d) -> Change:
        """`to_dict`'s shape read back: an undefined number (null) is NaN again; `name` and the
        statistic are not kept."""
        if not isinstance(d, dict):
            raise ResultFormatError("a change is not an object")
        bad = next((k for k, v in d.items() if isinstance(v, float) and not math.isfinite(v)), None)
        if bad:
            raise ResultFormatError(f"change.{bad}: expected a finite number, got {d[bad]!r}")
        change = read_field({k: math.nan if v is None and k in _NAN_IF_NULL else v for k, v in d.items()
                             if k != "statistic"}, cls, "change")
        if change.type not in set(Verdict):
            raise ResultFormatError(f"unknown verdict {change.type!r}")
        return change


TIMED = (DEGRADATION, ACCEPTED, OPTIMIZATION)


def _before(a: Change, b: Change) -> int:
    """Whether `a` is read before `b` (<0), after (>0) or as its equal (0): its kind's place; then,
    between time verdicts, the one that adds more to the run (what each adds as a share of the run's
    change), the run as a whole after the functions; gains within each other's intervals are equal,
    and among equals the function the commit changed first, then one whose instructions back its time
    (`cause`), then the one whose own time grew most (the function that got slower before the callers
    whose inclusive time merely follows it).  A commit's first line named `std::string::_M_construct`
    (+0.95 ms a run, all of it its own) before `parse_network` (+5.69 ms a run) (issue #55)."""
    if _RANK[a.type] != _RANK[b.type] or a.type not in TIMED:
        return (a.severity > b.severity) - (a.severity < b.severity)
    if (a.function == ROOT) != (b.function == ROOT):
        return 1 if a.function == ROOT else -1
    ga, gb = (abs(c.absolute_ns) if math.isfinite(c.absolute_ns) else 0.0 for c in (a, b))
    if abs(ga - gb) > max(a.gain_halfwidth(), b.gain_halfwidth()):
        return -1 if ga > gb else 1
    own = lambda c: abs(c.exclusive_delta_ns) if math.isfinite(c.exclusive_delta_ns) else 0.0  # noqa: E731
    ka, kb = (a.changed, a.cause, own(a), ga), (b.changed, b.cause, own(b), gb)
    return (ka < kb) - (ka > kb)


_SEVERITY = operator.attrgetter("severity")  # (a sort key of every change the index derives)


def report_order(changes) -> list[Change]:
    """Changes in the order a report reads them (`_before`).  Time verdicts rank before every other
    kind (`_RANK`), and only they need the pairwise comparison: the rest (most of the index's changes,
    every function's) sort by key."""
    timed = sorted((c for c in changes if c.type in TIMED), key=cmp_to_key(_before))
    return timed + sorted((c for c in changes if c.type not in TIMED), key=_SEVERITY)


def listed(kind: str, asked: bool) -> bool:
    """Whether a report lists a change (the CLI, markdown and the dashboard alike): every outcome but no
    change, and unresolved only of what the check asks about (`Change.asked`: the run as a whole and the
    functions the commit changed; `--json --all` has every function's)."""
    return kind != NO_CHANGE and (kind != UNRESOLVED or asked)


# Change's numbers that `to_dict` writes as null when undefined (NaN): NaN again on read
_NAN_IF_NULL = frozenset(f.name for f in msgspec.structs.fields(Change) if f.type is float)


@dataclass(frozen=True)
class WorkloadPair:
    workload: str
    config_key: str  # the comparison key (core.model.comparison_key) the two sides share
    target_profiles: int
    base_commit: str | None
    base_profiles: int
    history_commits: int
    noise_source: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {_PAIR_KEYS.get(f.name, f.name): getattr(self, f.name) for f in fields(self)} | {"notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d) -> WorkloadPair:
        """`to_dict`'s shape (and names) read back; a record without `noise` or `notes` has none."""
        if not isinstance(d, dict):
            raise ResultFormatError("a workload is not an object")
        names = {v: k for k, v in _PAIR_KEYS.items()}
        return read_field({"noise_source": ""} | {names.get(k, k): v for k, v in d.items()}, cls, "workload")


# WorkloadPair's fields that its JSON names otherwise
_PAIR_KEYS = {"base_commit": "base", "history_commits": "history", "noise_source": "noise"}


@dataclass(frozen=True)
class CheckResult:
    commit: str
    base: str | None
    result: str
    changes: tuple[Change, ...]
    pairs: tuple[WorkloadPair, ...]
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return {DEGRADATION: EXIT_DEGRADATION, NOT_ENOUGH_DATA: EXIT_NOT_ENOUGH_DATA}.get(self.result, EXIT_OK)

    def notable(self) -> list[Change]:
        return [c for c in self.changes if listed(c.type, c.asked)]

    def to_dict(self, all_functions: bool = False) -> dict:
        """The stable JSON shape of `git perf check --json`: notable changes, or every function's."""
        return {"commit": self.commit, "base": self.base, "result": self.result, "exit_code": self.exit_code,
                "changes": [c.to_dict() for c in (self.changes if all_functions else self.notable())],
                "workloads": [p.to_dict() for p in self.pairs], "warnings": list(self.warnings)}

    @classmethod
    def from_dict(cls, d) -> CheckResult:
        """`to_dict(all_functions=True)`'s shape read back (`exit_code` follows from the result)."""
        if not isinstance(d, dict) or not isinstance(d.get("changes"), list) or not isinstance(d.get("workloads"), list):
            raise ResultFormatError("a check's result needs a list of changes and of workloads")
        if d.get("result") not in set(Verdict):
            raise ResultFormatError(f"unknown result {d.get('result')!r}")
        return cls(commit=read_field(d.get("commit"), str, "commit"), base=read_field(d.get("base"), str | None, "base"),
                   result=d["result"], changes=tuple(Change.from_dict(c) for c in d["changes"]),
                   pairs=tuple(WorkloadPair.from_dict(p) for p in d["workloads"]),
                   warnings=read_field(d.get("warnings", []), tuple[str, ...], "warnings"))
