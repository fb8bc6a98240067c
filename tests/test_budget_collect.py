"""`collect --max-overhead` end to end under real eBPF on the demo history."""

from __future__ import annotations

import json

import pytest
from conftest import collect_json as collect, read_cli
from conftest import git, run_cli

from gitperf.web import create_app

pytestmark = pytest.mark.ebpf


def test_budget_traces_the_changed_function_exactly_and_samples_the_rest_with_intervals(demo_repo):
    root, commits = demo_repo
    [base] = collect(root, commits[2], "--workload", "gate", "--repeat", "1")  # the baseline's exact call counts
    # gate runs ~5 ms natively: 5% would buy a handful of samples; the bench measures 5% on longer runs
    [p] = collect(root, commits[3], "--workload", "gate", "--repeat", "1", "--max-overhead", "100%")
    plan, m = p["plan"], p["metrics"]
    assert plan["mode"] == "hybrid"
    assert "checksum_block" in plan["changed"]
    assert {"main", "checksum_block"} <= set(plan["traced"])
    params = plan["params"]
    assert params["budget_ns"] == pytest.approx(1.0 * m["native_s"] * 1e9)
    assert 0 < params["predicted_ns"] <= params["budget_ns"] * (1 + 1e-9)
    assert m["predicted_overhead_s"] > 0
    assert m["stack_samples"] > 0
    assert m["measured_overhead"] == pytest.approx(m["PRT"] / m["native_s"] - 1)
    # is_word_char (once per character) costs far more to trace than the budget allows; the reason is kept
    assert "is_word_char" not in plan["traced"]
    assert "more than" in plan["reasons"]["is_word_char"]

    [shown] = json.loads(read_cli(root, "show", commits[3], "--json").stdout)["profiles"]
    funcs = {f["name"]: f for f in shown["functions"]}
    [ref] = json.loads(read_cli(root, "show", commits[2], "--json").stdout)["profiles"]
    ref_counts = {f["name"]: f["count"] for f in ref["functions"]}
    # traced: exact counts, as in the full trace of the same workload
    assert not funcs["checksum_block"]["sampled"]
    assert funcs["checksum_block"]["count"] == ref_counts["checksum_block"]
    # sampled: an estimate with its interval, never a bare number
    sampled = [f for f in funcs.values() if f["sampled"]]
    assert sampled
    assert all(f["ci_low"] <= f["total_ns"] <= f["ci_high"] for f in sampled)
    assert all(f["count"] == 0 for f in sampled)  # stack samples count no calls
    assert base["plan"]["mode"] == "trace"

    text = read_cli(root, "show", commits[3]).stdout
    assert "budget 100.0% of native" in text
    assert "predicted" in text
    assert "measured" in text

    # with a full trace of the same commit, the dashboard data carries the budget run's accuracy
    collect(root, commits[3], "--workload", "gate", "--repeat", "1")
    client = create_app(root).test_client()
    profiles = client.get(f"/api/commit/{commits[3]}").get_json()["profiles"]
    by_mode = {q["mode"]: q["metrics"] for q in profiles}
    acc = by_mode["hybrid"]["accuracy"]
    assert set(acc) == {"overlap", "accuracy", "kendall_tau", "recall"}
    assert 0 <= acc["overlap"] <= 1
    assert by_mode["trace"]["accuracy"] is None
    assert by_mode["hybrid"]["measured_overhead"] is not None
    page = client.get(f"/commit/{commits[3]}").get_data(as_text=True)
    assert f"overlap {acc['overlap']:.2f}" in page


def test_budget_without_an_earlier_profile_samples_everything_but_the_root(demo_repo):
    root, commits = demo_repo
    [p] = collect(root, commits[0], "--workload", "small", "--repeat", "1", "--max-overhead", "10")
    assert p["plan"]["traced"] == ["main"]
    assert "unknown" in p["plan"]["reasons"]["fib"]


def test_a_changed_function_no_profile_counted_is_counted_first_then_traced_exactly(demo_repo):
    root, commits = demo_repo
    # no earlier profile anywhere: the counting pass gives checksum_block's calls
    [p] = collect(root, commits[3], "--workload", "gate", "--repeat", "1", "--max-overhead", "100%")
    plan = p["plan"]
    assert "checksum_block" in plan["changed"], plan["reasons"]
    assert "checksum_block" in plan["traced"], plan["reasons"]
    assert plan["params"]["counted"] >= 1
    [full] = collect(root, commits[3], "--workload", "gate", "--repeat", "1")
    shown = {q["id"]: {f["name"]: f for f in q["functions"]}
             for q in json.loads(read_cli(root, "show", commits[3], "--json").stdout)["profiles"]}
    assert shown[p["id"]]["checksum_block"]["count"] == shown[full["id"]]["checksum_block"]["count"] > 0
    assert full["plan"]["mode"] == "trace"


def test_a_watched_function_too_hot_to_trace_is_ruled_out_by_a_stopped_counting_pass(demo_repo):
    root, commits = demo_repo
    cfg = (root / ".gitperf.toml").read_text().replace('mode = "trace"', 'mode = "trace"\nwatch = ["is_word_char"]')
    (root / ".gitperf.toml").write_text(cfg)
    git(root, "commit", "-qam", "watch is_word_char")  # no source change: only the watch asks for a count
    # default: ~370k calls of is_word_char, seconds under tracing; the pass stops after ~0.2 s
    [p] = collect(root, "HEAD", "--workload", "default", "--repeat", "1", "--max-overhead", "5%")
    plan = p["plan"]
    assert plan["traced"] == ["main"]
    assert plan["params"]["counted"] == 1
    why = plan["reasons"]["is_word_char"]
    assert "counting pass ended early (timeout)" in why, why
    assert "at least" in why, why
    assert p["partial"] == ""  # the profile's own run finished; only the pass was stopped
    assert p["metrics"]["PRT"] < 5  # and ran with the timer, not the probes: not seconds


@pytest.mark.parametrize("bad", ["0", "-5%", "lots", "2000%"])
def test_a_bad_budget_is_a_usage_error_before_any_work(demo_repo, bad):
    root, commits = demo_repo
    r = run_cli(root, "collect", commits[0], "--max-overhead", bad)
    assert r.returncode == 2, r.stderr
    assert "--max-overhead" in r.stderr, r.stderr


def test_budget_and_mode_together_are_refused(demo_repo):
    root, commits = demo_repo
    r = run_cli(root, "collect", commits[0], "--max-overhead", "5%", "--mode", "stack")
    assert r.returncode == 2
    assert "--mode" in r.stderr


DEFAULT_SRC = """
__attribute__((noipa)) unsigned hot(unsigned x) {
    for (unsigned j = 0; j < 8; j++) x = x * 2654435761u + j;
    return x;
}
__attribute__((noipa)) unsigned rare(unsigned n) {
    unsigned s = 0;
    for (unsigned i = 0; i < n; i++) s += hot(i);
    return s;
}
int main(void) {
    unsigned s = 0;
    for (int k = 0; k < 40; k++) s += rare(100000);
    return s == 42;
}
"""


def test_a_bare_collect_stays_within_the_default_budget_and_says_what_it_predicts(tmp_path):
    """Issue #27 item 7: with `init`'s configuration a bare `collect` plans within 5% of the native
    time (4 M calls of `hot` would be ~4 s of probe time for a ~20 ms program): the changed function
    is counted and traced exactly, the hot one sampled; --mode is a fixed plan instead."""
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "p.c").write_text(DEFAULT_SRC)
    (repo / ".gitignore").write_text("p\n")
    git(repo, "init", "-q")
    assert run_cli(repo, "init", "--binary", "p", "--command", "./p").returncode == 0
    cfg = repo / ".gitperf.toml"
    cfg.write_text(cfg.read_text().replace('command = "make"', 'command = "cc -O2 -g -o p p.c"'))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    (repo / "p.c").write_text(DEFAULT_SRC.replace("s += hot(i);", "s += hot(i) + 1;"))
    git(repo, "commit", "-qam", "rare changed")

    r = run_cli(repo, "collect")
    assert r.returncode == 0, r.stderr
    assert "overhead budget 5.0%" in r.stderr, r.stderr
    assert "ms predicted" in r.stderr, r.stderr
    assert "budget 5.0% of native" in r.stdout, r.stdout
    assert "predicted" in r.stdout, r.stdout
    profiles = json.loads(read_cli(repo, "show", "--json", "--top", "0").stdout)["profiles"]
    assert len(profiles) == 3  # no `repeat` in the file: the pilot's ~20 ms afford three runs
    shown = profiles[0]
    plan = shown["plan"]
    assert plan["mode"] == "hybrid"
    assert plan["params"]["max_overhead"] == 0.05
    assert plan["changed"] == ["rare"], plan
    assert {"main", "rare"} <= set(plan["traced"]), plan
    assert "hot" not in plan["traced"], plan["reasons"]
    assert "sampled, not traced" in plan["reasons"]["hot"], plan["reasons"]
    assert plan["params"]["predicted_ns"] <= plan["params"]["budget_ns"] * (1 + 1e-9)
    funcs = {f["name"]: f for f in shown["functions"]}
    assert funcs["rare"]["count"] == 40
    assert not funcs["rare"]["sampled"]
    assert funcs["hot"]["sampled"]
    assert funcs["hot"]["ci_low"] <= funcs["hot"]["total_ns"] <= funcs["hot"]["ci_high"]

    [fixed] = collect(repo, "--mode", "stack")
    assert fixed["plan"]["mode"] == "stack"
    assert "max_overhead" not in fixed["plan"]["params"]
