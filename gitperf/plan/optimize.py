"""Analysis stage of `collect` (ARCHITECTURE.md §7): call graph -> diff tracing -> pipeline -> narrowed plan.

The statistics of "earlier runs" are the baseline commit's profile of the same configuration, read
from the notes through the collection's one `History`: nothing separate to keep in sync.  The base's
call graph for diff tracing is asked of `Subject.base_graph` (collect's: from the cache when that
commit was analysed before, else built in a temporary worktree): planning reads no note and builds
nothing itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable
import pygit2

from gitperf.analysis import callgraph, difftrace, elf
from gitperf.core.config import Config
from gitperf.core.errors import GitPerfError
from gitperf.core.fmt import names
from gitperf.core.names import short
from gitperf.core.model import FunctionStats, Mode
from gitperf.core.progress import Progress
from gitperf.git import sourcediff
from gitperf.git.repo import parent, resolve_commit
from gitperf.plan import pipelines
from gitperf.plan.probes import ProbePlan, narrow
from gitperf.store.history import History


@dataclass(frozen=True)
class Optimized:
    plan: ProbePlan
    pipeline: str
    methods: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    base: str = ""
    ore: float = 0.0  # resource extraction (angr, or the cache) and base analysis
    oo: float = 0.0  # planning
    levels: dict[str, int] = field(default_factory=dict)  # call-graph level of each function (when analysed)
    params: dict[str, float] = field(default_factory=dict)  # --max-overhead: the budget's figures
    native_s: float = 0.0  # --max-overhead: the pilot's run time, against which overhead is measured
    # exclusive ns per function in the nearest full trace, when the plan leaves functions out (HC)
    hotspots: dict[str, int] = field(default_factory=dict)
    inlined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # paired check: removed function -> inlined into


def _binary_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def baseline_stats(history: History, config_key: str, base: str | None = None,
                   ) -> tuple[str, dict[str, FunctionStats], dict[str, str]]:
    """Per-function statistics of the baseline profile (`History.nearest`), and the functions its
    plan left out by dynamic baseline, with the reasons (they have no statistics there)."""
    sha, profile = history.nearest(config_key, base)
    if profile is None:
        return "", {}, {}
    plan = profile.plan
    dropped = {n: plan.reasons.get(n, "dynamic baseline") for n in plan.removed.get("dynamic-baseline", ())}
    return sha, {f.name: f for f in profile.functions}, dropped


def full_trace_hotspots(history: History, config_key: str) -> dict[str, int]:
    """Exclusive ns per function of the nearest complete full trace (every function, every call) of
    this configuration: the reference hotspot coverage (HC) is measured against."""
    _sha, p = history.nearest(config_key, want=lambda p: p.plan.mode == Mode.TRACE and not any(p.plan.removed.values()))
    return {f.name: f.exclusive_ns for f in p.functions} if p else {}


def diff_base(repo: pygit2.Repository, commit: str, base_rev: str | None) -> str:
    """The commit a change is measured against: `base_rev` (--base), else the first parent ("" for a
    root commit)."""
    if base_rev:
        return resolve_commit(repo, base_rev)
    return parent(repo, commit)


@dataclass(frozen=True)
class Subject:
    """What a plan is made for: one commit's binary, and what planning may read about it."""

    repo: pygit2.Repository
    commit: str
    binary: elf.BinaryInfo
    config: Config
    locations: dict[str, str]  # function -> "file:line" (DWARF)
    cache_dir: Path  # .git/perf/: analysis caches and build locks
    history: History  # the commit's ancestors' profiles, each note read once for the whole collection
    # diff tracing: a base commit's call graph (collect builds it in a worktree, or reads its cache)
    base_graph: Callable[[str, Progress], callgraph.CallGraph]
    # the binary was built from `commit`'s tree (not an ad hoc one): its analysis may be cached under
    # the commit's name, and the commit's diff means something for it
    from_commit: bool = True


@dataclass(frozen=True)
class PipelineChoice:
    """The pipeline and the user's changes to it (--pipeline, --optimization-on/-off/-arg, --base)."""

    pipeline: str = "none"
    on: tuple[str, ...] = ()
    off: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    base_rev: str | None = None


def _diff(subject: Subject, base: str, cg: callgraph.CallGraph, criterion: str,
          progress: Progress) -> difftrace.DiffResult | None:
    """Diff tracing against `base`: its call graph (cached, or built in a worktree) against ours."""
    try:
        base_cg = subject.base_graph(base, progress)
        touched = frozenset(sourcediff.changed_functions(subject.repo, base, subject.commit, subject.locations))
        diff = difftrace.diff(base_cg, cg, criterion, touched)
    except GitPerfError as e:
        progress(f"diff tracing skipped: cannot analyse the base {base[:12]}: {e}")
        return None
    progress(f"diff tracing against {base[:12]} ({criterion}): changed {names(diff.changed)}; "
             f"new {names(diff.new)}; renamed {names(f'{short(a)}->{short(b)}' for a, b in diff.renamed.items())}")
    return diff


def _statistics(subject: Subject, config_key: str, base: str, forced: bool):
    """The baseline's statistics.  When no ancestor ran this configuration: the commit's own earlier
    runs, so that its later runs leave out the same hot functions its descendants will (else a check
    compares a side that probed them, its callers' inclusive times inflated by their probes, with one
    that did not)."""
    found = baseline_stats(subject.history, config_key, base if forced else None)
    if not found[1] and not forced:
        found = baseline_stats(subject.history, config_key, subject.commit)
    return found


def optimize(subject: Subject, plan: ProbePlan, config_key: str, choice: PipelineChoice,
             progress: Progress) -> Optimized:
    """The pipeline's methods applied to `plan` (ARCHITECTURE.md §7)."""
    chosen, overrides = pipelines.resolve(choice.pipeline, choice.on, choice.off, choice.args)
    if not chosen:
        return Optimized(plan, choice.pipeline)
    t0 = time.perf_counter()
    name = _binary_name(subject.binary.path)
    cg = callgraph.load(subject.binary.path, subject.binary.build_id, subject.cache_dir, progress,
                        f"{subject.commit}-{name}" if subject.from_commit else None)
    base = diff_base(subject.repo, subject.commit, choice.base_rev)
    diff = None
    if "diff-tracing" in chosen and base:
        criterion = str(overrides.get("criterion", pipelines.predict(choice.pipeline, cg, {})["criterion"]))
        diff = _diff(subject, base, cg, criterion, progress)
    ore = time.perf_counter() - t0
    t1 = time.perf_counter()
    stats_commit, stats, dropped = _statistics(subject, config_key, base, bool(choice.base_rev))
    params = {**pipelines.predict(choice.pipeline if choice.pipeline != "none" else "advanced", cg, stats),
              **overrides}
    first = replace(pipelines.start(chosen, cg, frozenset(plan.names), stats, diff), dropped_before=dropped)
    change = pipelines.run(chosen, params, first)
    removed = {m: tuple(sorted(r)) for m, r in change.removed.items()}
    reasons = {n: why for r in change.removed.values() for n, why in r.items()}
    narrowed = narrow(plan, change.keep, removed, change.changed, change.sample_every)
    progress(f"pipeline {choice.pipeline} ({', '.join(chosen)}): probing {len(narrowed.functions)} of "
             f"{len(plan.functions)} functions" + (f"; statistics from {stats_commit[:12]}" if stats_commit else
                                                     "; no earlier profile for dynamic statistics"))
    return Optimized(narrowed, choice.pipeline, chosen, reasons, dict(diff.renamed) if diff else {}, base or "",
                     ore, time.perf_counter() - t1, levels=dict(cg.levels))
