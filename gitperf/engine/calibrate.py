"""Per-hit probe cost for each entry-instruction class, measured on this machine.

A tiny program (calib/) calls one empty function per class N times and times the loop itself;
run natively and then with entry+return probes on those functions, the difference per call is what
one probed call costs (entry trap, handler, uretprobe).  The result depends on the kernel and the
hardware, so it is cached per kernel release under `.git/perf/` and recorded in every profile.

The same probed run has the stack-sampling timer on: a call-free loop's slowdown divided by the
samples it took is the cost of one sample (`stack_sample`), which the overhead budget spends.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path

from gitperf.config import CollectConfig
from gitperf.elf import load as load_elf
from gitperf.engine.base import Engine
from gitperf.errors import EnvironmentUnavailable
from gitperf.plan import ProbePlan, make_plan
from gitperf.workload import run

HERE = Path(__file__).with_name("calib")
CALLS = 20_000  # single-stepped hits cost ~15-20 us on these VMs: 20k calls stay under a second
# Fast enough that the loop's slowdown (~30 us a sample on these VMs: +15%) stands well above its
# run-to-run noise, below the kernel's default perf_event_max_sample_rate.
CALIB_HZ = 4999
SAMPLE_KEY = "stack_sample"


def call_costs(plan: ProbePlan, cost_ns: dict[str, float]) -> dict[str, float]:
    """Calibrated cost (ns) of one traced call of each of the plan's functions, by its entry class."""
    default = cost_ns.get("singlestep", 0.0)
    return {f.name: cost_ns.get(f.entry, default) for f in plan.functions}


def _read(path: Path) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split() for line in path.read_text().splitlines())}


def measure(engine: Engine, workdir: Path) -> dict[str, float]:
    """ns per probed call, by entry class (never below 0)."""
    exe = workdir / "calib"
    r = subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "driver.c"), str(HERE / "targets.S")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise EnvironmentUnavailable(f"cannot build the calibration program (is a C compiler installed?): {r.stderr}")
    native_out, probed_out = workdir / "native.txt", workdir / "probed.txt"
    subprocess.run([str(exe), str(native_out), str(CALLS)], check=True)
    binary = load_elf(exe)
    names = tuple(f.name for f in binary.functions if f.name.startswith("f_"))
    plan = make_plan(binary, CollectConfig(strategy="funcs", stack_hz=CALIB_HZ), names)
    engine.collect(binary, plan, lambda where: run([str(exe), str(probed_out), str(CALLS)], str(workdir), 120, where),
                   lambda _msg: None)
    native, probed = _read(native_out), _read(probed_out)
    spin_native, spin_probed = native.pop("spin"), probed.pop("spin")
    costs = {k: round(max(probed[k] - native[k], 0.0), 1) for k in native}
    samples = spin_probed / 1e9 * CALIB_HZ  # the timer counts CPU time: the loop is all CPU
    costs[SAMPLE_KEY] = round(max(spin_probed - spin_native, 0.0) / samples, 1)
    return costs


def costs(engine: Engine, cache_dir: Path, progress=lambda _m: None) -> dict[str, float]:
    """Cached per kernel release; measured on first use (a few seconds)."""
    cache = cache_dir / f"calibration-{platform.release()}.json"
    try:
        cached = json.loads(cache.read_text())
        if SAMPLE_KEY in cached:  # caches from before the sample cost was measured are re-measured
            return cached
    except (OSError, ValueError):
        pass
    progress("calibrating probe costs for this kernel (once)")
    with tempfile.TemporaryDirectory(prefix="gitperf-calib-") as d:
        result = measure(engine, Path(d))
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(cache)  # atomic: concurrent collections never read half a file
    return result
