"""`git perf check` (ARCHITECTURE.md §10): a commit's profiles against its baseline and history.

The git side lives here (which commit is the baseline, which commits are the history, what the
diff touched); the statistics are `compare.compare_workload`'s.  Profiles are paired only by
`core.model.comparison_key`, and crashed or timed-out runs never count."""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field, replace

import msgspec
import pygit2

from gitperf.checks.change import (
    ACCEPTED,
    DEGRADATION,
    NO_CHANGE,
    NOT_ENOUGH_DATA,
    OPTIMIZATION,
    UNRESOLVED,
    Change,
    CheckResult,
    WorkloadPair,
    report_order,
)
from gitperf.checks import record, verdict, witness
from gitperf.checks.designs.pooled import rooted_share
from gitperf.checks.sides import Sides
from gitperf.core.config import CheckConfig
from gitperf.core.errors import InputError
from gitperf.core.fmt import printable
from gitperf.core.model import ROOT, StoredProfile, comparison_key
from gitperf.git import sourcediff
from gitperf.git.repo import resolve_commit
from gitperf.store.notes import NotesStore

NO_BASELINE = ("no comparable baseline (same binary name, workload, engine, machine, mode and probe plan) among "
               "the first-parent ancestors")


def comparable(p: StoredProfile) -> bool:
    """Partial runs (crash, timeout) measure a different amount of work: never a baseline or target."""
    return p.profile.complete


def group(profiles: list[StoredProfile]) -> dict[str, list[StoredProfile]]:
    """Complete profiles by comparison key."""
    out: dict[str, list[StoredProfile]] = {}
    for p in profiles:
        if comparable(p):
            out.setdefault(comparison_key(p.profile), []).append(p)
    return out


def find_baseline(store: NotesStore, candidates: list[str], key: str) -> tuple[str | None, list[StoredProfile]]:
    """The nearest candidate commit with comparable profiles of `key`."""
    for c in candidates:
        found = group(store.read(c)[0]).get(key)
        if found:
            return c, found
    return None, []


@dataclass(frozen=True)
class Baseline:
    """One workload's other side: the base commit and its runs, and the history before it."""

    commit: str | None
    profiles: list[StoredProfile]
    history_commits: list[str] = field(default_factory=list)
    history: list[list[StoredProfile]] = field(default_factory=list)


def baseline(store: NotesStore, line: list[str], key: str, forced: str | None, depth: int) -> Baseline:
    """The base (`forced`, else the nearest ancestor on `line` with profiles of `key`) and up to
    `depth` earlier commits with such profiles, stopping at an accepted change (a new level)."""
    if forced:
        found = group(store.read(forced)[0]).get(key, [])
        base = Baseline(forced if found else None, found)
    else:
        base = Baseline(*find_baseline(store, line, key))
    if not base.commit or store.acceptance(base.commit):
        return base
    start = line.index(base.commit) + 1 if base.commit in line else 0
    for c in line[start:]:
        if len(base.history) >= depth:
            break
        found = group(store.read(c)[0]).get(key)
        if found:
            base.history_commits.append(c)
            base.history.append(found)
        if store.acceptance(c):
            break  # an accepted change starts a new level: older history is not comparable
    return base


def partners(target: list[StoredProfile], base: list[StoredProfile]) -> tuple[list[StoredProfile], list[StoredProfile]]:
    """The target and base runs of one paired check (`check --collect` marks both sides with one
    `pairing` id), when the two sides share one: the newest such check's.  A commit checked, then
    used as its child's base, holds two sets of rounds of one plan; pooling them would mix two
    sessions (a check of a demo commit once read "116 runs vs 56" after its child's check).
    Otherwise every run of each side."""
    pairing = lambda p: p.profile.plan.pairing  # noqa: E731
    shared = {pairing(p) for p in target} & {pairing(p) for p in base}
    shared.discard("")
    if not shared:
        return target, base
    newest = max(shared, key=lambda i: max(p.profile.header.started for p in target if pairing(p) == i))
    mine = lambda ps: [p for p in ps if pairing(p) == newest]  # noqa: E731
    return mine(target), mine(base)


def foreign(target: list[StoredProfile], base: list[StoredProfile]) -> bool:
    """Every target run belongs to a paired check (a `pairing` id) none of whose runs is on the base:
    they were the base side of a child's check, paired with the child, not with this base (whose
    nearest runs under that plan may be several commits back)."""
    ids = {p.profile.plan.pairing for p in target}
    return "" not in ids and not ids & {p.profile.plan.pairing for p in base}


def other_plans(store: NotesStore, line: list[str], target: StoredProfile) -> str:
    """Why there is no baseline when the nearest ancestor profiled this configuration with other
    probe plans, or ran this workload with another command, and how to get a comparable one ("" when
    no ancestor profiled it at all)."""
    mine = target.profile
    for c in line[:50]:
        ran = [p.profile for p in store.read(c)[0] if p.profile.complete and p.profile.config_key == mine.config_key]
        others = {p.plan.describe() for p in ran if p.header.command == mine.header.command}
        if not others and (was := next((p for p in ran if p.header.command != mine.header.command), None)):
            return (f"workload {mine.header.workload}'s command changed since {c[:12]} (`{shlex.join(was.header.command)}`"
                    f", now `{shlex.join(mine.header.command)}`): a new series starts here; runs of another command "
                    "are never compared with it")
        if others:
            return (f"{c[:12]} was profiled only with other probe plans ({'; '.join(sorted(others))}; this commit: "
                    f"{mine.plan.describe()}): times taken with different probes are not comparable. Run "
                    f"`git perf check {mine.header.commit[:12]} --collect` (one plan for both sides, interleaved), or "
                    f"collect {c[:12]} with the same options")
    return ""


# Below this share of stack samples unwound to the root, the report says how many did.
SAY_ROOTED = 0.9


ELSEWHERE = "the base was measured elsewhere"  # a pair's note, and what the report's first line says


def _environment(target: list[StoredProfile], base: list[StoredProfile]) -> list[str]:
    """Where and how both sides were measured (`Header.environment`, the plan's entry padding), and
    a warning when the base's differs (another compiler, kernel or libc moves times by itself)."""
    envs = [sorted({printable(p.profile.header.environment) for p in ps if p.profile.header.environment})
            for ps in (target, base)]
    pads = sorted({p.profile.plan.pad or "none" for p in target})
    if not envs[0]:
        return []
    out = [f"measured on {'; '.join(envs[0])}; function entries padded: {', '.join(pads)}"]
    if envs[1] and envs[1] != envs[0]:
        out.append(f"{ELSEWHERE}: {'; '.join(envs[1])} (times differ by environment alone)")
    return out


def _notes(target: list[StoredProfile], base: list[StoredProfile]) -> tuple[str, ...]:
    notes = [n for n in (witness.note(target, base),) if n] + _environment(target, base)
    rooted = {side: rooted_share(ps) for side, ps in (("base", base), ("target", target))
              if any(p.profile.metrics.stack_samples for p in ps)}
    if rooted and min(rooted.values()) < SAY_ROOTED:
        shares = ", ".join(f"{side} {share:.0%}" for side, share in rooted.items())
        notes.append(f"stack samples that unwound to {ROOT}: {shares}; the others stopped in code without frame "
                     "pointers, and a sampled function's inclusive time misses those of them taken under it")
    if any((f := p.profile.function(ROOT)) is not None and f.by_run for p in target + base):
        notes.append(f"{ROOT} never returned (the program calls exit() inside it): its time is each run's wall time, "
                     "less the probes' calibrated cost")
    if len(target) == 1 or len(base) == 1:
        notes.append("one run on a side: a transient disturbance of the machine cannot be told from a "
                     "change; set repeat = 3 for the workload (git perf noise shows why)")
    return tuple(notes)


@dataclass(frozen=True)
class Request:
    repo: pygit2.Repository
    store: NotesStore
    commit: str
    cfg: CheckConfig
    line: list[str]  # the commit's first-parent ancestors, nearest first


def check_workload(req: Request, key: str, target: list[StoredProfile], base: Baseline,
                    ) -> tuple[WorkloadPair, list[Change]]:
    workload = target[0].profile.header.workload
    if not base.commit:
        why = other_plans(req.store, req.line, target[0])
        return WorkloadPair(workload, key, len(target), None, 0, 0, "", (why or NO_BASELINE,)), []
    locations = {f.name: f.location for p in target for f in p.profile.functions if f.location}
    changed = verdict.changed([p.profile for p in target], lambda: sourcediff.changed_functions(
        req.repo, base.commit, req.commit, locations))
    sides = Sides(workload, target, base.profiles, base.history, base.history_commits)
    found = verdict.judge(sides, req.cfg, changed, req.cfg.votes)
    sources = sorted({noise_kind(c.noise) for c in found if c.noise})
    pair = WorkloadPair(workload, key, len(target), base.commit, len(base.profiles), len(base.history),
                        ", ".join(sources) or "-", _notes(target, base.profiles))
    return pair, found


@functools.lru_cache(maxsize=4096)  # (every change's label: a few stems, each with a few hundred figures)
def noise_kind(label: str) -> str:
    """What a function's noise label says it came from, without its figures: "pooled samples 14 -> 13
    (inclusive), ±4% between builds" is "pooled samples" (a workload's line listed every function's
    sample counts once, each with a trailing comma)."""
    return _FIGURES.split(label, maxsplit=1)[0].rstrip(" ,")


_FIGURES = re.compile(r"\s*(?:±|;|\d)")  # where a noise label's figures begin (`noise_kind`: every change's)


def faster_runs(changes: list[Change]) -> set[str]:
    """The workloads whose run as a whole (the root) got faster by a verdict of its own."""
    return {c.workload for c in changes if c.function == ROOT and c.type == OPTIMIZATION}


def result_of(pairs: list[WorkloadPair], changes: list[Change]) -> str:
    """The commit's verdict.  A function's degradation inside a workload whose whole run got faster
    does not make the commit slower (it is listed, and the report names it): ninja's switch to emhash8
    made the run 12% faster and `State::AddOut`, which inserts, 47% slower — the program is faster, a
    push of it is not stopped."""
    if not any(p.base_commit for p in pairs):
        return NOT_ENOUGH_DATA
    faster = faster_runs(changes)
    for kind in (DEGRADATION, ACCEPTED, OPTIMIZATION):
        if any(c.type == kind and not (kind == DEGRADATION and c.workload in faster) for c in changes):
            return kind
    # no verdict, and the run or a function the commit changed left across the threshold: exit 0, said so
    return UNRESOLVED if any(c.type == UNRESOLVED and c.asked for c in changes) else NO_CHANGE


def check(store: NotesStore, rev: str, cfg: CheckConfig, base_rev: str | None = None,
          workloads: tuple[str, ...] = ()) -> CheckResult:
    """The check of `rev`: the stored result of the paired check that checked it (`checks.record`;
    against `base_rev` when given), else one `recompute`d from the stored profiles."""
    repo = store.repo
    commit = resolve_commit(repo, rev)
    forced = _base(repo, commit, base_rev)
    found, bad = record.read(store, commit)
    if (rec := record.newest_of(found, forced, workloads)) is not None:
        result = restored(Request(repo, store, commit, cfg, store.ancestors(commit)), rec, workloads)
    else:
        result = recompute(store, commit, cfg, base_rev, workloads)
    if bad:
        result = replace(result, warnings=result.warnings + tuple(bad))
    return result


def _base(repo: pygit2.Repository, commit: str, base_rev: str | None) -> str | None:
    """The base a user named (None: none), never the commit itself."""
    base = resolve_commit(repo, base_rev) if base_rev else None
    if base == commit:
        raise InputError(f"--base {base_rev} is {commit[:12]} itself: a check compares two commits (git perf noise "
                         "compares a commit's collections with each other)")
    return base


def recompute(store: NotesStore, rev: str, cfg: CheckConfig, base_rev: str | None = None,
              workloads: tuple[str, ...] = ()) -> CheckResult:
    """Degradations of `rev` against its baseline (nearest first-parent ancestor with a comparable
    profile, or `base_rev`) and its history, from the profiles in `store` (a caching store for many
    checks: the index checks every commit, and each check reads its ten predecessors)."""
    repo = store.repo
    commit = resolve_commit(repo, rev)
    req = Request(repo, store, commit, cfg, store.ancestors(commit))
    forced = _base(repo, commit, base_rev)
    target_profiles, bad = req.store.read(req.commit)
    warnings = [str(b) for b in bad]
    groups = {k: v for k, v in group(target_profiles).items()
              if not workloads or v[0].profile.header.workload in workloads}
    if not groups:
        why = "no complete profile" + (f" of workload {', '.join(workloads)}" if workloads else "")
        return CheckResult(req.commit, None, NOT_ENOUGH_DATA, (), (), tuple(warnings + [
            f"{why} on {req.commit[:12]}: run `git perf collect {req.commit[:12]}` first"]))
    pairs, changes = [], []
    for key, target in sorted(groups.items()):
        base = baseline(req.store, req.line, key, forced, cfg.history)
        if base.commit and not forced and foreign(target, base.profiles):  # (a base named is compared as asked)
            warnings.append(f"{len(target)} run(s) of {target[0].profile.header.workload} under plan "
                            f"{target[0].profile.plan.describe()} are one side of another commit's paired check "
                            f"(as its base): they are compared there, not with {base.commit[:12]}")
            continue
        target, mates = partners(target, base.profiles)
        pair, found = check_workload(req, key, target, replace(base, profiles=mates))
        if base_rev and not pair.base_commit:
            pair = replace(pair, notes=(NO_BASELINE + f" at {base_rev}",))
        pairs.append(pair)
        changes.extend(found)
    return conclude(req, pairs, changes, warnings)


def restored(req: Request, rec: record.CheckRecord, workloads: tuple[str, ...] = ()) -> CheckResult:
    """A stored check's result as it ended, for the workloads asked (all when none), with what has
    happened since: an accept written later turns its degradations into `accepted`."""
    keep = lambda w: not workloads or w in workloads  # noqa: E731
    said = (f"stored result of the paired check of {record.when(rec.time)} (`git perf check --recompute` derives one from all "
            "stored runs instead)",)
    pairs = [replace(p, notes=p.notes + said) for p in rec.result.pairs if keep(p.workload)]
    changes = [c for c in rec.result.changes if keep(c.workload)]
    return conclude(req, pairs, changes, list(rec.result.warnings))


def conclude(req: Request, pairs: list[WorkloadPair], changes: list[Change], warnings: list[str]) -> CheckResult:
    """The one ending of every check (stored profiles or `--collect`): an accepted commit's
    degradations become `accepted`, changes in reading order (`change.report_order`), the verdict and what to do next."""
    warnings = list(warnings)
    accepted = req.store.acceptance(req.commit)
    if accepted:
        changes = [msgspec.structs.replace(c, type=ACCEPTED) if c.type == DEGRADATION else c for c in changes]
        warnings.append(f"this commit's performance change was accepted as intended: {accepted.reason}")
    changes = report_order(changes)
    result = result_of(pairs, changes)
    if result == NOT_ENOUGH_DATA:
        warnings.append(f"no comparable baseline: `git perf check {req.commit[:12]} --collect` profiles this commit "
                        "and its parent with one probe plan, or collect the parent with the same options "
                        "(git perf collect HEAD~1), or name a base with --base")
    bases = {p.base_commit for p in pairs if p.base_commit}
    return CheckResult(req.commit, next(iter(bases)) if len(bases) == 1 else None, result, tuple(changes),
                       tuple(pairs), tuple(dict.fromkeys(warnings)))  # (a restored result's warnings again)
