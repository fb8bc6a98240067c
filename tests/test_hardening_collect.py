"""Issue #18 under real eBPF: a collection killed with SIGKILL leaves nothing the next one does not
sweep; a killed `git` takes its collector along; a workload that never runs the binary (or runs a copy of it) stores nothing;
a check interrupted while its probes are live leaves none.  What does not depend on the engine (a
failing workload, interrupts at every moment of a check) is tested without root in test_orchestration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, run_cli
from interrupts import GIT_PERF, busy_neighbour, env_for, interrupt_at, our_cgroups, running, tick_repo, wait_for

from gitperf.engine.bpflink import uprobe_multi_links
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore

pytestmark = [pytest.mark.ebpf, pytest.mark.slow]

def test_sigkill_leftovers_are_swept_by_the_next_collection(tmp_path):
    repo = tick_repo(tmp_path)
    before = set(uprobe_multi_links())
    proc = subprocess.Popen([str(Path(sys.executable).parent / "git-perf"), "collect", "HEAD~1"], cwd=repo,
                            env=env_for(repo), stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(lambda: set(uprobe_multi_links()) != before and running("/s", repo), "the workload under probes")
    proc.kill()  # SIGKILL: no handler runs
    proc.wait(30)
    worktrees = git(repo, "worktree", "list")
    # what the kill left: the temporary worktree, the workload (a grandchild) and its cgroup
    assert "gitperf-wt-" in worktrees, worktrees
    assert running("/s", repo), worktrees
    assert our_cgroups(proc.pid), worktrees
    wait_for(lambda: set(uprobe_multi_links()) == before, "the kernel freeing the probes of the dead process", 30)
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)
    r = run_cli(repo, "collect", "--binary", "./s", "--no-build", "--", "./s", "quick")
    assert r.returncode == 0, r.stderr
    assert "left by a collection that was killed" in r.stderr, r.stderr
    assert "gitperf-wt-" in r.stderr, r.stderr
    assert "gitperf-wt-" not in git(repo, "worktree", "list")
    wait_for(lambda: not running("/s", repo), "the orphaned workload being killed", 10)
    assert not our_cgroups(proc.pid)
    assert {p.profile.header.workload for p in NotesStore(open_repo(repo)).read(git(repo, "rev-parse", "HEAD"))[0]} \
        == {"adhoc"}  # the killed collection stored nothing


def test_a_killed_git_takes_its_collector_along_and_nothing_is_stored(tmp_path):
    repo = tick_repo(tmp_path, ticks="for (int i = 0; i < 4000; i++)")  # ~5 s a run
    before = set(uprobe_multi_links())
    git_proc = subprocess.Popen(["git", "perf", "collect"], cwd=repo, env=env_for(repo), stderr=subprocess.DEVNULL,
                                start_new_session=True)
    wait_for(lambda: set(uprobe_multi_links()) != before and running("/s", repo), "the workload under probes")
    git_proc.kill()  # what `kill -9` of the shell's job hits: git, not its child
    git_proc.wait(30)
    wait_for(lambda: not running("git-perf", repo) and not running("/s", repo), "the collector and its workload ending",
             30)
    assert NotesStore(open_repo(repo)).commits() == []
    assert set(uprobe_multi_links()) == before


@pytest.mark.parametrize("command, words", [
    ("/bin/true", "never ran"),  # runs, but not the binary
    ("./nosuch", "never ran"),  # not found
])
def test_a_workload_that_never_runs_the_binary_stores_nothing_exit_2(tmp_path, command, words):
    repo = tick_repo(tmp_path)
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)
    r = run_cli(repo, "collect", "--binary", "./s", "--no-build", "--", command)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr, r.stderr
    assert "nothing was stored" in r.stderr, r.stderr
    assert NotesStore(open_repo(repo)).commits() == []


@pytest.mark.parametrize("args", [("collect",), ("check", "HEAD", "--collect")])
def test_a_workload_that_runs_a_copy_of_the_binary_is_told_so_and_stores_nothing(tmp_path, args):
    """lz4's Makefile builds programs/lz4 and copies it to ./lz4, and `init` took ./lz4 for the binary
    while the workload ran programs/lz4: a uprobe is on one file, so nothing was measured, and `check
    --collect` said "no significant change", exit 0 (its counting run read the changed function's 0
    calls as a workload that does not reach it).  Both commands now stop, name the file the command
    runs, and store nothing."""
    repo = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")  # ~25 ms a run
    (repo / ".gitperf.toml").write_text('[build]\ncommand = "cc -O2 -g -o s s.c && mkdir -p bin && cp s bin/s"\n'
                                        'binary = "s"\n[[workload]]\nname = "w"\ncommand = "./bin/s"\n')
    git(repo, "commit", "-qam", "the workload runs the build's copy")
    (repo / "s.c").write_text((repo / "s.c").read_text().replace("usleep(999)", "usleep(998)"))
    git(repo, "commit", "-qam", "three")  # (a change of machine code: the check counts its calls)
    if args[0] == "collect":
        subprocess.run(["sh", "-c", "cc -O2 -g -o s s.c && mkdir -p bin && cp s bin/s"], cwd=repo, check=True)
    r = run_cli(repo, *args, timeout=600)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "never ran s's main()" in r.stderr
    assert "it runs bin/s" in r.stderr
    assert "nothing was stored" in r.stderr
    assert NotesStore(open_repo(repo)).commits() == []


@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_a_check_interrupted_under_probes_leaves_no_probe_and_no_half_set(tmp_path, sig):
    """Issue #28 under the real engine, while its probes are live (a round, two programs loaded; every
    other moment is the fake engine's test, test_orchestration): once the next command has run, no
    probe, workload, cgroup or worktree is left, and the notes hold the whole check or nothing of it."""
    repo = tick_repo(tmp_path, ticks="for (int i = 0; i < 20; i++)")  # ~25 ms a run
    subprocess.run(["cc", "-O2", "-g", "-o", "s", "s.c"], cwd=repo, check=True)  # for the next command
    before = set(uprobe_multi_links())
    with busy_neighbour():
        interrupt_at(repo, "later round", sig, GIT_PERF)
    wait_for(lambda: set(uprobe_multi_links()) == before, "no probe left", 30)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the case is `sudo git perf` in a repository its user owns")
def test_sudo_check_leaves_the_repository_its_owners_and_runs_the_workload_as_the_owner():
    """Issue #59: `sudo git perf check --collect` left 42-47 paths under .git root's (the owner's `git
    gc` then exited 128, `git perf accept` said "Permission denied") and ran every workload as root.
    Now the build and the workload (under probes and under callgrind) run as the owner, and what root
    wrote into .git is the owner's when the command ends."""
    import pwd
    import shutil
    import tempfile
    from test_paired_collect import SUM_PROG, sumlib_repo
    nobody = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="gitperf-sudo-"))  # (pytest's tmp is root's alone)
    try:
        top.chmod(0o755)
        ids = top / "ids"
        root = sumlib_repo(top, SUM_PROG, f"sh -c 'id -u >> {ids}; exec ./build/prog'")
        ids.touch()
        subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(top)], check=True)
        sudo = {"SUDO_UID": str(nobody.pw_uid), "SUDO_GID": str(nobody.pw_gid)}
        r = run_cli(root, "check", "HEAD", "--collect", "--rounds", "3", env=sudo, timeout=900)
        assert r.returncode in (0, 1), r.stderr[-3000:]
        assert "instruction witness: callgrind" in r.stderr, r.stderr[-2000:]
        roots = [str(p) for p in (root / ".git").rglob("*") if p.lstat().st_uid == 0]
        assert roots == [], roots[:10]
        assert (root / ".git").stat().st_uid == nobody.pw_uid, roots[:10]
        ran_as = ids.read_text().split()
        assert len(ran_as) >= 2 * 3, ran_as
        assert set(ran_as) == {str(nobody.pw_uid)}, ran_as
        as_owner = dict(user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], cwd=root, capture_output=True,
                        text=True, env={"PATH": os.environ["PATH"], "HOME": str(top)})
        gc = subprocess.run(["git", "gc", "-q"], **as_owner)
        assert gc.returncode == 0, gc.stderr
        accept = subprocess.run([str(Path(sys.executable).parent / "git-perf"), "accept", "HEAD", "-m", "ok"], **as_owner)
        assert accept.returncode == 0, accept.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)


REPORT = "tail -1 /proc/self/cgroup >&2; grep -E '^(Uid|SigBlk):' /proc/self/status >&2; exit 3"


@pytest.mark.parametrize("start", ["launcher", "fork"])
def test_a_run_starts_in_its_cgroup_as_its_user_and_ends_as_its_command_ended(start, monkeypatch, tmp_path):
    """A run's workload is started by the launcher (`engine/spawn.c`: vfork, then a clone straight
    into the run's cgroup) or, without a C compiler, by a fork of the collector: either way in the
    run's cgroup, as the repository's owner, with no signal blocked (SIGINT and SIGTERM are held back
    while it starts), and its exit status, or the signal that ended it, is the run's (the launcher's
    own crash leaves no core file).  Through the launcher, a command that does not exist is exit 127,
    said on its stderr (as a shell says it)."""
    import pwd

    from gitperf.core.owner import Owner
    from gitperf.engine import launcher
    from gitperf.engine.workload import Command, run, scope
    if start == "fork":
        monkeypatch.setattr(launcher, "launcher", lambda: None)
    nobody = pwd.getpwnam("nobody")
    for user, uid in ((None, 0), (Owner(nobody.pw_uid, nobody.pw_gid), nobody.pw_uid)):
        with scope() as where:
            r = run(Command(["/bin/sh", "-c", REPORT], str(tmp_path), user=user), 30, where)
        cgroup, uids, blocked = r.stderr.splitlines()
        assert r.exit_status == 3, r
        assert cgroup == f"0::/gitperf/{where.path.name}", r.stderr
        assert uids.split()[1:] == [str(uid)] * 4, r.stderr
        assert blocked.split()[1] == "0" * 16, r.stderr
    with scope() as where:
        assert run(Command(["/bin/sh", "-c", "kill -SEGV $$"], str(tmp_path)), 30, where).exit_status == -11
    assert not list(tmp_path.iterdir())
    if start == "launcher":
        with scope() as where:
            missing = run(Command(["./no-such-program"], str(tmp_path)), 30, where)
        assert missing.exit_status == 127, missing
        assert "running ./no-such-program: No such file or directory" in missing.stderr, missing
