"""The call-graph resource (ARCHITECTURE.md §7): angr `CFGFast` -> callers/callees, reachability, levels,
leaves, top and bottom sets, and per-function CFG fingerprints for diff tracing.

angr takes ~0.5 s on the demo and ~27 s on Lua 5.4 here, so the extracted resource is cached as
JSON under `.git/perf/` by build id; the cache holds only what the methods need (no angr objects).
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import networkx as nx

from gitperf.core.errors import InputError
from gitperf.core.model import ROOT
from gitperf.core.progress import Progress
from gitperf.git.state import callgraph_alias, callgraph_file

CACHE_VERSION = 1
CRITERIA = ("soft", "semi-strict", "strict")



@dataclass(frozen=True)
class FunctionNode:
    name: str
    addr: int
    blocks: int
    loops: int  # loops in its CFG (strongly connected parts with a back edge)
    nested: bool  # a loop inside a loop
    callees: tuple[str, ...]
    fingerprint: dict[str, str]  # criterion -> hash of the per-block fingerprints
    external: bool = False  # PLT stub / imported: not code of this binary


@dataclass
class CallGraph:
    build_id: str
    functions: dict[str, FunctionNode]
    seconds: float = 0.0  # resource extraction time (metric ORE), measured when it was built
    cached: bool = False
    graph: nx.DiGraph = field(default_factory=nx.DiGraph, repr=False)
    levels: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.graph.number_of_nodes():
            # The graph holds the binary's own code; calls into libraries (PLT stubs) are not edges,
            # or every function calling malloc would look mutually recursive through the stub.
            own = {n for n, f in self.functions.items() if not f.external}
            g = nx.DiGraph()
            g.add_nodes_from(own)
            for n in own:
                g.add_edges_from((n, c) for c in self.functions[n].callees if c in own)
            self.graph = g
        if not self.levels:
            self.levels = estimate_levels(self.graph, ROOT if ROOT in self.graph else None)

    # --- queries -------------------------------------------------------------------------------
    def callers(self, name: str) -> set[str]:
        return set(self.graph.predecessors(name)) if name in self.graph else set()

    def callees(self, name: str) -> set[str]:
        return set(self.graph.successors(name)) if name in self.graph else set()

    def reachable(self, root: str = ROOT) -> set[str]:
        if root not in self.graph:
            return set(self.graph)
        return {root} | nx.descendants(self.graph, root)

    @property
    def depth(self) -> int:
        return max(self.levels.values(), default=0)

    def leaves(self) -> set[str]:
        """Functions that call no other function of the binary (library calls do not count)."""
        return {n for n in self.graph if not any(True for _ in self.graph.successors(n))}

    def bottom(self) -> set[str]:
        """⊥: the leaves plus the functions whose callees are all leaves (where the work is)."""
        leaves = self.leaves()
        return leaves | {n for n in self.graph if all(c in leaves for c in self.graph.successors(n))}

    def recursive(self) -> set[str]:
        out = set()
        for comp in nx.strongly_connected_components(self.graph):
            if len(comp) > 1:
                out |= comp
        return out | {n for n in self.graph if self.graph.has_edge(n, n)}


def estimate_levels(g: nx.DiGraph, root: str | None) -> dict[str, int]:
    """The thesis' level: the longest call path from the root, with cycles broken.

    The cycles are broken by condensing every strongly connected component (recursion) into one
    node; the condensation is a DAG, where the longest path is one pass in topological order.
    Inside a component, a function's level is its BFS distance from the component's entry points.
    Linear in nodes + edges, so it always terminates; nodes the root cannot reach are levelled from
    the sources that reach them (`_start`, callbacks angr found no caller for)."""
    if not g.number_of_nodes():
        return {}
    cond = nx.condensation(g)
    members = cond.graph["mapping"]  # node -> component
    comp_level: dict[int, int] = {}
    start = members[root] if root is not None else None
    for c in nx.topological_sort(cond):
        preds = list(cond.predecessors(c))
        if c == start or not preds:
            comp_level[c] = 0
        else:
            comp_level[c] = max(comp_level[p] + cond.nodes[p]["span"] for p in preds)
        nodes = cond.nodes[c]["members"]
        if len(nodes) == 1:
            cond.nodes[c]["inner"] = {next(iter(nodes)): 0}
        else:
            sub = g.subgraph(nodes)
            entries = [n for n in nodes if any(members[p] != c for p in g.predecessors(n))] or [min(nodes)]
            dist = nx.multi_source_dijkstra_path_length(sub, entries, weight=lambda *_: 1)
            cond.nodes[c]["inner"] = {n: dist.get(n, 0) for n in nodes}
        cond.nodes[c]["span"] = max(cond.nodes[c]["inner"].values()) + 1
    return {n: comp_level[members[n]] + cond.nodes[members[n]]["inner"][n] for n in g}


# --- extraction with angr ---------------------------------------------------------------------------

_HEX = re.compile(r"0x[0-9a-f]+")


def _block_prints(block, lo: int, hi: int) -> tuple[str, str, str]:
    """(soft, semi-strict, strict) fingerprint of one basic block.  Strict keeps operands but masks
    addresses inside the binary (jump/call targets, rip-relative data, absolute addresses of
    globals): they move whenever code before them grows, which is not a change of this block."""
    insns = block.capstone.insns
    mnemonics = " ".join(i.mnemonic for i in insns)

    def mask(i) -> str:
        ops = i.op_str
        if i.mnemonic.startswith(("j", "call", "loop")) or "rip" in ops:
            ops = _HEX.sub("A", ops)
        else:
            ops = _HEX.sub(lambda m: "A" if lo <= int(m.group(0), 16) < hi else m.group(0), ops)
        return f"{i.mnemonic} {ops}"

    return str(len(insns)), mnemonics, "; ".join(mask(i) for i in insns)


def _loops(fgraph: nx.DiGraph) -> tuple[int, bool]:
    comps = [c for c in nx.strongly_connected_components(fgraph)
             if len(c) > 1 or any(fgraph.has_edge(n, n) for n in c)]
    nested = False
    for c in comps:
        sub = fgraph.subgraph(c).copy()
        # remove the edges into the loop header(s); a cycle that remains is a loop inside the loop
        heads = [n for n in c if any(p not in c for p in fgraph.predecessors(n))] or [min(c, key=lambda b: b.addr)]
        sub.remove_edges_from([(p, h) for h in heads for p in list(sub.predecessors(h))])
        if not nx.is_directed_acyclic_graph(sub):
            nested = True
    return len(comps), nested


ANGR_PACKAGES = ("angr", "cle", "pyvex", "claripy", "archinfo", "ailment")


def _from_angr(u) -> bool:
    """Whether an unraisable exception (one Python can only print) came from angr's own objects."""
    mods = (getattr(u.object, "__module__", None), getattr(type(u.object), "__module__", None))  # a __del__, an object
    if any(str(m).split(".")[0] in ANGR_PACKAGES for m in mods if m):
        return True
    tb, files = u.exc_traceback, []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return any(f"/{p}/" in f for f in files for p in ANGR_PACKAGES)


@contextmanager
def quiet_angr_finalizers() -> Iterator[None]:
    """angr's finalizers sometimes fail (an AssertionError in a `__del__`, which Python prints as
    "Exception ignored in ..." with a traceback, in the middle of git perf's output).  Nothing the
    user can act on: dropped while angr's objects live, every other one still printed."""
    previous = sys.unraisablehook

    def hook(u) -> None:
        if not _from_angr(u):
            previous(u)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        gc.collect()  # angr's objects die here, under the hook, not later in the middle of the output
        sys.unraisablehook = previous


def _extract(path: str, build_id: str, progress: Progress) -> CallGraph:
    with quiet_angr_finalizers():
        return _extract_with_angr(path, build_id, progress)


def _extract_with_angr(path: str, build_id: str, progress: Progress) -> CallGraph:
    for name in ANGR_PACKAGES:
        logging.getLogger(name).setLevel(logging.CRITICAL)  # unicorn and lifter chatter is not for users
    import angr

    t0 = time.perf_counter()
    try:
        proj = angr.Project(path, auto_load_libs=False, load_debug_info=False)
    except Exception as e:  # cle raises many types for files it cannot load
        raise InputError(f"angr cannot load {path}: {e}") from None
    last = [0.0]

    def report(pct: float, **_) -> None:
        now = time.perf_counter()
        if now - last[0] >= 2.0:
            last[0] = now
            progress(f"call graph (angr CFGFast): {pct:5.1f}%  {now - t0:.0f} s")

    cfg = proj.analyses.CFGFast(normalize=True, data_references=False, cross_references=False,
                                progress_callback=report)
    obj = proj.loader.main_object
    lo, hi = obj.min_addr, obj.max_addr + 1
    funcs: dict[str, FunctionNode] = {}
    kb = cfg.kb.functions
    for f in kb.values():
        if f.name in funcs or f.is_simprocedure:
            continue
        external = bool(f.is_plt) or not (lo <= f.addr < hi)
        prints = [_block_prints(b, lo, hi) for b in sorted(f.blocks, key=lambda b: b.addr)] if not external else []
        fp = {crit: hashlib.sha1("|".join(p[k] for p in prints).encode()).hexdigest()[:16]
              for k, crit in enumerate(CRITERIA)}
        loops, nested = _loops(f.graph) if not external else (0, False)
        callees = tuple(sorted({kb[c].name for c in cfg.kb.callgraph.successors(f.addr) if c in kb and c != f.addr}
                               | ({f.name} if cfg.kb.callgraph.has_edge(f.addr, f.addr) else set())))
        funcs[f.name] = FunctionNode(f.name, f.addr, len(prints), loops, nested, callees, fp, external)
    return CallGraph(build_id, funcs, seconds=time.perf_counter() - t0)


def cached_build_id(cache_dir: Path, alias: str) -> str | None:
    """The build id analysed for `alias` (commit and binary name), if its resource is cached.
    Builds of one commit in different temporary worktrees get different build ids (-g records the
    directory) but the same code, so a commit's analysis is reused through its alias."""
    a = callgraph_alias(cache_dir, alias)
    try:
        bid = a.read_text().strip()
    except OSError:
        return None
    return bid if callgraph_file(cache_dir, bid).exists() else None


def load(path: str, build_id: str, cache_dir: Path, progress: Progress, alias: str | None = None) -> CallGraph:
    """The resource of a binary: from the cache when this build (or, with `alias`, this commit's
    build) was analysed before; else extracted with angr and cached."""
    if alias and (known := cached_build_id(cache_dir, alias)):
        build_id = known
    cache = callgraph_file(cache_dir, build_id)
    t0 = time.perf_counter()
    if cache.exists():
        try:
            data = json.loads(cache.read_text())
            if data.get("version") == CACHE_VERSION:
                funcs = {n: FunctionNode(**{**f, "callees": tuple(f["callees"])}) for n, f in data["functions"].items()}
                return CallGraph(build_id, funcs, seconds=time.perf_counter() - t0, cached=True)
        except (OSError, ValueError, TypeError, KeyError):
            pass  # a damaged cache is rebuilt, never trusted
    progress(f"analysing {Path(path).name} with angr (cached afterwards by build id)")
    cg = _extract(path, build_id, progress)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": CACHE_VERSION, "build_id": build_id,
                               "functions": {n: asdict(f) for n, f in cg.functions.items()}}))
    tmp.replace(cache)
    if alias:
        callgraph_alias(cache_dir, alias).write_text(build_id)
    progress(f"call graph: {len(cg.functions)} functions, depth {cg.depth}, {cg.seconds:.1f} s")
    return cg
