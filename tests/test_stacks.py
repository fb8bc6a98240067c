"""Call stacks: folding, bounding, inclusive counts, the note codec, `show --folded`, and the flame
graphs' figures (pure logic and the Flask test client; the eBPF side is in test_engine.py and
test_workflows.py)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace

import msgspec
import pytest
from conftest import NAMES, history, read_cli

from gitperf.core import codec, stacks
from gitperf.core.errors import NoteFormatError
from gitperf.web import create_app, plots
from helpers import FLAMEGRAPH_PL, make_profile

# flamegraph.pl's reading of a folded line (its `my ($stack, $samples) = (/^(.*)\s+?(\d+(?:\.\d*)?)$/)`)
FOLDED = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def test_bound_keeps_the_frequent_stacks_and_sums_the_rest_into_one():
    many = {f"main;f{i}": 1 for i in range(50)} | {"main;hot": 950}
    kept = stacks.bound(many, share=0.99, limit=1000)
    assert kept["main;hot"] == 950
    assert sum(kept.values()) == 1000
    assert stacks.OTHER in kept
    assert len(kept) < len(many)
    assert len(stacks.bound(many, share=1.0, limit=10)) == 11  # ten and the rest


def test_inclusive_counts_a_recursive_function_once_per_stack():
    got = stacks.inclusive({"main;fib;fib;fib": 10, "main;fib;[library]": 5, "main": 1})
    assert got == {"main": 16, "fib": 15, "[library]": 5}


def test_folding_keeps_names_whole_and_frames_apart():
    assert stacks.fold(("main", "a;b", "operator new(unsigned long)")) == "main;a:b;operator new(unsigned long)"
    assert stacks.folded({("main", "a;b"): 2, ("main", "a:b"): 3}) == {"main;a:b": 5}
    line = stacks.lines({"main;std::vector<int>::push_back(int const&)": 7}, prefix="w")[0]
    assert FOLDED.match(line).groups() == ("w;main;std::vector<int>::push_back(int const&)", "7")


def test_stacks_survive_the_codec_and_hostile_counts_are_refused():
    p = replace(make_profile("c" * 40), stacks={"main;f": 3, "main;f;[library]": 1})
    assert codec.decode(codec.encode(p)).stacks == p.stacks
    data = codec.to_json(p)
    for bad in ({"main": -1}, {"main": "x"}, ["main"], {"\ud800": 1}):
        with pytest.raises(NoteFormatError):
            codec.from_json({**data, "st": bad})


def test_show_folded_prints_each_workloads_stacks_summed_over_its_runs(empty_repo):
    commits = history(empty_repo, 2, runs=3)
    out = read_cli(empty_repo, "show", commits[1], "--folded").stdout.splitlines()
    parsed = {FOLDED.match(line).group(1): int(FOLDED.match(line).group(2)) for line in out}
    assert parsed["main;parse"] == 3 * 400
    assert parsed["main;parse;[library]"] == 300
    assert f"main;{NAMES[4]};{NAMES[3]}" in parsed  # names as they are, `<` and `|` included
    bare = read_cli(empty_repo, "show", commits[1], "--folded", "--workload", "nosuch")
    assert bare.stdout == ""
    assert "no call stacks are stored" in bare.stderr


def test_flamegraph_pl_renders_show_folded_with_every_frame_and_count(empty_repo):
    """Issue #27: the folded output is what flamegraph.pl reads (the script itself, vendored)."""
    commits = history(empty_repo, 2, runs=3)
    folded = read_cli(empty_repo, "show", commits[1], "--folded").stdout
    r = subprocess.run(["perl", str(FLAMEGRAPH_PL), "--title", "t"], input=folded, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<?xml"), r.stderr
    titles = dict(re.findall(r"<title>(.*?) \(([\d,]+) samples?, [\d.]+%\)</title>", r.stdout))
    counts = {k: int(v.replace(",", "")) for k, v in titles.items()}
    # parse's frame holds its callee's
    assert counts["parse"] == 3 * 400 + 300
    assert counts["[library]"] == 300
    assert counts["all"] == sum(int(FOLDED.match(line).group(2)) for line in folded.splitlines())
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in counts  # the C++-like names arrive whole, escaped by it


def frame_paths(fig: dict) -> list[str]:
    """Each frame of a flame graph figure as its folded path (`main;parse`), from its parents and labels."""
    of = dict(zip(fig["ids"], range(len(fig["ids"]))))
    paths = []
    for k, parent in enumerate(fig["parents"]):
        name = fig["labels"][k].removeprefix("◆ ")
        paths.append(name if k == 0 or parent == plots.ALL else f"{paths[of[parent]]};{name}")
    return paths


def test_a_stack_of_twenty_thousand_frames_draws_in_linear_memory():
    """Issue #37: one pulled stack of 20,000 frames once cost 11 GB (every path prefix a string);
    drawn now to MAX_FLAME_DEPTH frames, its samples whole."""
    import tracemalloc
    deep = ";".join(f"f{i}" for i in range(20_000))
    tracemalloc.start()
    fig = plots.flame("t", {deep: 5, "main;x": 3}, {deep: 4})["data"][0]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * 2 ** 20, peak
    assert len(fig["ids"]) == 1 + plots.MAX_FLAME_DEPTH + 2
    assert fig["values"][0] == 8
    assert frame_paths(fig)[plots.MAX_FLAME_DEPTH].endswith(f";f{plots.MAX_FLAME_DEPTH - 1}")


def test_differential_flame_graph_colours_the_grown_frame_red_and_marks_changed_functions():
    base = {"main;parse": 400, "main;other": 400}
    target = {"main;parse": 1200, "main;other": 400}
    fig = plots.flame("t", target, base, changed=frozenset({"parse"}))["data"][0]
    at = {path: k for k, path in enumerate(frame_paths(fig))}
    colors = fig["marker"]["colors"]
    # shares 50% -> 75%, 50% -> 25%
    assert colors[at["main;parse"]] > 0.4
    assert colors[at["main;other"]] < -0.3
    assert fig["labels"][at["main;parse"]] == "◆ parse"
    assert fig["values"][0] == 1600
    of = {node: k for k, node in enumerate(fig["ids"])}
    assert all(fig["values"][of[p]] >= fig["values"][i] for i, p in enumerate(fig["parents"]) if p)


def test_a_flame_graph_opens_at_main_with_the_kernel_and_unknown_one_click_up():
    """A short run's exec, faults and exit (`[kernel]`, `[unknown]`) took half the width beside the
    program; the graph opens at `main`, the path bar leading up to all samples."""
    fig = plots.flame("t", {"main;parse": 300, "main;emit": 100, "[kernel]": 250, "[unknown]": 150})["data"][0]
    at = {path: k for k, path in enumerate(frame_paths(fig))}
    assert fig["level"] == fig["ids"][at["main"]]
    assert fig["pathbar"]["visible"]
    assert "level" not in plots.flame("t", {"main;parse": 300})["data"][0]  # main is all there is


def test_commit_and_compare_pages_draw_flame_graphs_with_names_escaped(empty_repo):
    commits = history(empty_repo, 3, slow_at=2, runs=2, factor=3.0)
    client = create_app(empty_repo).test_client()
    for url in (f"/commit/{commits[2]}", f"/compare/{commits[1]}/{commits[2]}"):
        page = client.get(url).get_data(as_text=True)
        assert 'id="flamediff-1"' in page, url
        assert 'id="flame-1"' in page, url
        assert "<script>alert(1)</script>" not in page
        assert "flame-search" in page
    first = client.get(f"/commit/{commits[0]}").get_data(as_text=True)
    # no check base: no differential
    assert 'id="flame-1"' in first
    assert 'id="flamediff-1"' not in first


def test_show_says_when_the_stacks_did_not_unwind_to_main():
    from gitperf.core.model import StoredProfile
    from gitperf.views.render import show_text
    p = make_profile("c" * 40)
    cut = replace(p, stacks={"spin": 90, "main;fill": 10, "[kernel]": 500},
                  metrics=replace(p.metrics, rooted_samples=10))
    whole = replace(cut, metrics=replace(p.metrics, rooted_samples=95))
    text = lambda q: show_text("c" * 40, [StoredProfile("c" * 40, 0, "id", q)], 5, False)  # noqa: E731
    assert "10% of the stack samples in the binary unwound to main" in text(cut)  # 10 of 100 ([kernel] apart)
    assert "unwound" not in text(whole)


def test_show_gives_a_stack_only_function_no_calls_and_its_inclusive_time_from_the_stacks():
    """Issue #36: `show` printed calls 0 and total = exclusive for every stack-sampled function.  parse's
    own samples (its code and the library it called) are 500 of 1,000, 600 have it on the stack (a
    callee's 100): inclusive is its own time x 600/500, never below it."""
    import numpy as np
    from conftest import profile
    from gitperf.core.model import FunctionStats, Metrics, StoredProfile
    from gitperf.views.render import profile_json, show_text
    p = profile("c" * 40, np.random.default_rng(1))
    own = 500_000_000
    parse = FunctionStats("parse", 0, own, own, sampled=True, ci=(own * 0.9, own * 1.1))
    p = replace(p, functions=(p.functions[0], parse),
                stacks={"main;parse": 400, "main;parse;[library]": 100, "main;parse;hash": 100, "main": 400},
                metrics=Metrics(PRT=1.2, WAIT=0.2))
    runs = [StoredProfile("c" * 40, i, f"id{i}", p) for i in range(3)]
    row = next(ln for ln in show_text("c" * 40, runs[:1], 5).splitlines() if ln.split()[:1] == ["parse"])
    assert row.split()[1:6] == ["-", "~600.00", "ms", "-", "~500.00"], row  # 500 ms x 600/500
    session = show_text("c" * 40, runs, 5)
    row = next(ln for ln in session.splitlines() if ln.split()[:1] == ["parse"])
    assert row.split()[1:6] == ["3", "-", "~600.00", "ms", "~500.00"], row
    assert "estimated from stack samples" in session
    f = next(f for f in profile_json(runs[0])["functions"] if f["name"] == "parse")
    assert f["inclusive_ns"] == pytest.approx(6e8)
    assert f["counted"] is False
    # a function with no samples of its own (only ever a caller): its stacks' share of the CPU time
    main_only = replace(p, functions=(msgspec.structs.replace(parse, name="main"),), stacks={"main;parse": 1000})
    assert profile_json(StoredProfile("c" * 40, 9, "id9", main_only))["functions"][0]["inclusive_ns"] == pytest.approx(1e9)


def test_charts_have_commit_ticks_true_axis_labels_and_no_webgl(empty_repo):
    """The overview's function chart plots exclusive time under that label with commits on its x axis;
    the model chart is SVG (headless Chromium has no WebGL); a title keeps clear of the toolbar."""
    import json as _json
    commits = history(empty_repo, 3, runs=2)
    page = create_app(empty_repo).test_client().get("/").get_data(as_text=True)
    figs = [_json.loads(m) for m in re.findall(r'<script type="application/json" id="functions-\d+">(.*?)</script>',
                                                page, re.S)]
    assert figs, "no functions chart on the overview"
    lay = figs[0]["layout"]
    assert lay["yaxis"]["title"]["text"].startswith("exclusive")
    assert lay["xaxis"]["ticktext"] == [c[:7] for c in commits]
    assert lay["title"]["xanchor"] == "left"
    model = plots.model_plot("f", [(i, 100 + i) for i in range(20)], [])
    assert all(t["type"] != "scattergl" for t in model["data"])


def test_own_samples_are_the_innermost_binary_frame_of_each_stack():
    folded = {"main;work": 5, "main;work;[library]": 3, "main;work;find;[kernel]": 2, "[kernel]": 4, "[unknown]": 1}
    assert stacks.own(folded) == {"work": 8, "find": 2}
    assert stacks.inclusive(folded)["work"] == 10
