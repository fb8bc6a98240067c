"""Call stacks of stack samples, folded (ARCHITECTURE.md §5, "Stacks"): the format flamegraph.pl,
inferno and speedscope read, one line per distinct stack, frames from the root down joined by `;`:

    main;run;hash_str 812
    main;run;hash_str;[library] 97

A frame is a function of the binary; `[library]` is time in a shared library that the innermost
binary frame above it called, `[kernel]` time in the kernel on the program's behalf (alone: exec, page
faults and exit before or after any frame of the binary), `[unknown]` a sample no frame of the binary
could be found for.  Pure functions: fold, bound, merge, and the per-function inclusive counts.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

from gitperf.core.model import Profile
from gitperf.core.names import readable

LIBRARY = "[library]"
KERNEL = "[kernel]"
UNKNOWN = "[unknown]"
OTHER = "[other stacks]"  # what bounding left out, kept as one stack so that totals stay true
SEP = ";"

# A profile keeps the most frequent stacks that hold this share of its samples, and at most MAX_STACKS
# of them.  Measured (bench/stacks.py): a 0.5 s Lua 5.4 script has 96 distinct stacks at 999 Hz and
# 186 at 4999 Hz, 159 of which hold 99% of the samples: 1.3 KB in the note (stacks share prefixes
# and compress ~20x); the bound keeps a pathological profile within ~10 KB.
KEEP_SHARE = 0.99
MAX_STACKS = 1000


def frame_name(name: str) -> str:
    """A function name as a folded frame: `;` separates frames and a line ends at a newline."""
    return name.replace(SEP, ":").replace("\n", " ")


def fold(frames: Iterable[str]) -> str:
    """Frames from the root down -> one folded stack."""
    return SEP.join(frame_name(f) for f in frames)


def folded(raw: Mapping[tuple[str, ...], int]) -> dict[str, int]:
    """Stacks as frame tuples -> folded stacks (two tuples may fold alike: their samples add up)."""
    out: Counter[str] = Counter()
    for frames, n in raw.items():
        out[fold(frames)] += n
    return dict(out)


def bound(stacks: Mapping[str, int], share: float = KEEP_SHARE, limit: int = MAX_STACKS) -> dict[str, int]:
    """The most frequent stacks holding `share` of the samples (at most `limit`), the rest summed
    into one OTHER stack."""
    total = sum(stacks.values())
    kept: dict[str, int] = {}
    held = 0
    for stack, n in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0])):
        if held >= share * total or len(kept) >= limit:
            break
        kept[stack] = n
        held += n
    if total > held:
        kept[OTHER] = kept.get(OTHER, 0) + total - held
    return kept


def merge(many: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Stacks of several runs summed."""
    out: Counter[str] = Counter()
    for stacks in many:
        out.update(stacks)
    return dict(out)


def per_workload(profiles: Iterable[Profile]) -> dict[str, dict[str, int]]:
    """Each workload's stacks summed over its profiles (those without stacks left out), by name."""
    many: dict[str, list[Mapping[str, int]]] = {}
    for p in profiles:
        if p.stacks:
            many.setdefault(p.header.workload, []).append(p.stacks)
    return {wl: merge(ms) for wl, ms in sorted(many.items())}


def inclusive(stacks: Mapping[str, int]) -> dict[str, int]:
    """Samples per function with the function anywhere on the stack, counted once per stack (a
    recursive function is not counted again for each of its frames): its inclusive samples, time in
    the libraries it called included."""
    out: Counter[str] = Counter()
    for stack, n in stacks.items():
        for name in set(stack.split(SEP)):
            out[name] += n
    return dict(out)


def own(stacks: Mapping[str, int]) -> dict[str, int]:
    """Samples per function in its own code or a library it called: the innermost binary frame of each
    stack (the frame before a trailing `[library]` or `[kernel]`)."""
    out: Counter[str] = Counter()
    for stack, n in stacks.items():
        frames = stack.split(SEP)
        while frames and frames[-1] in (LIBRARY, KERNEL):
            frames.pop()
        if frames and frames[-1] not in (UNKNOWN, OTHER):
            out[frames[-1]] += n
    return dict(out)


def for_people(stacks: Mapping[str, int]) -> dict[str, int]:
    """The same stacks with every frame's readable name (`core.names.readable`: C++ demangled), as
    `show --folded` prints them and flame graphs draw them; the stored stacks keep the symbols."""
    out: Counter[str] = Counter()
    for stack, n in stacks.items():
        out[fold(readable(f) for f in stack.split(SEP))] += n
    return dict(out)


def lines(stacks: Mapping[str, int], prefix: str = "") -> list[str]:
    """Folded text lines, most frequent first (`prefix`: a root frame above every stack, e.g. the
    workload's name when several are printed together)."""
    head = frame_name(prefix) + SEP if prefix else ""
    return [f"{head}{s} {n}" for s, n in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))]
