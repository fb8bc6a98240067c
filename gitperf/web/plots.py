"""Plotly figures as plain dicts (plotly.js draws them; building them here keeps the templates
free of logic and avoids plotly.py's validation, ~10 ms a trace).  Pure functions of index rows.

Times are drawn in milliseconds per run.  On a timeline the x axis is the commit's position on
HEAD's first-parent line, so a click maps a point's x back to its commit (`shas[x]` in the page).
Every name that reaches the plot is HTML-escaped: plotly renders a subset of HTML in text, and C++
names hold `<` and `>`.
"""

from __future__ import annotations

import hashlib
import math
from html import escape

from gitperf.checks.change import ACCEPTED, DEGRADATION, OPTIMIZATION, UNRESOLVED
from gitperf.core.fmt import fmt_date
from gitperf.core.model import ROOT
from gitperf.core.names import labels, readable, short
from gitperf.stats import inference

RED, GREEN, BLUE, GREY = "#c0392b", "#1e8449", "#1f77b4", "#7f8c8d"
MS = 1e6


def _layout(title: str, ytitle: str, log: bool = False, height: int = 360) -> dict:
    # the title on the left and the toolbar (top right, on hover) above the plot area: never on each other
    return {"title": {"text": escape(title), "font": {"size": 15}, "x": 0.01, "xanchor": "left"}, "height": height,
            "hovermode": "closest", "margin": {"l": 70, "r": 20, "t": 60, "b": 50},
            "legend": {"orientation": "h", "y": -0.18},
            "xaxis": {"title": {"text": "commit (first-parent order, oldest left)"}, "zeroline": False},
            "yaxis": {"title": {"text": ytitle}, "type": "log" if log else "linear", "rangemode": "tozero"}}


def _commit_ticks(layout: dict, rows: list[dict]) -> None:
    """x ticks at commits only: each labelled with its short id when there are few, else whole
    positions on the line (never 1.2, 1.4 ...)."""
    seqs = sorted({r["seq"]: r["commit"] for r in rows}.items())
    if len(seqs) <= 30:
        layout["xaxis"].update(tickvals=[q for q, _ in seqs], ticktext=[c[:7] for _, c in seqs])
    else:
        layout["xaxis"].update(tickformat="d", dtick=max(1, len(seqs) // 15))


def _date(ts) -> str:
    return fmt_date(ts, "%Y-%m-%d") if ts else ""


BAND = "95% interval of the median (runs' spread moderated along the line)"


def _band(rows: list[dict], name: str, color: str) -> list[dict]:
    """The 95% interval of each commit's center as a shaded band (absent where a commit had one run),
    from its runs' spread moderated along the line (`inference.line_intervals`: each point's own
    interval, as stored, has the ~1.4 degrees of freedom of three runs)."""
    x = [r["seq"] for r in rows]
    bounds = inference.line_intervals([r["total_ns"] for r in rows], [r.get("ci_high") for r in rows],
                                      [r["runs"] for r in rows])
    hi = [h / MS if h else None for _, h in bounds]
    lo = [low / MS if low else None for low, _ in bounds]
    common = {"x": x, "mode": "lines", "line": {"width": 0, "color": color}, "hoverinfo": "skip",
              "showlegend": False, "legendgroup": name, "type": "scatter"}
    return [dict(common, y=hi), dict(common, y=lo, fill="tonexty", fillcolor=_alpha(color, 0.18),
                                     name=f"{escape(name)} {BAND}")]


def _alpha(hex_color: str, a: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{a})"


def _under(r: dict) -> str:
    """What a point was measured under (`views.index_rows.measured_under`), wrapped for a hover box."""
    left = f", {r['left_out']} left out (mostly probe time)" if r.get("left_out") else ""
    parts = [f"{r['runs']} run(s){left}"] + [escape(x) for x in (r.get("measured") or "").split("; ") if x]
    return "<br>".join(parts)


def chained(total: list[dict], steps: list[dict]) -> tuple[list[int | None], list[float | None], list[str]]:
    """The paired ratios chained into a line (x, y in ms, hover text): each commit's run time its
    parent's times the ratio a paired check measured with both side by side, starting from the parent's
    measured time where a run of steps begins (or the commit's own, divided back); a commit without a
    paired step vs its parent breaks the line (None)."""
    by_seq = {r["seq"]: r["total_ns"] / MS for r in total}
    xs: list[int | None] = []
    ys: list[float | None] = []
    text: list[str] = []
    level = None  # the chain's value at the previous step's commit
    for st in steps:
        ratio = 1 + st["relative"]
        if level is None or xs[-1] != st["seq"] - 1:
            start = by_seq.get(st["seq"] - 1) or (by_seq[st["seq"]] / ratio if st["seq"] in by_seq else None)
            if start is None:
                level = None
                continue
            if xs:
                xs.append(None), ys.append(None), text.append("")
            xs.append(st["seq"] - 1), ys.append(start), text.append("the chain starts at this commit's measured time")
            level = start
        level *= ratio
        xs.append(st["seq"]), ys.append(level)
        text.append(f"{st['relative'] * 100:+.1f}% [{(st['ci_low'] or 0) * 100:+.1f}%, {(st['ci_high'] or 0) * 100:+.1f}%] "
                    f"vs its parent, both measured together")
    return xs, ys, text


def _markers(marks: list[dict], by_seq: dict[int, dict]) -> list[dict]:
    """One marker trace per verdict kind, a marker per commit of that verdict, on its point."""
    out = []
    # (a function's own page hands in its changes alone: each is its commit's verdict on it)
    verdict = {m["seq"]: m.get("result", m["type"]) for m in marks}
    for kind, symbol, color in ((DEGRADATION, "triangle-up", RED), (ACCEPTED, "triangle-up", GREY),
                                (OPTIMIZATION, "triangle-down", GREEN)):
        found: dict[int, list[str]] = {}
        for m in marks:
            if verdict[m["seq"]] == kind and m["seq"] in by_seq:
                found.setdefault(m["seq"], [])
                if m["type"] == kind:
                    found[m["seq"]].append(f"{escape(short(readable(m['function']), 60))} {m['relative'] * 100:+.0f}%")
        if found:
            seqs = sorted(found)
            out.append({"type": "scatter", "mode": "markers", "name": kind + "s",
                        "x": seqs, "y": [by_seq[s]["total_ns"] / MS for s in seqs],
                        "text": ["<br>".join(found[s][:8]) for s in seqs],
                        "hovertemplate": f"<b>{kind}</b><br>%{{text}}<extra></extra>",
                        "marker": {"symbol": symbol, "size": 14, "color": color, "line": {"width": 1, "color": "#fff"}}})
    return out


def timeline(title: str, total: list[dict], marks: list[dict], root: str = "main",
             steps: list[dict] | None = None) -> dict:
    """A workload's total time over commits: center of the runs with its band, each point saying what
    it was measured under; beside it, where commits have paired checks against their parents, those
    ratios chained (`chained`: measured side by side, so a busy hour moves both sides, not the line);
    one marker per checked commit from its stored verdict for the workload (`IndexQuery.marks`'
    `result`; degradation: red ▲, accepted: grey ▲, optimization: green ▼; the functions of that
    verdict on hover), and the change points the degradations report."""
    by_seq = {r["seq"]: r for r in total}
    text = [f"{r['commit'][:12]} {escape(r['subject'])}<br>{escape(r['author'])}, {_date(r['date'])}"
            f"<br>{_under(r)}" for r in total]
    data = _band(total, root, BLUE) + [{
        "type": "scatter", "mode": "lines+markers", "name": "run time (median of runs)",
        "x": [r["seq"] for r in total], "y": [r["total_ns"] / MS for r in total], "text": text,
        "hovertemplate": "%{y:.3f} ms<br>%{text}<extra></extra>", "line": {"color": BLUE}, "marker": {"size": 6}}]
    if steps:
        xs, ys, how = chained(total, steps)
        if xs:
            data.append({"type": "scatter", "mode": "lines+markers", "name": "paired ratios, chained",
                         "x": xs, "y": ys, "text": how, "connectgaps": False,
                         "hovertemplate": "%{y:.3f} ms<br>%{text}<extra></extra>",
                         "line": {"color": GREY, "dash": "dash"}, "marker": {"size": 4}})
    data += _markers(marks, by_seq)
    shapes = []
    seq_of = {r["commit"]: r["seq"] for r in total}
    for since in sorted({m["since"] for m in marks if m.get("since") and m["since"] in seq_of}):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": seq_of[since], "x1": seq_of[since],
                       "y0": 0, "y1": 1, "line": {"color": RED, "dash": "dot", "width": 1}})
    layout = _layout(title, "time per run (ms)")
    layout["shapes"] = shapes
    _commit_ticks(layout, total)
    if shapes:
        layout["annotations"] = [{"x": s["x0"], "y": 1, "xref": "x", "yref": "paper", "text": "level shift",
                                  "showarrow": False, "font": {"size": 10, "color": RED}, "yanchor": "bottom"}
                                 for s in shapes]
    return {"data": data, "layout": layout}


def functions_timeline(title: str, series: dict[str, list[dict]]) -> dict:
    """The top functions' exclusive time over commits (log scale: they differ by orders of magnitude)."""
    data = [{"type": "scatter", "mode": "lines+markers", "name": escape(short(name, 50)), "x": [r["seq"] for r in rows],
             "y": [max(r["exclusive_ns"], 1) / MS for r in rows], "marker": {"size": 4},
             "text": [f"{escape(readable(name))}<br>{r['commit'][:12]} {escape(r['subject'])}" for r in rows],
             "hovertemplate": "%{y:.3f} ms<br>%{text}<extra></extra>"}
            for name, rows in series.items() if rows]
    layout = _layout(title, "exclusive time per run (ms, log)", log=True, height=420)
    _commit_ticks(layout, [r for rows in series.values() for r in rows])
    _log_ticks(layout, [y for t in data for y in t["y"]])
    return {"data": data, "layout": layout}


def _log_ticks(layout: dict, ys: list[float]) -> None:
    """y ticks of a log axis at 1, 2 and 5 times a power of ten (only the powers beyond four
    decades), each labelled in full: plotly's own labels a 0.2 and a 20 alike, "2"."""
    if not ys:
        return
    low, high = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    steps = (1, 2, 5) if high - low <= 4 else (1,)
    vals = [k * 10.0 ** e for e in range(low, high + 1) for k in steps if min(ys) / 2 <= k * 10.0 ** e <= max(ys) * 2]
    layout["yaxis"].update(tickvals=vals, ticktext=[f"{v:g}" for v in vals])


def function_timeline(title: str, series: dict[str, list[dict]], changes: list[dict]) -> dict:
    """One function over commits: a line per measure (`series`: label -> rows; each comparable across
    probe plans, views.index), each with its band, and the checks' verdicts on it."""
    colors = [BLUE, "#8e44ad"]
    fig: dict = {"data": [], "layout": {}}
    for i, (label, rows) in enumerate(sorted(series.items())):
        one = timeline(title, rows, [dict(c) for c in changes if c.get("seq") is not None] if i == 0 else [])
        line = next(t for t in one["data"] if t.get("mode") == "lines+markers")
        line.update(name=f"{label} (median of runs)", line={"color": colors[i % 2]})
        band = [dict(t, legendgroup=label, line=dict(t["line"], color=colors[i % 2])) for t in one["data"][:2]]
        band[1].update(fillcolor=_alpha(colors[i % 2], 0.18), name=f"{label}: {BAND}")
        fig["data"] += band + [line] + one["data"][3:]
        fig["layout"] = fig["layout"] or one["layout"]
    return fig


def exclusive_bars(title: str, functions: list[dict], types: dict[str, str], top: int = 25) -> dict:
    """Where the time goes in one commit: exclusive time of the top functions, coloured by the
    check's verdict (red slower, green faster than the baseline)."""
    rows = sorted(functions, key=lambda f: -f["exclusive_ns"])[:top][::-1]
    color = {DEGRADATION: RED, OPTIMIZATION: GREEN, ACCEPTED: "#e67e22"}
    return {"data": [{"type": "bar", "orientation": "h", "x": [f["exclusive_ns"] / MS for f in rows],
                      "y": [escape(n) for n in labels([f["name"] for f in rows], 50)],
                      "text": [escape(readable(f["name"])) for f in rows],
                      "marker": {"color": [color.get(types.get(f["name"], ""), BLUE) for f in rows]},
                      "textposition": "none",  # (the name is the axis label; the text is for hovering)
                      "hovertemplate": "%{text}: %{x:.3f} ms exclusive<extra></extra>"}],
            "layout": dict(_layout(title, ""), height=max(260, 22 * len(rows) + 80),
                           xaxis={"title": {"text": "exclusive time per run (ms)"}},
                           yaxis={"automargin": True, "type": "category"}, margin={"l": 10, "r": 20, "t": 40, "b": 50})}


def forest(title: str, changes: list[dict], threshold: float, top: int = 25) -> dict:
    """One commit's check at a glance (a forest plot): every tested function's change of time a run
    with its interval, coloured by its outcome, the band within the check's threshold
    (`check.min_relative`) shaded, so the three outcomes are where an interval lies against it; the run as a whole first, then in the report's order.  The axis is
    the ratio after/before on a log scale, labelled in percent: a halving and a doubling are as far
    from 0, and a sampled function's interval of -90% to +4,700% does not squeeze the verdicts."""
    rows = [c for c in changes if c.get("relative") is not None and math.isfinite(c["relative"])
            and c.get("ci_low") is not None and c.get("ci_high") is not None]
    rows = (sorted(rows, key=lambda c: c["function"] != ROOT))[:top][::-1]  # (plotly draws the first at the bottom)
    color = {DEGRADATION: RED, OPTIMIZATION: GREEN, ACCEPTED: "#e67e22", UNRESOLVED: "#d68910"}
    names = labels([c["function"] for c in rows], 50)
    ratio = lambda x: max(1 + x, 1e-3)  # noqa: E731  (an interval's low end can reach -100%)
    xs = [ratio(c["relative"]) for c in rows]
    ends = [ratio(c["ci_low"]) for c in rows] + [ratio(c["ci_high"]) for c in rows] + [1 - threshold, 1 + threshold]
    ticks = [t for t in _RATIO_TICKS if min(ends) / 1.5 <= t <= max(ends) * 1.5]
    return {"data": [{"type": "scatter", "mode": "markers", "x": xs,
                      "y": [escape(f"{n} (the run)" if c["function"] == ROOT else n) for n, c in zip(names, rows)],
                      "customdata": [[escape(readable(c["function"])), c["type"], escape(c["function"]),
                                      c["relative"] * 100] for c in rows],
                      "error_x": {"type": "data", "symmetric": False,
                                  "array": [ratio(c["ci_high"]) - x for c, x in zip(rows, xs)],
                                  "arrayminus": [x - ratio(c["ci_low"]) for c, x in zip(rows, xs)]},
                      "marker": {"size": 9, "color": [color.get(c["type"], GREY) for c in rows]},
                      "hovertemplate": "%{customdata[0]}: %{customdata[3]:+.1f}% (%{customdata[1]})<extra></extra>"}],
            "layout": dict(_layout(title, ""), height=max(200, 26 * len(rows) + 90), showlegend=False,
                           xaxis={"title": {"text": f"change of time per run with its interval (log scale); shaded: "
                                                    f"±{threshold:.0%} (check.min_relative): an interval wholly outside "
                                                    "is a verdict, wholly inside no change, across it unresolved"},
                                  "type": "log", "tickvals": ticks, "ticktext": [_pct_tick(t) for t in ticks]},
                           yaxis={"automargin": True, "type": "category"},
                           shapes=[{"type": "rect", "xref": "x", "yref": "paper", "x0": 1 - threshold,
                                    "x1": 1 + threshold, "y0": 0, "y1": 1, "fillcolor": GREY, "opacity": 0.15,
                                    "line": {"width": 0}, "layer": "below"},
                                   {"type": "line", "xref": "x", "yref": "paper", "x0": 1, "x1": 1, "y0": 0, "y1": 1,
                                    "line": {"color": GREY, "width": 1}}],
                           margin={"l": 10, "r": 20, "t": 40, "b": 50})}


# Ratios after/before the forest plot labels (as changes: -90% .. +9,900%).
_RATIO_TICKS = [0.1, 0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0, 10.0, 25.0, 100.0]


def _pct_tick(ratio: float) -> str:
    return "0" if ratio == 1 else f"{(ratio - 1) * 100:+,.0f}%"


def change_bars(title: str, changes: list[dict], top: int = 25) -> dict:
    """Relative change per function with its interval, the largest first."""
    rows = sorted([c for c in changes if c.get("relative") is not None],
                  key=lambda c: -abs(c["relative"]))[:top][::-1]
    color = {DEGRADATION: RED, OPTIMIZATION: GREEN}
    return {"data": [{"type": "bar", "orientation": "h", "x": [c["relative"] * 100 for c in rows],
                      "y": [escape(n) for n in labels([c["function"] for c in rows], 50)],
                      "text": [escape(readable(c["function"])) for c in rows],
                      "error_x": {"type": "data", "symmetric": False,
                                  "array": [((c["ci_high"] or c["relative"]) - c["relative"]) * 100 for c in rows],
                                  "arrayminus": [(c["relative"] - (c["ci_low"] or c["relative"])) * 100 for c in rows]},
                      "marker": {"color": [color.get(c["type"], GREY) for c in rows]},
                      "textposition": "none",
                      "hovertemplate": "%{text}: %{x:+.1f}%<extra></extra>"}],
            "layout": dict(_layout(title, ""), height=max(260, 22 * len(rows) + 80),
                           xaxis={"title": {"text": "change of time per run (%), with interval"}},
                           yaxis={"automargin": True, "type": "category"}, margin={"l": 10, "r": 20, "t": 40, "b": 50})}


def model_plot(name: str, series: list[tuple[int, int]], models: list) -> dict:
    """Sampled calls (duration over call ordinal) and the fitted models, the best first."""
    # SVG, not WebGL: headless browsers and many remote desktops have no WebGL (a grey box instead)
    data = [{"type": "scatter", "mode": "markers", "name": "sampled calls", "x": [o for o, _ in series],
             "y": [d / 1e3 for _, d in series], "marker": {"size": 3, "color": GREY}}]
    lo, hi = min(o for o, _ in series), max(o for o, _ in series)
    for i, m in enumerate(models[:3]):
        xs = list(m.grid_x) or [lo + (hi - lo) * k / 99 for k in range(100)]
        ys = list(m.grid_y) if m.grid_x else [float(v) for v in m.predict(xs)]
        data.append({"type": "scatter", "mode": "lines", "name": f"{escape(m.kind)} (R² {m.r2:.2f})",
                     "x": xs, "y": [y / 1e3 for y in ys], "line": {"width": 3 if i == 0 else 1.5}})
    layout = _layout(f"{name}: sampled calls and models", "duration per call (µs)")
    layout["xaxis"]["title"]["text"] = "call ordinal"
    return {"data": data, "layout": layout}


# The flame graphs are plotly icicles (root on top, callees below, width = share of samples): plotly.js
# is already served offline with the dashboard, draws SVG, and zooms on a click; a vendored flame-graph
# library would be a second renderer to keep current.  Deeper levels than this open on a click.
FLAME_DEPTH = 14
MAX_FLAME_DEPTH = 128  # frames of a stack drawn at most (FLAME_DEPTH of them show at a time)
DIFF_CLIP = 1.0  # colour saturates at ±100% change of a frame's share
ALL = "(all)"


def _warm(name: str) -> str:
    """flamegraph.pl's palette: a warm colour fixed by the name (so a function keeps its colour across
    commits), grey for what is not a function of the binary."""
    if name.startswith("["):
        return "#bdc3c7"
    h = int(hashlib.sha1(name.encode()).hexdigest()[:6], 16)
    return f"hsl({h % 50}, {70 + h // 50 % 25}%, {55 + h // 1250 % 12}%)"


def _tree(stacks: dict[str, int], base: dict[str, int] | None) -> tuple[list[tuple[int, str]], list[int], list[int]]:
    """The frames of folded stacks as a tree, linear in the frames read: (parent node or -1, name) per
    node, parents first, and each side's samples under it (inclusive).  A stack deeper than
    MAX_FLAME_DEPTH is cut there, its samples kept by the frame at the limit (issue #37: every path
    prefix as a string key cost depth² bytes, 11 GB for one pulled stack of 20,000 frames)."""
    nodes: list[tuple[int, str]] = []
    counts: tuple[list[int], list[int]] = ([], [])
    index: dict[tuple[int, str], int] = {}
    for side, got in ((0, stacks), (1, base or {})):
        for stack, n in got.items():
            parent = -1
            for name in stack.split(";", MAX_FLAME_DEPTH)[:MAX_FLAME_DEPTH]:
                i = index.get((parent, name))
                if i is None:
                    i = index[(parent, name)] = len(nodes)
                    nodes.append((parent, name))
                    counts[0].append(0)
                    counts[1].append(0)
                counts[side][i] += n
                parent = i
    return nodes, counts[0], counts[1]


def flame(title: str, stacks: dict[str, int], base: dict[str, int] | None = None,
          changed: frozenset[str] = frozenset()) -> dict:
    """A flame graph (icicle) of folded stacks.  With `base`, a differential one: widths are this side's
    shares, each frame coloured by how its share of all samples moved from `base` (both sides normalised
    to the same total), red grew, blue shrank; frames of functions the diff changed carry a ◆."""
    nodes, now, before = _tree(stacks, base)
    total = sum(stacks.values()) or 1
    base_total = sum(base.values()) if base else 0
    shown = [i for i in range(len(nodes)) if now[i]]  # (a frame of the base alone is not drawn)
    ids, labels, parents, hover, colors, depth = [], [], [], [], [], {-1: 0}
    for i in shown:
        parent, name = nodes[i]
        depth[i] = depth[parent] + 1
        ids.append(f"f{i}")
        labels.append(escape(("◆ " if name in changed else "") + short(name, 80)))
        parents.append(f"f{parent}" if parent >= 0 else ALL)
        share = now[i] / total
        line = f"{escape(readable(name))}<br>{share:.1%} of samples ({now[i]})"
        if base is not None:
            was = before[i] / (base_total or 1)
            rel = share / was - 1 if was else DIFF_CLIP
            colors.append(max(-DIFF_CLIP, min(DIFF_CLIP, rel)))
            line += f"<br>base {was:.1%} → {share:.1%} ({'new' if not was else f'{rel:+.0%}'})"
        hover.append(line)
    hover.insert(0, f"{total} samples" + (f" (base {base_total})" if base is not None else ""))
    colors.insert(0, 0.0)
    # one explicit root: the stacks' own roots (main, [unknown], [other stacks]) side by side under it
    trace = {"type": "icicle", "ids": [ALL] + ids, "labels": ["all samples"] + labels,
             "parents": [""] + parents, "values": [total] + [now[i] for i in shown],
             "branchvalues": "total",
             "maxdepth": FLAME_DEPTH, "text": hover, "hovertemplate": "%{text}<extra></extra>", "textinfo": "label",
             "sort": False, "tiling": {"orientation": "v", "pad": 0}}
    # opened at the program's own root: beside `main`, the exec, page faults and exit of a short run
    # ([kernel], [unknown]) took 50-60% of the width (the demo's 5 ms `gate`); they stay one click up,
    # on the path bar's "all samples"
    top = [i for i in shown if nodes[i][0] < 0]
    mains = [i for i in top if nodes[i][1] == ROOT]
    if mains and len(top) > 1:
        trace["level"] = f"f{mains[0]}"
        trace["pathbar"] = {"visible": True, "side": "top"}
    if base is None:
        trace["marker"] = {"colors": ["#ecf0f1"] + [_warm(nodes[i][1]) for i in shown]}
    else:
        trace["marker"] = {"colors": colors, "colorscale": [[0, "#2166ac"], [0.5, "#f7f7f7"], [1, "#b2182b"]],
                           "cmin": -DIFF_CLIP, "cmax": DIFF_CLIP, "showscale": True,
                           "colorbar": {"title": {"text": "share vs base"}, "tickformat": "+.0%"}}
    levels = min(max(depth.values()) + 1, FLAME_DEPTH)
    layout = {"title": {"text": escape(title), "font": {"size": 15}}, "height": 90 + 24 * levels,
              "margin": {"l": 10, "r": 10, "t": 50, "b": 10}}
    return {"data": [trace], "layout": layout}
