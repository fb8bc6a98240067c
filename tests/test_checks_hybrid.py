"""Checks over hybrid (--max-overhead) profiles: a function's traced and sampled values measure
different things, and a function that escaped the samples was not removed."""

from __future__ import annotations

import math
from dataclasses import replace

import msgspec
import numpy as np
import pytest
from helpers import NO_VERDICT

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
        funcs.append(FunctionStats("parse", 0, v, v, sampled=True, ci=(0.9 * v, 1.1 * v)))
    if rare:  # a few samples in some runs, none in others
        funcs.append(FunctionStats("rare", 0, 2_000_000, 2_000_000, sampled=True, ci=(5e5, 6e6)))
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
    assert set(found) <= {"main"}, found
    assert found.get("main", checks.NO_CHANGE) in NO_VERDICT, found


def test_the_same_numbers_as_exact_traces_would_be_a_slowdown():
    # the counter-test: were both sides traced, parse's 3x would be found (and rare's absence reported)
    rng = np.random.default_rng(1)
    base = [run("b", rng, (), mode="trace") for _ in range(5)]
    target = [run("t", rng, (), mode="trace", rare=False) for _ in range(5)]
    for i, t in enumerate(target):
        main, parse = t.profile.functions
        slower = (main, msgspec.structs.replace(parse, total_ns=3 * parse.total_ns))
        target[i] = replace(t, profile=replace(t.profile, functions=slower))
    found = {c.function: c.type for c in compare(target, base)}
    assert found.get("parse") == checks.DEGRADATION
    assert found.get("rare") == checks.REMOVED


def _change(name: str, kind: str, base_ns: float, relative: float, excl: float, lo: float, hi: float):
    from gitperf.checks.change import Change
    return Change(workload="w", function=name, type=kind, relative=relative, absolute_ns=base_ns * relative,
                  exclusive_delta_ns=excl, confidence=0.999 if kind == "degradation" else 0.6, ci_low=lo, ci_high=hi,
                  method="paired rounds", base_ns=base_ns, target_ns=base_ns * (1 + relative), changed=True)


TRACED = {"main", "sort"}  # auxsort changed, sampled: its probes were 59% of its measured time


def test_a_sampled_changed_functions_slowdown_is_located_through_its_traced_callers_inclusive_time():
    """The detection bench's case (Lua, auxsort 2x): `auxsort`'s few samples leave it undecided, while
    `sort`, traced, gained 1.34 ms of inclusive time and none of its own; `auxsort` is the only changed
    function `sort` calls, so the degradation is located there and ranked first."""
    from gitperf.checks.verdict import locate
    sort = _change("sort", "degradation", 12.5e6, 0.107, 0.0, 0.068, 0.148)
    aux = _change("auxsort", "no-change", 1.17e6, 0.36, 37e3, -0.22, 1.38)
    out = locate([sort, aux], TRACED, {"sort": ("auxsort",)})
    got = {c.function: c for c in out}
    assert got["sort"] == sort
    a = got["auxsort"]
    assert a.type == "degradation"
    assert a.absolute_ns == sort.absolute_ns
    assert a.confidence == sort.confidence
    assert math.isclose(a.relative, 12.5e6 * 0.107 / 1.17e6)
    assert math.isclose(a.ci_low, 0.068 * 12.5e6 / 1.17e6)
    assert "located through sort" in a.method
    # one estimate: its before and after moved by the gain located in it
    assert math.isclose(a.target_ns - a.base_ns, a.absolute_ns)
    assert math.isclose(a.target_ns / a.base_ns - 1, a.relative)
    assert checks.change.report_order(out)[0].function == "auxsort"


@pytest.mark.parametrize("why, reaches, sort_excl", [
    ("the caller's own time grew: its own code may be slower", {"sort": ("auxsort",)}, 0.5e6),
    ("the caller reaches two changed functions", {"sort": ("auxsort", "partition")}, 0.0),
    ("no call path known", {}, 0.0),
])
def test_a_degradation_is_not_located_where_the_caller_does_not_single_out_one_function(why, reaches, sort_excl):
    from gitperf.checks.verdict import locate
    sort = _change("sort", "degradation", 12.5e6, 0.107, sort_excl, 0.068, 0.148)
    aux = _change("auxsort", "no-change", 1.17e6, 0.36, 37e3, -0.22, 1.38)
    assert locate([sort, aux], TRACED, reaches) == [sort, aux], why


def test_callees_within_a_depth():
    from gitperf.analysis.bindiff import Code
    code = Code({}, {"main": frozenset({"sort"}), "sort": frozenset({"auxsort"}),
                     "auxsort": frozenset({"auxsort", "cmp"})})
    assert code.callees("sort") == {"auxsort"}
    assert code.callees("sort", 2) == {"auxsort", "cmp"}
    assert code.callees("cmp", 3) == set()


def test_a_traced_functions_paired_noise_is_moderated_by_traced_functions_only():
    """Paired rounds of a hybrid plan: `a` is traced (±2% a round) and 6% slower; five sampled
    functions have a few samples each (±40% a round).  Moderating a's spread with theirs made it
    ±19% and hid the slowdown; moderated with the traced functions' it is found, and the sampled
    functions, unchanged, stay unchanged."""
    rng = np.random.default_rng(7)
    sampled = [f"s{i}" for i in range(5)]

    def one(commit: str, r: int, slower: float) -> StoredProfile:
        exact = lambda ns: int(ns * np.exp(rng.normal(0, 0.02)))  # noqa: E731
        funcs = [FunctionStats("main", 1, exact(1e9), exact(1e8)), FunctionStats("a", 100, exact(1e8 * slower), 0),
                 FunctionStats("b", 100, exact(1e8), 0), FunctionStats("c", 100, exact(1e8), 0)]
        for n in sampled:
            v = int(2e7 * np.exp(rng.normal(0, 0.4)))
            funcs.append(FunctionStats(n, 0, v, v, sampled=True, ci=(0.5 * v, 2 * v)))
        h = Header("t", commit, "app", "b", ("./app",), "w", "bcc", "m1", "k", 0.0, 1.0)
        plan = PlanRecord(probed=("main", "a", "b", "c"), mode="hybrid", traced=("main", "a", "b", "c"),
                          round=r)
        return StoredProfile(commit, r, f"{commit}{r}", Profile(h, Metrics(), plan, tuple(funcs)))

    base = [one("b", r, 1.0) for r in range(15)]
    target = [one("t", r, 1.06) for r in range(15)]
    found = {c.function: c for c in compare(target, base)}
    assert found["a"].type == checks.DEGRADATION, (found["a"].noise, found["a"].ci_low)
    assert float(found["a"].noise.split("±")[1].rstrip("%")) < 5, found["a"].noise
    assert all(found[n].type in NO_VERDICT for n in sampled + ["b", "c"]), {n: found[n].type for n in found}
    assert all(found[n].type == checks.NO_CHANGE for n in ["b", "c"]), {n: found[n].type for n in found}  # 2% noise


def test_a_paired_check_has_one_changed_set_the_machine_code_diff():
    """The stop rule and the verdict share one changed set: a paired check's is its builds' machine-code
    diff as the plan stored it, and the source diff is not even computed (it once put the demo's
    `main` in the verdict's set, whose code differed only in a renamed callee, and not in the stop
    rule's).  Unpaired profiles add the source diff's functions."""
    from gitperf.checks import verdict
    from gitperf.core.model import PlanRecord
    rng = np.random.default_rng(2)
    p = run("t", rng, ("main",)).profile
    paired = [replace(p, plan=replace(p.plan, changed=("parse",), pairing="x", round=0))]

    def source_diff():
        raise AssertionError("the source diff is not the paired check's")
    assert verdict.changed(paired, source_diff) == {"parse"}
    alone = [replace(p, plan=PlanRecord(probed=p.plan.probed, changed=("parse",)))]
    assert verdict.changed(alone, lambda: {"main"}) == {"parse", "main"}
