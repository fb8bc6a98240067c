#!/usr/bin/env python3
"""What compiling the collection's BPF program costs a session (every `collect`, and each session of a
paired check, compiles it once): the program as the engine builds it for the demo under a full trace,
beside the same program with `<linux/bpf_perf_event.h>` included, as it was before it read its sample
context as `struct pt_regs` (probe.bpf.c's `on_sample`).  Runs alternate; medians.

    sudo .venv/bin/python bench/compile.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _common import BccEngine, CollectConfig, build_demo, elf, make_plan, table

from gitperf.engine import bcc_engine

HEADER = "#include <linux/bpf_perf_event.h>\n"


def compile_s(bcc, text: str, cflags: list[str]) -> float:
    t = time.perf_counter()
    b = bcc_engine._load(bcc, text, cflags)
    took = time.perf_counter() - t
    b.cleanup()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    bcc = bcc_engine._import_bcc()
    with tempfile.TemporaryDirectory() as tmp:
        binary = elf.load(build_demo(Path(tmp)))
    plan = make_plan(binary, CollectConfig(), ())
    job = bcc_engine._Job(binary, plan, plan.probed_ids(), BccEngine().uses_multi_link, lambda m: None)
    text, cflags = bcc_engine._source(job), bcc_engine._cflags(job)
    times: dict[str, list[float]] = {"as the engine builds it": [], f"with {HEADER.strip()}": []}
    for _ in range(a.runs):
        times["as the engine builds it"].append(compile_s(bcc, text, cflags))
        times[f"with {HEADER.strip()}"].append(compile_s(bcc, HEADER + text, cflags))
    print(f"the demo under a full trace: {len(job.probed)} probed functions; {a.runs} compiles each, alternating")
    print(table(["program", "median s", "min s", "max s"],
                [[k, f"{statistics.median(v):.3f}", f"{min(v):.3f}", f"{max(v):.3f}"] for k, v in times.items()]))


if __name__ == "__main__":
    main()
