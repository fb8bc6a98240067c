"""The notes tree laid out as git lays it out: fanned out into two-hex-digit subtrees once a level is full.

A notes tree maps a commit's id to its note's blob.  libgit2's `create_note` inserts a new note at the
top level, so a history of N notes kept one flat tree that every write copied whole: 5,000 notes of
2 KB wrote 651 MB of objects, a write taking 42 ms at the 5,000th (issue #58).  git itself
(`notes.c`, `determine_fanout`) splits a full level into subtrees named by the next two hex digits of
the id (`ab/cdef…`), so a write copies one small tree a level.  Both layouts, and the mixed ones git
writes while a level fills, are notes trees every reader (git, libgit2, this module) accepts.
"""

from __future__ import annotations

from collections import defaultdict

import pygit2

# Entries a level holds before it splits.  git fans a level out at about the same count (a level
# whose 16 first-nibble nodes all hold more than one note); libgit2 descends into any subtree that
# exists, so either layout reads back the same.
FANOUT_AT = 256
_HEX = frozenset("0123456789abcdef")


def write(repo: pygit2.Repository, tree: pygit2.Tree | None, notes: dict[str, pygit2.Oid]) -> pygit2.Oid:
    """The id of `tree` (None: an empty notes tree) with each commit's note (full hex id -> blob id)
    set, fanned out where a level is full.  Only the levels the notes pass through are rewritten."""
    return _level(repo, tree, dict(notes))


def _is_note(name: str, mode: int) -> bool:
    return mode != pygit2.GIT_FILEMODE_TREE and len(name) > 2 and set(name) <= _HEX


def _level(repo: pygit2.Repository, tree: pygit2.Tree | None, notes: dict[str, pygit2.Oid]) -> pygit2.Oid:
    """One level: `notes` maps the rest of each id (the digits the levels above did not use) to a blob."""
    builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
    entries = {e.name: e for e in tree} if tree is not None else {}
    fanned = any(e.filemode == pygit2.GIT_FILEMODE_TREE for e in entries.values())
    if not fanned and len(entries) + sum(name not in entries for name in notes) <= FANOUT_AT:
        for name, blob in notes.items():
            builder.insert(name, blob, pygit2.GIT_FILEMODE_BLOB)
        return builder.write()
    # Fanned out (or it is now): notes written flat at this level before (by an older git perf, or by
    # git while the level filled) move into their subtrees with the new ones.
    groups: dict[str, dict[str, pygit2.Oid]] = defaultdict(dict)
    for name, e in entries.items():
        if _is_note(name, e.filemode) and name not in notes:
            groups[name[:2]][name[2:]] = e.id
        if _is_note(name, e.filemode):
            builder.remove(name)
    for name, blob in notes.items():
        groups[name[:2]][name[2:]] = blob
    for sub, below in groups.items():
        old = entries.get(sub)
        subtree = repo[old.id] if old is not None and old.filemode == pygit2.GIT_FILEMODE_TREE else None
        if subtree is not None:
            below = {rest: _union(repo, subtree, rest, blob) for rest, blob in below.items()}
        builder.insert(sub, _level(repo, subtree, below), pygit2.GIT_FILEMODE_TREE)
    return builder.write()


def _union(repo: pygit2.Repository, subtree: pygit2.Tree, rest: str, blob: pygit2.Oid) -> pygit2.Oid:
    """A note moving down into a subtree that already holds a note of the same commit (a mixed layout
    merged from elsewhere): one note with the lines of both, the existing ones first, none twice."""
    if rest not in subtree or subtree[rest].filemode == pygit2.GIT_FILEMODE_TREE or subtree[rest].id == blob:
        return blob
    old, new = repo[subtree[rest].id].data.decode(errors="replace"), repo[blob].data.decode(errors="replace")
    lines = dict.fromkeys(old.splitlines() + new.splitlines())
    return repo.create_blob("".join(ln + "\n" for ln in lines))


def find(tree: pygit2.Tree, commit: str) -> pygit2.Oid | None:
    """The blob of `commit`'s note in a notes tree of any layout (flat, fanned out, or mixed)."""
    rest, node = commit, tree
    while True:
        if rest in node:
            entry = node[rest]
            return entry.id if entry.filemode != pygit2.GIT_FILEMODE_TREE else None
        if len(rest) <= 2 or rest[:2] not in node or node[rest[:2]].filemode != pygit2.GIT_FILEMODE_TREE:
            return None
        node, rest = node[rest[:2]].peel(pygit2.Tree), rest[2:]
