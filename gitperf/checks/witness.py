"""The instruction-count witness in a check (ARCHITECTURE.md §10b): callgrind's counts of the two
sides, stored on a paired check's profiles (`Profile.instructions`), beside the time verdicts.

* Every change gets its function's inclusive instructions per run on both sides (`Change.instructions`);
  the root's are the whole run's, every thread's (callgrind counts a function's callees on its own
  thread: leveldb's db_bench `main` executed 1.0 M of its run's 860 M instructions).  A function whose
  share of the run's instructions is far below its share of the run's time (`MIN_WITNESSED`) mostly
  waits (threads, I/O, locks): its counts are shown, and no rule below applies to it.
Then each time verdict meets the counts, in this order (`RULES`; the method says which rule decided):

1. **Conflict**: time moved one way and the inclusive instructions the other, beyond their A/A spread
   and by more than the time moved (log scale; a caller "faster" by 21% whose new template callee runs
   3x the instructions): no verdict in time's direction, `conflict`, with both figures.  It does not
   fail the check.  Fewer instructions taking more time by more is not a conflict: the cost of an
   instruction rose (cache misses, branches): ninja's hash maps back on `std::unordered_map` ran
   1.6% fewer instructions and 12% more time (interleaved native runs; the author measured the
   switch away from it at -10%), and callgrind's cache simulation saw +1% estimated cycles there
   (bench/aa.py, ARCHITECTURE.md §10b).  Time's verdict then stands, and says so — unless the two
   together say each instruction took more than `MAX_PER_INSTRUCTION_SHIFT` times more or less time:
   then the time is what is wrong (leveldb's `DBIter::Next` read -90% with 20% more instructions,
   its stack samples missing the callee it reaches by a tail call), a conflict.
2. **Placement**: the instructions are the same on both sides (within the spread): identical work
   that runs at another speed in another build is where its code landed, not a change.  For a
   function the diff did not change (its machine code is the same too) whatever the size of the
   shift: snappy's untouched `IncrementalCopy` read -77% [-92%, -31%] on 1,206,450 instructions on
   both sides beside a commit that added one `nop` to its caller, beyond any spread measured in that
   check (13 functions, 90% quantile 4.9%).  For a function the diff changed, when the shift's
   interval reaches into the placement spread of this check (`placement`; the demo's rename commit
   changed `main` only in a call's target, and its `main` read +9% at >99.9% with 14,512,041
   instructions on both sides; ninja's `Lexer::ReadToken` read -21% [-31%, -9%] with 10,211,448
   instructions on both sides); a changed function's shift whose whole interval lies beyond the
   spread stands.
3. **Instructions**: a function the diff changed whose time is no verdict (unresolved, or within
   the threshold) but whose instructions grew beyond the spread is named, as `instructions`, with its
   time's outcome.  It never fails the check: the exit code follows time alone, so a re-check of the
   same pair (the same builds execute the same instructions) names it again, and its exit code moves
   only when time's outcome does, from unresolved to a verdict (ARCHITECTURE.md §10, "Three outcomes").

A time verdict that stands and whose instructions moved the same way beyond their spread is a
**cause** (`Change.cause`): the instructions locate, time confirms, and a cause comes first among
verdicts that add as much to the run (`change.report_order`: what a verdict adds decides first; on
ninja's hash-map change `State::LookupNode`, +5% instructions, was read before
`NinjaMain::ToolTargets`, +60% time on identical instructions: nodes laid out otherwise in memory).

The A/A spread is measured per check: the base runs twice under callgrind, and a function's
relative difference between those two runs (programs that seed hashes from addresses or the clock
execute different instruction counts run to run) sets how far its count must move to count.  Where a
check of the base or one of its last 20 ancestors found the two runs alike, the program is
deterministic and the base runs once (`collect.paired.learnt`; its counts name that commit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from msgspec.structs import replace

from gitperf.checks.change import CONFLICT, DEGRADATION, INSTRUCTIONS, NO_CHANGE, OPTIMIZATION, UNRESOLVED, Change
from gitperf.checks.designs.pooled import PLACEMENT_SPREAD
from gitperf.core.model import ROOT, InstructionCounts, StoredProfile

# A count must move by more than this share (and more than SPREAD_FACTOR x its A/A difference) to be a
# change: deterministic programs repeat their counts exactly, but a build's other differences (the
# pad, a moved constant) can move a function's count by a few instructions a call.
MIN_INSTRUCTION_CHANGE = 0.01
SPREAD_FACTOR = 3.0  # one A/A pair is a small sample of the spread: three times it, not once


def runs(profiles: list[StoredProfile]) -> tuple[list[InstructionCounts], list[str]]:
    """One side's callgrind runs (those that succeeded) and why the others failed."""
    done = [w for p in profiles for w in p.profile.instructions]
    return [w for w in done if not w.error], sorted({w.error for w in done if w.error})


def _count(w: InstructionCounts, name: str) -> int | None:
    """A function's inclusive instructions in one run; the root's are the run's (every thread's,
    libraries included): callgrind counts a function's callees on its own thread only, and `main` of a
    program that works in threads (leveldb's db_bench) executed 1.0 million of the run's 860 million."""
    if name == ROOT:
        return w.total or None
    return w.functions[name][2] if name in w.functions else None


def _inclusive(ws: list[InstructionCounts], name: str) -> float | None:
    """Its mean over the runs, when every run counted it."""
    vals = [v for w in ws if (v := _count(w, name)) is not None]
    return sum(vals) / len(vals) if vals and len(vals) == len(ws) else None


# Instructions witness a function's time only where it executes them: its share of the run's
# instructions at least this share of its share of the run's time (a function may run up to 8x the
# program's average time per instruction: memory-bound code).  Below it the function mostly waits
# (for threads it started, I/O, locks), and the count says nothing of its time.
MIN_WITNESSED = 1 / 8


@dataclass(frozen=True)
class _Scale:
    """What a function's shares are shares of, per side (base, target): the runs' mean instruction
    totals and the root's time a run (None without the root's change)."""

    totals: tuple[float, float]
    runs_ns: tuple[float, float] | None

    @staticmethod
    def of(changes: list[Change], tw: Sequence[InstructionCounts], bw: Sequence[InstructionCounts]) -> _Scale:
        root = next((c for c in changes if c.function == ROOT), None)
        return _Scale((_mean_total(bw), _mean_total(tw)), (root.base_ns, root.target_ns) if root else None)

    def shares(self, c: Change, counts: tuple[float, float]) -> tuple[float, float] | None:
        """`c`'s share of the run's instructions and of its time, on the side where it takes the larger
        share of the time: the time that changed is there.  (On its small side a traced function's time
        can be mostly its probes': cJSON's `cJSON_AddItemToArray` after 3ece4c8 had 6.9 ms of probed
        time for 0.35% of the instructions, 28% of the probed run, and read "mostly waits".)  None where
        no share can be told."""
        if c.function == ROOT or not self.runs_ns:
            return None
        time = [ns / run if run > 0 and math.isfinite(ns) and ns > 0 else 0.0
                for ns, run in zip((c.base_ns, c.target_ns), self.runs_ns)]
        i = 0 if time[0] >= time[1] else 1
        return (counts[i] / self.totals[i], time[i]) if time[i] and self.totals[i] else None

    def witnessed(self, c: Change, counts: tuple[float, float]) -> bool:
        shares = self.shares(c, counts)
        return shares is None or shares[0] >= MIN_WITNESSED * min(shares[1], 1.0)


def _spread(base: list[InstructionCounts], name: str) -> float:
    """|log| of the two base runs' ratio for `name` (0 with one run)."""
    if len(base) < 2:
        return 0.0
    a, b = (_count(w, name) or 0 for w in base[:2])
    return abs(math.log(max(a, 1) / max(b, 1)))


def _moved(t: float, b: float, spread: float) -> bool:
    return abs(math.log(max(t, 1.0) / max(b, 1.0))) > max(math.log1p(MIN_INSTRUCTION_CHANGE), SPREAD_FACTOR * spread)


def _timed(c: Change) -> bool:
    return c.type in (DEGRADATION, OPTIMIZATION)


# Time and instructions moving opposite ways imply the time per instruction moved by both together.
# Memory and branch effects explain some of that (snappy: 1.6% fewer instructions, 12% more time:
# 1.14x); beyond this factor the time is what is wrong: leveldb's `DBIter::Next` read -90% with 20%
# more instructions (12x), its stack samples missing the callee it reaches by a tail call.
MAX_PER_INSTRUCTION_SHIFT = 4.0


def _conflict(c: Change, b: float, t: float, spread: float, allow: tuple[float, str]) -> Change | None:
    if not (_timed(c) and _moved(t, b, spread) and (c.type == DEGRADATION) != (t > b)):
        return None
    figures = f"time {c.relative:+.1%} but inclusive instructions {t / b - 1:+.1%} (callgrind; A/A spread " \
              f"±{math.expm1(spread):.1%})"
    instr, time = abs(math.log(max(t, 1.0) / max(b, 1.0))), abs(math.log1p(c.relative))
    if instr >= time:
        return replace(c, type=CONFLICT, method=f"conflict: {figures}: no verdict in time's direction; {c.method}")
    if instr + time > math.log(MAX_PER_INSTRUCTION_SHIFT):
        return replace(c, type=CONFLICT, method=f"conflict: {figures}: each instruction would have taken "
                       f"{math.exp(instr + time):.1f}x {'less' if c.relative < 0 else 'more'} time, more than "
                       f"memory or branches explain ({MAX_PER_INSTRUCTION_SHIFT:g}x): no verdict in time's "
                       f"direction; {c.method}")
    return replace(c, method=f"{c.method}; {figures}, by less than the time moved: each instruction took "
                   f"{_per_instruction(c)} (memory, cache, branches), time decides")


def _per_instruction(c: Change) -> str:
    """How the time of an instruction moved when time and instructions moved opposite ways."""
    return "longer" if c.type == DEGRADATION else "less time"


# The placement spread of a check is measured on the functions whose instructions did not move in it
# (their time changes are where their code landed, and noise), when there are this many of them: the
# larger of PLACEMENT_SPREAD and the PLACEMENT_QUANTILE of their absolute changes.  A quantile, not
# twice the median: on ninja with a 2x slower `State::GetNode` the 37 such functions' changes had a
# median of 13% and a 90th percentile of 50%, and an untouched `std::vector<Edge*>::_M_realloc_insert`
# read -63% [-81%, -29%] on 11,924,699 instructions on both sides (bench/aa.py).
MIN_PLACEMENT_FUNCTIONS = 5
PLACEMENT_QUANTILE = 0.9


def placement(pairs: list[tuple[Change, float, float, float]]) -> tuple[float, str]:
    """This check's placement spread (relative) and how it was found, from (change, base, target,
    spread) of every function with counts on both sides."""
    still = sorted(abs(c.relative) for c, b, t, spread in pairs
                   if not _moved(t, b, spread) and math.isfinite(c.relative))
    if len(still) < MIN_PLACEMENT_FUNCTIONS:
        return PLACEMENT_SPREAD, f"±{PLACEMENT_SPREAD:.0%}"
    measured = float(still[int(PLACEMENT_QUANTILE * (len(still) - 1))])
    return (max(PLACEMENT_SPREAD, measured), f"±{max(PLACEMENT_SPREAD, measured):.0%}: the larger of "
            f"{PLACEMENT_SPREAD:.0%} and the {PLACEMENT_QUANTILE:.0%} quantile of the changes of the {len(still)} "
            "functions whose instructions did not move")


def _placement(c: Change, b: float, t: float, spread: float, allow: tuple[float, str]) -> Change | None:
    if not _timed(c) or _moved(t, b, spread):
        return None
    if not c.changed:
        why = "and the same machine code (the diff did not change it): only where it sits differs"
    elif not (c.ci_low > allow[0] or c.ci_high < -allow[0]):
        why = f"reaches into this check's placement spread ({allow[1]})"
    else:
        return None  # a changed function's shift wholly beyond the spread stands
    return replace(c, type=NO_CHANGE, method=f"{c.method}; same instructions on both sides (callgrind): "
                   f"{c.relative:+.1%} [{c.ci_low:+.0%}, {c.ci_high:+.0%}] {why}: code placement, not a change")


def _instructions(c: Change, b: float, t: float, spread: float, allow: tuple[float, str]) -> Change | None:
    if c.changed and c.type in (NO_CHANGE, UNRESOLVED) and _moved(t, b, spread) and t > b:
        time = "" if c.type == UNRESOLVED else f"; time within the threshold: {c.relative:+.1%} [{c.ci_low:+.0%}, {c.ci_high:+.0%}]"
        return replace(c, type=INSTRUCTIONS, method=f"{c.method}{time}; inclusive instructions {t / b - 1:+.1%} "
                       f"(callgrind; A/A spread ±{math.expm1(spread):.1%})")
    return None


RULES = (_conflict, _placement, _instructions)  # the first that applies decides (module docstring)


def annotate(changes: list[Change], target: list[StoredProfile], base: list[StoredProfile]) -> list[Change]:
    """The changes with the instruction counts beside them, each judged by the first of RULES that
    applies to it (a rule may also keep the verdict and say why: the first that answers decides)."""
    tw, bw = runs(target)[0], runs(base)[0]
    if not tw or not bw:
        return changes
    scale = _Scale.of(changes, tw, bw)
    counted, unwitnessed = {}, {}
    for c in changes:
        t, b = _inclusive(tw, c.function), _inclusive(bw, c.function)
        if t is None or b is None:
            continue
        c = replace(c, instructions=(b, t))
        if scale.witnessed(c, (b, t)):
            counted[c.function] = (c, b, t, _spread(bw, c.function))
        else:
            instructions, time = scale.shares(c, (b, t))
            unwitnessed[c.function] = replace(c, method=f"{c.method}; its instructions do not witness its time "
                                              f"({instructions:.2%} of the run's, callgrind, for {time:.0%} of "
                                              "its time: it mostly waits, for threads, I/O or locks)",
                                              decided="time; its instructions do not witness it (it mostly waits)"
                                              if _timed(c) else "")
    allow = placement(list(counted.values()))
    out = []
    for c in changes:
        if c.function not in counted:
            out.append(unwitnessed.get(c.function, c))
            continue
        c, b, t, spread = counted[c.function]
        c = next((d for rule in RULES if (d := rule(c, b, t, spread, allow)) is not None), c)
        if _timed(c) and _moved(t, b, spread) and (c.type == DEGRADATION) == (t > b):
            # instructions locate, time confirms (first among equals: change.report_order)
            c = replace(c, cause=True, method=f"{c.method}; inclusive instructions {t / b - 1:+.1%} the same way "
                                              "(callgrind): a cause")
        out.append(replace(c, decided=_decided(c, b, t, spread, allow)) if _timed(c) else c)
    return out


def _decided(c: Change, b: float, t: float, spread: float, allow: tuple[float, str]) -> str:
    """What decided a time verdict that met the counts, in a few words (`Change.decided`)."""
    if c.cause:
        return "time and instructions (a cause)"
    if _moved(t, b, spread):
        return (f"time; instructions {t / b - 1:+.1%} the other way, by less: each instruction took "
                f"{_per_instruction(c)}")
    return f"time; the same instructions, but the diff changed it and its interval lies beyond placement (±{allow[0]:.0%})"


def note(target: list[StoredProfile], base: list[StoredProfile]) -> str:
    """What the witness did for this workload, for the report ("" when no side ran it)."""
    (tw, terr), (bw, berr) = runs(target), runs(base)
    if tw and bw:
        learnt = (f" (A/A spread 0: the base's two runs at {bw[0].spread_from[:12]} counted every function alike, "
                  "so it ran once)" if len(bw) == 1 and bw[0].spread_from else "")
        return (f"instruction witness: callgrind, {len(bw)} base and {len(tw)} target run(s){learnt}; total "
                f"{_mean_total(bw):,.0f} -> {_mean_total(tw):,.0f} instructions a run")
    errors = sorted(set(terr + berr))
    return f"instruction witness: none ({'; '.join(errors)}); time only" if errors else ""


@dataclass(frozen=True)
class Work:
    """How far a function's inclusive instructions moved between the sides, as a share of the base's,
    its A/A spread added (|t / b - 1| + the spread); `alike`: not moved by the witness's own measure
    (`_moved`), so that a time verdict stands only beyond the placement spread (`_placement`)."""

    moved: float
    alike: bool


def work_moved(changes: list[Change], target: Sequence[InstructionCounts], base: Sequence[InstructionCounts],
               ) -> dict[str, Work]:
    """Each function's `Work` from the sides' callgrind runs, where both sides counted it and its counts
    witness its time (`_Scale.witnessed`; not a function that mostly waits).  What the rounds' stop rule
    reads of the witness (`checks.paired.same_work`)."""
    tw, bw = [w for w in target if not w.error], [w for w in base if not w.error]
    if not tw or not bw:
        return {}
    scale, out = _Scale.of(changes, tw, bw), {}
    for c in changes:
        t, b = _inclusive(tw, c.function), _inclusive(bw, c.function)
        if t is not None and b and scale.witnessed(c, (b, t)):
            spread = _spread(bw, c.function)
            out[c.function] = Work(abs(t / b - 1) + math.expm1(spread), not _moved(t, b, spread))
    return out


def _mean_total(ws: list[InstructionCounts]) -> float:
    return sum(w.total for w in ws) / len(ws)
