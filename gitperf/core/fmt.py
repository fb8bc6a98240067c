"""How numbers are written for people: one formatter for each unit, used by every view."""

from __future__ import annotations

import datetime as dt
import re
from typing import Sequence

from tabulate import tabulate

from gitperf.core.names import labels, short


def fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def fmt_confidence(x: float | None) -> str:
    """99.99...% is not 100%: a test never makes a change certain."""
    return "" if x is None else ">99.9%" if x >= 0.9995 else f"{x * 100:.1f}%"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


# What a name from a pulled note could use to take over a terminal: C0 and C1 controls (ESC starts
# title and colour sequences) but newline and tab, and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` for a terminal: every control character shown as an escape (`\\x1b`), not obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)


def names(xs, shown: int = 6, width: int = 90) -> str:
    """A list of function names for a progress line: the first few (at most `shown`, within about
    `width` characters), readable and short, and how many more ("-" for none)."""
    xs = list(xs)
    if not xs:
        return "-"
    out: list[str] = []
    for x in xs[:shown]:
        name = short(x, 40)
        if out and sum(len(o) + 2 for o in out) + len(name) > width:
            break
        out.append(name)
    more = len(xs) - len(out)
    return ", ".join(out) + (f" and {more} more" if more > 0 else "")


def table(headers: Sequence[str], rows: Sequence[Sequence], align: str, indent: str = "  ") -> str:
    """A plain text table, one character of `align` per column ("l" left, "r" right); the first column
    holds function names, shown readable and short enough for the columns (`core.names.labels`), yet apart."""
    first = labels([str(r[0]) for r in rows]) if rows else []
    cut = [[first[k], *r[1:]] for k, r in enumerate(rows)]
    colalign = ["left" if a == "l" else "right" for a in align]
    text = tabulate(cut, headers=list(headers), tablefmt="plain", colalign=colalign, disable_numparse=True)
    return "\n".join(indent + line.rstrip() for line in text.splitlines())


def fmt_date(ts: float | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A commit's date (UTC) for people; git accepts dates Python's datetime does not (year 11476):
    those are shown as what they are, never an error."""
    if ts is None:
        return ""
    try:
        return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime(fmt)
    except (OverflowError, ValueError, OSError):
        return f"out-of-range date ({ts})"
