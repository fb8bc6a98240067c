"""Per-hit probe cost for each entry-instruction class, measured on this machine.

A tiny program (calib/) calls one empty function per class N times and times the loop itself;
run natively and then with entry+return probes on those functions, the difference per call is what
one probed call costs (entry trap, handler, uretprobe).  The result depends on the kernel and the
hardware, so it is cached per kernel release under `.git/perf/` and recorded in every profile.
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
from gitperf.plan import make_plan
from gitperf.workload import run

HERE = Path(__file__).with_name("calib")
CALLS = 20_000  # single-stepped hits cost ~15-20 us on these VMs: 20k calls stay under a second


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
    plan = make_plan(binary, CollectConfig(strategy="funcs"), names)
    engine.collect(binary, plan, lambda where: run([str(exe), str(probed_out), str(CALLS)], str(workdir), 120, where),
                   lambda _msg: None)
    native, probed = _read(native_out), _read(probed_out)
    return {k: round(max(probed[k] - native[k], 0.0), 1) for k in native}


def costs(engine: Engine, cache_dir: Path, progress=lambda _m: None) -> dict[str, float]:
    """Cached per kernel release; measured on first use (a few seconds)."""
    cache = cache_dir / f"calibration-{platform.release()}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    progress("calibrating probe costs for this kernel (once)")
    with tempfile.TemporaryDirectory(prefix="gitperf-calib-") as d:
        result = measure(engine, Path(d))
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(cache)  # atomic: concurrent collections never read half a file
    return result
