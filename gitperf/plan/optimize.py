"""Analysis stage of `collect` (ARCHITECTURE.md §7): call graph -> diff tracing -> pipeline -> narrowed plan.

Planning reads no repository: what it needs of one is handed in as values (`Inputs`, read by
`collect.inputs` once per workload): the commit diff tracing compares with, the functions the source
diff touched, and the statistics of "earlier runs" (the baseline commit's profile of the same
configuration).  The base's call graph for diff tracing is asked of `Subject.base_graph` (collect's:
from the cache when that commit was analysed before, else built in a temporary worktree), since
building it is the one input worth not reading unless diff tracing runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from gitperf.analysis import callgraph, difftrace, elf
from gitperf.core.config import Config
from gitperf.core.errors import GitPerfError
from gitperf.core.fmt import names
from gitperf.core.names import short
from gitperf.core.model import FunctionStats
from gitperf.core.progress import Progress
from gitperf.plan import pipelines
from gitperf.plan.probes import ProbePlan, narrow


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


@dataclass(frozen=True)
class Baseline:
    """The statistics of "earlier runs": per function, its statistics in the baseline profile (the
    nearest of this configuration), the commit that profile is of, and the functions its plan left
    out by dynamic baseline, with the reasons (they have no statistics there)."""

    commit: str = ""
    stats: dict[str, FunctionStats] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Inputs:
    """What planning reads of the repository for one workload, read by `collect.inputs`: the commit a
    change is measured against ("" for a root commit), the functions the source diff between it and
    the commit touched (None: unknown, `touched_error` says why), and the baseline's statistics."""

    base: str = ""
    touched: frozenset[str] | None = frozenset()
    touched_error: str = ""
    baseline: Baseline = Baseline()


@dataclass(frozen=True)
class Subject:
    """What a plan is made for: one commit's binary, and what planning may read about it."""

    commit: str
    binary: elf.BinaryInfo
    config: Config
    locations: dict[str, str]  # function -> "file:line" (DWARF)
    cache_dir: Path  # .git/perf/: analysis caches and build locks
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


def _diff(subject: Subject, inputs: Inputs, cg: callgraph.CallGraph, criterion: str,
          progress: Progress) -> difftrace.DiffResult | None:
    """Diff tracing against the base: its call graph (cached, or built in a worktree) against ours."""
    base = inputs.base
    try:
        base_cg = subject.base_graph(base, progress)
        if inputs.touched is None:
            raise GitPerfError(inputs.touched_error)
        diff = difftrace.diff(base_cg, cg, criterion, inputs.touched)
    except GitPerfError as e:
        progress(f"diff tracing skipped: cannot analyse the base {base[:12]}: {e}")
        return None
    progress(f"diff tracing against {base[:12]} ({criterion}): changed {names(diff.changed)}; "
             f"new {names(diff.new)}; renamed {names(f'{short(a)}->{short(b)}' for a, b in diff.renamed.items())}")
    return diff


def planned(choice: PipelineChoice) -> tuple[str, ...]:
    """The pipeline's methods the choice runs (none: the plan is the configuration's, and planning
    needs no `Inputs`)."""
    return pipelines.resolve(choice.pipeline, choice.on, choice.off, choice.args)[0]


def optimize(subject: Subject, plan: ProbePlan, inputs: Inputs, choice: PipelineChoice,
             progress: Progress) -> Optimized:
    """The pipeline's methods applied to `plan` (ARCHITECTURE.md §7), with what `inputs` read of the
    repository."""
    chosen, overrides = pipelines.resolve(choice.pipeline, choice.on, choice.off, choice.args)
    if not chosen:
        return Optimized(plan, choice.pipeline)
    t0 = time.perf_counter()
    name = _binary_name(subject.binary.path)
    cg = callgraph.load(subject.binary.path, subject.binary.build_id, subject.cache_dir, progress,
                        f"{subject.commit}-{name}" if subject.from_commit else None)
    diff = None
    if "diff-tracing" in chosen and inputs.base:
        criterion = str(overrides.get("criterion", pipelines.predict(choice.pipeline, cg, {})["criterion"]))
        diff = _diff(subject, inputs, cg, criterion, progress)
    ore = time.perf_counter() - t0
    t1 = time.perf_counter()
    stats_commit, stats, dropped = inputs.baseline.commit, inputs.baseline.stats, inputs.baseline.dropped
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
    return Optimized(narrowed, choice.pipeline, chosen, reasons, dict(diff.renamed) if diff else {}, inputs.base,
                     ore, time.perf_counter() - t1, levels=dict(cg.levels))
