"""A paired check kept as a record (ARCHITECTURE.md §10c): `check --collect` writes its result into the
target commit's note, in the same all-or-nothing batch as the profiles it measured, as one line

    gitperf-check {"v": 1, "pairings": [...], "time": ..., "result": <CheckResult.to_dict(all_functions)>,
                   "series": {workload: {"pairing": ..., "focus": <plan.focus.Focus>}}}

`check` (without --collect), `report`, the pre-push hook and the dashboard show that stored result for
the commit; a later check that uses this commit as its base writes a record on *its* target and never
changes this one.  A re-check of the same pair adds its rounds to a series (`series`: the pairing id
its profiles carry and the plan they ran under) and writes a record of every round so far: it
supersedes the records of the same series (`read` keeps the newest), so that one check's evidence
grows rather than a second check replacing the first (ARCHITECTURE.md §10c).  Records come from pulled
notes too, so reading one validates it like a profile and ignores one that does not read.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import msgspec

from gitperf.checks.change import CheckResult, read_field
from gitperf.plan.focus import Focus
from gitperf.store.notes import CHECK_PREFIX as PREFIX
from gitperf.store.notes import NotesStore

VERSION = 1


@dataclass(frozen=True)
class Series:
    """One workload's rounds of a pair, which re-checks add to: the id both sides' profiles carry
    (`PlanRecord.pairing`) and the focus their shared plan was made from (`plan.focus.side_plan`)."""

    pairing: str
    focus: Focus


@dataclass(frozen=True)
class CheckRecord:
    pairings: tuple[str, ...]  # per workload, the id both sides' profiles carry (`PlanRecord.pairing`)
    time: float  # when the check ended (seconds since the epoch)
    result: CheckResult
    series: dict[str, Series] = field(default_factory=dict)  # workload -> its rounds' series (none: older records)
    machine: str = ""  # the fingerprint of the machine that checked (`collect.context.machine_fingerprint`; older: "")

    @property
    def base(self) -> str | None:
        return self.result.base


def line(result: CheckResult, pairings: list[str], at: float | None = None,
         series: dict[str, Series] | None = None, machine: str = "") -> str:
    """The note line of a finished paired check."""
    body = {"v": VERSION, "pairings": sorted(pairings), "time": round(at if at is not None else time.time(), 3),
            "result": result.to_dict(all_functions=True),
            "series": {w: asdict(s) for w, s in sorted((series or {}).items())},
            **({"machine": machine} if machine else {})}
    return PREFIX + json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


def parse(text: str, commit: str) -> CheckRecord | None:
    """A record line of `commit`'s note, or None when it does not read as one (a pulled note may hold
    anything, and a record of another commit is not this commit's)."""
    got = _read(text, commit)
    return got if isinstance(got, CheckRecord) else None


def _read(text: str, commit: str) -> CheckRecord | str:
    """The record, or why the line is not one of `commit`'s."""
    try:
        body = msgspec.json.decode(text[len(PREFIX):])  # (refuses a lone surrogate, which no terminal takes)
        if not isinstance(body, dict) or body.get("v") != VERSION or not isinstance(body.get("result"), dict):
            return f"not a version {VERSION} record"
        result = CheckResult.from_dict(body["result"])
        if result.commit != commit:
            return f"it is a record of {str(result.commit)[:12]}"
        return CheckRecord(read_field(body.get("pairings"), tuple[str, ...], "pairings"),
                           read_field(body.get("time"), float, "time"), result,
                           read_field(body.get("series", {}), dict[str, Series], "series"),
                           read_field(body.get("machine", ""), str, "machine"))
    except (ValueError, RecursionError, TypeError, KeyError, msgspec.MsgspecError) as e:  # ResultFormatError is a ValueError
        return str(e)[:200] or type(e).__name__


# A record's time is what its writer claims (records come from pulled notes too): shown to people
# when plausible, never used to order records (`records`).  One before this or after a day from now
# is no time at all: shown as unknown.
EARLIEST = 946_684_800.0  # 2000-01-01 UTC
LATEST_AHEAD_S = 86_400.0


def plausible(t: float, now: float | None = None) -> bool:
    return EARLIEST <= t <= (time.time() if now is None else now) + LATEST_AHEAD_S


def when(t: float) -> str:
    """A record's time for people: local date and minute, or "unknown time" (`plausible`)."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if plausible(t) else "unknown time"


def read(store: NotesStore, commit: str) -> tuple[list[CheckRecord], list[str]]:
    """The commit's readable check records in the order they arrived in this clone's notes
    (`NotesStore.arrivals`), oldest first, and a warning for each record line that does not read, in
    one pass over the note (the index reads every commit's).  Never ordered by the time a record
    claims: a pulled record dated a few hours ahead outranked the check run here after it (issue #59).
    Only records that arrived together (in one pull) are ordered by the times they claim, none of
    them being this clone's own."""
    found, bad = [], []
    for no, ln in enumerate(store.note_text(commit).splitlines(), start=1):
        if not ln.startswith(PREFIX):
            continue
        if isinstance(got := _read(ln, commit), str):
            bad.append(f"note of {commit[:12]} line {no}: a check record that does not read ({got}): ignored, left as is")
        else:
            found.append((ln, got))
    if len(found) < 2:
        return [r for _, r in found], bad
    age, now = store.arrivals(commit, [ln for ln, _ in found]), time.time()
    ordered = [r for ln, r in sorted(found, key=lambda lr: (-age[lr[0]], lr[1].time if plausible(lr[1].time, now)
                                                             else float("-inf")))]
    return superseded_left_out(ordered), bad


def superseded_left_out(ordered: list[CheckRecord]) -> list[CheckRecord]:
    """Records oldest first, without those a later record of the same series holds (a re-check that
    added rounds records every round so far, under the same pairing ids): one check whose evidence
    grew, not several checks of one pair."""
    out: list[CheckRecord] = []
    later: list[set[str]] = []
    for r in reversed(ordered):
        if not any(set(r.pairings) <= ids for ids in later) or not r.pairings:
            out.append(r)
            later.append(set(r.pairings))
    return out[::-1]


def records(store: NotesStore, commit: str) -> list[CheckRecord]:
    """The commit's readable check records, oldest first (`read`)."""
    return read(store, commit)[0]


def newest(store: NotesStore, commit: str, base: str | None = None,
           workloads: tuple[str, ...] = ()) -> CheckRecord | None:
    """The newest record of `commit` against `base` (any base when None) that covers `workloads` (all
    when empty): what `check`, `report`, the hook and the dashboard show."""
    return newest_of(records(store, commit), base, workloads)


def newest_of(found: list[CheckRecord], base: str | None, workloads: tuple[str, ...]) -> CheckRecord | None:
    """`newest` among records already read, oldest first."""
    for r in reversed(found):
        covered = {p.workload for p in r.result.pairs}
        if (base is None or r.base == base) and set(workloads) <= covered:
            return r
    return None


def checked(store: NotesStore, commit: str) -> list[dict]:
    """Every stored check of `commit` (`records`, oldest first): its result, its base and the machines
    its profiles were measured on (`Header.machine`), what `git perf log` shows: a commit checked by two
    runners keeps both records, and says so."""
    runs = store.read(commit)[0]
    return [{"result": r.result.result, "base": r.base or "",
             "machines": [r.machine] if r.machine else
             sorted({p.profile.header.machine for p in runs if p.profile.plan.pairing in r.pairings})}
            for r in records(store, commit)]
