"""Profile <-> note line.

A line is self-contained so that notes merge by union (`cat_sort_uniq`):

    gpz1:<base64 of zlib-compressed compact JSON>

Version 1 JSON keys are short but documented below.  Plain JSON lines (`{"v": 1, ...}`) are
accepted on read too, which makes hand-written fixtures and debugging easy.  Reading checks every
field against the model's annotations (`core.typed`) and raises `NoteFormatError` with what was wrong;
it never guesses.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import typing
import zlib

import msgspec

from gitperf.core import typed
from gitperf.core.errors import NoteFormatError
from gitperf.core.model import FunctionStats, Header, InstructionCounts, Metrics, PlanRecord, Profile

PREFIX = "gpz1:"
VERSION = 1
# Largest profile JSON read or written.  A full trace of Lua 5.4 (737 functions, bounded series) is
# about 1 MB; a line that inflates beyond this is refused unread (a 389 KB line inflating to 300 MB
# once made every `show` of its repository take 7 s and 900 MB).
MAX_JSON = 64 << 20
# Largest sum of the profiles of one note read (`store.notes.NotesStore.read`): a line is bounded, and
# ten lines just under MAX_JSON once made `show --json` of one commit take 2.7 GB; the rest of such a
# note is reported unread.
MAX_NOTE_JSON = 64 << 20


def _function_to_json(f: FunctionStats) -> dict:
    d = {"n": f.name, "c": f.count, "t": f.total_ns, "x": f.exclusive_ns, "lo": f.min_ns, "hi": f.max_ns}
    if f.hist:
        d["h"] = list(f.hist)
    if f.sampled:
        d["s"] = 1
        d["ci"] = list(f.ci or (None, None))
    if f.series_ns:
        d["so"], d["sd"] = list(f.series_gaps), list(f.series_ns)
    if f.stack_samples:
        d["ss"] = f.stack_samples
    if f.library_samples:
        d["ls"] = f.library_samples
    if f.location:
        d["loc"] = f.location
    if f.recorded:
        d["rec"] = f.recorded
    if f.probe_ns:
        d["pc"] = f.probe_ns
    if f.nested:
        d["nc"] = f.nested
    if f.outer_calls:
        d["oc"] = f.outer_calls
    if f.by_run:
        d["br"] = 1
    return d


def to_json(profile: Profile) -> dict:
    return {
        "v": VERSION,
        "h": {k: v for k, v in dataclasses.asdict(profile.header).items() if k != "stderr" or v},
        "m": dataclasses.asdict(profile.metrics),
        "p": dataclasses.asdict(profile.plan),
        "f": [_function_to_json(f) for f in profile.functions],
        "cal": profile.calibration,
        **({"w": [{"t": w.total, "f": {n: list(c) for n, c in w.functions.items()}, "e": w.error,
                   **({"sf": w.spread_from} if w.spread_from else {})}  # (older lines stay as they were)
                  for w in profile.instructions]} if profile.instructions else {}),
        **({"st": profile.stacks} if profile.stacks else {}),
    }


def encode(profile: Profile) -> str:
    raw = json.dumps(to_json(profile), separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    if len(raw) > MAX_JSON:
        raise NoteFormatError(f"the profile is {len(raw) >> 20} MB, over the {MAX_JSON >> 20} MB a note line may hold: "
                              "record fewer calls per function (collect.record_limit) or probe fewer functions")
    return PREFIX + base64.b64encode(zlib.compress(raw, 9)).decode()


def inflated(line: str, limit: int | None = None) -> bytes | str:
    """A note line's profile JSON, unparsed: inflated when compressed.  More than `limit` bytes
    (default MAX_JSON) is refused unread (NoteFormatError)."""
    limit = MAX_JSON if limit is None else limit
    line = line.strip()
    if len(line) > limit:
        raise TooLarge(f"the line is {len(line) >> 20} MB, over the {limit >> 20} MB limit")
    if line.startswith("{"):
        return line
    if not line.startswith(PREFIX):
        raise NoteFormatError(f"unknown encoding (expected '{PREFIX}' or a JSON object)")
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(line[len(PREFIX):], validate=True), limit)
    except (binascii.Error, zlib.error, ValueError) as e:
        raise NoteFormatError(f"cannot decode: {e}") from None
    if inflate.unconsumed_tail:
        raise TooLarge(f"the line inflates beyond the {limit >> 20} MB limit")
    return raw


class TooLarge(NoteFormatError):
    """A line over the size `inflated` was allowed (MAX_JSON, or what is left of a note's budget)."""


def parse(raw: bytes | str) -> Profile:
    """The profile of `inflated`'s JSON, every field checked against the model's annotations
    (`core.typed`); NoteFormatError says which field is wrong and why."""
    try:
        line = typed.decode(raw, _DECODER)
    except typed.Invalid as e:
        v = e.data.get("v") if isinstance(e.data, dict) else VERSION  # (a line of another version says so first)
        raise NoteFormatError(_unsupported(v) if v != VERSION else _in_words(e)) from None
    if line.v != VERSION:
        raise NoteFormatError(_unsupported(line.v))
    return _profile(line)


def decode(line: str) -> Profile:
    return parse(inflated(line))


def from_json(data: dict) -> Profile:
    """A profile from JSON already parsed (`to_json`'s shape): read as its line would be."""
    return parse(json.dumps(data))


# InstructionCounts's fields under the keys a line spells them with (FunctionStats carries its own:
# `core.model.FUNCTION_KEYS`)
_INSTRUCTION_KEYS = {"total": "t", "functions": "f", "error": "e", "spread_from": "sf"}


def _wire(cls, keys: dict[str, str]):
    """`cls` as a line spells it: its fields, with their annotations (and so their bounds), under the
    line's keys."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = [(f.name, hints[f.name], _default(f)) for f in dataclasses.fields(cls) if f.name in keys]
    return msgspec.defstruct(f"Line{cls.__name__}", fields, kw_only=True, rename=keys)


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else msgspec.NODEFAULT


_Instructions = _wire(InstructionCounts, _INSTRUCTION_KEYS)
_Line = msgspec.defstruct("Line", [("v", int), ("h", Header), ("m", Metrics), ("p", PlanRecord), ("f", list[FunctionStats]),
                                   ("cal", dict[str, typed.Amount], {}), ("w", list[_Instructions], []),
                                   ("st", dict[str, typed.Count], {})], kw_only=True)
_DECODER = msgspec.json.Decoder(_Line)
_LONG = {"f": {f.encode_name: f.name for f in msgspec.structs.fields(FunctionStats)},
         "w": {f.encode_name: f.name for f in msgspec.structs.fields(_Instructions)}}


def _in_words(e: typed.Invalid) -> str:
    """The reason, at the field's name rather than its key in the line: `f[3].c` is `f[3].count`."""
    if not e.where:
        return e.reason
    m = re.match(r"(f|w)(\[\d+\]\.)(\w+)(.*)", e.where)
    where = f"{m[1]}{m[2]}{_LONG[m[1]].get(m[3], m[3])}{m[4]}" if m else e.where
    return f"field '{where}': {e.reason}"


def _unsupported(v) -> str:
    return f"unsupported profile version {v!r} (this git perf reads {VERSION})"


def _profile(line) -> Profile:
    header = line.h
    parts = {"h.workload": header.workload, "h.engine": header.engine, "h.machine": header.machine,
             "h.binary": header.binary.rsplit("/", 1)[-1]}  # the comparison key joins them with "|"
    bad = next((k for k, v in parts.items() if "|" in v), None)
    if bad:
        raise NoteFormatError(f"field '{bad}' contains '|', which no name git perf writes contains")
    seen: set[str] = set()  # (every reader looks a function up by its name)
    for i, f in enumerate(line.f):
        if f.name in seen:
            raise NoteFormatError(f"field 'f[{i}].name': function {f.name!r} is listed twice in one profile")
        seen.add(f.name)
    return Profile(header=header, metrics=line.m, plan=_plan(line.p),
                   functions=tuple(line.f), calibration=line.cal,
                   instructions=tuple(InstructionCounts(total=w.total, functions=w.functions, error=w.error,
                                                           spread_from=w.spread_from) for w in line.w),
                   stacks=line.st)


def _plan(plan: PlanRecord) -> PlanRecord:
    """A paired check's round and pairing id as the fields they are now: notes written before them
    kept both among the plan's parameters (a round as a float)."""
    if "round" not in plan.params and "pairing" not in plan.params:
        return plan
    params = dict(plan.params)
    r, pairing = params.pop("round", None), params.pop("pairing", "")
    if r is not None and not (type(r) is float and r.is_integer() and 0 <= r <= typed.LARGEST):
        raise NoteFormatError(f"field 'p.params.round' has an impossible value {r!r}")
    if not isinstance(pairing, str):
        raise NoteFormatError("field 'p.params.pairing' should be a string")
    return dataclasses.replace(plan, params=params, round=int(r) if r is not None else plan.round,
                               pairing=pairing or plan.pairing)
