"""`git perf check C --collect` against what a developer would run instead (issue #57 item 1), on the
same commits in one run, each from a fresh clone:

* **git perf**: `git perf check C --collect --base B --workload W --json` (both builds, its rounds, the
  instruction witness), timed from its start to its end;
* **the alternative**: both sides built with the project's own build command (each in its own clone),
  `hyperfine --warmup 2 --runs 20` of the two workloads, `perf record -g -F 999` of five runs a side,
  and each side's `perf report --no-children --sort sym`, compared symbol by symbol as `perf diff` does
  (the change of each symbol's share of its side's samples).

Per commit the bench prints both times and their ratio, and what each said: git perf's result and the
first function with the expected verdict; hyperfine's direction (Welch's t of its 20 + 20 runs beyond
2.6, ~99%) and the symbol whose share moved most the expected way.  A change is **located** when the
tool says the expected direction and names one of the functions the change lives in (`Case.where`); a
harmless commit is a **false alarm** when git perf gives any function a time verdict, or hyperfine
tells the two builds apart.  It also prints the share of each check's wall time the instruction
witness took: from its progress line to the next (its callgrind runs, before the rounds).

Projects (bench/aa.py's, and zlib): lua (C, slow2x: a busy loop sized to double internshrstr's
inclusive time a call), indexer (C++, its `map` case), ninja (C++, CMake, `revert`: emhash8 undone,
`--ninja-src`), zlib (C, CMake, `libz.so.1` of its own: f8719f5 "Speed up software CRC-32 computation by
a factor of 1.5 to 3" against its parent, minigzip decompressing 30 MB; `--zlib-src`).  Each also
gets `comment` (a comment above the hot function).

Usage: .venv/bin/python bench/alternative.py [--projects lua,indexer,zlib,ninja] [--cases comment,change]
       [--neighbour quiet|one|two] [--ninja-src URL_OR_PATH] [--zlib-src URL_OR_PATH] [--work DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from _common import ROOT, neighbour, table  # noqa: F401  (sets sys.path)

import aa  # noqa: E402  (the projects and their cases)
import detection  # noqa: E402

from gitperf.core.names import readable  # noqa: E402

HYPERFINE_RUNS = 20
PERF_RUNS = 5  # workload runs under `perf record` a side
PERF_HZ = 999
T_DECIDES = 2.6  # |Welch t| beyond which hyperfine's two means are read as different (~99%)


@dataclass
class Case:
    project: str
    label: str
    repo: Path  # the prepared repository the clones come from
    commit: str
    base: str
    workload: str
    expected: str  # "degradation", "optimization", or "" (harmless)
    where: tuple[str, ...]  # readable-name fragments of the functions the change lives in


# ---------------------------------------------------------------- zlib (C, its own shared library)

ZLIB_URL = "https://github.com/madler/zlib"
ZLIB_COMMIT = "f8719f5ae5acdc31d3794ddfea8ac963359de41e"  # "Speed up software CRC-32 computation by a factor of 1.5 to 3."
ZLIB_CONFIG = """\
[build]
command = "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null && cmake --build build -j2 --target minigzip > /dev/null"
binary = "build/minigzip"

[[workload]]
name = "inflate"
command = "./build/minigzip -d -c < {data} > /dev/null"
timeout = 300
"""


def zlib_cases(work: Path, src: str, cases: list[str]) -> list[Case]:
    """zlib at f8719f5's parent with a configuration, and f8719f5 itself cherry-picked onto it: the
    author's CRC-32 speedup read as a commit to check (an optimization in `crc32_z`, in libz.so.1)."""
    data = work / "zlib-data.gz"
    if not data.exists():  # ~30 MB of words, compressed: minigzip -d spends its time in inflate and crc32
        rng = random.Random(7)
        words = ["".join(rng.choice("etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
        text = " ".join(rng.choice(words) for _ in range(5_000_000)).encode()
        data.write_bytes(gzip.compress(text, 6))
    repo = aa.pinned(work, "zlib", src, ZLIB_COMMIT + "~1")
    aa.adopted(repo, ZLIB_CONFIG.format(data=data), "bench: git perf configuration")
    base = aa.git(repo, "rev-parse", "HEAD")
    aa.git(repo, "cherry-pick", ZLIB_COMMIT)
    change = aa.git(repo, "rev-parse", "HEAD")
    comment = aa.commit_case(repo, base, "bench case comment", lambda r: aa.edit(
        r / "crc32.c", "unsigned long ZEXPORT crc32_z(", "/* the CRC of a buffer */\nunsigned long ZEXPORT crc32_z("))
    return ([Case("zlib", "comment", repo, comment, base, "inflate", "", ())] if "comment" in cases else []) + (
        [Case("zlib", "f8719f5", repo, change, base, "inflate", "optimization", ("crc32",))] if "change" in cases else [])


# ---------------------------------------------------------------- the other projects: bench/aa.py's

WHERE = {"lua": ("internshrstr",), "indexer": ("Index::add_term", "Index::find", "std::_Rb_tree", "std::map"),
         "ninja": ("State::GetNode", "State::LookupNode", "std::_Hashtable", "std::__detail", "unordered_map")}


def aa_cases(work: Path, p: aa.Project, cases: list[str]) -> list[Case]:
    repo = p.make(work)
    base = aa.git(repo, "rev-parse", "HEAD")
    out = [Case(p.name, "comment", repo, aa.commit_case(repo, base, "bench case comment", p.cases["comment"]), base,
                p.workload, "", ())] if "comment" in cases else []
    if "change" not in cases:
        return out
    if p.name == "lua":  # no documented change: a busy loop doubling the hot function's time a call
        _calls, per_call, _native, _how = aa.inclusive_per_call(p, repo)
        change, label = aa.slowdown(p, 1.0, per_call, detection.loop_costs(work, 2 * per_call))[0], "slow2x"
    else:
        label = "map" if p.name == "indexer" else "revert"
        change = p.cases[label]
    commit = aa.commit_case(repo, base, f"bench case {label}", change)
    return out + [Case(p.name, label, repo, commit, base, p.workload, "degradation", WHERE[p.name])]


# ---------------------------------------------------------------- the two ways


def fresh_clone(repo: Path, at: str, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "-c", "advice.detachedHead=false", "clone", "-q", str(repo), str(dest)], check=True)
    aa.git(dest, "checkout", "-q", "--detach", at)
    return dest


def git_perf(case: Case, work: Path) -> tuple[dict, float, float]:
    """The check from a fresh clone: its stored result (JSON), seconds, and the seconds from each of its
    witness lines to the progress line after it (its progress, one line a message where stderr is no
    terminal; `--json` has none): the witness runs before a workload's rounds."""
    clone = fresh_clone(case.repo, case.commit, work / "gp")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gitperf", "check", case.commit, "--collect", "--base", case.base,
                             "--workload", case.workload], cwd=clone, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    witness, spent = None, 0.0
    for line in proc.stderr:
        if witness is not None:  # the line after the witness's: its runs are over (the rounds follow)
            spent, witness = spent + time.perf_counter() - witness, None
        if "instruction witness: callgrind" in line:
            witness = time.perf_counter()
    proc.wait()
    end = time.perf_counter()
    spent += (end - witness) if witness is not None else 0.0
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"git perf check of {case.project} {case.label} failed (exit {proc.returncode})")
    out = subprocess.run([sys.executable, "-m", "gitperf", "check", case.commit, "--base", case.base, "--workload",
                          case.workload, "--json"], cwd=clone, capture_output=True, text=True, env=env).stdout
    return json.loads(out), end - t0, spent


def _config(clone: Path, workload: str) -> tuple[str, str]:
    cfg = tomllib.loads((clone / ".gitperf.toml").read_text())
    return cfg["build"]["command"], next(w["command"] for w in cfg["workload"] if w["name"] == workload)


def _perf_shares(clone: Path, command: str) -> dict[str, float]:
    """`perf record -g` of PERF_RUNS runs, then `perf report`: each user-space symbol's share of the samples."""
    data = clone / "perf.data"
    runs = "; ".join([command] * PERF_RUNS)
    subprocess.run(["perf", "record", "-q", "-g", "-F", str(PERF_HZ), "-o", str(data), "--", "sh", "-c", runs],
                   cwd=clone, check=True, capture_output=True)
    r = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "sym", "-g", "none",
                        "--percent-limit", "0"], cwd=clone, check=True, capture_output=True, text=True)
    shares = {}
    for m in re.finditer(r"^\s+([\d.]+)%\s+\[\.\]\s+(.+?)\s*$", r.stdout, re.M):
        shares[m.group(2)] = shares.get(m.group(2), 0.0) + float(m.group(1)) / 100
    return shares


def alternative(case: Case, work: Path) -> dict:
    """Builds of both sides, hyperfine, perf record of each, and the symbols' shares compared."""
    sides = {"A": fresh_clone(case.repo, case.base, work / "alt-base"),
             "B": fresh_clone(case.repo, case.commit, work / "alt-target")}
    t0 = time.perf_counter()
    for clone in sides.values():
        build, _ = _config(clone, case.workload)
        subprocess.run(build, shell=True, cwd=clone, check=True, capture_output=True)
    built = time.perf_counter() - t0
    commands = {k: f"cd {shlex.quote(str(c))} && {_config(c, case.workload)[1]}" for k, c in sides.items()}
    export = work / "hyperfine.json"
    subprocess.run(["hyperfine", "--warmup", "2", "--runs", str(HYPERFINE_RUNS),
                    "--export-json", str(export), commands["A"], commands["B"]], check=True, capture_output=True)
    a, b = (r["times"] for r in json.loads(export.read_text())["results"])
    shares = {k: _perf_shares(c, _config(c, case.workload)[1]) for k, c in sides.items()}
    secs = time.perf_counter() - t0
    moved = {s: shares["B"].get(s, 0.0) - shares["A"].get(s, 0.0) for s in {*shares["A"], *shares["B"]}}
    sign = -1 if case.expected == "optimization" else 1
    top = max(moved, key=lambda s: sign * moved[s]) if moved else "-"
    t = (statistics.mean(b) - statistics.mean(a)) / math.sqrt(statistics.variance(a) / len(a) +
                                                                statistics.variance(b) / len(b))
    return {"seconds": secs, "builds": built, "ratio": statistics.mean(b) / statistics.mean(a), "t": t,
            "top": readable(top), "top_moved": moved.get(top, 0.0)}


# ---------------------------------------------------------------- reading what each said


def hyperfine_says(alt: dict) -> str:
    if abs(alt["t"]) < T_DECIDES:
        return f"same ({alt['ratio'] - 1:+.1%})"
    return f"{'slower' if alt['t'] > 0 else 'faster'} ({alt['ratio'] - 1:+.1%})"


def located_by_git_perf(out: dict, case: Case) -> tuple[bool, str]:
    timed, result, first, _rounds = aa.summarise(out, case.expected or "degradation")
    if not case.expected:
        return not timed, f"{result}, {timed} time verdict(s)"
    return result == case.expected and any(w in first for w in case.where), f"{result}: {first[:40]}"


def located_by_alternative(alt: dict, case: Case) -> tuple[bool, str]:
    said = hyperfine_says(alt)
    if not case.expected:
        return abs(alt["t"]) < T_DECIDES, said
    right = (alt["t"] > T_DECIDES) if case.expected == "degradation" else (alt["t"] < -T_DECIDES)
    return right and any(w in alt["top"] for w in case.where), f"{said}; perf: {alt['top'][:40]} {alt['top_moved']:+.1%}"


HEADER = ["project", "case", "git perf s", "alternative s", "ratio", "witness share", "git perf", "located",
          "alternative", "located"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default="lua,indexer,zlib")
    ap.add_argument("--cases", default="comment,change")
    ap.add_argument("--neighbour", default="quiet", choices=["quiet", "one", "two"])
    ap.add_argument("--ninja-src", default=aa.NINJA_URL)
    ap.add_argument("--zlib-src", default=ZLIB_URL)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-alt-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = a.cases.split(",")
    projects = {"lua": lambda: aa_cases(work, aa.lua(), cases), "indexer": lambda: aa_cases(work, aa.indexer(), cases),
                "ninja": lambda: aa_cases(work, aa.ninja(a.ninja_src), cases),
                "zlib": lambda: zlib_cases(work, a.zlib_src, cases)}
    rows, ratios = [], []
    for name in a.projects.split(","):
        for case in projects[name]():
            with neighbour(a.neighbour):
                out, secs, witness = git_perf(case, work)
                alt = alternative(case, work)
            ok_gp, said_gp = located_by_git_perf(out, case)
            ok_alt, said_alt = located_by_alternative(alt, case)
            ratios.append(secs / alt["seconds"])
            rows.append([name, case.label, f"{secs:.0f}", f"{alt['seconds']:.0f} ({alt['builds']:.0f} builds)",
                         f"{ratios[-1]:.2f}x", f"{witness / secs:.0%}", said_gp, "yes" if ok_gp else "NO", said_alt,
                         "yes" if ok_alt else "NO"])
            print(table(HEADER, rows[-1:]).split("\n")[-1], flush=True)
    print()
    print(table(HEADER, rows))
    print(f"\nmedian check time / alternative's: {statistics.median(ratios):.2f}x over {len(ratios)} commit(s) "
          f"(beside: {a.neighbour})")


if __name__ == "__main__":
    main()
