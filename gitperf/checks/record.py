"""A paired check kept as a record (ARCHITECTURE.md §10c): `check --collect` writes its result into the
target commit's note, in the same all-or-nothing batch as the profiles it measured, as one line

    gitperf-check {"v": 1, "pairings": [...], "time": ..., "result": <CheckResult.to_dict(all_functions)>}

`check` (without --collect), `report`, the pre-push hook and the dashboard show that stored result for
the commit; a later check that uses this commit as its base writes a record on *its* target and never
changes this one.  Records come from pulled notes too, so reading one validates it like a profile and
ignores one that does not read.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass

from gitperf.checks.change import Change, CheckResult, Verdict, WorkloadPair
from gitperf.store.notes import CHECK_PREFIX as PREFIX
from gitperf.store.notes import NotesStore

VERSION = 1


@dataclass(frozen=True)
class CheckRecord:
    pairings: tuple[str, ...]  # per workload, the id both sides' profiles carry (`PlanRecord.pairing`)
    time: float  # when the check ended (seconds since the epoch)
    result: CheckResult

    @property
    def base(self) -> str | None:
        return self.result.base


def line(result: CheckResult, pairings: list[str], at: float | None = None) -> str:
    """The note line of a finished paired check."""
    body = {"v": VERSION, "pairings": sorted(pairings), "time": round(at if at is not None else time.time(), 3),
            "result": result.to_dict(all_functions=True)}
    return PREFIX + json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)


class _Invalid(ValueError):
    pass


def _typed(v, typ, where: str):
    """`v` as the annotated type of a field (numbers finite; None only where the field allows it)."""
    if v is None:
        if "None" in typ:
            return None
        raise _Invalid(f"{where} is null")
    if typ.startswith("float"):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _Invalid(f"{where} is not a number")
        return float(v)
    if typ.startswith("bool"):
        if not isinstance(v, bool):
            raise _Invalid(f"{where} is not a boolean")
        return v
    if typ.startswith("int"):
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Invalid(f"{where} is not an integer")
        return v
    if typ.startswith("str"):
        if not isinstance(v, str):
            raise _Invalid(f"{where} is not text")
        v.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError (a ValueError)
        return v
    if typ.startswith("tuple[float, float]"):
        if not isinstance(v, list) or len(v) != 2:
            raise _Invalid(f"{where} is not a pair")
        return tuple(_typed(x, "float", where) for x in v)
    if typ.startswith(("dict", "tuple[str")):
        if not isinstance(v, (dict, list)):
            raise _Invalid(f"{where} has the wrong shape")
        items = v.values() if isinstance(v, dict) else v
        strings = [_typed(x, "str", where) for x in items]
        return dict(zip(v, strings)) if isinstance(v, dict) else tuple(strings)
    raise AssertionError(f"no reader for {typ}")  # a new field type: add it here


def _change(d) -> Change:
    if not isinstance(d, dict):
        raise _Invalid("a change is not an object")
    kw = {}
    for f in dataclasses.fields(Change):
        if f.name == "statistic":
            continue
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise _Invalid(f"change field {f.name} is missing")
            continue
        # JSON null stands for an undefined number (Change.to_dict): NaN again where the field is a float
        undefined = d[f.name] is None and str(f.type) == "float"
        kw[f.name] = math.nan if undefined else _typed(d[f.name], str(f.type), f"change.{f.name}")
    if kw["type"] not in set(Verdict):
        raise _Invalid(f"unknown verdict {kw['type']!r}")
    return Change(**kw)


def _pair(d) -> WorkloadPair:
    if not isinstance(d, dict):
        raise _Invalid("a workload is not an object")
    return WorkloadPair(workload=_typed(d.get("workload"), "str", "workload"),
                        config_key=_typed(d.get("config_key"), "str", "config_key"),
                        target_profiles=_typed(d.get("target_profiles"), "int", "target_profiles"),
                        base_commit=_typed(d.get("base"), "str | None", "base"),
                        base_profiles=_typed(d.get("base_profiles"), "int", "base_profiles"),
                        history_commits=_typed(d.get("history"), "int", "history"),
                        noise_source=_typed(d.get("noise", ""), "str", "noise"),
                        notes=_typed(d.get("notes", []), "tuple[str, ...]", "notes"))


def parse(text: str, commit: str) -> CheckRecord | None:
    """A record line of `commit`'s note, or None when it does not read as one (a pulled note may hold
    anything, and a record of another commit is not this commit's)."""
    try:
        body = json.loads(text[len(PREFIX):])
        if not isinstance(body, dict) or body.get("v") != VERSION or not isinstance(body.get("result"), dict):
            return None
        r = body["result"]
        changes = r.get("changes") if isinstance(r.get("changes"), list) else None
        pairs = r.get("workloads") if isinstance(r.get("workloads"), list) else None
        if changes is None or pairs is None or r.get("commit") != commit or r.get("result") not in set(Verdict):
            return None
        result = CheckResult(commit=commit, base=_typed(r.get("base"), "str | None", "base"), result=r["result"],
                             changes=tuple(_change(c) for c in changes), pairs=tuple(_pair(p) for p in pairs),
                             warnings=_typed(r.get("warnings", []), "tuple[str, ...]", "warnings"))
        return CheckRecord(_typed(body.get("pairings"), "tuple[str, ...]", "pairings"),
                           _typed(body.get("time"), "float", "time"), result)
    except (ValueError, RecursionError, TypeError, KeyError):  # _Invalid and UnicodeError are ValueErrors
        return None


# A record's time is what its writer claims (records come from pulled notes too): one before this or
# after a day from now is no time at all: shown as unknown, and never newer than a dated record.
EARLIEST = 946_684_800.0  # 2000-01-01 UTC
LATEST_AHEAD_S = 86_400.0


def plausible(t: float, now: float | None = None) -> bool:
    return EARLIEST <= t <= (time.time() if now is None else now) + LATEST_AHEAD_S


def when(t: float) -> str:
    """A record's time for people: local date and minute, or "unknown time" (`plausible`)."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if plausible(t) else "unknown time"


def records(store: NotesStore, commit: str) -> list[CheckRecord]:
    """The commit's readable check records, oldest first (undated ones, `plausible`, first of all:
    a pulled record claiming the year 2100 does not outrank every later check)."""
    found = [r for ln in store.record_lines(commit, PREFIX) if (r := parse(ln, commit)) is not None]
    now = time.time()
    return sorted(found, key=lambda r: r.time if plausible(r.time, now) else float("-inf"))


def newest(store: NotesStore, commit: str, base: str | None = None,
           workloads: tuple[str, ...] = ()) -> CheckRecord | None:
    """The newest record of `commit` against `base` (any base when None) that covers `workloads` (all
    when empty): what `check`, `report`, the hook and the dashboard show."""
    for r in reversed(records(store, commit)):
        covered = {p.workload for p in r.result.pairs}
        if (base is None or r.base == base) and set(workloads) <= covered:
            return r
    return None
