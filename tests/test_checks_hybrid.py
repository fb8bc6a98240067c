"""Checks over hybrid (--max-overhead) profiles: a function's traced and sampled values measure
different things, and a function that escaped the samples was not removed."""

from __future__ import annotations

import numpy as np

from gitperf import checks
from gitperf.core.config import CheckConfig
from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile, StoredProfile


def run(commit: str, rng, traced: tuple[str, ...], mode: str = "hybrid", rare: bool = True) -> StoredProfile:
    def noisy(ns: float) -> int:
        return int(ns * np.exp(rng.normal(0, 0.01)))

    funcs = [FunctionStats("main", 1, noisy(1e9), noisy(1e8))]
    # parse: 300 ms inclusive (exact when traced), 100 ms of its own (the samples' estimate)
    if "parse" in traced or mode == "trace":
        funcs.append(FunctionStats("parse", 1000, noisy(3e8), noisy(1e8)))
    else:
        v = noisy(1e8)
        funcs.append(FunctionStats("parse", 0, v, v, sampled=True, ci_low=0.9 * v, ci_high=1.1 * v))
    if rare:  # a few samples in some runs, none in others
        funcs.append(FunctionStats("rare", 0, 2_000_000, 2_000_000, sampled=True, ci_low=5e5, ci_high=6e6))
    h = Header("t", commit, "app", "b", ("./app",), "w", "bcc", "m1", "k", 0.0, 1.0)
    plan = PlanRecord(probed=("main", "parse", "rare"), mode=mode, traced=traced if mode == "hybrid" else ())
    return StoredProfile(commit, 0, commit, Profile(h, Metrics(), plan, tuple(funcs)))


def compare(target, base):
    return checks.compare_workload(checks.Sides("w", target, base), CheckConfig(), opinions=False)


def test_traced_here_sampled_there_is_not_a_slowdown_and_unsampled_is_not_removed():
    rng = np.random.default_rng(1)
    base = [run("b", rng, ("main",)) for _ in range(5)]
    target = [run("t", rng, ("main", "parse"), rare=False) for _ in range(5)]  # parse changed: traced now
    found = {c.function: c.type for c in compare(target, base)}
    assert set(found) <= {"main"} and found.get("main", checks.NO_CHANGE) == checks.NO_CHANGE, found


def test_the_same_numbers_as_exact_traces_would_be_a_slowdown():
    # the counter-test: were both sides traced, parse's 3x would be found (and rare's absence reported)
    rng = np.random.default_rng(1)
    base = [run("b", rng, (), mode="trace") for _ in range(5)]
    target = [run("t", rng, (), mode="trace", rare=False) for _ in range(5)]
    for t in target:
        object.__setattr__(t.profile.functions[1], "total_ns", 3 * t.profile.functions[1].total_ns)
    found = {c.function: c.type for c in compare(target, base)}
    assert found.get("parse") == checks.DEGRADATION and found.get("rare") == checks.REMOVED
