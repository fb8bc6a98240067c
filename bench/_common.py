"""Shared bits of the benchmarks: build programs, run one collection through the library."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this checkout's git perf, after any that PYTHONPATH names (to judge the same data with another tree)
sys.path.insert(1 + len([p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]), str(ROOT))

from gitperf.analysis import elf
from gitperf.collect.context import machine_fingerprint  # noqa: E402
from gitperf.collect.profile import build_functions  # noqa: E402
from gitperf.core import codec
from gitperf.core.config import CollectConfig  # noqa: E402
from gitperf.core.model import Header, Metrics, PlanRecord, Profile  # noqa: E402
from gitperf.engine import workload  # noqa: E402
from gitperf.engine.bcc_engine import BccEngine  # noqa: E402
from gitperf.plan.probes import make_plan  # noqa: E402


def build_demo(dest: Path) -> Path:
    src = ROOT / "examples" / "demo" / "src"
    subprocess.run(["make", "-s", "-C", str(src), "clean"], check=True, capture_output=True)
    subprocess.run(["make", "-s", "-C", str(src)], check=True)
    exe = dest / "wordstat"
    exe.write_bytes((src / "wordstat").read_bytes())
    exe.chmod(0o755)
    return exe


def native(argv: list[str], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def probed(exe: Path, argv: list[str], cfg: CollectConfig, funcs: tuple[str, ...] = (), per_probe=False):
    """One collection: returns (raw collection, encoded profile size in bytes)."""
    binary = elf.load(exe)
    plan = make_plan(binary, cfg, funcs)
    eng = BccEngine(force_per_probe=per_probe)
    raw = eng.collect(binary, plan, lambda where: workload.run(workload.Command(argv, str(exe.parent)), 600, where), lambda m: None)
    fs = build_functions(plan, raw)
    header = Header("bench", "0" * 40, exe.name, binary.build_id, tuple(argv), "bench", "bcc", machine_fingerprint(),
                    "", 0.0, 0.0)
    size = len(codec.encode(Profile(header, Metrics(), PlanRecord(probed=plan.names), tuple(fs))))
    return raw, size, plan


def table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in cells[1:]])


def _bursts(seed: int) -> None:
    rng = random.Random(seed)
    while True:
        end = time.perf_counter() + rng.uniform(0.05, 0.3)
        while time.perf_counter() < end:
            pass
        time.sleep(rng.uniform(0.05, 0.3))


@contextlib.contextmanager
def neighbour(kind: str):
    """`quiet`, or `one`/`two` processes keeping a core busy in bursts (busy 50-300 ms, idle 50-300 ms,
    at random), for as long as the block runs."""
    n = {"quiet": 0, "one": 1, "two": 2}[kind]
    procs = [multiprocessing.Process(target=_bursts, args=(i,), daemon=True) for i in range(n)]
    for proc in procs:
        proc.start()
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.join()
