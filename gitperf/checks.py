"""Degradation checks (DESIGN.md §10): compare a commit's profiles with its baseline's and history.

For every workload and every function, the quantity compared is the function's inclusive time per
run (`total_ns`).  The verdict comes from a one-sided test on log(target / base) whose noise is the
run-to-run spread of that function, estimated from, in order of preference:

1. replicates: commits (target, base, history) that were profiled more than once;
2. history: successive differences over the last `check.history` comparable commits;
3. cross-section: the spread of log(target / base) over all functions of this pair of runs.

p-values are Holm-adjusted over the functions of a workload (family-wise error), and a change is a
degradation only if it is significant at `check.confidence` *and* at least `check.min_relative` and
`check.min_absolute_ns`.  An improvement is reported as an optimization and never fails the check.
The thesis' own methods (average amount threshold, integral comparison of models, local statistics)
and a Mann-Whitney test over the sampled calls are computed too and reported as votes next to the
verdict, as is the robust z-score against the history and where a level shift began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pygit2

from gitperf import models, sourcediff, stats
from gitperf.config import CheckConfig
from gitperf.model import FunctionStats, StoredProfile
from gitperf.store import NotesStore, resolve_commit

DEGRADATION, OPTIMIZATION, NO_CHANGE, UNKNOWN, NEW, REMOVED = (
    "degradation", "optimization", "no-change", "unknown", "new", "removed")
NOT_ENOUGH_DATA = "not-enough-data"
ACCEPTED = "accepted"  # a degradation recorded as intended with `git perf accept`
MIN_HISTORY = 4  # commits before the history's spread is trusted as a noise estimate
HISTORY_Z = 3.5  # Iglewicz & Hoaglin's outlier cut-off for the modified z-score
NOISE_FLOOR = 0.01  # 1%: timer and scheduling jitter never allow a tighter estimate
# Session-to-session SD of a workload's log total when there is no history to measure it: on these
# shared machines `main` of the demo had a CV of 5.3% over 8 collections of `default` and 6 of
# `small` one hour, and 9.7% over 10 of `small` the next; 0.12 keeps the noisier hour's A/A checks
# free of false alarms.  Four commits of history replace it with a measurement.
PRIOR_SESSION_SIGMA = 0.12
MODERATION_DF = 4  # weight (in degrees of freedom) of the all-function spread in each function's noise
ROOT = "main"
CHANGED_SHARE = 0.5  # of the error budget left after the root, for the functions the commit changed
ROOT_SHARE = 0.25  # of the error budget, for the workload total


@dataclass(frozen=True)
class Change:
    workload: str
    function: str
    type: str
    relative: float  # estimated change of inclusive time per run (functions: net of the common shift)
    absolute_ns: float  # the same in ns per run (base_ns and target_ns are the raw medians)
    exclusive_delta_ns: float  # same for exclusive time: where the time was added
    confidence: float  # 1 - Holm-adjusted p-value of the change's direction
    ci_low: float  # interval of `relative` at the configured confidence
    ci_high: float
    method: str
    location: str = ""
    base_ns: float = 0.0
    target_ns: float = 0.0
    base_calls: float = 0.0
    target_calls: float = 0.0
    noise: str = ""  # where the run-to-run spread came from, and its size
    history_z: float | None = None
    since: str | None = None  # commit where a level shift in the history began (change-point)
    votes: dict[str, str] = field(default_factory=dict)  # other methods' verdicts
    changed: bool = False  # the commit's diff touches this function
    statistic: float = 0.0  # what was tested: log ratio (root) or log ratio minus the common shift
    per_call_ci: tuple[float, float] | None = None  # bootstrap 95% interval of the mean call's change

    @property
    def severity(self) -> tuple:
        """Degradations first; among them, where the most time was added (exclusive time first, so
        the function that got slower comes before its callers whose inclusive time merely follows)."""
        rank = {DEGRADATION: 0, ACCEPTED: 0, OPTIMIZATION: 1, NEW: 2, REMOVED: 3, UNKNOWN: 4, NO_CHANGE: 5}[self.type]
        if self.type == OPTIMIZATION:
            return rank, self.exclusive_delta_ns, self.absolute_ns
        return rank, -max(self.exclusive_delta_ns, 0.0), -abs(self.absolute_ns)


@dataclass(frozen=True)
class WorkloadPair:
    workload: str
    config_key: str
    target_profiles: int
    base_commit: str | None
    base_profiles: int
    history_commits: int
    noise_source: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckResult:
    commit: str
    base: str | None
    result: str
    changes: tuple[Change, ...]
    pairs: tuple[WorkloadPair, ...]
    warnings: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return {DEGRADATION: 1, NOT_ENOUGH_DATA: 3}.get(self.result, 0)


def comparable(p: StoredProfile) -> bool:
    """Partial runs (crash, timeout) measure a different amount of work: never a baseline or target."""
    return not p.profile.header.partial


def _group(profiles: list[StoredProfile]) -> dict[str, list[StoredProfile]]:
    out: dict[str, list[StoredProfile]] = {}
    for p in profiles:
        if comparable(p):
            out.setdefault(f"{p.profile.config_key}|{p.profile.plan.mode}", []).append(p)
    return out


def ancestors(repo: pygit2.Repository, commit: str, limit: int = 500) -> list[str]:
    """First-parent ancestors of `commit`, nearest first (not including it)."""
    out = []
    c = repo.get(commit)
    while c is not None and c.parents and len(out) < limit:
        c = c.parents[0]
        out.append(str(c.id))
    return out


@dataclass(frozen=True)
class _Side:
    totals: list[float]
    exclusive: list[float]
    counts: list[float]
    series: list[tuple[int, int]]
    location: str
    sampled_var: float  # variance of log(total) from sampling (0 when the totals are exact)
    sampled: bool = False  # estimated from samples in some profile (not traced there)


def _absent_is_zero(p: StoredProfile, name: str) -> bool:
    """Would this profile have `name` if it had been called?  Yes where it was traced; a function
    that only stack samples cover (stack, hybrid) may just have escaped the samples."""
    plan = p.profile.plan
    if plan.mode in ("hybrid", "stack"):
        return name in plan.traced or name == ROOT
    return name in plan.probed


def _totals(profiles: list[StoredProfile], name: str) -> list[float] | None:
    """`_side(...).totals` alone (the history needs no more, and a check reads ten commits of it)."""
    out = []
    for p in profiles:
        f = p.profile.function(name)
        if f is not None:
            out.append(float(f.total_ns))
        elif _absent_is_zero(p, name):
            out.append(0.0)
    return out or None


def _side(profiles: list[StoredProfile], name: str) -> _Side | None:
    fs: list[FunctionStats] = [f for p in profiles if (f := p.profile.function(name)) is not None]
    probed = [p for p in profiles if p.profile.function(name) is not None or _absent_is_zero(p, name)]
    if not probed:
        return None  # not measured here: neither present nor absent
    totals = [float(f.total_ns) for f in fs] + [0.0] * (len(probed) - len(fs))
    excl = [float(f.exclusive_ns) for f in fs] + [0.0] * (len(probed) - len(fs))
    counts = [float(f.count) for f in fs] + [0.0] * (len(probed) - len(fs))
    var = 0.0
    for f in fs:
        if f.sampled and f.ci_low and f.ci_high and f.ci_low > 0:
            var += ((math.log(f.ci_high) - math.log(f.ci_low)) / (2 * 1.96)) ** 2 / len(fs) ** 2
    series = [s for f in fs for s in f.series]
    return _Side(totals, excl, counts, series, next((f.location for f in fs if f.location), ""), var,
                 any(f.sampled for f in fs))


def _not_in_binary(profiles: list[StoredProfile], name: str) -> bool:
    """Profiles that probed every function of their binary (strategy userspace) and did not leave
    `name` out on purpose show that the binary has no such function."""
    return all(p.profile.plan.strategy == "userspace" and name not in p.profile.plan.probed and
               not any(name in names for names in p.profile.plan.removed.values()) for p in profiles)


def _vote(rel: float, threshold: float) -> str:
    """A method's verdict on a relative change of time (lower is better)."""
    return DEGRADATION if rel >= threshold else OPTIMIZATION if rel <= -threshold else NO_CHANGE


def _votes(t: _Side, b: _Side, cfg: CheckConfig) -> dict[str, str]:
    """The thesis' methods and a rank test over sampled calls, as independent opinions."""
    out = {}
    mt = sum(t.totals) / max(sum(t.counts), 1)
    mb = sum(b.totals) / max(sum(b.counts), 1)
    if mb > 0:
        out["average-amount"] = _vote(mt / mb - 1, cfg.min_relative)
    ts = [d for _, d in t.series]
    bs = [d for _, d in b.series]
    if len(ts) >= 10 and len(bs) >= 10:
        alpha = 1 - cfg.confidence
        slower = stats.mann_whitney_slower(ts, bs)
        faster = stats.mann_whitney_slower(bs, ts)
        out["mann-whitney"] = DEGRADATION if slower < alpha else OPTIMIZATION if faster < alpha else NO_CHANGE
        tx, bx = np.array([o for o, _ in t.series], float), np.array([o for o, _ in b.series], float)
        mt_model = models.best_regression(tx, ts)
        mb_model = models.best_regression(bx, bs)
        lo, hi = max(tx.min(), bx.min()), min(tx.max(), bx.max())
        if hi > lo:
            ib = mb_model.integral(lo, hi)
            if ib > 0:
                out["integral"] = _vote(mt_model.integral(lo, hi) / ib - 1, cfg.min_relative)
        out["local-statistics"] = _local_statistics(tx, np.array(ts, float), bx, np.array(bs, float), cfg)
    return out


def _local_statistics(tx, ty, bx, by, cfg: CheckConfig, intervals: int = 4) -> str:
    """Split the shared x range into sub-intervals and compare the medians inside each; the verdict
    is the one a majority of intervals with data agree on."""
    lo, hi = max(tx.min(), bx.min()), min(tx.max(), bx.max())
    if hi <= lo:
        return UNKNOWN
    edges = np.linspace(lo, hi, intervals + 1)
    votes = []
    for a, z in zip(edges[:-1], edges[1:]):
        t = ty[(tx >= a) & (tx <= z)]
        b = by[(bx >= a) & (bx <= z)]
        if len(t) >= 3 and len(b) >= 3 and np.median(b) > 0:
            rel = float(np.median(t) / np.median(b) - 1)
            votes.append(_vote(rel, cfg.min_relative))
    if not votes:
        return UNKNOWN
    top = max(set(votes), key=votes.count)
    return top if votes.count(top) * 2 > len(votes) else NO_CHANGE


def _fmt_noise(n: stats.Noise) -> str:
    return f"{n.source} ±{n.sigma * 100:.1f}%"


def compare_workload(workload: str, target: list[StoredProfile], base: list[StoredProfile],
                     history: list[list[StoredProfile]], history_commits: list[str], cfg: CheckConfig,
                     changed: frozenset[str] = frozenset(), opinions: bool = True, root: str = ROOT) -> list[Change]:
    """Every function of one workload: target runs vs base runs, with the history (nearest first)
    for the workload's noise, the robust z-score and change points.

    Two levels, because on a shared machine the runs of one collection share its luck: all of
    them may be 20% slower than the last collection's (measured on the demo, DESIGN.md §10).
    * The workload's total (the root function) is tested against that session-to-session noise,
      estimated from the history, else assumed (PRIOR_SESSION_SIGMA).
    * Every other function is tested on its *residual*: its log ratio minus the median log ratio
      of all functions (the common shift of this pair of sessions).  Its noise is the larger of its
      within-session replicate spread (moderated towards the median spread of all functions, as in
      limma's moderated t) and the cross-section spread of the residuals.  A function that got
      slower while the rest of the program did not stands out however lucky either session was.
    The error budget is split by `error_budget` (weighted Holm): a slowdown is far likelier where the
    code changed, and the family-wise level holds for any fixed weights."""
    names = sorted({f.name for p in target + base for f in p.profile.functions})
    sides = {n: (_side(target, n), _side(base, n)) for n in names}
    # the history enters only through each commit's center (noise of the total, robust z, change points)
    hist_centers = {n: [stats.center(t) for h in history if (t := _totals(h, n)) and any(t)] for n in names}
    changes: list[Change] = []
    both = {}
    for n, (t, b) in sides.items():
        if t is None and b is not None and _not_in_binary(target, n):
            t = _Side([0.0] * len(target), [0.0] * len(target), [0.0] * len(target), [], "", 0.0)
        if b is None and t is not None and _not_in_binary(base, n):
            b = _Side([0.0] * len(base), [0.0] * len(base), [0.0] * len(base), [], "", 0.0)
        if t is None or b is None or not (any(t.totals) or any(b.totals)):
            continue
        if t.sampled != b.sampled and any(t.totals) and any(b.totals):
            # hybrid: traced (inclusive time, exact) on one side, sampled (exclusive estimate) on the
            # other - two different quantities, never a change
            continue
        if not any(b.totals):
            changes.append(_simple(workload, n, NEW, t, b, "present only in target"))
        elif not any(t.totals):
            changes.append(_simple(workload, n, REMOVED, t, b, "not called in target"))
        else:
            both[n] = (t, b)
    if not both:
        return changes
    # a function absent from some runs can have a median of 0: 1 ns keeps the log finite
    d = {n: math.log(max(stats.center(t.totals), 1.0) / max(stats.center(b.totals), 1.0)) for n, (t, b) in both.items()}
    big = [n for n, (t, b) in both.items() if n != root and
           min(stats.center(t.totals), stats.center(b.totals)) >= cfg.min_absolute_ns]
    common = float(np.median([d[n] for n in big])) if len(big) >= 5 else 0.0
    resid = {n: d[n] - common for n in both}
    cross = stats.cross_section_sigma([resid[n] for n in big])  # SD of one function's residual
    within = {n: stats.pooled_replicate_sigma([t.totals, b.totals]) for n, (t, b) in both.items()}
    prior = [w.sigma ** 2 for n, w in within.items() if w and n in big]
    s0 = math.sqrt(float(np.median(prior))) if prior else None

    tested = []  # (name, statistic, se, df, noise label)
    for n, (t, b) in both.items():
        scale = math.sqrt(stats.center_var(len(t.totals)) + stats.center_var(len(b.totals)))
        extra = t.sampled_var + b.sampled_var
        if n == root:
            hist = stats.history_sigma([stats.center(b.totals)] + hist_centers[n],
                                       MIN_HISTORY)
            noise = hist or stats.Noise(PRIOR_SESSION_SIGMA, math.inf, "prior")
            w = within[n]
            session_se = max(noise.sigma, NOISE_FLOOR) * math.sqrt(2)
            rep_se = w.sigma * scale if w else 0.0
            se = max(session_se, rep_se)
            if se == session_se:
                df, label = noise.df, _fmt_noise(noise)
            else:
                df, label = w.df, f"replicates ±{rep_se * 100:.1f}%"
            tested.append((n, d[n], math.sqrt(se ** 2 + extra), df, label))
            continue
        w = within[n]
        if w and s0 is not None:
            sig = math.sqrt((MODERATION_DF * s0 ** 2 + w.df * w.sigma ** 2) / (MODERATION_DF + w.df))
            se_rep, df_rep = sig * scale, w.df + MODERATION_DF
        else:
            se_rep, df_rep = 0.0, math.inf
        se_x = cross.sigma if cross else 0.0
        se = max(se_rep, se_x, NOISE_FLOOR * scale)
        df = df_rep if se == se_rep else (cross.df if cross and se == se_x else math.inf)
        label = "replicates" if se == se_rep else "cross-section" if se == se_x else "floor"
        tested.append((n, resid[n], math.sqrt(se ** 2 + extra), df, f"{label} ±{se * 100:.1f}%"))

    sign = 1 if cfg.direction == "lower" else -1  # "higher": a larger value is better
    weights = error_budget([x[0] for x in tested], changed, root)
    k = sum(1 for x in tested if x[0] in changed)
    adj_worse = stats.holm([stats.p_slower(sign * x[1], x[2], x[3]) for x in tested], weights)
    adj_better = stats.holm([stats.p_slower(-sign * x[1], x[2], x[3]) for x in tested], weights)
    alpha = 1 - cfg.confidence
    for (n, stat, se, df, label), pw, pb in zip(tested, adj_worse, adj_better):
        t, b = both[n]
        mt, mb = stats.center(t.totals), stats.center(b.totals)
        # The estimate of the function's own change is the tested statistic: for functions, the
        # ratio with this pair of sessions' common luck taken out.
        rel, absolute = math.expm1(stat), mb * math.expm1(stat)
        large = abs(rel) >= cfg.min_relative and abs(absolute) >= cfg.min_absolute_ns
        if large and sign * stat > 0 and pw <= alpha:
            kind, conf = DEGRADATION, 1 - pw
        elif large and sign * stat < 0 and pb <= alpha:
            kind, conf = OPTIMIZATION, 1 - pb
        else:
            kind, conf = NO_CHANGE, 1 - (pw if sign * stat > 0 else pb)
        lo, hi = stats.interval(stat, se, df, cfg.confidence)
        hist = hist_centers[n]
        z = stats.robust_z(mt, hist) if len(hist) >= MIN_HISTORY else None
        votes = _votes(t, b, cfg) if opinions else {}
        per_call = None
        if opinions and len(t.series) >= 10 and len(b.series) >= 10:
            per_call = stats.bootstrap_ratio_ci([v for _, v in t.series], [v for _, v in b.series])
            lo_c, hi_c = per_call
            up, down = lo_c >= cfg.min_relative, hi_c <= -cfg.min_relative  # the whole interval moved
            votes["bootstrap-mean"] = (DEGRADATION if (up if sign > 0 else down) else
                                       OPTIMIZATION if (down if sign > 0 else up) else NO_CHANGE)
        if z is not None:
            votes["history-z"] = (DEGRADATION if sign * z >= HISTORY_Z else OPTIMIZATION if sign * z <= -HISTORY_Z
                                  else NO_CHANGE)
        since = None
        if kind == DEGRADATION and len(hist) >= 2:
            series = list(reversed(hist)) + [mt]  # oldest first
            commits = list(reversed(history_commits[:len(hist)])) + [""]
            shifts = [c for c in stats.change_points(series, window=5, alpha=alpha) if sign * (c.after - c.before) > 0]
            if shifts:
                since = commits[shifts[-1].index] or None
        method = ("workload total vs session noise" if n == root else
                  f"residual vs common shift {math.expm1(common):+.1%}") + f", Holm over {len(tested)}" + (
                  f" ({k} changed in the diff)" if k else "")
        changes.append(Change(
            workload, n, kind, rel, absolute, stats.center(t.exclusive) - stats.center(b.exclusive), conf, lo, hi,
            method, t.location or b.location, mb, mt, stats.center(b.counts), stats.center(t.counts), label, z, since,
            votes, n in changed, stat, per_call))
    return changes


def error_budget(names: list[str], changed: frozenset[str], root: str = ROOT) -> list[float]:
    """Holm weights: the workload total gets ROOT_SHARE of the error budget (it answers the first
    question, "is the program slower?"), the functions the commit changed CHANGED_SHARE of the rest,
    the other functions what remains, split evenly within each group."""
    groups = {"root": [n for n in names if n == root], "changed": [n for n in names if n != root and n in changed]}
    groups["other"] = [n for n in names if n != root and n not in changed]
    share = {"root": ROOT_SHARE if groups["root"] else 0.0}
    rest = 1 - share["root"]
    share["changed"] = rest * CHANGED_SHARE if groups["changed"] and groups["other"] else (rest if groups["changed"] else 0.0)
    share["other"] = 1 - share["root"] - share["changed"]
    of = {n: g for g, ns in groups.items() for n in ns}
    return [share[of[n]] / len(groups[of[n]]) if share[of[n]] > 0 else 1e-12 for n in names]


def _simple(workload: str, name: str, kind: str, t: _Side, b: _Side, why: str) -> Change:
    mt, mb = stats.center(t.totals), stats.center(b.totals)
    return Change(workload, name, kind, math.inf if kind == NEW else -1.0, mt - mb,
                  stats.center(t.exclusive) - stats.center(b.exclusive), 1.0, math.nan, math.nan, why,
                  t.location or b.location, mb, mt, stats.center(b.counts), stats.center(t.counts))


def find_baseline(store: NotesStore, candidates: list[str], key: str) -> tuple[str | None, list[StoredProfile]]:
    """The nearest candidate commit with comparable profiles of `key`."""
    for c in candidates:
        group = _group(store.read(c)[0]).get(key)
        if group:
            return c, group
    return None, []


def check(repo: pygit2.Repository, rev: str, cfg: CheckConfig, base_rev: str | None = None,
          workloads: tuple[str, ...] = (), store: NotesStore | None = None, opinions: bool = True) -> CheckResult:
    """Degradations of `rev` against its baseline (nearest first-parent ancestor with a comparable
    profile, or `base_rev`) and its history.  `store` may be a caching store (the index checks
    every commit, and each check reads its ten predecessors); `opinions=False` skips the other
    methods' votes and the bootstrap (they never change the verdict, and cost ~90% of the time)."""
    store = store or NotesStore(repo)
    commit = resolve_commit(repo, rev)
    target_profiles, bad = store.read(commit)
    warnings = [str(b) for b in bad]
    groups = _group(target_profiles)
    if workloads:
        groups = {k: v for k, v in groups.items() if v[0].profile.header.workload in workloads}
    if not groups:
        why = "no complete profile" + (f" of workload {', '.join(workloads)}" if workloads else "")
        return CheckResult(commit, None, NOT_ENOUGH_DATA, (), (), tuple(warnings + [
            f"{why} on {commit[:12]}: run `git perf collect {commit[:12]}` first"]))
    line = ancestors(repo, commit)
    base_forced = resolve_commit(repo, base_rev) if base_rev else None
    changes: list[Change] = []
    pairs: list[WorkloadPair] = []
    bases = set()
    for key, target in sorted(groups.items()):
        workload = target[0].profile.header.workload
        if base_forced:
            base_commit, base = base_forced, _group(store.read(base_forced)[0]).get(key, [])
            base_commit = base_commit if base else None
        else:
            base_commit, base = find_baseline(store, line, key)
        if not base_commit:
            pairs.append(WorkloadPair(workload, key, len(target), None, 0, 0, "", (
                "no comparable baseline (same binary name, workload, engine, machine and mode) among the "
                f"first-parent ancestors{'' if not base_rev else ' at ' + base_rev}",)))
            continue
        bases.add(base_commit)
        start = line.index(base_commit) + 1 if base_commit in line else 0
        hist_commits, hist = [], []
        for c in ([] if store.acceptance(base_commit) else line[start:]):
            if len(hist) >= cfg.history:
                break
            g = _group(store.read(c)[0]).get(key)
            if g:
                hist_commits.append(c)
                hist.append(g)
            if store.acceptance(c):
                break  # an accepted change starts a new level: older history is not comparable
        locations = {f.name: f.location for p in target for f in p.profile.functions if f.location}
        changed = frozenset(sourcediff.changed_functions(repo, base_commit, commit, locations))
        changed |= {n for p in target for n in p.profile.plan.changed}
        found = compare_workload(workload, target, base, hist, hist_commits, cfg, changed, opinions)
        notes = []
        if len(target) == 1 or len(base) == 1:
            notes.append("one run on a side: a transient disturbance of the machine cannot be told from a "
                         "change; set repeat = 3 for the workload (git perf noise shows why)")
        if len({frozenset(p.profile.plan.probed) for p in target + base}) > 1:
            notes.append("the probed functions differ between target and base: inclusive times carry "
                         "different probe overheads; compare functions probed in both with care")
        sources = sorted({c.noise.split(" ")[0] for c in found if c.noise})
        pairs.append(WorkloadPair(workload, key, len(target), base_commit, len(base), len(hist),
                                  ", ".join(sources) or "-", tuple(notes)))
        changes.extend(found)
    accepted = store.acceptance(commit)
    if accepted:
        changes = [replace(c, type=ACCEPTED) if c.type == DEGRADATION else c for c in changes]
        warnings.append(f"this commit's performance change was accepted as intended: {accepted.get('reason', '')}")
    changes.sort(key=lambda c: c.severity)
    if not any(p.base_commit for p in pairs):
        result = NOT_ENOUGH_DATA
        warnings.append("no baseline: collect a profile of the parent commit (git perf collect HEAD~1) "
                        "or name one with --base")
    elif any(c.type == DEGRADATION for c in changes):
        result = DEGRADATION
    elif any(c.type == ACCEPTED for c in changes):
        result = ACCEPTED
    elif any(c.type == OPTIMIZATION for c in changes):
        result = OPTIMIZATION
    else:
        result = NO_CHANGE
    base = next(iter(bases)) if len(bases) == 1 else None
    return CheckResult(commit, base, result, tuple(changes), tuple(pairs), tuple(warnings))
