"""Pipelines end to end under real eBPF on the demo history."""

from __future__ import annotations

import json

import pytest
from conftest import collect_json as collect, read_cli

pytestmark = pytest.mark.ebpf


def test_pipelines_cut_probes_keep_the_slowed_function_and_its_degradation_detectable(demo_repo):
    root, commits = demo_repo
    full = collect(root, commits[3], "--workload", "small")[0]  # pipeline none: the reference
    for pipeline in ("basic", "advanced", "full"):
        [p] = collect(root, commits[3], "--workload", "small", "--pipeline", pipeline)
        plan = p["plan"]
        assert p["metrics"]["PL"] < full["metrics"]["PL"], pipeline
        assert "checksum_block" in plan["probed"], pipeline
        assert "checksum_block" in plan["changed"], pipeline
        assert plan["pipeline"] == pipeline
        assert plan["base"] == commits[2]
        removed = {n for names in plan["removed"].values() for n in names}
        # a reason for every removal
        assert removed
        assert all(n in plan["reasons"] for n in removed)
        assert not removed & set(plan["changed"])
    # the degradation is still found when both sides were collected with a pipeline
    for _ in range(5):  # interleaved rounds: a disturbance spoils one run of each side, not one side
        for c in commits[2:4]:
            collect(root, c, "--workload", "gate", "--pipeline", "advanced", "--repeat", "1")
    r = read_cli(root, "check", commits[3], "--json")
    out = json.loads(r.stdout)
    summary = [(c["workload"], c["function"], c["type"], c["relative"], c["confidence"]) for c in out["changes"]][:8]
    assert r.returncode == 1, (out["result"], summary, out["warnings"])
    assert out["changes"][0]["function"] == "checksum_block"


def test_rename_is_reported_by_diff_tracing(demo_repo):
    root, commits = demo_repo
    [p] = collect(root, commits[2], "--workload", "small", "--pipeline", "basic")
    assert p["plan"]["renamed"] == {"checksum_all": "checksum_strings"}
    assert "checksum_strings" not in p["plan"]["changed"]  # same code, new name


def test_dynamic_sampling_second_iteration_lands_near_the_threshold(demo_repo):
    root, commits = demo_repo
    collect(root, commits[0], "--workload", "small")  # iteration 1: the counts
    [p] = collect(root, commits[1], "--workload", "small", "--pipeline", "full",
                  "--optimization-arg", "threshold=200", "--optimization-off", "static-baseline",
                  "--optimization-off", "trim")
    out = read_cli(root, "show", commits[1], "--json")
    [prof] = json.loads(out.stdout)["profiles"]
    every = p["plan"]["sample_every"]
    hot = [f for f in prof["functions"] if f["count"] >= 5 * 200 and every.get(f["name"], 1) > 1]
    assert len(hot) >= 3, [f["name"] for f in prof["functions"]]
    for f in hot:
        assert 0.8 * 200 <= f["recorded"] <= 1.2 * 200, (f["name"], f["count"], every[f["name"]], f["recorded"])
