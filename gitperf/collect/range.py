"""Workflows over many commits: `collect --range` (parallel, resumable) and `bisect`."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import pygit2

from gitperf.core.errors import CollectionAborted
from gitperf.store.notes import NotesStore

Progress = Callable[[str], None]


def has_profiles(store: NotesStore, commit: str, workloads: tuple[str, ...]) -> bool:
    have = {p.profile.header.workload for p in store.read(commit)[0] if p.profile.complete}
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
