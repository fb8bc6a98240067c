"""What the instruction-count witness costs, and how much instruction counts move between two runs
of one build (the A/A spread `checks.witness` uses).

For each program: the native run time (median of 10), one callgrind run's wall time (median of 3),
their ratio, the predicted time `engine.callgrind.predicted_s` would have allowed for, and the A/A
spread of the inclusive counts: the largest relative difference between two callgrind runs over the
functions with at least 0.1% of the instructions.  Programs: the demo (`gate`), and any
`--program NAME DIR BINARY COMMAND` given (a real project you built; the README's figures name theirs).

    .venv/bin/python bench/witness.py [--program NAME DIR BINARY COMMAND]...
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import build_demo, table

from gitperf.engine import callgrind, workload


def _wall(argv: list[str], cwd: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, cwd: str, binary: str, command: str) -> list:
    argv = ["/bin/sh", "-c", command]
    native = _wall(argv, cwd, 10)
    runs, walls = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        runs.append(callgrind.run(workload.Command(argv, cwd), 600, binary))
        walls.append(time.perf_counter() - t0)
    if runs[0].error:
        return [name, f"{native * 1e3:.1f}", "-", "-", "-", runs[0].error]
    wall = statistics.median(walls)
    a, b = runs[0], runs[1]
    big = [n for n, c in a.functions.items() if c[2] >= 0.001 * a.total and n in b.functions]
    spread = max((abs(b.functions[n][2] / a.functions[n][2] - 1) for n in big), default=0.0)
    return [name, f"{native * 1e3:.1f}", f"{wall:.2f}", f"{wall / native:.0f}x",
            f"{callgrind.predicted_s(native):.2f}", f"{spread:.3%} over {len(big)} functions"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", nargs=4, action="append", default=[], metavar=("NAME", "DIR", "BINARY", "COMMAND"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build_demo(Path(d))
        rows.append(measure("demo gate", d, str(exe), "./wordstat 10000 20"))
        for name, cwd, binary, command in args.program:
            rows.append(measure(name, cwd, str(Path(cwd, binary)), command))
    print(table(["program", "native ms", "callgrind s", "x native", "predicted s", "A/A spread (max)"], rows))


if __name__ == "__main__":
    main()
