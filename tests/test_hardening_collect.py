"""Issue #18 under real eBPF: a collection killed with SIGKILL leaves nothing the next one does not
sweep; a killed `git` takes its collector along; a workload that never runs the binary stores nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git, run_cli

from gitperf.engine.bpflink import uprobe_multi_links
from gitperf.engine.workload import cgroup2_root
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore

pytestmark = [pytest.mark.ebpf, pytest.mark.slow]

ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _repo(tmp_path, ticks: str = "for(;;)") -> Path:
    """`./s` ticks (1 ms each) forever, or as `ticks` says; `./s quick` returns at once.  The workload
    runs it under a shell, so after a SIGKILL of git perf it is a grandchild nobody waits for."""
    repo = tmp_path / "k"
    repo.mkdir()
    (repo / "s.c").write_text("#include <unistd.h>\n__attribute__((noinline)) void tick(void){ usleep(1000); }\n"
                              "int main(int argc, char **argv){ if (argc > 1) return 0; " + ticks +
                              " tick(); return 0; }\n")
    # a fixed full trace: under the default budget the pilot run would tick on for the whole timeout
    (repo / ".gitperf.toml").write_text('[build]\ncommand = "cc -O2 -g -o s s.c"\nbinary = "s"\n'
                                        '[[workload]]\nname = "w"\ncommand = "/bin/sh -c \'./s; true\'"\n'
                                        'timeout = 120\n[collect]\nmode = "trace"\n')
    (repo / ".gitignore").write_text("s\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    # other code in `tick` (a comment alone would leave nothing to measure: no rounds to interrupt)
    (repo / "s.c").write_text((repo / "s.c").read_text().replace("usleep(1000)", "usleep(999)"))
    git(repo, "commit", "-qam", "two")
    return repo


def _running(name: str) -> list[int]:
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace").endswith(name) for a in argv[:2]):  # argv[1]: a script's name
            out.append(int(p.name))
    return out


def _wait_for(cond, what: str, timeout: float = 90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen in {timeout:.0f} s")


def _our_cgroups(pid: int) -> list[Path]:
    return list((cgroup2_root() / "gitperf").glob(f"run-{pid}-*"))


def test_sigkill_leftovers_are_swept_by_the_next_collection(tmp_path):
    repo = _repo(tmp_path)
    before = set(uprobe_multi_links())
    proc = subprocess.Popen([str(Path(sys.executable).parent / "git-perf"), "collect", "HEAD~1"], cwd=repo, env=ENV,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    _wait_for(lambda: set(uprobe_multi_links()) != before and _running("/s"), "the workload under probes")
    proc.kill()  # SIGKILL: no handler runs
    proc.wait(30)
    worktrees = git(repo, "worktree", "list")
    # what the kill left: the temporary worktree, the workload (a grandchild) and its cgroup
    assert "gitperf-wt-" in worktrees and _running("/s") and _our_cgroups(proc.pid), worktrees
    _wait_for(lambda: set(uprobe_multi_links()) == before, "the kernel freeing the probes of the dead process", 30)
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)
    r = run_cli(repo, "collect", "--binary", "./s", "--no-build", "--", "./s", "quick")
    assert r.returncode == 0, r.stderr
    assert "the worktree of a collection that was killed" in r.stderr
    assert "gitperf-wt-" not in git(repo, "worktree", "list")
    _wait_for(lambda: not _running("/s"), "the orphaned workload being killed", 10)
    assert not _our_cgroups(proc.pid)
    assert {p.profile.header.workload for p in NotesStore(open_repo(repo)).read(git(repo, "rev-parse", "HEAD"))[0]} \
        == {"adhoc"}  # the killed collection stored nothing


def test_a_killed_git_takes_its_collector_along_and_nothing_is_stored(tmp_path):
    repo = _repo(tmp_path, ticks="for (int i = 0; i < 4000; i++)")  # ~5 s a run
    before = set(uprobe_multi_links())
    git_proc = subprocess.Popen(["git", "perf", "collect"], cwd=repo, env=ENV, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    _wait_for(lambda: set(uprobe_multi_links()) != before and _running("/s"), "the workload under probes")
    git_proc.kill()  # what `kill -9` of the shell's job hits: git, not its child
    git_proc.wait(30)
    _wait_for(lambda: not _running("git-perf") and not _running("/s"), "the collector and its workload ending", 30)
    assert NotesStore(open_repo(repo)).commits() == []
    assert set(uprobe_multi_links()) == before


@pytest.mark.parametrize("command, words", [
    ("/bin/true", "never ran"),  # runs, but not the binary
    ("./nosuch", "never ran"),  # not found
])
def test_a_workload_that_never_runs_the_binary_stores_nothing_exit_2(tmp_path, command, words):
    repo = _repo(tmp_path)
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)
    r = run_cli(repo, "collect", "--binary", "./s", "--no-build", "--", command)
    assert r.returncode == 2 and words in r.stderr and "nothing was stored" in r.stderr, r.stderr
    assert NotesStore(open_repo(repo)).commits() == []


@pytest.mark.parametrize("exit_code, words", [(1, "failed: exit status 1"), (139, "crashed: SIGSEGV")])
def test_a_failing_workload_fails_the_check_and_stores_nothing(tmp_path, exit_code, words):
    """Issue #37: a workload that ran the binary and then exited 1 was "no significant change", exit 0,
    stored over the commit's result.  Its runs measure other work: exit 2, naming the workload and
    its command, nothing stored."""
    repo = _repo(tmp_path, ticks="for (int i = 0; i < 3; i++)")
    toml = repo / ".gitperf.toml"
    toml.write_text(toml.read_text().replace("./s; true", f"./s; echo cannot open input.txt >&2; exit {exit_code}"))
    (repo / "s.c").write_text((repo / "s.c").read_text().replace("usleep(999)", "usleep(998)"))  # code to measure
    git(repo, "commit", "-qam", "the workload fails")
    r = run_cli(repo, "check", "HEAD", "--collect")
    assert r.returncode == 2 and f"workload w {words}" in r.stderr and "nothing was stored" in r.stderr, r.stderr
    assert "./s; echo" in r.stderr  # its command, to run by hand
    assert "its stderr ended with:\n  | cannot open input.txt" in r.stderr  # and what it said
    assert NotesStore(open_repo(repo)).commits() == []


MOMENTS = {  # what the check's progress (stderr) says when it reaches a moment, or a condition
    "build": "building",
    "workload start": None,  # the run's cgroup exists
    "first round": "round 1:",
    "later round": "round 3:",
    "witness": "instruction witness",
}


def _check_until(repo: Path, moment: str) -> subprocess.Popen:
    """`git perf check HEAD --collect` started in its own session, returned once it reaches `moment`."""
    import threading
    proc = subprocess.Popen([str(Path(sys.executable).parent / "git-perf"), "check", "HEAD", "--collect"], cwd=repo,
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    said: list[str] = []
    threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True).start()
    pattern = MOMENTS[moment]
    _wait_for(lambda: (any(pattern in s for s in said) if pattern else bool(_our_cgroups(proc.pid)))
              or proc.poll() is not None, f"the check reaching {moment}", 120)
    assert proc.poll() is None, f"the check ended before {moment}: {''.join(said)[-2000:]}"
    return proc


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_check_interrupted_at_any_moment_leaves_nothing_and_no_half_set(tmp_path, sig):
    """Issue #28: SIGINT and SIGTERM to the process group (Ctrl-C, CI's cancel) and SIGKILL to git
    perf alone, at five moments of `check --collect`.  Once the next command has run: no workload,
    cgroup, worktree or probe is left, and the notes hold both sides of the check with its record, or
    nothing of it."""
    import signal
    repo = _repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")  # ~25 ms a run
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)  # for the next command
    head, parent = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD~1")
    before = set(uprobe_multi_links())
    for moment in MOMENTS:
        proc = _check_until(repo, moment)
        if sig == "SIGKILL":
            proc.kill()
        else:
            os.killpg(proc.pid, getattr(signal, sig))
        proc.wait(60)
        # stopped, not finished: 130 (interrupted, said so), or killed by the signal itself when it lands
        # in the check's last moments, after the collection (-2 is what a shell reports as 130)
        stopped = {"SIGINT": (130, -2), "SIGTERM": (130, 143, -15), "SIGKILL": (-9,)}[sig]
        assert proc.returncode in stopped, (moment, proc.returncode)
        r = run_cli(repo, "collect", "--binary", "./s", "--no-build", "--", "./s", "quick")
        assert r.returncode == 0, r.stderr
        _wait_for(lambda: not _running("/s"), f"no workload left ({moment})", 15)
        assert not _our_cgroups(proc.pid), moment
        assert "gitperf-wt-" not in git(repo, "worktree", "list"), moment
        _wait_for(lambda: set(uprobe_multi_links()) == before, f"no probe left ({moment})", 30)
        store = NotesStore(open_repo(repo))
        checked = [p for p in store.read(head)[0] if p.profile.plan.params.get("pairing")]
        based = [p for p in store.read(parent)[0] if p.profile.plan.params.get("pairing")]
        records = store.record_lines(head, "gitperf-check ")
        assert len(checked) == len(based) and (len(records) > 0) == (len(checked) > 0), (moment, len(checked),
                                                                                       len(based), len(records))
