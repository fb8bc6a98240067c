"""`git perf check REV --collect` (ARCHITECTURE.md §10a): build REV and its base, probe both with
one diff-focused plan in interleaved rounds until the focus functions are decided, store the
profiles as ordinary notes, and check REV against them.

Stopping: after `MIN_ROUNDS` rounds, a round is added while any changed or new function, or the
root, is undecided: neither a change of at least `check.min_relative` significant at the stricter
early-stopping level (`EARLY_STOP_SHARE`) nor an interval inside ±`check.min_relative`, and (but
for changed functions whose estimate reads a change: `reads_unchanged`) still within reach of
`MAX_ROUNDS` (`hopeless`), and (changed ones too) not a change about the threshold itself
(`at_the_threshold`).
`--rounds N` fixes the number; `MAX_ROUNDS` and `TIME_LIMIT_S` bound the rest (the check then
decides with what it has, at its ordinary level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pygit2

from gitperf.checks import record, verdict, witness
from gitperf.checks.change import (CONFLICT, DEGRADATION, INLINED, INSTRUCTIONS, NEW, NO_CHANGE, OPTIMIZATION, REMOVED, UNKNOWN,
                                   UNRESOLVED, Change, CheckResult, WorkloadPair)
from gitperf.checks.check import Baseline, Request, check_workload, conclude
from gitperf.checks.decision import WITHIN, band, floor_ns, threshold
from gitperf.checks.designs.pooled import PLACEMENT_SPREAD
from gitperf.checks.designs.paired import rounds as by_round
from gitperf.checks.sides import Sides
from gitperf.collect import paired
from gitperf.collect.context import CollectRequest, Progress, machine_fingerprint
from gitperf.core.config import CheckConfig
from gitperf.core.errors import CollectionAborted, InputError
from gitperf.core.names import short
from gitperf.core.model import ROOT, Profile, StoredProfile, comparison_key
from gitperf.engine.base import Engine
from gitperf.git.repo import parent, resolve_commit
from gitperf.plan.focus import Focus
from gitperf.stats.timing import on_cpu_ns
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
    fresh: bool = False  # a new series of rounds, not added to the stored check's (implied by rebuild)


def half_at(c: Change, rounds: int, horizon: int) -> float:
    """The half-width `c`'s interval would have after `horizon` rounds: narrowed as 1/sqrt(rounds)
    from its width after `rounds` (more pairs of the same spread).  What each futility bound projects."""
    return (c.ci_high - c.ci_low) / 2 * math.sqrt(rounds / max(horizon, rounds))


def hopeless(c: Change, rounds: int, cfg: CheckConfig, horizon: int = MAX_ROUNDS) -> bool:
    """After `rounds` rounds, not even `horizon` rounds could decide `c`: its interval, narrowed as
    1/sqrt(rounds) (more pairs of the same spread), would still be wider than ±min_relative and still
    hold zero.  Judged
    from HOPELESS_AFTER rounds on: fewer say too little of the spread.  For the root and callers; for a
    changed function only where its estimate also reads no change (`reads_unchanged`, `undecided`): one
    from a few samples a round moves too much to give up on otherwise (zlib's 2x `pqdownheap` read +33%
    [-30%, +152%] at round 34, given up, and +88% significant at 59).  (The demo's 5 ms `gate` left `main` at -7%..+9% after 60 rounds of an unchanged commit, a
    minute each; from round 10 on it is seen to be out of reach.)"""
    if rounds < HOPELESS_AFTER or not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return False
    at_end = half_at(c, rounds, horizon)
    return at_end > cfg.min_relative and abs(c.ci_high + c.ci_low) / 2 < at_end


def reads_unchanged(c: Change, t: float) -> bool:
    """A futility bound for a changed function whose interval is out of reach (`hopeless`): its estimate
    (the interval's center) lies within half the threshold, so the rounds left are spent on a change
    that reads as none.  Lua's `internshrstr` with one `nop` more (18 ns a call, stack-sampled) read
    -0.9% [-10%, +9%] after 120 rounds (issue #57, item 3); zlib's 2x `pqdownheap`, +33% [-30%, +152%]
    at round 34, reads far from none and keeps its rounds (+88%, a verdict, at 59).  A true +30% reads
    within 2.5% at round 10 about 0.3% of the time at that width (±23%); it then ends unresolved."""
    return math.isfinite(t) and abs(c.ci_high + c.ci_low) / 2 <= t / 2


def verdict_out_of_reach(c: Change, beyond: float, rounds: int, horizon: int = MAX_ROUNDS) -> bool:
    """After `rounds` rounds, no verdict is within reach of `horizon` rounds: `c`'s interval, narrowed
    as 1/sqrt(rounds) about the same center, would still not lie wholly beyond ±`beyond`.  More rounds
    could then end it as no change or leave it unresolved, and neither fails the check.  Judged from
    HOPELESS_AFTER rounds on.  (`hopeless` asks more where the witness does not vouch for a function:
    an interval still wider than ±min_relative that still holds zero.)"""
    if rounds < HOPELESS_AFTER or not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return False
    center = abs(c.ci_high + c.ci_low) / 2
    return center - half_at(c, rounds, horizon) < beyond


def same_work(changes: list[Change], cfg: CheckConfig, rounds: int, horizon: int, work: dict[str, witness.Work],
              ) -> set[str]:
    """A futility bound from the second witness (issue #57, item 3): the functions, changed ones too,
    whose inclusive instructions moved by less than half their threshold (`work`:
    `witness.work_moved`, the A/A spread added) and for which `horizon` rounds could give no verdict
    (`verdict_out_of_reach`: beyond the threshold, and where the counts are alike beyond the placement
    spread too, as the witness's placement rule asks of a verdict): their work did not change by
    anything the threshold counts, and what the rounds left could still say of their time (no change,
    or unresolved) does not fail the check.  Lua's `internshrstr` with one `nop` more (stack-sampled,
    19 ns a call) executed +0.8% instructions and read +11.6% [-4%, +30%] after 43 rounds; the
    indexer's `add_term`, +0.5% and +4.7% [-2%, +11%] after 37; ninja's `State::GetNode`, +0.1% and
    -1% [-8%, +6%] after 22 (bench/aa.py).  A slowdown that adds work (zlib's 2x `pqdownheap`, the
    benches' busy loops) moves the count far beyond half the threshold and keeps every round; one that
    adds no work (memory, branches) keeps them while a verdict is in reach."""
    runs, out = {c.workload: c.base_ns for c in changes if c.function == ROOT}, set()
    for c in changes:
        w, t = work.get(c.function), threshold(c.base_ns, cfg, runs.get(c.workload, 0.0))
        if w is not None and math.isfinite(t) and w.moved < t / 2 and verdict_out_of_reach(
                c, max(t, PLACEMENT_SPREAD) if w.alike else t, rounds, horizon):
            out.add(c.function)
    return out


def at_the_threshold(c: Change, t: float, rounds: int, horizon: int = MAX_ROUNDS) -> bool:
    """A futility bound, for changed functions too: after `rounds` rounds `c`'s interval is no wider
    than the threshold ±t, so its estimate has settled, yet it holds an end of the threshold, and
    narrowed as 1/sqrt(rounds) to `horizon` it would hold it still: its change is about the threshold,
    and more rounds would only say on which side of the line it lies.  It stays unresolved (exit 0; a
    re-check adds rounds).  Judged from HOPELESS_AFTER rounds on.  zlib f8719f5's `main` read -5.6%
    [-6.3%, -4.9%] against ±5% after all 60 rounds (78 s), the indexer's `Index::stats()` +37% [+23%,
    +54%] against 30% (issue #57).  A change of 1.3t can end here instead of as a verdict at round 60;
    one of 2t is beyond the threshold long before its interval is that narrow."""
    if rounds < HOPELESS_AFTER or not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high) and math.isfinite(t)):
        return False
    half, center = (c.ci_high - c.ci_low) / 2, (c.ci_high + c.ci_low) / 2
    edge = t if center > 0 else -t
    at_end = half_at(c, rounds, horizon)
    return half <= t and c.ci_low < edge < c.ci_high and abs(center - edge) < at_end


def undecided(changes: list[Change], focus: Focus, cfg: CheckConfig, rounds: int = 0,
              horizon: int = MAX_ROUNDS) -> list[str]:
    """The focus functions more rounds could still decide: unresolved ones (their interval across the
    threshold, `decision.verdict_of`; an `instructions` one by its time's interval), verdicts not yet
    significant at the early-stopping level, and those with no comparison yet although the workload
    calls them (too few samples so far); after `rounds` rounds, not the `hopeless` ones (against
    `horizon`, the round this check's rounds end at) but for changed functions.  New and removed
    functions have nothing to decide; a withheld comparison (`unknown`) stays withheld; no change and
    a conflict are decided (within the threshold, below the floor, or by the instruction witness)."""
    early = 1 - (1 - cfg.confidence) * EARLY_STOP_SHARE
    out, seen = [], set()
    runs = {c.workload: c.base_ns for c in changes if c.function == ROOT}
    for c in changes:
        if c.function not in focus.decisive:
            continue
        seen.add(c.function)
        if c.type in (NEW, REMOVED, INLINED, UNKNOWN, NO_CHANGE, CONFLICT):
            continue
        if c.type in (DEGRADATION, OPTIMIZATION) and c.confidence >= early:
            continue
        t = threshold(c.base_ns, cfg, runs.get(c.workload, 0.0))
        if c.type == INSTRUCTIONS and band(c.ci_low, c.ci_high, t) == WITHIN:
            continue
        if hopeless(c, rounds, cfg, horizon) and (not focus.every_round(c.function) or reads_unchanged(c, t)):
            continue  # (a changed function is what the check is for: it gets every round there is, unless
            # its estimate reads no change, or its change is about the threshold itself)
        if at_the_threshold(c, t, rounds, horizon):
            continue
        out.append(c.function)
    # a changed function (not a new one: it has no base to compare with) not yet compared at all
    out += [n for n in {*focus.changed, ROOT} - seen if focus.resolvable(n)]
    return sorted(out)


def to_narrow(changes: list[Change], focus: Focus, stored: dict[str, float]) -> list[str]:
    """A re-check's focus functions whose interval is not yet narrower than in the check it adds to
    (`stored`: function -> its width there): open whatever else they read (`undecided`), so that the
    interval narrows with each re-check (issue #55 item 4)."""
    return [c.function for c in changes if c.function in focus.decisive and not_narrower(c, stored)]


def not_narrower(c: Change, stored: dict[str, float]) -> bool:
    """Whether a re-check's interval of `c` is still as wide as the stored check's (`stored`: function ->
    width), so that its rounds have not yet added what a re-check is for.  The spread is estimated
    again from every round: from a few rounds it can read low by luck, and the next estimate wider (on
    ninja, `State::GetNode` decided at 3 rounds at 21% wide read 33% at 6: issue #55)."""
    width, now = stored.get(c.function), c.ci_high - c.ci_low
    return width is not None and math.isfinite(now) and now >= width


def wider_note(changes: list[Change], focus: Focus, stored: dict[str, float]) -> str:
    """The focus functions whose interval the rounds left no narrower than the stored check's (the
    rounds' limits came first): what a reader comparing the two checks should know."""
    wide = set(to_narrow(changes, focus, stored))
    parts = [f"{short(c.function)} ({c.ci_high - c.ci_low:.0%} wide, {stored[c.function]:.0%} before)"
             for c in changes if c.function in wide]
    return ("no narrower than the stored check's interval when the rounds ended (its spread, estimated "
            "again from every round, reads wider): " + "; ".join(parts)) if parts else ""


def unresolved_note(changes: list[Change], focus: Focus, uncaught: dict[str, float] | None = None) -> str:
    """The focus functions the rounds left without an outcome: unresolved (each change's own line
    says what could not be excluded), or not measured at all (but those `uncaught` bounds)."""
    said = {c.function for c in changes} | set(uncaught or ())
    parts = [f"{short(c.function)} ({c.relative:+.1%} [{c.ci_low:+.0%}, {c.ci_high:+.0%}])" for c in changes
             if c.function in focus.decisive and c.type == UNRESOLVED]
    parts += [f"{short(n)} (not measured: too few samples; a change of any size would go unseen)"
              for n in sorted({*focus.changed, ROOT} - said) if focus.resolvable(n)]
    return ("unresolved when the rounds ended: " + "; ".join(parts)) if parts else ""


def uncaught(focus: Focus, target: list[Profile], base: list[Profile], changes: list[Change],
             cfg: CheckConfig) -> dict[str, float]:
    """The changed and new functions no stack sample caught on either side, nor a probe, when that
    bounds their time under the check's floor (`decision.floor_ns` of the run): name -> the most time
    a run they can take unseen (`unseen_ns`, the larger side's).  Whatever their change, it is below
    what the check counts, so more rounds have nothing to decide.  fmt's 7b4ef1c8 changed 17 functions
    through an inlined digit counter, float formatting's among them; its workload formats integers.
    The counting pass timed out before ruling them out, so they were sampled and never caught, and
    the check ran all 60 rounds for them after `main` was decided at 3."""
    root = run_ns(changes)
    bound = max(unseen_ns(target, cfg.confidence), unseen_ns(base, cfg.confidence))
    if not root or bound >= floor_ns(cfg, root):
        return {}
    said, was = {c.function for c in changes}, {t: b for b, t in focus.renamed.items()}
    return {n: bound for n in (*focus.changed, *focus.new) if n not in said and n != ROOT and not any(
        p.function(m) is not None or p.plan.is_traced(m) for p in target + base for m in {n, was.get(n, n)})}


def run_ns(changes: list[Change]) -> float:
    """One workload's time a run: its root's base value (0 where the root has no change)."""
    return next((c.base_ns for c in changes if c.function == ROOT), 0.0)


def unseen_ns(runs: list[Profile], confidence: float) -> float:
    """The most time a run, at `confidence`, of a function no stack sample of `runs` caught: a count of 0
    bounds the expected count at -ln(1 - confidence) (Poisson: 4.6 samples at 99%), each sample standing
    for its share of the runs' time on a CPU.  Infinite without samples."""
    samples = sum(p.metrics.stack_samples for p in runs)
    if not samples:
        return math.inf
    return -math.log(1 - confidence) * sum(on_cpu_ns(p) for p in runs) / samples / len(runs)


def uncaught_note(bounds: dict[str, float], cfg: CheckConfig, run_ns: float) -> str:
    """What `uncaught` found, for the report."""
    if not bounds:
        return ""
    return (f"no stack sample on either side caught {', '.join(short(n) for n in sorted(bounds))}: each at most "
            f"{max(bounds.values()) / 1e3:.0f} us a run ({cfg.confidence:.0%}), under the "
            f"{floor_ns(cfg, run_ns) / 1e3:.0f} us a check counts, so no rounds were added for them")


def still_open(runs: paired.PairedRuns, cfg: CheckConfig) -> list[str]:
    """After a round: the focus functions the rounds so far leave undecided, by the verdicts the check
    would give now (`checks.verdict`: the same pipeline and the same changed set)."""
    sides = Sides(runs.workload, _unstored("t", runs.target), _unstored("b", runs.base))
    changed = verdict.changed(runs.target, set)
    changes = verdict.judge(sides, cfg, changed, opinions=False)
    rounds, horizon = len(runs.target), runs.kept + MAX_ROUNDS
    work = witness.work_moved(changes, runs.counts[1], runs.counts[0])
    futile = same_work(changes, cfg, rounds, horizon, work) | set(uncaught(runs.focus, runs.target, runs.base,
                                                                          changes, cfg))
    return sorted({*(set(undecided(changes, runs.focus, cfg, rounds, horizon)) - futile),
                   *to_narrow(changes, runs.focus, runs.stored_widths)})


def _unstored(commit: str, profiles: list[Profile]) -> list[StoredProfile]:
    """Profiles of the rounds so far, as the statistics take them (ids are not read there)."""
    return [StoredProfile(commit, i, f"{commit}{i}", p) for i, p in enumerate(profiles)]


def focus_note(focus: Focus, rounds: int, kept: int = 0) -> str:
    """What the paired check looked at, for the report (text and JSON)."""
    names = lambda xs: ", ".join(short(x) for x in xs) or "-"  # noqa: E731
    why_sampled: dict[str, list[str]] = {}  # (one reason once: tinyxml2's said one 28 times over)
    for n, why in focus.sampled.items():
        why_sampled.setdefault(why, []).append(n)
    sampled = "; ".join(f"{names(ns)}: {why}" for why, ns in why_sampled.items())
    renamed = ", ".join(f"{short(a)} -> {short(b)}" for a, b in sorted(focus.renamed.items()))
    earlier = f" ({kept} of them stored by earlier checks of this pair, {rounds - kept} added now)" if kept else ""
    not_run = focus.not_run()
    return (f"paired check, {rounds} interleaved rounds{earlier}: changed {names(focus.changed)}; new {names(focus.new)}; "
            f"callers {names(focus.callers)}; traced {names(focus.traced)}"
            + (f"; not run by this workload (no call in the counting run: its time cannot have changed through "
               f"them): {names(not_run)}" if not_run else "")
            + (f"; renamed (the same function under a new name, a clone's number or a signature: compared with "
               f"its old self, not measured as new): {renamed}" if renamed else "")
            + (f"; only stack-sampled: {sampled}" if sampled else "")
            + (f"; the project's own libraries differ ({focus.libraries}): {names(focus.library_changed)} changed "
               f"there, focused as the binary's functions are, the run as a whole measured"
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


def stored_series(store: NotesStore, commit: str, base: str, workloads: tuple[str, ...]) -> dict[str, paired.Resume]:
    """Per workload, the rounds of the newest stored check of this pair that a re-check adds to: its
    series' profiles on both sides, when every round is there on both (a pull may bring half)."""
    rec = record.newest(store, commit, base, workloads)
    if rec is None:
        return {}
    out = {}
    for wl, s in rec.series.items():
        mine = [[p for p in store.read(c)[0] if p.profile.plan.pairing == s.pairing and p.profile.complete
                 and p.profile.header.workload == wl] for c in (base, commit)]
        rb, rt = by_round(mine[0]), by_round(mine[1])
        if rb and rt and rb.keys() == rt.keys():
            widths = {c.function: c.ci_high - c.ci_low for c in rec.result.changes
                      if c.workload == wl and math.isfinite(c.ci_high - c.ci_low)}
            out[wl] = paired.Resume(s.pairing, s.focus, [rb[k] for k in sorted(rb)], [rt[k] for k in sorted(rt)], widths)
    return out


def check_collect(repo: pygit2.Repository, opts: PairedOptions, cfg: CheckConfig, engine: Engine,
                  progress: Progress) -> CheckResult:
    """Collect REV and its base in interleaved rounds (`collect.paired`), added to the stored check of
    the same pair where its builds and plan allow (`stored_series`; not with `fresh` or `rebuild`),
    store both sides' new runs, and check REV against every round; the result ends like every check
    (`checks.check.conclude`)."""
    commit, base = _commits(repo, opts.rev, opts.base)
    store = NotesStore(repo)
    stop = paired.Stop(opts.rounds, MIN_ROUNDS, MAX_ROUNDS, opts.time_limit_s)
    # both sides built alike, from scratch, by the check itself (CheckConfig.probe_pad)
    req = CollectRequest(rev=commit, workloads=opts.workloads, config=opts.config, probe_pad=cfg.probe_pad,
                         align_functions=cfg.align_functions, fresh=True, rebuild=opts.rebuild)
    resume = {} if opts.fresh or opts.rebuild else stored_series(store, commit, base, opts.workloads)
    preq = paired.PairedRequest(req, base, opts.depth, stop, witness=cfg.witness == "instructions", resume=resume)
    runs = paired.collect_pairs(repo, preq, engine, progress, lambda r: still_open(r, cfg)).runs
    request = Request(repo, store, commit, cfg, store.ancestors(commit))
    try:
        lines, sides = paired.encode_runs(base, commit, runs)
        pairs, changes = [], []
        for run, (b, t) in zip(runs, sides):
            if run.skipped:  # nothing to measure: no rounds, no witness, and no verdict but this one
                pairs.append(WorkloadPair(run.workload, "", 0, base, 0, 0, "-", (run.skipped,)))
                continue
            pair, found = check_workload(request, comparison_key(t[0].profile), t, Baseline(base, b))
            quiet = uncaught(run.focus, run.target, run.base, found, cfg)
            notes = (focus_note(run.focus, len(t), run.kept), unresolved_note(found, run.focus, quiet),
                     uncaught_note(quiet, cfg, run_ns(found)),
                     wider_note(found, run.focus, run.stored_widths), pad_note(t, cfg))
            pairs.append(replace(pair, notes=pair.notes + tuple(n for n in notes if n)))
            changes.extend(found)
        result = conclude(request, pairs, changes, [])
    except KeyboardInterrupt:
        raise CollectionAborted("interrupted: probes detached, workloads killed, nothing was stored") from None
    # the profiles of both sides and the check's record, all or nothing (ARCHITECTURE.md §4, §10c)
    series = {r.workload: record.Series(r.target[0].plan.pairing, r.focus) for r in runs if r.target}
    store.add_lines({**lines, commit: lines[commit] + [record.line(result, sorted(s.pairing for s in series.values()),
                                                                   series=series, machine=machine_fingerprint())]})
    return result
