#!/usr/bin/env python3
"""The notes store at the scale of years of history (issue #58): N notes of a paired check's size
written one at a time through `NotesStore`, as N checks would; prints the cost of a write as the
history grows, the objects on disk against the notes' own bytes, and `git perf log`'s time.

    .venv/bin/python bench/notesstore.py [--notes 10000] [--functions 40] [--flat 2000]

Each note is what `check --collect` stores on a commit: its profile line and a check record.
`--flat N` writes the first N notes the way versions before the fan-out did (libgit2's
`create_note`, one flat tree), in the same run, for the before/after ratio.

Targets (issue #58): a write <= 50 ms at the 10,000th; objects <= 3x the notes' bytes; `git perf log`
<= 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pygit2
from _common import ROOT, codec
from dashboard import _profile

from gitperf.store.notes import CHECK_PREFIX, NOTES_REF, NotesStore

SIG = pygit2.Signature("Bench", "bench@example.com", 1_767_225_600, 0)


def _history(dest: Path, n: int) -> list[str]:
    repo = pygit2.init_repository(str(dest), initial_head="main")
    tb = repo.TreeBuilder()
    tb.insert("a.txt", repo.create_blob(b"a\n"), pygit2.GIT_FILEMODE_BLOB)
    tree, parent, shas = tb.write(), [], []
    for i in range(n):
        parent = [repo.create_commit(None, SIG, SIG, f"commit {i}", tree, parent)]
        shas.append(str(parent[0]))
    repo.references.create("refs/heads/main", parent[0])
    return shas


def _note(sha: str, rng, names, base) -> str:
    profile = codec.encode(_profile(sha, rng, names, base, np.ones(len(names))))
    record = CHECK_PREFIX + '{"base": "%s", "result": "no-change", "rounds": %d}' % (sha, rng.integers(5, 60))
    return profile + "\n" + record


def _objects_bytes(git_dir: Path) -> int:
    return sum(p.stat().st_size for p in (git_dir / "objects").rglob("*") if p.is_file())


def _write_all(root: Path, shas: list[str], functions: int, flat: bool) -> tuple[list[float], int]:
    repo = pygit2.Repository(str(root))
    store = NotesStore(repo)
    rng = np.random.default_rng(0)
    names = ["main"] + [f"fn_{i:03d}" for i in range(1, functions)]
    base = np.geomspace(2e9, 1e5, functions)
    times, payload = [], 0
    for i, sha in enumerate(shas):
        text = _note(sha, rng, names, base)
        payload += len(text) + 1
        t = time.perf_counter()
        if flat:
            repo.create_note(text + "\n", SIG, SIG, sha, NOTES_REF, True)
        else:
            store.add_lines({sha: text.split("\n")})
        times.append(time.perf_counter() - t)
        if (i + 1) % 1000 == 0:
            print(f"  {'flat' if flat else 'store'}: {i + 1} notes written", file=sys.stderr, flush=True)
    return times, payload


def _report(label: str, root: Path, times: list[float], payload: int) -> None:
    objs = _objects_bytes(root / ".git")
    print(f"{label}: {len(times)} notes, {payload / 2**20:.1f} MiB of note text; objects on disk "
          f"{objs / 2**20:.1f} MiB = {objs / payload:.2f}x the notes")
    print(f"  {'writes':>14s} {'median ms':>10s} {'p95 ms':>8s} {'max ms':>8s}")
    for lo in sorted({0, len(times) // 10, len(times) // 2, max(0, len(times) - 100)}):
        w = times[lo:lo + 100]
        print(f"  {lo + 1:>6d}-{lo + len(w):<7d} {statistics.median(w) * 1e3:10.2f} "
              f"{np.percentile(w, 95) * 1e3:8.2f} {max(w) * 1e3:8.1f}")
    slow = [t for t in times if t > 0.5]
    if slow:
        print(f"  {len(slow)} writes over 0.5 s (a `git gc --auto` pack of loose objects each): "
              f"{sum(slow):.1f} s in all, the longest {max(slow):.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--functions", type=int, default=40, help="functions in each note's profile")
    ap.add_argument("--flat", type=int, default=2000, help="notes written the old way for comparison (0: none)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.flat:
            root = Path(tmp) / "flat"
            shas = _history(root, a.flat)
            times, payload = _write_all(root, shas, a.functions, flat=True)
            _report("before (one flat notes tree, libgit2 create_note)", root, times, payload)
        root = Path(tmp) / "store"
        shas = _history(root, a.notes)
        times, payload = _write_all(root, shas, a.functions, flat=False)
        _report("git perf's store (fanned out, packed by gc --auto)", root, times, payload)
        top = pygit2.Repository(str(root)).references[NOTES_REF].peel(pygit2.Commit).tree
        print(f"  notes tree top level: {len(top)} entries")
        git_perf = [sys.executable, "-m", "gitperf", "log", "-n", "50"]
        subprocess.run(git_perf, cwd=root, check=True, capture_output=True)
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run(git_perf, cwd=root, check=True, capture_output=True, env={"PYTHONPATH": str(ROOT)})
            samples.append(time.perf_counter() - t)
        print(f"git perf log -n 50 (a new process, median of 5): {statistics.median(samples):.2f} s")


if __name__ == "__main__":
    main()
