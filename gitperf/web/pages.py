"""The dashboard's pages: overview, commit, function, compare, regressions.

Each view asks the index (or, for one commit's details, its note) and hands plain rows and figure
dicts to a template; Jinja autoescapes every string, and figures go in through `tojson`."""

from __future__ import annotations

from pathlib import Path

import plotly
from flask import Blueprint, abort, current_app, g, render_template, request, send_from_directory

from gitperf import checks
from gitperf.core.model import ROOT
from gitperf.stats import models
from gitperf.store.notes import NotesStore
from gitperf.web import plots

bp = Blueprint("pages", __name__)
STATIC = Path(__file__).parent / "static"
PLOTLY_JS = Path(plotly.__file__).parent / "package_data"
TOP_FUNCTIONS = 8  # functions drawn on the overview besides the total


@bp.route("/static/<path:filename>")
def static_file(filename: str):
    """Our own assets, and plotly.js from the installed plotly package (no CDN: works offline)."""
    if filename == "plotly.min.js":
        return send_from_directory(PLOTLY_JS, filename, max_age=86400)
    return send_from_directory(STATIC, filename, max_age=3600)


def _commit_or_404(sha: str) -> str:
    full = g.index.resolve(sha)
    if full is None:
        abort(404, f"no commit {sha!r} in the profiled history (is it on HEAD's first-parent line, "
                   "and has `git perf collect` run on it?)")
    return full


def overview_data(workload: str | None = None) -> dict:
    """Per configuration: the total's timeline with its marks, and the top functions' timelines."""
    idx = g.index
    configs = idx.configurations()
    if workload is not None:
        configs = [c for c in configs if c["workload"] == workload]
        if not configs:
            abort(404, f"no profiles of workload {workload!r}")
    several = {c["workload"] for c in configs if sum(d["workload"] == c["workload"] for d in configs) > 1}
    sections = []
    for c in configs:
        key, wl = c["config_key"], c["workload"]
        binary, machine = key.split("|")[0], key.split("|")[3]
        title = wl + (f" ({binary} on {machine}, {c['plan']})" if wl in several else "")
        top = idx.top_functions(key, TOP_FUNCTIONS)
        lines = idx.timeline(key, [ROOT, *top])
        marks = idx.marks(wl)
        sections.append({"workload": wl, "config_key": key, "plan": c["plan"], "commits": c["commits"],
                         "total": plots.timeline(f"{title}: total time per run", lines.pop(ROOT, []), marks),
                         "functions": plots.functions_timeline(f"{title}: top functions by exclusive time", lines),
                         "degradations": [m for m in marks if m["type"] == "degradation"][-5:][::-1]})
    return {"sections": sections}


@bp.route("/")
def overview():
    commits = g.index.commits()
    data = overview_data(request.args.get("workload"))
    return render_template("overview.html", shas=[c["sha"] for c in commits], commits=commits,
                           latest=[c for c in commits if c["profiles"]][-10:][::-1], **data)


@bp.route("/commit/<sha>")
def commit(sha: str):
    sha = _commit_or_404(sha)
    idx = g.index
    info = idx.commit_info(sha) or {"sha": sha, "subject": _subject(sha), "author": "", "date": None, "parent": ""}
    check = idx.check(sha)
    changes = check["changes"] if check else []
    by_fn = {(c["workload"], c["function"]): c for c in changes}
    functions = idx.functions(sha)
    for f in functions:
        f["change"] = by_fn.get((f["workload"], f["name"]))
    profiles = idx.profiles(sha)
    stored, _ = NotesStore(g.repo).read(sha)
    diff_traced = sorted({n for p in stored for n in p.profile.plan.changed} |
                         {c["function"] for c in changes if c["changed"]})
    figures = []
    for wl in sorted({f["workload"] for f in functions}):
        types = {c["function"]: c["type"] for c in changes if c["workload"] == wl}
        figures.append(plots.exclusive_bars(f"{wl}: where the time goes (exclusive time)",
                                            [f for f in functions if f["workload"] == wl], types))
    notable = [c for c in changes if c["type"] not in (checks.NO_CHANGE,)]
    return render_template("commit.html", info=info, check=check, notable=notable, functions=functions,
                           profiles=profiles, diff_traced=diff_traced, figures=figures,
                           unreadable=idx.bad_lines(sha))


def _subject(sha: str) -> str:
    c = g.repo.get(sha)
    return c.message.splitlines()[0] if c is not None and c.message else ""


@bp.route("/function/<path:name>")
def function(name: str):
    idx = g.index
    history = idx.function_history(name)
    if not history:
        abort(404, f"no function {name!r} in any profile")
    changes = idx.function_changes(name)
    figures = []
    for key in dict.fromkeys(h["config_key"] for h in history):
        rows = [h for h in history if h["config_key"] == key and h["seq"] is not None]
        wl = rows[0]["workload"] if rows else key
        if rows:
            figures.append(plots.function_timeline(f"{name} ({wl})", rows,
                                                   [c for c in changes if c["workload"] == wl]))
    model = _model_figure(name, [h["commit"] for h in history if h["seq"] is not None][::-1])
    return render_template("function.html", name=name, history=history[::-1], changes=changes,
                           figures=figures, model=model,
                           location=next((h["location"] for h in history if h["location"]), ""))


def _model_figure(name: str, newest_first: list[str]) -> dict | None:
    """Models of the sampled calls in the newest commit whose profile kept a series of them."""
    store = NotesStore(g.repo)
    for sha in newest_first[:20]:
        for p in store.read(sha)[0]:
            f = p.profile.function(name)
            if f and len(f.series) >= 10 and len({o for o, _ in f.series}) >= 3:
                ms = models.fit_all([o for o, _ in f.series], [d for _, d in f.series])
                fig = plots.model_plot(f"{name} in {sha[:12]}", list(f.series), ms)
                return {"figure": fig, "commit": sha, "models": [(m.kind, m.r2, m.reliable) for m in ms]}
    return None


def compare_data(a: str, b: str) -> dict:
    a, b = _commit_or_404(a), _commit_or_404(b)
    result = checks.check(g.repo, b, current_app.config["CHECK"], base_rev=a)
    changes = [c.to_dict() for c in result.changes]
    return {"a": a, "b": b, "result": result, "changes": changes,
            "figure": plots.change_bars(f"{b[:12]} vs {a[:12]}", changes)}


@bp.route("/compare/<a>/<b>")
def compare(a: str, b: str):
    data = compare_data(a, b)
    return render_template("compare.html", info_a=g.index.commit_info(data["a"]) or {"sha": data["a"]},
                           info_b=g.index.commit_info(data["b"]) or {"sha": data["b"]}, **data)


@bp.route("/regressions")
def regressions():
    return render_template("regressions.html", rows=g.index.regressions())
