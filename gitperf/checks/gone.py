"""What a commit stopped running, told as a C++ developer sees it (ARCHITECTURE.md §10, "Gone").

`compare` reports every function the base ran and the target does not as `removed`.  Two cases read
better otherwise:

* **Inlined**: the function is gone from the target's symbols but its code lives on inside other
  functions (the target's DWARF has inlined copies of it: `analysis.bindiff`'s `inlined`, stored in
  the plan).  Its time is now theirs; "removed, -100%" would say the work vanished.
* **No longer called**: a change that stops using a library-like part of the program (`std::regex`
  replaced by a hand-written scanner) leaves tens of template functions unrun.  Those the same
  surviving function called are one line: "40 functions no longer called from `Tokenizer::next`:
  3.4 ms a run -> none", the members listed in `Change.members`.  Who called whom comes from the
  base's stack samples: the nearest frame above a removed function that is not itself removed.
  New functions (a container's new template instantiations) are grouped the same way under the
  function that calls them in the target.

Pure: changes and profiles in, changes out.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict

from msgspec.structs import replace

from gitperf.checks.change import INLINED, NEW, REMOVED, Change
from gitperf.core.fmt import fmt_ns, names
from gitperf.core.model import ROOT, PlanRecord, StoredProfile
from gitperf.core.names import short
from gitperf.core.stacks import SEP

MIN_GROUP = 2  # removed functions under one caller told as one line


def regroup(changes: list[Change], plan: PlanRecord | None, base: list[StoredProfile],
            target: list[StoredProfile]) -> list[Change]:
    """`changes` with removed functions that were inlined marked so, those no longer called from one
    surviving caller grouped into one change (the first member's row, the rest in `members`), and new
    functions likewise under the caller that calls them now."""
    inlined = plan.inlined if plan else {}
    out, removed, new = [], [], []
    for c in changes:
        if c.type == REMOVED and c.function in inlined:
            out.append(_inlined(c, inlined[c.function]))
        elif c.type in (REMOVED, NEW):
            (removed if c.type == REMOVED else new).append(c)
        else:
            out.append(c)
    return out + _grouped(removed, base, new=False) + _grouped(new, target, new=True)


def _inlined(c: Change, into: tuple[str, ...]) -> Change:
    return replace(c, type=INLINED, relative=math.nan, target_ns=math.nan, absolute_ns=math.nan,
                   method=f"inlined into {names(into, shown=3)}: no longer a function of its own; its work is "
                          "done inside them and counted in their times")


def callers(group: set[str], profiles: list[StoredProfile]) -> dict[str, str]:
    """Each function's caller in `profiles`: the nearest frame above it in the stack samples that is
    not in `group` itself, the most frequent one.  Functions no sample caught have none."""
    seen: dict[str, Counter] = defaultdict(Counter)
    for p in profiles:
        for stack, k in p.profile.stacks.items():
            frames = stack.split(SEP)
            for i, f in enumerate(frames):
                if f in group:
                    caller = next((g for g in reversed(frames[:i]) if g not in group and not g.startswith("[")), None)
                    if caller:
                        seen[f][caller] += k
    return {f: c.most_common(1)[0][0] for f, c in seen.items()}


def _share(members: set[str], base: list[StoredProfile]) -> float | None:
    """The median share of a base run's stack samples that have any of `members` on the stack."""
    shares = []
    for p in base:
        total = sum(p.profile.stacks.values())
        if total:
            shares.append(sum(k for s, k in p.profile.stacks.items() if members & set(s.split(SEP))) / total)
    return statistics.median(shares) if shares else None


def _run_ns(base: list[StoredProfile]) -> float | None:
    runs = [f.total_ns for p in base if (f := p.profile.function(ROOT))]
    return statistics.median(runs) if runs else None


def _grouped(changes: list[Change], profiles: list[StoredProfile], new: bool) -> list[Change]:
    """Removed functions grouped under their caller in the base (`new` False), or new ones under their
    caller in the target (`new` True): one row a caller, the figure from that side's stack samples."""
    side, by = "target" if new else "base", callers({c.function for c in changes}, profiles)
    groups: dict[tuple[str, str], list[Change]] = defaultdict(list)
    for c in changes:
        groups[(c.workload, by.get(c.function, ""))].append(c)
    out = []
    for (_, caller), cs in groups.items():
        if not caller or len(cs) < MIN_GROUP:
            out += [replace(c, caller=caller, method=f"{c.method} (called from {short(caller, 60)} in the {side})")
                    if caller else c for c in cs]
            continue
        cs.sort(key=lambda c: -(c.target_ns if new else c.base_ns))
        share, run = _share({c.function for c in cs}, profiles), _run_ns(profiles)
        ns = share * run if share is not None and run else None
        if new:
            what = f"{len(cs)} new functions called from {short(caller, 60)}"
            when = f"none -> {fmt_ns(ns)} a run ({share:.0%} of the target's stack samples)" if ns is not None else ""
        else:
            what = f"{len(cs)} functions no longer called from {short(caller, 60)}"
            when = f"{fmt_ns(ns)} a run ({share:.0%} of the base's stack samples) -> none" if ns is not None else ""
        method = what + (f": {when}" if when else "") + f" ({names([c.function for c in cs], shown=3)})"
        figure = {"target_ns": ns} if new else {"base_ns": ns}
        out.append(replace(cs[0], method=method, members=tuple(c.function for c in cs), caller=caller,
                           **({k: v for k, v in figure.items() if v is not None})))
    return out
