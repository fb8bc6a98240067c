"""Diff tracing (ARCHITECTURE.md §7): which functions did a commit change, judged on the binaries.

Three comparisons of the base and target call-graph resources:
* call graph: functions only in one of them are new or removed, unless a removed one and a new one
  have the same callers and callees or the same code, which makes them a rename;
* CFG fingerprints of the functions in both, under a criterion (soft: instruction counts per block;
  semi-strict: mnemonics; strict: mnemonics and operands, addresses that merely moved masked);
* source: the `git diff` hunks mapped to the functions they touch (sourcediff), reported next to
  the binary verdict; a comment-only hunk touches a function but does not change its code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitperf.analysis.callgraph import CRITERIA, CallGraph

RENAME_SCORE = 1.0  # of 3 (callers Jaccard + callees Jaccard + identical code): at least one whole agreement


@dataclass(frozen=True)
class DiffResult:
    criterion: str
    changed: tuple[str, ...] = ()  # in both, code differs under the criterion
    new: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: dict[str, str] = field(default_factory=dict)  # base name -> target name
    renamed_changed: tuple[str, ...] = ()  # renamed targets whose code also differs
    touched: tuple[str, ...] = ()  # source hunks overlap their definition

    @property
    def protected(self) -> frozenset[str]:
        """What other methods must not remove: everything the commit changed or added."""
        return frozenset(self.changed) | frozenset(self.new) | frozenset(self.renamed_changed)


def _own(cg: CallGraph) -> set[str]:
    # angr's sub_XXXX pieces have no symbol: their names change with every layout shift
    return {n for n, f in cg.functions.items() if not f.external and not n.startswith("sub_")}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def diff(base: CallGraph, target: CallGraph, criterion: str = "strict", touched: frozenset[str] = frozenset(),
         ) -> DiffResult:
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(CRITERIA)}")
    b_names, t_names = _own(base), _own(target)
    only_b, only_t = b_names - t_names, t_names - b_names
    # rename matching, best pairs first
    scored = []
    for r in only_b:
        for n in only_t:
            same_code = base.functions[r].fingerprint["strict"] == target.functions[n].fingerprint["strict"]
            s = (_jaccard(base.callers(r), target.callers(n)) + _jaccard(base.callees(r), target.callees(n))
                 + (1.0 if same_code else 0.0))
            if s >= RENAME_SCORE and (base.callers(r) or base.callees(r) or same_code):
                scored.append((s, r, n))
    renamed: dict[str, str] = {}
    for s, r, n in sorted(scored, reverse=True):
        if r not in renamed and n not in renamed.values():
            renamed[r] = n
    renamed_changed = tuple(sorted(n for r, n in renamed.items()
                                   if base.functions[r].fingerprint[criterion] != target.functions[n].fingerprint[criterion]))
    changed = tuple(sorted(n for n in b_names & t_names
                           if base.functions[n].fingerprint[criterion] != target.functions[n].fingerprint[criterion]))
    return DiffResult(criterion, changed, tuple(sorted(only_t - set(renamed.values()))),
                      tuple(sorted(only_b - set(renamed))), renamed, renamed_changed,
                      tuple(sorted(touched & t_names)))
