"""The instruction-count witness: callgrind's output parsed from real runs of a compiled program, and
what the counts do to a check's verdicts (pure, on synthetic profiles)."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import msgspec
import pytest
from helpers import make_profile

from gitperf import checks
from gitperf.checks import witness
from gitperf.checks.change import Change
from gitperf.core.model import ROOT, InstructionCounts, StoredProfile
from gitperf.engine import callgrind
from gitperf.engine.workload import Command

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <ctype.h>
__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }
__attribute__((noinline)) long upper(char *s) {  /* its time is mostly libc's: toupper, strlen */
  long n = 0; for (; *s; s++) { *s = toupper(*s); n += strlen(s); } return n; }
__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int c, char **v) {
  long acc = 0; char buf[64];
  for (int i = 0; i < 1000; i++) acc += leaf(i);
  for (int i = 0; i < 10; i++) { strcpy(buf, "hello world hello world"); acc += upper(buf); }
  printf("%ld\n", acc + fib(15)); return 0;
}
"""


def _build(tmp_path, extra: str = "") -> str:
    (tmp_path / "p.c").write_text(PROGRAM.replace("int main(int c, char **v) {", "int main(int c, char **v) {" + extra))
    subprocess.run(["cc", "-O2", "-g", "-o", str(tmp_path / "p"), str(tmp_path / "p.c")], check=True)
    return str(tmp_path / "p")


@pytest.mark.valgrind
def test_callgrind_counts_calls_and_charges_library_instructions_to_the_caller(tmp_path):
    binary = _build(tmp_path)
    w = callgrind.run(Command(["/bin/sh", "-c", "./p && ./p"], str(tmp_path)), 120, binary)  # two processes: both count
    assert w.error == ""
    assert w.total > 0
    calls, own, incl = w.functions["leaf"]
    # a leaf: inclusive is its own
    assert (calls, own, incl) == (2000, own, own)
    assert own > 0
    calls, own, incl = w.functions["upper"]
    # toupper and strlen are libc's, charged to upper
    assert calls == 20
    assert incl > 2 * own
    calls, own, incl = w.functions["fib"]
    # (-O2 turns one of fib's two recursive calls into a loop: the calls are the binary's, not the source's)
    # direct recursion counted once, not once per depth
    assert calls > 2
    assert calls % 2 == 0
    assert incl == own
    assert w.functions["main"][2] >= sum(w.functions[n][2] for n in ("leaf", "upper", "fib"))


@pytest.mark.valgrind
def test_runs_at_once_count_what_runs_one_by_one_count_and_stop_together(tmp_path):
    """The witness's runs go at once (issue #57: they were a third of a check, one after another on a
    machine whose second core idled): the same counts as one by one; stopping them stops every run."""
    import threading
    import time
    from gitperf.engine import workload
    binary = _build(tmp_path)
    job = (Command(["./p"], str(tmp_path)), 120, binary)
    alone = callgrind.run(*job)
    both = callgrind.run_all([job, job])
    assert [w.functions["leaf"] for w in both] == [alone.functions["leaf"]] * 2
    assert both[0].total == alone.total
    slow = (Command(["/bin/sh", "-c", "./p; sleep 60"], str(tmp_path)), 120, binary)
    got: list = []
    t = threading.Thread(target=lambda: got.append(callgrind.run_all([slow, slow])))
    t0 = time.perf_counter()
    t.start()
    time.sleep(2)
    workload.kill_running()  # what an interrupt does to the runs of the other threads
    t.join(30)
    assert not t.is_alive(), got
    assert time.perf_counter() - t0 < 30, got
    assert all(w.error for w in got[0]), got


@pytest.mark.valgrind
def test_a_workload_valgrind_cannot_run_is_a_clear_note_not_a_failure(tmp_path):
    """An AVX-512 instruction (what -march=native emits on these machines, as Lua's makefile does):
    valgrind 3.19 does not know it."""
    binary = _build(tmp_path, ' __asm__ volatile(".byte 0x62,0xf1,0xfe,0x48,0x7f,0x44,0x24,0x01");')
    w = callgrind.run(Command(["/bin/sh", "-c", "./p"], str(tmp_path)), 120, binary)
    assert "does not know an instruction" in w.error
    assert "in main (p.c:" in w.error  # where valgrind stopped, as its log names it
    sse = _build(tmp_path, ' __asm__ volatile(".byte 0x66,0x0f,0x3a,0x61,0x07,0x04");')  # pcmpestri $4, (%rdi), %xmm0
    w = callgrind.run(Command(["/bin/sh", "-c", "./p"], str(tmp_path)), 120, sse)  # (the shell traced too)
    assert "bytes 0x66 0xF 0x3A 0x61" in w.error  # SSE4.2's pcmpestri (picohttpparser's -msse4.2 build)
    assert not w.functions


def _side(name_counts: list[dict[str, int]], changed=()) -> list[StoredProfile]:
    runs = tuple(InstructionCounts(total=sum(c.values()), functions={n: (1, v, v) for n, v in c.items()})
                 for c in name_counts)
    p = replace(make_profile("c"), instructions=runs)
    return [StoredProfile("c", 0, "id", p)]


def _change(fn: str, kind, relative=0.0, changed=False, ci=(-0.5, 0.9)) -> Change:
    return Change(workload="w", function=fn, type=kind, relative=relative, absolute_ns=0, exclusive_delta_ns=0,
                  confidence=0.5, ci_low=ci[0], ci_high=ci[1], method="paired rounds", changed=changed)


def test_the_witness_names_a_changed_function_whose_time_stayed_unresolved():
    """The issue's tiny hot function: its caller's instructions 1.90 M -> 2.77 M (+46%) while 60 rounds
    of time could not decide.  Named `instructions`, which does not fail the check."""
    base = _side([{"deflate": 1_900_000, "other": 100}, {"deflate": 1_900_000, "other": 100}])
    target = _side([{"deflate": 2_770_000, "other": 100}])
    [c] = witness.annotate([_change("deflate", checks.NO_CHANGE, changed=True)], target, base)
    assert c.type == checks.INSTRUCTIONS
    assert c.instructions == (1_900_000, 2_770_000)
    assert "+45.8%" in c.method
    from gitperf.checks.change import WorkloadPair
    from gitperf.checks.check import result_of
    pair = WorkloadPair("w", "k", 1, "b", 1, 0, "-")
    result = checks.CheckResult("t", "b", result_of([pair], [c]), (c,), (pair,))
    assert result.exit_code != 1
    assert c in result.notable()
    # beyond the A/A spread only: a program whose counts move 10% between two runs of one build
    noisy = _side([{"deflate": 1_900_000}, {"deflate": 2_100_000}])
    [c] = witness.annotate([_change("deflate", checks.NO_CHANGE, changed=True)], _side([{"deflate": 2_300_000}]), noisy)
    assert c.type == checks.NO_CHANGE
    assert c.instructions is not None


def test_identical_instructions_turn_a_placement_shift_into_no_change():
    base = _side([{"lua_type": 500_000}, {"lua_type": 500_000}])
    same, fewer = _side([{"lua_type": 500_000}]), _side([{"lua_type": 440_000}])
    shifted = _change("lua_type", checks.OPTIMIZATION, relative=-0.15)
    [c] = witness.annotate([shifted], same, base)
    assert c.type == checks.NO_CHANGE
    assert "code placement" in c.method
    [c] = witness.annotate([shifted], fewer, base)  # its work changed the same way: the time verdict stands
    assert c.type == checks.OPTIMIZATION
    # snappy's untouched IncrementalCopy, -77% [-92%, -31%]: the same code and the same work on both
    # sides, whatever the size of the shift
    [c] = witness.annotate([_change("lua_type", checks.OPTIMIZATION, relative=-0.77, ci=(-0.92, -0.31))], same, base)
    assert c.type == checks.NO_CHANGE
    assert "the same machine code" in c.method
    # a function the diff changed: placement when its interval reaches into the spread, not beyond it
    [c] = witness.annotate([_change("lua_type", checks.DEGRADATION, relative=0.8, ci=(0.6, 1.0), changed=True)],
                           same, base)
    assert c.type == checks.DEGRADATION  # its whole interval beyond the placement spread: not placement
    # ninja's Lexer::ReadToken: -21% [-31%, -9%] with the same instructions: the interval reaches into
    # the spread, so placement cannot be ruled out
    [c] = witness.annotate([_change("lua_type", checks.OPTIMIZATION, relative=-0.21, ci=(-0.31, -0.09), changed=True)],
                           same, base)
    assert c.type == checks.NO_CHANGE
    assert "placement spread (±20%)" in c.method


def test_the_placement_spread_is_measured_on_the_functions_whose_instructions_did_not_move():
    """Seven functions with the same instructions on both sides, their time changes spread to ±30%
    (90% quantile of |change| 30%): this check's spread is 30%, and a +25% [+21%, +29%] of one of them
    is placement here although beyond the fixed 20%."""
    names = [f"f{i}" for i in range(7)]
    base = _side([{n: 1_000_000 for n in names}] * 2)
    same = _side([{n: 1_000_000 for n in names}])
    moves = [0.25, -0.3, 0.28, -0.26, 0.3, -0.27]
    found = witness.annotate([_change(n, checks.NO_CHANGE, relative=r) for n, r in zip(names, moves)]
                             + [_change("f6", checks.DEGRADATION, relative=0.25, ci=(0.21, 0.29), changed=True)],
                             same, base)
    assert found[-1].type == checks.NO_CHANGE, found[-1].method
    assert "±30%" in found[-1].method, found[-1].method


def test_identical_instructions_are_placement_in_a_function_the_diff_changed_too():
    """The demo's rename commit: `main` changed only in a call's target, 14,512,041 instructions on
    both sides, and its time read +9.1% at >99.9%: placement, not a degradation."""
    base = _side([{"main": 14_512_041}, {"main": 14_512_041}])
    [c] = witness.annotate([_change("main", checks.DEGRADATION, relative=0.091, changed=True)],
                           _side([{"main": 14_512_041}]), base)
    assert c.type == checks.NO_CHANGE
    assert "code placement" in c.method


def test_time_against_the_instructions_is_a_conflict_never_a_verdict_in_times_direction():
    """The C++ issue's `add_term`: time -20.9% at >99.9% with its inclusive instructions +209% (a new
    template callee).  Named `conflict` with both figures; it neither fails nor passes as a speed-up."""
    base = _side([{"add_term": 1_000_000}, {"add_term": 1_000_000}])
    [c] = witness.annotate([_change("add_term", checks.OPTIMIZATION, relative=-0.209, changed=True)],
                           _side([{"add_term": 3_090_000}]), base)
    assert c.type == checks.CONFLICT
    assert "time -20.9% but inclusive instructions +209.0%" in c.method
    [d] = witness.annotate([_change("add_term", checks.DEGRADATION, relative=0.4)], _side([{"add_term": 700_000}]),
                           base)
    assert d.type == checks.CONFLICT
    from gitperf.checks.change import WorkloadPair
    from gitperf.checks.check import result_of
    pair = WorkloadPair("w", "k", 1, "b", 1, 0, "-")
    assert result_of([pair], [c, d]) == checks.NO_CHANGE
    assert c.severity < _change("x", checks.NEW).severity


def test_fewer_instructions_taking_more_time_by_more_is_a_slowdown_not_a_conflict():
    """ninja's hash maps back on `std::unordered_map`: `State::GetNode` +25.6% time with 7.2% fewer
    inclusive instructions, `main` (the run) +12% with 1.6% fewer: each instruction costs more (cache,
    branches).  Time's verdict stands, and the method says why the instructions did not overrule it."""
    base = _side([{"GetNode": 80_829_375, "main": 320_000_000}, {"GetNode": 80_829_375, "main": 320_000_000}])
    target = _side([{"GetNode": 74_994_473, "main": 315_000_000}])
    found = witness.annotate([_change("GetNode", checks.DEGRADATION, relative=0.256, changed=True),
                              _change("main", checks.DEGRADATION, relative=0.12)], target, base)
    assert [c.type for c in found] == [checks.DEGRADATION, checks.DEGRADATION]
    assert "by less than the time moved" in found[0].method
    assert "-7.2%" in found[0].method
    assert found[0].decided == "time; instructions -7.2% the other way, by less: each instruction took longer"


def test_every_time_verdict_says_what_decided_it_in_the_cli_report_and_dashboard_alike():
    """lz4's prefix-mode decoding (ec487d32): the run -9.6% in time with +10.2% instructions.  Time
    decides, as the rule says, but the CLI line showed "-9.6% ... instructions +10.2%" and no word of
    why, and the method said each instruction took *longer*.  Each time verdict now says what decided
    it (`Change.decided`): time alone, time and instructions, or time and why the counts did not
    overrule it; every view prints the same words (`report.decided_by`)."""
    from gitperf.views import report
    base = _side([{"main": 506_763_374, "dec": 1_000_000, "same": 1_000_000}] * 2)
    target = _side([{"main": 558_440_061, "dec": 1_300_000, "same": 1_000_000}])
    faster, cause, beyond = witness.annotate(
        [_change("main", checks.OPTIMIZATION, relative=-0.096, ci=(-0.15, -0.04)),
         _change("dec", checks.DEGRADATION, relative=0.25, ci=(0.2, 0.3)),
         _change("same", checks.DEGRADATION, relative=0.8, ci=(0.6, 1.0), changed=True)], target, base)
    assert faster.decided == "time; instructions +10.2% the other way, by less: each instruction took less time"
    assert "each instruction took less time" in faster.method
    assert cause.decided == "time and instructions (a cause)"
    assert cause.cause
    assert beyond.decided.startswith("time; the same instructions, but the diff changed it")
    assert report.decided_by(_change("x", checks.DEGRADATION, relative=0.5).decided) == "time"  # no counts: time alone
    assert faster.decided in report._line(faster)
    assert "own time unchanged" in report._line(faster)
    assert "own time +1.20 ms" in report._line(msgspec.structs.replace(faster, exclusive_delta_ns=1.2e6))
    result = checks.CheckResult("t", "b", checks.OPTIMIZATION, (faster,), ())
    assert f"| {faster.decided} |" in report.check_markdown(result)
    assert checks.Change.from_dict(faster.to_dict()).decided == faster.decided  # stored with the check


def test_without_counts_on_both_sides_the_check_is_time_only_and_says_why():
    base = _side([{"f": 10}])
    missing = [StoredProfile("c", 0, "id", replace(make_profile("c"), instructions=(
        InstructionCounts(error="valgrind is not installed (apt-get install valgrind): no instruction counts"),)))]
    c = _change("f", checks.NO_CHANGE, changed=True)
    assert witness.annotate([c], missing, base) == [c]
    assert witness.note(missing, base) == ("instruction witness: none (valgrind is not installed (apt-get install "
                                           "valgrind): no instruction counts); time only")


def test_a_paired_check_without_valgrind_keeps_a_clear_note_on_both_sides(monkeypatch, tmp_path):
    from gitperf.collect.paired import Pair, Side, count_instructions
    from gitperf.core.config import Workload
    from gitperf.plan.focus import Focus
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind on it
    focus = Focus(changed=("f",), new=(), callers=(), traced=("main",), sampled={})
    pair = Pair(Side(None, None), Side(None, None), focus, Workload("w", "./p"), native_s=0.03)
    said = []
    counts = count_instructions(pair, said.append)
    assert "valgrind is not installed (apt-get install valgrind)" in said[0]
    for side in counts:
        assert [w.error for w in side] == ["valgrind is not installed (apt-get install valgrind): no instruction counts"]


def test_a_side_callgrind_cannot_count_spares_the_bases_second_run(monkeypatch):
    """picohttpparser's SSE4.2 build: valgrind stopped at once on the target, and the base's second run
    (its A/A spread) then counted for nothing, 8 s of a 25 s check.  callgrind stands in for itself here:
    the orchestration is what is tested."""
    from types import SimpleNamespace
    from gitperf.collect import paired
    from gitperf.core.config import Workload
    from gitperf.engine import callgrind
    from gitperf.plan.focus import Focus
    ctx = SimpleNamespace(command=lambda wl: wl.command, binary=SimpleNamespace(path="/p", libraries=()))
    pair = paired.Pair(paired.Side(ctx, None), paired.Side(ctx, None), Focus(("f",), (), (), ("main",), {}),
                       Workload("w", "./p"), native_s=0.03)
    ran = []
    monkeypatch.setattr(callgrind, "available", lambda: True)
    monkeypatch.setattr(callgrind, "run", lambda *job: ran.append(job) or InstructionCounts(total=1))
    for target, base_runs in ((InstructionCounts(error="valgrind does not know an instruction"), 1),
                              (InstructionCounts(total=2), 2)):
        ran.clear()
        monkeypatch.setattr(callgrind, "run_all", lambda jobs, t=target: [InstructionCounts(total=1), t])
        base, counted = paired.count_instructions(pair, lambda _m: None)
        assert len(base) == base_runs
        assert len(ran) == base_runs - 1
        assert counted == (target,)


def test_a_threaded_run_is_witnessed_by_all_its_instructions_and_a_waiting_function_by_none():
    """leveldb's db_bench works in a thread: callgrind's `main` executed 1.0 M of the run's 860 M
    instructions, the same on both sides, while the run took 14.7% longer — called placement.  The
    root's witness is the run's total; a function that mostly waits (its share of the instructions
    far below its share of the time) has none."""
    base = _side([{"main": 1_023_826, "worker": 860_000_000, "Bench::Run": 1_000}] * 2)
    target = _side([{"main": 1_021_591, "worker": 1_006_000_000, "Bench::Run": 1_000}])
    run = msgspec.structs.replace(_change("main", checks.DEGRADATION, relative=0.147, ci=(0.09, 0.2)), base_ns=79e6)
    waits = msgspec.structs.replace(_change("Bench::Run", checks.DEGRADATION, relative=0.15, ci=(0.1, 0.2)), base_ns=78e6)
    found = {c.function: c for c in witness.annotate([run, waits], target, base)}
    # the run: +17% instructions
    assert found["main"].type == checks.DEGRADATION
    assert found["main"].cause
    assert found["main"].instructions == (861_024_826, 1_007_022_591)
    assert found["Bench::Run"].type == checks.DEGRADATION
    assert "do not witness its time" in found["Bench::Run"].method


def test_a_function_is_witnessed_on_the_side_where_its_time_is():
    """cJSON's 3ece4c8 undone: `cJSON_AddItemToArray` 6.9 ms -> 196 ms a run, instructions 0.34 M ->
    216 M.  On the base its time was mostly its probes' (28% of the probed run for 0.35% of the
    instructions), and judged there it read "mostly waits"; on the target, where the time that changed
    is, it runs 69% of the instructions for 90% of the time: the count witnesses it, a cause.  A
    function that waits on the side where its time is stays unwitnessed."""
    base = _side([{"main": 96_575_549, "add": 341_991}] * 2)
    target = _side([{"main": 96_575_536, "add": 216_251_994}])
    run = msgspec.structs.replace(_change("main", checks.DEGRADATION, relative=7.6, ci=(5.9, 9.6)), base_ns=25.1e6, target_ns=216.2e6)
    add = msgspec.structs.replace(_change("add", checks.DEGRADATION, relative=27.2, ci=(19.5, 36.9), changed=True),
                  base_ns=6.9e6, target_ns=195.6e6)
    waits = msgspec.structs.replace(add, function="waits", base_ns=1e6, target_ns=150e6)
    found = {c.function: c for c in witness.annotate([run, add], target, base)}
    assert found["add"].cause, found["add"].method
    assert "do not witness" not in found["add"].method
    base_w = _side([{"main": 96_575_549, "add": 341_991, "waits": 300_000}] * 2)
    target_w = _side([{"main": 96_575_536, "add": 216_251_994, "waits": 310_000}])
    [w] = [c for c in witness.annotate([run, waits], target_w, base_w) if c.function == "waits"]
    assert not w.cause
    assert "it mostly waits" in w.method, w.method
    assert "for 69% of its time" in w.method, w.method  # the target's share: 150 of 216.2 ms


def test_time_and_instructions_apart_by_more_than_any_speed_per_instruction_is_a_conflict():
    """leveldb's `DBIter::Next` read -90% with 19.7% more instructions: each instruction 12x faster, which
    no cache effect explains (its stack samples missed the callee it reaches by a tail call).  A
    conflict, while 1.6% fewer instructions for 12% more time stays time's verdict."""
    base = _side([{"Next": 722_403_262}] * 2)
    [c] = witness.annotate([_change("Next", checks.OPTIMIZATION, relative=-0.903, ci=(-0.92, -0.89), changed=True)],
                           _side([{"Next": 864_910_282}]), base)
    assert c.type == checks.CONFLICT, c.method
    assert "12.3x less time" in c.method, c.method


def test_a_deterministic_programs_base_runs_once_under_callgrind_where_a_recent_check_found_two_alike(empty_repo):
    """Issue #57, item 2: the A/A spread where the program is not deterministic.  A paired check whose
    two base runs counted every function alike is found among the base and its last AA_KEPT ancestors
    (`learnt`); two runs that differed (Lua seeds its hashes from addresses), another workload
    command, or a check further back leave the base to run twice again."""
    from conftest import git
    from gitperf.collect.paired import AA_KEPT, learnt
    from gitperf.git.repo import open_repo
    from gitperf.store.history import History
    from gitperf.store.notes import NotesStore

    commits = []
    for i in range(AA_KEPT + 3):
        git(empty_repo, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        commits.append(git(empty_repo, "rev-parse", "HEAD"))
    store = NotesStore(open_repo(empty_repo))
    alike = (InstructionCounts(total=9, functions={"f": (1, 5, 9)}),) * 2
    differ = (alike[0], InstructionCounts(total=9, functions={"f": (1, 5, 10)}))

    def checked(commit: str, counts: tuple[InstructionCounts, ...], command=("./app",)) -> None:
        p = make_profile(commit)
        store.add(commit, replace(p, header=replace(p.header, command=command), instructions=counts))

    key = make_profile("x").config_key
    at = lambda c: learnt(History(open_repo(empty_repo), c), key, ("./app",))  # noqa: E731
    checked(commits[2], alike)
    assert at(commits[2]) == commits[2]  # the base itself
    assert at(commits[2 + AA_KEPT - 1]) == commits[2]  # AA_KEPT - 1 commits on
    assert at(commits[2 + AA_KEPT]) == ""  # further back: measured again
    assert learnt(History(open_repo(empty_repo), commits[5]), key, ("./app", "other")) == ""
    checked(commits[4], differ)  # a nearer check whose two runs differed decides
    assert at(commits[5]) == ""
    checked(commits[5], (replace(alike[0], spread_from=commits[2]),))  # a learnt run is no A/A pair
    assert at(commits[6]) == ""
    # a note keeps where a run's spread came from; older lines read as before
    from gitperf.core import codec
    p = replace(make_profile("c"), instructions=(replace(alike[0], spread_from=commits[2]),))
    assert codec.decode(codec.encode(p)).instructions[0].spread_from == commits[2]
    assert all("sf" not in w for w in codec.to_json(replace(p, instructions=alike))["w"])
    said = witness.note([StoredProfile("t", 0, "t", replace(make_profile("t"), instructions=alike[:1]))],
                        [StoredProfile("b", 0, "b", p)])
    assert f"1 base and 1 target run(s) (A/A spread 0: the base's two runs at {commits[2][:12]}" in said, said


def test_the_stop_rule_reads_how_far_each_functions_work_moved():
    """`work_moved`: a function's inclusive instructions, target against base, as a share, with the
    base's A/A spread added, and whether they moved by the witness's own measure; none for a function
    that mostly waits, or without counts on both sides."""
    base = _side([{"f": 1_000_000, "g": 1_000, "h": 500}, {"f": 1_010_000, "g": 1_000, "h": 500}])
    target = _side([{"f": 1_030_000, "g": 1_000, "h": 500}])
    f = msgspec.structs.replace(_change("f", checks.UNRESOLVED), base_ns=1e6)
    waits = msgspec.structs.replace(_change("g", checks.UNRESOLVED), base_ns=9e7)  # 0.1% of the work, 90% of the time
    root = msgspec.structs.replace(_change(ROOT, checks.NO_CHANGE), base_ns=1e8)
    counts = lambda side: side[0].profile.instructions  # noqa: E731
    moved = witness.work_moved([root, f, waits], counts(target), counts(base))
    assert moved["f"].moved == pytest.approx(1_030_000 / 1_005_000 - 1 + 0.01, rel=1e-3)  # + the spread: 1%
    assert moved["f"].alike  # +2.5%, within three times its A/A spread: not moved by the witness's measure
    assert not witness.work_moved([root, f], counts(_side([{"f": 1_100_000}])), counts(base))["f"].alike
    assert "g" not in moved  # its instructions do not witness its time
    assert witness.work_moved([f], counts(target), ()) == {}
