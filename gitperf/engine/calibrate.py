"""Per-hit probe cost for each entry-instruction class, measured on this machine.

A tiny program (calib/) calls one empty function per class N times and times the loop itself;
run natively and then with entry+return probes on those functions, the difference per call is what
one probed call costs (entry trap, handler, uretprobe).  The result depends on the kernel and the
hardware, so it is cached per machine and kernel release in the user's cache (`git.state.user_cache`) and
recorded in every profile.

A second run has the stack-sampling timer on and only `main` probed: a call-free loop's slowdown
divided by the samples it took is the cost of one stack sample (`stack_sample`), which the overhead
budget spends.  The classes are measured without the timer: with it, every class cost carried that
run's sampling overhead (~10% of a push-class call here), which is native-time inflation, not probe cost.

The kernel's own timing of those empty functions is the part of a probed call's cost that lands
*inside* its measured interval (`CLASS_in`): the handler's tail after the entry timestamp, the
emulated or single-stepped first instruction, the return trap up to the exit timestamp.  The
measurement is repeated REPEATS times; `CLASS_sd` is the spread of the cost between repetitions,
the uncertainty a probe-cost correction carries (ARCHITECTURE.md §6).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from pathlib import Path

from gitperf.analysis.elf import load as load_elf
from gitperf.core import scratch
from gitperf.core.config import CollectConfig
from gitperf.core.errors import EnvironmentUnavailable
from gitperf.core.model import Mode
from gitperf.engine.base import Engine, Session
from gitperf.engine.workload import Command, run
from gitperf.git.state import user_cache
from gitperf.plan.costs import SAMPLE_KEY
from gitperf.plan.probes import make_plan

HERE = Path(__file__).with_name("calib")
CALLS = 20_000  # single-stepped hits cost ~15-20 us on these VMs: 20k calls stay under a second
# Fast enough that the loop's slowdown (~30 us a sample on these VMs: +15%) stands well above its
# run-to-run noise, below the kernel's default perf_event_max_sample_rate.
CALIB_HZ = 4999
REPEATS = 3  # the spread of three measurements is the calibration's uncertainty
VERSION = 4  # caches of an older version are measured again (2: classes timed with the sampler on, no nop5;
# 3: handlers before they read the run-queue wait at entry and return)


def _read(path: Path) -> dict[str, float]:
    return {k: float(v) for k, v in (line.split() for line in path.read_text().splitlines())}


def _build(workdir: Path) -> Path:
    exe = workdir / "calib"
    r = subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "driver.c"), str(HERE / "targets.S")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise EnvironmentUnavailable(f"cannot build the calibration program (is a C compiler installed?): {r.stderr}")
    return exe


def _plans(exe: Path):
    """The binary, a plan that probes every class's function (no timer), and one that only samples."""
    binary = load_elf(exe)
    names = tuple(f.name for f in binary.functions if f.name.startswith("f_"))
    probes = make_plan(binary, CollectConfig(strategy="funcs"), names)
    timer = make_plan(binary, CollectConfig(mode=Mode.STACK, stack_hz=CALIB_HZ))
    return binary, probes, timer


def _run(session: Session, exe: Path, workdir: Path, out: Path):
    return session.collect(lambda where: run(Command([str(exe), str(out), str(CALLS)], str(workdir)), 120, where))


def _class_costs(session: Session, exe: Path, workdir: Path, plan) -> dict[str, float]:
    """ns per probed call by entry class (never below 0) and ns of it inside the measured interval
    (`CLASS_in`), from one run of the probed program against one native run."""
    native_out, probed_out = workdir / "native.txt", workdir / "probed.txt"
    subprocess.run([str(exe), str(native_out), str(CALLS)], check=True)
    raw = _run(session, exe, workdir, probed_out)
    native, probed = _read(native_out), _read(probed_out)
    native.pop("spin"), probed.pop("spin")
    costs = {k: max(probed[k] - native[k], 0.0) for k in native}
    for f, r in zip(plan.functions, raw.functions):
        cls = f.name[2:]
        if cls in native and r.timed:  # an empty function's measured time is (almost) all probe
            costs[f"{cls}_in"] = max(r.total_ns / r.timed - native[cls], 0.0)
    return costs


def _sample_cost(session: Session, exe: Path, workdir: Path) -> float:
    """ns per stack sample: the call-free loop's slowdown under the timer over the samples it took."""
    native_out, sampled_out = workdir / "native.txt", workdir / "sampled.txt"
    subprocess.run([str(exe), str(native_out), str(CALLS)], check=True)
    _run(session, exe, workdir, sampled_out)
    spin_native, spin_sampled = _read(native_out)["spin"], _read(sampled_out)["spin"]
    samples = spin_sampled / 1e9 * CALIB_HZ  # the timer counts CPU time: the loop is all CPU
    return max(spin_sampled - spin_native, 0.0) / samples


def measure_classes(engine: Engine, exe: Path, workdir: Path, repeats: int) -> list[dict[str, float]]:
    """`repeats` measurements of every class's cost, one compiled program for all of them."""
    binary, probes, _ = _plans(exe)
    with engine.session(binary, probes, lambda _m: None) as s:
        return [_class_costs(s, exe, workdir, probes) for _ in range(repeats)]


def measure(engine: Engine, workdir: Path) -> dict[str, float]:
    """The median of REPEATS measurements of every cost, and each class's spread (`CLASS_sd`)."""
    exe = _build(workdir)
    runs = measure_classes(engine, exe, workdir, REPEATS)
    binary, _, timer = _plans(exe)
    with engine.session(binary, timer, lambda _m: None) as s:
        sample = statistics.median(_sample_cost(s, exe, workdir) for _ in range(REPEATS))
    out = {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0] if all(k in r for r in runs)}
    for k in list(out):
        if not k.endswith("_in"):
            out[f"{k}_sd"] = round(statistics.stdev(r[k] for r in runs), 1)
    out[SAMPLE_KEY] = round(sample, 1)
    out["version"] = VERSION
    return out


def costs(engine: Engine, machine: str, cache_dir: Path | None = None, progress=lambda _m: None) -> dict[str, float]:
    """Cached per machine (`machine`: its fingerprint) and kernel release in `cache_dir` (default
    `git.state.user_cache()`: the calibration belongs to the machine and its kernel, not to a
    repository; kept under each repository's `.git/perf/`, every fresh clone, a CI job's, measured it
    again, ~12 s of its first collect), or where that cannot be written, measured again next time."""
    cache = (cache_dir or user_cache()) / f"calibration-{platform.release()}-{machine}.json"
    try:
        cached = json.loads(cache.read_text())
        if cached.get("version") == VERSION:  # older caches lack CLASS_in / CLASS_sd: measured again
            return cached
    except (OSError, ValueError):
        pass
    progress("calibrating probe costs for this machine and kernel (once)")
    with scratch.directory("calib") as d:
        result = measure(engine, d)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(cache)  # atomic: concurrent collections never read half a file
    except OSError as e:
        progress(f"warning: cannot keep the calibration in {cache.parent} ({e.strerror}): set GITPERF_CACHE to a "
                 "writable directory, or it is measured again next time")
    return result
