#!/usr/bin/env python3
"""Attach + detach time of N probes (entry and return each): one uprobe_multi link per direction
versus bcc's one perf-event uprobe per probe.

    .venv/bin/python bench/attach.py [--per-probe-max 100]

Per-probe detach costs an RCU grace period per probe (~0.1 s each here), so per-probe runs above
--per-probe-max functions are skipped by default (1000 would take minutes).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from _common import BccEngine, CollectConfig, elf, make_plan, table

N_MAX = 1000


def build(dest: Path) -> Path:
    body = "".join(f"__attribute__((noinline)) int f{i}(int x) {{ return x * {i + 3} + {i}; }}\n" for i in range(N_MAX))
    calls = "".join(f"s += f{i}(s);" for i in range(N_MAX))
    (dest / "many.c").write_text(body + f"int main(void) {{ int s = 1; {calls} return s == 42; }}\n")
    exe = dest / "many"
    subprocess.run(["cc", "-O2", "-g", "-o", str(exe), str(dest / "many.c")], check=True)
    return exe


def measure(exe: Path, n: int, per_probe: bool) -> tuple[float, float, int]:
    from gitperf.engine.workload import Command, run as run_workload
    binary = elf.load(exe)
    names = tuple(f"f{i}" for i in range(n))
    plan = make_plan(binary, CollectConfig(strategy="funcs"), names)
    raw = BccEngine(force_per_probe=per_probe).collect(
        binary, plan, lambda where: run_workload(Command([str(exe)], str(exe.parent)), 60, where), lambda m: None)
    return raw.attach_s, raw.detach_s, sum(1 for f in raw.functions if f.count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-probe-max", type=int, default=100)
    args = ap.parse_args()
    BccEngine().check()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build(Path(d))
        for n in (10, 100, 1000):
            for per_probe in (False, True):
                if per_probe and n > args.per_probe_max:
                    rows.append([n, "per-probe", "skipped", "", "", ""])
                    continue
                a, det, hit = measure(exe, n, per_probe)
                rows.append([n, "per-probe" if per_probe else "uprobe_multi", f"{a * 1e3:.1f}", f"{det * 1e3:.1f}",
                             f"{(a + det) * 1e3:.1f}", f"{hit}/{n + 1}"])
    print(table(["functions", "method", "attach ms", "detach ms", "total ms", "reached"], rows))
    print("(each function has an entry and a return probe; `reached` includes main, which is always probed)")


if __name__ == "__main__":
    main()
