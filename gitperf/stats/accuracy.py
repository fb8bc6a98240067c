"""How close a cheaper profile comes to a reference profile (ARCHITECTURE.md §9).

Pure functions over *shares*: function -> fraction of the whole (exclusive time, or calls), so
that profiles of different run lengths compare.  The metrics are those of the sampling-profiler
literature:

* `overlap`: over the reference's hottest functions covering 90% of its total (the hot paths),
  how much of their reference share the estimate also gives them (the HPS overlap);
* `instant_accuracy`: (2 - sum |f_ref - f_est|) / 2 over every function, 1 = identical;
* `kendall_tau`: rank agreement on the reference's top k;
* `recall`: how many of the reference's top k the estimate also puts in its top k.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from gitperf.core.model import FunctionStats

HOT_COVER = 0.9  # the hot set: the fewest functions that cover 90% of the reference


def shares(funcs: Iterable[FunctionStats], by: str = "exclusive_ns") -> dict[str, float]:
    """Each function's fraction of the sum of `by` (exclusive time is additive: it sums to the run)."""
    values = {f.name: float(getattr(f, by)) for f in funcs if getattr(f, by) > 0}
    total = sum(values.values())
    return {n: v / total for n, v in values.items()} if total else {}


def _ranked(s: Mapping[str, float]) -> list[str]:
    return sorted(s, key=lambda n: (-s[n], n))


def hot_set(ref: Mapping[str, float], cover: float = HOT_COVER) -> list[str]:
    out, acc = [], 0.0
    for n in _ranked(ref):
        if acc >= cover * sum(ref.values()):
            break
        out.append(n)
        acc += ref[n]
    return out


def overlap(ref: Mapping[str, float], est: Mapping[str, float], cover: float = HOT_COVER) -> float:
    hot = hot_set(ref, cover)
    whole = sum(ref[n] for n in hot)
    return sum(min(ref[n], est.get(n, 0.0)) for n in hot) / whole if whole else 1.0


def instant_accuracy(ref: Mapping[str, float], est: Mapping[str, float]) -> float:
    names = set(ref) | set(est)
    return (2 - sum(abs(ref.get(n, 0.0) - est.get(n, 0.0)) for n in names)) / 2


def kendall_tau(ref: Mapping[str, float], est: Mapping[str, float], k: int = 10) -> float:
    """Tau-b between the two rankings of the reference's top k (1 = same order, -1 = reversed)."""
    top = _ranked(ref)[:k]
    if len(top) < 2:
        return 1.0
    from scipy import stats  # (here: 0.3 s to import, see votes.mann_whitney_slower)
    tau = stats.kendalltau([ref[n] for n in top], [est.get(n, 0.0) for n in top]).statistic
    return 0.0 if tau != tau else float(tau)  # nan: the estimate ties them all


def recall(ref: Mapping[str, float], est: Mapping[str, float], k: int = 3) -> float:
    top = _ranked(ref)[:k]
    return len(set(top) & set(_ranked(est)[:k])) / len(top) if top else 1.0


def compare(ref: Mapping[str, float], est: Mapping[str, float], tau_k: int = 10, recall_k: int = 3,
            ) -> dict[str, float]:
    return {"overlap": overlap(ref, est), "accuracy": instant_accuracy(ref, est),
            "kendall_tau": kendall_tau(ref, est, tau_k), "recall": recall(ref, est, recall_k)}
