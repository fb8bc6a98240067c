"""`git perf collect` (ARCHITECTURE.md §2): request -> build -> context -> plan -> engine ->
profiles -> notes.

Profiles are written only after every requested run finished (or was marked partial), so an
interrupted collection writes nothing."""

from __future__ import annotations

import os
import shlex
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator

import pygit2
from elftools.common.exceptions import ELFError

from gitperf.analysis import elf
from gitperf.collect.budgeted import budgeted
from gitperf.collect.context import CollectContext, CollectRequest, Progress, Target
from gitperf.collect.profile import profile_run
from gitperf.core import codec
from gitperf.collect.resolve import Resolved, resolve
from gitperf.core.config import Workload
from gitperf.core.errors import CollectionAborted, InputError, WorkloadFailed
from gitperf.core.model import ROOT, Mode, Profile, content_id
from gitperf.engine.base import Engine
from gitperf.git import buildcache
from gitperf.git.repo import resolve_commit
from gitperf.git.state import perf_dir
from gitperf.git.worktree import Built, checkout, run_build, sweep_leftovers
from gitperf.plan.costs import call_costs
from gitperf.collect.inputs import full_trace_hotspots, planning_inputs
from gitperf.plan.optimize import Optimized, optimize
from gitperf.plan.probes import make_plan
from gitperf.store.notes import NotesStore


@dataclass(frozen=True)
class Collected:
    id: str
    profile: Profile
    line_bytes: int

    def to_dict(self) -> dict:
        """The stable shape of `collect --json` (ARCHITECTURE.md §12)."""
        p = self.profile
        plan = {"probed": list(p.plan.probed), "removed": {k: list(v) for k, v in p.plan.removed.items()},
                "changed": list(p.plan.changed), "pipeline": p.plan.pipeline, "methods": list(p.plan.methods),
                "reasons": p.plan.reasons, "renamed": p.plan.renamed, "sample_every": p.plan.sample_every,
                "base": p.plan.base, "mode": p.plan.mode, "traced": list(p.plan.traced), "params": p.plan.params}
        return {"id": self.id, "workload": p.header.workload, "partial": p.header.partial,
                "metrics": p.metrics.as_dict(), "plan": plan}


@dataclass(frozen=True)
class CollectResult:
    commit: str
    profiles: list[Collected]

    def to_dict(self) -> dict:
        """The stable shape of `collect --json` (ARCHITECTURE.md §12)."""
        return {"commit": self.commit, "profiles": [c.to_dict() for c in self.profiles]}


def collect(repo: pygit2.Repository, req: CollectRequest, engine: Engine, progress: Progress,
            keep: bool = True) -> CollectResult:
    """Collect and store profiles of `req.rev`; returns the commit and what was stored
    (with keep=False: what was collected, nothing is written)."""
    commit = resolve_commit(repo, req.rev)
    engine.check()  # fail fast (exit 4) before any build
    for path in sweep_leftovers(repo):
        progress(f"removed {path}: left by a collection that was killed")
    target = Target(repo, req, commit, engine, progress, perf_dir(repo))
    try:
        profiles = _collect_adhoc(target) if req.adhoc and req.no_build else _collect_checkout(target)
    except KeyboardInterrupt:
        raise CollectionAborted("interrupted: probes detached, workload killed, nothing was stored") from None
    lines = [codec.encode(p) for p in profiles]
    ids = NotesStore(repo).add_lines({commit: lines})[commit] if keep else [content_id(ln) for ln in lines]
    return CollectResult(commit, [Collected(i, p, len(ln)) for i, p, ln in zip(ids, profiles, lines)])


def _collect_adhoc(target: Target) -> list[Profile]:
    """An ad hoc binary, not built: the workloads run in the current directory."""
    ctx = CollectContext.build(target, resolve(target), Path.cwd(), Path(target.req.binary))
    return _run_workloads(ctx)


@contextmanager
def _tree(target: Target, side: Resolved) -> Iterator[tuple[Path, buildcache.Slot | None]]:
    """Where the commit is built: a kept build's worktree for a check's fresh builds, else a checkout."""
    if side.key is None:
        with checkout(target.repo, target.commit, fresh=not side.in_worktree) as root:
            yield root, None
    else:
        with buildcache.slot(target.repo, target.commit, side.key, target.cache_dir, target.req.rebuild) as kept:
            if kept.dropped:
                target.progress(f"not reusing the kept build of {target.commit[:12]}: {kept.dropped}; building it again")
            yield kept.root, kept


@contextmanager
def built(target: Target, side: Resolved | None = None) -> Iterator[CollectContext]:
    """The commit in a worktree (for as long as the context lasts), built by its build command (or
    its kept build reused, `git.buildcache`), and its collection context; `side`: the commit as
    `resolve` resolved it (resolved now when not given)."""
    side = side or resolve(target)
    with _tree(target, side) as (root, kept):
        cfg = side.config
        done = Built()
        if kept is not None and kept.built is not None:
            done = kept.built
            target.progress(f"reusing the build of {target.commit[:12]}: same commit, build configuration, "
                            f"compilers and environment (git perf keeps the last {buildcache.KEEP} builds)")
        elif cfg.build.command and not target.req.no_build:
            target.progress(f"building {target.commit[:12]}: {cfg.build.command}"
                            + (" (NOP-padded entries)" if cfg.build.probe_pad else ""))
            done = run_build(cfg.build, root, target.commit, target.cache_dir)
            if kept is not None:
                kept.finish(done, _outputs(root, root / cfg.build.binary))
        if done.pad:
            target.progress(f"  padded entries: {done.pad}")
        if done.note:
            target.progress(f"  note: {done.note}")
        binary = Path(target.req.binary) if target.req.adhoc else root / cfg.build.binary
        yield replace(CollectContext.build(target, side, root, binary), pad=done.pad)


def _outputs(root: Path, binary: Path) -> list[Path]:
    """What a kept build records of what it made (`Slot.finish`): the binary and the project's own
    libraries it loads from the tree; nothing when the build made no readable binary (the collection
    then says so, and the kept build is never reused)."""
    try:
        return [binary, *map(Path, elf.own_libraries(str(binary), str(root)).values())]
    except (OSError, ELFError):
        return []


def _collect_checkout(target: Target) -> list[Profile]:
    with built(target) as ctx:
        return _run_workloads(ctx)


def _plan_for(ctx: CollectContext, wl: Workload) -> Optimized:
    """The plan for one workload: from the configuration, narrowed by the pipeline, and under a
    budget the hybrid plan (each workload has its own baseline statistics)."""
    t0 = time.perf_counter()
    plan = make_plan(ctx.binary, ctx.collect, ctx.target.req.funcs)
    made = time.perf_counter() - t0
    opt = optimize(ctx.subject, plan, planning_inputs(ctx, wl), ctx.choice, ctx.progress)
    if ctx.max_overhead:
        opt = budgeted(ctx, plan, opt, wl)
    if opt.plan.mode != Mode.TRACE or any(opt.plan.removed.values()):
        opt = replace(opt, hotspots=full_trace_hotspots(ctx.history, ctx.config_key(wl)))
    return replace(opt, plan=replace(opt.plan, probe_cost=call_costs(opt.plan, ctx.cost_ns)), oo=opt.oo + made)


def check_it_ran(p: Profile, wl: Workload, ctx: CollectContext) -> None:
    """A run in which the binary's root function never ran measured nothing: a mistyped command, a
    command that runs another program, or one that failed first.  Storing it would hide that
    (`collect`'s runs, and every round of a paired check: its counting run, cut at a deadline, proves
    nothing of the runs after it)."""
    root = p.function(ROOT)
    if (root and root.count) or p.header.partial.startswith(("timeout", "crashed")) or p.plan.mode == Mode.BURSTY:
        return  # a crash or a timeout is kept as a partial profile: that is a finding (bursts may miss main)
    raise never_ran(wl, ctx, p.header.exit_status)


def failed(wl: Workload, commit: str, partial: str, when: str, stderr: str = "") -> WorkloadFailed:
    """A failing workload fails the collection and the check: its runs measure a different amount of
    work (issue #37: one that exited 1 after 5 ms was "no significant change", exit 0; issue #59: plain
    `collect` stored it marked PARTIAL and exited 0)."""
    said = ("\nits stderr ended with:\n" + "\n".join(f"  | {line}" for line in stderr.splitlines())
            if stderr.strip() else "\nit wrote nothing to stderr")
    return WorkloadFailed(f"workload {wl.name} {partial} on {commit[:12]} ({when}): the runs of a failing workload "
                          f"say nothing, and nothing was stored.  Its command: {' '.join(wl.argv)} (run it in a "
                          f"checkout of {commit[:12]}; `timeout` in .gitperf.toml if it needs longer){said}")


def never_ran(wl: Workload, ctx: CollectContext, status: int | None) -> InputError:
    """The error of a workload that never ran the binary's root function (`collect`'s runs, `check
    --collect`'s counting run), naming the programs it runs instead where it names them."""
    why = (" (exit status 127: command not found)" if status == 127 else
           f" (exit status {status})" if status else "")
    binary = os.path.relpath(ctx.binary.path, ctx.root)
    others = other_programs(wl.command, ctx.root, Path(ctx.binary.path))
    hint = (f"; it runs {', '.join(others)}, another file than build.binary ({binary}): probes attach to that "
            f"file only, so set build.binary to the program the workload runs" if others else
            "; check the workload's command")
    return InputError(f"workload {wl.name}: `{wl.command}` never ran {binary}'s {ROOT}(){why}; nothing was "
                      f"stored{hint}")


def other_programs(command: str, root: Path, binary: Path) -> list[str]:
    """The ELF files in the work tree other than `binary` that a workload's command names (a copy the
    build made, `./lz4` beside `programs/lz4`, is another file to a uprobe)."""
    try:
        words = shlex.split(command)
    except ValueError:  # (unbalanced quotes: the shell would fail too)
        words = command.split()
    out = []
    for w in words:
        path = (root / w).resolve()
        if ("/" in w and path.is_relative_to(root.resolve()) and path.is_file() and path != binary.resolve()
                and os.access(path, os.X_OK)):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    out.append(os.path.relpath(path, root.resolve()))
    return out


# A workload without a `repeat` of its own runs AUTO_RUNS times where that many runs take at most
# AUTO_BUDGET_S at native speed (the overhead budget's pilot measured it), else once.  The median of three
# shrugs off one disturbed run; with one run a collection, Lua's 23 ms run at defaults read its `main`
# 8-12% apart between commits and a +7% slowdown went unseen (bench/history.py).
AUTO_RUNS = 3
AUTO_BUDGET_S = 30.0


def runs(repeat: int | None, wl: Workload, opt: Optimized) -> int:
    """How many runs a collection of `wl` makes: --repeat, else the workload's `repeat`, else AUTO_RUNS
    where the pilot's native run time affords them (a fixed mode has no pilot: one)."""
    if repeat or wl.repeat:
        return repeat or wl.repeat
    return AUTO_RUNS if 0 < opt.native_s * AUTO_RUNS <= AUTO_BUDGET_S else 1


def _run_workloads(ctx: CollectContext) -> list[Profile]:
    wls = ctx.workloads()
    plans = {wl.name: _plan_for(ctx, wl) for wl in wls}  # (the pilots first: they decide how many runs)
    runs_of = [(wl, i) for wl in wls for i in range(runs(ctx.target.req.repeat, wl, plans[wl.name]))]
    out = []
    for k, (wl, i) in enumerate(runs_of, start=1):
        ctx.progress(f"[{k}/{len(runs_of)}] workload {wl.name} (run {i + 1}): {wl.command}")
        p = profile_run(ctx, plans[wl.name], wl)
        check_it_ran(p, wl, ctx)  # (first: a command that never ran the binary is told as such)
        if p.header.partial.startswith("failed"):  # (a crash or a timeout is a finding, kept: `check_it_ran`)
            raise failed(wl, ctx.target.commit, p.header.partial, f"run {i + 1}", p.header.stderr)
        if p.header.partial:
            ctx.progress(f"  warning: run is partial ({p.header.partial}); the profile is kept and marked")
        out.append(p)
    return out
