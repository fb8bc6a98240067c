"""Evaluation of the optimization pipelines and methods (the thesis' Table D layout), and the
precision / recall of diff tracing's "changed" per criterion.

For the demo history (workload small, the slowdown commit) and for Lua 5.4 (bench/realworld.py:
workload bench, the commit that slows down addfield), each row is one collection of the changed
commit; statistics come from the parent's profile (collected first with --pipeline none).

    .venv/bin/python bench/pipelines.py [--project demo|lua|both] [--no-methods] [--work DIR]

Columns: PL probe locations, PLR reached, PT profiling time, PRT program run time, RDV raw data,
PS profile size, HC hotspot coverage, TLC top-level coverage, models = functions whose best
regression model is reliable (R² >= 0.5), slowed = the changed function was probed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "examples" / "demo"))

from _common import table  # noqa: E402

from gitperf.analysis import callgraph, difftrace, elf
from gitperf.core.fmt import fmt_bytes  # noqa: E402
from gitperf.git import sourcediff  # noqa: E402
from gitperf.git.repo import open_repo  # noqa: E402
from gitperf.plan.pipelines import METHODS  # noqa: E402
from gitperf.stats import models
from gitperf.store.notes import NotesStore

ENV = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def cli(root: Path, *args: str) -> dict:
    r = subprocess.run(["git", "perf", *args], cwd=root, capture_output=True, text=True, env=ENV)
    if r.returncode not in (0, 1):
        raise SystemExit(f"git perf {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def reliable_models(root: Path, profile_id: str) -> int:
    sp = NotesStore(open_repo(root)).find(profile_id)
    n = 0
    for f in sp.profile.functions:
        if len(f.series) >= 10:
            xs, ys = [o for o, _ in f.series], [d for _, d in f.series]
            if len(set(xs)) > 2 and models.best_regression(xs, ys).reliable:
                n += 1
    return n


def evaluate(root: Path, commits: list[str], workload: str, slowed: str, with_methods: bool) -> str:
    cli(root, "collect", commits[-2], "--workload", workload, "--json", "-q")  # statistics for the next run
    rows = []
    configs = [("none", [])] + [(p, ["--pipeline", p]) for p in ("basic", "advanced", "full")]
    if with_methods:
        configs += [(f"+{m}", ["--optimization-on", m]) for m in METHODS]
    base = None
    for label, args in configs:
        print(f"  {label} ...", file=sys.stderr, flush=True)
        out = cli(root, "collect", commits[-1], "--workload", workload, "--json", "-q", *args)
        p = out["profiles"][0]
        m = p["metrics"]
        base = base or m
        rows.append([label, m["PL"], m["PLR"], f"{m['PT']:.2f}", f"{m['PRT']:.3f}", f"{m['PT'] / base['PT']:.2f}",
                     fmt_bytes(m["RDV"]), fmt_bytes(m["PS"]), f"{m['HC']:.1%}", f"{m['TLC']:.1%}",
                     reliable_models(root, p["id"]), "yes" if slowed in p["plan"]["probed"] else "NO"])
    return table(["pipeline / method", "PL", "PLR", "PT s", "PRT s", "PT/none", "RDV", "PS", "HC", "TLC", "models",
                  "slowed"], rows)


def precision_recall(root: Path, commits: list[str], truth: dict[int, set[str]], cache: Path) -> str:
    """Diff tracing per criterion (and the raw source hunks) against the ground truth."""
    repo = open_repo(root)
    builds = []
    for c in commits:
        d = Path(tempfile.mkdtemp(prefix="gitperf-pr-"))
        subprocess.run(["git", "worktree", "add", "-f", "-q", str(d / "w"), c], cwd=root, check=True)
        subprocess.run(["make", "-s"], cwd=d / "w", check=True, capture_output=True)
        info = elf.load(d / "w" / "wordstat")
        builds.append((info, callgraph.load(info.path, info.build_id, cache, lambda m: None),
                       elf.source_locations(info.path)))
    rows = []
    for crit in ("source hunks",) + callgraph.CRITERIA:
        tp = fp = fn = 0
        for i in range(1, len(commits)):
            if crit == "source hunks":
                pred = sourcediff.changed_functions(repo, commits[i - 1], commits[i], builds[i][2])
            else:
                d = difftrace.diff(builds[i - 1][1], builds[i][1], crit)
                pred = set(d.changed) | set(d.new) | set(d.renamed_changed)
            tp += len(pred & truth[i])
            fp += len(pred - truth[i])
            fn += len(truth[i] - pred)
        prec = tp / (tp + fp) if tp + fp else 1.0
        rec = tp / (tp + fn) if tp + fn else 1.0
        rows.append([crit, tp, fp, fn, f"{prec:.2f}", f"{rec:.2f}"])
    return table(["criterion", "TP", "FP", "FN", "precision", "recall"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--project", choices=("demo", "lua", "both"), default="both")
    ap.add_argument("--no-methods", action="store_true", help="only the pipelines, not each method alone")
    ap.add_argument("--work", type=Path, help="keep the repositories here (default: a temporary directory)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-bench-"))
    if a.project in ("demo", "both"):
        import make_history
        root = work / "wordstat"
        if root.exists():
            shutil.rmtree(root)
        commits = make_history.build(root)
        print("## demo (wordstat), workload small, slowdown commit\n")
        print(evaluate(root, commits[:4], "small", "checksum_block", not a.no_methods))
        print("\n## diff tracing on the demo history: 'changed' against the ground truth (make_history.CHANGED)\n")
        print(precision_recall(root, commits, make_history.CHANGED, work))
    if a.project in ("lua", "both"):
        import realworld
        root = work / "lua"
        commits = realworld.make_history(root)
        print("\n## Lua 5.4, workload bench, the addfield slowdown commit\n")
        print(evaluate(root, commits, "bench", "addfield", not a.no_methods))


if __name__ == "__main__":
    main()
