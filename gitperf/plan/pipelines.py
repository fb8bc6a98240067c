"""Pipelines (ARCHITECTURE.md §7): which methods run, in which order, with which parameters.

    basic     match, diff tracing, static baseline
    advanced  basic + trim (soft) + prune + dynamic baseline
    full      advanced with strict trimming + dynamic sampling

Parameters are predicted from the call graph as in the thesis (keep-top = 25% / 50% of its depth for
strict / soft trimming, chain length and min-functions from depth and size) and the baseline
profile (call limit); `--optimization-arg NAME=VALUE` overrides any of them, and
`--optimization-on/-off NAME` adds or removes methods.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

from gitperf.analysis.callgraph import CRITERIA, CallGraph
from gitperf.analysis.difftrace import DiffResult
from gitperf.core.errors import InputError
from gitperf.core.model import ROOT, FunctionStats
from gitperf.plan import methods

METHODS = ("match", "diff-tracing", "static-baseline", "trim", "prune", "dynamic-baseline", "dynamic-sampling")
PIPELINES: dict[str, tuple[str, ...]] = {
    "none": (),
    "basic": ("match", "diff-tracing", "static-baseline"),
    "advanced": ("match", "diff-tracing", "static-baseline", "trim", "prune", "dynamic-baseline"),
    "full": ("match", "diff-tracing", "static-baseline", "trim", "prune", "dynamic-baseline", "dynamic-sampling"),
}
PARAMS = ("keep_top", "keep_leaf", "min_functions", "strict", "chain_length", "call_limit", "iqr_ratio",
          "resolution_ns", "wrappers", "step", "threshold", "criterion", "standalone")


@dataclass(frozen=True)
class PlanChange:
    keep: frozenset[str]
    removed: dict[str, dict[str, str]] = field(default_factory=dict)  # method -> {function: reason}
    changed: tuple[str, ...] = ()
    sample_every: dict[str, int] = field(default_factory=dict)
    params: dict[str, object] = field(default_factory=dict)
    methods: tuple[str, ...] = ()


def predict(pipeline: str, cg: CallGraph, stats: dict[str, FunctionStats]) -> dict[str, object]:
    """The thesis' parameter prediction from call-graph depth and size and the baseline's counts."""
    depth = max(cg.depth, 1)
    reach = len(cg.reachable())
    strict = pipeline == "full"
    counts = sorted(s.count for s in stats.values() if s.count)
    return {
        "strict": strict,
        "keep_top": max(1, math.ceil(depth * (0.25 if strict else 0.5))),
        "keep_leaf": True,
        "min_functions": max(5, math.ceil(0.1 * reach)),
        "chain_length": max(2, depth // 3),
        # the hottest 10% of called functions (at least 10,000 calls) cost the most probe time
        "call_limit": max(10_000, counts[int(0.9 * (len(counts) - 1))]) if counts else None,
        "iqr_ratio": 0.0,
        "resolution_ns": 0.0,
        "wrappers": True,
        "step": 2.0 if depth <= 6 else 1.5,
        "threshold": 1000,
        "criterion": "strict" if pipeline != "basic" else "semi-strict",
        "standalone": False,
    }


# What each --optimization-arg may be: a kind and, for numbers, the range that makes sense.
_BOOL, _INT, _NUM = "true or false", "a whole number", "a number"
PARAM_RANGES: dict[str, tuple[str, float, float]] = {
    "keep_top": (_INT, 0, 10_000), "keep_leaf": (_BOOL, 0, 0), "min_functions": (_INT, 0, 10_000_000),
    "strict": (_BOOL, 0, 0), "chain_length": (_INT, 1, 10_000), "call_limit": (_INT, 1, 10 ** 12),
    "iqr_ratio": (_NUM, 0, 1_000), "resolution_ns": (_NUM, 0, 3.6e12), "wrappers": (_BOOL, 0, 0),
    "step": (_NUM, 1, 1_000), "threshold": (_INT, 1, 10 ** 9), "standalone": (_BOOL, 0, 0),
}
def _checked(name: str, value: str):
    """`value` of parameter `name`, parsed and in range; an InputError that says the range otherwise."""
    if name == "criterion":
        if value not in CRITERIA:
            raise InputError(f"--optimization-arg criterion={value}: expected one of {', '.join(CRITERIA)}")
        return value
    kind, lo, hi = PARAM_RANGES[name]
    v = _parse(value)
    ok = (isinstance(v, bool) if kind == _BOOL else
          not isinstance(v, bool) and isinstance(v, int if kind == _INT else (int, float))
          and math.isfinite(v) and lo <= v <= hi)
    if not ok:
        what = kind if kind == _BOOL else f"{kind} from {lo:g} to {hi:g}"
        raise InputError(f"--optimization-arg {name}={value}: expected {what}")
    return v


def _parse(value: str):
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for conv in (int, float):
        try:
            return conv(value)
        except ValueError:
            pass
    return value


def resolve(pipeline: str, on: tuple[str, ...] = (), off: tuple[str, ...] = (), args: tuple[str, ...] = (),
            ) -> tuple[tuple[str, ...], dict[str, object]]:
    """Methods to run and parameter overrides from the command line; errors name what is valid."""
    for n in on + off:
        if n not in METHODS:
            raise InputError(f"unknown optimization '{n}' (known: {', '.join(METHODS)})")
    chosen = [m for m in METHODS if (m in PIPELINES[pipeline] or m in on) and m not in off]
    overrides = {}
    for a in args:
        name, sep, value = a.partition("=")
        if not sep or name not in PARAMS:
            raise InputError(f"--optimization-arg expects NAME=VALUE with NAME one of {', '.join(PARAMS)}; got {a!r}")
        overrides[name] = _checked(name, value)
    return tuple(chosen), overrides


def _standalone(ctx: methods.Context, params: dict) -> methods.Removal:
    """Diff tracing on its own: keep only what the commit changed (and the root)."""
    if not params.get("standalone"):
        return {}
    return {n: "diff tracing (standalone): not changed by this commit" for n in ctx.candidates
            if n not in ctx.protected and n != ROOT}


def _dynamic_baseline(ctx: methods.Context, params: dict) -> methods.Removal:
    if not ctx.stats:
        return {}
    limit = params.get("call_limit")
    return methods.dynamic_baseline(ctx, int(limit) if limit is not None else None, float(params["iqr_ratio"]),
                                    float(params["resolution_ns"]), bool(params["wrappers"]))


# The removing methods, each `(context, parameters) -> removal`.  A pipeline is an ordered choice of
# them (PIPELINES); dynamic sampling, which removes nothing, runs last on what they left.
STEPS: dict[str, Callable[[methods.Context, dict], methods.Removal]] = {
    "match": lambda ctx, _p: methods.match(ctx),
    "diff-tracing": _standalone,
    "static-baseline": lambda ctx, _p: methods.static_baseline(ctx, keep_top=1),
    "trim": lambda ctx, p: methods.trim(ctx, int(p["keep_top"]), bool(p["keep_leaf"]), int(p["min_functions"]),
                                        bool(p["strict"])),
    "prune": lambda ctx, p: methods.prune(ctx, int(p["chain_length"]), keep_top=int(p["keep_top"])),
    "dynamic-baseline": _dynamic_baseline,
}


def start(chosen: tuple[str, ...], cg: CallGraph, candidates: frozenset[str], stats: dict[str, FunctionStats],
          diff: DiffResult | None) -> methods.Context:
    """What the first method sees: every candidate, and as protected what diff tracing found changed
    (only when diff tracing is one of the chosen methods).  (The baseline's own drops, for the dynamic
    baseline, are the caller's to add: `dropped_before`.)"""
    protected = diff.protected if diff and "diff-tracing" in chosen else frozenset()
    return methods.Context(cg, candidates, protected, stats, ROOT)


def run(chosen: tuple[str, ...], params: dict[str, object], start: methods.Context) -> PlanChange:
    """Apply the methods in order; each sees what the previous ones left.  `start` holds the call
    graph, every candidate, the protected (changed) functions, the baseline's statistics and what its
    plan left out by dynamic baseline."""
    ctx, removed = start, {}
    for m in chosen:
        out = STEPS[m](ctx, params) if m in STEPS else {}
        if out:
            removed[m] = out
            ctx = replace(ctx, candidates=ctx.candidates - set(out))
    every = methods.dynamic_sampling(ctx, float(params["step"]), int(params["threshold"])) \
        if "dynamic-sampling" in chosen else {}
    return PlanChange(ctx.candidates, removed, tuple(sorted(ctx.protected)), every, params, chosen)
