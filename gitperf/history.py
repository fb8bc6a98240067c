"""Workflows over many commits: `collect --range` (parallel, resumable) and `bisect`."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import pygit2

from gitperf import stats
from gitperf.checks import comparable
from gitperf.errors import CollectionAborted, InputError
from gitperf.store import NotesStore, resolve_commit

Progress = Callable[[str], None]


def first_parent_range(repo: pygit2.Repository, spec: str) -> list[str]:
    """`A..B` (or a single REV: just it) as first-parent commits, oldest first."""
    cwd = repo.workdir or repo.path
    if ".." not in spec:
        return [resolve_commit(repo, spec)]
    a, b = spec.split("..", 1)
    a, b = resolve_commit(repo, a or "HEAD"), resolve_commit(repo, b or "HEAD")
    r = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", f"{a}..{b}"], cwd=cwd,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError(f"cannot list {spec}: {r.stderr.strip()}")
    return r.stdout.split()


def has_profiles(store: NotesStore, commit: str, workloads: tuple[str, ...]) -> bool:
    have = {p.profile.header.workload for p in store.read(commit)[0] if comparable(p)}
    return bool(have) and all(w in have for w in workloads)


def collect_range(repo: pygit2.Repository, commits: list[str], workloads: tuple[str, ...], jobs: int,
                  extra_args: tuple[str, ...], say: Progress) -> tuple[list[str], list[str], list[str]]:
    """Collect every commit that lacks profiles of `workloads`, `jobs` at a time, each in its own
    `git perf collect` process (and so its own temporary worktree and probes).  A commit's profiles
    are stored when its collection ends, so an interrupted range resumes where it stopped.
    Returns (collected, skipped, failed).  Parallel collections share the CPUs: their times are
    noisier than one at a time (the default)."""
    store = NotesStore(repo)
    todo = [c for c in commits if not has_profiles(store, c, workloads)]
    skipped = [c for c in commits if c not in todo]
    if skipped:
        say(f"{len(skipped)} of {len(commits)} commits already have profiles: skipped")
    done, failed = [], []
    procs: set[subprocess.Popen] = set()
    lock = threading.Lock()
    stop = threading.Event()
    cwd = repo.workdir or repo.path
    wl_args = [a for w in workloads for a in ("--workload", w)]

    def one(k_c):
        k, c = k_c
        if stop.is_set():
            return
        subject = repo.get(c).message.splitlines()[0][:60]
        say(f"[{k}/{len(todo)}] {c[:12]} {subject}: collecting")
        p = subprocess.Popen([sys.executable, "-m", "gitperf", "collect", c, "-q", *wl_args, *extra_args], cwd=cwd,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        with lock:
            procs.add(p)
        _, err = p.communicate()
        with lock:
            procs.discard(p)
            (done if p.returncode == 0 else failed).append(c)
        if p.returncode == 0:
            say(f"[{k}/{len(todo)}] {c[:12]}: stored")
        elif not stop.is_set():
            say(f"[{k}/{len(todo)}] {c[:12]}: failed (exit {p.returncode}): {err.strip().splitlines()[-1] if err.strip() else ''}")

    pool = ThreadPoolExecutor(max_workers=max(jobs, 1))
    try:
        list(pool.map(one, enumerate(todo, start=1)))
    except KeyboardInterrupt:
        stop.set()
        with lock:
            for p in procs:
                p.send_signal(2)  # SIGINT: each collection detaches its probes and stores nothing
        pool.shutdown(wait=True, cancel_futures=True)
        raise CollectionAborted(f"interrupted after {len(done)} of {len(todo)} commits; finished commits are "
                                "stored, run the same command again to resume") from None
    pool.shutdown()
    return done, skipped, failed


@dataclass(frozen=True)
class BisectResult:
    first_bad: str
    good: str
    bad: str
    metric: str
    values: dict[str, float]  # commit -> metric (ns per run) for the commits looked at
    collected: list[str]
    range_size: int


def metric(store: NotesStore, commit: str, workload: str, function: str) -> float | None:
    vals = [float(f.total_ns) for p in store.read(commit)[0]
            if comparable(p) and p.profile.header.workload == workload and (f := p.profile.function(function))]
    return stats.center(vals) if vals else None


def bisect(repo: pygit2.Repository, good: str, bad: str, workload: str, function: str,
           collect_one: Callable[[str], None], say: Progress) -> BisectResult:
    """The first commit in good..bad (first parent) whose `function` time per run is nearer BAD's
    level than GOOD's (geometric midpoint).  Assumes a single step between them; collects only the
    commits the binary search visits."""
    store = NotesStore(repo)
    g, b = resolve_commit(repo, good), resolve_commit(repo, bad)
    line = first_parent_range(repo, f"{g}..{b}")
    if not line or line[-1] != b:
        raise InputError(f"{bad} is not a first-parent descendant of {good}")
    collected: list[str] = []
    values: dict[str, float] = {}

    def value(c: str) -> float:
        if c not in values:
            v = metric(store, c, workload, function)
            if v is None:
                collect_one(c)
                collected.append(c)
                v = metric(store, c, workload, function)
            if v is None:
                raise InputError(f"no profile of {function} in workload {workload} at {c[:12]} after collecting")
            values[c] = v
        return values[c]

    vg, vb = value(g), value(b)
    if vb <= vg:
        raise InputError(f"{function} is not slower at {bad} ({vb / 1e6:.3f} ms) than at {good} "
                         f"({vg / 1e6:.3f} ms): nothing to bisect")
    mid_level = math.sqrt(vg * vb)
    lo, hi = -1, len(line) - 1  # line[lo] good (lo = -1 is GOOD itself), line[hi] bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = value(line[mid])
        verdict = "bad" if v > mid_level else "good"
        say(f"{line[mid][:12]}: {function} {v / 1e6:.3f} ms per run -> {verdict}")
        if v > mid_level:
            hi = mid
        else:
            lo = mid
    return BisectResult(line[hi], g, b, function, values, collected, len(line))
