"""Which functions to probe and how (ARCHITECTURE.md §7).

The strategies are the thesis' `userspace` (every function defined in the binary) and an explicit
function list; `narrow` applies what the analysis pipelines decided (pipelines.py).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Iterable

from gitperf.analysis.elf import BinaryInfo, FunctionSymbol
from gitperf.core.config import CollectConfig
from gitperf.core.errors import InputError
from gitperf.core.model import ROOT, Mode
from gitperf.core.names import whole


@dataclass(frozen=True)
class ProbePlan:
    functions: tuple[FunctionSymbol, ...]  # probe ids are indexes into this tuple
    root: int | None  # index of the root function (main), or None when the binary has none
    mode: str = Mode.TRACE
    sample_every: int = 1
    record_limit: int = 1000
    reenable: bool = True
    period_ns: int = 0
    window_ns: int = 0
    stack_hz: int = 0
    series_limit: int = 1000
    strategy: str = "userspace"
    removed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    changed: tuple[str, ...] = ()
    every_by: dict[str, int] = field(default_factory=dict)  # per-function sampling periods
    # hybrid: the functions traced (exact aggregates); the others are covered by stack samples only
    traced: frozenset[str] = frozenset()
    # calibrated ns of one probed call of each function (plan.costs.call_costs): the kernel sums it over
    # the probed calls nested in each call, which `collect.profile` subtracts as probe time
    probe_cost: dict[str, float] = field(default_factory=dict)
    # functions of the project's own shared libraries in this plan (`with_library_functions`): name ->
    # the library file its probes go on (the others are the binary's)
    libraries: dict[str, str] = field(default_factory=dict)

    def probed_ids(self) -> list[int]:
        """Indexes of the functions that get entry/return probes.  Stack mode probes only the root
        (its entry gives the load bias for symbolisation); hybrid mode the traced set and the root."""
        if self.mode == Mode.STACK:
            return [self.root] if self.root is not None else []
        if self.mode == Mode.HYBRID:
            return [i for i, f in enumerate(self.functions) if f.name in self.traced or i == self.root]
        return list(range(len(self.functions)))

    def is_traced(self, name: str) -> bool:
        if self.mode == Mode.STACK:
            return name == ROOT
        return self.mode != Mode.HYBRID or name in self.traced or name == ROOT

    def every(self, name: str) -> int:
        return max(self.every_by.get(name, self.sample_every), 1)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)

    def path_of(self, name: str, binary: str) -> str:
        """The file a function's probes go on: its library's, or the binary (`binary`)."""
        return self.libraries.get(name, binary)


def with_library_functions(plan: ProbePlan, binary: BinaryInfo, names: Iterable[str]) -> ProbePlan:
    """The plan with those of `names` that are functions of the project's own libraries (a name the
    binary has stays the binary's) added after the binary's: probed on the library file, so that a
    library function is counted and traced as the binary's are (ARCHITECTURE.md §6, "The project's own
    libraries").  Ids of the binary's functions stay as they were."""
    have, wanted = set(plan.names), set(names)
    added: dict[str, tuple[FunctionSymbol, str]] = {}
    for lib in binary.libraries:
        for f in lib.functions:
            if f.name in wanted and f.name not in have and f.name not in added and whole(f.name) == f.name:
                added[f.name] = (f, lib.path)
    if not added:
        return plan
    return replace(plan, functions=plan.functions + tuple(f for f, _ in added.values()),
                   libraries={**plan.libraries, **{n: path for n, (_, path) in added.items()}})


def _pick(binary: BinaryInfo, names: tuple[str, ...]) -> list[FunctionSymbol]:
    table = binary.by_name()
    picked = []
    for n in names:
        if n not in table:
            close = difflib.get_close_matches(n, table.keys(), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InputError(f"function '{n}' is not defined in {binary.path}{hint}")
        picked.append(table[n])
    return picked


def make_plan(binary: BinaryInfo, cfg: CollectConfig, funcs: tuple[str, ...] = ()) -> ProbePlan:
    """A plan from the configuration (and `--func` names, which override the strategy)."""
    names = funcs or (cfg.functions if cfg.strategy == "funcs" else ())
    removed: dict[str, tuple[str, ...]] = {}
    if names:
        chosen = _pick(binary, names)
        table = binary.by_name()
        if ROOT in table and table[ROOT] not in chosen:
            chosen.append(table[ROOT])  # the root is always probed: it anchors TLC and symbolisation
        strategy = "funcs"
        removed["not-selected"] = tuple(sorted(set(table) - {f.name for f in chosen}))
    else:
        chosen, strategy = list(binary.functions), "userspace"
    # a `.cold` part is jumped into, never called: at its entry the stack holds no return address,
    # and a return probe there would overwrite a word of its function's frame (core.names.whole)
    parts = tuple(sorted(f.name for f in chosen if whole(f.name) != f.name))
    if parts:
        chosen = [f for f in chosen if whole(f.name) == f.name]
        removed["split-part"] = parts
    chosen.sort(key=lambda f: f.vaddr)
    root = next((i for i, f in enumerate(chosen) if f.name == ROOT), None)

    mode = cfg.mode
    every = cfg.sample_every if mode == Mode.SAMPLE else 1
    # In plain trace mode every call is aggregated in the kernel; the per-call series is bounded by
    # dynamic probing with back-off, so a function called millions of times cannot flood the ring.
    dynamic = mode in (Mode.TRACE, Mode.DYNAMIC)
    return ProbePlan(
        functions=tuple(chosen), root=root, mode=mode, sample_every=every,
        record_limit=cfg.record_limit if dynamic else 0,
        reenable=cfg.reenable if mode == Mode.DYNAMIC else True,
        period_ns=int(cfg.period_ms * 1e6) if mode in (Mode.TIMED, Mode.BURSTY) else 0,
        window_ns=int(cfg.window_ms * 1e6) if mode in (Mode.TIMED, Mode.BURSTY) else 0,
        stack_hz=cfg.stack_hz or (199 if mode == Mode.STACK else 0),
        series_limit=cfg.series_limit, strategy=strategy, removed=removed,
    )


def as_hybrid(plan: ProbePlan, traced: Iterable[str], stack_hz: int) -> ProbePlan:
    """`plan` made hybrid: `traced` traced on every call (every call timed, none sampled), the other
    functions covered by stack samples at `stack_hz` (0: none)."""
    return replace(plan, mode=Mode.HYBRID, traced=frozenset(traced), stack_hz=stack_hz, sample_every=1,
                   every_by={}, period_ns=0, window_ns=0)


def narrow(plan: ProbePlan, keep: frozenset[str], removed: dict[str, tuple[str, ...]], changed: tuple[str, ...],
           every_by: dict[str, int]) -> ProbePlan:
    """The plan after the optimization methods: fewer functions, and per-function sampling periods
    (which switch trace mode to sample mode: every call is still counted, every n-th recorded)."""
    chosen = tuple(f for f in plan.functions if f.name in keep or f.name == ROOT)
    root = next((i for i, f in enumerate(chosen) if f.name == ROOT), None)
    mode, limit = plan.mode, plan.record_limit
    if every_by and mode in (Mode.TRACE, Mode.DYNAMIC, Mode.SAMPLE):
        mode, limit = Mode.SAMPLE, 0
    return replace(plan, functions=chosen, root=root, mode=mode, record_limit=limit,
                   removed={**plan.removed, **removed}, changed=changed, every_by=dict(every_by))
