"""Analysis stage of `collect` (DESIGN.md §1): call graph -> diff tracing -> pipeline -> narrowed plan.

The statistics of "earlier runs" are the baseline commit's profile of the same configuration, read
from the notes: nothing separate to keep in sync.  The base binary for diff tracing is analysed from
the cache when its build id was seen before, else built in a temporary worktree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pygit2

from gitperf import callgraph, difftrace, elf, pipelines, sourcediff
from gitperf.build import checkout, run_build
from gitperf.checks import ancestors
from gitperf.config import Config, load as load_config
from gitperf.errors import GitPerfError
from gitperf.model import FunctionStats, Profile
from gitperf.plan import ProbePlan, narrow
from gitperf.store import NotesStore, resolve_commit

Progress = Callable[[str], None]


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


def _binary_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def baseline_profile(repo: pygit2.Repository, commit: str, config_key: str, base: str | None = None,
                     want: Callable[[Profile], bool] = lambda _p: True) -> tuple[str, Profile | None]:
    """The nearest first-parent ancestor (or `base`) that has a complete profile with this
    configuration key (and that `want`s); with several runs, the one with the median root time."""
    store = NotesStore(repo)
    for sha in [base] if base else ancestors(repo, commit, limit=200):
        ps = [p.profile for p in store.read(sha)[0]
              if p.profile.config_key == config_key and not p.profile.header.partial and want(p.profile)]
        if ps:
            ps.sort(key=lambda p: (p.function(callgraph.ROOT).total_ns if p.function(callgraph.ROOT) else 0))
            return sha, ps[len(ps) // 2]
    return "", None


def baseline_stats(repo: pygit2.Repository, commit: str, config_key: str, base: str | None = None,
                   ) -> tuple[str, dict[str, FunctionStats], dict[str, str]]:
    """Per-function statistics of the baseline profile (see `baseline_profile`), and the functions
    its plan left out by dynamic baseline, with the reasons (they have no statistics there)."""
    sha, profile = baseline_profile(repo, commit, config_key, base)
    if profile is None:
        return "", {}, {}
    plan = profile.plan
    dropped = {n: plan.reasons.get(n, "dynamic baseline") for n in plan.removed.get("dynamic-baseline", ())}
    return sha, {f.name: f for f in profile.functions}, dropped


def diff_base(repo: pygit2.Repository, commit: str, base_rev: str | None) -> str:
    """The commit a change is measured against: `base_rev` (--base), else the first parent ("" for a
    root commit)."""
    if base_rev:
        return resolve_commit(repo, base_rev)
    parents = repo.get(commit).parents
    return str(parents[0].id) if parents else ""


def base_callgraph(repo: pygit2.Repository, base: str, cfg: Config, binary_rel: str, cache_dir: Path,
                   progress: Progress) -> callgraph.CallGraph:
    """The base commit's call graph: from the cache when that commit was analysed before (by an
    earlier pipeline collection), else by building it in a temporary worktree."""
    name = _binary_name(binary_rel)
    alias = f"{base}-{name}"
    if callgraph.cached_build_id(cache_dir, alias):
        return callgraph.load("", "", cache_dir, progress, alias)
    progress(f"diff tracing: building the base {base[:12]} to analyse it")
    with checkout(repo, base) as root:
        bcfg = load_config(root) or cfg
        if bcfg.build.command:
            run_build(bcfg.build.command, root, base, cache_dir)
        info = elf.load(root / (bcfg.build.binary or binary_rel))
        return callgraph.load(info.path, info.build_id, cache_dir, progress, alias)


def optimize(repo: pygit2.Repository, commit: str, binary: elf.BinaryInfo, plan: ProbePlan, cfg: Config,
             config_key: str, pipeline: str, on: tuple[str, ...], off: tuple[str, ...], args: tuple[str, ...],
             base_rev: str | None, locations: dict[str, str], cache_dir: Path, progress: Progress,
             from_commit: bool = True) -> Optimized:
    """`from_commit`: the binary was built from `commit`'s tree (not an ad hoc binary), so its
    analysis may be cached and reused under the commit's name."""
    chosen, overrides = pipelines.resolve(pipeline, on, off, args)
    if not chosen:
        return Optimized(plan, pipeline)
    t0 = time.perf_counter()
    name = _binary_name(binary.path)
    cg = callgraph.load(binary.path, binary.build_id, cache_dir, progress, f"{commit}-{name}" if from_commit else None)
    base = diff_base(repo, commit, base_rev)
    diff = None
    if "diff-tracing" in chosen and base:
        try:
            base_cg = base_callgraph(repo, base, cfg, binary.path, cache_dir, progress)
            touched = frozenset(sourcediff.changed_functions(repo, base, commit, locations))
            criterion = str(overrides.get("criterion", pipelines.predict(pipeline, cg, {})["criterion"]))
            diff = difftrace.diff(base_cg, cg, criterion, touched)
            progress(f"diff tracing against {base[:12]} ({criterion}): changed {', '.join(diff.changed) or '-'}; "
                     f"new {', '.join(diff.new) or '-'}; renamed "
                     f"{', '.join(f'{a}->{b}' for a, b in diff.renamed.items()) or '-'}")
        except GitPerfError as e:
            progress(f"diff tracing skipped: cannot analyse the base {base[:12]}: {e}")
    ore = time.perf_counter() - t0
    t1 = time.perf_counter()
    stats_commit, stats, dropped = baseline_stats(repo, commit, config_key, base_rev and base)
    if not stats and not base_rev:
        # No ancestor ran this configuration: the commit's own earlier runs, so that its later runs
        # leave out the same hot functions its descendants will (else a check compares a side that
        # probed them, its callers' inclusive times inflated by their probes, with one that did not)
        stats_commit, stats, dropped = baseline_stats(repo, commit, config_key, commit)
    params = {**pipelines.predict(pipeline if pipeline != "none" else "advanced", cg, stats), **overrides}
    change = pipelines.run(chosen, params, cg, frozenset(plan.names), stats, diff, dropped)
    removed = {m: tuple(sorted(r)) for m, r in change.removed.items()}
    reasons = {n: why for r in change.removed.values() for n, why in r.items()}
    narrowed = narrow(plan, change.keep, removed, change.changed, change.sample_every)
    oo = time.perf_counter() - t1
    progress(f"pipeline {pipeline} ({', '.join(chosen)}): probing {len(narrowed.functions)} of "
             f"{len(plan.functions)} functions" + (f"; statistics from {stats_commit[:12]}" if stats_commit else
                                                     "; no earlier profile for dynamic statistics"))
    return Optimized(narrowed, pipeline, chosen, reasons, dict(diff.renamed) if diff else {}, base or "",
                     ore, oo, levels=dict(cg.levels))
