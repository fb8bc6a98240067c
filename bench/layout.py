"""Placement and noise: what function alignment, layout randomisation and duet runs would change in a
check (issue #33 item 6, ARCHITECTURE.md §10e).

The same three real projects as bench/aa.py (ninja C++, Lua C, the term indexer C++), timed as plain
runs of real builds (wall time, no probes: the effects measured here are the program's own, and a
check's rounds time the same binaries).  Three questions:

1. **Placement**: a harmless commit (`unused` function, `moved` function, `reordered` link, one `nop`)
   moves code; how far does the program's time move?  Each case built as the project builds, then with
   `-falign-functions=64` added (every function starts on a cache line, so its loops keep their
   alignment whatever moves before it).  Printed: the case's time / the base's, median of R rounds
   each running every binary once in a random order, with a bootstrap 95% interval.
2. **Layout randomisation** (Stabilizer, ASPLOS 2013, randomises at run time; here at link time): the
   base commit compiled once with `-ffunction-sections` and linked K times by gold, each with its
   functions in another random order (`--section-ordering-file`).  Printed: each layout's time / the
   median layout's; the spread is the bias one fixed layout can carry, which randomising the layout
   per round would turn into noise — worth it only if it is large beside the placement of item 1.
3. **Duet** (Bulej et al., ICPE 2020): A/A (the base binary against a copy) and A/B (ninja's
   f1a2f421 revert, the indexer's std::map), N pairs run one after the other (what a check's rounds
   do) or at once, each pinned to its own core; quiet and beside bench/aa.py's bursty neighbours.
   Printed: B/A, median of pairs, bootstrap 95% interval and its width.

Usage:

    .venv/bin/python bench/layout.py [--projects ninja,lua,indexer] [--ninja-src PATH] [--rounds 40]
                                     [--layouts 6] [--pairs 40] [--neighbours quiet,two] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aa  # noqa: E402  (the projects, their harmless cases, the neighbours)
from _common import table

CASES = ("unused", "moved", "reordered", "nop")
COMPILERS = ("cc", "gcc", "c++", "g++")

# The compilers every build here goes through: frame pointers as a check's build has them, plus
# LAYOUT_ALIGN / LAYOUT_SEED from the environment.  Written as a file (a build calls it by name).
WRAPPER = r'''#!{python}
import os, random, re, subprocess, sys
real = "/usr/bin/" + os.path.basename(sys.argv[0])
args, extra = sys.argv[1:], ["-fno-omit-frame-pointer"]
align, seed = os.environ.get("LAYOUT_ALIGN"), os.environ.get("LAYOUT_SEED")
if align:
    extra.append("-falign-functions=" + align)
if seed:
    extra.append("-ffunction-sections")
    if "-o" in args and not {{"-c", "-S", "-E"}} & set(args):  # a link: every function section, shuffled
        names = set()
        for a in args:
            if a.endswith((".o", ".a")) and os.path.exists(a):
                out = subprocess.run(["readelf", "-SW", a], capture_output=True, text=True).stdout
                names.update(re.findall(r"\]\s+(\.text\.\S+)", out))
        order = sorted(names)
        random.Random(int(seed)).shuffle(order)
        path = os.path.abspath(args[args.index("-o") + 1]) + ".order"
        with open(path, "w") as f:
            f.write("\n".join(order) + "\n")
        extra += ["-fuse-ld=gold", "-Wl,--section-ordering-file=" + path]
os.execv(real, [real, *extra, *args])
'''


def wrappers(work: Path) -> Path:
    d = work / "wrap"
    d.mkdir(parents=True, exist_ok=True)
    for name in COMPILERS:
        (d / name).write_text(WRAPPER.format(python=sys.executable))
        (d / name).chmod(0o755)
    return d


def build(p: aa.Project, repo: Path, wrap: Path, *, clean: bool, **env: str) -> None:
    """The project's own build, through the wrappers; `clean` first when the flags change."""
    e = dict(os.environ, PATH=f"{wrap}:{os.environ['PATH']}", LAYOUT_ALIGN=env.get("align", ""),
             LAYOUT_SEED=env.get("seed", ""))
    if p.name == "ninja":
        if clean:
            shutil.rmtree(repo / "build", ignore_errors=True)
        cmd = aa.NINJA_CONFIG.split('"')[1]
    elif p.name == "lua":
        cmd = f"make -s -j2 'CFLAGS={aa.detection.CFLAGS}' MYLIBS=-ldl lua"
    else:
        cmd = "make -s"
    if clean and p.name != "ninja":
        subprocess.run(["sh", "-c", "rm -f *.o *.a " + p.exe], cwd=repo, check=True)
    subprocess.run(["sh", "-c", cmd], cwd=repo, env=e, check=True, capture_output=True)


def keep(repo: Path, p: aa.Project, bins: Path, label: str) -> Path:
    dest = bins / p.name / label
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(repo / p.exe, dest)
    return dest


def run_once(argv: list[str], cwd: Path, exe: Path, cpu: int | None = None) -> subprocess.Popen:
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    return subprocess.Popen([str(exe), *argv[1:]], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=pin)


def timed(argv: list[str], cwd: Path, exe: Path) -> float:
    t0 = time.perf_counter()
    if run_once(argv, cwd, exe).wait():
        raise SystemExit(f"{exe} failed")
    return time.perf_counter() - t0


def together(argv: list[str], cwd: Path, a: Path, b: Path, flip: bool) -> tuple[float, float]:
    """Both binaries started at once, each pinned to its own core (swapped every other pair); each
    one's wall time read by a thread waiting on it alone (os.wait would reap the neighbours too)."""
    ends: dict[str, float] = {}

    def run(key: str, exe: Path, cpu: int) -> None:
        t0 = time.perf_counter()  # each its own start: the other's fork is not its time
        ends[key] = time.perf_counter() - t0 if run_once(argv, cwd, exe, cpu).wait() == 0 else float("nan")

    waits = [threading.Thread(target=run, args=(k, exe, cpu)) for k, exe, cpu in (("a", a, int(flip)), ("b", b, int(not flip)))]
    for w in waits:
        w.start()
    for w in waits:
        w.join()
    if any(v != v for v in ends.values()):
        raise SystemExit("a duet run failed")
    return ends["a"], ends["b"]


def interval(ratios: list[float], resamples: int = 2000) -> tuple[float, float, float]:
    """Median ratio and its percentile-bootstrap 95% interval (seeded: the same data, the same text)."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return statistics.median(ratios), meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f}%"


def show(m: float, lo: float, hi: float) -> str:
    return f"{pct(m)} [{pct(lo)}, {pct(hi)}]"


def rounds(argv: list[str], cwd: Path, exes: dict[str, Path], n: int) -> dict[str, list[float]]:
    """n rounds, each running every binary once in a random order: wall seconds per binary."""
    rng, times = random.Random(7), {k: [] for k in exes}
    for _ in range(n):
        for k in rng.sample(list(exes), len(exes)):
            times[k].append(timed(argv, cwd, exes[k]))
    return times


def placement(p: aa.Project, repo: Path, wrap: Path, bins: Path, n: int) -> list[list[str]]:
    base = aa.git(repo, "rev-parse", "HEAD")
    changes = {c: p.cases[c] for c in CASES if c in p.cases}
    changes["nop"] = aa.nop(p)
    commits = {c: aa.commit_case(repo, base, f"layout case {c}", f) for c, f in changes.items()}
    rows, argv = [], aa.workload_argv(repo, p)
    for align in ("", "64"):
        label = f"-falign-functions={align}" if align else "as the project builds"
        aa.git(repo, "checkout", "-q", "--detach", base)
        build(p, repo, wrap, clean=True, align=align)
        exes = {"base": keep(repo, p, bins, f"base{align}")}
        for c, commit in commits.items():
            aa.git(repo, "checkout", "-q", "--detach", commit)
            build(p, repo, wrap, clean=False, align=align)
            exes[c] = keep(repo, p, bins, f"{c}{align}")
        aa.git(repo, "checkout", "-q", "--detach", base)
        times = rounds(argv, repo, exes, n)
        for c in commits:
            m, lo, hi = interval([t / b for t, b in zip(times[c], times["base"])])
            rows.append([p.name, label, c, show(m, lo, hi), "yes" if lo > 1 or hi < 1 else "no"])
            print(table(PLACE, rows[-1:]).split("\n")[-1], flush=True)
    return rows


def layouts(p: aa.Project, repo: Path, wrap: Path, bins: Path, k: int, n: int) -> list[list[str]]:
    build(p, repo, wrap, clean=True, seed="1")
    exes = {}
    for seed in range(1, k + 1):
        (repo / p.exe).unlink()
        build(p, repo, wrap, clean=False, seed=str(seed))  # objects kept: a relink in another order
        exes[f"layout {seed}"] = keep(repo, p, bins, f"layout{seed}")
    times = rounds(aa.workload_argv(repo, p), repo, exes, n)
    meds = {s: statistics.median(t) for s, t in times.items()}
    mid = sorted(meds, key=meds.get)[len(meds) // 2]
    rows = []
    for s in exes:
        m, lo, hi = interval([t / b for t, b in zip(times[s], times[mid])])
        rows.append([p.name, s, show(m, lo, hi), f"{meds[s] * 1e3:.1f} ms"])
        print(table(LAYOUT, rows[-1:]).split("\n")[-1], flush=True)
    spread = max(meds.values()) / min(meds.values())
    rows.append([p.name, "spread (slowest / fastest)", pct(spread), ""])
    return rows


AB = {"ninja": "revert", "indexer": "map"}


def duet(p: aa.Project, repo: Path, wrap: Path, bins: Path, pairs: int, hoods: list[str]) -> list[list[str]]:
    base = aa.git(repo, "rev-parse", "HEAD")
    build(p, repo, wrap, clean=True)
    a = keep(repo, p, bins, "duet-a")
    sides = {"A/A": shutil.copy2(a, bins / p.name / "duet-a2")}
    if p.name in AB:
        aa.git(repo, "checkout", "-q", "--detach", aa.commit_case(repo, base, "layout duet B", p.cases[AB[p.name]]))
        build(p, repo, wrap, clean=False)
        sides[f"A/B ({AB[p.name]})"] = keep(repo, p, bins, "duet-b")
        aa.git(repo, "checkout", "-q", "--detach", base)
    argv, rows = aa.workload_argv(repo, p), []
    for hood in hoods:
        for what, b in sides.items():
            for mode in ("one after the other", "duet"):
                ratios = []
                with aa.neighbour(hood):
                    for i in range(pairs):
                        if mode == "duet":
                            ta, tb = together(argv, repo, a, Path(b), flip=i % 2 == 1)
                        else:
                            order = (a, Path(b)) if i % 2 == 0 else (Path(b), a)
                            t = [timed(argv, repo, x) for x in order]
                            ta, tb = (t[0], t[1]) if i % 2 == 0 else (t[1], t[0])
                        ratios.append(tb / ta)
                m, lo, hi = interval(ratios)
                rows.append([p.name, hood, what, mode, show(m, lo, hi), f"{(hi - lo) * 100:.1f} pts"])
                print(table(DUET, rows[-1:]).split("\n")[-1], flush=True)
    return rows


PLACE = ["project", "build", "case", "time / base [95%]", "interval excludes 0"]
LAYOUT = ["project", "layout", "time / median layout [95%]", "median run"]
DUET = ["project", "neighbour", "pair", "runs", "B / A [95%]", "interval width"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default="ninja,lua,indexer")
    ap.add_argument("--parts", default="placement,layouts,duet")
    ap.add_argument("--rounds", type=int, default=40, help="rounds of plain runs (placement, layouts)")
    ap.add_argument("--layouts", type=int, default=6, help="random function orders linked")
    ap.add_argument("--pairs", type=int, default=40, help="pairs of runs for each duet row")
    ap.add_argument("--neighbours", default="quiet,two")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--ninja-src", default=aa.NINJA_URL)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-layout-"))
    wrap, bins, parts = wrappers(work), work / "bins", a.parts.split(",")
    projects = {"ninja": lambda: aa.ninja(a.ninja_src), "lua": aa.lua, "indexer": aa.indexer}
    out: dict[str, list] = {"placement": [], "layouts": [], "duet": []}
    for name in a.projects.split(","):
        p = projects[name]()
        repo = p.make(work)
        if "placement" in parts:
            out["placement"] += placement(p, repo, wrap, bins, a.rounds)
        if "layouts" in parts:
            out["layouts"] += layouts(p, repo, wrap, bins, a.layouts, a.rounds)
        if "duet" in parts:
            out["duet"] += duet(p, repo, wrap, bins, a.pairs, a.neighbours.split(","))
    for part, header in (("placement", PLACE), ("layouts", LAYOUT), ("duet", DUET)):
        if out[part]:
            print(f"\n## {part}\n\n{table(header, out[part])}")


if __name__ == "__main__":
    main()
