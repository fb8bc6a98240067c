"""Checks kept as records (`checks.record`): what `check --collect` stores is what `check`, `report`,
`diff` and the dashboard show later, whatever other checks add to the commit's note; hostile record
lines are ignored like unreadable profiles.  Real git and notes; the statistics on synthetic profiles
(the eBPF end to end is in test_paired_collect.py)."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace

import msgspec
import numpy as np
import pytest
from conftest import git, profile, run_cli, read_cli

from gitperf import checks
from gitperf.checks import record
from gitperf.core import codec
from gitperf.core.config import CheckConfig
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore


def _paired(p, pairing: str, rnd: int):
    return replace(p, plan=replace(p.plan, pairing=pairing, round=rnd))


def _check_session(store, base: str, target: str, pairing: str, slow: dict, rng, runs: int = 5):
    """What `check --collect` writes: both sides' runs marked with one pairing id, and the result."""
    lines = {base: [codec.encode(_paired(profile(base, rng), pairing, r)) for r in range(runs)],
             target: [codec.encode(_paired(profile(target, rng, slow), pairing, r)) for r in range(runs)]}
    store.add_lines(lines)
    result = checks.recompute(store, target, CheckConfig())
    store.add_lines({target: [record.line(result, [pairing])]})
    return result


@pytest.fixture
def three(empty_repo):
    commits = []
    for i in range(3):
        (empty_repo / "a.txt").write_text(f"{i}\n")
        git(empty_repo, "commit", "-qam", f"commit {i}")
        commits.append(git(empty_repo, "rev-parse", "HEAD"))
    return empty_repo, commits


def test_a_record_reads_back_as_the_result_it_stored():
    c = checks.Change("w", "f<int>", checks.DEGRADATION, 0.5, 10.0, 5.0, 0.99, 0.4, 0.6, "paired rounds",
                      base_ns=20.0, target_ns=30.0, votes={"u": "x"}, per_call_ci=(0.1, 0.2), instructions=(1.0, 2.0))
    nan = msgspec.structs.replace(c, function="g", type=checks.UNKNOWN, relative=math.nan, ci_low=math.nan, ci_high=math.nan)
    pair = checks.WorkloadPair("w", "k", 5, "b" * 40, 5, 0, "paired", ("note",))
    r = checks.CheckResult("a" * 40, "b" * 40, checks.DEGRADATION, (c, nan), (pair,), ("warn",))
    rec = record.parse(record.line(r, ["p1"], at=5.0), "a" * 40)
    assert rec.pairings == ("p1",)
    assert rec.time == 5.0
    assert rec.result.changes[0] == c
    assert rec.result.pairs == (pair,)
    assert rec.result.warnings == ("warn",)
    assert math.isnan(rec.result.changes[1].relative)
    assert record.parse(record.line(r, ["p1"]), "c" * 40) is None  # another commit's record


def test_a_records_series_reads_back_and_a_later_record_of_it_supersedes_the_earlier():
    """A paired check's record keeps each workload's series (pairing id and focus) for a re-check to add
    rounds to; a record of every round so far (the same pairing ids) supersedes the earlier ones, a
    record of another series does not (issue #55 item 4)."""
    from gitperf.plan.focus import Focus
    focus = Focus(("f",), ("g",), ("main",), ("main", "f"), {"g": "hot"}, {"main": ("f",)}, 4999, {"f": 10.0},
                  {"a": "b"}, {"h": ("main",)}, "libx.so: 2 changed", ("lf",))
    r = checks.CheckResult("a" * 40, "b" * 40, checks.NO_CHANGE, (), (), ())
    rec = record.parse(record.line(r, ["p1"], at=5.0, series={"w": record.Series("p1", focus)}), "a" * 40)
    assert rec.series == {"w": record.Series("p1", focus)}
    old = record.parse(record.line(r, ["p1"], at=1.0), "a" * 40)  # (a record from before series: none)
    assert old.series == {}
    first, again, other, empty = (replace(rec, pairings=p) for p in (("p1",), ("p1",), ("p2",), ()))
    assert record.superseded_left_out([first, again]) == [again]
    assert record.superseded_left_out([first, other, again]) == [other, again]
    assert record.superseded_left_out([first, other]) == [first, other]
    assert record.superseded_left_out([empty, empty]) == [empty, empty]  # nothing measured: nothing to add to


def test_from_dict_reads_what_to_dict_wrote_and_names_what_does_not_read():
    """Issue #35: `from_dict` beside every `to_dict` of a result (WorkloadPair's renamed keys in one
    class, not undone by hand in the record's reader)."""
    from gitperf.checks.change import ResultFormatError
    c = checks.Change("w", "f", checks.OPTIMIZATION, -0.2, -5.0, -1.0, 0.999, -0.3, -0.1, "m", members=("f", "g"))
    pair = checks.WorkloadPair("w", "k", 3, None, 3, 10, "history")
    r = checks.CheckResult("a" * 40, None, checks.NO_CHANGE, (c,), (pair,))
    assert checks.CheckResult.from_dict(json.loads(json.dumps(r.to_dict(all_functions=True)))) == r
    bad = {**c.to_dict(), "relative": "fast"}
    with pytest.raises(ResultFormatError, match="change.relative: expected a number, got 'fast'"):
        checks.Change.from_dict(bad)
    with pytest.raises(ResultFormatError, match="workload.history_commits: expected an integer, got 1.5"):
        checks.WorkloadPair.from_dict({**pair.to_dict(), "history": 1.5})


@pytest.mark.parametrize("body", [
    "{", "[]", '{"v": 1}', '{"v": 2, "result": {}}', "[" * 50_000 + "]" * 50_000,
    '{"v": 1, "pairings": ["p"], "time": 1, "result": {"commit": "C", "result": "degradation", "changes": [{}], '
    '"workloads": []}}',
    '{"v": 1, "pairings": ["\\ud800"], "time": 1, "result": {"commit": "C", "result": "no-change", "changes": [], '
    '"workloads": []}}',
    '{"v": 1, "pairings": ["p"], "time": 1, "result": {"commit": "C", "result": "bogus", "changes": [], '
    '"workloads": []}}',
])
def test_hostile_record_lines_are_ignored_and_the_profiles_decide(three, body):
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(1)
    store.add_lines({commits[0]: [codec.encode(profile(commits[0], rng)) for _ in range(3)],
                     commits[1]: [codec.encode(profile(commits[1], rng, {"parse": 1.5})) for _ in range(3)]
                     + [record.PREFIX + body.replace("C", commits[1])]})
    assert checks.check(store, commits[1], CheckConfig()).result == checks.DEGRADATION
    r = read_cli(root, "show", commits[1])
    # a record is not an unreadable profile
    assert r.returncode == 0
    assert "could not" not in r.stderr


def test_checking_the_child_leaves_the_parents_stored_verdict_and_runs_alone(three):
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(2)
    first = _check_session(store, commits[0], commits[1], "s1", {"parse": 1.6}, rng)
    assert first.result == checks.DEGRADATION
    assert first.pairs[0].target_profiles == 5
    before = read_cli(root, "check", commits[1], "--json")
    report = read_cli(root, "report", commits[1]).stdout
    # the child's check: commit 1 is its base, with more runs of the same plan (and a slower parse:
    # pooled with the first session's, they would change commit 1's verdict)
    _check_session(store, commits[1], commits[2], "s2", {}, rng, runs=8)
    store = NotesStore(open_repo(root))
    after = read_cli(root, "check", commits[1], "--json")
    assert json.loads(after.stdout) == json.loads(before.stdout)
    assert after.returncode == before.returncode == 1
    assert read_cli(root, "report", commits[1]).stdout == report
    assert "stored result of the paired check" in read_cli(root, "check", commits[1]).stdout
    # recomputed from the profiles, the newest shared session pairs up: still 5 vs 5, never 13 vs 5
    again = checks.recompute(store, commits[1], CheckConfig())
    assert again.pairs[0].target_profiles == 5
    assert again.pairs[0].base_profiles == 5
    assert json.loads(read_cli(root, "check", commits[1], "--recompute", "--json").stdout)["workloads"][0][
        "target_profiles"] == 5
    # the dashboard shows the stored verdict too
    from gitperf.web import create_app
    api = create_app(root).test_client().get(f"/api/commit/{commits[1]}").get_json()
    assert api["check"]["result"] == checks.DEGRADATION


def test_an_accept_after_the_check_turns_the_stored_degradation_into_accepted(three):
    root, commits = three
    store = NotesStore(open_repo(root))
    _check_session(store, commits[0], commits[1], "s1", {"parse": 1.6}, np.random.default_rng(3))
    assert read_cli(root, "check", commits[1]).returncode == 1
    assert run_cli(root, "accept", commits[1], "-m", "intended").returncode == 0
    r = read_cli(root, "check", commits[1], "--json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["result"] == checks.ACCEPTED


def test_a_record_against_another_base_is_not_the_answer_for_this_base(three):
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(4)
    _check_session(store, commits[1], commits[2], "s1", {"parse": 1.6}, rng)
    store.add_lines({commits[0]: [codec.encode(profile(commits[0], rng)) for _ in range(3)]})
    d = json.loads(read_cli(root, "diff", commits[0], commits[2], "--json").stdout)
    assert d["base"] == commits[0]
    assert not any("stored result" in n for w in d["workloads"] for n in w["notes"])


def test_show_prints_one_block_per_session_and_every_run_with_runs(three):
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(5)
    _check_session(store, commits[0], commits[1], "s1", {}, rng, runs=12)
    _check_session(store, commits[1], commits[2], "s2", {}, rng, runs=7)  # commit 1 as the child's base
    out = read_cli(root, "show", commits[1]).stdout
    assert out.count("\nsession: paired check ") == 2
    assert "\nprofile " not in out
    assert "paired check s1, 12 runs" in out
    assert "paired check s2, 7 runs" in out
    assert "median" in out
    assert read_cli(root, "show", commits[1], "--runs").stdout.count("\nprofile ") == 19


def test_a_record_claiming_an_impossible_time_neither_wins_nor_stops_a_command(three):
    """Issue #37: a pulled record dated 2100 saying "degradation" outranked every later check until
    2100, and one dated 1e300 stopped `check` with an OverflowError.  A later check is the current
    one whatever the earlier records claim; an impossible time shows as unknown."""
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(3)
    pair = checks.WorkloadPair("w", "k", 5, commits[0], 5, 0, "paired")
    slow = checks.Change("w", "parse", checks.DEGRADATION, 0.5, 10.0, 5.0, 0.99, 0.4, 0.6, "forged")
    forged = checks.CheckResult(commits[1], commits[0], checks.DEGRADATION, (slow,), (pair,))
    store.add_lines({commits[1]: [record.line(forged, ["p9"], at=4_102_444_800.0),  # 2100-01-01
                                  record.line(forged, ["p8"], at=1e300)]})
    ours = _check_session(store, commits[0], commits[1], "p1", {}, rng)
    assert [r.result.result for r in record.records(store, commits[1])][-1] == ours.result
    assert checks.check(store, commits[1], CheckConfig()).result == ours.result
    r = read_cli(root, "check", commits[1])
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert record.when(1e300) == "unknown time"
    assert record.when(4_102_444_800.0) == "unknown time"


def test_the_current_record_is_the_one_that_arrived_last_whatever_time_it_claims(three, tmp_path):
    """Issue #59: a pulled record dated 60 s to 20 h ahead outranked the check run here after it, and
    `check` (so the hook) showed the pulled verdict.  Records are ordered by when they arrived in
    this clone's notes (its writes and its pulls), never by the time a record claims."""
    root, commits = three
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(root), str(remote))
    git(root, "remote", "add", "origin", str(remote))
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    theirs, store = NotesStore(open_repo(other)), NotesStore(open_repo(root))
    rng = np.random.default_rng(7)
    pair = checks.WorkloadPair("w", "k", 5, commits[0], 5, 0, "paired")
    fine = checks.CheckResult(commits[1], commits[0], checks.NO_CHANGE, (), (pair,))
    theirs.add_line(commits[1], record.line(fine, ["theirs-ahead"], at=time.time() + 20 * 3600))
    theirs.push("origin")
    store.pull("origin")
    _check_session(store, commits[0], commits[1], "ours", {"parse": 1.6}, rng)
    assert record.newest(NotesStore(open_repo(root)), commits[1]).pairings == ("ours",)
    r = read_cli(root, "check", commits[1], "--json")
    assert r.returncode == 1, r.stdout[:300]
    assert json.loads(r.stdout)["result"] == checks.DEGRADATION, r.stdout[:300]
    # a check pulled after ours is the newer news, even dated an hour back
    theirs.add_line(commits[1], record.line(fine, ["theirs-later"], at=time.time() - 3600))
    theirs.push("origin")
    store.pull("origin")
    assert [r.pairings for r in record.records(NotesStore(open_repo(root)), commits[1])] == [
        ("theirs-ahead",), ("ours",), ("theirs-later",)]


def test_a_record_line_that_does_not_read_is_named_in_a_warning(three):
    """Issue #59: a record with an invalid `result` was dropped without a word."""
    root, commits = three
    store = NotesStore(open_repo(root))
    ours = _check_session(store, commits[0], commits[1], "p1", {}, np.random.default_rng(8))
    bad = record.line(ours, ["p2"]).replace(f'"result":"{ours.result}"', '"result":"bogus"')
    store.add_line(commits[1], bad)
    out = json.loads(read_cli(root, "check", commits[1], "--json").stdout)
    assert out["result"] == ours.result
    [warning] = [w for w in out["warnings"] if "check record" in w]
    assert f"note of {commits[1][:12]} line" in warning
    assert "bogus" in warning
    assert "ignored" in warning


def test_a_remote_is_never_an_option_to_git(three, tmp_path):
    """Issue #37: `git perf pull -- --upload-pack=CMD` reached `git fetch` as an option, and git ran CMD."""
    root, _commits = three
    marker = tmp_path / "ran"
    for cmd in ("pull", "push"):
        r = run_cli(root, cmd, "--", f"--upload-pack=touch {marker}")
        assert r.returncode == 2, (cmd, r.stderr)
        assert "is not a remote" in r.stderr, (cmd, r.stderr)
    assert not marker.exists()


def test_names_that_name_nothing_or_hold_control_characters_are_shown_safely(three, tmp_path):
    """Issue #59: a pulled record naming a function no profile holds stopped `report --format html`
    ("rendering /function/nosuchfn failed with HTTP 404"); a newline in a name printed a line of its
    own ("ALL GOOD: no significant change").  Such a name is text without a link, and a control
    character in any name is shown as its escape wherever names are printed."""
    root, commits = three
    store = NotesStore(open_repo(root))
    rng = np.random.default_rng(0)
    result = _check_session(store, commits[0], commits[1], "p1", {"parse": 2.0}, rng)
    evil = "evil\nALL GOOD: no significant change"
    forged = replace(result, changes=[msgspec.structs.replace(result.changes[0], function=n) for n in ("nosuchfn", "a/b", "x y", evil)]
                     + list(result.changes))
    store.add_lines({commits[1]: [record.line(forged, ["p1"])]})
    text = read_cli(root, "check", commits[1]).stdout
    assert not [ln for ln in text.splitlines() if ln.startswith("ALL GOOD")], text
    assert "evil\\x0aALL GOOD" in text, text
    r = read_cli(root, "report", commits[1], "--format", "html", "-o", str(tmp_path / "site"))
    assert r.returncode == 1, r.stderr[-2000:]  # the check's own exit code: slower
    page = (tmp_path / "site" / "commit" / f"{commits[1]}.html").read_text()
    # named, not linked
    assert "nosuchfn" in page
    assert "function/nosuchfn" not in page
    assert 'href="../function/' in page  # (functions a profile holds keep their links)


def test_changed_in_this_commit_is_the_commits_own_diff_not_its_childs():
    """The base side of a paired check carries the pair's diff (its child's): the commit page listed a
    function the child changed as changed in this commit (issue #55).  Only a plan made against another
    commit names this commit's own changes."""
    from gitperf.core.model import Header, Metrics, PlanRecord, Profile
    from gitperf.views.index_rows import own_diff

    def side(commit: str) -> Profile:
        h = Header("t", commit, "app", "b", (), "w", "bcc", "m1", "k", 0.0, 1.0)
        return Profile(h, Metrics(), PlanRecord(probed=("main",), changed=("parse",), base="p" * 40, pairing="x"), ())
    assert own_diff(side("c" * 40)) == ["parse"]  # the target: its own diff against its parent
    assert own_diff(side("p" * 40)) == []  # the parent, as the base of its child's check
