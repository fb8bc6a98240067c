"""From profiles, pilot and calibration to the hybrid plan (pure parts of --max-overhead)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gitperf.analysis.elf import FunctionSymbol
from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile
from gitperf.plan import budget, hybrid
from gitperf.plan.costs import call_costs
from gitperf.plan.probes import ProbePlan

COST = {"push": 2500.0, "endbr": 20000.0, "singlestep": 20000.0, "stack_sample": 30000.0}


def plan_of(*names: str) -> ProbePlan:
    fs = tuple(FunctionSymbol(n, 0x1000 + 0x100 * i, 0x80, 0x1000 + 0x100 * i, "push", "push rbp")
               for i, n in enumerate(names))
    return ProbePlan(functions=fs, root=names.index("main"), record_limit=1000)


def prof(mode: str, funcs: list[FunctionStats], probed: tuple[str, ...], traced: tuple[str, ...] = ()) -> Profile:
    h = Header("t", "c", "app", "b", (), "w", "bcc", "m", "k", 0.0, 1.0)
    return Profile(h, Metrics(), PlanRecord(probed=probed, mode=mode, traced=traced), tuple(funcs))


@pytest.mark.parametrize("text,value", [("5%", 0.05), ("5", 0.05), (" 2.5 % ", 0.025), ("100%", 1.0)])
def test_parse_percent(text, value):
    assert hybrid.parse_percent(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "-1%", "five", "nan", "1001"])
def test_parse_percent_refuses_what_is_not_a_budget(text):
    with pytest.raises(ValueError, match="overhead|percentage"):
        hybrid.parse_percent(text)


def test_known_calls_only_where_every_call_was_seen():
    traced = prof("trace", [FunctionStats("main", 1, 9, 9), FunctionStats("f", 70, 5, 5)], ("main", "f", "g"))
    assert hybrid.known_calls(traced) == {"main": 1, "f": 70, "g": 0}  # g probed and never called
    mixed = prof("hybrid", [FunctionStats("main", 1, 9, 9), FunctionStats("f", 0, 5, 5, sampled=True)],
                 ("main", "f", "g"), traced=("main",))
    assert hybrid.known_calls(mixed) == {"main": 1}  # f and g only sampled: unknown, not zero
    assert hybrid.known_calls(prof("stack", [], ("main", "f"))) == {}
    assert hybrid.known_calls(None) == {}


def test_shares_prefer_the_baselines_inclusive_time():
    base = prof("trace", [FunctionStats("main", 1, 1000, 100), FunctionStats("f", 5, 600, 600),
                          FunctionStats("g", 5, 300, 300)], ("main", "f", "g"))
    pilot = hybrid.Pilot(0.2, {"f": 0.5, "h": 0.2})
    assert hybrid.inclusive_shares(base, pilot) == {"main": 1.0, "f": 0.6, "g": 0.3, "h": 0.2}
    assert hybrid.inclusive_shares(None, pilot) == pilot.shares


def test_choose_traces_the_changed_and_cheap_samples_the_frequent_and_keeps_every_function():
    plan = plan_of("main", "parse", "hot_leaf", "report", "new")
    calls = {"main": 1, "parse": 50, "hot_leaf": 5e6, "report": 3}  # "new": no count anywhere
    pilot = hybrid.Pilot(0.5, {"hot_leaf": 0.6, "parse": 0.2})
    hyb, choice, rates = hybrid.choose(plan, hybrid.Inputs(plan.names, 0.05, pilot, COST, calls, pilot.shares,
                                                         changed=("parse", "new")))
    # samples land anywhere
    assert hyb.mode == "hybrid"
    assert hyb.functions == plan.functions
    assert set(choice.traced) == {"main", "parse", "report"}
    assert hyb.traced == frozenset(choice.traced)
    assert [hyb.functions[i].name for i in hyb.probed_ids()] == ["main", "parse", "report"]
    assert not hyb.is_traced("hot_leaf")
    assert hyb.is_traced("parse")
    assert hyb.stack_hz == choice.stack_hz >= budget.MIN_HZ
    assert choice.budget_ns == pytest.approx(0.05 * 0.5e9)
    assert choice.predicted_ns <= choice.budget_ns * (1 + 1e-9)
    assert "unknown" in choice.why["new"]
    assert "more than" in choice.why["hot_leaf"]
    assert rates.value <= choice.bound + 1e-9


def test_watch_weighs_like_a_change():
    plan = plan_of("main", "a", "b")
    pilot = hybrid.Pilot(0.01, {})
    calls = {"main": 1, "a": 10, "b": 10}
    # 0.5 ms: the timer's reserve takes all of it unless a function weighs like a change
    inputs = hybrid.Inputs(plan.names, 0.05, pilot, COST, calls, {"a": 0.9})
    assert hybrid.choose(plan, inputs)[1].traced == ("main",)
    assert hybrid.choose(plan, replace(inputs, watch=("b",)))[1].traced == ("b", "main")


def test_uncounted_are_the_changed_and_watched_functions_without_a_count():
    names = ("main", "a", "b", "c", "d")
    calls = {"main": 1, "a": 10}
    # a is counted; b changed and c watched are not; d weighs little and waits for the timer;
    # gone is not in the binary, and the root is always traced anyway
    assert hybrid.uncounted(names, calls, changed=("a", "b", "gone", "main"), watch=("c",)) == ("b", "c")
    assert hybrid.uncounted(names, calls, changed=()) == ()


def test_a_finished_counting_pass_settles_every_count_a_stopped_one_only_the_too_costly():
    cost = {"cheap": 2500.0, "hot": 2500.0}
    counts = {"cheap": 40, "hot": 100_000}
    budget_ns = 5e6  # 5 ms: 2000 calls at 2.5 us
    assert hybrid.counts_from_pass(counts, True, cost, budget_ns) == {"cheap": 40.0, "hot": 100000.0}
    # stopped at the deadline: 40 calls so far say nothing about the whole run; 100000 already cost 250 ms
    assert hybrid.counts_from_pass(counts, False, cost, budget_ns) == {"hot": 100000.0}


def test_the_counting_deadline_is_past_any_run_whose_probes_fit_the_budget():
    native, b = 0.5, 0.05
    deadline = hybrid.counting_deadline(native, b)
    assert deadline > native * (1 + b) + 0.1  # a run within budget, with noise, finishes first
    # a run stopped at the deadline spent more than the budget on probes: native work is at most native_s
    assert deadline - native > b * native


def test_counted_calls_let_the_changed_function_be_traced():
    plan = plan_of("main", "parse", "hot")
    pilot = hybrid.Pilot(0.5, {"hot": 0.6})
    before = hybrid.choose(plan, hybrid.Inputs(plan.names, 0.05, pilot, COST, {"main": 1}, pilot.shares, ("parse",)))[1]
    assert "parse" not in before.traced
    assert "unknown" in before.why["parse"]
    settled = hybrid.counts_from_pass({"parse": 50}, True, call_costs(plan, COST), before.budget_ns)
    after = hybrid.choose(plan, hybrid.Inputs(plan.names, 0.05, pilot, COST, {"main": 1, **settled}, pilot.shares,
                                                    ("parse",)))[1]
    assert "parse" in after.traced


def test_hotspot_coverage_falls_when_a_plan_leaves_a_hot_function_out():
    """HC against a full trace: a plan without `hot` (80% of the program's own time) covers 20%;
    measured on its own profile it would read 100% (hot's time lands in its caller's exclusive time)."""
    from gitperf.collect.profile import coverage
    full = plan_of("main", "hot", "cold")
    own = [FunctionStats("main", 1, 1000, 100), FunctionStats("cold", 5, 900, 900)]
    hotspots = {"main": 100, "hot": 720, "cold": 180}
    assert coverage(full, own, hotspots)[0] == 1.0  # nothing left out
    narrowed = replace(plan_of("main", "cold"), removed={"trim": ("hot",)})
    assert coverage(narrowed, own, hotspots)[0] == pytest.approx(0.2)
    assert coverage(narrowed, own, {})[0] == 0.0  # no full trace: unknown, shown as "-"
    hybrid_plan = replace(full, mode="hybrid", traced=frozenset({"main", "hot"}))
    assert coverage(hybrid_plan, own, hotspots)[0] == pytest.approx(0.8)
