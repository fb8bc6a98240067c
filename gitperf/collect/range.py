"""`collect --range`: every first-parent commit of a range that lacks profiles, `jobs` at a time,
each in its own worker process (`collect.worker`) given the user's request for that commit."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import pygit2

from gitperf.collect.context import CollectRequest
from gitperf.core.errors import CollectionAborted
from gitperf.core.proc import in_child, signals_held
from gitperf.core.progress import Progress
from gitperf.store.notes import NotesStore


def has_profiles(store: NotesStore, commit: str, workloads: tuple[str, ...]) -> bool:
    """Whether a commit holds collected profiles (`Profile.collected`: a paired check's rounds do not
    count) of each of `workloads`."""
    have = {p.profile.header.workload for p in store.read(commit)[0] if p.profile.collected}
    return bool(have) and all(w in have for w in workloads)


@dataclass
class RangeResult:
    collected: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already profiled
    failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"collected": self.collected, "skipped": self.skipped, "failed": self.failed}


# What collects one commit of a range, in a process of its own: `collect.worker` (the command's engine
# decides which: a test's fake engine has a worker of its own, `cli.app.Collector.worker`)
WORKER = (sys.executable, "-m", "gitperf.collect.worker")


@dataclass(frozen=True)
class Parallel:
    """How a range's commits are collected: `jobs` at a time, each by `worker` (a command that reads
    its commit's `CollectRequest` as JSON on standard input and exits with the error's code)."""

    jobs: int = 1
    worker: tuple[str, ...] = WORKER


@dataclass
class _Workers:
    """The worker processes under way, so that an interrupt reaches each of them."""

    repo: pygit2.Repository
    req: CollectRequest
    worker: tuple[str, ...]
    procs: set[subprocess.Popen] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, commit: str) -> tuple[int, str]:
        """One commit's collection: (exit code, its last error line)."""
        # a worker outlives a range killed with SIGKILL unless told: SIGTERM, which it takes as Ctrl-C
        # (its probes detached, its build killed, nothing stored)
        with signals_held() as mask:
            p = subprocess.Popen(list(self.worker),
                                 cwd=self.repo.workdir or self.repo.path, stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                 preexec_fn=lambda: in_child(mask, signal.SIGTERM))
        with self.lock:
            self.procs.add(p)
        _, err = p.communicate(replace(self.req, rev=commit).to_json())
        with self.lock:
            self.procs.discard(p)
        return p.returncode, (err.strip().splitlines() or [""])[-1]

    def interrupt(self) -> None:
        self.stop.set()
        with self.lock:
            for p in self.procs:
                p.send_signal(2)  # SIGINT: each collection detaches its probes and stores nothing


def collect_range(repo: pygit2.Repository, commits: list[str], req: CollectRequest, how: Parallel,
                  say: Progress) -> RangeResult:
    """Collect every commit that lacks profiles of `req.workloads` (names, resolved by the caller).
    A commit's profiles are stored when its collection ends, so an interrupted range resumes where
    it stopped.  Parallel collections share the CPUs: their times are noisier than one at a time."""
    store = NotesStore(repo)
    out = RangeResult()
    todo = [c for c in commits if not has_profiles(store, c, req.workloads)]
    out.skipped = [c for c in commits if c not in todo]
    if out.skipped:
        say(f"{len(out.skipped)} of {len(commits)} commits already have collected profiles: skipped")
    workers = _Workers(repo, req, how.worker)

    def one(k: int, c: str) -> None:
        if workers.stop.is_set():
            return
        say(f"[{k}/{len(todo)}] {c[:12]} {repo.get(c).message.splitlines()[0][:60]}: collecting")
        code, err = workers.run(c)
        (out.collected if code == 0 else out.failed).append(c)
        if code == 0:
            say(f"[{k}/{len(todo)}] {c[:12]}: stored")
        elif not workers.stop.is_set():
            say(f"[{k}/{len(todo)}] {c[:12]}: failed (exit {code}): {err}")

    pool = ThreadPoolExecutor(max_workers=max(how.jobs, 1))
    try:
        list(pool.map(one, range(1, len(todo) + 1), todo))
    except KeyboardInterrupt:
        workers.interrupt()
        pool.shutdown(wait=True, cancel_futures=True)
        raise CollectionAborted(f"interrupted after {len(out.collected)} of {len(todo)} commits; finished commits "
                                "are stored, run the same command again to resume") from None
    pool.shutdown()
    return out
