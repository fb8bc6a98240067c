#!/usr/bin/env python3
"""Run time under each probing mode versus native, with the data each mode produces.

    .venv/bin/python bench/overhead.py [--words 20000] [--calls 200000]

Workloads: the demo program (`wordstat WORDS 300`) and a call-heavy micro-benchmark (a loop
calling a tiny function CALLS times).  Ratios are within one run of this script; absolute
times on shared VMs are noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from _common import BccEngine, CollectConfig, build_demo, native, probed, table

MODES = [
    ("trace", CollectConfig(mode="trace")),
    ("sample 1/10", CollectConfig(mode="sample", sample_every=10)),
    ("dynamic 100", CollectConfig(mode="dynamic", record_limit=100)),
    ("timed 10/100ms", CollectConfig(mode="timed", period_ms=100, window_ms=10)),
    ("bursty 10/100ms", CollectConfig(mode="bursty", period_ms=100, window_ms=10)),
    ("stack 199 Hz", CollectConfig(mode="stack", stack_hz=199)),
]

MICRO = """
__attribute__((noinline)) long leaf(long x) { __asm__ volatile(""); return x * 3 + 1; }
__attribute__((noinline)) long mid(long x) { return leaf(x) ^ leaf(x + 1); }
int main(int argc, char **argv) {
    long n = argc > 1 ? __builtin_strtol(argv[1], 0, 10) : 100000, s = 0;
    for (long i = 0; i < n; i++) s += mid(i);
    return s == 42;
}
"""


def build_micro(dest: Path) -> Path:
    (dest / "micro.c").write_text(MICRO.replace("__builtin_strtol", "strtol").replace(
        "__attribute__((noinline)) long leaf", "#include <stdlib.h>\n__attribute__((noinline)) long leaf", 1))
    exe = dest / "micro"
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(dest / "micro.c")], check=True)
    return exe


def bench(name: str, exe: Path, argv: list[str]) -> list[list]:
    base = native(argv)
    rows = [[name, "native", f"{base:.3f}", "1.00x", "", "", "", "", ""]]
    for label, cfg in MODES:
        raw, size, _plan = probed(exe, argv, replace(cfg, series_limit=200))
        t = raw.run.wall_s
        calls = sum(f.count for f in raw.functions)
        rows.append([name, label, f"{t:.3f}", f"{t / base:.2f}x", calls, raw.records,
                     f"{raw.records / t:,.0f}", raw.dropped, f"{raw.raw_bytes / 1024:.0f}", f"{size / 1024:.1f}"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=20000)
    ap.add_argument("--calls", type=int, default=200000)
    args = ap.parse_args()
    BccEngine().check()
    with tempfile.TemporaryDirectory() as d:
        demo, micro = build_demo(Path(d)), build_micro(Path(d))
        rows = bench(f"wordstat {args.words} 300", demo, [str(demo), str(args.words), "300"])
        rows += bench(f"micro {args.calls}", micro, [str(micro), str(args.calls)])
    for r in rows:
        r += [""] * (10 - len(r))
    print(table(["workload", "mode", "run s", "slowdown", "calls seen", "records", "records/s", "dropped",
                 "RDV KiB", "PS KiB"], rows))
    print("calls seen: counted in the kernel (bursty: only during bursts; stack: the root only)")


if __name__ == "__main__":
    main()
