"""Pipelines (DESIGN.md §7): which methods run, in which order, with which parameters.

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
from dataclasses import dataclass, field

from gitperf import methods
from gitperf.callgraph import ROOT, CallGraph
from gitperf.difftrace import DiffResult
from gitperf.errors import InputError
from gitperf.model import FunctionStats

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
        overrides[name] = _parse(value)
    return tuple(chosen), overrides


def run(chosen: tuple[str, ...], params: dict[str, object], cg: CallGraph, candidates: frozenset[str],
        stats: dict[str, FunctionStats], diff: DiffResult | None,
        dropped_before: dict[str, str] | None = None) -> PlanChange:
    """Apply the methods in order; each sees what the previous ones left.  `dropped_before`: what the
    baseline's plan left out by dynamic baseline, and why (methods.Context)."""
    protected = diff.protected if diff and "diff-tracing" in chosen else frozenset()
    keep = set(candidates)
    removed: dict[str, dict[str, str]] = {}

    def apply(name: str, out: dict[str, str]) -> None:
        if out:
            removed[name] = out
            keep.difference_update(out)

    def ctx() -> methods.Context:
        return methods.Context(cg, frozenset(keep), protected, stats, ROOT, dropped_before or {})

    keep_top = int(params["keep_top"])
    for m in chosen:
        if m == "match":
            apply(m, methods.match(ctx()))
        elif m == "diff-tracing" and params.get("standalone"):
            apply(m, {n: "diff tracing (standalone): not changed by this commit" for n in keep
                      if n not in protected and n != ROOT})
        elif m == "static-baseline":
            apply(m, methods.static_baseline(ctx(), keep_top=1))
        elif m == "trim":
            apply(m, methods.trim(ctx(), keep_top, bool(params["keep_leaf"]), int(params["min_functions"]),
                                  bool(params["strict"])))
        elif m == "prune":
            apply(m, methods.prune(ctx(), int(params["chain_length"]), keep_top=keep_top))
        elif m == "dynamic-baseline" and stats:
            limit = params.get("call_limit")
            apply(m, methods.dynamic_baseline(ctx(), int(limit) if limit is not None else None,
                                              float(params["iqr_ratio"]), float(params["resolution_ns"]),
                                              bool(params["wrappers"])))
    every = {}
    if "dynamic-sampling" in chosen:
        every = methods.dynamic_sampling(ctx(), float(params["step"]), int(params["threshold"]))
    changed = tuple(sorted(protected))
    return PlanChange(frozenset(keep), removed, changed, every, params, chosen)
