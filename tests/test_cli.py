import json
import re

import pytest
from conftest import run_cli, read_cli
from helpers import make_profile

from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore

COMMANDS = ["init", "collect", "log", "show", "push", "pull", "check", "diff", "report", "serve", "hooks"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(empty_repo, cmd):
    r = run_cli(empty_repo, cmd, "--help")
    assert r.returncode == 0
    assert "Usage:" in r.stdout


def test_top_level_help_documents_exit_codes(empty_repo):
    # `git perf --help` makes git look for a man page; `git perf -h` reaches us, as for any git extension
    r = run_cli(empty_repo, "-h")
    assert r.returncode == 0
    for code in ("0  success", "1  degradation", "2  usage", "3  not enough data", "4  this machine cannot collect",
                 "130 interrupted"):
        assert code in r.stdout


@pytest.mark.parametrize("cmd, codes, not_codes", [
    ("check", ("0", "1", "2", "3", "4", "130"), ()),
    ("show", ("0", "2"), ("1", "3", "4", "130")),
    ("diff", ("0", "2", "3"), ("1", "4")),
    ("collect", ("0", "2", "4", "130"), ("1", "3")),
])
def test_each_commands_help_lists_only_the_exit_codes_it_returns(empty_repo, cmd, codes, not_codes):
    out = run_cli(empty_repo, cmd, "-h").stdout
    listed = re.findall(r"^\s+(\d+)\s+\S", out.split("Exit codes:")[1], re.M)
    assert set(codes) <= set(listed), listed
    assert not set(not_codes) & set(listed), listed


def test_bad_optimization_names_and_args_exit_2(demo_repo):
    root, _ = demo_repo
    r = run_cli(root, "collect", "--optimization-on", "trimm")
    assert r.returncode == 2
    assert "unknown optimization 'trimm'" in r.stderr
    import pytest

    from gitperf.core.errors import InputError
    from gitperf.plan import pipelines
    with pytest.raises(InputError, match="NAME=VALUE"):
        pipelines.resolve("basic", args=("keep_top",))
    with pytest.raises(InputError, match="unknown optimization"):
        pipelines.resolve("basic", off=("nope",))
    chosen, over = pipelines.resolve("basic", on=("trim",), off=("static-baseline",), args=("keep_top=2", "strict=true"))
    assert chosen == ("match", "diff-tracing", "trim")
    assert over == {"keep_top": 2, "strict": True}


def test_outside_a_repository(tmp_path):
    r = read_cli(tmp_path, "log")
    assert r.returncode == 2
    assert "not a git repository" in r.stderr


def test_log_and_show(demo_repo):
    root, commits = demo_repo
    store = NotesStore(open_repo(root))
    store.add(commits[3], make_profile(commits[3], "small"))
    store.add(commits[3], make_profile(commits[3], "default", seed=1))
    r = read_cli(root, "log", "--json")
    rows = json.loads(r.stdout)
    assert [row["commit"] for row in rows] == commits[::-1]
    assert {row["commit"]: row["profiles"] for row in rows}[commits[3]] == 2
    text = read_cli(root, "log").stdout
    assert "2 profiles" in text
    assert "rename checksum_all" in text

    shown = json.loads(read_cli(root, "show", commits[3], "--json").stdout)
    assert shown["commit"] == commits[3]
    assert {p["workload"] for p in shown["profiles"]} == {"small", "default"}
    f = shown["profiles"][0]["functions"][0]
    assert {"name", "count", "total_ns", "exclusive_ns", "sampled"} <= f.keys()
    assert "fn_0<int>" in read_cli(root, "show", commits[3]).stdout


def test_log_reads_each_note_once(demo_repo, monkeypatch):
    """`git perf log` counts a commit's profiles and lists its checks from one reading of its note."""
    from collections import Counter
    root, commits = demo_repo
    NotesStore(open_repo(root)).add(commits[3], make_profile(commits[3], "small"))
    read, original = Counter(), NotesStore.note_text
    monkeypatch.setattr(NotesStore, "note_text", lambda self, c: read.update([c]) or original(self, c))
    assert read_cli(root, "log").returncode == 0
    assert read[commits[3]] == 1, read

    r = read_cli(root, "show", "no-such-rev")
    assert r.returncode == 2
    assert "unknown revision 'no-such-rev'" in r.stderr
    assert "no profiles" in read_cli(root, "show", commits[0]).stdout


@pytest.mark.parametrize("args", [("check", "HEAD", "--collect", "--rounds", "100000000"),
                                  ("collect", "--repeat", "100000000"), ("collect", "--range", "HEAD~1..HEAD", "-j", "10000"),
                                  ("noise", "-k", "100000000")])
def test_counts_are_bounded_before_anything_runs(empty_repo, args):
    """Issue #37: `--repeat 100000000` allocated 3.5 GB before the first run; fixed `--rounds` skip the
    time limit.  A count past what any measurement needs is a usage error."""
    r = run_cli(empty_repo, *args)
    assert r.returncode == 2, r.stderr
    assert "is not in the range" in r.stderr, r.stderr


def test_a_check_against_itself_is_a_usage_error(empty_repo):
    """Issue #37: `check HEAD --base HEAD` compared HEAD with itself on the stored path."""
    r = read_cli(empty_repo, "check", "HEAD", "--base", "HEAD")
    assert r.returncode == 2, r.stderr
    assert "itself" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["--format", "folded"], ["--folded"], ["--format", "json"], ["--json"], []])
def test_show_writes_every_format_to_the_output_file(empty_repo, tmp_path, monkeypatch, args):
    """Issue #60: `show --format folded -o FILE` (and `--folded -o FILE`) printed to standard output and
    ignored -o, as only pprof and speedscope honoured it.  Every format goes to FILE, and says so."""
    from click.testing import CliRunner
    from conftest import history

    from gitperf.cli import main
    [commit] = history(empty_repo, 1)
    monkeypatch.chdir(empty_repo)
    out = tmp_path / "out.txt"
    r = CliRunner().invoke(main, ["show", commit, *args, "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "", r.stdout  # nothing on standard output
    assert f"wrote {out}" in r.stderr
    written = out.read_text()
    assert "parse" in written, written
    if "folded" in args or "--folded" in args:
        assert re.search(r"^main;parse \d+$", written, re.M), written
    if "json" in args or "--json" in args:
        assert json.loads(written)["commit"] == commit


def test_report_html_without_rev_exits_0_once_the_pages_are_written(empty_repo, tmp_path, monkeypatch):
    """Issue #60: `report --format html -o DIR` with no REV exited 3 ("HEAD has no data") after writing
    every page.  Without REV the pages are the result (exit 0); a REV given still sets the exit code."""
    from click.testing import CliRunner
    from conftest import commit_line, history

    from gitperf.cli import main
    history(empty_repo, 3)
    commit_line(empty_repo, 1)  # HEAD: no profile
    monkeypatch.chdir(empty_repo)
    r = CliRunner().invoke(main, ["report", "--format", "html", "-o", str(tmp_path / "site")])
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    r = CliRunner().invoke(main, ["report", "HEAD", "--format", "html", "-o", str(tmp_path / "site2")])
    assert r.exit_code == 3, r.stderr  # HEAD's own check: no data


def test_a_workload_whose_command_changed_starts_a_new_series(empty_repo, tmp_path, monkeypatch):
    """Issue #60: a workload's command changed under the same name was compared with the old command's
    runs.  Runs of another command are another series (`Header.config_key`): the check says why it has
    nothing to compare with, naming both commands."""
    from dataclasses import replace

    import numpy as np
    from click.testing import CliRunner
    from conftest import commit_line, history, profile

    from gitperf.cli import main
    history(empty_repo, 3)
    [head] = commit_line(empty_repo, 1)
    store = NotesStore(open_repo(empty_repo))
    rng = np.random.default_rng(1)
    for _ in range(3):
        p = profile(head, rng, {"parse": 3.0})  # 3x slower, under a 10x longer command
        store.add(head, replace(p, header=replace(p.header, command=("./app", "--rounds", "10"))))
    monkeypatch.chdir(empty_repo)
    r = CliRunner().invoke(main, ["check", "HEAD"])
    assert r.exit_code == 3, r.stdout  # not enough data: nothing earlier ran this command
    assert "workload w's command changed since" in r.stdout + r.stderr, r.stdout
    assert "`./app`, now `./app --rounds 10`" in r.stdout + r.stderr, r.stdout


def test_the_note_of_a_workload_that_runs_no_changed_function_names_it_readably():
    """Issue #60: the one note left that printed a mangled name (a changed C++ function the workload
    never calls)."""
    from gitperf.collect.paired import not_reached
    from gitperf.plan.focus import Focus
    focus = Focus(changed=("_ZN5route10export_dotERKNS_5GraphERSo",), new=(), callers=(), traced=("main",),
                  sampled={}, calls={"_ZN5route10export_dotERKNS_5GraphERSo": 0.0})
    note = not_reached(focus)
    assert "route::export_dot(route::Graph const&, std::ostream&) 0 calls" in note, note
    assert "_ZN" not in note
