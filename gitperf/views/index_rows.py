"""What the dashboard's index holds of a commit (ARCHITECTURE.md §11): rows derived from its profiles
(function summaries per comparison key, native run times, stacks, series of sampled calls) and from
its check (one row per function's change).  Pure functions of stored profiles and checks; the index
(`views.index`) writes them, `views.index_query` reads them.
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np
import pygit2

from gitperf import checks
from gitperf.checks.decision import UNRESOLVED_WORDS
from gitperf.core import stacks
from gitperf.core.config import CheckConfig
from gitperf.core.model import CORRECTABLE_SHARE, NUMBERS, FunctionStats, Mode, Profile, StoredProfile
from gitperf.stats import accuracy, inference
from gitperf.stats.timing import Exact, Runs, Timing, aligned_numbers, by_name, exact, stack_only, timings
from gitperf.store.notes import NotesStore
from gitperf.views.report import headline


class Columns(dict):
    """A table's rows as columns (name -> a list of values, one a row), which the index's writer takes as
    they are (`index_build.Rows.add`); a list of row dicts is the other shape it takes."""


def note_rows(store: NotesStore, commit: str, oid: str) -> dict[str, list[dict] | Columns]:
    """Per table, the rows of the note of commit `commit` (blob `oid`; notes on other objects are
    the index's to leave out)."""
    good, bad = store.read(commit)
    subject = first_line(store.repo.get(commit))
    return {"notes": [{"commit": commit, "oid": oid, "bad_lines": len(bad), "subject": subject}],
            "profiles": [profile_row(p, good) for p in good], "functions": summaries(commit, good),
            "series": series_rows(commit, good), "stacks": stack_rows(commit, good),
            "natives": native_rows(commit, good), "function_natives": function_native_rows(commit, good)}


def first_line(c: pygit2.Commit) -> str:
    """A commit's subject."""
    return c.message.splitlines()[0] if c.message else ""


def check_rows(store: NotesStore, commit: str, cfg: CheckConfig) -> dict[str, list[dict] | Columns]:
    """Per table, the rows of the check of `commit`: its verdict and every function's change
    (no-change included: the commit page's table shows each function's change vs the baseline with
    its interval).  The check is `git perf check`'s own, without the opinions of other methods."""
    r = checks.check(store, commit, replace(cfg, votes=False))
    data = {"result": r.result, "headline": headline(r), "base": r.base, "warnings": list(r.warnings),
            "workloads": [p.to_dict() for p in r.pairs]}
    return {"checks": [{"commit": commit, "base": r.base or "", "result": r.result, "data": json.dumps(data)}],
            "verdicts": [{"commit": commit, "workload": p.workload,
                          "result": checks.result_of([p], [c for c in r.changes if c.workload == p.workload])}
                         for p in r.pairs],
            "changes": change_columns(commit, r.changes)}


def summaries(commit: str, profiles: list[StoredProfile]) -> Columns:
    """One row per (comparison key, function): its time a run as `show` and `check` print it
    (`stats.timing`: inclusive, or own where no stacks tell it; calls None where not counted), and for
    a traced function the range and 95% interval of its runs' values in the same measure (a
    stack-sampled function's pooled figure is no median of its runs, and claims neither).  Profiles
    of different modes are different series: an estimate is never averaged with an exact total.
    As columns (`Columns`: ~200 rows a commit)."""
    out = Columns((c, []) for c in SUMMARY_COLUMNS)
    for key, ps in checks.group(profiles).items():
        runs = Runs(p.profile for p in ps)
        k = _add_summaries(out, runs)
        for c, v in (("commit", commit), ("config_key", key), ("workload", runs[0].header.workload),
                     ("plan", runs[0].plan.describe())):
            out[c] += [v] * k
    return out if out["commit"] else Columns()


def _add_summaries(out: Columns, runs: Runs) -> int:
    """The summaries' own columns of one comparison key's runs, added to `out`; how many rows."""
    by = by_name(runs)
    timed = timings(runs, by=by)
    table = exact(runs, True)  # (the functions every run counted: their values are its rows)
    names, ts = list(timed), list(timed.values())
    pooled = [t.calls is None for t in ts]
    least, most, low, high = _ranges(table, by, timed) if ts else ((), (), (), ())
    out["name"] += names
    out["runs"] += [t.runs for t in ts]
    out["count"] += [t.calls for t in ts]
    out["total_ns"] += [t.exclusive_ns if t.inclusive_ns is None else t.inclusive_ns for t in ts]
    out["total_min"] += [None if p else v for p, v in zip(pooled, least)]
    out["total_max"] += [None if p else v for p, v in zip(pooled, most)]
    out["ci_low"] += [None if p else lo for p, lo in zip(pooled, low)]
    out["ci_high"] += [None if p else hi for p, hi in zip(pooled, high)]
    out["exclusive_ns"] += [t.exclusive_ns for t in ts]
    out["sampled"] += [int(t.sampled) for t in ts]
    out["location"] += [by[n][0].location or next((f.location for f in by[n] if f.location), "") for n in names]
    return len(ts)


def _ranges(table: Exact, by: dict[str, list[FunctionStats]], timed: dict[str, Timing]) -> tuple[Iterable, ...]:
    """Each function's least and greatest value over the runs and its center's interval (`_centered`),
    in the order of `timed`: from the counted functions' table where it has every function (its rows
    are their values), else one function at a time."""
    if list(timed) == table.names:
        low, high = zip(*[c[1:] for c in _intervals(table.times)])
        return table.times.min(axis=1).tolist(), table.times.max(axis=1).tolist(), low, high
    counted = dict(zip(table.names, table.times.tolist()))
    values = [counted[n] if n in counted else _run_values(by[n], t) for n, t in timed.items()]
    _, low, high = zip(*_centered(values))
    return map(min, values), map(max, values), low, high


# the functions table's columns, in the order its rows have always had them
SUMMARY_COLUMNS = ("commit", "config_key", "workload", "name", "plan", "runs", "count", "total_ns", "total_min",
                   "total_max", "ci_low", "ci_high", "exclusive_ns", "sampled", "location")


def _run_values(fs: list[FunctionStats], t: Timing) -> list[float]:
    """A traced function's runs' values in its figure's measure (native where that is; `fs`: its stats
    in the runs that have it); a stack-sampled function's figure alone (pooled: its runs' values are
    not what it is the center of)."""
    if t.calls is None:
        return [t.exclusive_ns if t.inclusive_ns is None else t.inclusive_ns]
    return [float(f.native_ns if t.native else f.total_ns) for f in fs if not stack_only(f)]


def _centered(sessions: list[list[float]]) -> list[tuple[float, float | None, float | None]]:
    """Each session's center and its interval (`inference.center_interval`; None with one run), the
    sessions of as many runs at once (`_intervals`)."""
    out: list = [None] * len(sessions)
    by_runs: dict[int, list[int]] = {}
    for i, s in enumerate(sessions):
        by_runs.setdefault(len(s), []).append(i)
    for at in by_runs.values():
        for i, c in zip(at, _intervals(np.array([sessions[i] for i in at], float))):
            out[i] = c
    return out


def _intervals(sessions: np.ndarray) -> list[tuple[float, float | None, float | None]]:
    """`_centered` of a matrix, a session a row (`inference.center_intervals`: each row alone)."""
    centers, low, high = inference.center_intervals(sessions)
    return [(c, None if math.isnan(lo) else lo, None if math.isnan(hi) else hi)
            for c, lo, hi in zip(centers.tolist(), low.tolist(), high.tolist())]


def profile_row(p: StoredProfile, siblings: list[StoredProfile]) -> dict:
    """One profile; a cheaper one (sampled, hybrid, ...) with a full trace of the same configuration
    on the same commit also gets its accuracy against it (time shares, accuracy.py)."""
    h = p.profile.header
    metrics = {**p.profile.metrics.as_dict(), "accuracy": None}
    full = next((s.profile for s in siblings if s.profile.config_key == h.config_key and s.profile.plan.mode == Mode.TRACE
                 and not s.profile.plan.methods and not s.profile.header.partial), None)
    if full is not None and (p.profile.plan.mode != Mode.TRACE or p.profile.plan.methods):
        metrics["accuracy"] = accuracy.compare(accuracy.shares(full.functions), accuracy.shares(p.profile.functions))
    return {"id": p.id, "commit": p.commit, "line_no": p.line_no, "workload": h.workload, "config_key": h.config_key,
            "engine": h.engine, "mode": p.profile.plan.mode, "pipeline": p.profile.plan.pipeline,
            "partial": h.partial, "started": h.started, "functions": len(p.profile.functions),
            "metrics": json.dumps(metrics), "changed": json.dumps(own_diff(p.profile))}


def own_diff(p: Profile) -> list[str]:
    """The functions the profile's plan names as changed, when that is its own commit's diff: the base
    side of a paired check carries its target's diff (`PlanRecord.base` is then its own commit), and a
    commit page once listed, as changed in this commit, a function its child changed (issue #55)."""
    return [] if p.plan.base == p.header.commit else list(p.plan.changed)


MIN_SERIES = 10  # sampled calls a function's series needs for the function page's models


def series_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per function, the first series of sampled calls long enough to fit models to (the function
    page draws the newest commit's)."""
    out: dict[str, dict] = {}
    for p in profiles:
        for f in p.profile.functions:
            if f.name in out or len(f.series_ns) < MIN_SERIES:
                continue
            calls = f.series
            if len({o for o, _ in calls}) >= 3:
                out[f.name] = {"commit": commit, "name": f.name, "series": json.dumps(calls)}
    return list(out.values())


# A run's calibrated probe and sample time is taken out of its wall time up to this share of it.  Wider
# than a function's CORRECTABLE_SHARE: every run of a workload on one machine is corrected with the same
# calibration, so its error moves the points of a timeline together (the demo's 5 ms `gate` runs of
# paired checks, stack-sampled at ~25 kHz, are 31-45% calibrated probe and sample time; a full trace of
# its `small` workload 95%).
TIMELINE_SHARE = 0.5


def native_run_s(p: Profile) -> float | None:
    """A run's time at native speed: its wall time less its waits for a CPU (`Metrics.WAIT`: another
    process's turn on a busy machine) and the calibrated time of its probes and samples
    (`Metrics.predicted_overhead_s`), comparable across probe plans.  None when that is not a
    correction but most of the run (a full trace of nanosecond functions: more than TIMELINE_SHARE
    of it), or unknown (bursty runs, a crash)."""
    m = p.metrics
    if not p.complete or m.PRT <= 0 or p.plan.mode == Mode.BURSTY:
        return None
    probes = m.predicted_overhead_s
    if probes <= 0 and p.plan.mode != Mode.STACK:
        return None  # probed, but not calibrated: the probes' share is not known
    return m.PRT - m.WAIT - probes if probes <= TIMELINE_SHARE * m.PRT else None


def native_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per workload and machine: the native run time of all its runs on the commit, whatever plan
    measured them (the overview's one timeline per workload), how many runs were left out, and what
    they were measured under (`measured_under`)."""
    by: dict[tuple[str, str], list[Profile]] = {}
    for sp in profiles:
        h = sp.profile.header
        if sp.profile.complete:  # (a crashed run measures another amount of work: not a point at all)
            by.setdefault((h.workload, h.machine), []).append(sp.profile)
    rows = []
    for (wl, machine), ps in sorted(by.items()):
        values = [native_run_s(p) for p in ps]
        ok = [v * 1e9 for v in values if v is not None]
        lo, hi = inference.center_interval(ok) if ok else (None, None)
        rows.append({"commit": commit, "workload": wl, "machine": machine, "runs": len(ok),
                     "left_out": len(values) - len(ok), "native_ns": inference.center(ok) if ok else None,
                     "ci_low": lo, "ci_high": hi, "measured": measured_under(ps)})
    return rows


def measured_under(profiles: list[Profile]) -> str:
    """What a timeline's point was measured under, for people: by what (a paired check's rounds, each
    beside the other side's, or collections) under which plans, how long the runs waited for a CPU
    (another process's turn: a busy machine), and the machine and build (`Header.environment`)."""
    how = ("a paired check's rounds" if any(p.plan.pairing for p in profiles) else "collections")
    plans = sorted({p.plan.describe() for p in profiles})
    waits = [p.metrics.WAIT / p.metrics.PRT for p in profiles if p.metrics.PRT > 0]
    waited = inference.center(waits) if waits else 0.0  # (0 too in profiles from before WAIT was measured)
    env = next((p.header.environment for p in profiles if p.header.environment), "")
    return "; ".join(x for x in (f"{how} under {', '.join(plans[:3])}{' ...' if len(plans) > 3 else ''}",
                                 f"waited for a CPU {waited:.0%} of a run (a busy machine)" if waited >= 0.01 else "",
                                 env) if x)


TRACED, SAMPLED = "inclusive at native speed (traced)", "own time (stack samples)"


def function_native_rows(commit: str, profiles: list[StoredProfile]) -> Columns:
    """Per workload, machine and function: its time in the measure comparable across plans that each
    run gives -- traced: inclusive time less the calibrated probe time (when that is at most
    CORRECTABLE_SHARE of it); stack-sampled: its own time, the samples' share of the run -- one row per
    kind, the center of the runs with its interval (the function page's series)."""
    complete = [sp.profile for sp in profiles if sp.profile.complete]
    runs: dict[tuple[str, str], list[Profile]] = {}
    for p in complete:
        runs.setdefault((p.header.workload, p.header.machine), []).append(p)
    aligned = [_aligned_natives(ps) for ps in runs.values()]
    if None in aligned:  # (one function of one run at a time)
        by = _natives_by_function(complete)
        keys, values = [*by], [*by.values()]
        return _native_columns(commit, keys, list(map(len, values)), _centered(values))
    keys, counts, centered = [], [], []
    for (workload, machine), (names, kinds, values) in zip(runs, aligned):
        keys += [(workload, machine, n, k) for n, k in zip(names, kinds)]
        counts += [values.shape[1]] * len(names)
        centered += _intervals(values)
    return _native_columns(commit, keys, counts, centered)


def _native_columns(commit: str, keys: list[tuple[str, str, str, str]], runs: list[int],
                    centered: list[tuple[float, float | None, float | None]]) -> Columns:
    if not keys:
        return Columns()
    (workloads, machines, names, kinds), (totals, low, high) = zip(*keys), zip(*centered)
    return Columns(commit=[commit] * len(keys), workload=list(workloads), machine=list(machines), name=list(names),
                   kind=list(kinds), runs=runs, total_ns=list(totals), ci_low=list(low), ci_high=list(high))


def _natives_by_function(runs: list[Profile]) -> dict[tuple[str, str, str, str], list[float]]:
    """Per (workload, machine, function, kind), the runs' values in that kind's measure; the rows in the
    order the runs first have them."""
    by: dict[tuple[str, str, str, str], list[float]] = {}
    for p in runs:
        h = p.header
        for f in p.functions:
            if f.sampled:
                by.setdefault((h.workload, h.machine, f.name, SAMPLED), []).append(float(f.total_ns))
            elif f.count and f.correctable:
                by.setdefault((h.workload, h.machine, f.name, TRACED), []).append(float(f.native_ns))
    return by


def _aligned_natives(runs: list[Profile]) -> tuple[list[str], list[str], np.ndarray] | None:
    """`_natives_by_function`'s rows of one workload's runs on one machine from their arrays
    (`Profile.numbers`), where every run lists the same functions in the same order, each of one kind in
    all of them (the runs of one plan: a later run adds no row, so the rows and their order are the
    same): the functions, their kinds and their runs' values (a row each); None where the runs differ."""
    v = aligned_numbers(runs)  # (function x run x number)
    if v is None:
        return None
    total, probe, count, sampled = (v[:, :, NUMBERS.index(k)] for k in ("total_ns", "probe_ns", "count", "sampled"))
    sampled = sampled != 0
    traced = ~sampled & (count != 0) & (probe <= CORRECTABLE_SHARE * total)  # (`FunctionStats.correctable`)
    kind = np.where(sampled, 1, np.where(traced, 2, 0))
    if (kind != kind[:, :1]).any():
        return None
    at = np.flatnonzero(kind[:, 0])
    values = np.where(sampled, total, np.maximum(total - probe, 0.0))[at]  # (`native_ns`)
    names = runs[0].function_names
    return [names[i] for i in at.tolist()], [SAMPLED if k == 1 else TRACED for k in kind[at, 0].tolist()], values


def stack_rows(commit: str, profiles: list[StoredProfile]) -> list[dict]:
    """Per workload, the call stacks of all its profiles on the commit summed (the flame graphs),
    bounded again: rounds of a paired check each keep their own top stacks."""
    return [{"commit": commit, "workload": wl, "stack": s, "samples": n}
            for wl, st in stacks.per_workload(p.profile for p in profiles).items()
            for s, n in stacks.bound(st, limit=2 * stacks.MAX_STACKS).items()]



# A change's fields the pages query: its texts as they are, its numbers as `to_dict` writes them (`json_number`)
CHANGE_TEXTS = ("workload", "function", "type", "method", "noise", "location", "measure", "decided")
CHANGE_NUMBERS = ("relative", "ci_low", "ci_high", "confidence", "absolute_ns", "base_ns", "target_ns",
                  "exclusive_delta_ns", "share")

_change_texts, _change_numbers = operator.attrgetter(*CHANGE_TEXTS), operator.attrgetter(*CHANGE_NUMBERS)


def change_columns(commit: str, changes: Sequence[checks.Change]) -> Columns:
    """The changes as the changes table's columns, in the order given (`rank`): the columns the pages
    query, numbers as `to_dict` writes them (`json_number`), without building all of it (a third of
    storing 200,000 changes was `to_dict`) and a column at a time (~200 rows a commit).  A change's
    method is stored as its stem and its words (`split_method`), which the table's view joins again."""
    if not changes:
        return Columns()
    out = Columns(commit=[commit] * len(changes))
    out.update(zip(CHANGE_TEXTS, map(list, zip(*map(_change_texts, changes)))))
    numbers = zip(*map(_change_numbers, changes))
    # (`json_number` inline: a finite number less itself is 0; None, NaN and infinities are null)
    out.update((k, [v if v is not None and v - v == 0 else None for v in column])
               for k, column in zip(CHANGE_NUMBERS, numbers))
    instr = [c.instructions or (None, None) for c in changes]
    out.update(changed=[int(c.changed) for c in changes], since=[c.since or "" for c in changes],
               rank=list(range(len(changes))), instr_base=[i[0] for i in instr], instr_target=[i[1] for i in instr])
    out["method"], out["words"] = map(list, zip(*map(split_method, out["method"])))
    return out


def split_method(method: str) -> tuple[str, str | None]:
    """A change's method as the index stores it: the stem a check's changes share, and the words of an
    unresolved outcome (`checks.decision.unresolved_words`, after "; "), which are its own figures
    ("unresolved: a change between -22% and +31% ..."), or None.  stem + "; " + words is the method."""
    stem, sep, rest = method.partition("; " + UNRESOLVED_WORDS)
    return (stem, UNRESOLVED_WORDS + rest) if sep else (method, None)
