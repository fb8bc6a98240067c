"""End to end on the demo history under real eBPF: collect, then check every kind of commit.

The `profiled` fixture (conftest.py) collects the demo's `gate` workload, five runs per commit in
interleaved rounds; ~2 s a run under full tracing.  In `small` the slowed checksum is too small a
share of the measured time (mostly probe cost) for 5 runs on a noisy machine to be sure at 99%.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, read_cli

pytestmark = pytest.mark.ebpf


def check(root, rev, *args):
    r = read_cli(root, "check", rev, "--json", *args)
    return r.returncode, json.loads(r.stdout)


def test_first_commit_has_no_baseline_exit_3(profiled):
    root, commits = profiled
    code, out = check(root, commits[0])
    assert code == 3
    assert out["result"] == "not-enough-data"


def test_comment_only_commit_is_no_change(profiled):
    root, commits = profiled
    code, out = check(root, commits[1])
    assert code == 0, out
    assert not [c for c in out["changes"] if c["type"] == "degradation"]


def test_rename_is_not_a_degradation(profiled):
    root, commits = profiled
    code, out = check(root, commits[2])
    assert code == 0, out
    kinds = {c["function"]: c["type"] for c in out["changes"]}
    assert kinds.get("checksum_all") == "removed"
    assert kinds.get("checksum_strings") == "new"


def test_slowdown_commit_exits_1_and_names_the_slowed_function_first(profiled):
    root, commits = profiled
    code, out = check(root, commits[3])
    assert code == 1, out
    first = out["changes"][0]
    assert first["function"] == "checksum_block"
    assert first["type"] == "degradation"
    assert first["location"].startswith("mathx.c:")
    assert first["relative"] > 0.3
    assert first["confidence"] >= 0.99
    # the diff of this commit touches checksum_block: it was tested with the larger error budget
    assert first["changed"] is True


def test_speedup_under_full_tracing_is_withheld_not_claimed(profiled):
    """The speed-up removes two of text_generate's three rng_next calls per word.  Under a full trace
    its measured time falls mostly by the probes of the calls it no longer makes: that is not native
    time, and the calibration cannot take ~all of a function's time out reliably, so no verdict on
    it (`check --collect`, which does not trace the callees, finds it: test_paired_collect)."""
    root, commits = profiled
    code, out = check(root, commits[4], "--all")
    assert code == 0, [(c["function"], c["relative"], c["absolute_ns"], c["noise"], c["method"]) for c in out["changes"]
                       if c["type"] == "degradation"]
    [tg] = [c for c in out["changes"] if c["function"] == "text_generate"]
    assert tg["type"] in ("no-change", "unknown", "unresolved"), tg
    assert "probes differ between the sides" in tg["noise"] + tg["method"], tg


def test_markdown_report_of_the_slowdown_stands_on_its_own(profiled):
    root, commits = profiled
    r = read_cli(root, "report", commits[3], "--format", "markdown")
    assert r.returncode == 1
    md = r.stdout
    # what got slower, by how much, how sure, where in the source, and what the commit was
    assert "`checksum_block`" in md
    assert "mathx.c:" in md
    assert "changed in this commit" in md
    assert "Adler-32" in md
    assert "%" in md
    assert "confidence" in md


def test_seven_aa_collections_report_no_degradation(profiled):
    """A/A: seven collections of the comment-only commit, each checked against the one before it and
    every other."""
    root, commits = profiled
    r = run_cli(root, "noise", commits[1], "--workload", "small", "-k", "7", "--repeat", "5", "--json", "-q",
                timeout=1800)
    assert r.returncode == 0, r.stderr
    [rep] = json.loads(r.stdout)
    assert rep["sessions"] == 7
    assert rep["consecutive_checks"] == 7
    assert rep["pairs"] == 42
    # seven checks at a family-wise level of 1% each: one alarm among them happens ~7% of the time by
    # design (seen once in CI: is_even, whose calls nest deeper than the kernel's 64 return probes);
    # two would happen 0.2% of the time
    assert rep["consecutive_with_false_alarm"] <= 1, [f for f in rep["functions"] if f["false_alarms"]]
    # all 42 ordered pairs: each check's family-wise level is 1%, so a rare alarm among them is the
    # level at work (or a machine disturbed for seconds); more than 5% would be miscalibration
    assert rep["pairs_with_false_alarm"] <= 2, [f for f in rep["functions"] if f["false_alarms"]]
    assert rep["recommended_min_relative"] >= 0.05
