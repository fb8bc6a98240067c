"""Profile <-> note line.

A line is self-contained so that notes merge by union (`cat_sort_uniq`):

    gpz1:<base64 of zlib-compressed compact JSON>

Version 1 JSON keys are short but documented below.  Plain JSON lines (`{"v": 1, ...}`) are
accepted on read too, which makes hand-written fixtures and debugging easy.  Reading validates every
field and raises `NoteFormatError` with what was wrong; it never guesses.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import math
import types
import typing
import zlib

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
# Most sampled calls of one function a profile keeps (`collect.profile.SERIES_BUDGET`, shared by all of
# them); a longer series in a pulled line is thinned to it on read: 1,000,000 calls in an 8 KB line made
# every reader of its commit take 3 s and 450 MB (bench/hostile.py).
MAX_SERIES = 8000


def _delta(values: list[int]) -> list[int]:
    return [v - p for p, v in zip([0] + values[:-1], values)]


def _undelta(deltas: list[int]) -> list[int]:
    out, acc = [], 0
    for d in deltas:
        acc += d
        out.append(acc)
    return out


def _function_to_json(f: FunctionStats) -> dict:
    d = {"n": f.name, "c": f.count, "t": f.total_ns, "x": f.exclusive_ns, "lo": f.min_ns, "hi": f.max_ns}
    if f.hist:
        d["h"] = list(f.hist)
    if f.sampled:
        d["s"] = 1
        d["ci"] = [f.ci_low, f.ci_high]
    if f.series:
        # call ordinals grow, so deltas are small; durations are kept as they are
        d["so"] = _delta([o for o, _ in f.series])
        d["sd"] = [v for _, v in f.series]
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
    return d


def to_json(profile: Profile) -> dict:
    return {
        "v": VERSION,
        "h": {k: v for k, v in dataclasses.asdict(profile.header).items() if k != "stderr" or v},
        "m": dataclasses.asdict(profile.metrics),
        "p": dataclasses.asdict(profile.plan),
        "f": [_function_to_json(f) for f in profile.functions],
        "cal": profile.calibration,
        **({"w": [{"t": w.total, "f": {n: list(c) for n, c in w.functions.items()}, "e": w.error}
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
    """The profile of `inflated`'s JSON."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except ValueError as e:
        raise NoteFormatError(f"cannot decode: {e}") from None
    except RecursionError:  # json nests by recursion: a pulled line of 100,000 brackets
        raise NoteFormatError("nested too deeply to be a profile") from None
    return from_json(data)


def decode(line: str) -> Profile:
    return parse(inflated(line))


def _text(v: str, where: str) -> str:
    """A string JSON may carry but no terminal, file or database takes: a lone surrogate (`"\\ud800"`)."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteFormatError(f"field '{where}' is not valid text (a lone surrogate)") from None
    return v


def _all_text(v, where: str) -> None:
    """Every string inside an untyped object or list (plan parameters, reasons) is valid text."""
    if isinstance(v, str):
        _text(v, where)
    elif isinstance(v, dict):
        for k, x in v.items():
            _text(k, where)
            _all_text(x, where)
    elif isinstance(v, list):
        for x in v:
            _all_text(x, where)


def _no_constant(name: str):
    raise NoteFormatError(f"{name} is not a number a profile may hold")


def _need(d: dict, key: str, typ, where: str):
    if not isinstance(d, dict) or key not in d:
        raise NoteFormatError(f"missing field '{where}{key}'")
    return _value(d[key], typ, f"{where}{key}")


_LARGEST = 2 ** 63 - 1  # what sqlite (the index) stores; ~292 years in nanoseconds
# may be negative: a signal's exit status, exclusive time (inclusive less nested, each with its own clock
# reads), times of day and the bounds of an estimate
_SIGNED = frozenset({"exit_status", "exclusive_ns", "started", "finished", "ci_low", "ci_high"})


def _value(v, typ, where: str):
    """`v` checked against the type annotation `typ` (and turned into it: lists into tuples).  Numbers
    must be finite, and non-negative unless the field is in `_SIGNED`: NaN or a negative count in a
    note would flow into every statistic read from it."""
    if typ is int and type(v) is int and 0 <= v <= _LARGEST:  # the common case, first (20,000-function lines)
        return v
    if typ is str and type(v) is str and v.isascii():  # (ASCII is valid text)
        return v
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for a in options[:-1]:
            try:
                return _value(v, a, where)
            except NoteFormatError:
                pass
        return _value(v, options[-1], where)
    if origin is tuple:
        if not isinstance(v, (list, tuple)):
            raise NoteFormatError(f"field '{where}' should be a list, not {type(v).__name__}")
        inner = args[:-1] if args[-1:] == (Ellipsis,) else args
        if args[-1:] != (Ellipsis,) and len(v) != len(args):
            raise NoteFormatError(f"field '{where}' should have {len(args)} items, not {len(v)}")
        return tuple(_value(x, inner[0] if len(inner) == 1 else inner[i], f"{where}[{i}]") for i, x in enumerate(v))
    if origin is dict:
        if not isinstance(v, dict):
            raise NoteFormatError(f"field '{where}' should be an object, not {type(v).__name__}")
        return {_text(k, where): _value(x, args[1], f"{where}.{k}") for k, x in v.items()}
    if typ in (dict, list):
        if not isinstance(v, typ):
            raise NoteFormatError(f"field '{where}' should be {'an object' if typ is dict else 'a list'}, "
                                  f"not {type(v).__name__}")
        _all_text(v, where)
        return v
    if typ is bool:
        if not isinstance(v, (bool, int)):
            raise NoteFormatError(f"field '{where}' should be a boolean, not {type(v).__name__}")
        return bool(v)
    if typ in (int, float):
        return _number(v, typ, where)
    if issubclass(typ, str):
        if not isinstance(v, str):
            raise NoteFormatError(f"field '{where}' should be a string, not {type(v).__name__}")
        return _text(v, where)
    raise AssertionError(f"no reader for {typ!r}")  # a model field of a new type: add it here


@functools.cache
def _fields(cls) -> tuple[tuple[dataclasses.Field, typing.Any], ...]:
    """A dataclass's fields with their resolved annotations, once per class: resolving them is ~80% of
    reading a profile otherwise (a 20,000-function line took 2.4 s, nearly all of it here)."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def _number(v, typ, where: str):
    ok = isinstance(v, int) if typ is int else isinstance(v, (int, float))
    if not ok or isinstance(v, bool):
        raise NoteFormatError(f"field '{where}' should be {'an integer' if typ is int else 'a number'}, "
                              f"not {type(v).__name__}")
    if not math.isfinite(v) or abs(v) > _LARGEST or (v < 0 and where.rsplit(".", 1)[-1] not in _SIGNED):
        raise NoteFormatError(f"field '{where}' has an impossible value {v!r}")
    return typ(v)


def _build(cls, d: dict, where: str):
    """Construct a flat dataclass from a dict, checking each field against its annotation."""
    if not isinstance(d, dict):
        raise NoteFormatError(f"'{where}' should be an object")
    kwargs = {}
    for f, hint in _fields(cls):
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise NoteFormatError(f"missing field '{where}.{f.name}'")
            continue
        kwargs[f.name] = _value(d[f.name], hint, f"{where}.{f.name}")
    return cls(**kwargs)


_SHORT = {"c": "count", "t": "total_ns", "x": "exclusive_ns", "lo": "min_ns", "hi": "max_ns", "h": "hist",
          "ss": "stack_samples", "ls": "library_samples", "loc": "location", "rec": "recorded", "pc": "probe_ns",
          "nc": "nested", "oc": "outer_calls"}


def _function_from_json(d: dict, i: int) -> FunctionStats:
    w = f"f[{i}]."
    if not isinstance(d, dict):
        raise NoteFormatError(f"'f[{i}]' should be an object")
    fields = {"name": _need(d, "n", str, w)}
    fields.update({name: d[key] for key, name in _SHORT.items() if key in d})
    if "so" in d or "sd" in d:
        ords, durs = _counts(d, "so", w), _counts(d, "sd", w)
        if len(ords) != len(durs):
            raise NoteFormatError(f"'{w}series' has {len(ords)} ordinals but {len(durs)} durations")
        series = list(zip(_undelta(ords), durs))
        if len(series) > MAX_SERIES:  # evenly thinned, as collect thins what it keeps
            series = [series[int(k * len(series) / MAX_SERIES)] for k in range(MAX_SERIES)]
        fields["series"] = tuple(series)
    if "ci" in d:  # checked by _build under the fields' own names (interval bounds may be negative)
        ci = d["ci"]
        if not isinstance(ci, list) or len(ci) != 2:
            raise NoteFormatError(f"field '{w}ci' should be a list of two numbers")
        fields["ci_low"], fields["ci_high"] = ci
    fields["sampled"] = d.get("s", 0)
    return _plain(fields) or _build(FunctionStats, fields, f"f[{i}]")  # count, total_ns, exclusive_ns: required there


def _counts(d: dict, key: str, where: str) -> list[int]:
    """A list of counts checked in one pass (a pulled series of 1,000,000 calls took 3 s checked item by
    item); `_value` says which item is wrong."""
    v = d.get(key)
    if type(v) is list and all(type(x) is int and 0 <= x <= _LARGEST for x in v):
        return v
    return list(_need(d, key, tuple[int, ...], where))


# The integer fields of a function and their least value (`_SIGNED` ones may be negative)
_INTS = {f.name: (-_LARGEST if f.name in _SIGNED else 0) for f in dataclasses.fields(FunctionStats)
         if f.type in ("int", int)}


def _plain(fields: dict) -> FunctionStats | None:
    """The common function (integers in range, ASCII location, no interval) built at once;
    None sends anything else through `_build`, which says what is wrong.  Reading is the index's
    largest cost after its checks: 1,000 notes of 3 x 200 functions took 5.6 s, 4.6 s so."""
    if not {"count", "total_ns", "exclusive_ns"} <= fields.keys():
        return None
    out = {}
    for k, v in fields.items():
        least = _INTS.get(k)
        if least is not None:
            if type(v) is not int or not least <= v <= _LARGEST:
                return None
        elif k == "sampled":
            if v not in (0, 1) or type(v) not in (int, bool):
                return None
            v = bool(v)
        elif k == "location":
            if type(v) is not str or not v.isascii():
                return None
        elif k == "series":  # (built above from checked counts)
            pass
        elif k == "hist":
            if type(v) is not list or not all(type(x) is int and 0 <= x <= _LARGEST for x in v):
                return None
            v = tuple(v)
        elif k != "name":  # (validated by the caller)
            return None
        out[k] = v
    return FunctionStats(**out)


def from_json(data: dict) -> Profile:
    if not isinstance(data, dict):
        raise NoteFormatError("a profile must be a JSON object")
    v = data.get("v")
    if v != VERSION:
        raise NoteFormatError(f"unsupported profile version {v!r} (this git perf reads {VERSION})")
    header = _build(Header, _need(data, "h", dict, ""), "h")
    parts = {"h.workload": header.workload, "h.engine": header.engine, "h.machine": header.machine,
             "h.binary": header.binary.rsplit("/", 1)[-1]}  # the comparison key joins them with "|"
    bad = next((k for k, v in parts.items() if "|" in v), None)
    if bad:
        raise NoteFormatError(f"field '{bad}' contains '|', which no name git perf writes contains")
    return Profile(
        header=header,
        metrics=_build(Metrics, _need(data, "m", dict, ""), "m"),
        plan=_plan(_build(PlanRecord, _need(data, "p", dict, ""), "p")),
        functions=tuple(_function_from_json(f, i) for i, f in enumerate(_items(data, "f", required=True))),
        calibration=_value(data.get("cal", {}), dict[str, float], "cal"),
        instructions=tuple(_instructions_from_json(w, i) for i, w in enumerate(_items(data, "w"))),
        stacks=_value(data.get("st", {}), dict[str, int], "st"),
    )


def _plan(plan: PlanRecord) -> PlanRecord:
    """A paired check's round and pairing id as the fields they are now: notes written before them
    kept both among the plan's parameters (a round as a float)."""
    if "round" not in plan.params and "pairing" not in plan.params:
        return plan
    params = dict(plan.params)
    r, pairing = params.pop("round", None), params.pop("pairing", "")
    if r is not None and not (type(r) is float and r.is_integer() and 0 <= r <= _LARGEST):
        raise NoteFormatError(f"field 'p.params.round' has an impossible value {r!r}")
    if not isinstance(pairing, str):
        raise NoteFormatError("field 'p.params.pairing' should be a string")
    return dataclasses.replace(plan, params=params, round=int(r) if r is not None else plan.round,
                   pairing=pairing or plan.pairing)


def _items(data: dict, key: str, required: bool = False) -> list:
    """A list whose items the caller reads field by field (their text checked there, not walked
    twice: walking every string of a 20,000-function line was a third of reading it)."""
    if key not in data:
        if required:
            raise NoteFormatError(f"missing field '{key}'")
        return []
    v = data[key]
    if not isinstance(v, list):
        raise NoteFormatError(f"field '{key}' should be a list, not {type(v).__name__}")
    return v


def _instructions_from_json(d, i: int) -> InstructionCounts:
    where = f"w[{i}]"
    if not isinstance(d, dict):
        raise NoteFormatError(f"'{where}' should be an object")
    return InstructionCounts(total=_value(d.get("t", 0), int, f"{where}.t"),
                             functions=_value(d.get("f", {}), dict[str, tuple[int, int, int]], f"{where}.f"),
                             error=_value(d.get("e", ""), str, f"{where}.e"))
