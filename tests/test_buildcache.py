"""Builds kept for the next check (git.buildcache, issue #38): a real repository, real `git worktree`s
and a real compiler; a build command that counts its own runs outside the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import git, init_repo

from gitperf.analysis import elf
from gitperf.core.config import BuildConfig
from gitperf.git import buildcache, pad
from gitperf.git.repo import open_repo
from gitperf.git.worktree import Built, run_build


def _repo(tmp_path: Path) -> tuple[Path, list[str], BuildConfig]:
    root = init_repo(tmp_path / "p")
    counter = tmp_path / "builds-run"
    (root / "main.c").write_text("int main(void) { return 0; }\n")
    (root / "Makefile").write_text("app: main.c\n\tcc -O2 -g -o app main.c\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    (root / "main.c").write_text("int main(void) { return 1 - 1; }\n")
    git(root, "commit", "-qam", "two")
    commits = git(root, "rev-list", "--reverse", "HEAD").split()[1:]  # (init_repo's first has no program)
    return root, commits, BuildConfig(command=f"echo run >> {counter} && make -s", binary="app", probe_pad=True)


def _runs(tmp_path: Path) -> int:
    counter = tmp_path / "builds-run"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def _build(repo, commit: str, build: BuildConfig, cache: Path) -> tuple[Path, Built]:
    with buildcache.slot(repo, commit, buildcache.key(commit, build), cache) as kept:
        if kept.built is None:
            kept.finish(run_build(build, kept.root, commit, cache), [kept.root / "app"])
        assert (kept.root / "app").is_file()
        return kept.root, kept.built


def test_a_finished_build_is_reused_for_the_same_key_only(tmp_path, monkeypatch):
    root, commits, build = _repo(tmp_path)
    repo, cache = open_repo(root), tmp_path / "perf"
    first, done = _build(repo, commits[1], build, cache)
    assert _runs(tmp_path) == 1
    assert "cc=" in done.pad
    again, reused = _build(repo, commits[1], build, cache)
    # the build command did not run
    assert (again, reused) == (first, done)
    assert _runs(tmp_path) == 1
    # anything a build reads differing is another key: the other commit, the padding, the alignment,
    # the command, the flags in the environment
    others = {buildcache.key(commits[0], build), buildcache.key(commits[1], replace(build, probe_pad=False)),
              buildcache.key(commits[1], replace(build, align_functions=64)),
              buildcache.key(commits[1], replace(build, command="make")),
              buildcache.key(commits[1], build, env={"PATH": "/usr/bin", "CFLAGS": "-O0"})}
    assert len(others) == 5
    assert buildcache.key(commits[1], build) not in others
    # and the wrappers' own flags: a build kept by a git perf that added other ones is not reused
    before = buildcache.key(commits[1], build)
    monkeypatch.setattr(pad, "DEBUG_INFO", "-g3")
    assert buildcache.key(commits[1], build) != before
    _build(repo, commits[0], build, cache)
    assert _runs(tmp_path) == 2


def test_a_build_that_did_not_finish_is_never_reused(tmp_path):
    root, commits, build = _repo(tmp_path)
    repo, cache = open_repo(root), tmp_path / "perf"
    key = buildcache.key(commits[1], build)
    with pytest.raises(KeyboardInterrupt):
        with buildcache.slot(repo, commits[1], key, cache) as kept:
            run_build(build, kept.root, commits[1], cache)
            raise KeyboardInterrupt  # before finish: as if Ctrl-C hit between the build and its record
    assert not (cache / "builds" / key).exists()
    (cache / "builds" / key / "tree").mkdir(parents=True)  # as a SIGKILL mid-build leaves it
    _build(repo, commits[1], build, cache)
    assert _runs(tmp_path) == 2


def test_only_the_most_recently_used_builds_are_kept_and_their_worktrees_go_with_them(tmp_path):
    root, commits, build = _repo(tmp_path)
    repo, cache = open_repo(root), tmp_path / "perf"
    places = [_build(repo, c, b, cache)[0] for c in commits for b in (build, replace(build, probe_pad=False))]
    assert all(p.is_dir() for p in places)
    removed = buildcache.evict(repo, cache, keep=1)
    assert len(removed) == 3
    assert [p.is_dir() for p in places] == [False, False, False, True]
    listed = subprocess.run(["git", "worktree", "list"], cwd=root, capture_output=True, text=True).stdout
    assert str(places[-1]) in listed
    assert not any(str(p) in listed for p in places[:-1])


def test_a_build_that_prints_a_flood_keeps_its_last_lines_only(tmp_path):
    """Issue #37: a build printing 300 MB was held whole in memory and its "last 15 lines" were one
    300 MB line on the terminal.  Its output is a ring of short lines now."""
    import tracemalloc

    from gitperf.core.errors import BuildError
    root, commits, build = _repo(tmp_path)
    (tmp_path / "perf").mkdir()
    flood = "head -c 50000000 /dev/zero | tr '\\\\0' x; echo; echo 'error: the real reason' >&2; exit 3"
    tracemalloc.start()
    with pytest.raises(BuildError) as e:
        run_build(replace(build, command=flood, probe_pad=False), root, commits[1], tmp_path / "perf")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 * 2 ** 20, peak
    msg = str(e.value)
    assert "failed (exit 3)" in msg, msg[-500:]
    assert msg.rstrip().endswith("error: the real reason"), msg[-500:]
    assert len(msg) < 10_000, msg[-500:]


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed (make setup installs it)")
def test_a_second_worktree_compiles_what_did_not_change_from_the_compiler_cache(tmp_path):
    """Two commits built in two worktrees (another key each): the second compiles the unchanged unit
    from ccache under .git/perf, since the tree's path is in neither the hashed command line nor the
    objects' DWARF (mapped to `.`); the binary's source locations are relative to its tree."""
    root = init_repo(tmp_path / "p")
    (root / "util.c").write_text("int twice(int x) { return 2 * x; }\n")
    (root / "main.c").write_text("int twice(int);\nint main(void) { return twice(0); }\n")
    (root / "Makefile").write_text("app: main.o util.o\n\tcc -o app main.o util.o\n"
                                   "%.o: %.c\n\tcc -O2 -g -c -o $@ $(CURDIR)/$<\n")  # absolute, as cmake passes them
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    (root / "main.c").write_text("int twice(int);\nint main(void) { return twice(1) - 2; }\n")
    git(root, "commit", "-qam", "two")
    commits = git(root, "rev-list", "--reverse", "HEAD").split()[1:]
    repo, cache = open_repo(root), tmp_path / "perf"
    build = BuildConfig(command="make -s", binary="app", probe_pad=True)
    trees = [_build(repo, c, build, cache)[0] for c in commits]
    stats = subprocess.run(["ccache", "--print-stats"], env={**os.environ, "CCACHE_DIR": str(cache / "ccache")},
                           capture_output=True, text=True, check=True).stdout
    counts = dict(line.split("\t")[:2] for line in stats.splitlines() if "\t" in line)
    assert int(counts["direct_cache_hit"]) >= 1, stats  # util.o the second time
    assert int(counts["cache_miss"]) == 3, stats  # main.o and util.o, then main.o again
    where = elf.source_locations(trees[1] / "app", str(trees[1]))
    assert where["twice"].startswith("util.c:"), where
    assert where["main"].startswith("main.c:"), where
    assert str(trees[0]) not in subprocess.run(["strings", "-a", str(trees[1] / "app")], capture_output=True,
                                               text=True).stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the case is git perf run as root for another user")
def test_a_build_runs_as_the_repositorys_owner_when_git_perf_runs_as_root(monkeypatch):
    """Collection needs root (sudo, the pre-push hook); the build runs the project's own commands,
    which need none: it runs as the owner of the repository, in its checkout and in our worktree
    (handed to the owner), and what it writes is the owner's."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="gitperf-owner-"))  # (pytest's tmp is root's alone)
    try:
        top.chmod(0o755)
        root = init_repo(top / "p")
        (root / "Makefile").write_text("app:\n\tid -u > built-by && printf '#!/bin/sh\\n' > app && chmod +x app\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "make")
        subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(top)], check=True)
        monkeypatch.setenv("SUDO_UID", str(nobody.pw_uid))  # as `sudo git perf` by its owner: git and pygit2 trust it
        repo, cache = open_repo(root), root / ".git" / "perf"
        cache.mkdir()
        build = BuildConfig(command="make -s", binary="app", probe_pad=True)
        commit = git(root, "rev-parse", "HEAD")
        tree, _ = _build(repo, commit, build, cache)
        assert (tree / "built-by").read_text().strip() == str(nobody.pw_uid)
        assert (tree / "app").stat().st_uid == nobody.pw_uid
        run_build(replace(build, probe_pad=False), root, commit, cache)  # in the owner's own checkout
        assert (root / "built-by").read_text().strip() == str(nobody.pw_uid)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _kept(repo, commit: str, build: BuildConfig, cache: Path, rebuild: bool = False) -> tuple[str, Path]:
    """Why the kept build was dropped ("" = reused or new), with the binary the slot then holds."""
    with buildcache.slot(repo, commit, buildcache.key(commit, build), cache, rebuild) as kept:
        if kept.built is None:
            kept.finish(run_build(build, kept.root, commit, cache), [kept.root / "app"])
        return kept.dropped, kept.root / "app"


@pytest.mark.parametrize("harm, why", [
    ("edit", "its tree was edited (main.c)"),
    ("truncate", "app changed since it was built"),
    ("script", "app changed since it was built"),
    ("delete", "app is gone"),
    ("rebuild", "--rebuild asked for a new build"),
    ("old record", "it has no record of its binary (kept by an earlier git perf)"),
])
def test_a_kept_build_that_is_not_what_its_commit_builds_is_built_again_and_says_why(tmp_path, harm, why):
    """Issue #59: a kept tree whose source was edited and rebuilt by hand was reused and its verdict
    stored over the right one; a truncated or deleted binary stopped every later check."""
    root, commits, build = _repo(tmp_path)
    repo, cache = open_repo(root), tmp_path / "perf"
    _, binary = _kept(repo, commits[1], build, cache)
    right = binary.read_bytes()
    tree = binary.parent
    if harm == "edit":
        (tree / "main.c").write_text("int main(void) { return 7; }\n")
        subprocess.run(["make", "-s", "-C", str(tree)], check=True, capture_output=True)
    elif harm == "truncate":
        binary.write_bytes(right[:4096])
    elif harm == "script":
        binary.write_text("#!/bin/sh\nexit 0\n")
    elif harm == "delete":
        binary.unlink()
    elif harm == "old record":
        done = tree.parent / buildcache.DONE
        done.write_text(done.read_text().replace('"outputs"', '"was"'))
    dropped, binary = _kept(repo, commits[1], build, cache, rebuild=harm == "rebuild")
    assert dropped.startswith(why)
    assert _runs(tmp_path) == 2
    assert binary.read_bytes() == right  # what the commit builds (cc -O2 -g is deterministic here)
    # and that one is reused
    assert _kept(repo, commits[1], build, cache)[0] == ""
    assert _runs(tmp_path) == 2


def test_every_lock_of_the_local_state_is_one_helper_with_one_behaviour_per_purpose(tmp_path):
    """Issue #56 item 4 (`git.state.locked`): exclusive excludes everyone, shared admits shared holders;
    a holder that shares its exclusive lock admits them from then on; a bounded wait says who holds
    what (`Held`), and a kept build in use is never evicted."""
    from gitperf.git.state import Held, locked
    path = tmp_path / "x.lock"
    with locked(path) as held:
        with pytest.raises(Held, match="another git perf holds .*x.lock"):
            with locked(path, shared=True, wait=0):
                pass
        held.share()
        with locked(path, shared=True, wait=0):  # shared beside shared
            with pytest.raises(Held):
                with locked(path, wait=0.05):  # but not exclusive
                    pass
    with locked(path, wait=0):  # released
        pass
    # the kept builds: eviction skips a build another check holds
    root, commits, build = _repo(tmp_path)
    repo, cache = open_repo(root), tmp_path / "perf"
    with buildcache.slot(repo, commits[0], "k0", cache) as kept:
        kept.finish(run_build(build, kept.root, commits[0], cache))
        assert buildcache.evict(repo, cache, keep=0) == []  # in use: kept
    assert buildcache.evict(repo, cache, keep=0) == ["k0"]
