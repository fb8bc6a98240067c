"""Analysis speed: the level estimator on a large generated call graph, and angr extraction of a
real binary versus re-analysis served from the build-id cache.

    .venv/bin/python bench/analysis.py [BINARY ...]     (default: the demo's wordstat)
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import networkx as nx  # noqa: E402
from _common import build_demo, table  # noqa: E402

from gitperf.analysis import (
    callgraph,
    elf,  # noqa: E402
)


def generated(scc: int = 500, nodes: int = 2000, edges: int = 8000, seed: int = 1) -> nx.DiGraph:
    """A call graph with one strongly connected component of `scc` functions (a ring, so it stays one
    component whatever else is added) and random calls up to `edges`."""
    rng = random.Random(seed)
    g = nx.DiGraph()
    ring = [f"s{i}" for i in range(scc)]
    g.add_edges_from(zip(ring, ring[1:] + ring[:1]))
    names = ["main"] + ring + [f"n{i}" for i in range(nodes - scc - 1)]
    g.add_edge("main", "s0")
    while g.number_of_edges() < edges:
        g.add_edge(rng.choice(names), rng.choice(names[1:]))
    return g


def main() -> None:
    rows = []
    for scc, n, e in ((500, 2000, 8000), (2000, 10000, 40000)):
        g = generated(scc, n, e)
        t0 = time.perf_counter()
        levels = callgraph.estimate_levels(g, "main")
        dt = time.perf_counter() - t0
        big = max((len(c) for c in nx.strongly_connected_components(g)), default=0)
        rows.append([g.number_of_nodes(), g.number_of_edges(), big, len(levels), max(levels.values()), f"{dt * 1e3:.0f}"])
    print("## level estimator on generated call graphs\n")
    print(table(["nodes", "edges", "largest SCC", "levelled", "depth", "ms"], rows))

    binaries = [Path(p) for p in sys.argv[1:]] or [build_demo(Path(tempfile.mkdtemp(prefix="gitperf-an-")))]
    rows = []
    for b in binaries:
        info = elf.load(b)
        cache = Path(tempfile.mkdtemp(prefix="gitperf-cg-"))
        t0 = time.perf_counter()
        cg = callgraph.load(info.path, info.build_id, cache, lambda m: None)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = callgraph.load(info.path, info.build_id, cache, lambda m: None)
        second = time.perf_counter() - t0
        assert again.cached
        size = sum(f.stat().st_size for f in cache.iterdir())
        rows.append([b.name, len(info.functions), len(cg.graph), cg.depth, f"{first:.2f}", f"{second * 1e3:.0f}",
                     f"{size / 1024:.0f}"])
    print("\n## call-graph resource: angr CFGFast vs the build-id cache\n")
    print(table(["binary", "symbols", "graph nodes", "depth", "angr s", "cached ms", "cache KiB"], rows))


if __name__ == "__main__":
    main()
