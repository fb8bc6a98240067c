#!/usr/bin/env python3
"""Whether a sampled function's samples sit under a function that really calls it (issue #55, item 2):
the engine's stack samples of a program against callgrind's call graph of the same binary and command.

A sample's innermost frame in the binary is its function; the frame above it is its caller as the
profile says.  It is *placed right* when callgrind saw that caller call the function.  Printed per
program and per tree of git perf (`--tree`: another checkout, to compare in one run): for leaves (the
functions callgrind saw call no function of the binary: where a missing frame hides the caller) and
for every sampled function, the samples placed right, and the leaf whose samples are placed worst.

    .venv/bin/python bench/leafframes.py [--hz 999] [--runs 3] [--tree PATH ...] [--neighbour two]
                                         [--detail N] [--program NAME DIR BINARY COMMAND ...]

Programs: the demo (built by its Makefile: frame pointers, padded entries) and any `--program`, built
as `check --collect` builds (`-fno-omit-frame-pointer -g` and its entry padding; ARCHITECTURE.md §6).
Needs root (eBPF) and valgrind.  A tree is measured in a child process with it first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _common import ROOT, build_demo, neighbour, table

from gitperf.analysis import elf
from gitperf.core.names import whole

CHILD = """
import json, sys
import gitperf
from gitperf.analysis import elf
from gitperf.core import stacks
from gitperf.core.model import ROOT, Mode
from gitperf.engine.bcc_engine import BccEngine
from gitperf.engine.workload import Command, run
from gitperf.plan.probes import ProbePlan
binary, cwd, command, hz, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
info = elf.load(binary)
funcs = tuple(info.functions)
plan = ProbePlan(functions=funcs, root=[f.name for f in funcs].index(ROOT), mode=Mode.STACK, record_limit=0,
                 stack_hz=hz)
merged = {}
with BccEngine().session(info, plan, lambda _m: None) as s:
    for _ in range(runs):
        raw = s.collect(lambda where: run(Command(["/bin/sh", "-c", "exec " + command], cwd), 600, where))
        for k, v in stacks.folded(raw.stacks).items():
            merged[k] = merged.get(k, 0) + v
print(json.dumps({"from": gitperf.__file__, "stacks": merged}))
"""


def callers(binary: str, cwd: str, command: str) -> dict[str, set[str]]:
    """Callee -> the functions of `binary` callgrind saw call it (names as the engine writes them)."""
    names = {f.name for f in elf.load(binary).functions}
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cg.%p"
        subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}",
                        "--compress-strings=no", "--compress-pos=no", "--demangle=no", "/bin/sh", "-c",
                        f"exec {command}"], cwd=cwd, check=True, capture_output=True)
        edges: dict[str, set[str]] = {}
        for f in Path(d).glob("cg.*"):
            fn = cfn = ""
            for line in f.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key == "fn":
                    fn = _name(value)
                elif key == "cfn":
                    cfn = _name(value)
                elif key == "calls" and fn in names and cfn in names:
                    edges.setdefault(whole(cfn), set()).add(whole(fn))
    return edges


def _name(value: str) -> str:
    return re.sub(r"'\d+$", "", value.strip())  # (callgrind's recursion levels: fib'2)


def sampled(tree: Path, binary: str, cwd: str, command: str, hz: int, runs: int) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # (run from the tree: `python -c` puts its working directory first on sys.path)
    r = subprocess.run([sys.executable, "-c", CHILD, binary, cwd, command, str(hz), str(runs)], env=env,
                       cwd=tree, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"sampling under {tree} failed: {r.stderr[-2000:]}")
    got = json.loads(r.stdout.splitlines()[-1])
    if not Path(got["from"]).is_relative_to(tree.resolve()):
        raise SystemExit(f"the child imported git perf from {got['from']}, not from {tree}")
    return got["stacks"]


def placed(folded: dict[str, int], edges: dict[str, set[str]]) -> tuple[Counter, Counter]:
    """Per function: its own samples with a caller above them, and those whose caller callgrind saw."""
    seen, right = Counter(), Counter()
    for stack, n in folded.items():
        frames = stack.split(";")
        if len(frames) < 2 or frames[-1].startswith("[") or frames[-1] not in edges:
            continue  # (the root, a library's or the kernel's time, a function callgrind never saw called)
        seen[frames[-1]] += n
        right[frames[-1]] += n if frames[-2] in edges[frames[-1]] else 0
    return seen, right


def misplaced(folded: dict[str, int], edges: dict[str, set[str]], most: int) -> list[str]:
    """The `most` commonest (function, caller the profile gave) pairs that callgrind never saw."""
    wrong = Counter()
    for stack, n in folded.items():
        frames = stack.split(";")
        if len(frames) >= 2 and frames[-1] in edges and frames[-2] not in edges[frames[-1]]:
            wrong[frames[-1], frames[-2]] += n
    return [f"  {n:5d}  {f} under {c}; callgrind's callers: {', '.join(sorted(edges[f])[:4])}"
            for (f, c), n in wrong.most_common(most)]


def row(program: str, tree: Path, folded: dict[str, int], edges: dict[str, set[str]]) -> list:
    seen, right = placed(folded, edges)
    callees = {c for c, cs in edges.items() for _ in cs}
    makes_calls = {caller for c in callees for caller in edges[c]}
    leaves = [f for f in seen if f not in makes_calls]
    share = lambda fs: sum(right[f] for f in fs) / max(sum(seen[f] for f in fs), 1)  # noqa: E731
    worst = min(leaves, key=lambda f: (right[f] - seen[f], f), default=None)
    return [program, tree.name or str(tree), sum(seen[f] for f in leaves), f"{share(leaves):.1%}",
            sum(seen.values()), f"{share(seen):.1%}",
            f"{worst[:40]} {right[worst]}/{seen[worst]}" if worst else "-"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hz", type=int, default=999)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tree", type=Path, action="append", help="a checkout of git perf (default: this one)")
    ap.add_argument("--detail", type=int, default=0, help="print each tree's N commonest misplaced samples")
    ap.add_argument("--neighbour", choices=["quiet", "one", "two"], default="quiet",
                    help="beside one or two processes keeping a core busy in bursts (the sampling runs)")
    ap.add_argument("--program", nargs=4, action="append", default=[], metavar=("NAME", "DIR", "BINARY", "COMMAND"))
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build_demo(Path(d))
        programs = [("demo", d, str(exe), "./wordstat 2000000 5000")]
        programs += [(n, cwd, str(Path(cwd, b)), c) for n, cwd, b, c in a.program]
        for name, cwd, binary, command in programs:
            edges = callers(binary, cwd, command)
            for tree in a.tree or [ROOT]:
                with neighbour(a.neighbour):
                    folded = sampled(tree, binary, cwd, command, a.hz, a.runs)
                rows.append(row(name, tree, folded, edges))
                if a.detail:
                    print(f"{name} under {tree}:", *misplaced(folded, edges, a.detail), sep="\n")
    print(table(["program", "tree", "leaf samples", "placed right", "all samples", "placed right",
                 "worst leaf: right/samples"], rows))


if __name__ == "__main__":
    main()
