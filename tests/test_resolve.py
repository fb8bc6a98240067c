"""A side resolved once (`collect.resolve`): which configuration a collection of a commit uses, where
it came from, where the commit is built and the kept build's key, on a real repository.  Nothing is
built: a broken or missing configuration is reported before any checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, init_repo

from gitperf.collect.context import CollectRequest, Target
from gitperf.collect.resolve import resolve
from gitperf.core.errors import ConfigError
from gitperf.git import buildcache
from gitperf.git.repo import open_repo


def _toml(binary: str, pad: bool = False) -> str:
    return (f'[build]\ncommand = "make"\nbinary = "{binary}"\nprobe_pad = {str(pad).lower()}\n'
            '[[workload]]\nname = "w"\ncommand = "./app"\n')


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """Two commits: the first without a .gitperf.toml (history from before git perf), the second with one."""
    root = init_repo(tmp_path / "p")
    (root / "main.c").write_text("int main(void) { return 0; }\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "before git perf")
    (root / ".gitperf.toml").write_text(_toml("app"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "adopt git perf")
    return root, git(root, "rev-list", "--reverse", "HEAD").split()[-2:]


def _target(root: Path, commit: str, said: list[str] | None = None, **req) -> Target:
    return Target(open_repo(root), CollectRequest(rev=commit, **req), commit, None,
                  (said if said is not None else []).append, root / ".git" / "perf")


def test_the_clean_head_is_built_in_the_work_tree_with_its_own_configuration(tmp_path):
    root, (_old, head) = _repo(tmp_path)
    side = resolve(_target(root, head))
    assert side.in_worktree
    assert side.source == ""  # the commit's own
    assert side.config.build.binary == "app"
    assert side.key is None  # not a check's fresh build: nothing kept


def test_a_commits_own_file_is_read_from_the_commit_not_the_working_tree(tmp_path):
    root, (_old, head) = _repo(tmp_path)
    (root / ".gitperf.toml").write_text(_toml("edited"))  # an uncommitted edit: the tree is not clean
    git(root, "commit", "-qam", "three")
    git(root, "checkout", "-q", head)  # HEAD back at the commit; an edit of the file on top of it
    (root / ".gitperf.toml").write_text(_toml("uncommitted"))
    side = resolve(_target(root, head))
    assert not side.in_worktree  # a dirty tree is not the commit's
    assert side.config.build.binary == "app"
    assert side.source == ""
    assert side.config.path == f"{head[:12]}:.gitperf.toml"


def test_a_commit_from_before_git_perf_borrows_the_working_trees_and_says_so(tmp_path):
    root, (old, _head) = _repo(tmp_path)
    said: list[str] = []
    side = resolve(_target(root, old, said))
    assert not side.in_worktree
    assert side.config.build.binary == "app"
    assert side.source.startswith(str(root / ".gitperf.toml"))
    assert f"(sha256 {side.config.digest})" in side.source
    assert said == [f"{old[:12]} has no .gitperf.toml: using the working tree's ({root / '.gitperf.toml'})"]


def test_config_file_decides_the_padding_as_well_as_the_build(tmp_path):
    """--config FILE asking for padded entries builds in a new worktree: the padding was once decided
    from the working tree's file while the build ran with FILE's, in the work tree's unpadded objects."""
    root, (_old, head) = _repo(tmp_path)
    padded = tmp_path / "padded.toml"
    padded.write_text(_toml("app", pad=True))
    side = resolve(_target(root, head, config=str(padded)))
    assert not side.in_worktree
    assert side.config.build.probe_pad
    assert side.source == f"{padded} (sha256 {side.config.digest})"


def test_a_checks_fresh_build_has_the_key_of_the_configuration_it_builds_with(tmp_path):
    root, (_old, head) = _repo(tmp_path)
    side = resolve(_target(root, head, fresh=True, probe_pad=True, align_functions=64))
    assert not side.in_worktree
    assert side.config.build.probe_pad
    assert side.config.build.align_functions == 64
    assert side.key == buildcache.key(head, side.config.build)
    assert side.key != resolve(_target(root, head, fresh=True, probe_pad=False)).key


@pytest.mark.parametrize("text, why", [("[build\n", "not valid TOML"), ('[build]\ncommand = "make"\n', "build.binary")])
def test_a_broken_configuration_is_reported_before_anything_is_checked_out(tmp_path, text, why):
    root, (_old, head) = _repo(tmp_path)
    (root / ".gitperf.toml").write_text(text)
    git(root, "commit", "-qam", "broken")
    commit = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "--detach", head)  # the work tree holds the good file; the commit does not
    with pytest.raises(ConfigError) as e:
        resolve(_target(root, commit, fresh=True))
    assert f"{commit[:12]}:.gitperf.toml" in str(e.value)
    assert why in str(e.value)
    assert len(git(root, "worktree", "list").splitlines()) == 1  # no worktree was made


def test_no_configuration_anywhere_says_what_to_do(tmp_path):
    root, (old, _head) = _repo(tmp_path)
    (root / ".gitperf.toml").unlink()
    with pytest.raises(ConfigError) as e:
        resolve(_target(root, old))
    assert "git perf init" in str(e.value)
    assert "--config FILE" in str(e.value)
