"""`git perf check REV --collect` (ARCHITECTURE.md §10a): build REV and its base, probe both with
one diff-focused plan in interleaved rounds until the focus functions are decided, store the
profiles as ordinary notes, and check REV against them.

Stopping: after `MIN_ROUNDS` rounds, a round is added while any changed or new function, or the
root, is undecided: neither a change of at least `check.min_relative` significant at the stricter
early-stopping level (`EARLY_STOP_SHARE`) nor an interval inside ±`check.min_relative`, and (but
for changed functions) still within reach of `MAX_ROUNDS` (`hopeless`).
`--rounds N` fixes the number; `MAX_ROUNDS` and `TIME_LIMIT_S` bound the rest (the check then
decides with what it has, at its ordinary level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pygit2

from gitperf.checks import record, verdict
from gitperf.checks.change import DEGRADATION, INLINED, NEW, OPTIMIZATION, REMOVED, UNKNOWN, Change, CheckResult, WorkloadPair
from gitperf.checks.check import Baseline, Request, check_workload, conclude
from gitperf.checks.decision import floor_ns
from gitperf.checks.sides import Sides
from gitperf.collect import paired
from gitperf.collect.context import CollectRequest, Progress
from gitperf.core.config import CheckConfig
from gitperf.core.errors import CollectionAborted, InputError
from gitperf.core.names import short
from gitperf.core.model import ROOT, Profile, StoredProfile, comparison_key
from gitperf.engine.base import Engine
from gitperf.git.repo import parent, resolve_commit
from gitperf.plan.focus import Focus
from gitperf.store.notes import NotesStore

MIN_ROUNDS = 3  # medians need three runs a side to shrug off one disturbed run
# Enough rounds for a sampled function's +30% on Lua (ARCHITECTURE.md §10a, "Sixty, not fifteen"); most checks stop earlier.
MAX_ROUNDS = 60
TIME_LIMIT_S = 90.0  # rounds stop being added after this long; with the set-up a check stays within 2 min
# Stopping as soon as a change is significant looks at the data after every round, and each look is
# another chance for noise to cross the line: stopping on a change needs a p-value of this share of
# the check's level (5e-4 at the default 99%).  For scale: Pocock's constant bound for 10 looks at a
# two-sided 5% is z = 2.555, 1.1% a look (a fifth), and more looks need less.  Without an early stop
# the verdict is the ordinary test of all rounds.
EARLY_STOP_SHARE = 0.05
HOPELESS_AFTER = 10  # rounds before a function may be judged out of reach of MAX_ROUNDS (`hopeless`)


@dataclass(frozen=True)
class PairedOptions:
    rev: str = "HEAD"  # the commit to check
    base: str | None = None  # default: the first parent
    workloads: tuple[str, ...] = ()
    rounds: int | None = None  # a fixed number of rounds (else: until decided)
    depth: int = 1  # callers of changed functions traced, levels up
    config: str | None = None  # --config FILE for commits without a .gitperf.toml
    time_limit_s: float = TIME_LIMIT_S
    rebuild: bool = False  # build both sides again rather than reuse kept builds (git.buildcache)


def hopeless(c: Change, rounds: int, cfg: CheckConfig) -> bool:
    """After `rounds` rounds, not even MAX_ROUNDS could decide `c`: its interval, narrowed as
    1/sqrt(rounds) (more pairs of the same spread), would still be wider than ±min_relative and still
    hold its center's distance from zero.  Judged from HOPELESS_AFTER rounds on: fewer say too little
    of the spread.  Only for the root and callers (`undecided`): a changed function's estimate from a
    few samples a round moves too much to give up on (zlib's 2x `pqdownheap` read +33% [-30%, +152%]
    at round 34, given up, and +88% significant at 59).  (The demo's 5 ms `gate` left `main` at
    -7%..+9% after 60 rounds of an unchanged commit, a minute each; from round 10 on it is seen to be
    out of reach.)"""
    if rounds < HOPELESS_AFTER or not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return False
    at_end = (c.ci_high - c.ci_low) / 2 * math.sqrt(rounds / MAX_ROUNDS)
    return at_end > cfg.min_relative and abs(c.ci_high + c.ci_low) / 2 < at_end


def undecided(changes: list[Change], focus: Focus, cfg: CheckConfig, rounds: int = 0) -> list[str]:
    """The focus functions more rounds could still decide: their change is neither significant at the
    early-stopping level nor bounded inside ±min_relative (or below `floor_ns`), or they have no
    comparison yet although the workload calls them (too few samples so far); after `rounds` rounds,
    not the `hopeless` ones but for changed functions.  New and removed functions have nothing to
    decide; a withheld comparison (`unknown`) stays withheld."""
    early = 1 - (1 - cfg.confidence) * EARLY_STOP_SHARE
    out, seen = [], set()
    runs = {c.workload: c.base_ns for c in changes if c.function == ROOT}
    for c in changes:
        if c.function not in focus.decisive:
            continue
        seen.add(c.function)
        if c.type in (NEW, REMOVED, INLINED, UNKNOWN) or (c.type in (DEGRADATION, OPTIMIZATION) and c.confidence >= early):
            continue
        if c.function not in focus.changed and hopeless(c, rounds, cfg):
            continue  # (a changed function is what the check is for: it gets every round there is)
        inside = -cfg.min_relative < c.ci_low and c.ci_high < cfg.min_relative
        small = max(abs(c.ci_low), abs(c.ci_high)) * c.base_ns < floor_ns(cfg, runs.get(c.workload, 0.0))  # cannot reach it
        if not (inside or small):
            out.append(c.function)
    # a changed function (not a new one: it has no base to compare with) not yet compared at all
    out += [n for n in {*focus.changed, ROOT} - seen if focus.resolvable(n)]
    return sorted(out)


def unresolved_note(changes: list[Change], focus: Focus, cfg: CheckConfig) -> str:
    """The focus functions the rounds left undecided, and what size of change each could hide."""
    by_name = {c.function: c for c in changes}
    parts = []
    for n in undecided(changes, focus, cfg):
        c = by_name.get(n)
        if c is None or not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
            parts.append(f"{short(n)} (not measured: too few samples; a change of any size would go unseen)")
        else:
            parts.append(f"{short(n)} (a change between {c.ci_low:+.0%} and {c.ci_high:+.0%} cannot be told from "
                         "noise)")
    return ("unresolved when the rounds ended: " + "; ".join(parts)) if parts else ""


def still_open(runs: paired.PairedRuns, cfg: CheckConfig) -> list[str]:
    """After a round: the focus functions the rounds so far leave undecided, by the verdicts the check
    would give now (`checks.verdict`: the same pipeline and the same changed set)."""
    sides = Sides(runs.workload, _unstored("t", runs.target), _unstored("b", runs.base))
    changed = verdict.changed(runs.target, set)
    return undecided(verdict.judge(sides, cfg, changed, opinions=False), runs.focus, cfg, len(runs.target))


def _unstored(commit: str, profiles: list[Profile]) -> list[StoredProfile]:
    """Profiles of the rounds so far, as the statistics take them (ids are not read there)."""
    return [StoredProfile(commit, i, f"{commit}{i}", p) for i, p in enumerate(profiles)]


def focus_note(focus: Focus, rounds: int) -> str:
    """What the paired check looked at, for the report (text and JSON)."""
    names = lambda xs: ", ".join(short(x) for x in xs) or "-"  # noqa: E731
    sampled = "; ".join(f"{short(n)}: {why}" for n, why in focus.sampled.items())
    renamed = ", ".join(f"{short(a)} -> {short(b)}" for a, b in sorted(focus.renamed.items()))
    return (f"paired check, {rounds} interleaved rounds: changed {names(focus.changed)}; new {names(focus.new)}; "
            f"callers {names(focus.callers)}; traced {names(focus.traced)}"
            + (f"; renamed (same code, not measured as new): {renamed}" if renamed else "")
            + (f"; only stack-sampled: {sampled}" if sampled else "")
            + (f"; the project's own libraries differ ({focus.libraries}): their functions stack-sampled "
               f"({names(focus.library_changed)} changed there), the run as a whole measured"
               if focus.libraries else ""))


def pad_note(target: list[StoredProfile], cfg: CheckConfig) -> str:
    """Whether the sides were built with padded entries, as the check asked ("" when they were)."""
    if not cfg.probe_pad or not target or target[0].profile.plan.pad:
        return ""
    return ("built without padded function entries: the padded build failed, so both sides were built "
            "unpadded (traced calls cost ~10x more; ARCHITECTURE.md §6)")


def _commits(repo: pygit2.Repository, rev: str, base_rev: str | None) -> tuple[str, str]:
    commit = resolve_commit(repo, rev)
    base = resolve_commit(repo, base_rev) if base_rev else parent(repo, commit)
    if not base:
        raise InputError(f"{commit[:12]} has no parent to compare with: name a base with --base")
    if base == commit:
        raise InputError(f"--base {base_rev} is {commit[:12]} itself: a paired check compares two commits "
                         "(git perf noise compares a commit with itself)")
    return commit, base


def check_collect(repo: pygit2.Repository, opts: PairedOptions, cfg: CheckConfig, engine: Engine,
                  progress: Progress) -> CheckResult:
    """Collect REV and its base in interleaved rounds (`collect.paired`), store both sides, and
    check REV against them; the result ends like every check (`checks.check.conclude`)."""
    commit, base = _commits(repo, opts.rev, opts.base)
    stop = paired.Stop(opts.rounds, MIN_ROUNDS, MAX_ROUNDS, opts.time_limit_s)
    # both sides built alike, from scratch, by the check itself (CheckConfig.probe_pad)
    req = CollectRequest(rev=commit, workloads=opts.workloads, config=opts.config, probe_pad=cfg.probe_pad,
                         align_functions=cfg.align_functions, fresh=True, rebuild=opts.rebuild)
    preq = paired.PairedRequest(req, base, opts.depth, stop, witness=cfg.witness == "instructions")
    collected = paired.collect_pairs(repo, preq, engine, progress, lambda r: still_open(r, cfg))
    runs = collected.runs
    store = NotesStore(repo)
    request = Request(repo, store, commit, cfg, store.ancestors(commit))
    try:
        lines, sides = paired.encode_runs(base, commit, runs)
        pairs, changes = [], []
        for run, (b, t) in zip(runs, sides):
            if run.skipped:  # nothing to measure: no rounds, no witness, and no verdict but this one
                pairs.append(WorkloadPair(run.workload, "", 0, base, 0, 0, "-", (run.skipped,)))
                continue
            pair, found = check_workload(request, comparison_key(t[0].profile), t, Baseline(base, b))
            notes = (focus_note(run.focus, len(t)), unresolved_note(found, run.focus, cfg), pad_note(t, cfg))
            pairs.append(replace(pair, notes=pair.notes + tuple(n for n in notes if n)))
            changes.extend(found)
        result = conclude(request, pairs, changes, [])
    except KeyboardInterrupt:
        raise CollectionAborted("interrupted: probes detached, workloads killed, nothing was stored") from None
    # the profiles of both sides and the check's record, all or nothing (ARCHITECTURE.md §4, §10c)
    pairings = sorted({p.plan.pairing for r in runs for p in r.target})
    store.add_lines({**lines, commit: lines[commit] + [record.line(result, pairings)]})
    return result
