"""The dashboard's pages: overview, commit, function, compare, regressions.

Each view asks the index (`db.get_index`) and hands plain rows and figure dicts to a template; Jinja
autoescapes every string, and figures go in through `tojson`.  The one view computed on demand is
`/compare/A/B` (any two commits: a check between them, which no index can hold for every pair)."""

from __future__ import annotations

from pathlib import Path

import plotly
import pygit2
from flask import Blueprint, abort, current_app, render_template, request, send_from_directory

from gitperf import checks
from gitperf.core.model import ROOT
from gitperf.stats import models
from gitperf.store.notes import NotesStore
from gitperf.views.report import within_threshold
from gitperf.web import links, plots
from gitperf.web.db import get_index

bp = Blueprint("pages", __name__)
STATIC = Path(__file__).parent / "static"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data"
TOP_FUNCTIONS = 8  # functions drawn on the overview besides the total
# A commit page lists each workload's functions with the most exclusive time, up to this many, and every
# one with a verdict: a pulled profile of 20,000 functions made an 8 MB page (1 s) and a static export
# of 20,000 function pages (34 s); the rest are in `git perf show REV --top 0` and /api/commit/SHA.
PAGE_FUNCTIONS = 300
# The overview and a function's page draw the line's last this many commits unless asked for more
# (`?commits=N|all`): every commit of a 10,000-commit line made pages of 6.9 and 5.0 MB served in 0.8
# and 0.7 s warm (bench/dashboard.py), of points no screen tells apart; every verdict is listed
# whatever the window (/regressions, a function's verdicts).
WINDOW = 1000


@bp.route("/static/<path:filename>")
def static_file(filename: str):
    """Our own assets, and plotly.js from the installed plotly package (no CDN: works offline)."""
    if filename == "plotly.min.js":
        return send_from_directory(PLOTLY_JS, filename, max_age=86400)
    return send_from_directory(STATIC, filename, max_age=3600)


def commit_or_404(sha: str) -> str:
    full = get_index().resolve(sha)
    if full is None:
        abort(404, f"no commit {sha!r} in the profiled history (is it on HEAD's first-parent line, "
                   "and has `git perf collect` run on it?)")
    return full


def overview_data(workload: str | None = None, since: int = 0) -> dict:
    """Per workload (and machine, when there are several): its run time at native speed over the
    commits from position `since` of the line on, whatever plans measured it, with the stored checks'
    verdicts; and its top functions under the plan that profiled most commits (function times depend on
    what was probed)."""
    idx = get_index()
    found = idx.workloads()
    if workload is not None:
        found = [w for w in found if w["workload"] == workload]
        if not found:
            abort(404, f"no profiles of workload {workload!r}")
    machines = {w["workload"]: sum(x["workload"] == w["workload"] for x in found) for w in found}
    configs = idx.configurations()
    sections = []
    for w in found:
        wl, machine = w["workload"], w["machine"]
        title = wl + (f" on {machine}" if machines[wl] > 1 else "")
        marks = idx.marks(wl, since)
        section = {"workload": wl, "machine": machine, "commits": w["commits"], "left_out": w["left_out"],
                   "total": plots.timeline(f"{title}: run time at native speed (probe time taken out)",
                                           idx.native_timeline(wl, machine, since), marks,
                                           steps=idx.paired_steps(wl, since)) if w["commits"] else None,
                   "degradations": [m for m in marks if m["type"] == m["result"] == checks.DEGRADATION][-5:][::-1]}
        mine = [c for c in configs if c["workload"] == wl and c["config_key"].split("|")[3] == machine]
        if mine:  # (configurations() lists the most profiled first)
            key, plan = mine[0]["config_key"], mine[0]["plan"]
            lines = idx.timeline(key, [ROOT, *idx.top_functions(key, TOP_FUNCTIONS)], since)
            section.update(plan=plan, functions=plots.functions_timeline(
                f"{title}: top functions by exclusive time ({plan})", {n: r for n, r in lines.items() if n != ROOT}))
            if section["total"] is None:  # only runs that are mostly probe time: drawn apart, and said so
                section["total"] = plots.timeline(f"{title}: measured time per run under {plan} (mostly probe "
                                                  "time, not the program's own speed)", lines[ROOT], marks)
        sections.append(section)
    return {"sections": sections}


def window(arg: str | None, length: int) -> int:
    """The first position of the line a page draws: its last `?commits=N` commits (WINDOW by default,
    `all` for the whole line; the whole line when exported: a static file takes no query)."""
    if arg == "all" or current_app.config["EXPORT"]:
        return 0
    try:
        n = int(arg) if arg is not None else WINDOW
    except ValueError:
        abort(400, f"?commits= takes a number of commits or 'all', not {arg!r}")
    if n < 1:
        abort(400, f"?commits= takes a positive number of commits or 'all', not {arg!r}")
    return max(0, length - n)


@bp.route("/")
def overview():
    idx = get_index()
    length = idx.line_length()
    since = window(request.args.get("commits"), length)
    commits = idx.commits(since)
    data = overview_data(request.args.get("workload"), since)
    return render_template("overview.html", shas={c["seq"]: c["sha"] for c in commits}, commits=commits,
                           since=since, length=length,
                           latest=[c for c in commits if c["profiles"]][-10:][::-1], **data)


@bp.route("/commit/<sha>")
def commit(sha: str):
    sha = commit_or_404(sha)
    idx = get_index()
    info = idx.commit_info(sha) or {"sha": sha, "subject": idx.subject(sha), "author": "", "date": None, "parent": ""}
    check = idx.check(sha)
    changes = check["changes"] if check else []
    functions = _functions_of(idx, sha, check, changes)
    profiles = idx.profiles(sha)
    diff_traced = sorted(set(idx.diff_traced(sha)) | {c["function"] for c in changes if c["changed"]})
    figures = [plots.exclusive_bars(f"{wl}: where the time goes (exclusive time)",
                                    [f for f in functions if f["workload"] == wl],
                                    {c["function"]: c["type"] for c in changes if c["workload"] == wl})
               for wl in sorted({f["workload"] for f in functions})]
    notable = [c for c in changes if checks.change.listed(c["type"], c["changed"] or c["function"] == ROOT)]
    threshold = current_app.config["CHECK"].min_relative
    forests = [plots.forest(f"{wl}: every tested function's change", [c for c in changes if c["workload"] == wl],
                            threshold) for wl in sorted({c["workload"] for c in changes})] if notable else []
    measures = sorted({c["measure"] for c in notable if c.get("measure")})
    runs = {c["workload"]: within_threshold(c["relative"], c["ci_low"], c["ci_high"], c["noise"])  # (as the CLI says)
            for c in changes if c["function"] == ROOT and c["type"] == checks.NO_CHANGE}
    flames = flame_figures(sha, check["base"] if check else None, frozenset(diff_traced))
    return render_template("commit.html", info=info, check=check, notable=notable, functions=functions, runs=runs,
                           profiles=profiles, diff_traced=diff_traced, figures=figures, flames=flames,
                           forests=forests, measures=measures,
                           unreadable=idx.bad_lines(sha), more=idx.function_count(sha) - len(functions))


def _functions_of(idx, sha: str, check: dict | None, changes: list[dict]) -> list[dict]:
    """A commit page's function rows (`one_row_each`: the session its check compared first), each with
    its change of the stored check (or None)."""
    by_fn = {(c["workload"], c["function"]): c for c in changes}
    functions = one_row_each(idx.functions(sha, PAGE_FUNCTIONS),
                             {(w["workload"],): w["config_key"] for w in check["workloads"]} if check else {})
    for f in functions:
        f["change"] = by_fn.get((f["workload"], f["name"]))
    links.profiled_already(f["name"] for f in functions)
    return functions


def one_row_each(rows: list[dict], checked: dict[tuple, str], by: tuple[str, ...] = ("workload", "name")) -> list[dict]:
    """Rows of function summaries, one per `by` (a commit page: workload and function; a function
    page: commit and workload): the session (probe plan) its check compared (`checked`: the `by`
    key less its last part -> comparison key), else the one with the most runs; the others (`others`:
    their plans and runs) as a drill-down.  A commit collected twice listed each function twice, with
    different totals and no label."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in by), []).append(r)
    out = []
    for key, rs in groups.items():
        rs.sort(key=lambda r: (r["config_key"] != checked.get(key[:-1]), -r["runs"]))
        out.append({**rs[0], "others": rs[1:]})
    return out


def flame_figures(sha: str, base: str | None, changed: frozenset[str]) -> list[dict]:
    """Per workload with stored stacks: the commit's flame graph, and beside it the differential one
    against `base` when the base has stacks of that workload too."""
    idx = get_index()
    mine, theirs = idx.stacks(sha), idx.stacks(base) if base else {}
    out = []
    for wl, st in sorted(mine.items()):
        figure = {"workload": wl, "samples": sum(st.values()),
                  "flame": plots.flame(f"{wl}: call stacks of {sha[:12]}", st, changed=changed)}
        if wl in theirs:
            figure["diff"] = plots.flame(f"{wl}: {sha[:12]} against {base[:12]} (colour: change of share)",
                                         st, theirs[wl], changed)
            figure["base_samples"] = sum(theirs[wl].values())
        out.append(figure)
    return out


@bp.route("/function/<fn:name>")
def function(name: str):
    idx = get_index()
    length = idx.line_length()
    since = window(request.args.get("commits"), length)
    history = idx.function_history(name, since)
    if not history and (not since or not idx.function_history(name)):
        abort(404, f"no function {name!r} in any profile")
    history = sorted(one_row_each(history, idx.compared(sorted({h["commit"] for h in history})), ("commit", "workload")),
                     key=lambda h: (h["seq"] is None, h["seq"] or 0))
    changes = idx.function_changes(name, notable=True)
    figures = []
    found = idx.function_series(name, since)
    several = len({wl for wl, _ in found}) < len(found)  # a workload on more than one machine
    for (wl, machine), series in found.items():
        figures.append(plots.function_timeline(f"{name} ({wl}{' on ' + machine if several else ''}): time per run",
                                               series, [c for c in changes if c["workload"] == wl]))
    model = _model_figure(name)
    return render_template("function.html", name=name, history=history[::-1], changes=changes,
                           figures=figures, model=model, since=since, length=length,
                           location=next((h["location"] for h in history if h["location"]), ""))


def _model_figure(name: str) -> dict | None:
    """Models of the sampled calls in the newest commit whose profiles kept a series of them."""
    found = get_index().newest_series(name)
    if found is None:
        return None
    sha, series = found
    ms = models.fit_all([o for o, _ in series], [d for _, d in series])
    fig = plots.model_plot(f"{name} in {sha[:12]}", series, ms)
    return {"figure": fig, "commit": sha, "models": [(m.kind, m.r2, m.reliable) for m in ms]}


def compare_result(a: str, b: str) -> checks.CheckResult:
    """B checked against A, now (both must be indexed commits; the result names them in full)."""
    a, b = commit_or_404(a), commit_or_404(b)
    return checks.check(NotesStore(pygit2.Repository(current_app.config["REPO_PATH"])), b, current_app.config["CHECK"],
                        base_rev=a)


@bp.route("/compare/<a>/<b>")
def compare(a: str, b: str):
    result = compare_result(a, b)
    a, b = commit_or_404(a), result.commit
    changes = [c.to_dict() for c in result.changes]
    idx = get_index()
    changed = frozenset(c["function"] for c in changes if c["changed"])
    return render_template("compare.html", info_a=idx.commit_info(a) or {"sha": a},
                           info_b=idx.commit_info(b) or {"sha": b}, a=a, b=b, result=result, changes=changes,
                           figure=plots.change_bars(f"{b[:12]} vs {a[:12]}", changes),
                           flames=flame_figures(b, a, changed))


@bp.route("/regressions")
def regressions():
    return render_template("regressions.html", rows=get_index().regressions())
