"""The one reader of what git perf reads back: note lines (`core.codec`), check records
(`checks.change`) and `.gitperf.toml` (`core.config`).

msgspec turns plain values (or JSON) into the model's dataclasses, checking each field against its
annotation and the bounds stated on it: `Count` and its kin below, `Literal[...]` for choices, and
`msgspec.Meta(description=...)` where a bound reads better in words.  What is wrong comes back as
`Invalid`: the field's path and the reason in words, which each caller raises as its own error.

Why msgspec: it was installed already (angr needs it), it decodes JSON straight into typed objects,
and with it a 20,000-function note line reads 1.2x (no call series) to 1.45x (20 calls a function)
faster than with the hand-written reader it replaced (bench/decode.py); pydantic would be a new
dependency for the same job.
"""

from __future__ import annotations

import functools
import json
import re
import typing
from typing import Annotated

import msgspec

LARGEST = 2 ** 63 - 1  # what sqlite (the index) stores; ~292 years in nanoseconds
# No count, size or time in a note or result is negative, infinite or NaN: each would flow into every
# statistic read from it.  Signed ones: an exit status, exclusive time (inclusive less nested, each
# with its own clock reads), times of day, the bounds of an estimate.
Count = Annotated[int, msgspec.Meta(ge=0, le=LARGEST)]
Signed = Annotated[int, msgspec.Meta(ge=-LARGEST, le=LARGEST)]
Amount = Annotated[float, msgspec.Meta(ge=0, le=LARGEST)]  # finite, not negative
Real = Annotated[float, msgspec.Meta(ge=-LARGEST, le=LARGEST)]  # finite


class Invalid(ValueError):
    """`where` (a path: `f[3].count`, `h`, "" for the whole) is not what its field may hold: `reason`.
    `data`: the plain values that did not read (None where they are not JSON), for a caller's own
    words (a note line's version) without parsing them again."""

    def __init__(self, where: str, reason: str, data=None):
        super().__init__(f"{where}: {reason}" if where else reason)
        self.where, self.reason, self.data = where, reason, data


def read(data, typ):
    """Plain values (from JSON or TOML) as `typ`, every field checked; Invalid otherwise.  Strict: no
    "3" for 3, no 1 for true (an integer is a float, as in JSON)."""
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as e:
        raise explain(e, data, typ) from None


def decode(raw: bytes | str, decoder: msgspec.json.Decoder):
    """JSON read straight into the decoder's type; Invalid otherwise, with what the stdlib's reader
    says of text msgspec cannot parse (a NaN, a lone surrogate, nesting deeper than Python's stack)."""
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as e:
        raise explain(e, _plain(raw), decoder.type) from None
    except msgspec.DecodeError as e:
        raise Invalid("", _why_not_json(raw, e)) from None
    except RecursionError:  # (in a key the type does not have, which msgspec parses to skip it)
        raise Invalid("", _NESTED) from None


def _plain(raw):
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _why_not_json(raw, err: Exception) -> str:
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except ValueError as e:
        return f"cannot decode: {e}"
    except RecursionError:  # a pulled line of 100,000 brackets
        return _NESTED
    if _has_lone_surrogate(data):
        return "not valid text (a lone surrogate)"
    return f"cannot decode: {err}"


_NESTED = "nested too deeply to be what git perf writes"


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number")


def _has_lone_surrogate(v) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(v, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(x) for k, x in v.items())
    return isinstance(v, list) and any(_has_lone_surrogate(x) for x in v)


_WORDS = {"int": "an integer", "float": "a number", "str": "text", "bool": "true or false", "array": "a list",
          "object": "an object", "null": "null"}
_PLURALS = {str: "strings", int: "integers", float: "numbers"}
_AT = re.compile(r"^(.*?)(?: - at `\$(.*)`)?$", re.S)
_EXPECTED = re.compile(r"Expected `(\w+)`(?:, got `(\w+)`| (.*))?$")


def explain(err: msgspec.ValidationError, data, typ) -> Invalid:
    """msgspec's message in the words of git perf's errors: which field, what it should be, and the
    value it has (looked up in `data` by the path, when there is one)."""
    return Invalid(*_where_and_why(err, data, typ), data)


def _where_and_why(err: msgspec.ValidationError, data, typ) -> tuple[str, str]:
    head, path = _AT.match(str(err)).groups()
    where, found, hint = _walk(data, typ, path or "")
    if m := re.match(r"Object missing required field `(\w+)`", head):
        return f"{where}.{m[1]}" if where else m[1], "missing (required)"
    got = f", got {found[0]!r}" if found else ""
    if desc := next((a.description for a in getattr(hint, "__metadata__", ()) if getattr(a, "description", None)), None):
        return where, f"expected {desc}{got}"
    if head.startswith("Invalid enum value") and typing.get_origin(_bare(hint)) is typing.Literal:
        return where, f"expected one of {', '.join(map(str, typing.get_args(_bare(hint))))}{got}"
    if m := _EXPECTED.match(head):
        want, other, bound = m.groups()
        items = typing.get_args(_bare(hint))
        if want == "array" and items[-1:] == (Ellipsis,) and items[0] in _PLURALS:
            want = f"a list of {_PLURALS[items[0]]}"
        expected = _WORDS.get(want, want) + (f" {_in_words(bound)}" if bound else "")
        return where, f"expected {expected}" + (got or (f", got {_WORDS.get(other, other)}" if other else ""))
    if head == "Number out of range":
        return where, f"out of range{got}"
    return where, head[:1].lower() + head[1:]


def _in_words(bound: str) -> str:
    """msgspec's bound (`>= 0.01`, `<= 1000.0`) as words: "at least 0.01", "at most 1000"."""
    op, _, number = bound.partition(" ")
    words = {">=": "at least", "<=": "at most", ">": "above", "<": "below"}.get(op)
    return f"{words} {number.removesuffix('.0')}" if words else bound


def _walk(data, typ, path: str) -> tuple[str, tuple | None, typing.Any]:
    """Follow msgspec's `path` (`.f[0].c`, `.cal[...]`) through plain `data` and the type `typ`
    together: the path with the key msgspec leaves out (`[...]`: the first item of the object that is
    not of the object's value type) named, (the value there,) or None, and the annotation there."""
    where, found = "", (data,)
    for key, index in re.findall(r"\.([^.\[\]]+)|\[(\d+|\.\.\.)\]", path):
        value = found[0] if found else None
        args = typing.get_args(_bare(typ))
        if key:
            typ = _field_types(_bare(typ)).get(key)
            where += f".{key}" if where else key
            found = (value[key],) if isinstance(value, dict) and key in value else None
        elif index == "...":
            typ = args[-1] if args else None
            bad = next((k for k, v in (value or {}).items() if not _is(v, typ)), None) if isinstance(value, dict) else None
            where += f".{bad}" if bad is not None else "[...]"
            found = (value[bad],) if bad is not None else None
        else:
            typ = (args[0] if len(args) == 2 and args[1] is Ellipsis else args[int(index)] if int(index) < len(args)
                   else args[0] if args else None)
            where += f"[{index}]"
            found = (value[int(index)],) if isinstance(value, list) and int(index) < len(value) else None
    return where, found, typ


def _is(value, typ) -> bool:
    try:
        msgspec.convert(value, typ)
    except (msgspec.ValidationError, TypeError):
        return False
    return True


@functools.cache
def _field_types(typ) -> dict[str, typing.Any]:
    """A dataclass's or Struct's annotations by the names its data spells them with (a Struct may
    rename); {} for anything else."""
    if isinstance(typ, type) and issubclass(typ, msgspec.Struct):
        return {f.encode_name: f.type for f in msgspec.structs.fields(typ)}
    if hasattr(typ, "__dataclass_fields__"):
        return typing.get_type_hints(typ, include_extras=True)
    return {}


def _bare(hint):
    """An annotation without its `Annotated` wrapper."""
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint
