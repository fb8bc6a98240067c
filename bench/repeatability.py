"""Do re-checks converge? (issue #55 item 4, ARCHITECTURE.md §10 "Three outcomes"): borderline pairs of
real projects, each checked five times in a row at defaults (`git perf check C --collect --base B
--json --all`), the 2nd, 4th and 5th beside two processes keeping both cores busy in bursts.

Pairs (bench/aa.py's projects and its measured busy-loop slowdowns):

* **lua slow30** (C): `internshrstr`, ~20 ns and ~10 instructions of its own a call, 89k calls a run,
  made +30% a call: a small function's +30%, ~+1.5% of the ~30 ms run;
* **indexer slow30** (C++): `Index::add_term` +30% a call (the term indexer of tests/cxxproj.py);
* **ninja slow30** (C++, CMake, templates; `--ninja-src`): `State::GetNode` +30% a call.

Each check after the first adds its rounds to the stored ones (the same kept builds and plan).  Per
pair the bench prints every check's exit code, rounds so far, and for the run as a whole and each
function the commit changed: outcome, change and interval.  It then says whether each rule held:

* an outcome moves only from unresolved (or a withheld `unknown`) to a verdict or to no change (never
  between no change and a verdict, never between opposite verdicts, never back to unresolved); an
  `instructions` outcome is read as its time's (beyond, within or across ±5%);
* the exit code is 1 exactly when the result is a degradation, and never moves from 1 to 0;
* each changed function's interval is no wider than at the check before (5% slack: a spread
  re-estimated from more rounds);
* the changed function is named (listed) in every check.

Usage: .venv/bin/python bench/repeatability.py [--pairs lua,indexer,ninja] [--checks 5]
       [--busy 2,4,5] [--ninja-src URL_OR_PATH] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import neighbour, table  # noqa: F401  (sets sys.path)

import aa  # noqa: E402  (the projects, their sizing and the check command)
import detection  # noqa: E402

from gitperf.checks.change import listed  # noqa: E402
from gitperf.checks.decision import ACROSS, BEYOND, band  # noqa: E402
from gitperf.core.model import ROOT  # noqa: E402
from gitperf.core.names import short  # noqa: E402

VERDICTS = ("degradation", "optimization", "accepted")
THRESHOLD = 0.05  # check.min_relative's default: what an `instructions` outcome's time is read against
WIDTH_SLACK = 1.05


def time_outcome(c: dict) -> str:
    """A change's outcome on time: its type, or for `instructions` its interval against the threshold."""
    if c["type"] != "instructions":
        return c["type"]
    where = band(c["ci_low"] if c["ci_low"] is not None else -1e9, c["ci_high"] if c["ci_high"] is not None else 1e9,
                 THRESHOLD)
    return "unresolved" if where == ACROSS else "beyond" if where == BEYOND else "no-change"


def allowed(before: str, after: str) -> bool:
    """An outcome may stay, or leave an undecided state for a verdict or no change: unresolved, or
    `unknown` (a comparison withheld while the two sides' probe costs differ by more than the measured
    medians allow, which more rounds may settle)."""
    return before == after or before in ("unresolved", "unknown")


def rounds_of(out: dict) -> int:
    return max((w["target_profiles"] for w in out["workloads"]), default=0)


def asked(out: dict) -> dict[str, dict]:
    """The run as a whole and the functions the commit changed, by name."""
    return {c["function"]: c for c in out["changes"] if c["function"] == ROOT or c["changed"]}


def judge(checks: list[dict]) -> list[str]:
    """The rules (module docstring) over one pair's checks, in order: what broke them ("" none)."""
    broken = []
    for i in range(1, len(checks)):
        a, b = checks[i - 1], checks[i]
        for n, c in asked(b).items():
            was = asked(a).get(n)
            if was and not allowed(time_outcome(was), time_outcome(c)):
                broken.append(f"check {i + 1}: {short(n, 40)} {time_outcome(was)} -> {time_outcome(c)}")
            if (was and c["changed"] and None not in (c["ci_low"], was["ci_low"])
                    and c["ci_high"] - c["ci_low"] > WIDTH_SLACK * (was["ci_high"] - was["ci_low"])):
                broken.append(f"check {i + 1}: {short(n, 40)} interval wider "
                              f"({was['ci_high'] - was['ci_low']:.1%} -> {c['ci_high'] - c['ci_low']:.1%})")
        if a["exit_code"] == 1 and b["exit_code"] == 0:
            broken.append(f"check {i + 1}: exit 1 -> 0")
    for i, out in enumerate(checks):
        if (out["exit_code"] == 1) != (out["result"] == "degradation"):
            broken.append(f"check {i + 1}: exit {out['exit_code']} with result {out['result']}")
        if not any(c["changed"] and listed(c["type"], True) for c in out["changes"]):
            broken.append(f"check {i + 1}: no changed function named")
    return broken


def cell(c: dict | None) -> str:
    if c is None:
        return "-"
    if c["ci_low"] is None:
        return c["type"]
    return f"{c['type']} {c['relative']:+.1%} [{c['ci_low']:+.1%}, {c['ci_high']:+.1%}]"


def pair(name: str, p: aa.Project, work: Path, n_checks: int, busy: set[int]) -> tuple[list[list], list[str]]:
    repo = p.make(work)
    base = aa.git(repo, "rev-parse", "HEAD")
    calls, per_call, native_s, how = aa.inclusive_per_call(p, repo)
    change, what = aa.slowdown(p, 0.3, per_call, detection.loop_costs(work, 2 * per_call))
    print(f"# {name}: {short(p.hot, 60)} {calls:,.0f} calls a run, {per_call:.0f} ns a call (from {how}), run "
          f"{native_s * 1e3:.0f} ms; slow30 adds {what} (~{calls * 0.3 * per_call / (native_s * 1e9):+.1%} of the run)",
          flush=True)
    commit = aa.commit_case(repo, base, "bench case slow30", change)
    rows, outs = [], []
    for k in range(1, n_checks + 1):
        hood = "two" if k in busy else "quiet"
        with neighbour(hood):
            out, secs = aa.check(repo, commit, base, p.workload)
        outs.append(out)
        (work / f"{name}-check{k}.json").write_text(json.dumps(out, indent=1))
        fns = asked(out)
        changed = [c for n, c in fns.items() if n != ROOT]
        rows.append([name, k, hood, out["exit_code"], out["result"], rounds_of(out), cell(fns.get(ROOT)),
                     "; ".join(f"{short(c['function'], 30)}: {cell(c)}" for c in changed) or "-", f"{secs:.0f} s"])
        print(table(HEADER, rows[-1:]).split("\n")[-1], flush=True)
    return rows, judge(outs)


HEADER = ["pair", "check", "neighbour", "exit", "result", "rounds", "the run", "changed functions", "time"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", default="lua,indexer,ninja")
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--busy", default="2,4,5", help="which checks (1-based) run beside two busy neighbours")
    ap.add_argument("--ninja-src", default=aa.NINJA_URL)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-repeat-"))
    work.mkdir(parents=True, exist_ok=True)
    projects = {"lua": aa.lua, "indexer": aa.indexer, "ninja": lambda: aa.ninja(a.ninja_src)}
    rows, verdicts = [], {}
    for name in a.pairs.split(","):
        got, broken = pair(name, projects[name](), work, a.checks, {int(x) for x in a.busy.split(",") if x})
        rows += got
        verdicts[name] = broken
    print()
    print(table(HEADER, rows))
    print("\nrules (outcomes move only out of unresolved; exit follows; intervals narrow; the function named):")
    for name, broken in verdicts.items():
        print(f"  {name:8s} " + ("held" if not broken else "BROKEN: " + "; ".join(broken)))


if __name__ == "__main__":
    main()
