"""Check and diff results as terminal text, markdown (a pull-request comment) and JSON
(ARCHITECTURE.md §12 shapes).  Pure functions: results in, text out."""

from __future__ import annotations

import math

from gitperf.checks import DEGRADATION, NO_CHANGE, OPTIMIZATION, UNRESOLVED, Change, CheckResult
from gitperf.checks.change import WorkloadPair
from gitperf.checks.check import ELSEWHERE, faster_runs
from gitperf.core.fmt import fmt_confidence, fmt_ns, table
from gitperf.core.model import ROOT
from gitperf.core.names import short

HEADLINE = {
    DEGRADATION: "slower", OPTIMIZATION: "faster", NO_CHANGE: "no change beyond the thresholds",
    UNRESOLVED: "unresolved: no verdict, a change beyond the thresholds neither confirmed nor excluded",
    "not-enough-data": "not enough data to decide", "accepted": "slower, as accepted",
}


def _pct(x: float) -> str:
    if math.isinf(x) or math.isnan(x):
        return "new" if x > 0 else "-"
    return f"{x:+.1%}"


def _interval(c: Change) -> str:
    if math.isnan(c.ci_low):
        return ""
    return f"[{c.ci_low:+.0%}, {c.ci_high:+.0%}]"


def _instructions(c: Change) -> str:
    """The witness's figure beside a time verdict: inclusive instructions a run (callgrind)."""
    if not c.instructions:
        return ""
    b, t = c.instructions
    return f"  instructions {_pct(t / b - 1) if b else 'new'} ({b:,.0f} -> {t:,.0f})"


def decided_by(decided: str) -> str:
    """What decided a time verdict, from its `Change.decided` (an index row's alike; time alone where
    no instructions were counted): the words the CLI, the markdown report and the dashboard print."""
    return decided or "time"


def amount(absolute_ns: float | None, share: float | None = None) -> str:
    """What a time verdict adds to a run, and its share of the run's change: "+1.20 ms a run, 27% of
    the run's slowdown" (`Change.absolute_ns`, `Change.share`; the same words in the CLI, markdown and
    the dashboard)."""
    if absolute_ns is None or not math.isfinite(absolute_ns):
        return ""
    text = ("+" if absolute_ns > 0 else "") + f"{fmt_ns(absolute_ns)} a run"
    what = "slowdown" if absolute_ns > 0 else "saving"
    if share is not None and share > 1:  # its gain holds time another function lost (a tail call, inlining)
        moved = "here from other functions" if absolute_ns > 0 else "from here to other functions"
        text += f", more than the run's whole {what} (time moved {moved})"
    elif share == 1:  # (the two agree within their intervals: `checks.verdict.shares`)
        text += f", all of the run's {what}"
    elif share is not None:
        text += f", {share:.0%} of the run's {what}"
    return text


def _line(c: Change) -> str:
    calls = "" if c.base_calls == c.target_calls else f"  calls {c.base_calls:.0f} -> {c.target_calls:.0f}"
    where = f"  ({c.location})" if c.location else ""
    if c.type in (DEGRADATION, OPTIMIZATION, "accepted"):
        return (f"{c.type:12s} {c.workload}/{short(c.function, 100)}{where}: {_pct(c.relative)} {_interval(c)}: "
                f"{amount(c.absolute_ns, c.share)}  ({fmt_ns(c.base_ns)} -> {fmt_ns(c.target_ns)} {c.measure or 'per run'}; "
                f"{_own(c.exclusive_delta_ns)})  confidence {fmt_confidence(c.confidence)}{calls}"
                f"{_instructions(c)}  decided by {decided_by(c.decided)}")
    if c.type == UNRESOLVED:  # its estimate first, as a verdict's; the method says what it could not exclude
        return (f"{c.type:12s} {c.workload}/{short(c.function, 100)}{where}: {_pct(c.relative)} {_interval(c)} "
                f"({c.measure or 'per run'}); {c.method}{calls}{_instructions(c)}")
    return f"{c.type:12s} {c.workload}/{short(c.function, 100)}{where}: {c.method}{calls}{_instructions(c)}"


def _own(delta_ns: float) -> str:
    """How a verdict's own (exclusive) time a run moved: "own time +1.20 ms" (it read "exclusive 0 ns"
    beside `main`'s -9.79 ms a run on lz4, as if main had no time of its own)."""
    if not math.isfinite(delta_ns) or round(delta_ns) == 0:
        return "own time unchanged"
    return f"own time {'+' if delta_ns > 0 else ''}{fmt_ns(delta_ns)}"


def within_threshold(relative: float, low: float | None, high: float | None, noise: str) -> str:
    """A run's change within the thresholds, with the interval that says how large a change the check
    could have missed: "the run +1.0% [-2%, +3%], within the thresholds (noise: ...)" (a no change from
    a noisy history is not a measured zero).  The CLI, the report and the dashboard's commit page say
    it alike."""
    if low is None or high is None or math.isnan(low):
        return ""
    said = f" (noise: {noise})" if noise else ""
    return f"the run {_pct(relative)} [{low:+.0%}, {high:+.0%}], within the thresholds{said}"


def _within_noise(r: CheckResult, workload: str) -> str:
    run = next((c for c in r.changes if c.workload == workload and c.function == ROOT and c.type == NO_CHANGE), None)
    return within_threshold(run.relative, run.ci_low, run.ci_high, run.noise) if run else ""


def _inside(r: CheckResult) -> str:
    """What the first line adds when functions got slower inside a run that got faster."""
    faster = faster_runs(list(r.changes))
    slower = [c for c in r.changes if c.type == DEGRADATION and c.workload in faster]
    if r.result != OPTIMIZATION or not slower:
        return ""
    return f" ({len(slower)} function{'s' if len(slower) > 1 else ''} slower inside: {short(slower[0].function, 60)} " \
           f"{_pct(slower[0].relative)}{' and more' if len(slower) > 1 else ''})"


def _elsewhere(r: CheckResult) -> str:
    """What the first line adds when a side was measured under another environment (checks.check)."""
    return (" (but the base was measured under another environment: see the note)"
            if any(n.startswith(ELSEWHERE) for p in r.pairs for n in p.notes) else "")


def headline(r: CheckResult) -> str:
    """The verdict in words, as the terminal, the markdown report and the dashboard's commit page all
    say it: "slower", "faster", ... with what qualifies it (slower functions inside a faster run, a base
    measured under another environment)."""
    return f"{HEADLINE.get(r.result, r.result)}{_inside(r)}{_elsewhere(r)}"


def check_text(r: CheckResult, limit: int = 20) -> str:
    base = f" against {r.base[:12]}" if r.base else ""
    lines = [f"git perf check {r.commit[:12]}{base}: {headline(r)}"]
    for p in r.pairs:
        if p.base_commit and not p.target_profiles:
            lines.append(f"  {p.workload}: against {p.base_commit[:12]}, nothing measured")
        elif p.base_commit:
            lines.append(f"  {p.workload}: {p.target_profiles} run(s) vs {p.base_profiles} of {p.base_commit[:12]}, "
                         f"{p.history_commits} earlier commit(s)" + (f"; noise from {p.noise_source}" if p.noise_source else ""))
            if run := _within_noise(r, p.workload):
                lines.append(f"  {p.workload}: {run}")
        for n in p.notes:
            lines.append(f"  {p.workload}: note: {n}")
    notable = r.notable()
    for c in notable[:limit]:
        lines.append("  " + _line(c))
    if len(notable) > limit:
        lines.append(f"  ... and {len(notable) - limit} more (--json shows all)")
    lines += [f"  warning: {w}" for w in r.warnings]
    return "\n".join(lines)


# The markdown report's last word on how every row was decided.
HOW_DECIDED = ("- Each row's change, interval, before and after are one estimate of what its *measured as* says "
               "(after = before x (1 + change)); traced times are measured under eBPF probes, sampled ones are shares "
               "of the stack samples x run time; instructions are inclusive per run, counted by callgrind (the "
               "witness). A change is a verdict when significant at the configured confidence (Holm-adjusted over all "
               "functions) and its whole interval lies beyond the threshold (`check.min_relative`, "
               "`check.min_absolute_ns`, `check.min_share` of the run); no change when wholly within it; unresolved "
               "when across it.")


def check_markdown(r: CheckResult, subject: str = "") -> str:
    """A report that stands on its own in a pull-request comment: what got slower, by how much, how
    sure, where in the source, and how it was decided."""
    icon = {DEGRADATION: ":red_circle:", OPTIMIZATION: ":green_circle:", NO_CHANGE: ":white_circle:",
            UNRESOLVED: ":large_orange_diamond:", "accepted": ":large_blue_circle:"}.get(r.result, ":grey_question:")
    title = f"{r.commit[:12]}" + (f" ({subject})" if subject else "")
    out = [f"## {icon} git perf: {title}: {headline(r)}", ""]  # ("... is no change" read badly)
    if r.base:
        out.append(f"Compared with **{r.base[:12]}** (the nearest earlier commit with comparable profiles).")
    degr = [c for c in r.changes if c.type == DEGRADATION]
    opt = [c for c in r.changes if c.type == OPTIMIZATION]
    other = [c for c in r.notable() if c.type not in (DEGRADATION, OPTIMIZATION)]
    for title, group in (("Slower", degr), ("Faster", opt)):
        out += _verdict_table(title, group) if group else []
    if other:
        out += ["", "### Other", ""]
        out += [f"- {_code(short(c.function, 80))} ({_md(c.workload)}): {c.type} — {_md(c.method)}" for c in other]
    out += ["", "<details><summary>How this was decided</summary>", ""]
    out += [line for p in r.pairs for line in _how_measured(r, p)]
    out.append(HOW_DECIDED)
    for c in degr[:5]:
        if c.votes:
            out.append(f"- {_code(short(c.function, 80))}: other methods say " +
                       ", ".join(f"{k} {v}" for k, v in sorted(c.votes.items())) + f"; noise {c.noise}.")
    out += [f"- warning: {_md(w)}" for w in r.warnings]
    out += ["", "</details>", ""]
    return "\n".join(out)


def _verdict_table(title: str, group: list[Change]) -> list[str]:
    """The markdown table of one kind of verdict (slower, faster), a row a function."""
    out = ["", f"### {title}", "",
           "| workload | function | change | a run | interval | before | after | measured as | confidence "
           "| instructions | decided by | source |", "|---|---|---:|---|---|---:|---:|---|---:|---:|---|---|"]
    for c in group:
        flag = " *(changed in this commit)*" if c.changed else ""
        instr = _pct(c.instructions[1] / c.instructions[0] - 1) if c.instructions and c.instructions[0] else "-"
        out.append(f"| {_md(c.workload)} | {_code(short(c.function, 80))}{flag} | **{_pct(c.relative)}** "
                   f"| {amount(c.absolute_ns, c.share)} | {_interval(c)} | {fmt_ns(c.base_ns)} | {fmt_ns(c.target_ns)} | "
                   f"{_md(c.measure) or 'per run'} | {fmt_confidence(c.confidence)} | {instr} | {_md(decided_by(c.decided))} | "
                   f"{_md(c.location) or '-'} |")
    return out


def _how_measured(r: CheckResult, p: WorkloadPair) -> list[str]:
    """What one workload's comparison rested on, and its notes, for the report's details."""
    out = []
    if p.base_commit and not p.target_profiles:
        out.append(f"- **{_md(p.workload)}**: against {p.base_commit[:12]}, nothing measured.")
    elif p.base_commit:
        run = _within_noise(r, p.workload)
        out.append(f"- **{_md(p.workload)}**: {p.target_profiles} run(s) against {p.base_profiles} of "
                   f"{p.base_commit[:12]}, {p.history_commits} earlier commit(s) of history; run-to-run noise "
                   f"estimated from {p.noise_source}." + (f" {_md(run[0].upper() + run[1:])}." if run else ""))
    return out + [f"- {_md(p.workload)}: {_md(n)}" for n in p.notes]


def _md(s: str) -> str:
    """Markdown-safe text: C++ names contain <, >, | and * that would become markup."""
    return (s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("*", "\\*").replace("_", "\\_").replace("`", "'"))


def _code(s: str) -> str:
    """A name as inline code; only the table separator and backticks need care inside it."""
    return "`" + s.replace("`", "'").replace("|", "\\|") + "`"


def _calls(c: Change, calls: float) -> str:
    """A side's calls a run; "-" where they were not counted (time from stack samples, no call)."""
    return "-" if c.base_calls == c.target_calls == 0 and (c.base_ns or c.target_ns) else f"{calls:.0f}"


def diff_text(r: CheckResult, top: int = 30) -> str:
    """Per-function table of two commits: time per run, ratio, interval, verdict; where the rows measure
    different things (traced inclusive time, stack samples' inclusive or own time), a mark on each and
    what it means below, so that a reader finds each number in `show` under its name."""
    lines = [f"git perf diff {r.base[:12] if r.base else '?'} {r.commit[:12]}"]
    by_workload: dict[str, list[Change]] = {}
    for c in r.changes:
        by_workload.setdefault(c.workload, []).append(c)
    for wl, cs in by_workload.items():
        cs = sorted(cs, key=lambda c: -max(c.base_ns, c.target_ns))[:top or None]
        measures = list(dict.fromkeys(c.measure for c in cs if c.measure))
        mark = (lambda c: f" [{measures.index(c.measure) + 1}]" if c.measure in measures else "    ") \
            if len(measures) > 1 else (lambda c: "")
        rows = [[c.function, _calls(c, c.base_calls), _calls(c, c.target_calls), fmt_ns(c.base_ns),
                 fmt_ns(c.target_ns) + mark(c), f"{c.target_ns / c.base_ns if c.base_ns else math.inf:.2f}",
                 _interval(c), c.type] for c in cs]
        lines += ["", f"workload {wl}",
                  table(["function", "calls A", "calls B", "A", "B", "ratio", "interval", "verdict"], rows, "lrrrrrrl")]
        lines += [f"  [{i}] {m}" if len(measures) > 1 else f"  A, B: {m}" for i, m in enumerate(measures, 1)]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)
