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
import json
import zlib

from gitperf.errors import NoteFormatError
from gitperf.model import FunctionStats, Header, Metrics, PlanRecord, Profile

PREFIX = "gpz1:"
VERSION = 1


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
    if f.location:
        d["loc"] = f.location
    if f.recorded:
        d["rec"] = f.recorded
    return d


def to_json(profile: Profile) -> dict:
    return {
        "v": VERSION,
        "h": dataclasses.asdict(profile.header),
        "m": dataclasses.asdict(profile.metrics),
        "p": dataclasses.asdict(profile.plan),
        "f": [_function_to_json(f) for f in profile.functions],
        "cal": profile.calibration,
    }


def encode(profile: Profile) -> str:
    raw = json.dumps(to_json(profile), separators=(",", ":"), sort_keys=True).encode()
    return PREFIX + base64.b64encode(zlib.compress(raw, 9)).decode()


def decode(line: str) -> Profile:
    line = line.strip()
    try:
        if line.startswith(PREFIX):
            raw = zlib.decompress(base64.b64decode(line[len(PREFIX):], validate=True))
            data = json.loads(raw)
        elif line.startswith("{"):
            data = json.loads(line)
        else:
            raise NoteFormatError(f"unknown encoding (expected '{PREFIX}' or a JSON object)")
    except (binascii.Error, zlib.error, ValueError) as e:
        raise NoteFormatError(f"cannot decode: {e}") from None
    return from_json(data)


def _need(d: dict, key: str, typ, where: str):
    if not isinstance(d, dict) or key not in d:
        raise NoteFormatError(f"missing field '{where}{key}'")
    v = d[key]
    if typ is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
        raise NoteFormatError(f"field '{where}{key}' should be {typ.__name__}, not {type(v).__name__}")
    return v


def _build(cls, d: dict, where: str):
    """Construct a flat dataclass from a dict, checking each field's type."""
    if not isinstance(d, dict):
        raise NoteFormatError(f"'{where}' should be an object")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise NoteFormatError(f"missing field '{where}.{f.name}'")
            continue
        v = d[f.name]
        kwargs[f.name] = tuple(v) if isinstance(v, list) else v
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise NoteFormatError(f"bad '{where}': {e}") from None


def _function_from_json(d: dict, i: int) -> FunctionStats:
    w = f"f[{i}]."
    series = ()
    if "so" in d or "sd" in d:
        ords, durs = _undelta(_need(d, "so", list, w)), _need(d, "sd", list, w)
        if len(ords) != len(durs):
            raise NoteFormatError(f"'{w}series' has {len(ords)} ordinals but {len(durs)} durations")
        series = tuple(zip(ords, durs))
    ci = d.get("ci", [None, None])
    return FunctionStats(
        name=_need(d, "n", str, w), count=_need(d, "c", int, w), total_ns=_need(d, "t", int, w),
        exclusive_ns=_need(d, "x", int, w), min_ns=d.get("lo", 0), max_ns=d.get("hi", 0),
        hist=tuple(d.get("h", ())), sampled=bool(d.get("s", 0)), ci_low=ci[0], ci_high=ci[1],
        series=series, stack_samples=d.get("ss", 0), location=d.get("loc", ""), recorded=d.get("rec", 0),
    )


def from_json(data: dict) -> Profile:
    if not isinstance(data, dict):
        raise NoteFormatError("a profile must be a JSON object")
    v = data.get("v")
    if v != VERSION:
        raise NoteFormatError(f"unsupported profile version {v!r} (this git perf reads {VERSION})")
    header = _build(Header, _need(data, "h", dict, ""), "h")
    for key in ("commit", "workload", "engine", "binary"):
        if not isinstance(getattr(header, key), str):
            raise NoteFormatError(f"field 'h.{key}' should be a string")
    plan_d = dict(_need(data, "p", dict, ""))
    if "removed" in plan_d and isinstance(plan_d["removed"], dict):
        plan_d["removed"] = {k: tuple(v) for k, v in plan_d["removed"].items()}
    functions = tuple(_function_from_json(f, i) for i, f in enumerate(_need(data, "f", list, "")))
    return Profile(
        header=header,
        metrics=_build(Metrics, _need(data, "m", dict, ""), "m"),
        plan=_build(PlanRecord, plan_d, "p"),
        functions=functions,
        calibration=dict(data.get("cal", {})),
    )
