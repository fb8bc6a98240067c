"""The orchestration of collection without root (issue #35): a paired check's rounds (order, fixed
count, stop rule, time limit), interrupts at every moment, the instruction witness's skips, a failing
workload and a plain collection, bisect, budgeted plans kept, the pre-push hook's range, on real
commits, builds, worktrees, workloads and notes, with the fake engine of `fakeengine` in place of eBPF.
Its numbers are made up: no verdict is asserted here that depends on them, but for a step of ~4x in
the runs' real wall time, which the fake hands on (`bisect`, the hook).  The real engine's own tests
are test_engine, test_hardening_collect and the end-to-end checks of test_paired_collect."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner
from conftest import git
from fakeengine import FakeEngine, invoke
from interrupts import FAKE_GIT_PERF, MOMENTS, busy_neighbour, env_for, interrupt_at, tick_repo

from gitperf.checks import paired as checks_paired
from gitperf import checks
from gitperf.checks import witness
from gitperf.checks.paired import MAX_ROUNDS, MIN_ROUNDS, PairedOptions, check_collect
from gitperf.cli import main
from gitperf.core.config import CheckConfig
from gitperf.core.errors import CollectionAborted, InputError
from gitperf.engine import callgrind
from gitperf.git.repo import open_repo
from gitperf.store.notes import NOTES_REF, NotesStore


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """Two commits of a program that ticks 20 times (~25 ms a run), `tick` changed by the second;
    `git perf` in this process collects with a fake engine (`fake`)."""
    r = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")
    monkeypatch.chdir(r)
    return r


@pytest.fixture
def fake() -> FakeEngine:
    """The engine `_check` and `invoke` collect with."""
    return FakeEngine()


def _check(repo, engine: FakeEngine, **opts):
    said: list[str] = []
    result = check_collect(open_repo(repo), PairedOptions(**opts), CheckConfig(witness="off"), engine, said.append)
    return result, said


def _sides(repo) -> tuple[list, list]:
    """The stored profiles of the check's two sides (head, parent) with their rounds."""
    store = NotesStore(open_repo(repo))
    head, parent = (git(repo, "rev-parse", r) for r in ("HEAD", "HEAD~1"))
    return ([p.profile for p in store.read(head)[0] if p.profile.plan.pairing],
            [p.profile for p in store.read(parent)[0] if p.profile.plan.pairing])


def test_rounds_alternate_which_side_runs_first_and_store_both_sides_once(repo, fake):
    engine = fake
    result, said = _check(repo, engine, rounds=4)
    target, base = _sides(repo)
    assert [p.plan.round for p in target] == [0, 1, 2, 3]
    assert [p.plan.round for p in base] == [0, 1, 2, 3]
    assert len({p.plan.pairing for p in target + base}) == 1
    target_binary = engine.log[0].binary  # the first pilot run is the target's
    rounds = engine.log[-8:]  # before them: the target's pilots and counting run
    firsts = ["target" if rounds[2 * r].binary == target_binary else "base" for r in range(4)]
    assert firsts == ["base", "target", "base", "target"], firsts
    assert all(rounds[2 * r].binary != rounds[2 * r + 1].binary for r in range(4))
    assert sum("round" in s for s in said) == 4
    assert result.exit_code in (0, 1)
    # one record of the check, beside both sides' profiles
    head = git(repo, "rev-parse", "HEAD")
    assert len(NotesStore(open_repo(repo)).record_lines(head, "gitperf-check ")) == 1


def test_a_recheck_adds_its_rounds_to_the_stored_ones_and_one_record_holds_them(repo, fake):
    """Issue #55 item 4: checking the same pair again (the kept builds, the stored plan) runs rounds
    only, numbered on from the stored ones under the same pairing id, and decides on all of them; its
    record, of every round, supersedes the first (`record.read` keeps one), so `check`, the hook and
    the dashboard show one check whose evidence grew."""
    from gitperf.checks import record
    _check(repo, fake, rounds=3)
    runs_before = len(fake.log)
    result, said = _check(repo, fake, rounds=2)
    assert len(fake.log) - runs_before == 4, fake.log[runs_before:]  # two rounds of two runs: no pilot, no counting
    assert any("adding rounds to the 3 stored by the earlier check of this pair" in s for s in said), said
    target, base = _sides(repo)
    assert [p.plan.round for p in target] == [0, 1, 2, 3, 4] == [p.plan.round for p in base]
    assert len({p.plan.pairing for p in target + base}) == 1
    assert len({p.plan.spec for p in target + base}) == 1
    head = git(repo, "rev-parse", "HEAD")
    store = NotesStore(open_repo(repo))
    assert len(store.record_lines(head, "gitperf-check ")) == 2  # both lines kept (notes merge by union) ...
    kept = record.records(store, head)
    # ... and one check read
    assert len(kept) == 1
    assert kept[0].result.pairs[0].target_profiles == 5
    assert "5 interleaved rounds (3 of them stored by earlier checks of this pair, 2 added now)" in \
        " ".join(result.pairs[0].notes)
    # the next re-check's rounds must narrow each interval of this one (`checks.paired.not_narrower`)
    widths = {c.function: c.ci_high - c.ci_low for c in result.changes if c.ci_high - c.ci_low < float("inf")}
    resumed = checks_paired.stored_series(store, head, git(repo, "rev-parse", "HEAD~1"), ())
    assert widths
    assert resumed[result.pairs[0].workload].widths == pytest.approx(widths)
    r = CliRunner().invoke(main, ["check", "HEAD", "--json"])
    assert json.loads(r.stdout)["workloads"][0]["target_profiles"] == 5, r.stdout


def test_fresh_starts_a_new_series_and_a_kept_build_made_again_adds_to_it(repo, fake):
    """`--fresh` measures a plan again and starts a series of its own.  A kept build removed and made
    again is the same binary (the same build id: the build is reproducible at its own path), and adds
    rounds."""
    from gitperf.checks import record
    import shutil
    _check(repo, fake, rounds=2)
    _check(repo, fake, rounds=2, fresh=True)
    target, _base = _sides(repo)
    assert len({p.plan.pairing for p in target}) == 2
    assert len(target) == 4
    head = git(repo, "rev-parse", "HEAD")
    assert [r.result.pairs[0].target_profiles for r in record.records(NotesStore(open_repo(repo)), head)] == [2, 2]
    shutil.rmtree(repo / ".git" / "perf" / "builds")
    _result, said = _check(repo, fake, rounds=2)
    assert any("adding rounds to the 2 stored" in s for s in said), said


def test_a_series_takes_rounds_only_from_the_same_builds_command_and_machine():
    """`why_not_resumed`: another build id on either side, another command or another machine is
    another series (the stored rounds measured something else)."""
    from types import SimpleNamespace
    from gitperf.collect.paired import Resume, why_not_resumed
    from gitperf.core.config import Workload
    from gitperf.core.model import Header, Metrics, PlanRecord, Profile, StoredProfile
    wl = Workload("w", "./s")

    def stored(build_id: str, machine: str = "m1") -> list[StoredProfile]:
        h = Header("t", "c", "s", build_id, tuple(wl.argv), "w", "bcc", machine, "k", 0.0, 1.0)
        return [StoredProfile("c", 0, "i", Profile(h, Metrics(), PlanRecord(probed=("main",)), ()))]

    def ctx(build_id: str, machine: str = "m1"):
        h = Header("t", "c", "s", build_id, (), "w", "bcc", machine, "k", 0.0, 1.0)
        return SimpleNamespace(header_base={"build_id": build_id}, config_key=lambda _wl: h.config_key,
                               target=SimpleNamespace(commit="0123456789abcdef"))
    r = Resume("p", None, stored("b1"), stored("t1"))
    assert why_not_resumed((ctx("b1"), ctx("t1")), wl, r) == ""
    assert "0123456789ab was built again (build id t2" in why_not_resumed((ctx("b1"), ctx("t2")), wl, r)
    assert "was built again" in why_not_resumed((ctx("b2"), ctx("t1")), wl, r)
    assert "the machine" in why_not_resumed((ctx("b1", "m2"), ctx("t1", "m2")), wl, r)
    assert "the workload's command" in why_not_resumed((ctx("b1"), ctx("t1")), Workload("w", "./s --more"), r)


def test_rounds_stop_at_the_first_round_that_leaves_nothing_open(repo, fake, monkeypatch):
    """The stop rule is asked after every round from MIN_ROUNDS on, and the rounds end at its first
    empty answer (here: the second time it is asked)."""
    asked: list[int] = []

    def until(runs, _cfg):
        asked.append(len(runs.target))
        return [] if len(asked) == 2 else ["tick"]
    monkeypatch.setattr(checks_paired, "still_open", until)
    _check(repo, fake)
    target, base = _sides(repo)
    assert asked == [MIN_ROUNDS, MIN_ROUNDS + 1]
    assert len(target) == len(base) == MIN_ROUNDS + 1


SPIN = ("__attribute__((noinline)) long spin(long n) {{ {nop}long x = 0; for (long i = 0; i < n; i++) "
        "x += i * i; return x; }}\nint main(void) {{ return spin(2000000) == 42; }}\n")


@pytest.mark.valgrind
def test_a_changed_function_whose_work_did_not_move_ends_its_rounds_once_they_cannot_resolve_it(tmp_path, monkeypatch):
    """Issue #57, item 3: a commit that changes a function's code but not its speed ends in at most 20
    rounds.  `spin` gets one `nop` more; the instruction witness, run before the rounds, counts a few
    instructions more in ~10 M; the fake engine's times are so noisy (50% a run) that no number of
    rounds resolves it.  The rounds end once they cannot resolve it (from round 10 on), by the
    witness's futility bound (`same_work`), unresolved."""
    repo = tmp_path / "spin"
    repo.mkdir()
    (repo / "s.c").write_text(SPIN.format(nop=""))
    (repo / ".gitperf.toml").write_text('[build]\ncommand = "cc -O2 -g -o s s.c"\nbinary = "s"\n'
                                        '[[workload]]\nname = "w"\ncommand = "./s"\n')
    (repo / ".gitignore").write_text("s\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "spin")
    (repo / "s.c").write_text(SPIN.format(nop='__asm__ volatile("nop"); '))
    git(repo, "commit", "-qam", "one nop more")
    monkeypatch.chdir(repo)
    # times from a fixed 2 ms run: the rounds depend on the seed alone (on this seed, 11 rounds with the
    # rule and all 60 without it), not on how busy the machine is
    engine = FakeEngine(jitter=0.5, run_ns=2e6, seed=3)
    said: list[str] = []
    cfg = CheckConfig()
    result = check_collect(open_repo(repo), PairedOptions(), cfg, engine, said.append)
    target, base = _sides(repo)
    assert said.index(next(s for s in said if "instruction witness: callgrind" in s)) < \
        said.index(next(s for s in said if "round 1:" in s)), "the witness runs before the rounds"
    spin = next(c for c in result.changes if c.function == "spin")
    assert spin.changed, spin
    assert spin.type == checks.UNRESOLVED, spin
    assert len(target) <= 20, [s for s in said if "round" in s][-2:]
    b, t = spin.instructions
    assert 0 < t / b - 1 < 0.01, spin.instructions  # a few instructions more in ~10 M
    work = witness.work_moved(result.changes, target[0].instructions, base[0].instructions)
    assert "spin" in checks_paired.same_work(result.changes, cfg, len(target), MAX_ROUNDS, work), work


@pytest.mark.parametrize("limit, rounds", [(0.0, MIN_ROUNDS), (1e9, MAX_ROUNDS)])
def test_rounds_that_never_decide_stop_at_the_time_limit_or_the_most_rounds(repo, fake, monkeypatch, limit, rounds):
    monkeypatch.setattr(checks_paired, "still_open", lambda runs, cfg: ["tick"])
    _result, said = _check(repo, fake, time_limit_s=limit)
    target, base = _sides(repo)
    assert len(target) == len(base) == rounds
    assert f"round {rounds}: " in next(s for s in reversed(said) if "round" in s)


def test_a_fixed_count_of_rounds_never_asks_the_stop_rule(repo, fake, monkeypatch):
    monkeypatch.setattr(checks_paired, "still_open", lambda runs, cfg: pytest.fail("asked"))
    _check(repo, fake, rounds=2)
    assert [len(s) for s in _sides(repo)] == [2, 2]


@pytest.mark.parametrize("at", ["pilot", "round"])
def test_ctrl_c_in_a_run_stores_nothing_and_leaves_no_worktree(repo, fake, at):
    """KeyboardInterrupt raised inside the engine's run: the pilots' first run, or round 2's."""
    _check(repo, fake, rounds=2)  # how many runs a check makes
    runs = len(fake.log)
    for p in NotesStore(open_repo(repo)).commits():
        git(repo, "notes", "--ref", "refs/notes/perf", "remove", p)
    engine = FakeEngine(fail_at=0 if at == "pilot" else runs - 2)
    with pytest.raises(CollectionAborted, match="nothing was stored"):
        _check(repo, engine, rounds=2)
    assert NotesStore(open_repo(repo)).commits() == []
    assert "gitperf-wt-" not in git(repo, "worktree", "list")


@pytest.mark.parametrize("why, patch", [
    ("valgrind is not installed", {"available": lambda: False}),
    ("over the 30 s budget", {"predicted_s": lambda native_s: 1000.0}),
])
def test_the_instruction_witness_says_why_it_was_skipped_and_keeps_the_reason(repo, fake, monkeypatch, why, patch):
    for name, f in patch.items():
        monkeypatch.setattr(callgrind, name, f)
    said: list[str] = []
    check_collect(open_repo(repo), PairedOptions(rounds=2), CheckConfig(), fake, said.append)
    assert any("instruction witness skipped" in s and why in s for s in said), said
    target, base = _sides(repo)
    assert [c.error for c in target[0].instructions] == [[c.error for c in base[0].instructions][0]]
    assert why in target[0].instructions[0].error
    assert len(base[0].instructions) == 1


@pytest.mark.parametrize("exit_code, words", [(1, "failed: exit status 1"), (139, "crashed: SIGSEGV")])
def test_a_failing_workload_fails_the_check_and_stores_nothing(repo, fake, exit_code, words):
    """Issue #37: a workload that ran the binary and then exited 1 was "no significant change", exit 0,
    stored over the commit's result.  Its runs measure other work: exit 2, naming the workload and
    its command and what it said, nothing stored."""
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace("./s; true", f"./s; echo cannot open input.txt >&2; exit {exit_code}"))
    git(repo, "commit", "-qam", "the workload fails")
    (repo / "s.c").write_text((repo / "s.c").read_text().replace("usleep(999)", "usleep(998)"))  # code to measure
    git(repo, "commit", "-qam", "other code")
    r = invoke(fake, ["check", "HEAD", "--collect"])
    assert r.exit_code == 2, r.stderr
    assert f"workload w {words}" in r.stderr, r.stderr
    assert "nothing was stored" in r.stderr, r.stderr
    assert "./s; echo" in r.stderr  # its command, to run by hand
    assert "its stderr ended with:\n  | cannot open input.txt" in r.stderr  # and what it said
    assert NotesStore(open_repo(repo)).commits() == []


def test_a_round_that_never_reached_main_stops_the_check_and_stores_nothing(repo, fake, monkeypatch):
    """The counting run checks that the workload reaches the binary's main, but a counting run cut at
    its deadline proves nothing of the runs after it, nor does one run of a flaky workload: a round
    whose run never reached main measured nothing, and its "no change" would be read as a finding.
    The check stops at that round, says so, and stores nothing."""
    _check(repo, fake, rounds=2)
    first_round = len(fake.log) - 4  # (two rounds of two runs ended the log)
    engine = FakeEngine(main_until=first_round + 1)  # round 1's second run
    git(repo, "update-ref", "-d", NOTES_REF)  # (the first check's rounds: where the rounds begin)
    with pytest.raises(InputError, match=r"never ran s's main\(\); nothing was stored"):
        _check(repo, engine, rounds=2)
    assert NotesStore(open_repo(repo)).commits() == []


def test_a_plain_collect_stores_one_profile_a_run_and_the_read_commands_show_it(repo, fake):
    """`collect` end to end in this process (build in a worktree, plan, runs, the note), then `log`,
    `show --json` and `check --json` in-process through click's runner."""
    engine = fake
    runner = CliRunner()
    r = invoke(fake, ["collect", "--repeat", "3", "--mode", "trace", "-q"])
    assert r.exit_code == 0, r.stderr
    head = git(repo, "rev-parse", "HEAD")
    stored = NotesStore(open_repo(repo)).read(head)[0]
    assert len(stored) == 3 == len([x for x in engine.log if x.mode == "trace"])
    assert {p.profile.header.engine for p in stored} == {"fake"}
    assert "gitperf-wt-" not in git(repo, "worktree", "list")
    shown = json.loads(runner.invoke(main, ["show", "HEAD", "--json"]).stdout)
    assert {f["name"] for p in shown["profiles"] for f in p["functions"]} >= {"main", "tick"}, shown
    log = runner.invoke(main, ["log"])
    assert log.exit_code == 0
    assert head[:12] in log.stdout
    # its parent has no profile: no baseline, said as exit 3 with what to do
    checked = runner.invoke(main, ["check", "HEAD", "--json"])
    assert checked.exit_code == 3, checked.stdout
    assert json.loads(checked.stdout)["result"], checked.stdout


def test_a_collect_reads_each_ancestors_note_at_most_once(repo, fake, monkeypatch):
    """Issue #35: planning asks the history three times (the budget's call counts and the plan it
    keeps, the nearest full trace), each walking up to 200 ancestors; one reader per collection reads
    each note once.  Ancestors noted with another configuration's profiles make every walk go to the
    root."""
    from helpers import make_profile
    store = NotesStore(open_repo(repo))
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace('[collect]\nmode = "trace"\n', ""))  # the defaults: a budget
    for i in range(4):
        (repo / "README").write_text(f"{i}\n")
        git(repo, "add", "README", ".gitperf.toml")
        git(repo, "commit", "-qm", f"docs {i}")
        sha = git(repo, "rev-parse", "HEAD")
        store.add(sha, make_profile(sha, workload="other"))
    reads: dict[str, int] = {}
    read = NotesStore.read

    def counting(self, commit):
        reads[commit] = reads.get(commit, 0) + 1
        return read(self, commit)
    monkeypatch.setattr(NotesStore, "read", counting)
    r = invoke(fake, ["collect", "-q"])  # at defaults: the budget's pilot, plan and hotspots
    assert r.exit_code == 0, r.stderr
    head = git(repo, "rev-parse", "HEAD")
    ancestors = git(repo, "rev-list", "--first-parent", "HEAD~1").split()
    assert set(ancestors) <= set(reads), reads
    assert max(reads[a] for a in ancestors) == 1, reads
    assert len(store.read(head)[0]) >= 1


def test_diff_tracing_builds_the_base_once_and_finds_the_changed_function(repo, fake):
    """Planning asks collect for the base's call graph (`collect.context.BaseGraphs`): built in a
    worktree the first time, read from the analysis cache the next; the diff names `tick`."""
    first = invoke(fake, ["collect", "--pipeline", "advanced", "--mode", "trace"])
    assert first.exit_code == 0, first.stderr
    assert "diff tracing: building the base" in first.stderr, first.stderr
    assert "changed tick;" in first.stderr, first.stderr
    again = invoke(fake, ["collect", "--pipeline", "advanced", "--mode", "trace"])
    assert again.exit_code == 0
    assert "building the base" not in again.stderr
    assert "changed tick;" in again.stderr
    assert "gitperf-wt-" not in git(repo, "worktree", "list")


def test_noise_keeps_the_first_sessions_plan_for_all_and_reports_each_workload(repo, fake, monkeypatch):
    """`git perf noise` at defaults (a budget): every session under the plan the first one chose, so
    that they compare; `--keep` stores them; a workload that failed in all sessions is named, exit 3."""
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace('[collect]\nmode = "trace"\n', "") +
                    '[[workload]]\nname = "broken"\ncommand = "/bin/sh -c \'./s; kill -SEGV $$\'"\n')
    git(repo, "commit", "-qam", "defaults, and a workload that crashes")
    from gitperf.collect import sessions
    asked, collect = [], sessions.collect
    monkeypatch.setattr(sessions, "collect", lambda repo, req, *a, **k: asked.append(req.keep_plans) or
                        collect(repo, req, *a, **k))
    r = invoke(fake, ["noise", "-k", "3", "--keep", "--json"])
    assert r.exit_code == 3, r.stderr
    out = {x["workload"]: x for x in json.loads(r.stdout)}
    assert "crashed" in out["broken"]["error"], out
    assert "w" in out, out
    assert "error" not in out["w"], out
    stored = [p.profile for p in NotesStore(open_repo(repo)).read(git(repo, "rev-parse", "HEAD"))[0]
              if p.profile.header.workload == "w"]
    plans = {(p.plan.mode, p.plan.fingerprint) for p in stored}
    assert len(stored) >= 3, plans
    assert len(plans) == 1, plans
    assert next(iter(plans))[0] == "hybrid", plans
    # the first session chose; the others were handed its plan (not left to find it in the notes)
    handed = {wl: (hz, traced) for wl, hz, traced in asked[1]}
    assert asked[0] == (), asked
    assert asked[1] == asked[2], asked
    assert handed["w"] == (stored[0].plan.params["stack_hz"],
                           stored[0].plan.traced), asked


@pytest.mark.slow
@pytest.mark.valgrind  # one moment is the witness's callgrind runs
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_check_interrupted_at_any_moment_leaves_nothing_and_no_half_set(tmp_path, sig):
    """Issue #28: SIGINT and SIGTERM to the process group (Ctrl-C, CI's cancel) and SIGKILL to git perf
    alone, at every moment of `check --collect` (a real process under the fake engine; the real one's
    probes: test_hardening_collect), beside two cores busy in bursts; each says what it stored."""
    repo = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")
    import subprocess
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)  # for the next command
    with busy_neighbour():
        for moment in MOMENTS:
            interrupt_at(repo, moment, sig, FAKE_GIT_PERF)


def test_the_calibration_is_kept_per_machine_and_kernel_not_per_repository(tmp_path, monkeypatch):
    """Kept under each repository's .git/perf/, the calibration was measured again by every fresh
    clone (a CI job's first collect: ~12 s; in this suite, every repository a test collected in).  It belongs to the machine and its
    kernel: one per user cache, another machine sharing the home keeps its own, and a cache that
    cannot be written is said and costs a measurement, not the collection."""
    from gitperf.engine import calibrate
    measured = []
    monkeypatch.setattr(calibrate, "measure", lambda _engine, d: measured.append(d) or {"push": 1.0,
                                                                                          "version": calibrate.VERSION})
    monkeypatch.setenv("GITPERF_CACHE", str(tmp_path / "cache"))
    assert calibrate.costs(None, "m1") == calibrate.costs(None, "m1") == {"push": 1.0, "version": calibrate.VERSION}
    assert len(measured) == 1
    assert len(list((tmp_path / "cache").glob("calibration-*-m1.json"))) == 1
    calibrate.costs(None, "m2")
    assert len(measured) == 2
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GITPERF_CACHE", str(tmp_path / "file" / "cache"))  # under a file: cannot be made
    said = []
    assert calibrate.costs(None, "m1", progress=said.append)["push"] == 1.0
    assert len(measured) == 3, said
    assert "GITPERF_CACHE" in said[-1], said


def _screen(raw: str) -> list[str]:
    """What a terminal shows once `raw` is written to it: carriage returns, erased lines and cursor
    moves up applied (what rich's Live writes), colours and the cursor's visibility ignored."""
    rows, row, col, i = [[]], 0, 0, 0
    while i < len(raw):
        esc = re.match(r"\x1b\[(\??)(\d*)((?:;\d+)*)([A-Za-z])", raw[i:])
        if esc:
            n, cmd = int(esc.group(2) or 0), esc.group(4)
            if cmd == "A":
                row = max(row - max(n, 1), 0)
            elif cmd == "K":  # 0: to the end of the line; 2: all of it
                rows[row] = rows[row][:col] if n == 0 else []
            i += esc.end()
            continue
        ch = raw[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            rows += [[] for _ in range(row + 1 - len(rows))]
        elif ch.isprintable():
            line = rows[row] + [" "] * max(col + 1 - len(rows[row]), 0)
            line[col] = ch
            rows[row], col = line, col + 1
        i += 1
    return ["".join(r).rstrip() for r in rows]


def _in_a_terminal(cwd, argv: list[str], columns: int = 120) -> tuple[int, list[str]]:
    """`argv` run with standard output and error on a pseudo-terminal `columns` wide: its exit status
    and the screen it leaves."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    p = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                         env=dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns)))
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(60), _screen(out.decode(errors="replace"))


def test_a_check_on_a_terminal_says_its_progress_on_one_line(repo):
    """Issue #60: a check printed one stderr line a round (77 for one check, one of them 1,681
    characters).  On a terminal its progress is one line updated in place, gone at the end; `-v`
    prints every message on a line of its own, as output that is not a terminal always has."""
    argv = [*FAKE_GIT_PERF, "check", "HEAD", "--collect", "--rounds", "4"]
    status, screen = _in_a_terminal(repo, argv)
    assert status in (0, 1), screen
    assert any(line.startswith("git perf check") for line in screen), screen  # the result
    assert not [line for line in screen if re.search(r"round \d+:", line)], screen  # no per-round lines stay
    assert max(map(len, screen)) <= 120, screen
    status, verbose = _in_a_terminal(repo, [*argv, "-v"])
    assert status in (0, 1), verbose
    # (the second check of the pair adds its rounds to the first's: 5 to 8)
    assert [line for line in verbose if "round 5:" in line], verbose


def test_a_watched_function_the_binary_lacks_is_refused(repo, fake):
    """Issue #59: `[collect] watch = ["nosuch"]` was taken silently and watched in vain."""
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace("[collect]\n", '[collect]\nwatch = ["tick", "tock"]\n'))
    git(repo, "commit", "-qam", "watch tock")
    r = invoke(fake, ["collect", "-q"])
    assert r.exit_code == 2, r.stderr
    assert "collect.watch" in r.stderr, r.stderr
    assert "no function tock" in r.stderr, r.stderr
    assert "(near: tick)" in r.stderr, r.stderr
    assert NotesStore(open_repo(repo)).commits() == []


def test_a_workload_that_exits_non_zero_fails_plain_collect_and_stores_nothing(repo, fake):
    """Issue #59: plain `collect` of a workload that ran the program and then exited 1 stored a profile
    marked PARTIAL and exited 0, where `check --collect` of the same refuses.  It fails alike: exit 2,
    the workload, its command and what it said, nothing stored (a crash or a timeout is still kept,
    marked: a finding)."""
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace("./s; true", "./s; echo cannot open input.txt >&2; exit 1"))
    git(repo, "commit", "-qam", "the workload fails")
    r = invoke(fake, ["collect", "-q"])
    assert r.exit_code == 2, r.stderr
    assert "workload w failed: exit status 1" in r.stderr, r.stderr
    assert "nothing was stored" in r.stderr, r.stderr
    assert "  | cannot open input.txt" in r.stderr, r.stderr
    assert NotesStore(open_repo(repo)).commits() == []
    # unless the workload declares that status a finished run's (`exit_codes`)
    toml.write_text(toml.read_text().replace('name = "w"\n', 'name = "w"\nexit_codes = [0, 1]\n'))
    git(repo, "commit", "-qam", "exit 1 is how it finishes")
    r = invoke(fake, ["collect", "-q"])
    assert r.exit_code == 0, r.stderr
    [stored] = NotesStore(open_repo(repo)).read(git(repo, "rev-parse", "HEAD"))[0]
    assert stored.profile.header.exit_status == 1, stored.profile.header
    assert stored.profile.header.partial == "", stored.profile.header


def test_an_interrupt_after_a_store_says_what_was_kept(repo, monkeypatch):
    """Issue #59: an interrupt outside a collection said only "git perf: interrupted".  It says what
    this command stored before it (a write is whole or not at all), or that it stored nothing."""
    from gitperf.store import notes
    monkeypatch.setattr(notes, "STORED_HERE", {})
    r = CliRunner().invoke(main, ["accept", "HEAD", "-m", "intended"])
    assert r.exit_code == 0, r.stderr
    accept = NotesStore.accept

    def stored_then_interrupted(self, *args):
        accept(self, *args)
        raise KeyboardInterrupt
    monkeypatch.setattr(NotesStore, "accept", stored_then_interrupted)
    monkeypatch.setattr(notes, "STORED_HERE", {})
    r = CliRunner().invoke(main, ["accept", "HEAD", "-m", "again"])
    head = git(repo, "rev-parse", "HEAD")
    assert r.exit_code == 130, r.stderr
    assert f"what it stored before is kept: 1 note line(s) on {head[:12]}" in r.stderr, r.stderr
    monkeypatch.setattr(NotesStore, "accept", lambda self, *a: (_ for _ in ()).throw(KeyboardInterrupt))
    monkeypatch.setattr(notes, "STORED_HERE", {})
    r = CliRunner().invoke(main, ["accept", "HEAD", "-m", "third"])
    assert r.exit_code == 130, r.stderr
    assert "git perf: interrupted: nothing was stored" in r.stderr, r.stderr


def test_two_runners_check_their_shards_of_a_range_and_meet_in_one_history(tmp_path, monkeypatch):
    """Issue #58, item 2: two clones of one repository each check their shard of a range (`check
    --collect --range A..B --shard I/2`), push, pull: one history, every commit of the range checked
    once, `git perf log` and the dashboard showing all of them; the range again keeps every check."""
    from gitperf.checks.ranges import Shard, shard
    from gitperf.web import create_app
    fake = FakeEngine()
    src = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")
    (src / ".gitperf.toml").write_text((src / ".gitperf.toml").read_text() + '[check]\nwitness = "off"\n')
    git(src, "commit", "-qam", "three: no witness in this test")
    for us in (998, 997, 996):  # other code in `tick` each time: every commit has something to measure
        (src / "s.c").write_text(re.sub(r"usleep\(\d+\)", f"usleep({us})", (src / "s.c").read_text()))
        git(src, "commit", "-qam", f"tick {us}")
    first = git(src, "rev-list", "--max-parents=0", "HEAD")
    commits = git(src, "rev-list", "--reverse", f"{first}..HEAD").split()
    assert sorted(shard(commits, Shard(1, 2)) + shard(commits, Shard(2, 2))) == sorted(commits)
    git(tmp_path, "clone", "-q", "--bare", str(src), "origin.git")
    runners = [tmp_path / "a", tmp_path / "b"]
    for clone, which in zip(runners, ("1/2", "2/2")):
        git(tmp_path, "clone", "-q", "origin.git", clone.name)
        monkeypatch.chdir(clone)
        r = invoke(fake, ["check", "--collect", "--range", f"{first}..HEAD", "--shard", which,
                                      "--rounds", "2", "--json", "-q"])
        assert r.exit_code in (0, 1), r.output
        out = json.loads(r.stdout)
        mine = shard(commits, Shard.parse(which))
        assert [c["commit"] for c in out["checks"]] == mine, out
        assert out["others"] == len(commits) - len(mine), out
        assert CliRunner().invoke(main, ["push"]).exit_code == 0
    monkeypatch.chdir(runners[0])
    assert CliRunner().invoke(main, ["pull"]).exit_code == 0
    log = json.loads(CliRunner().invoke(main, ["log", "--json", "-n", "10"]).stdout)
    checks = {row["commit"]: row["checks"] for row in log}
    assert all(len(checks[c]) == 1 and checks[c][0]["machines"] for c in commits), checks  # each once
    assert checks[first] == []
    text = CliRunner().invoke(main, ["log", "-n", "10"]).stdout
    assert sum(" checked: " in ln for ln in text.splitlines()) == len(commits), text
    page = create_app(runners[0]).test_client().get("/").get_data(as_text=True)
    assert all(c[:7] in page for c in commits), "the overview lacks a checked commit"
    # the whole range again, unsharded, on the runner that now has every check: nothing runs again
    ran = len(fake.log)
    r = invoke(fake, ["check", "--collect", "--range", f"{first}..HEAD", "--json", "-q"])
    assert json.loads(r.stdout)["kept"] == commits, r.output
    assert len(fake.log) == ran, r.output


def test_collect_range_interrupted_resumes_without_recollecting(tmp_path):
    """`collect --range` stopped by Ctrl-C once some commits are stored: exit 130, saying how to resume;
    the same command again collects only the commits without profiles, and nothing twice.  A real
    process under the fake engine, whose workers (a process a commit) are the fake's too
    (`Collector.worker`)."""
    repo = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")
    for us in range(998, 992, -1):  # six more commits, each with other code in `tick`
        (repo / "s.c").write_text(re.sub(r"usleep\(\d+\)", f"usleep({us})", (repo / "s.c").read_text()))
        git(repo, "commit", "-qam", f"tick {us}")
    first, *commits = git(repo, "rev-list", "--reverse", "HEAD").split()
    store = NotesStore(open_repo(repo))
    argv = [*FAKE_GIT_PERF, "collect", "--range", f"{first}..HEAD", "--repeat", "3"]
    p = subprocess.Popen([*argv, "-q"], cwd=repo, env=env_for(repo), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and len([c for c in commits if store.read(c)[0]]) < 2:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "run the same command again to resume" in err
    before = {c: [sp.id for sp in store.read(c)[0]] for c in commits}
    assert 2 <= len([c for c in commits if before[c]]) < len(commits), before
    r = subprocess.run([*argv, "--json", "-q"], cwd=repo, env=env_for(repo), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)["skipped"]) == {c for c in commits if before[c]}
    for c in commits:
        stored = store.read(c)[0]
        assert len(stored) == 3, c  # one collection each: nothing collected twice, nothing half-written
        assert not before[c] or [sp.id for sp in stored] == before[c], c
        assert {sp.profile.header.engine for sp in stored} == {"fake"}, c  # (the workers' engine: the command's)


def test_bisect_finds_the_first_slow_commit_collecting_fewer_commits_than_the_range(repo, fake):
    """`bisect` collects only the commits its search visits, each with the command's engine, and names
    the first commit at the slow level.  The fake engine gives `tick` half of each run's real wall time:
    20 ticks of ~1 ms, then of ~5 ms from the fourth commit on (a step of ~4x, which a busy machine's
    disturbance of a 25 ms run does not reach)."""
    for us in (998, 5000, 4999, 4998):
        (repo / "s.c").write_text(re.sub(r"usleep\(\d+\)", f"usleep({us})", (repo / "s.c").read_text()))
        git(repo, "commit", "-qam", f"tick {us}")
    line = git(repo, "rev-list", "--reverse", "HEAD").split()
    r = invoke(fake, ["bisect", line[0], line[-1], "--workload", "w", "--function", "tick", "--repeat", "3", "--json"])
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["first_bad"] == line[3], out
    assert out["range"] == len(line) - 1
    assert len(out["collected"]) < len(line), out  # not every commit of the range, GOOD included
    assert len(fake.log) == 3 * len(out["collected"]), [r.binary for r in fake.log]  # --repeat 3, each visited once


def test_checking_the_child_keeps_the_parents_stored_verdict_runs_and_report(repo, fake):
    """check --collect of a commit, then of its child (which takes the first as its base and adds runs
    to its note): the first commit's check, report and runs read the same afterwards, and its note holds
    both checks' sessions."""
    (repo / ".gitperf.toml").write_text((repo / ".gitperf.toml").read_text() + '[check]\nwitness = "off"\n')
    git(repo, "commit", "-qam", "no witness in this test")
    for us in (998, 997):  # other code in `tick` each time: each check has something to measure
        (repo / "s.c").write_text(re.sub(r"usleep\(\d+\)", f"usleep({us})", (repo / "s.c").read_text()))
        git(repo, "commit", "-qam", f"tick {us}")
    middle, child = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    first = invoke(fake, ["check", middle, "--collect", "--rounds", "3", "--json"])
    assert first.exit_code in (0, 1), first.stderr[-3000:]
    report = invoke(fake, ["report", middle]).stdout
    runs_before = len(NotesStore(open_repo(repo)).read(middle)[0])
    second = invoke(fake, ["check", child, "--collect", "--rounds", "3", "--json"])
    assert second.exit_code in (0, 1), second.stderr[-3000:]
    assert len(NotesStore(open_repo(repo)).read(middle)[0]) > runs_before  # the child's base runs
    again = invoke(fake, ["check", middle, "--json"])
    stored, checked = json.loads(again.stdout), json.loads(first.stdout)
    assert again.exit_code == first.exit_code
    assert {k: v for k, v in stored.items() if k != "workloads"} == {k: v for k, v in checked.items() if k != "workloads"}
    assert stored["workloads"][0]["target_profiles"] == 3
    assert checked["workloads"][0]["target_profiles"] == 3
    assert invoke(fake, ["report", middle]).stdout == report
    shown = invoke(fake, ["show", middle]).stdout
    assert shown.count("\nsession: paired check ") == 2, shown[:2000]


def test_a_workloads_history_keeps_one_budgeted_plan_so_consecutive_commits_compare(repo, fake):
    """At a budget, each commit's own pilot chose its own plan, and profiles of two plans are never
    compared: `check` of the next commit said "not enough data" (exit 3).  The history keeps the plan
    of the nearest earlier collection under the same budget: one fingerprint, a baseline found.
    `--replan` chooses anew.  (What a budget traces and samples, under eBPF: test_budget_collect.)"""
    (repo / "s.c").write_text((repo / "s.c").read_text().replace("usleep(999)", "usleep(998)"))
    git(repo, "commit", "-qam", "three")
    base, later = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    budget = ["--workload", "w", "--repeat", "2", "--max-overhead", "100%"]
    assert invoke(fake, ["collect", base, *budget, "-q"]).exit_code == 0
    r = invoke(fake, ["collect", later, *budget])
    assert r.exit_code == 0, r.stderr
    assert f"keeping the plan of {base[:12]}" in r.stderr, r.stderr
    first, then = (json.loads(invoke(fake, ["show", c, "--json"]).stdout)["profiles"][0]["plan"] for c in (base, later))
    assert then["traced"] == first["traced"]
    assert then["params"]["plan_from"] == base
    checked = invoke(fake, ["check", later, "--json"])
    assert checked.exit_code in (0, 1), checked.output  # a verdict, not "not enough data"
    assert json.loads(checked.stdout)["base"] == base
    r = invoke(fake, ["collect", later, "--workload", "w", "--repeat", "1", "--max-overhead", "100%", "--replan", "--json"])
    assert r.exit_code == 0, r.stderr
    assert "plan_from" not in json.loads(r.stdout)["profiles"][0]["plan"]["params"]


def test_the_hook_judges_the_pushed_range_not_the_tip_alone(repo, tmp_path):
    """Issue #60: with the hook checking the pushed tip against its parent, a slowdown with a
    comment-only commit on top went through (`no-change`).  It checks the tip against what the remote
    has, names the commit responsible, lets a harmless range through, and a range already checked is
    judged from the stored checks.  The installed hook, pointed at the fake engine's `git perf`; the
    slowdown is real wall time (`tick` five times longer), which the fake hands on."""
    (repo / ".gitperf.toml").write_text((repo / ".gitperf.toml").read_text() + '[check]\nwitness = "off"\n')
    git(repo, "commit", "-qam", "no witness in this test")

    def commit(subject: str, edit) -> str:
        (repo / "s.c").write_text(edit((repo / "s.c").read_text()))
        git(repo, "commit", "-qam", subject)
        return git(repo, "rev-parse", "HEAD")
    start = git(repo, "rev-parse", "HEAD")
    harmless = [commit(f"s: comment {i}", lambda s, i=i: f"/* {i} */\n{s}") for i in range(2)]
    slow = commit("s: tick five times longer", lambda s: s.replace("usleep(999)", "usleep(5000)"))
    tip = commit("s: a comment above it", lambda s: f"/* above */\n{s}")
    git(tmp_path, "init", "-q", "--bare", "remote.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))

    def push(c: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "push", *extra, "origin", f"{c}:refs/heads/main"], cwd=repo,
                              capture_output=True, text=True, timeout=600)
    assert push(start, "--no-verify").returncode == 0
    assert subprocess.run([*FAKE_GIT_PERF, "hooks", "install"], cwd=repo).returncode == 0
    hook = repo / ".git" / "hooks" / "pre-push"
    assert " -m gitperf " in hook.read_text()
    hook.write_text(hook.read_text().replace(" -m gitperf ", f" {FAKE_GIT_PERF[1]} "))
    r = push(harmless[-1])
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"2 commits pushed on top of {start[:12]}" in r.stderr, r.stderr[-3000:]
    r = push(tip)
    assert r.returncode != 0, r.stderr[-3000:]
    assert f"{slow[:12]} (s: tick five times longer) makes it slower" in r.stderr, r.stderr[-3000:]
    assert "push stopped" in r.stderr
    remote = subprocess.run(["git", "ls-remote", "origin", "refs/heads/main"], cwd=repo, capture_output=True, text=True)
    assert remote.stdout.split()[0] == harmless[-1]  # nothing of the slow range reached the remote
    again = push(tip)  # every commit of the range is checked now: the stored verdicts decide
    assert again.returncode != 0, again.stderr[-3000:]
    assert "those verdicts" in again.stderr, again.stderr[-3000:]
    assert "both built and profiled" not in again.stderr, again.stderr[-3000:]
    assert f"push stopped: {slow[:12]} makes the program slower" in again.stderr, again.stderr[-3000:]
