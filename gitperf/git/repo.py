"""The repository: opening it, naming commits, walking the first-parent line, and the
machine-local state directory (ARCHITECTURE.md §4).  Nothing here knows about profiles."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pygit2

from gitperf.core.errors import InputError


def open_repo(path: str | os.PathLike = ".") -> pygit2.Repository:
    found = pygit2.discover_repository(str(path))
    if found is None:
        raise InputError(f"not a git repository: {Path(path).resolve()} (run git perf inside your project)")
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as e:
        if "not owned by current user" not in str(e):
            raise InputError(f"cannot open the repository at {found}: {e}") from None
    if _sudo_for_owner(found):  # as git itself does under sudo: the user who ran sudo owns it
        pygit2.settings.owner_validation = False
        return pygit2.Repository(found)
    where = Path(found).parent if Path(found).name == ".git" else Path(found)
    raise InputError(f"{where} belongs to another user, and git refuses such a repository as unsafe. If you "
                     f"trust it: git config --global --add safe.directory {where} (or run git perf as its owner)")


def _sudo_for_owner(git_dir: str) -> bool:
    """Root through sudo by the repository's owner (SUDO_UID): git trusts that since 2.37, and git perf
    runs so to collect (eBPF needs root)."""
    try:
        return os.geteuid() == 0 and os.environ.get("SUDO_UID") == str(os.stat(git_dir).st_uid)
    except OSError:
        return False


def common_dir(repo: pygit2.Repository) -> Path:
    """The git directory all worktrees of the repository share (`.git`)."""
    common = Path(repo.path)
    if (common / "commondir").exists():  # a linked worktree: .git/worktrees/NAME
        common = (common / (common / "commondir").read_text().strip()).resolve()
    return common


def resolve_commit(repo: pygit2.Repository, rev: str) -> str:
    try:
        obj = repo.revparse_single(rev)
        return str(obj.peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise InputError(f"unknown revision '{rev}'") from None


def first_parent(repo: pygit2.Repository, tip: str, hide: tuple[str, ...] = (),
                 limit: int | None = None) -> Iterator[pygit2.Commit]:
    """`tip` and its first-parent ancestors, nearest first, as `git rev-list --first-parent`: a
    commit reachable from any of `hide` ends the walk.  The one first-parent walker: baselines,
    history, ranges, the log, the index and the hook all use it."""
    walker = repo.walk(tip, pygit2.enums.SortMode.NONE)
    walker.simplify_first_parent()
    for h in hide:
        walker.hide(h)
    for k, c in enumerate(walker):
        if limit is not None and k >= limit:
            return
        yield c


ANCESTORS = 500  # how far back a check looks for its baseline and history


def ancestors(repo: pygit2.Repository, commit: str, limit: int = ANCESTORS) -> list[str]:
    """First-parent ancestors of `commit`, nearest first (not including it)."""
    return [str(c.id) for c in first_parent(repo, commit, limit=limit + 1)][1:]


def first_parent_range(repo: pygit2.Repository, spec: str) -> list[str]:
    """`A..B` (or a single REV: just it) as first-parent commits, oldest first."""
    if ".." not in spec:
        if not spec:
            raise InputError("an empty range: give A..B or a single revision")
        return [resolve_commit(repo, spec)]
    a_rev, b_rev = spec.split("..", 1)
    a, b = resolve_commit(repo, a_rev or "HEAD"), resolve_commit(repo, b_rev or "HEAD")
    out = [str(c.id) for c in first_parent(repo, b, hide=(a,))][::-1]
    if not out:
        raise InputError(f"{spec} holds no commits: A..B means the commits after A up to B on B's first-parent "
                         f"line" + (f" (did you mean {b_rev or 'HEAD'}..{a_rev or 'HEAD'}?)" if a != b else ""))
    return out


def parent(repo: pygit2.Repository, commit: str) -> str:
    """The first parent ("" for a root commit)."""
    parents = repo.get(commit).parents
    return str(parents[0].id) if parents else ""


def diff_base(repo: pygit2.Repository, commit: str, base_rev: str | None) -> str:
    """The commit a change is measured against: `base_rev` (--base), else the first parent ("" for a
    root commit)."""
    return resolve_commit(repo, base_rev) if base_rev else parent(repo, commit)
