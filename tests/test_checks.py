"""`git perf check / diff / report` on real git repositories and notes, with synthetic profiles
(the eBPF end-to-end runs on the demo history are in test_check_demo.py)."""

from __future__ import annotations

import html
import json

import msgspec
import numpy as np
import pytest
from conftest import git, history, profile, run_cli, read_cli

from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore


def test_no_profiles_or_no_baseline_exit_3_with_what_to_do(empty_repo):
    r = read_cli(empty_repo, "check")
    assert r.returncode == 3
    assert "git perf collect" in r.stdout
    commits = history(empty_repo, 1)
    r = read_cli(empty_repo, "check", commits[0], "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 3
    assert out["result"] == "not-enough-data"
    assert out["base"] is None


def test_slowdown_exits_1_names_the_function_first_and_json_has_the_documented_shape(empty_repo):
    commits = history(empty_repo, 6, slow_at=5)
    r = read_cli(empty_repo, "check", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["commit"] == commits[5]
    assert out["base"] == commits[4]
    assert out["result"] == "degradation"
    first = out["changes"][0]
    assert {"workload", "function", "type", "relative", "absolute_ns", "confidence", "method", "location"} <= set(first)
    assert (first["function"], first["type"], first["location"]) == ("parse", "degradation", "src/file1.c:11")
    assert 0.4 < first["relative"] < 0.6
    assert first["confidence"] >= 0.99
    assert first["ci_low"] < first["relative"] < first["ci_high"]
    assert [c["function"] for c in out["changes"] if c["type"] == "degradation"] == ["parse"]
    # the history (4 earlier commits) supplied the workload's noise and a z-score
    assert out["workloads"][0]["history"] == 4
    assert first["votes"]["history-z"] == "degradation"


def test_improvement_exits_0_as_optimization(empty_repo):
    history(empty_repo, 3, slow_at=2, factor=0.5)
    r = read_cli(empty_repo, "check", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0
    assert out["result"] == "optimization"
    assert out["changes"][0]["function"] == "parse"
    assert out["changes"][0]["relative"] < -0.4


def test_a_small_change_is_never_a_verdict_and_exits_0(empty_repo):
    """2%: real, but below min_relative = 5%.  Three runs a side cannot tell it from 5%: `parse` reads
    +4% [+1%, +8%], unresolved (the old rule, the estimate against the threshold, read a 3% change with
    this seed as a +5.3% degradation); the run's interval is wider still.  Exit 0, no verdict."""
    history(empty_repo, 3, slow_at=2, factor=1.02)
    r = read_cli(empty_repo, "check", "--json", "--all")
    out = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout
    assert out["result"] == "unresolved", r.stdout
    assert not [c for c in out["changes"] if c["type"] in ("degradation", "optimization")], r.stdout
    parse = next(c for c in out["changes"] if c["function"] == "parse")
    assert parse["type"] == "unresolved", parse
    assert parse["ci_low"] < 0.05 < parse["ci_high"], parse


def test_an_unresolved_run_says_what_it_could_not_exclude_and_every_view_says_the_same(empty_repo):
    """Unresolved from a short history is not a measured zero: the terminal, the markdown report and
    the dashboard's commit page give the run's interval and the threshold it reaches across, the JSON's
    words."""
    from gitperf.web import create_app
    commits = history(empty_repo, 3, slow_at=2, factor=1.02)
    out = json.loads(read_cli(empty_repo, "check", "--json", "--all").stdout)
    run = next(c for c in out["changes"] if c["function"] == "main")
    assert out["result"] == run["type"] == "unresolved", run
    assert run["ci_low"] < -0.05, run
    assert run["ci_high"] > 0.05, run
    said = run["method"].split("; ", 1)[1]
    assert said.startswith(f"unresolved: a change between {run['ci_low']:+.0%} and {run['ci_high']:+.0%} cannot be "
                           "told from ±5%"), said
    assert f"w/main  (src/file0.c:1): {run['relative']:+.1%} [{run['ci_low']:+.0%}, {run['ci_high']:+.0%}] " \
           f"(inclusive time per run, probes taken out); {run['method']}" in read_cli(empty_repo, "check").stdout
    assert said in read_cli(empty_repo, "report", "--format", "markdown").stdout
    assert said in create_app(empty_repo).test_client().get(f"/commit/{commits[2]}").get_data(as_text=True)


def test_a_run_within_the_threshold_says_so_in_every_view(empty_repo):
    """No change is an interval wholly within the threshold; the views give the run's estimate and
    interval alike (here the threshold is 30%: `[check] min_relative` in the work tree's file)."""
    from gitperf.web import create_app
    commits = history(empty_repo, 3, slow_at=2, factor=1.02)
    (empty_repo / ".gitperf.toml").write_text((empty_repo / ".gitperf.toml").read_text() + "\n[check]\nmin_relative = 3.0\n"
                                              if (empty_repo / ".gitperf.toml").exists() else "[check]\nmin_relative = 3.0\n")
    out = json.loads(read_cli(empty_repo, "check", "--json", "--all").stdout)
    run = next(c for c in out["changes"] if c["function"] == "main")
    assert out["result"] == run["type"] == "no-change", run
    assert run["ci_low"] < run["relative"] < run["ci_high"], run
    said = f"he run {run['relative']:+.1%} [{run['ci_low']:+.0%}, {run['ci_high']:+.0%}], within the thresholds (noise: "
    assert f"w: t{said}" in read_cli(empty_repo, "check").stdout
    assert f"T{said}" in read_cli(empty_repo, "report", "--format", "markdown").stdout
    assert f"; t{said}" in create_app(empty_repo).test_client().get(f"/commit/{commits[2]}").get_data(as_text=True)


def test_a_workloads_noise_line_names_each_kind_once():
    """The workload's line names where the noise came from, not every function's figures (the demo's
    paired check listed nine "pooled samples N -> M (inclusive),," before)."""
    from gitperf.checks.check import noise_kind
    labels = ["pooled samples 14 -> 13 (inclusive), ±4% between builds", "pooled samples 9 -> 6 (inclusive)",
              "history (moderated) ±8.0%", "samples (beside history (moderated)) ±30.1%", "replicates ±2.0%; probed time"]
    assert sorted({noise_kind(x) for x in labels}) == ["history (moderated)", "pooled samples", "replicates",
                                                      "samples (beside history (moderated))"]


def test_base_option_diff_and_partial_profiles(empty_repo):
    commits = history(empty_repo, 3, slow_at=1)
    # commit 2 vs commit 1: the slowdown is in both, so nothing changed
    assert read_cli(empty_repo, "check").returncode == 0
    r = read_cli(empty_repo, "check", "--base", commits[0])
    assert r.returncode == 1
    assert "parse" in r.stdout
    d = read_cli(empty_repo, "diff", commits[0], commits[2])
    assert d.returncode == 0
    assert "parse" in d.stdout
    assert "degradation" in d.stdout
    # a crashed run is never a target or a baseline
    (empty_repo / "a.txt").write_text("x\n")
    git(empty_repo, "commit", "-qam", "partial")
    head = git(empty_repo, "rev-parse", "HEAD")
    NotesStore(open_repo(empty_repo)).add(head, profile(head, np.random.default_rng(1), partial="crashed: SIGSEGV"))
    assert read_cli(empty_repo, "check").returncode == 3


def test_markdown_report_is_readable_and_escapes_names(empty_repo):
    history(empty_repo, 3, slow_at=2, slow={"<script>alert(1)</script>": 3.0, "parse": 2.0, "hash|mix": 3.0})
    r = read_cli(empty_repo, "report", "--format", "markdown")
    assert r.returncode == 1
    md = r.stdout
    assert "(commit 2): slower\n" in md
    assert "| workload | function |" in md
    assert "`parse`" in md
    assert "src/file1.c:11" in md
    assert "%" in md
    assert "<script>" not in md.replace("`<script>alert(1)</script>`", "")  # only inside code spans
    assert "`hash\\|mix`" in md  # a | in a name does not break the table
    j = read_cli(empty_repo, "report", "--format", "json", "-o", str(empty_repo / "r.json"))
    assert j.returncode == 1
    assert json.loads((empty_repo / "r.json").read_text())["result"] == "degradation"


def test_corrupt_note_line_is_reported_and_the_check_still_runs(empty_repo):
    commits = history(empty_repo, 2, slow_at=1)
    text = NotesStore(open_repo(empty_repo)).note_text(commits[1])
    git(empty_repo, "notes", "--ref=perf", "add", "-f", "-m", text + "gpz1:not-base64!!", commits[1])
    r = read_cli(empty_repo, "check")
    assert r.returncode == 1
    assert "unreadable" not in r.stderr
    assert "line" in r.stdout


def test_accept_makes_the_slowdown_the_new_baseline(empty_repo):
    commits = history(empty_repo, 6, slow_at=4)
    r = read_cli(empty_repo, "check", commits[4])
    assert r.returncode == 1
    assert run_cli(empty_repo, "accept", commits[4], "-m", "parser now validates input").returncode == 0
    r = read_cli(empty_repo, "check", commits[4], "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0
    assert out["result"] == "accepted"
    assert "validates input" in " ".join(out["warnings"])
    # the next commit is checked against the accepted level; older history is not mixed in
    r = read_cli(empty_repo, "check", commits[5], "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0
    assert out["result"] in ("no-change", "unresolved")
    assert out["workloads"][0]["history"] == 0
    assert not [c for c in out["changes"] if c["type"] in ("degradation", "optimization")], out
    # the marker is a note line like the profiles: it travels with push/pull and is not "unreadable"
    assert "gitperf-accept" in NotesStore(open_repo(empty_repo)).note_text(commits[4])
    assert not NotesStore(open_repo(empty_repo)).read(commits[4])[1]


def test_a_function_missing_from_some_runs_does_not_break_the_check(empty_repo):
    commits = history(empty_repo, 2)
    store = NotesStore(open_repo(empty_repo))
    rng = np.random.default_rng(3)
    for _ in range(4):  # four more runs of the target in which `parse` was never called: median 0
        p = profile(commits[1], rng)
        store.add(commits[1], p.__class__(p.header, p.metrics, p.plan, tuple(f for f in p.functions
                                                                            if f.name != "parse")))
    r = read_cli(empty_repo, "check", "--json", "--all")
    out = json.loads(r.stdout)
    # `parse` called in 3 of 7 runs: its median run is 0 calls and 0 ns (-100%), but runs that split
    # 3:4 say nothing either way (unresolved); the other functions are the same program's
    assert r.returncode == 0, r.stdout
    assert out["result"] in ("no-change", "unresolved"), r.stdout
    by = {c["function"]: c for c in out["changes"]}
    assert (by["parse"]["base_calls"], by["parse"]["target_calls"], by["parse"]["type"]) == (20, 0, "unresolved")
    assert not [c for c in out["changes"] if c["type"] in ("degradation", "optimization")], out
    assert len(by) > 10, by
    assert all(abs(c["relative"]) < 0.05 for n, c in by.items() if n != "parse"), by


# A stored history per outcome of a check (synthetic profiles, `parse` changed at the third commit)
OUTCOMES = {"degradation": {"factor": 1.5}, "optimization": {"factor": 0.5}, "unresolved": {"factor": 1.02},
            "no-change": {"factor": 1.02, "toml": "[check]\nmin_relative = 3.0\n"},
            "accepted": {"factor": 1.5, "accept": "parser now validates input"}}


@pytest.mark.parametrize("view", ["check", "check --json", "report --format markdown", "dashboard"])
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_every_view_says_the_verdict_in_the_same_words(empty_repo, outcome, view):
    """What a user reads agrees with itself: the terminal, the JSON, the markdown report and the
    dashboard's commit page give one check's verdict, in the same words (`views.report.headline`: the
    dashboard showed only the JSON's token, "degradation" where the others said "slower"), and the
    commands exit with its code (1 only for a degradation)."""
    from gitperf.views.report import HEADLINE
    from gitperf.web import create_app
    how = OUTCOMES[outcome]
    commits = history(empty_repo, 3, slow_at=2, factor=how["factor"])
    if "toml" in how:
        (empty_repo / ".gitperf.toml").write_text(how["toml"])
    if "accept" in how:
        assert run_cli(empty_repo, "accept", commits[2], "-m", how["accept"]).returncode == 0
    words, code = HEADLINE[outcome], 1 if outcome == "degradation" else 0
    if view == "dashboard":
        page = create_app(empty_repo).test_client().get(f"/commit/{commits[2]}").get_data(as_text=True)
        assert f'<span class="badge {outcome}">{outcome}</span>' in page
        assert f'<p class="headline">{html.escape(words)}</p>' in page, page[:2000]
        return
    r = read_cli(empty_repo, *view.split())
    assert r.returncode == code, r.stdout + r.stderr
    if view == "check --json":
        assert json.loads(r.stdout)["result"] == outcome
    elif view == "check":
        assert r.stdout.splitlines()[0] == f"git perf check {commits[2][:12]} against {commits[1][:12]}: {words}"
    else:
        assert r.stdout.splitlines()[0].endswith(f"git perf: {commits[2][:12]} (commit 2): {words}"), r.stdout[:300]


def _random_runs(rng, runs: int) -> list:
    """A side's runs with every case `checks.sides` and `stats.timing` tell apart: functions missing
    from a run, sampled in one, probes none, few, beyond CORRECTABLE_SHARE, beyond the time itself or
    in some runs only, series and locations in some runs, calibrations of several spreads."""
    from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile, series_fields
    names = [f"f{i}" for i in range(40)]
    out = []
    for r in range(runs):
        fs = []
        for i, n in enumerate(names):
            if i % 7 == 3 and rng.random() < 0.5:
                continue
            total = int(rng.integers(1, 10**9))
            share = [0.0, 0.05, 0.3, rng.uniform(0, 0.25), 1.2][i % 5] * (rng.random() < 0.8 if i % 4 == 1 else 1)
            sampled = i % 11 == 5 and rng.random() < 0.5
            fs.append(FunctionStats(n, int(rng.integers(0, 1000)), total, int(total * rng.uniform(0, 1)),
                                    probe_ns=int(total * share), sampled=sampled,
                                    ci=(total * 0.9, total * 1.1) if sampled else None,
                                    **series_fields([(1, 5), (2, 7)] if i % 6 == 2 and r else []),
                                    location="" if r == 0 and i % 3 else f"a.c:{i}"))
        h = Header("t", "c", "app", "b", (), "w", "bcc", "m", "k", 0.0, 1.0)
        out.append(Profile(h, Metrics(PRT=1.0), PlanRecord(probed=tuple(names)), tuple(fs),
                           calibration={"entry": 20.0, "entry_sd": float(rng.uniform(1, 5))}))
    return out


def test_a_sides_arrays_measure_what_each_function_measures_alone():
    """`checks.sides` measures the functions every run counted at once (`stats.timing.exact`): each
    must be the `Side` that `_measure_side` gives that function alone, `timings` the `Timing` its
    scalar path gives and a history commit's centers each function's own, value for value and type for
    type (the index's rows are compared to the bit)."""
    from gitperf.checks import sides
    from gitperf.checks.designs import history
    from gitperf.stats import inference, timing
    rng = np.random.default_rng(7)
    arrays = 0
    for runs in (1, 2, 3, 4, 5, 3, 3):
        profiles = timing.Runs(_random_runs(rng, runs))
        by = timing.by_name(profiles)
        for how in (sides.AUTO, sides.PROBED):
            measured = sides._exact_sides(profiles, how)
            arrays += len(measured)
            for name, side in measured.items():
                alone = sides._measure_side(profiles, name, how)
                assert (side, [type(v) for v in msgspec.structs.astuple(side)]) == (alone, [type(v) for v in msgspec.structs.astuple(alone)])
        for name, t in timing.timings(profiles, by=by).items():
            fs = [f for f in by[name] if not timing.stack_only(f)]
            if fs and not any(f.sampled for f in by[name]):
                assert t == timing._traced(name, fs, profiles, len(by[name]) < len(profiles)), name
        for native in (True, False):  # a history commit's centers (`designs.history._commit_levels`)
            levels = history._commit_levels(profiles, native)
            alone = {n: inference.center(v) for n in by if any(v := [
                float(p.times(native)[n]) if p.function(n) else 0.0 for p in profiles if p.function(n) or p.plan.is_traced(n)])}
            assert (levels, [type(v) for v in levels.values()]) == (alone, [float] * len(alone))
    assert arrays > 300  # (most functions went the arrays' way)
