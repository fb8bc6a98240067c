"""The paired design (ARCHITECTURE.md §10, "Paired rounds"): both sides collected in interleaved
rounds (`check --collect`: every profile records its round), round r's two runs back to back,
sharing the machine's state.  Each function is tested on its per-round log ratios: their median
against their spread (robust: `inference.spread`; moderated towards the median spread of the
functions measured the same way).  No common shift is taken out: pairing already removes the
session's luck, and a change that slows every function shows in every function.  A changed function
is also tested on its median call (`call_tests`), which a few huge calls cannot hide; its two tests
share its error budget."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from gitperf.checks.decision import Tested
from gitperf.checks.noisemodel import NOISE_FLOOR, moderate
from gitperf.checks.sides import PROBE_COST_SPREAD, Side, Sides, absent_is_zero, extra_var
from gitperf.core.model import FunctionStats, StoredProfile
from gitperf.stats import inference


def rounds(profiles: list[StoredProfile]) -> dict[int, StoredProfile] | None:
    """Round -> profile when every profile records a distinct round (paired collection)."""
    out = {p.profile.plan.round: p for p in profiles if p.profile.plan.round is not None}
    return out if out and len(out) == len(profiles) else None


MIN_PAIRED_ROUNDS = 2  # per-round ratios need two rounds for a spread


@dataclass(frozen=True)
class Rounds:
    """Both sides' profiles round by round (built once per comparison): only when each side recorded
    distinct rounds and the two sides the same ones."""

    target: dict[int, StoredProfile]
    base: dict[int, StoredProfile]

    @staticmethod
    def of(sides: Sides) -> Rounds | None:
        rt, rb = rounds(sides.target), rounds(sides.base)
        return Rounds(rt, rb) if rt and rb and rt.keys() == rb.keys() else None

    def __len__(self) -> int:
        return len(self.target)

    def pairs(self) -> list[tuple[StoredProfile, StoredProfile]]:
        """(target, base) per round, in round order."""
        return [(self.target[r], self.base[r]) for r in sorted(self.target)]


def _value(p: StoredProfile, name: str, native: bool) -> float | None:
    t = p.profile.times(native).get(name)
    if t is not None:
        return float(t)
    return 0.0 if absent_is_zero(p.profile, name) else None


def paired_diffs(rs: Rounds | None, both: dict[str, tuple[Side, Side]]) -> dict[str, list[float]]:
    """Per function, the log ratio target/base of each round (only when the rounds pair up)."""
    if not rs or len(rs) < MIN_PAIRED_ROUNDS:
        return {}
    out = {}
    for n, (t, _b) in both.items():
        pairs = [(_value(pt, n, t.native), _value(pb, n, t.native)) for pt, pb in rs.pairs()]
        if all(t is not None and b is not None for t, b in pairs):
            out[n] = [math.log(max(t, 1.0) / max(b, 1.0)) for t, b in pairs]
    return out


def test_paired(n: str, d: list[float], s0: float | None, t: Side, b: Side) -> Tested:
    """A function's per-round log ratios: their center against their moderated spread."""
    s, df = moderate(*inference.spread(d), s0)
    se = max(s, NOISE_FLOOR) * math.sqrt(inference.center_var(len(d)))
    return Tested(n, inference.center(d), math.sqrt(se ** 2 + extra_var(t, b)), df,
                  f"paired rounds ±{s * 100:.1f}%")


def paired_s0(paired: dict[str, list[float]], both: dict[str, tuple[Side, Side]],
              min_absolute_ns: float) -> dict[bool, float | None]:
    """The moderation prior of paired spreads, per kind (sampled or not): the median spread of the
    functions above min_absolute_ns measured the same way.  Traced with traced, sampled with sampled:
    a sampled one's per-round values carry its few samples' noise (on Lua, a paired check's `main`
    went from ±2% to ±10% when they were mixed)."""
    out = {}
    for kind in (False, True):
        big = [n for n, (t, b) in both.items() if n in paired and (t.sampled or b.sampled) == kind and
               min(t.total, b.total) >= min_absolute_ns]
        sds = [inference.spread(paired[n])[0] for n in big]
        out[kind] = float(np.median(sds)) if len(sds) >= 3 else None
    return out


# A changed function's median call is tested beside its time a run where every run recorded at least
# this many of its calls (why: ARCHITECTURE.md §10, "Median call").
MIN_CALLS_SEEN = 5


def _median_call(f: FunctionStats | None) -> tuple[float, float] | None:
    """(median, fastest) recorded call of a function in one run, when it recorded enough of them."""
    if f is None or len(f.series_ns) < MIN_CALLS_SEEN:
        return None
    durations = [float(d) for d in f.series_ns]
    return statistics.median(durations), min(durations)


def call_tests(rs: Rounds | None, both: dict[str, tuple[Side, Side]], changed: frozenset[str]) -> list[Tested]:
    """Paired rounds, changed functions traced on both sides: per round, the log ratio of the two
    sides' median calls; their center against their spread.  The calls are probed time; the probes
    cost alike on both sides, except for each side's own deviation (PROBE_COST_SPREAD), whose share of
    a median call is at most the fastest call's."""
    if not rs or len(rs) < MIN_PAIRED_ROUNDS:
        return []
    out = []
    for n in sorted(changed & both.keys()):
        t, b = both[n]
        calls = [(_median_call(pt.profile.function(n)), _median_call(pb.profile.function(n))) for pt, pb in rs.pairs()]
        if t.sampled or b.sampled or not all(mt and mb for mt, mb in calls):
            continue
        d = [math.log(max(mt[0], 1.0) / max(mb[0], 1.0)) for mt, mb in calls]
        s, df = inference.spread(d)
        shares = [inference.center([m[1] for m in side]) / max(inference.center([m[0] for m in side]), 1.0)
                  for side in zip(*calls)]
        se = max(s, NOISE_FLOOR) * math.sqrt(inference.center_var(len(d)))
        own = sum(min(x, 1.0) ** 2 for x in shares) * PROBE_COST_SPREAD ** 2
        per_run = (inference.center([mb[0] for _, mb in calls]) * b.calls,
                   inference.center([mt[0] for mt, _ in calls]) * t.calls)
        out.append(Tested(n, inference.center(d), math.sqrt(se ** 2 + own), df,
                          f"median call, paired rounds ±{s * 100:.1f}%", per_run,
                          measure="median call x calls, per run (probed time)"))
    return out
