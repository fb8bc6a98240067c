"""Small builders for tests that need profiles without running eBPF."""

from __future__ import annotations

import math
import time
from pathlib import Path

from gitperf.checks.change import NO_CHANGE, UNRESOLVED
from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile, series_fields

NO_VERDICT = (NO_CHANGE, UNRESOLVED)  # the outcomes of a function that are not an alarm


def make_profile(commit: str, workload: str = "w", n_functions: int = 3, seed: int = 0, series: int = 0) -> Profile:
    funcs = tuple(
        FunctionStats(name=f"fn_{i}<int>", count=100 + i + seed, total_ns=10_000 * (i + 1) + seed,
                      exclusive_ns=5_000 * (i + 1), min_ns=10, max_ns=900, hist=(0, 1, 5, 3),
                      **series_fields([(k * 3, 1000 + (k * 37 + i) % 500) for k in range(series)]))
        for i in range(n_functions))
    header = Header(tool_version="test", commit=commit, binary="app", build_id="abc", command=("./app",),
                    workload=workload, engine="bcc", machine="m1", kernel="6.x", started=time.time(),
                    finished=time.time() + seed)
    return Profile(header, Metrics(PL=n_functions, PLR=n_functions), PlanRecord(probed=tuple(f.name for f in funcs)),
                   funcs)


# Brendan Gregg's flamegraph.pl, vendored (its README says why): what the folded output must render with
FLAMEGRAPH_PL = Path(__file__).parent / "vendor" / "FlameGraph" / "flamegraph.pl"


def assert_one_estimate(changes: list[dict]) -> int:
    """The identities every compared function's numbers keep (ARCHITECTURE.md §10, "One estimate per
    number"): after = before x (1 + change), absolute = after - before, the interval brackets the
    change, and a label says what they measure.  Returns how many changes were checked."""
    import math
    checked = 0
    for c in changes:
        if c["type"] in ("new", "removed", "unknown") or c["relative"] is None or c["ci_low"] is None:
            continue
        where = f"{c['function']}: {c}"
        assert math.isclose(c["target_ns"], c["base_ns"] * (1 + c["relative"]), rel_tol=1e-6, abs_tol=1e-3), where
        assert math.isclose(c["absolute_ns"], c["target_ns"] - c["base_ns"], rel_tol=1e-6, abs_tol=1e-3), where
        assert c["ci_low"] - 1e-9 <= c["relative"] <= c["ci_high"] + 1e-9, where
        assert c["measure"], where
        checked += 1
    return checked


# What a check's base and target values may be other than its sides' times a run as `show` prints
# them: a median call, a gain located through a caller, probed time, a value net of the common shift.
NOT_A_SIDES_TIME = ("median call", "located through", "probed time", "net of the common shift")


def assert_one_scale(root: Path, commit: str, base: str) -> int:
    """Issue #55 item 3: the paired check of `commit` against `base` prints each function's base value
    as `show --json`'s session of the base prints it (inclusive, or own where the check compared own
    time), and takes its change from the figures `show` prints of every run: a paired test's change is
    the median over the rounds of log(target run / base run) of the per-run figures whose median the
    session prints (native where it says native); a pooled test's is the ratio of the two sessions'
    figures with the median time on a CPU swapped for the median ratio of the rounds' wall times.  (The
    ratio of the two sessions' medians is another estimator: on a busy runner the indexer's `main` read
    +40.8% as that ratio and +38.9% [+37.2%, +40.6%] as the median of its rounds' ratios.)  In every
    session, a stack-sampled function's own time is within its inclusive, and every function's callees
    that nothing else calls add up to at most its inclusive time (`only_children`; 5%: a traced caller's
    time is probed time less its probes, its callees' shares of the samples).  Returns how many values
    were compared."""
    import json
    from conftest import read_cli
    from gitperf.core import stacks
    from gitperf.git.repo import open_repo
    from gitperf.store.notes import NotesStore
    shown = {c: json.loads(read_cli(root, "show", c, "--json").stdout) for c in (base, commit)}
    [pairing] = ({s["pairing"] for s in shown[commit]["sessions"]} &
                 {s["pairing"] for s in shown[base]["sessions"]} - {""})
    session = {c: {s["workload"]: s for s in shown[c]["sessions"] if s["pairing"] == pairing} for c in (base, commit)}
    compared = 0
    for c in json.loads(read_cli(root, "check", commit, "--json", "--all").stdout)["changes"]:
        if c["type"] in ("new", "removed", "unknown") or any(w in c["measure"] for w in NOT_A_SIDES_TIME):
            continue
        which = "exclusive_ns" if c["measure"].startswith("own time") else "inclusive_ns"
        runs = {x: _rounds(shown[x]["profiles"], session[x][c["workload"]]) for x in (base, commit)}
        fb, ft = ({f["name"]: f for f in session[x][c["workload"]]["functions"]}[c["function"]] for x in (base, commit))
        assert math.isclose(c["base_ns"], fb[which], rel_tol=1e-6), (c, fb)
        if c["noise"].startswith("paired rounds"):
            change = _median_round_ratio(runs[commit], runs[base], c["function"], fb["native"])
        else:
            assert c["noise"].startswith("pooled samples"), c
            assert which == "inclusive_ns", c
            change = math.log(ft[which] / fb[which]) - _cpu_log_ratio(runs[commit], runs[base])
        assert math.isclose(change, math.log1p(c["relative"]), rel_tol=1e-9, abs_tol=1e-9), (math.expm1(change), c)
        compared += 1
    store = NotesStore(open_repo(root))
    for c in (base, commit):
        for s in shown[c]["sessions"]:
            for f in s["functions"]:
                assert f["inclusive_ns"] is None or f["exclusive_ns"] <= f["inclusive_ns"] * (1 + 1e-9) or \
                    not f["sampled"], f
            held = stacks.merge(p.profile.stacks for p in store.read(c)[0] if p.id in s["profiles"])
            timed = {f["name"]: f["inclusive_ns"] for f in s["functions"] if f["inclusive_ns"]}
            for caller, callees in only_children(held, timed).items():
                assert sum(timed[n] for n in callees) <= 1.05 * timed[caller], (c, caller, {n: timed[n] for n in callees})
    return compared


def _rounds(profiles: list[dict], session: dict) -> dict[int, dict]:
    """A session's runs as `show --json` prints them, by round."""
    return {p["plan"]["round"]: p for p in profiles if p["id"] in session["profiles"]}


def _median_round_ratio(target: dict[int, dict], base: dict[int, dict], name: str, native: bool) -> float:
    """The median over the rounds of log(target / base) of a traced function's printed per-run figure
    (a run without it: 0; both at least 1 ns, as the check reads them)."""
    from gitperf.stats.inference import center

    def figure(p: dict) -> float:
        f = {f["name"]: f for f in p["functions"]}.get(name)
        return max(float(f["native_ns"] if native else f["total_ns"]) if f else 0.0, 1.0)
    assert target.keys() == base.keys()
    return center([math.log(figure(target[r]) / figure(base[r])) for r in sorted(target)])


def _cpu_log_ratio(target: dict[int, dict], base: dict[int, dict]) -> float:
    """What a pooled test takes out of the ratio of two sessions' sampled figures: log of the ratio of
    their median times on a CPU, less the median log ratio of the rounds' wall times."""
    from gitperf.stats.inference import center
    walls = [math.log(target[r]["metrics"]["PRT"] / base[r]["metrics"]["PRT"]) for r in sorted(target)]
    cpu = [center([(p["metrics"]["PRT"] - p["metrics"]["WAIT"]) for p in side.values()]) for side in (target, base)]
    return math.log(cpu[0] / cpu[1]) - center(walls)


def only_children(held: dict[str, int], timed: dict[str, float]) -> dict[str, list[str]]:
    """Per function of `timed`, its callees that nothing else calls (on every folded stack of `held`
    that holds them, it is right above them): their inclusive times are parts of its own, so they add
    up to at most its inclusive time (issue #55, item 3).  Recursive functions aside (one that a stack
    holds twice): a sample counts once for it, once for each callee under each of its frames."""
    from gitperf.core import stacks
    above: dict[str, set[str]] = {}
    recursive: set[str] = set()
    for st in held:
        frames = st.split(stacks.SEP)
        recursive |= {f for f in frames if frames.count(f) > 1}
        for i, f in enumerate(frames):
            above.setdefault(f, set()).add(frames[i - 1] if i else "")
    out: dict[str, list[str]] = {}
    for callee, callers in above.items():
        [caller] = callers if len(callers) == 1 else [""]
        if caller in timed and callee in timed and caller not in recursive and callee != caller:
            out.setdefault(caller, []).append(callee)
    return out


# A frameless leaf reached two ways (issue #55, item 2): `relax` calls `travel`; `astar` calls `via`,
# which tail-calls `travel` (`jmp` after its frame is gone).  In every sample of `travel` a
# frame-pointer walk skips its caller: `relax` or `via`, and `via` is on no stack at all.
LEAF_SRC = """\
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) double travel(const double *w, int i) { return (w[i] + 1.5) / (i + 1.0) * 3.0 + 0.5; }
__attribute__((noinline)) double via(const double *w, int i) { return travel(w, i + 1); }
__attribute__((noinline)) double relax(const double *w, int n) { double s = 0; for (int i = 0; i < n; i++) s += travel(w, i); return s; }
__attribute__((noinline)) double astar(const double *w, int n) { double s = 0; for (int i = 0; i < n - 1; i++) s += via(w, i) * 0.5; return s; }
int main(int c, char **v) {
  int n = 4000, r = c > 1 ? atoi(v[1]) : 1; double *w = malloc(n * sizeof *w), s = 0;
  for (int i = 0; i < n; i++) w[i] = i;
  for (int j = 0; j < r; j++) { w[j % n] += 1; s += astar(w, n) + relax(w, n); }
  printf("%f\\n", s); return 0; }
"""


def build_leaf(dest: Path, flags: tuple[str, ...] = ("-fpatchable-function-entry=5",)) -> Path:
    """LEAF_SRC built as `check --collect` builds (frame pointers, -g, padded entries)."""
    import subprocess
    (dest / "leaf.c").write_text(LEAF_SRC)
    subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", *flags, "-o", str(dest / "leaf"),
                    str(dest / "leaf.c")], check=True)
    return dest / "leaf"
