"""A commit's profiles in the files other profilers' viewers open: pprof (`show --format pprof`: pprof,
Perfetto, Pyroscope, Speedscope) and Speedscope's own JSON (`--format speedscope`, its
file-format-schema.json).

What goes in, per workload: its stack samples summed over the runs (names readable, as `show
--folded` prints them); a workload without stack samples (a full trace) as a flat profile of its
traced functions' own time, one frame each -- a trace counts calls and times, it records no call
paths, so nothing deeper would be true.  Pure functions of stored profiles.
"""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass

from gitperf import __version__
from gitperf.core import stacks
from gitperf.core.errors import InputError
from gitperf.core.model import StoredProfile
from gitperf.core.names import readable
from gitperf.views.pprof import messages

SAMPLES, NANOSECONDS = "samples", "nanoseconds"


@dataclass(frozen=True)
class Workload:
    """One workload's weights as the exporters write them."""

    name: str
    stacks: dict[tuple[str, ...], int]  # frames from the root down (symbols) -> weight
    unit: str  # SAMPLES (stack samples) or NANOSECONDS (traced own time)
    runs: int
    what: str  # what the numbers are, for people
    locations: dict[str, str]  # symbol -> "file:line" where DWARF had it
    binary: str
    build_id: str


def workloads(profiles: list[StoredProfile]) -> list[Workload]:
    """Each workload of the profiles, stack-sampled where its runs have stacks, else flat."""
    by: dict[str, list[StoredProfile]] = {}
    for sp in profiles:
        if sp.profile.complete:
            by.setdefault(sp.profile.header.workload, []).append(sp)
    out = []
    for name, sps in sorted(by.items()):
        ps = [sp.profile for sp in sps]
        locations = {f.name: f.location for p in ps for f in p.functions if f.location}
        h = ps[0].header
        sampled = [p for p in ps if p.stacks]
        if sampled:
            weights = stacks.merge(p.stacks for p in sampled)
            out.append(Workload(name, {tuple(s.split(stacks.SEP)): n for s, n in weights.items()}, SAMPLES, len(sampled),
                                f"stack samples of {len(sampled)} run(s), summed", locations, h.binary, h.build_id))
        else:
            own: Counter[str] = Counter()
            for p in ps:
                for f in p.functions:
                    own[f.name] += max(f.exclusive_ns, 0)
            out.append(Workload(name, {(n,): t for n, t in own.items() if t}, NANOSECONDS, len(ps),
                                f"traced functions' own time in {len(ps)} run(s), summed (a trace records no call "
                                "paths: one frame each)", locations, h.binary, h.build_id))
    return out


def _frames(w: Workload, several: bool) -> dict[tuple[str, ...], int]:
    """Stacks with the workload's name as a root frame when several workloads share one file (as
    `show --folded` does)."""
    return {((w.name,) if several else ()) + s: n for s, n in w.stacks.items()}


def _file_line(location: str) -> tuple[str, int]:
    file, _, line = location.rpartition(":")
    return (file, int(line)) if file and line.isdigit() else (location, 0)


def pprof(commit: str, profiles: list[StoredProfile]) -> bytes:
    """The profiles as a gzip-compressed pprof Profile: one sample per distinct stack (leaf first),
    one function and location per frame (readable name; the symbol as its system name), the binary as
    its mapping, each sample labelled with its workload."""
    ws = workloads(profiles)
    if not ws:
        raise InputError(f"no complete profile of {commit[:12]} to export")
    units = {w.unit for w in ws}
    if len(units) > 1:
        raise InputError(f"{', '.join(w.name for w in ws)}: some with stack samples, some traced only; a pprof file has "
                         "one kind of value: give --workload")
    m = messages()
    p = m["Profile"]()
    strings: dict[str, int] = {}

    def s(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings)
            p.string_table.append(text)
        return strings[text]
    s("")  # index 0 is the empty string (profile.proto)
    unit = units.pop()
    p.sample_type.add(type=s(SAMPLES if unit == SAMPLES else "own_time"), unit=s("count" if unit == SAMPLES else unit))
    p.mapping.add(id=1, filename=s(ws[0].binary), build_id=s(ws[0].build_id), has_functions=True,
                  has_line_numbers=any(w.locations for w in ws))
    ids: dict[str, int] = {}
    for w in ws:
        for stack, weight in sorted(_frames(w, len(ws) > 1).items(), key=lambda kv: (-kv[1], kv[0])):
            for frame in stack:
                if frame not in ids:
                    ids[frame] = len(ids) + 1
                    file, line = _file_line(w.locations.get(frame, ""))
                    p.function.add(id=ids[frame], name=s(readable(frame)), system_name=s(frame), filename=s(file),
                                   start_line=line)
                    p.location.add(id=ids[frame], mapping_id=1).line.add(function_id=ids[frame], line=line)
            sample = p.sample.add(location_id=[ids[f] for f in reversed(stack)], value=[weight])
            sample.label.add(key=s("workload"), str=s(w.name))
    p.comment.extend(s(f"git perf {__version__}: {commit}, {w.name}: {w.what}") for w in ws)
    started = min((sp.profile.header.started for sp in profiles if sp.profile.complete), default=0.0)
    p.time_nanos = int(started * 1e9) if 0 < started < 2 ** 62 / 1e9 else 0
    return gzip.compress(p.SerializeToString(), mtime=0)


def speedscope(commit: str, profiles: list[StoredProfile]) -> dict:
    """The profiles as Speedscope's file format: one sampled profile per workload, stacks root first
    in stack order, weighted by samples (unit "none") or nanoseconds."""
    ws = workloads(profiles)
    if not ws:
        raise InputError(f"no complete profile of {commit[:12]} to export")
    frames: list[dict] = []
    index: dict[str, int] = {}
    out = []
    for w in ws:
        samples, weights = [], []
        # (in stack order: speedscope's time-order view joins neighbours that share frames, a flame graph)
        for stack, weight in sorted(w.stacks.items()):
            for frame in stack:
                if frame not in index:
                    index[frame] = len(frames)
                    file, line = _file_line(w.locations.get(frame, ""))
                    frames.append({"name": readable(frame), **({"file": file, "line": line} if file else {})})
            samples.append([index[f] for f in stack])
            weights.append(weight)
        out.append({"type": "sampled", "name": f"{w.name}: {w.what}", "unit": "none" if w.unit == SAMPLES else w.unit,
                    "startValue": 0, "endValue": sum(weights), "samples": samples, "weights": weights})
    return {"$schema": "https://www.speedscope.app/file-format-schema.json", "name": f"git perf {commit[:12]}",
            "exporter": f"git perf {__version__}", "activeProfileIndex": 0, "shared": {"frames": frames},
            "profiles": out}
