"""Hybrid collection under an overhead budget (ARCHITECTURE.md §8, after the hybrid data collection paper,
ESEC-FSE 2005): which functions to trace, and how fast the shared stack-sampling timer may run, so
that the predicted probe cost stays within `max_overhead` x the program's native run time.

Pure functions: items (function, expected calls, calibrated cost per call, information weight) and
a budget in, a choice out.  Two forms of the problem:

* **rates** (`fractional`): each function traced for a fraction r_i of its calls.  A continuous
  knapsack: greedy by weight per ns is optimal, O(n log n).  On this engine a uprobe traps on every
  call while attached, so rates are realised only by attaching a function for part of the run; the
  solution is also the LP bound that certifies the other form.
* **trace or sample** (`trace_or_sample`): each function is traced on every call or left to the one
  shared sampling timer.  A 0/1 knapsack (NP-hard); the best of greedy-by-density and the best
  single item that fits is within a factor 2 of the optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

# Information weights (ARCHITECTURE.md §8: changed functions weigh most).  A changed function outweighs
# any unchanged one; among the rest, share of inclusive time (in %) dominates, and nearness to the
# root breaks ties (a top-level function's time explains its callees').
CHANGED_WEIGHT = 1000.0
TIME_WEIGHT = 100.0  # per unit of inclusive-time share of the root
LEVEL_WEIGHT = 10.0  # / (1 + level)

# The shared timer never runs slower than this (fewer samples than ~100 a second give shares too
# uncertain to rank anything) nor faster than the kernel's default perf_event_max_sample_rate
# would sustain for a single process without throttling.
MIN_HZ = 49
MAX_HZ = 9999
# Before any function is traced, the timer gets enough budget for this many samples (or all of it,
# when the budget is smaller): a 30% share is then known to +-2 points (binomial standard error),
# enough to rank the top functions.  Measured (bench/accuracy.py): with the floor at MIN_HZ alone,
# cheap rarely-called functions ate a short workload's budget and left the timer a handful of
# samples (top-3 overlap 0.0-0.5).
MIN_SAMPLES = 500


@dataclass(frozen=True)
class Item:
    name: str
    calls: float  # expected calls per run (math.inf: unknown, never traced)
    cost_ns: float  # calibrated cost of one probed call (entry class)
    weight: float

    @property
    def cost(self) -> float:
        return self.calls * self.cost_ns


@dataclass(frozen=True)
class Choice:
    form: str  # "trace-or-sample" | "rates"
    budget_ns: float
    traced: tuple[str, ...]
    stack_hz: int
    tracing_ns: float  # predicted cost of the traced calls
    sampling_ns: float  # predicted cost of the timer's samples
    value: float  # sum of the traced weights (rates: weight x rate)
    bound: float  # the fractional optimum with the timer at its MIN_HZ floor: no choice can do better
    rates: dict[str, float] = field(default_factory=dict)  # rates form: function -> fraction traced
    why: dict[str, str] = field(default_factory=dict)  # function not traced -> reason

    @property
    def predicted_ns(self) -> float:
        return self.tracing_ns + self.sampling_ns


def weights(names: Iterable[str], changed: Iterable[str], inclusive_share: Mapping[str, float],
            levels: Mapping[str, int], overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Information weight of each function; `overrides` (from the configuration) win."""
    changed = set(changed)
    out = {}
    for n in names:
        w = 1.0 + TIME_WEIGHT * max(inclusive_share.get(n, 0.0), 0.0)
        w += LEVEL_WEIGHT / (1 + levels[n]) if n in levels else 0.0
        out[n] = w + (CHANGED_WEIGHT if n in changed else 0.0)
    return {**out, **{n: float(w) for n, w in (overrides or {}).items() if n in out}}


def _density(item: Item) -> float:
    return math.inf if item.cost <= 0 else item.weight / item.cost


def fractional(items: Iterable[Item], budget_ns: float) -> tuple[dict[str, float], float]:
    """Continuous knapsack: rates r_i in [0, 1] maximising sum w_i r_i subject to sum r_i cost_i <=
    budget.  Greedy by density; only the last item taken gets a fractional rate.  Returns (rates,
    value)."""
    rates, value, left = {}, 0.0, max(budget_ns, 0.0)
    for it in sorted(items, key=_density, reverse=True):
        if not math.isfinite(it.cost):
            rates[it.name] = 0.0
            continue
        r = 1.0 if it.cost <= left else (left / it.cost if it.cost > 0 else 1.0)
        rates[it.name] = r
        value += r * it.weight
        left -= r * it.cost
    return rates, value


def knapsack_2approx(items: Iterable[Item], budget_ns: float) -> tuple[list[Item], float]:
    """0/1 knapsack within a factor 2: the better of greedy-by-density (taking every item that
    still fits) and the single heaviest item that fits."""
    items = [it for it in items if it.cost <= budget_ns]
    greedy, left = [], budget_ns
    for it in sorted(items, key=_density, reverse=True):
        if it.cost <= left:
            greedy.append(it)
            left -= it.cost
    g_value = sum(it.weight for it in greedy)
    best = max(items, key=lambda it: it.weight, default=None)
    if best is not None and best.weight > g_value:
        return [best], best.weight
    return greedy, g_value


def timer_reserve(budget_ns: float, fixed_ns: float, duration_s: float, sample_cost_ns: float) -> float:
    """The timer's share, taken before the knapsack: MIN_HZ over the run, or MIN_SAMPLES samples if
    more (capped by what the budget leaves after the always-traced root)."""
    return max(MIN_HZ * duration_s * sample_cost_ns, min(MIN_SAMPLES * sample_cost_ns, budget_ns - fixed_ns))


def trace_or_sample(items: list[Item], budget_ns: float, duration_s: float, sample_cost_ns: float,
                    always: Iterable[str] = ()) -> Choice:
    """Trace a set of functions on every call and cover the rest with one sampling timer.

    In order: `always` (the root: its one entry gives the load address for symbolising samples);
    the changed functions (weight >= CHANGED_WEIGHT), as many as fit above the timer's MIN_HZ
    floor; the timer's reserve (`timer_reserve`); the other functions, by the 2-approximation on
    what is left; and whatever the traced set leaves over speeds the timer up (to MAX_HZ)."""
    always = set(always)
    fixed = sum(it.cost for it in items if it.name in always)
    per_hz = duration_s * sample_cost_ns  # ns of overhead per Hz of timer over the run
    free = [it for it in items if it.name not in always]
    top_room = max(budget_ns - fixed - MIN_HZ * per_hz, 0.0)
    first, _ = knapsack_2approx([it for it in free if it.weight >= CHANGED_WEIGHT], top_room)
    spent = fixed + sum(it.cost for it in first)
    room = max(budget_ns - spent - timer_reserve(budget_ns, spent, duration_s, sample_cost_ns), 0.0)
    second, _ = knapsack_2approx([it for it in free if it not in first], room)
    chosen = first + second
    _rates, bound = fractional(free, top_room)
    tracing = fixed + sum(it.cost for it in chosen)
    left = budget_ns - tracing
    hz = int(min(MAX_HZ, max(MIN_HZ, left / per_hz if per_hz > 0 else MAX_HZ)))
    picked = {it.name for it in chosen}
    why = {}
    for it in free:
        if it.name in picked:
            continue
        r = top_room if it.weight >= CHANGED_WEIGHT else room
        if not math.isfinite(it.cost):
            why[it.name] = "call frequency unknown (no earlier profile counted it)"
        elif it.cost > r:
            why[it.name] = f"tracing costs {it.cost / 1e6:.3g} ms, more than the {r / 1e6:.3g} ms left for it"
        else:
            why[it.name] = "lower information per ns than the traced set"
    return Choice("trace-or-sample", budget_ns, tuple(sorted(always | picked)), hz, tracing,
                  hz * per_hz, sum(it.weight for it in chosen), bound, why=why)


def rates_choice(items: list[Item], budget_ns: float, duration_s: float, sample_cost_ns: float,
                 always: Iterable[str] = ()) -> Choice:
    """The rates form on the same budget split as `trace_or_sample` (timer reserve first)."""
    always = set(always)
    fixed = sum(it.cost for it in items if it.name in always)
    per_hz = duration_s * sample_cost_ns
    room = max(budget_ns - fixed - timer_reserve(budget_ns, fixed, duration_s, sample_cost_ns), 0.0)
    free = [it for it in items if it.name not in always]
    rates, value = fractional(free, room)
    tracing = fixed + sum(rates[it.name] * it.cost for it in free if math.isfinite(it.cost))
    hz = int(min(MAX_HZ, max(MIN_HZ, (budget_ns - tracing) / per_hz if per_hz > 0 else MAX_HZ)))
    traced = tuple(sorted(always | {n for n, r in rates.items() if r > 0}))
    return Choice("rates", budget_ns, traced, hz, tracing, hz * per_hz, value, value,
                  rates={n: r for n, r in rates.items() if r > 0})
