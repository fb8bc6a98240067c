"""Paired collection (ARCHITECTURE.md §10a): a commit and its base built side by side, one probe
plan for both (`plan.focus`), and their runs interleaved in rounds until the caller's `until` says
nothing is left open; then every profile is stored in one batch.

* **Measured before planned.** The pilot (`collect.pilot`: stack-sampled runs) gives each function's
  own native time, and a counting run of the target with the candidates traced their exact calls and probe
  shares (`measure`); `plan.focus` decides from these what to trace.
* **Interleaved.** Round r runs base then target (odd rounds: target then base), so a machine that
  is busy for a while spoils both sides of a round alike; each profile records its round and the
  pairing id, and the check pairs them (`checks.compare`).
* **Instructions too.** Before the rounds, with no probe attached, each side runs under callgrind
  (`count_instructions`, ARCHITECTURE.md §10b): the check's second witness, which the stop rule reads.
* **Nothing half-stored.** An interruption (Ctrl-C, SIGTERM) detaches the probes, kills the
  workload and stores nothing; the profiles of every workload and both sides are written at the
  end, all or nothing (`encode_runs`, then one `NotesStore.add_lines` with the check's record).

* **Nothing to measure, nothing to wait for.** When no function's machine code differs between the
  builds (names, comments, layout: `analysis.bindiff`), no workload runs; when a workload's counting
  run shows none of the changed or new functions running, its rounds are skipped.  Either says why
  (`PairedRuns.skipped`), and the check still records its result.

When to stop is the caller's decision (it needs the statistics): `collect_pairs` asks `until` after
every round from `Stop.min_rounds` on.
"""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Callable

import pygit2

from gitperf.analysis import bindiff, elf
from gitperf.analysis.bindiff import BinDiff
from gitperf.collect.budgeted import count_pass
from gitperf.collect.collection import built, check_it_ran, failed, never_ran
from gitperf.collect.context import CollectContext, CollectRequest, Progress, Target
from gitperf.collect.pilot import run_pilot
from gitperf.collect.resolve import resolve
from gitperf.collect.profile import profile_run
from gitperf.core import codec
from gitperf.core.config import Workload
from gitperf.core.errors import CollectionAborted
from gitperf.core.fmt import names
from gitperf.core.names import short
from gitperf.core.model import ROOT, InstructionCounts, Profile, StoredProfile, content_id
from gitperf.engine import callgrind
from gitperf.engine.base import Engine, Session
from gitperf.git.state import perf_dir
from gitperf.git.worktree import sweep_leftovers
from gitperf.plan import focus as planning
from gitperf.plan.costs import call_costs, inside_costs
from gitperf.plan.focus import Candidates, Costs, Focus
from gitperf.plan.optimize import Optimized
from gitperf.plan.probes import ProbePlan
from gitperf.store.history import History

SAMPLED_SHOWN = 6  # progress lines: the first few sampled focus functions and why


@dataclass(frozen=True)
class Side:
    ctx: CollectContext
    plan: Optimized  # the shared plan, resolved against this side's binary
    session: Session | None = None  # the program loaded for that plan, for all rounds


# The instruction witness's callgrind runs of each side (base, target); empty where it did not run.
Counts = tuple[tuple[InstructionCounts, ...], tuple[InstructionCounts, ...]]


@dataclass(frozen=True)
class Pair:
    base: Side
    target: Side
    focus: Focus
    workload: Workload
    # marks both sides' profiles of this paired check (`checks.check.partners` pairs them by it)
    pairing: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    native_s: float = 0.0  # the pilot's native run time: what the witness's runs are predicted from
    counts: Counts = ((), ())  # the witness's (`count_instructions`, before the rounds; a series keeps its first)


@dataclass(frozen=True)
class Stop:
    """When rounds end: `fixed` rounds, else from `min_rounds` on when `until` finds nothing open,
    at `max_rounds`, or once `time_limit_s` has passed."""

    fixed: int | None
    min_rounds: int
    max_rounds: int
    time_limit_s: float


@dataclass(frozen=True)
class Resume:
    """A stored series of one workload's rounds that a re-check of the same pair adds to: its pairing
    id, the focus its plan was made from, both sides' stored rounds (round order), and the width of
    each function's interval in the stored check (relative change), which the re-check's rounds must
    narrow (`checks.paired.to_narrow`)."""

    pairing: str
    focus: Focus
    base: list[StoredProfile]
    target: list[StoredProfile]
    widths: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PairedRequest:
    req: CollectRequest  # rev = the target commit; workloads, config
    base: str  # the base commit
    depth: int  # callers of changed functions traced, levels up
    stop: Stop
    witness: bool = False  # also count instructions under callgrind (checks.witness)
    resume: dict[str, Resume] = field(default_factory=dict)  # workload -> stored rounds to add to


@dataclass(frozen=True)
class PairedRuns:
    """One workload's rounds: what was planned and both sides' profiles, round by round; the first
    `kept` of them stored already (`resumed`: a re-check's earlier rounds), the rest new; the
    instruction witness's counts, which the first round's profiles carry once the rounds end."""

    workload: str
    focus: Focus
    base: list[Profile] = field(default_factory=list)
    target: list[Profile] = field(default_factory=list)
    skipped: str = ""  # why no round ran ("" = they did)
    resumed: Resume | None = None
    counts: Counts = ((), ())

    @property
    def kept(self) -> int:
        return len(self.resumed.target) if self.resumed else 0

    @property
    def stored_widths(self) -> dict[str, float]:
        """The stored check's interval widths these rounds must narrow (none for a new series)."""
        return self.resumed.widths if self.resumed else {}


@dataclass(frozen=True)
class PairedCollection:
    """What a paired collection found: the two builds' machine-code diff and each workload's rounds."""

    diff: BinDiff
    runs: list[PairedRuns]


# What is still open after a round (names; empty = decided): the checks' statistics answer it.
Until = Callable[[PairedRuns], list[str]]


def own_times(ctx: CollectContext, wl: Workload, plan: ProbePlan) -> tuple[float, dict[str, float]]:
    """Native run time (s) and each function's own native time per run (ns), from the pilot
    (`collect.pilot`); a partial pilot run fails the workload."""
    pilot = run_pilot(ctx.target.engine, ctx.binary, plan, ctx.runner(wl), ctx.cost_ns)
    if pilot.partial:
        raise failed(wl, ctx.target.commit, pilot.partial, "its first runs", pilot.stderr)
    return pilot.native_s, {n: share * pilot.native_s * 1e9 for n, share in pilot.shares.items()}


def measure(ctx: CollectContext, wl: Workload, cands: Candidates, base_per_call: dict[str, float]) -> Costs:
    """What the plan is chosen from, measured on this side (the target): pilots for native times, a
    counting run (stopped at twice the budget) for calls and probe shares."""
    plan = planning.counting_plan(ctx.binary, cands.in_order)
    native_s, own = own_times(ctx, wl, plan)
    budget = planning.budget_ns(native_s)
    deadline = min(native_s + 2 * budget / 1e9 + 0.2, wl.timeout)
    names = tuple(n for n in cands.in_order if n != ROOT)
    counted = count_pass(ctx, plan, names, ctx.runner(wl, deadline), budget)
    if not counted.ran:  # (else "no change": a command running another program measured nothing)
        raise never_ran(wl, ctx, counted.exit_status)
    return Costs(counted.calls, own, counted.probe_share, call_costs(plan, ctx.cost_ns), inside_costs(plan, ctx.cost_ns),
                 base_per_call, native_s * 1e9, budget, counted.why)


def prepare(base: CollectContext, target: CollectContext, wl: Workload, cands: Candidates) -> Pair:
    """The pair's shared plan, from measurements of this workload on the target."""
    t0 = time.perf_counter()
    base_per_call = call_costs(planning.counting_plan(base.binary, cands.in_order), base.cost_ns)
    costs = measure(target, wl, cands, base_per_call)
    f = planning.focus(cands, costs, planning.stack_hz(base.cost_ns))
    for n, why in list(f.sampled.items())[:SAMPLED_SHOWN]:  # the report lists them all
        target.progress(f"  {short(n, 50)}: stack-sampled, not traced: {why}")
    if len(f.sampled) > SAMPLED_SHOWN:
        target.progress(f"  ... and {len(f.sampled) - SAMPLED_SHOWN} more stack-sampled focus functions")
    base_commit = base.target.commit
    sides = [Side(ctx, planning.side_plan(ctx.binary, ctx.collect, ctx.cost_ns, f, base_commit)) for ctx in (base, target)]
    target.progress(f"plan: {len(f.traced)} traced ({names(f.traced)}), the rest stack-sampled at "
                    f"{f.stack_hz} Hz; prepared in {time.perf_counter() - t0:.1f} s")
    return Pair(sides[0], sides[1], f, wl, native_s=costs.native_ns / 1e9)


def load(pair: Pair, stack: ExitStack) -> Pair:
    """The pair with each side's program compiled and loaded once, for as long as `stack` lives."""
    def loaded(side: Side) -> Side:
        s = stack.enter_context(side.ctx.target.engine.session(side.ctx.binary, side.plan.plan, lambda _m: None,
                                                               alternating=True))
        return replace(side, session=s)
    return replace(pair, base=loaded(pair.base), target=loaded(pair.target))


def run_round(pair: Pair, r: int) -> tuple[Profile, Profile]:
    """One round: both sides once, base first on even rounds.  Returns (base, target) profiles."""
    spec = planning.spec_of(pair.focus)

    def run(side: Side) -> Profile:
        p = profile_run(side.ctx, side.plan, pair.workload, side.session)
        return replace(p, plan=replace(p.plan, spec=spec, reaches=pair.focus.reaches, round=r, pairing=pair.pairing))

    if r % 2 == 0:
        b = run(pair.base)
        return b, run(pair.target)
    t = run(pair.target)
    return run(pair.base), t


def run_rounds(pair: Pair, stop: Stop, until: Until, say: Progress, resumed: Resume | None = None) -> PairedRuns:
    """Rounds of the pair until `until` finds nothing open (or `stop`'s limits, counted from the first
    new round); after `resumed`'s stored rounds when given, else the first round's profiles carry the
    pair's counts once the rounds end.  A run that crashed, failed or timed out ends the check
    (`failed`)."""
    runs = PairedRuns(pair.workload.name, pair.focus, resumed=resumed, counts=pair.counts)
    if resumed:
        runs.base.extend(p.profile for p in resumed.base)
        runs.target.extend(p.profile for p in resumed.target)
    first = max((p.plan.round or 0 for p in runs.target), default=-1) + 1
    t0 = time.perf_counter()
    for r in range(first, first + (stop.fixed or stop.max_rounds)):
        b, t = run_round(pair, r)
        for side, p in ((pair.base, b), (pair.target, t)):
            if p.header.partial:
                raise failed(pair.workload, side.ctx.target.commit, p.header.partial, f"round {r + 1}", p.header.stderr)
            check_it_ran(p, pair.workload, side.ctx)
        runs.base.append(b)
        runs.target.append(t)
        line = f"  round {r + 1}: base {b.metrics.PRT:.3f} s, target {t.metrics.PRT:.3f} s"
        if stop.fixed or r + 1 - first < stop.min_rounds:
            say(line)
            continue
        still = until(runs)
        say(line + "; " + (f"undecided: {names(still)}" if still else "every focus function decided"))
        if not still or time.perf_counter() - t0 > stop.time_limit_s:
            break
    if not resumed and any(pair.counts):  # the witness rides on the first round's profiles only, once
        # the rounds end: the stop rule judges time alone, and reads the counts through `same_work`
        runs.base[0] = replace(runs.base[0], instructions=pair.counts[0])
        runs.target[0] = replace(runs.target[0], instructions=pair.counts[1])
    return runs


def why_not_resumed(ctxs: tuple[CollectContext, CollectContext], wl: Workload, r: Resume) -> str:
    """Why a stored series cannot take more rounds ("" when it can): only the same builds (kept by
    `git.buildcache`), workload command, machine and engine add to it."""
    for ctx, stored in zip(ctxs, (r.base, r.target)):
        h = stored[0].profile.header
        if h.build_id != ctx.header_base["build_id"]:
            return (f"{ctx.target.commit[:12]} was built again (build id {ctx.header_base['build_id'][:12]}, the stored "
                    f"rounds' {h.build_id[:12]})")
        if h.config_key != ctx.config_key(wl) or h.command != tuple(wl.argv):
            return "the workload's command, the machine or the engine differ from the stored rounds'"
    return ""


def resumed_pair(base: CollectContext, target: CollectContext, wl: Workload, r: Resume) -> Pair:
    """The stored series' pair: its plan made again from its focus (the same probes, the same
    fingerprint: `planning.spec_of`), under its pairing id."""
    sides = [Side(ctx, planning.side_plan(ctx.binary, ctx.collect, ctx.cost_ns, r.focus, base.target.commit))
             for ctx in (base, target)]
    counts = (r.base[0].profile.instructions, r.target[0].profile.instructions)  # the series' first round's
    return Pair(sides[0], sides[1], r.focus, wl, pairing=r.pairing, counts=counts)


# First-parent commits (the base first) in which an earlier paired check's two base runs under callgrind
# are looked for (`learnt`): a program found deterministic is checked again at least this often.
AA_KEPT = 20


def learnt(history: History, key: str, command: tuple[str, ...]) -> str:
    """The commit, among the base and its last AA_KEPT first-parent ancestors, nearest first, whose
    paired check of this workload (configuration `key`, `command`) ran its base twice under callgrind
    and counted every function alike: the program is deterministic, and a second base run would
    measure a spread of 0 again (issue #57, item 2).  "" where the nearest such check's two runs
    differed (Lua seeds its string hashes from addresses) or none is near."""
    def twice(p: Profile) -> bool:
        return (p.header.command == command and len(p.instructions) >= 2
                and not any(w.error or w.spread_from for w in p.instructions[:2]))
    for sha in [history.commit, *history.ancestors()[:AA_KEPT - 1]]:
        _, p = history.nearest(key, base=sha, want=twice)
        if p is not None:
            return sha if p.instructions[0].functions == p.instructions[1].functions else ""
    return ""


def count_instructions(pair: Pair, say: Progress, deterministic: str = "") -> Counts:
    """The instruction witness, before the rounds: the base twice (its A/A spread) and the target once
    under callgrind; skipped, with the reason kept instead, when valgrind is missing or its predicted
    time is over the budget (ARCHITECTURE.md §10b).  Before, not after: no probe is attached yet (a
    uprobe's breakpoint in the binary's pages would trap under valgrind), and the rounds' stop rule
    reads the counts (`checks.paired.same_work`).  The base's first run and the target's go at once,
    each in its own tree (counts do not depend on timing, and no round runs meanwhile); the base's
    second after them, in the tree its first just used — unless an earlier check at `deterministic`
    found the program deterministic (`learnt`): then the base runs once, and its counts say where
    their spread of 0 comes from; or unless either first run gave no counts (valgrind stopped at an
    instruction it does not know): nothing is compared, so the base runs once."""
    predicted = callgrind.predicted_s(pair.native_s)
    why = ("valgrind is not installed (apt-get install valgrind): no instruction counts" if not callgrind.available()
           else f"callgrind would take ~{predicted:.0f} s a run, over the {callgrind.BUDGET_S:.0f} s budget"
           if predicted > callgrind.BUDGET_S else "")
    # said before the runs, the longest quiet step of a check (an interrupt test once missed them and
    # stopped a check that had finished)
    say(f"  instruction witness skipped: {why}" if why else
        f"  instruction witness: callgrind, 2 runs at once (the base once: its two runs at {deterministic[:12]} "
        f"counted alike), ~{predicted:.0f} s each predicted" if deterministic else
        f"  instruction witness: callgrind, 3 runs (two at once), ~{predicted:.0f} s each predicted")
    if why:
        return (InstructionCounts(error=why),), (InstructionCounts(error=why),)
    job = lambda side: (side.ctx.command(pair.workload), 2 * callgrind.BUDGET_S,  # noqa: E731
                        (side.ctx.binary.path, *(lib.path for lib in side.ctx.binary.libraries)))
    t0 = time.perf_counter()
    first_base, target = callgrind.run_all([job(pair.base), job(pair.target)])
    if first_base.error or target.error:  # no counts to compare: a second base run would count in vain
        spread: tuple[InstructionCounts, ...] = (first_base,)
    else:
        spread = ((replace(first_base, spread_from=deterministic),) if deterministic
                  else (first_base, callgrind.run(*job(pair.base))))
    say(f"  instruction witness: counted in {time.perf_counter() - t0:.1f} s")
    return spread, (target,)


def build_both(stack: ExitStack, repo: pygit2.Repository, preq: PairedRequest, engine: Engine, progress: Progress,
               ) -> tuple[CollectContext, CollectContext]:
    """Both commits resolved (`collect.resolve`: both configurations read and judged before either is
    built), then checked out and built alike, for as long as `stack` lives: when one side's padded
    build failed and was rebuilt unpadded (`git.worktree.run_build`), the other is rebuilt unpadded
    too — two binaries compared are always built the same way."""
    def target(req: PairedRequest, commit: str) -> Target:
        return Target(repo, replace(req.req, rev=commit), commit, engine, progress, perf_dir(repo))
    sides = [(t, resolve(t)) for t in (target(preq, preq.base), target(preq, preq.req.rev))]
    bctx, tctx = (stack.enter_context(built(t, side)) for t, side in sides)
    if bctx.pad != tctx.pad:
        plain = replace(preq, req=replace(preq.req, probe_pad=False))
        redo = bctx if bctx.pad else tctx
        progress(f"rebuilding {redo.target.commit[:12]} without padded entries too: both sides are built alike")
        again = stack.enter_context(built(target(plain, redo.target.commit)))
        bctx, tctx = (again, tctx) if bctx.pad else (bctx, again)
    return bctx, tctx


NOTHING_CHANGED = "no function's machine code differs between the two builds ({}): nothing to measure"
NOT_REACHED = ("the workload ran none of the changed or new functions (counting run: {}): its time cannot "
               "have changed through them; no rounds")


def not_reached(focus: planning.Focus) -> str:
    """Why a workload gets no rounds: the counting run saw none of the changed or new functions run
    (readable names: a note once printed `_ZN5route10export_dotERKNS_5GraphERSo`)."""
    return NOT_REACHED.format(", ".join(f"{short(n)} {focus.calls.get(n, 0):.0f} calls"
                                        for n in (focus.changed + focus.new)[:4]))


def _with_libraries(bctx: CollectContext, tctx: CollectContext, cands: Candidates, progress: Progress,
                    ) -> Candidates:
    """The candidates with what differs in the project's own shared libraries between the builds
    (`bindiff.library_changes`, kept in `Candidates.libraries`: the run as a whole is then measured
    every round, `Focus.every_round`): the libraries' changed functions join the focus, with their
    callers in the libraries and in the binary (its calls through the PLT), and are traced on the library
    file or sampled as the binary's are (ARCHITECTURE.md §6, "The project's own libraries")."""
    libraries = bindiff.library_changes(elf.own_libraries(bctx.binary.path, str(bctx.root)),
                                        elf.own_libraries(tctx.binary.path, str(tctx.root)))
    if not libraries.said:
        return cands
    own = frozenset(libraries.calls)
    calls = {**libraries.calls, **{n: cs | (cands.diff.target_imports.get(n, frozenset()) & own)
                                   for n, cs in cands.calls.items()}}
    focus = cands.changed | cands.new | libraries.functions
    callers = bindiff.Code({}, calls).callers(set(focus), cands.depth) - focus
    progress(f"the project's own libraries differ ({libraries.said}): their functions are focused as the "
             f"binary's are, and the run as a whole ({ROOT}) is measured")
    return replace(cands, libraries=libraries.said, library_changed=libraries.functions - cands.changed - cands.new,
                   calls=calls, callers=cands.callers | frozenset(callers), library_removed=libraries.removed,
                   diff=replace(cands.diff, inlined={**cands.diff.inlined, **libraries.inlined}))


@dataclass(frozen=True)
class BothBuilt:
    """Both sides built, and what their machine code says to focus on."""

    base: CollectContext
    target: CollectContext
    cands: Candidates


def _workload(both: BothBuilt, wl: Workload, preq: PairedRequest, until: Until, progress: Progress) -> PairedRuns:
    """One workload's rounds: added to its stored series when it can take them (`why_not_resumed`), else
    a new series from a plan measured now; then the instruction witness (once a series)."""
    bctx, tctx = both.base, both.target
    progress(f"workload {wl.name}: {preq.base[:12]} (base) against {preq.req.rev[:12]}, interleaved")
    resumed = preq.resume.get(wl.name)
    if resumed and (why := why_not_resumed((bctx, tctx), wl, resumed)):
        progress(f"  a new series of rounds, not added to the stored {len(resumed.target)}: {why}")
        resumed = None
    if resumed:
        progress(f"  adding rounds to the {len(resumed.target)} stored by the earlier check of this pair "
                 f"(same builds, same plan; --fresh starts a new series)")
        pair = resumed_pair(bctx, tctx, wl, resumed)
    else:
        pair = prepare(bctx, tctx, wl, both.cands)
        if not pair.focus.reached:
            why = not_reached(pair.focus)
            progress(f"  {why}")
            return PairedRuns(wl.name, pair.focus, skipped=why)
    if preq.witness and not resumed:  # a series keeps its first counts
        pair = replace(pair, counts=count_instructions(pair, progress, learnt(bctx.history, bctx.config_key(wl),
                                                                              tuple(wl.argv))))
    with ExitStack() as programs:
        return run_rounds(load(pair, programs), preq.stop, until, progress, resumed)


def collect_pairs(repo: pygit2.Repository, preq: PairedRequest, engine: Engine, progress: Progress,
                  until: Until) -> PairedCollection:
    """Both commits checked out and built, then per workload a shared plan and its rounds.  Nothing
    is stored (see `encode_runs`); an interruption raises CollectionAborted with the probes detached."""
    engine.check()
    for path in sweep_leftovers(repo):
        progress(f"removed {path}: left by a collection that was killed")
    out: list[PairedRuns] = []
    try:
        with ExitStack() as stack:
            bctx, tctx = build_both(stack, repo, preq, engine, progress)
            cands = _with_libraries(bctx, tctx, planning.candidates(bctx.binary, tctx.binary, preq.depth), progress)
            if cands.diff.nothing_changed and not cands.libraries:
                why = NOTHING_CHANGED.format(cands.diff.describe())
                progress(why)
                empty = planning.Focus((), (), (), (), {})
                return PairedCollection(cands.diff, [PairedRuns(wl.name, empty, skipped=why)
                                                     for wl in tctx.workloads()])
            progress(f"focus: changed {names(sorted(cands.changed))}; new {names(sorted(cands.new))}; "
                     f"callers {names(sorted(cands.callers))}")
            for wl in tctx.workloads():
                out.append(_workload(BothBuilt(bctx, tctx, cands), wl, preq, until, progress))
    except KeyboardInterrupt:
        raise CollectionAborted("interrupted: probes detached, workloads killed, nothing was stored") from None
    return PairedCollection(cands.diff, out)


def encode_runs(base: str, commit: str, runs: list[PairedRuns],
                ) -> tuple[dict[str, list[str]], list[tuple[list[StoredProfile], list[StoredProfile]]]]:
    """Every workload's new profiles of both sides as note lines (per commit), and per workload the
    (base, target) profiles as they will read back once stored (ids are the lines' hashes), a resumed
    series' stored rounds first: the check is computed on them before anything is written, so that its
    record goes into the same batch."""
    lines = {base: [codec.encode(p) for r in runs for p in r.base[r.kept:]],
             commit: [codec.encode(p) for r in runs for p in r.target[r.kept:]]}
    ids = {c: [content_id(ln) for ln in ls] for c, ls in lines.items()}
    out, at = [], 0
    for r in runs:
        k = len(r.base) - r.kept
        kept = (r.resumed.base, r.resumed.target) if r.resumed else ([], [])
        out.append((kept[0] + [StoredProfile(base, 0, i, p) for i, p in zip(ids[base][at:at + k], r.base[r.kept:])],
                    kept[1] + [StoredProfile(commit, 0, i, p) for i, p in zip(ids[commit][at:at + k], r.target[r.kept:])]))
        at += k
    return lines, out
