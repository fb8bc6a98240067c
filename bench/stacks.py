"""What stored call stacks cost and how well they unwind: per program, one stack-sampled run at each
rate, the samples, the distinct stacks and how many `core.stacks.bound` keeps, the stacks' size in a
note (compact JSON, zlib level 9, as the codec writes it), and the share of samples in the binary whose
frame-pointer walk reached `main`.  Programs: the demo (`gate`, built with frame pointers) and any
`--program NAME DIR BINARY COMMAND` given.  Needs root (eBPF).

    .venv/bin/python bench/stacks.py [--hz 999,4999] [--program NAME DIR BINARY COMMAND]...
"""

from __future__ import annotations

import argparse
import json
import tempfile
import zlib
from pathlib import Path

from _common import build_demo, table

from gitperf.analysis import elf
from gitperf.core import stacks
from gitperf.core.model import ROOT, Mode
from gitperf.engine.bcc_engine import BccEngine
from gitperf.engine.workload import Command, run
from gitperf.plan.probes import ProbePlan


def _size(d: dict) -> int:
    return len(zlib.compress(json.dumps(d, separators=(",", ":")).encode(), 9))


def measure(name: str, cwd: str, binary: str, command: str, hz: int) -> list:
    info = elf.load(binary)
    funcs = tuple(info.functions)
    plan = ProbePlan(functions=funcs, root=[f.name for f in funcs].index(ROOT), mode=Mode.STACK, record_limit=0,
                     stack_hz=hz)
    raw = BccEngine().collect(info, plan, lambda where: run(Command(["/bin/sh", "-c", f"exec {command}"], cwd), 600, where),
                              lambda _m: None)
    folded = stacks.folded(raw.stacks)
    kept = stacks.bound(folded)
    framed = sum(n for s, n in folded.items() if not s.startswith("["))
    return [name, hz, f"{raw.run.wall_s:.3f}", sum(folded.values()), len(folded), len(kept), _size(folded),
            _size(kept), f"{raw.rooted_samples / max(framed, 1):.0%}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hz", default="999,4999")
    ap.add_argument("--program", nargs=4, action="append", default=[], metavar=("NAME", "DIR", "BINARY", "COMMAND"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build_demo(Path(d))
        programs = [("demo gate", d, str(exe), "./wordstat 10000 20"),
                    ("demo large", d, str(exe), "./wordstat 200000 2000")]
        programs += [(n, cwd, str(Path(cwd, b)), c) for n, cwd, b, c in args.program]
        for hz in (int(h) for h in args.hz.split(",")):
            rows += [measure(*p, hz) for p in programs]
    print(table(["program", "Hz", "run s", "samples", "stacks", "kept", "all B", "kept B", "unwound to main"], rows))


if __name__ == "__main__":
    main()
