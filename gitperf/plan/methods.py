"""Optimization methods (ARCHITECTURE.md §7): each a pure function of the call-graph resource, the
baseline's statistics and its parameters, returning what to remove and why (or, for dynamic
sampling, a sampling period per function).  None of them ever removes the root or a protected
function (what diff tracing found changed or new).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gitperf.analysis.callgraph import CallGraph
from gitperf.core.model import ROOT, FunctionStats

Removal = dict[str, str]  # function -> reason


@dataclass(frozen=True)
class Context:
    cg: CallGraph
    candidates: frozenset[str]  # the functions still planned
    protected: frozenset[str] = frozenset()
    stats: dict[str, FunctionStats] = field(default_factory=dict)  # baseline profile of this configuration
    root: str = ROOT
    # functions the baseline's own plan left out for their statistics (dynamic baseline) -> why
    dropped_before: dict[str, str] = field(default_factory=dict)

    def removable(self, name: str) -> bool:
        return name in self.candidates and name != self.root and name not in self.protected


def match(ctx: Context) -> Removal:
    """Drop symbols the root cannot reach in the call graph, and library stubs.  Static reachability
    misses calls through function pointers, so a function the baseline saw being called stays."""
    reach = ctx.cg.reachable(ctx.root)
    out = {}
    for n in ctx.candidates:
        if not ctx.removable(n) or (n in ctx.stats and ctx.stats[n].count > 0):
            continue
        node = ctx.cg.functions.get(n)
        if node is not None and node.external:
            out[n] = "external (library stub)"
        elif n not in reach:
            out[n] = f"unreachable from {ctx.root} in the call graph and never seen called"
    return out


def _reachable_kept(ctx: Context, kept: set[str]) -> int:
    return len(kept & ctx.cg.reachable(ctx.root))


def trim(ctx: Context, keep_top: int, keep_leaf: bool = True, min_functions: int = 0, strict: bool = False) -> Removal:
    """Call-graph trimming: keep the top `keep_top` levels (⊤) and, with keep_leaf, the bottom
    (⊥: leaves and functions calling only leaves, where the work usually is); drop the middle.
    Soft mode keeps a middle function that a ⊤ function calls directly; strict does not.
    `keep_top` grows until at least `min_functions` reachable functions stay."""
    levels = ctx.cg.levels
    bottom = ctx.cg.bottom() if keep_leaf else set()
    depth = ctx.cg.depth
    k = max(keep_top, 1)
    while True:
        top = {n for n in ctx.candidates if levels.get(n, 0) < k}
        kept = top | (bottom & ctx.candidates)
        if not strict:
            kept |= {c for t in top for c in ctx.cg.callees(t) if c in ctx.candidates}
        kept |= {n for n in ctx.candidates if not ctx.removable(n)}
        if _reachable_kept(ctx, kept) >= min_functions or k > depth:
            break
        k += 1
    why = f"trimmed: level >= {k}, not in the bottom set" if keep_leaf else f"trimmed: level >= {k}"
    return {n: why for n in ctx.candidates - kept if ctx.removable(n)}


def prune(ctx: Context, chain_length: int, level_window: tuple[int, int] | None = None, keep_top: int = 1) -> Removal:
    """Call-graph pruning: in a chain of functions that each have one caller and one callee, keep
    the first of every `chain_length` links (the chain's time is visible in them); optionally drop
    functions outside a window of levels.  The top `keep_top` levels are never pruned."""
    g, levels = ctx.cg.graph, ctx.cg.levels
    out: Removal = {}

    def link(n: str) -> bool:
        return n in g and g.in_degree(n) == 1 and g.out_degree(n) == 1 and not g.has_edge(n, n)

    seen: set[str] = set()
    for n in sorted(ctx.candidates):
        if n in seen or not link(n):
            continue
        # walk up to the chain's start, then down along it
        start = n
        while link(next(iter(g.predecessors(start)))) and next(iter(g.predecessors(start))) not in seen \
                and next(iter(g.predecessors(start))) != n:
            start = next(iter(g.predecessors(start)))
        chain, cur = [], start
        while link(cur) and cur not in seen:
            chain.append(cur)
            seen.add(cur)
            cur = next(iter(g.successors(cur)))
        if len(chain) >= chain_length:
            for i, c in enumerate(chain):
                if i % chain_length and levels.get(c, 0) >= keep_top and ctx.removable(c):
                    out[c] = f"pruned: link {i + 1} of a {len(chain)}-function call chain"
    if level_window:
        lo, hi = level_window
        for n in ctx.candidates:
            lv = levels.get(n, 0)
            if lv >= keep_top and not lo <= lv <= hi and ctx.removable(n):
                out.setdefault(n, f"pruned: level {lv} outside the window {lo}..{hi}")
    return out


def constant_time(cg: CallGraph) -> set[str]:
    """Functions proven constant time: no loop in their CFG, not recursive, and every function they
    call is constant time too (library calls are not: strlen is linear)."""
    rec = cg.recursive()
    const: set[str] = set()
    pending = {n for n in cg.graph if cg.functions[n].loops == 0 and n not in rec
               and not any(cg.functions[c].external for c in cg.functions[n].callees if c in cg.functions)}
    changed = True
    while changed:  # fixpoint: a function is constant once all its callees are
        changed = False
        for n in list(pending):
            if all(c in const for c in cg.callees(n)):
                const.add(n)
                pending.discard(n)
                changed = True
    return const


def static_baseline(ctx: Context, keep_top: int = 1) -> Removal:
    """Drop functions proven constant time (replaces the thesis' Loopus analysis with loop analysis
    of the CFG): their cost is a constant per call and shows in their callers' exclusive time."""
    levels = ctx.cg.levels
    return {n: "static baseline: constant time (no loops, no recursion, constant-time callees)"
            for n in constant_time(ctx.cg) if ctx.removable(n) and levels.get(n, 0) >= keep_top}


def _hist_quantile(hist: tuple[int, ...], q: float) -> float:
    total = sum(hist)
    if not total:
        return 0.0
    acc = 0
    for i, c in enumerate(hist):
        acc += c
        if acc >= q * total:
            return 2.0 ** i * 1.5  # middle of the log2 bucket [2^i, 2^(i+1))
    return 2.0 ** len(hist)


def dynamic_baseline(ctx: Context, call_limit: int | None = None, iqr_ratio: float = 0.0,
                     resolution_ns: float = 0.0, wrappers: bool = False) -> Removal:
    """From the baseline commit's profile of this configuration: drop functions called more than
    `call_limit` times (their probes cost the most), functions whose calls all take the same time
    (IQR / median <= iqr_ratio, or a median below `resolution_ns`), and wrappers (one callee, as many
    calls as it, under 10% of their time their own)."""
    out: Removal = {}
    for n in ctx.candidates:
        s = ctx.stats.get(n)
        if s is None and n in ctx.dropped_before and ctx.removable(n):
            # Left out of the baseline's profile for its statistics, so it has none newer: left out
            # again for the same reason (probing it every other generation would make plans, and the
            # inclusive times of its callers, alternate between commits).
            out[n] = ctx.dropped_before[n]
            continue
        if s is None or not ctx.removable(n) or not s.count:
            continue
        if call_limit is not None and s.count > call_limit:
            out[n] = f"dynamic baseline: {s.count} calls > call limit {call_limit}"
            continue
        if s.hist and (iqr_ratio or resolution_ns):
            q1, med, q3 = (_hist_quantile(s.hist, q) for q in (0.25, 0.5, 0.75))
            if resolution_ns and med < resolution_ns:
                out[n] = f"dynamic baseline: median call {med:.0f} ns below resolution {resolution_ns:.0f} ns"
                continue
            if iqr_ratio and med > 0 and (q3 - q1) / med <= iqr_ratio:
                out[n] = f"dynamic baseline: constant time (IQR/median {(q3 - q1) / med:.2f} <= {iqr_ratio})"
                continue
        if wrappers:
            callees = [c for c in ctx.cg.callees(n) if c in ctx.stats]
            if len(callees) == 1 and ctx.stats[callees[0]].count == s.count and s.exclusive_ns <= 0.1 * s.total_ns:
                out[n] = f"dynamic baseline: wrapper of {callees[0]}"
    return out


def dynamic_sampling(ctx: Context, step: float = 2.0, threshold: int = 1000) -> dict[str, int]:
    """Per-function sampling period (record every n-th call; every call is still counted).
    Initial estimate without statistics: step^level, x2 for constant-time functions and x1.5 for
    single-loop ones (cheap calls are many).  With the baseline's counts: count / threshold, so a hot
    function records about `threshold` calls."""
    const = constant_time(ctx.cg)
    out = {}
    for n in ctx.candidates:
        s = ctx.stats.get(n)
        if s is not None and s.count:
            every = max(1, round(s.count / threshold))
        else:
            node = ctx.cg.functions.get(n)
            factor = 2.0 if n in const else 1.5 if node is not None and node.loops == 1 and not node.nested else 1.0
            every = max(1, math.ceil(step ** ctx.cg.levels.get(n, 0) * factor))
        if n in ctx.protected or n == ctx.root:
            every = 1 if s is None or s.count <= threshold else every  # changed functions: all calls while cheap
        out[n] = every
    return out
