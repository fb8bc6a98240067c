"""Which functions a commit's source diff touches: `git diff` hunks mapped to function definitions.

A function spans from its definition line (DWARF `decl_line`, stored with each profiled function)
to the line before the next definition in the same file.  Lines before a file's first function
touch nothing.  This is the source half of diff tracing; it is cheap and needs no binary, so the
checks use it to focus their error budget on what the commit changed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import pygit2


@dataclass(frozen=True)
class Hunk:
    path: str
    start: int  # first line on the new side (a pure deletion: the line it happened before)
    lines: int


def hunks(repo: pygit2.Repository, base: str, target: str) -> list[Hunk]:
    diff = repo.diff(repo.get(base), repo.get(target), context_lines=0)
    out = []
    for patch in diff:
        path = patch.delta.new_file.path
        for h in patch.hunks:
            out.append(Hunk(path, h.new_start, h.new_lines))
    return out


def _same_file(location_file: str, path: str) -> bool:
    """DWARF names files as the compiler saw them (often relative to the build directory)."""
    a, b = location_file.lstrip("./"), path
    return a == b or b.endswith("/" + a) or a.endswith("/" + b)


def touched(hunk_list: list[Hunk], locations: dict[str, str]) -> set[str]:
    """Names of the functions (name -> "file:line") whose span a hunk overlaps."""
    if not hunk_list:
        return set()
    # Every file `_same_file` can match a path has the path's base name: only the locations in files
    # of the hunks' base names are read (the dashboard's index asks this of every commit: a handful of
    # hunks against its hundreds of functions, each in a file of its own in bench/dashboard.py's history)
    bases = {h.path.rpartition("/")[2] for h in hunk_list}
    by_file: dict[str, list[tuple[int, str]]] = {}
    for name, loc in locations.items():
        file, _, line = loc.rpartition(":")
        if file and file.lstrip("./").rpartition("/")[2] in bases and line.isdigit():
            by_file.setdefault(file, []).append((int(line), name))
    for v in by_file.values():
        v.sort()
    out: set[str] = set()
    for h in hunk_list:
        for file, defs in by_file.items():
            if not _same_file(file, h.path):
                continue
            starts = [line for line, _ in defs]
            first = bisect.bisect_right(starts, h.start) - 1
            last = bisect.bisect_right(starts, h.start + max(h.lines, 1) - 1) - 1
            for i in range(max(first, 0), last + 1):
                out.add(defs[i][1])
    return out


def changed_functions(repo: pygit2.Repository, base: str, target: str, locations: dict[str, str]) -> set[str]:
    return touched(hunks(repo, base, target), locations)
