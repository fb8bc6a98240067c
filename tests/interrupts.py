"""What the interrupt tests share, under the real engine (test_hardening_collect) and the fake one
(test_orchestration): a program that ticks, processes and cgroups found by name, and a `check
--collect` stopped at a chosen moment."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from conftest import git

from gitperf.engine.workload import cgroup2_root
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore

ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
GIT_PERF = [str(Path(sys.executable).parent / "git-perf")]
FAKE_GIT_PERF = [sys.executable, str(Path(__file__).with_name("fakeengine.py"))]


def tick_repo(tmp_path, ticks: str = "for(;;)") -> Path:
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


OWNER = "GITPERF_TEST_REPO"  # what the processes of one test's repository carry in their environment


def env_for(repo: Path) -> dict[str, str]:
    """ENV with the repository named: git perf and the workloads it starts inherit it, so `running`
    tells this test's `./s` from a parallel test's (pytest -n: it waited 15 s for another's to end)."""
    return dict(ENV, **{OWNER: str(repo)})


def running(name: str, repo: Path | None = None) -> list[int]:
    """The processes whose program (or script: argv[1]) ends with `name`; of `repo`'s (`env_for`) when given."""
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
            if not any(a.decode(errors="replace").endswith(name) for a in argv[:2]):
                continue
            if repo is not None and f"\0{OWNER}={repo}\0".encode() not in b"\0" + (p / "environ").read_bytes():
                continue
        except OSError:  # (ended meanwhile, or another user's)
            continue
        out.append(int(p.name))
    return out


def wait_for(cond, what: str, timeout: float = 90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen in {timeout:.0f} s")


def our_cgroups(pid: int) -> list[Path]:
    root = cgroup2_root()
    return list((root / "gitperf").glob(f"run-{pid}-*")) if root else []


MOMENTS = {  # what the check's progress (stderr) says when it reaches a moment, or a condition
    "build": "building",
    "pilot": ", interleaved",  # (said just before the pilot's runs)
    "workload start": None,  # the workload runs
    "witness": "instruction witness",  # (callgrind, before the rounds)
    "first round": "round 1:",
    "later round": "round 3:",
}
# a fixed count past round 3 for "later round": the stop rule may decide at round 3 (its least), and a
# check that ends then finishes before the signal lands (exit 1 instead of 130, fresh-clone CI of 20178da)
ARGS = {"later round": ["--rounds", "6"]}
STOPPED = {"SIGINT": (130, -2), "SIGTERM": (130, 143, -15), "SIGKILL": (-9,)}


def check_until(repo: Path, moment: str, git_perf: list[str]) -> tuple[subprocess.Popen, threading.Thread, list[str]]:
    """`git perf check HEAD --collect` started in its own session, returned once it reaches `moment`,
    with the thread reading its stderr and the lines read."""
    proc = subprocess.Popen([*git_perf, "check", "HEAD", "--collect", *ARGS.get(moment, [])], cwd=repo, env=env_for(repo),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True)
    reader.start()
    pattern = MOMENTS[moment]
    wait_for(lambda: (any(pattern in s for s in said) if pattern else bool(running("/s", repo)))
             or proc.poll() is not None, f"the check reaching {moment}", 120)
    assert proc.poll() is None, f"the check ended before {moment}: {''.join(said)[-2000:]}"
    return proc, reader, said


@contextlib.contextmanager
def busy_neighbour(cores: int = 2):
    """Processes keeping `cores` cores busy in bursts (busy 50-300 ms, idle 50-300 ms) for as long as
    the block runs: the interrupt tests once failed only beside other work (issue #59)."""
    burst = ("import random, time\nr = random.Random({seed})\nwhile True:\n"
             "    end = time.perf_counter() + r.uniform(0.05, 0.3)\n    while time.perf_counter() < end: pass\n"
             "    time.sleep(r.uniform(0.05, 0.3))\n")
    procs = [subprocess.Popen([sys.executable, "-c", burst.format(seed=i)]) for i in range(cores)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def interrupt_at(repo: Path, moment: str, sig: str, git_perf: list[str]) -> None:
    """Issue #28: SIGINT and SIGTERM to the process group (Ctrl-C, CI's cancel) or SIGKILL to git perf
    alone at `moment` of `check --collect`.  Once the next command has run: no workload, cgroup or
    worktree is left, and the notes hold both sides of the check with its record, or nothing of it."""
    head, parent = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "HEAD~1")
    started = time.time()
    proc, reader, said = check_until(repo, moment, git_perf)
    if sig == "SIGKILL":
        proc.kill()
    else:
        os.killpg(proc.pid, getattr(signal, sig))
    proc.wait(60)
    reader.join(10)
    # stopped, not finished: 130 (interrupted, said so), or killed by the signal itself when it lands
    # in the check's last moments, after the collection (-2 is what a shell reports as 130)
    assert proc.returncode in STOPPED[sig], (moment, proc.returncode)
    if proc.returncode == 130:  # it says what it stored, whatever the moment (issue #59: "git perf: interrupted")
        assert said, (moment, said[-3:])
        assert said[-1].startswith("git perf: "), (moment, said[-3:])
        assert ("nothing was stored" in said[-1] or
               "what it stored before is kept" in said[-1]), (moment, said[-3:])
    r = subprocess.run([*git_perf, "collect", "--binary", "./s", "--no-build", "--", "./s", "quick"], cwd=repo,
                       env=env_for(repo), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: not running("/s", repo), f"no workload left ({moment})", 15)
    assert not our_cgroups(proc.pid), moment
    assert "gitperf-wt-" not in git(repo, "worktree", "list"), moment
    tmp = Path(tempfile.gettempdir())  # its callgrind output, its padding probe: root's, in the sticky /tmp
    assert not list(tmp.glob(f"gitperf-*-{proc.pid}-*")), (moment, list(tmp.glob(f"gitperf-*-{proc.pid}-*")))
    assert not [p for p in tmp.glob("vgdb-pipe-*") if p.stat().st_mtime >= started], f"valgrind's FIFOs left ({moment})"
    store = NotesStore(open_repo(repo))
    checked = [p for p in store.read(head)[0] if p.profile.plan.pairing]
    based = [p for p in store.read(parent)[0] if p.profile.plan.pairing]
    records = store.record_lines(head, "gitperf-check ")
    assert len(checked) == len(based), (moment, len(checked),
                                      len(based), len(records))
    assert (len(records) > 0) == (len(checked) > 0), (moment, len(checked),
                                                    len(based), len(records))

