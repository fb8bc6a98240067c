"""Does `git perf check REV --collect` find real slowdowns in a real program, and nothing else?

On Lua 5.4 (bench/realworld.py's sources, ~30k lines of C) with the workload bench/lua/detect.lua
(~30 ms), or `--script short`: bench/lua/short.lua (~2 ms natively; recursion, a table sort and
`string.upper`, whose time goes mostly into libc's toupper):

1. one full trace gives every function's exact calls per run; stack sampling at 4999 Hz over ten
   native runs gives each function's own (exclusive) native time, and so its native time per call;
2. functions are picked by call frequency (rare <= 100, medium 1e3-1e5, hot >= 1e6 calls a run),
   leaves first (their own time is their whole time), those with the most samples first;
3. for each, a commit injects a busy loop at the function's entry worth +10%, +30%, 2x and 10x of its
   own native time per call, sized by what the loop is measured to add to a call on this machine
   with the same flags (a fixed part plus a part per iteration); the row shows what the chosen loop
   adds, measured again: where the aim is below the loop's fixed part, more than the magnitude;
4. plus A/A commits: comment-only, and code-identical (an unused macro);
5. each commit is checked with defaults: `git perf check HEAD --collect --workload detect --json --all`
   (every check's answer is saved under WORK/checks).

One row per case: function, class, calls, magnitude, own and added ns a call, verdict, rank of the
injected function among the degradations, the change found, rounds, check time.  Usage:

    .venv/bin/python bench/detection.py [--work DIR] [--per-class N] [--aa N] [--magnitudes 0.1,0.3,1,9]
                                        [--script detect|short] [--functions NAME,...]

`--functions` checks the functions named instead of picking by class (e.g. `str_upper`, the
library-heavy one, and `luaH_getshortstr`, a ~20 ns function called in the interpreter's hot loop).
Lua is built with its own flags minus `-march=native` (which emits AVX-512 here, and valgrind, the
instruction witness, cannot run that).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, BccEngine, CollectConfig, table  # noqa: F401  (sets sys.path)

from gitperf.analysis import bindiff, elf
from gitperf.engine import workload
from gitperf.plan.probes import make_plan

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import realworld  # noqa: E402

CFLAGS = "-O2 -Wall -std=c99 -DLUA_USE_LINUX -g -fno-omit-frame-pointer -fno-stack-protector -fno-common"
CONFIG = f"""\
[build]
command = "make -s -j2 CFLAGS='{CFLAGS}' MYLIBS=-ldl lua"
binary = "lua"

[[workload]]
name = "detect"
command = "./lua detect.lua"
timeout = 600
"""
CLASSES = {"rare": (1, 100), "medium": (1e3, 1e5), "hot": (1e6, float("inf"))}
SKIP = {"main", "pmain", "luaV_execute", "luaD_call", "luaD_callnoyield", "luaD_precall", "lua_pcallk",
        "luaD_rawrunprotected", "luaD_pcall", "docall", "dochunk", "handle_script", "ccall"}  # the interpreter's spine


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="b@e", GIT_COMMITTER_NAME="bench",
               GIT_COMMITTER_EMAIL="b@e")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def make_repo(dest: Path, script: str) -> Path:
    realworld.make_history(dest)  # Lua 5.4 in git; the bench starts from its first commit
    git(dest, "reset", "-q", "--hard", "HEAD~1")
    (dest / "detect.lua").write_text((HERE / "lua" / f"{script}.lua").read_text())  # the workload `detect` runs
    (dest / ".gitperf.toml").write_text(CONFIG)
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "detection bench: workload and configuration")
    subprocess.run(["make", "-s", "-j2", f"CFLAGS={CFLAGS}", "MYLIBS=-ldl", "lua"], cwd=dest, check=True,
                   capture_output=True)
    return dest


def _collect(exe: Path, cfg: CollectConfig, argv: list[str]):
    binary = elf.load(exe)
    plan = make_plan(binary, cfg)
    raw = BccEngine().collect(binary, plan, lambda where: workload.run(workload.Command(argv, str(exe.parent)), 600, where),
                              lambda _m: None)
    return plan, raw


def measure(repo: Path, runs: int = 10) -> dict[str, dict]:
    """Per function: calls per run (full trace), own native time per run and per call (stack samples)."""
    exe, argv = repo / "lua", ["./lua", "detect.lua"]
    plan, raw = _collect(exe, CollectConfig(mode="trace"), argv)
    calls = {f.name: r.count for f, r in zip(plan.functions, raw.functions)}
    samples, total, wall = {}, 0, 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=repo, check=True, capture_output=True)
        wall += time.perf_counter() - t0
        splan, sraw = _collect(exe, CollectConfig(mode="stack", stack_hz=4999), argv)
        for f, r in zip(splan.functions, sraw.functions):
            samples[f.name] = samples.get(f.name, 0) + r.stack_samples
        total += sum(r.stack_samples for r in sraw.functions) + sraw.unknown_samples
    native_run = wall / runs * 1e9
    locations = elf.source_locations(exe)
    code = bindiff.read_code(elf.load(exe))
    return {n: {"calls": c, "samples": samples.get(n, 0), "own_ns": samples.get(n, 0) / max(total, 1) * native_run,
                "location": locations.get(n, ""), "leaf": not code.calls.get(n)} for n, c in calls.items() if c}


def pick(stats: dict[str, dict], per_class: int) -> list[tuple[str, str]]:
    out = []
    for cls, (lo, hi) in CLASSES.items():
        # enough samples to size the injection by; a rare function (<= 100 calls) seldom has 20
        need = 10 if cls == "rare" else 20
        cands = [n for n, s in stats.items() if lo <= s["calls"] <= hi and n not in SKIP and s["samples"] >= need
                 and ":" in s["location"]]
        cands.sort(key=lambda n: (not stats[n]["leaf"], -stats[n]["samples"]))
        out += [(cls, n) for n in cands[:per_class]]
    return out


SNIPPET = "{{ volatile unsigned gp_spin_ = 0; while (gp_spin_ < {n}u) gp_spin_++; }}"


def snippet_ns(work: Path, iterations: int) -> float:
    """What the injected busy loop of `iterations` adds to a call, measured in isolation: a function
    holding it against an empty one, called alternately in batches, best of three (the calls are
    chosen for ~0.2 s a batch)."""
    src = work / f"snippet{iterations}.c"
    src.write_text("#include <stdlib.h>\n#include <stdio.h>\n#include <time.h>\n"
                   f"__attribute__((noinline)) void with(void) {{ {SNIPPET.format(n=iterations)} }}\n"
                   "__attribute__((noinline)) void without(void) { __asm__ volatile(\"\"); }\n"
                   "static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
                   " return t.tv_sec * 1e9 + t.tv_nsec; }\n"
                   "int main(int c, char **v) { long n = atol(v[1]); double best = 1e30;\n"
                   "  for (int k = 0; k < 3; k++) { double a = now(); for (long i = 0; i < n; i++) with();\n"
                   "    double b = now(); for (long i = 0; i < n; i++) without(); double e = now();\n"
                   "    if ((b - a) - (e - b) < best) best = (b - a) - (e - b); }\n"
                   "  printf(\"%f\\n\", best / n); return 0; }\n")
    exe = work / f"snippet{iterations}"
    flags = [f for f in CFLAGS.split() if not f.startswith(("-O", "-std"))]  # Lua's, but POSIX's clock_gettime
    subprocess.run(["cc", "-O2", *flags, "-o", str(exe), str(src)], check=True)
    calls = str(int(2e8 / (iterations + 10)))
    return max(float(subprocess.run([str(exe), calls], check=True, capture_output=True, text=True).stdout), 0.0)


def loop_costs(work: Path, most_ns: float) -> dict[int, float]:
    """Iterations -> ns the loop adds to a call, on a geometric grid up to `most_ns`.  The cost is far
    from linear in the iterations (on a 2-vCPU VM: 1 -> 0.3 ns, 10 -> 9 ns, 30 -> 13 ns, 100 -> 33 ns:
    short loops overlap with the call, longer ones pay a mispredicted exit), so each size is measured."""
    out, k = {}, 1
    while True:
        out[k] = snippet_ns(work, k)
        if out[k] >= most_ns:
            return out
        k = max(k + 1, round(k * 1.5))


def size(costs: dict[int, float], aim_ns: float) -> tuple[int, float]:
    """The measured loop whose added time is nearest `aim_ns` (on a log scale): (iterations, ns)."""
    k = min(costs, key=lambda n: abs(math.log(max(costs[n], 0.01) / aim_ns)))
    return k, costs[k]


def inject(repo: Path, location: str, iterations: int) -> None:
    """A busy loop as the first statement of the function defined at `location` (file:line)."""
    name, line = location.rsplit(":", 1)
    path = repo / name
    lines = path.read_text().split("\n")
    i = int(line) - 1
    while "{" not in lines[i]:
        i += 1
    lines.insert(i + 1, f"  {SNIPPET.format(n=iterations)}  /* injected by bench/detection.py */")
    path.write_text("\n".join(lines))


def check(repo: Path) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gitperf", "check", "HEAD", "--collect", "--workload", "detect",
                        "--json", "--all", "-q"], cwd=repo, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if r.returncode not in (0, 1, 3):
        raise SystemExit(f"check failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout), time.perf_counter() - t0


def case(repo: Path, base: str, label: str, change) -> tuple[dict, float]:
    git(repo, "checkout", "-q", "--detach", base)
    change()
    git(repo, "commit", "-q", "-am", label)
    out, secs = check(repo)
    # every check's whole answer, for a row that needs explaining (the table shows only its summary)
    (repo.parent / "checks").mkdir(exist_ok=True)
    (repo.parent / "checks" / f"{label.replace(' ', '_').replace('/', '')}.json").write_text(json.dumps(out, indent=1))
    return out, secs


def row(out: dict, fn: str | None, secs: float) -> list:
    degr = [c for c in out["changes"] if c["type"] == "degradation"]
    rank = next((i + 1 for i, c in enumerate(degr) if c["function"] == fn), "-") if fn else "-"
    found = next((c for c in degr if c["function"] == fn), None) if fn else None
    rel = f"{found['relative']:+.0%}" if found and found["relative"] is not None else "-"
    rounds = out["workloads"][0]["target_profiles"] if out["workloads"] else 0
    opt = sum(c["type"] == "optimization" for c in out["changes"])
    return [out["result"], rank, rel, len(degr), opt, rounds, f"{secs:.0f} s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    ap.add_argument("--per-class", type=int, default=2, help="functions per frequency class")
    ap.add_argument("--aa", type=int, default=10, help="A/A commits (half comment-only, half identical code)")
    ap.add_argument("--magnitudes", default="0.1,0.3,1,9", help="added own native time per call (fractions)")
    ap.add_argument("--script", choices=("detect", "short"), default="detect", help="the Lua workload (bench/lua/)")
    ap.add_argument("--functions", default="", help="comma-separated functions to slow down (default: by class)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-detect-"))
    work.mkdir(parents=True, exist_ok=True)
    repo = make_repo(work / "lua", a.script)
    base = git(repo, "rev-parse", "HEAD")
    stats = measure(repo)
    named = [n for n in a.functions.split(",") if n]
    if any(n not in stats for n in named):
        raise SystemExit(f"not called by {a.script}.lua: {', '.join(n for n in named if n not in stats)}")
    unsampled = [n for n in named if not stats[n]["own_ns"]]
    if unsampled:  # the injection is sized from a function's own time, which its samples give
        raise SystemExit(f"no stack sample of {', '.join(unsampled)} in ten runs of {a.script}.lua: its own time "
                         "is unknown, so no slowdown can be sized for it (try the longer `--script detect`)")
    chosen = [("named", n) for n in named] or pick(stats, a.per_class)
    magnitudes = [float(x) for x in a.magnitudes.split(",")]
    costs = loop_costs(work, max(magnitudes) * max([stats[fn]["own_ns"] / stats[fn]["calls"] for _, fn in chosen],
                                                   default=1.0))
    print(f"# Lua 5.4, workload {a.script}.lua; {len(stats)} functions called; the injected loop, measured: "
          + ", ".join(f"{k} iterations {ns:.1f} ns" for k, ns in list(costs.items())[::4]) + "\n")
    rows = []
    for cls, fn in chosen:
        s = stats[fn]
        per_call = s["own_ns"] / s["calls"]
        for m in magnitudes:
            iters, added = size(costs, m * per_call)
            out, secs = case(repo, base, f"slow down {fn} by {m:g}x", lambda: inject(repo, s["location"], iters))
            rows.append([fn, cls, s["calls"], f"+{m:.0%}" if m < 1 else f"{m + 1:g}x",
                         f"{per_call:.0f}+{added:.0f} ns ({added / per_call:+.0%})", *row(out, fn, secs)])
            print(table(HEADER, rows[-1:]).split("\n")[-1], flush=True)
    files = sorted(p.name for p in repo.glob("l*.c"))
    for k in range(a.aa):
        f = repo / files[k % len(files)]
        text = f"/* detection bench: A/A {k} */\n" if k % 2 == 0 else f"#define GITPERF_AA_{k} 1\n"
        out, secs = case(repo, base, f"A/A {k}", lambda: f.write_text(f.read_text() + text))
        rows.append([f"A/A {'comment' if k % 2 == 0 else 'identical code'}", "-", "-", "-", "-", *row(out, None, secs)])
        print(table(HEADER, rows[-1:]).split("\n")[-1], flush=True)
    print()
    print(table(HEADER, rows))


HEADER = ["function", "class", "calls", "magnitude", "own+added ns/call", "verdict", "rank", "found", "degradations",
          "optimizations", "rounds", "check time"]

if __name__ == "__main__":
    main()
