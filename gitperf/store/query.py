"""Read-only questions about the history and its profiles."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pygit2

from gitperf.git.repo import first_parent, resolve_commit
from gitperf.store.notes import NotesStore


@dataclass(frozen=True)
class LogRow:
    commit: str
    subject: str
    profiles: int
    unreadable: int
    workloads: list[str]

    def to_dict(self) -> dict:
        return asdict(self)


def first_parent_log(repo: pygit2.Repository, rev: str = "HEAD", limit: int = 20,
                     store: NotesStore | None = None) -> list[LogRow]:
    """First-parent commits from `rev` with how many profiles each note holds (`store`: the notes to
    read, one the caller reads again, e.g. a `CachingStore`)."""
    store = store or NotesStore(repo)
    noted = set(store.commits())
    rows = []
    for commit in first_parent(repo, resolve_commit(repo, rev), limit=limit):
        sha = str(commit.id)
        good, bad = store.read(sha) if sha in noted else ([], [])
        rows.append(LogRow(sha, commit.message.splitlines()[0] if commit.message else "", len(good), len(bad),
                           sorted({p.profile.header.workload for p in good})))
    return rows
