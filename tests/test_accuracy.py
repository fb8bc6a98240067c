"""The accuracy metrics on hand-computed cases."""

import pytest

from gitperf.core.model import FunctionStats
from gitperf.stats import accuracy

REF = {"a": 0.5, "b": 0.3, "c": 0.15, "d": 0.05}


def test_shares_are_fractions_of_exclusive_time():
    fs = [FunctionStats("a", 1, 900, 600), FunctionStats("b", 1, 300, 300), FunctionStats("z", 0, 0, 0)]
    assert accuracy.shares(fs) == {"a": pytest.approx(2 / 3), "b": pytest.approx(1 / 3)}
    assert accuracy.shares(fs, by="count") == {"a": 0.5, "b": 0.5}


def test_hot_set_is_the_fewest_functions_covering_90_percent():
    assert accuracy.hot_set(REF) == ["a", "b", "c"]  # 0.5 + 0.3 = 0.8 < 0.9; + 0.15 = 0.95
    assert accuracy.hot_set({"a": 0.95, "b": 0.05}) == ["a"]


def test_identical_profiles_score_one():
    m = accuracy.compare(REF, dict(REF))
    assert m == {"overlap": 1.0, "accuracy": 1.0, "kendall_tau": 1.0, "recall": 1.0}


def test_overlap_and_accuracy_by_hand():
    est = {"a": 0.4, "b": 0.4, "d": 0.2}  # c missed entirely
    # hot set a, b, c: min(.5,.4) + min(.3,.4) + 0 = 0.7 of 0.95
    assert accuracy.overlap(REF, est) == pytest.approx(0.7 / 0.95)
    # |.1| + |.1| + |.15| + |.15| = 0.5 -> (2 - 0.5) / 2
    assert accuracy.instant_accuracy(REF, est) == pytest.approx(0.75)
    assert accuracy.recall(REF, est, 3) == pytest.approx(2 / 3)  # top 3 of est: a/b tie, then d


def test_kendall_tau_sees_order_not_values():
    assert accuracy.kendall_tau(REF, {"a": 0.9, "b": 0.09, "c": 0.009, "d": 0.001}) == pytest.approx(1.0)
    assert accuracy.kendall_tau(REF, {"a": 0.05, "b": 0.15, "c": 0.3, "d": 0.5}) == pytest.approx(-1.0)
    # one swap among four: 5 concordant, 1 discordant pair
    assert accuracy.kendall_tau(REF, {"a": 0.5, "b": 0.15, "c": 0.3, "d": 0.05}) == pytest.approx(4 / 6)


def test_disjoint_profiles_score_zero():
    est = {"x": 1.0}
    assert accuracy.overlap(REF, est) == 0.0
    assert accuracy.instant_accuracy(REF, est) == 0.0
    assert accuracy.recall(REF, est) == 0.0
