"""The overhead-budget solvers (gitperf/budget.py) against exact optima on random instances."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy.optimize import linprog

from gitperf.plan import budget
from gitperf.plan.budget import Item


def random_items(rng: random.Random, n: int) -> list[Item]:
    return [Item(f"f{i}", calls=rng.choice([1, 10, 1000, 10**5]) * rng.random(), cost_ns=rng.choice([2500, 15000]),
                 weight=rng.uniform(0.1, 100)) for i in range(n)]


def instance(seed: int, n: int, max_share: float) -> tuple[list[Item], float]:
    """n random items and a capacity between 5% and `max_share` of their total cost."""
    rng = random.Random(seed)
    items = random_items(rng, n)
    return items, rng.uniform(0.05, max_share) * sum(it.cost for it in items)


def brute_force(items: list[Item], cap: float) -> float:
    best = 0.0
    for k in range(len(items) + 1):
        for sub in itertools.combinations(items, k):
            if sum(it.cost for it in sub) <= cap:
                best = max(best, sum(it.weight for it in sub))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_two_approximation_is_within_half_of_the_optimum_and_feasible(seed):
    items, cap = instance(seed, 10, 0.6)
    chosen, value = budget.knapsack_2approx(items, cap)
    opt = brute_force(items, cap)
    assert sum(it.cost for it in chosen) <= cap
    assert value == pytest.approx(sum(it.weight for it in chosen))
    assert opt / 2 <= value <= opt + 1e-9
    _rates, bound = budget.fractional(items, cap)
    # the LP relaxation bounds every 0/1 solution
    assert value <= bound + 1e-9
    assert opt <= bound + 1e-9


def test_greedy_alone_can_be_arbitrarily_bad_and_the_single_item_rescues_it():
    # Greedy by density takes the cheap item first and then the valuable one no longer fits.
    cheap = Item("cheap", calls=1, cost_ns=1, weight=2)
    big = Item("big", calls=100, cost_ns=1, weight=100)
    chosen, value = budget.knapsack_2approx([cheap, big], 100)
    assert [it.name for it in chosen] == ["big"]
    assert value == 100


@pytest.mark.parametrize("seed", range(20))
def test_fractional_matches_the_linear_program(seed):
    items, cap = instance(seed, 15, 0.9)
    rates, value = budget.fractional(items, cap)
    lp = linprog([-it.weight for it in items], A_ub=[[it.cost for it in items]], b_ub=[cap],
                 bounds=[(0, 1)] * len(items), method="highs")
    assert value == pytest.approx(-lp.fun, rel=1e-6)
    assert sum(rates[it.name] * it.cost for it in items) <= cap * (1 + 1e-9)
    assert sum(0 < r < 1 for r in rates.values()) <= 1  # only the item at the boundary is split


def test_trace_or_sample_stays_in_budget_and_spends_the_rest_on_the_timer():
    items = [Item("main", 1, 15000, 10), Item("hot_leaf", 3e6, 15000, 5), Item("changed", 12, 15000, 1000),
             Item("mid", 400, 2500, 20), Item("new", math.inf, 15000, 1000)]
    duration, sample = 0.5, 30_000.0
    b = 0.05 * duration * 1e9
    c = budget.trace_or_sample(items, b, duration, sample, always=("main",))
    assert set(c.traced) == {"main", "changed", "mid"}
    assert c.predicted_ns <= b * (1 + 1e-9)
    assert budget.MIN_HZ <= c.stack_hz <= budget.MAX_HZ
    assert c.tracing_ns == pytest.approx(15000 + 12 * 15000 + 400 * 2500)
    assert "unknown" in c.why["new"]
    assert "more than" in c.why["hot_leaf"]
    # A bigger budget buys a faster timer, not a costlier trace of what does not fit anyway.
    c2 = budget.trace_or_sample(items, 2 * b, duration, sample, always=("main",))
    assert c2.traced == c.traced
    assert c2.stack_hz > c.stack_hz


def test_a_budget_below_the_timer_floor_traces_only_what_must_be():
    items = [Item("main", 1, 15000, 10), Item("f", 10, 2500, 50)]
    c = budget.trace_or_sample(items, 1000.0, 1.0, 30_000.0, always=("main",))
    assert c.traced == ("main",)
    assert c.stack_hz == budget.MIN_HZ


def test_the_timer_is_reserved_enough_samples_before_anything_is_traced():
    items = [Item("main", 1, 15000, 10)] + [Item(f"cheap{i}", 1, 15000, 5) for i in range(100)]
    duration, sample = 0.2, 20_000.0
    # 10 ms buys 500 samples and no more: the 100 cheap functions (1.5 ms) are not traced first
    tight = budget.trace_or_sample(items, 10e6, duration, sample, always=("main",))
    assert tight.traced == ("main",)
    assert tight.stack_hz * duration >= 0.99 * budget.MIN_SAMPLES
    # 20 ms: the reserve, then all 100 fit, and the timer gets the rest
    roomy = budget.trace_or_sample(items, 20e6, duration, sample, always=("main",))
    assert len(roomy.traced) == 101
    assert roomy.stack_hz * duration >= budget.MIN_SAMPLES
    assert roomy.predicted_ns <= 20e6 * (1 + 1e-9)
    # a changed function comes before the reserve: its exact counts are worth the most
    changed = items + [Item("changed", 20, 15000, budget.CHANGED_WEIGHT)]
    c = budget.trace_or_sample(changed, 10e6, duration, sample, always=("main",))
    assert c.traced == ("changed", "main")
    assert c.predicted_ns <= 10e6 * (1 + 1e-9)


def test_rates_form_splits_one_function_and_bounds_the_0_1_form():
    items = [Item("main", 1, 15000, 10), Item("a", 100, 15000, 50), Item("b", 1000, 15000, 60),
             Item("c", 10, 2500, 5)]
    duration, sample = 1.0, 30_000.0
    b = budget.MIN_SAMPLES * sample + 15000 + 100 * 15000 + 10 * 2500 + 0.5 * 1000 * 15000
    r = budget.rates_choice(items, b, duration, sample, always=("main",))
    assert r.rates["a"] == 1
    assert r.rates["c"] == 1
    assert r.rates["b"] == pytest.approx(0.5)
    t = budget.trace_or_sample(items, b, duration, sample, always=("main",))
    assert t.value <= r.value <= t.bound  # the bound: the LP with the timer at its floor only


def test_weights_put_changed_functions_first_and_overrides_win():
    w = budget.weights(["main", "hot", "changed", "cold"], changed=["changed"],
                       inclusive_share={"main": 1.0, "hot": 0.9, "changed": 0.0001, "cold": 0.001},
                       levels={"main": 0, "hot": 1, "changed": 5, "cold": 2}, overrides={"cold": 5000})
    assert w["changed"] > w["main"] > w["hot"]
    assert w["cold"] == 5000


def test_paired_plan_samples_what_its_probes_would_distort():
    """Measured on Lua (bench/detection.py): a busy loop added to auxsort turned its single-stepped
    entry into an emulated one, 22.7 us a probed call in the base and 1.6 us in the target; traced,
    12924 calls made every base run 4x longer and every sampled function's estimate followed.
    internshrstr's probes were 90% of its measured time."""
    from gitperf.plan.focus import Costs as _Costs, why_not as _why_not

    def why(name: str, calls: float, share: float = 0.1, base: float = 1600.0, leaf: bool = False) -> str:
        c = _Costs(calls={name: calls}, own={name: calls * 1000.0}, probe_share={name: share},
                   per_call={name: 1600.0}, inside={name: 600.0}, base_per_call={name: base}, native_ns=60e6)
        return _why_not(name, leaf, c)
    assert why("auxsort", 12924, base=22700.0).startswith("its entry instruction changed class")
    assert why("auxsort", 12924) == ""  # the same class on both sides
    assert why("rare", 20, base=22700.0) == ""  # 0.4 ms of difference in a 60 ms run: below 1%
    assert "90% of its measured time" in why("internshrstr", 89310, share=0.9)
    assert why("internshrstr", 89310, share=0.4) == ""


def test_a_count_the_pass_cut_off_is_said_as_a_floor_not_a_count():
    """Issue #55: a note printed "339392 calls" (then 454357) of a function callgrind counts 654,797
    times: the counting pass had ended early.  A function over the budget by a cut-off count says so."""
    from gitperf.analysis.bindiff import BinDiff
    from gitperf.plan.focus import Candidates, Costs, choose
    cands = Candidates(frozenset({"hot"}), frozenset(), frozenset(), {}, 1, BinDiff())
    cut = "tracing costs at least 441 ms (the counting pass ended early (timeout) after 0.40 s at 339392 calls), more"

    def costs(why: dict) -> Costs:
        return Costs(calls={"hot": 339392.0}, own={"hot": 1e9}, probe_share={}, per_call={"hot": 1300.0},
                     inside={"hot": 500.0}, base_per_call={"hot": 1300.0}, native_ns=1e8, budget_ns=2e8, why_uncounted=why)
    assert choose(cands, costs({}))[1]["hot"].startswith("339392 calls x 1.3 us would take")  # a complete count
    assert choose(cands, costs({"hot": cut}))[1]["hot"] == cut
