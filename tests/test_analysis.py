"""The call-graph resource, diff tracing and the optimization methods.

Diff tracing runs real angr on real builds of the demo history; the methods are pure functions
tested on small graphs whose right answer is known by hand.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import networkx as nx
import pytest

from gitperf.analysis import callgraph, difftrace, elf
from gitperf.analysis.callgraph import CallGraph, FunctionNode
from gitperf.core.model import FunctionStats
from gitperf.git import sourcediff
from gitperf.git.repo import open_repo
from gitperf.plan import methods, pipelines


def graph(edges: dict[str, list[str]], loops: dict[str, int] | None = None, external=()) -> CallGraph:
    loops = loops or {}
    names = set(edges) | {c for cs in edges.values() for c in cs}
    return CallGraph("test", {n: FunctionNode(n, i, 1, loops.get(n, 0), False, tuple(edges.get(n, ())),
                                              {c: n for c in callgraph.CRITERIA}, n in external)
                              for i, n in enumerate(sorted(names))})


# --- levels -------------------------------------------------------------------------------------

def test_levels_are_longest_paths_and_cycles_are_broken():
    cg = graph({"main": ["a", "b"], "a": ["c"], "b": ["a"], "c": ["d", "e"], "d": ["e"], "e": ["c"]})
    lv = cg.levels
    # longest path, not BFS distance
    assert lv["main"] == 0
    assert lv["b"] == 1
    assert lv["a"] == 2
    # c, d, e form a cycle entered at c: BFS inside the component from its entry
    assert (lv["c"], lv["d"], lv["e"]) == (3, 4, 4)
    assert cg.recursive() == {"c", "d", "e"}


def test_level_estimator_levels_every_node_of_a_large_scc():
    """The acceptance graph: a 500-node strongly connected component and ~8000 edges (the timing is
    in bench/analysis.py; here: it terminates and levels every node)."""
    rng = random.Random(1)
    g = nx.DiGraph()
    ring = [f"s{i}" for i in range(500)]
    g.add_edges_from(zip(ring, ring[1:] + ring[:1]))  # one SCC
    others = [f"n{i}" for i in range(1500)]
    nodes = ["main"] + ring + others
    while g.number_of_edges() < 8000:
        a, b = rng.choice(nodes), rng.choice(nodes[1:])
        g.add_edge(a, b)
    g.add_edge("main", "s0")
    lv = callgraph.estimate_levels(g, "main")
    assert set(lv) == set(g)
    assert all(isinstance(v, int) and v >= 0 for v in lv.values())
    assert lv["main"] == 0
    for a, b in g.edges:  # an edge between components always goes down
        if not nx.has_path(g, b, a):
            assert lv[b] > lv[a]


# --- methods ------------------------------------------------------------------------------------

DEMO_LIKE = {"main": ["parse", "run"], "parse": ["lex", "expr"], "expr": ["expr", "num"],
             "run": ["w1"], "w1": ["w2"], "w2": ["w3"], "w3": ["work"], "work": ["tiny"], "lex": ["tiny"],
             "dead": ["tiny"], "cb": []}


def ctx(cg, protected=(), stats=None):
    return methods.Context(cg, frozenset(cg.graph), frozenset(protected), stats or {})


def test_match_drops_unreachable_and_external_but_keeps_what_ran():
    cg = graph({**DEMO_LIKE, "main": ["parse", "run", "strlen"]}, external={"strlen"})
    seen = {"cb": FunctionStats("cb", 5, 100, 100)}  # called through a pointer: no static edge
    out = methods.match(methods.Context(cg, frozenset(cg.functions), frozenset(), seen))
    assert set(out) == {"dead", "strlen"}
    assert "external" in out["strlen"]


def test_static_baseline_removes_only_proven_constant_time():
    cg = graph(DEMO_LIKE, loops={"work": 1, "lex": 1})
    out = methods.static_baseline(ctx(cg), keep_top=1)
    # tiny is loop-free; num too; expr is recursive; work/lex loop; w1..w3 call a looping function;
    # dead and cb are loop-free but at level 0 (no caller), which the top levels keep
    assert set(out) == {"tiny", "num"}
    assert "tiny" not in methods.static_baseline(ctx(cg, protected={"tiny"}), keep_top=1)


def test_trim_keeps_top_and_bottom_and_min_functions():
    cg = graph(DEMO_LIKE)
    out = methods.trim(ctx(cg), keep_top=2, keep_leaf=True, strict=True)
    # top levels and a leaf
    assert "main" not in out
    assert "parse" not in out
    assert "tiny" not in out
    assert {"w1", "w2"} <= set(out)
    loose = methods.trim(ctx(cg), keep_top=1, keep_leaf=False, min_functions=len(cg.reachable()), strict=True)
    assert not loose  # min-functions grows keep_top until everything reachable is kept


def test_prune_cuts_call_chains_and_never_protected():
    cg = graph(DEMO_LIKE)
    out = methods.prune(ctx(cg), chain_length=2, keep_top=1)
    # run, w1, w2, w3, work each have one caller and one callee: keep every 2nd link
    assert set(out) == {"w1", "w3"}
    assert "chain" in out["w1"]
    assert set(methods.prune(ctx(cg, protected={"w1"}), chain_length=2, keep_top=1)) == {"w3"}


def test_dynamic_baseline_call_limit_constant_time_and_wrappers():
    cg = graph(DEMO_LIKE)
    stats = {"lex": FunctionStats("lex", 50_000, 10**6, 10**6),
             "tiny": FunctionStats("tiny", 900, 9000, 9000, hist=(0, 0, 0, 0, 0, 0, 0, 900)),
             "w3": FunctionStats("w3", 10, 10**6, 10**4), "work": FunctionStats("work", 10, 99 * 10**4, 99 * 10**4)}
    out = methods.dynamic_baseline(ctx(cg, stats=stats), call_limit=10_000, iqr_ratio=0.5, wrappers=True)
    assert "call limit" in out["lex"]
    assert "constant time" in out["tiny"]
    assert "wrapper of work" in out["w3"]
    assert "work" not in out


def test_dynamic_baseline_keeps_out_what_the_baseline_left_out_for_its_statistics():
    cg = graph(DEMO_LIKE)
    # the baseline did not probe tiny (too many calls in its own baseline): it has no statistics for it
    stats = {"work": FunctionStats("work", 10, 10**6, 10**6)}
    before = {"tiny": "dynamic baseline: 90000 calls > call limit 10000", "gone": "dynamic baseline: x"}
    c = methods.Context(cg, frozenset(cg.graph), frozenset(), stats, dropped_before=before)
    assert methods.dynamic_baseline(c, call_limit=10_000) == {"tiny": before["tiny"]}
    # without the baseline's reason it would be probed again (no statistics, no grounds to drop it)
    assert "tiny" not in methods.dynamic_baseline(ctx(cg, stats=stats), call_limit=10_000)
    # a changed (protected) function is probed whatever the baseline did
    c = methods.Context(cg, frozenset(cg.graph), frozenset({"tiny"}), stats, dropped_before=before)
    assert methods.dynamic_baseline(c, call_limit=10_000) == {}


def test_dynamic_sampling_initial_estimate_and_refinement():
    cg = graph(DEMO_LIKE, loops={"work": 1})
    first = methods.dynamic_sampling(ctx(cg), step=2.0, threshold=1000)
    # deeper and cheaper: sparser
    assert first["main"] == 1
    assert first["work"] > first["run"]
    assert first["tiny"] == 2 ** cg.levels["tiny"] * 2  # constant time doubles the period
    stats = {"lex": FunctionStats("lex", 123_456, 1, 1)}
    second = methods.dynamic_sampling(ctx(cg, stats=stats), threshold=1000)
    assert abs(123_456 / second["lex"] - 1000) <= 200


def test_pipelines_protect_changed_functions():
    cg = graph(DEMO_LIKE)
    diff = difftrace.DiffResult("strict", changed=("tiny", "w2"))
    params = pipelines.predict("full", cg, {})
    change = pipelines.run(pipelines.PIPELINES["full"], params,
                           pipelines.start(pipelines.PIPELINES["full"], cg, frozenset(cg.graph), {}, diff))
    assert {"tiny", "w2", "main"} <= change.keep
    assert change.changed == ("tiny", "w2")
    standalone = pipelines.run(("diff-tracing",), {**params, "standalone": True},
                               pipelines.start(("diff-tracing",), cg, frozenset(cg.graph), {}, diff))
    assert standalone.keep == {"tiny", "w2", "main"}


# --- diff tracing on the demo history, real angr ------------------------------------------------

@pytest.fixture(scope="module")
def demo_builds(demo_history, tmp_path_factory):
    src, commits = demo_history
    out = []
    cache = tmp_path_factory.mktemp("cg-cache")
    for i, c in enumerate(commits):
        d = tmp_path_factory.mktemp(f"build{i}")
        subprocess.run(["git", "worktree", "add", "-f", "-q", str(d / "w"), c], cwd=src, check=True)
        subprocess.run(["make", "-s"], cwd=d / "w", check=True, capture_output=True)
        info = elf.load(d / "w" / "wordstat")
        out.append((info, callgraph.load(info.path, info.build_id, cache, lambda m: None)))
    return src, commits, out, cache


@pytest.mark.parametrize("criterion", callgraph.CRITERIA)
def test_diff_tracing_on_the_demo_history(demo_builds, criterion):
    src, commits, builds, _ = demo_builds
    d = [difftrace.diff(builds[i - 1][1], builds[i][1], criterion) for i in range(1, len(builds))]
    comment, rename, slowdown, speedup, new = d
    if criterion != "soft":
        assert comment.changed == ()
        assert not comment.new
        assert not comment.removed
    assert rename.renamed == {"checksum_all": "checksum_strings"}
    assert not rename.new
    assert not rename.removed
    assert "checksum_block" in slowdown.changed
    assert slowdown.protected >= {"checksum_block"}
    assert "text_generate" in speedup.changed
    assert new.new == ("report_lengths",)


def test_source_hunks_map_to_functions(demo_builds):
    src, commits, builds, _ = demo_builds
    repo = open_repo(src)
    locs = elf.source_locations(builds[3][0].path)
    assert "checksum_block" in sourcediff.changed_functions(repo, commits[2], commits[3], locs)
    assert sourcediff.changed_functions(repo, commits[3], commits[4], elf.source_locations(builds[4][0].path)) \
        == {"text_generate"}


def test_a_hunk_touches_the_functions_of_every_file_dwarf_may_name_its_path_by():
    """DWARF names a file as the compiler was given it: relative to the build directory, with `./`
    or `../` before it, or by a longer path than git's; a hunk touches the functions of each name
    that is its path, ends with it, or that it ends with, and of no other file of its base name."""
    at = {"./src/io.c": "read", "../lib/src/io.c": "reread", "io.c": "bare", "src/net/io.c": "deeper",
          "lib/io.c": "other", "src/io.cc": "cxx", "src/mio.c": "prefixed"}
    locations = {name: f"{file}:10" for file, name in at.items()}
    touched = sourcediff.touched([sourcediff.Hunk("src/io.c", 12, 1)], locations)
    assert touched == {"read", "reread", "bare"}


def test_cache_serves_an_unchanged_binary_and_survives_damage(demo_builds):
    _, _, builds, cache = demo_builds
    info, first = builds[0]
    again = callgraph.load(info.path, info.build_id, cache, lambda m: None)
    assert again.cached
    assert again.functions == first.functions
    assert again.levels == first.levels
    f = cache / f"callgraph-{info.build_id}.json"
    f.write_text("{broken")
    rebuilt = callgraph.load(info.path, info.build_id, cache, lambda m: None)
    assert not rebuilt.cached
    assert rebuilt.functions == first.functions


def test_angr_progress_and_bad_input(tmp_path):
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"\x7fELF" + b"\0" * 60)
    from gitperf.core.errors import InputError
    with pytest.raises(InputError, match="angr cannot load"):
        callgraph.load(str(bad), "deadbeef", tmp_path, lambda m: None)


def test_angr_finalizer_errors_are_not_printed_others_are(monkeypatch):
    """Issue #18: an AssertionError in an angr object's __del__ printed a traceback mid-output."""
    import sys

    from gitperf.analysis.callgraph import quiet_angr_finalizers
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: printed.append(str(u.exc_value)))

    def dying(module: str):
        def __del__(self):
            raise AssertionError("from " + module)
        __del__.__module__ = module
        return type("Dying", (), {"__del__": __del__, "__module__": module})()

    with quiet_angr_finalizers():
        x = dying("angr.state_plugins.fake")
        del x
        y = dying("someone.else")
        del y
    assert printed == ["from someone.else"]


def test_call_sites_tell_return_addresses_from_other_text_words(tmp_path):
    """The stack scan of a library sample takes the first text address above the stack pointer;
    only one that follows a call can be the caller's return address."""
    import capstone
    src = tmp_path / "p.c"
    src.write_text("__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }\n"
                   "__attribute__((noinline)) int caller(int x) { return leaf(x) * 2 + 5; }\n"
                   "int (*volatile pick)(int) = leaf;\n"
                   "int main(int c, char **v) { (void)v; return caller(c) + pick(c); }\n")
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-o", str(tmp_path / "p"), str(src)], check=True)
    binary = elf.load(tmp_path / "p")
    f = binary.by_name()
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    with open(binary.path, "rb") as fh:
        fh.seek(f["caller"].offset)
        code = fh.read(f["caller"].size)
    [call] = [i for i in md.disasm(code, f["caller"].vaddr) if i.mnemonic == "call"]
    sites = elf.CallSites(binary)
    assert sites.after_call(call.address + call.size)  # the return address of caller's call of leaf
    assert not sites.after_call(call.address + call.size + 1)
    assert not sites.after_call(f["leaf"].vaddr)  # a code pointer (`pick`), not a return address
    assert not sites.after_call(call.address)


@pytest.mark.parametrize("flags, entry", [
    ([], "singlestep"),  # `lea`: the kernel steps it out of line
    (["-fpatchable-function-entry=5"], "nop"),  # five one-byte NOPs: emulated
    (["-fno-pie", "-pg", "-mfentry", "-mnop-mcount"], "nop5"),  # one 5-byte NOP: a trampoline call on 6.18+
])
def test_entry_classes_of_real_builds(tmp_path, flags, entry):
    src = tmp_path / "p.c"
    src.write_text("__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }\n"
                   "int main(int c, char **v) { (void)v; return (int)leaf(c); }\n")
    link = ["-no-pie"] if "-fno-pie" in flags else []
    subprocess.run(["cc", "-O2", *flags, "-c", "-o", str(tmp_path / "p.o"), str(src)], check=True)
    subprocess.run(["cc", *link, "-o", str(tmp_path / "p"), str(tmp_path / "p.o")], check=True)
    assert elf.load(tmp_path / "p").by_name()["leaf"].entry == entry
    assert elf.classify("nop", elf.NOP5) == "nop5"
    assert elf.classify("nop", b"\x90") == "nop"


def test_probe_pad_builds_keep_the_makefiles_own_flags(tmp_path):
    """`build.probe_pad`: the wrapped compilers add the pad to every function while a makefile's
    `CFLAGS ?= ...` keeps its -g (an exported CFLAGS would have replaced it), and the wrappers are
    rewritten, not stacked, by a second build."""
    from gitperf.core.config import BuildConfig
    from gitperf.git.worktree import run_build
    (tmp_path / "p.c").write_text("__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }\n"
                                  "int main(int c, char **v) { (void)v; return (int)leaf(c); }\n")
    (tmp_path / "Makefile").write_text("CFLAGS ?= -O2 -g\np: p.c\n\t$(CC) $(CFLAGS) -o $@ $<\n")
    perf = tmp_path / "perf"
    perf.mkdir()
    build = BuildConfig(command="make -s -B", binary="p", probe_pad=True)
    for _ in range(2):
        run_build(build, tmp_path, "0" * 40, perf)
    binary = elf.load(tmp_path / "p")
    assert binary.by_name()["leaf"].entry == "nop"
    sections = subprocess.run(["readelf", "-S", str(tmp_path / "p")], capture_output=True, text=True).stdout
    assert ".debug_info" in sections
    assert (perf / "probe-pad-bin" / "cc").read_text().count("-fpatchable-function-entry=5") == 1
    run_build(BuildConfig(command="make -s -B", binary="p"), tmp_path, "0" * 40, perf)
    assert elf.load(tmp_path / "p").by_name()["leaf"].entry == "singlestep"


def test_tail_calls_are_calls_in_the_call_graph_of_the_diff(tmp_path):
    """`return g(x + 1)` compiles to `jmp g`: g's caller must still be found (Lua's luaS_newlstr ends in
    a jump to internshrstr; without it a paired check traced the wrong callers)."""
    from gitperf.analysis import bindiff
    src = tmp_path / "p.c"
    src.write_text("__attribute__((noinline)) long g(long x) { return x * 3 + 1; }\n"
                   "__attribute__((noinline)) long f(long x) { return g(x + 1); }\n"
                   "__attribute__((noinline)) long loop(long n) { while (n > 1) n = n & 1 ? 3 * n + 1 : n / 2;"
                   " return n; }\n"
                   "int main(int c, char **v) { (void)v; return (int)(f(c) + loop(c)); }\n")
    subprocess.run(["cc", "-O2", "-o", str(tmp_path / "p"), str(src)], check=True)
    code = bindiff.read_code(elf.load(tmp_path / "p"))
    assert code.calls["f"] == {"g"}
    assert "loop" not in code.calls["loop"]
    assert code.calls["g"] == set()
    assert bindiff.Code({}, code.calls).callers({"g"}) == {"f"}


def _compiled(tmp_path, name: str, text: str):
    src = tmp_path / f"{name}.c"
    src.write_text(text)
    subprocess.run(["cc", "-O2", "-o", str(tmp_path / name), str(src)], check=True)
    return elf.load(tmp_path / name)


def test_the_diff_follows_renames_and_sees_a_call_into_another_library_function(tmp_path):
    """What a commit can change without changing code: a function renamed (its callers then call it
    by another name: relocated, not changed), its place in the file.  What it cannot: calling another
    library function (`strncmp` instead of `memcmp` through the PLT) is other code."""
    from gitperf.analysis import bindiff
    body = ("#include <string.h>\n#include <stdio.h>\n"
            "__attribute__((noinline)) long {name}(const char *a, const char *b) {{ return {cmp}(a, b{n}) + 1; }}\n"
            "__attribute__((noinline)) long other(long x) {{ return x * 7 + 3; }}\n"
            "int main(int c, char **v) {{ printf(\"%ld\\n\", {name}(v[0], v[c - 1]) + other(c)); return 0; }}\n")
    base = _compiled(tmp_path, "a", body.format(name="same", cmp="memcmp", n=", 3"))
    renamed = _compiled(tmp_path, "b", body.format(name="alike", cmp="memcmp", n=", 3"))
    d = bindiff.diff(base, renamed)
    assert d.renamed == {"same": "alike"}, d
    assert d.relocated == ("main",), d
    assert d.nothing_changed, d
    assert "memcmp@plt" in bindiff.plt_names(str(tmp_path / "a")).values()
    other = _compiled(tmp_path, "c", body.format(name="same", cmp="strncmp", n=", 3"))  # the same code but the callee
    d = bindiff.diff(base, other)
    assert d.changed == ("same",), d
    assert not d.nothing_changed, d


def test_a_compiler_clone_is_matched_with_its_function_across_builds(tmp_path):
    """GCC names a clone after its function and numbers it as it likes: `work` called with the
    constant 3 everywhere becomes `work.constprop.0`; once a caller passes 4 it is plain `work` again.
    The diff pairs the two as one function whose code changed, not one removed and one new, and the
    check's plan probes each side under its own name."""
    from gitperf.analysis import bindiff
    from gitperf.core.config import CollectConfig
    from gitperf.plan import focus
    body = ("static __attribute__((noinline)) long work(const char *s, int n) "
            "{{ long t = 0; for (int i = 0; i < n; i++) t += s[i] * 7; return t; }}\n"
            "int main(int c, char **v) {{ (void)c; return (int)(work(v[0], 3) + work(v[0] + 1, {n})); }}\n")
    base, target = _compiled(tmp_path, "a", body.format(n=3)), _compiled(tmp_path, "b", body.format(n=4))
    names = {f.name for f in base.functions}, {f.name for f in target.functions}
    assert "work.constprop.0" in names[0], names
    assert "work" in names[1], names
    assert "work" not in names[0], names
    d = bindiff.diff(base, target)
    assert d.renamed == {"work.constprop.0": "work"}, d
    assert "work" in d.changed, d
    assert "work" not in d.new, d
    assert "work.constprop.0" not in d.removed, d
    f = focus.Focus(changed=("main", "work"), new=(), callers=(), traced=("main", "work"), sampled={}, reaches={},
                    stack_hz=99, calls={}, renamed=d.renamed)
    plans = [focus.side_plan(b, CollectConfig(), {}, f, "base").plan for b in (base, target)]
    assert [sorted(p.traced) for p in plans] == [["main", "work.constprop.0"], ["main", "work"]]


def test_each_sides_plan_lists_the_focus_functions_its_own_build_has_its_libraries_too(tmp_path):
    """A paired check's two plans share one focus; each lists as changed what its own build has, so that
    a function in the target's list and not in the base's is new (`checks.sides.lacks`).  tinyxml2's
    b2e08e4 added `XMLPrinter::Putc` to its library, and the base's plan listed it too: only samples
    caught it, and nothing told it new."""
    from dataclasses import replace
    from gitperf.core.config import CollectConfig
    from gitperf.plan import focus
    lib = ("__attribute__((noinline)) long shared(long x) {{ return x * 3 + {k}; }}\n{extra}"
           "int main(int c, char **v) {{ (void)v; return (int)shared(c); }}\n")
    base_lib = _compiled(tmp_path, "la", lib.format(k=1, extra=""))
    target_lib = _compiled(tmp_path, "lb", lib.format(k=2, extra="__attribute__((noinline)) long putc_new(long x) "
                                                                    "{ return x ^ 5; }\n"))
    app = _compiled(tmp_path, "app", "int main(void) { return 0; }\n")
    f = focus.Focus(changed=(), new=(), callers=(), traced=("main",), sampled={}, library_changed=("putc_new", "shared"))
    plans = [focus.side_plan(replace(app, libraries=(lib,)), CollectConfig(), {}, f, "base").plan
             for lib in (base_lib, target_lib)]
    assert [p.changed for p in plans] == [("shared",), ("putc_new", "shared")]
    # the reverse commit: a function the library lost is in the base's list only (removed, where only samples caught it)
    f = replace(f, library_changed=("shared",), library_removed=("putc_new",))
    plans = [focus.side_plan(replace(app, libraries=(lib,)), CollectConfig(), {}, f, "base").plan
             for lib in (target_lib, base_lib)]
    assert [p.changed for p in plans] == [("shared", "putc_new"), ("shared",)]


def test_a_function_inlined_away_is_told_from_one_removed(tmp_path):
    """`helper` was a function of its own; the commit made it `always_inline`: gone from the symbols,
    its code inside `work` (the target's DWARF says so).  The diff names where it went; a function
    that really went away has no such entry."""
    from gitperf.analysis import bindiff
    body = ("static {attr} long helper(const char *s, int n) "
            "{{ long t = 0; for (int i = 0; i < n; i++) t += s[i] * 7; return t; }}\n"
            "__attribute__((noinline)) long work(const char *s, int n) {{ return {body}; }}\n"
            "int main(int c, char **v) {{ return (int)work(v[0], c + 2); }}\n")
    helper_body = "helper(s, n) + helper(s + 1, n - 1)"

    def build(name, attr, call):
        src = tmp_path / f"{name}.c"
        src.write_text(body.format(attr=attr, body=call))
        subprocess.run(["cc", "-O2", "-g", "-o", str(tmp_path / name), str(src)], check=True)
        return elf.load(tmp_path / name)
    base = build("a", "__attribute__((noinline))", helper_body)
    inlined = bindiff.diff(base, build("b", "inline __attribute__((always_inline))", helper_body))
    assert inlined.removed == ("helper",), inlined
    assert inlined.inlined == {"helper": ("work",)}, inlined
    dropped = bindiff.diff(base, build("c", "__attribute__((noinline, unused))", "(long)s[n]"))
    assert dropped.removed == ("helper",), dropped
    assert not dropped.inlined, dropped


def test_object_files_linked_in_another_order_change_no_function_of_a_position_dependent_binary(tmp_path):
    """Built -no-pie (as a check's 5-byte entry pad builds C++), code names its data by absolute
    address: `mov edi, 0x447420`.  Linking the objects in another order moves the data and with it
    those immediates; the diff masks addresses anywhere in the loaded image, not only in the text."""
    from gitperf.analysis import bindiff
    (tmp_path / "a.c").write_text("#include <stdio.h>\nstatic const char msg[] = \"a says %d\\n\";\n"
                                  "__attribute__((noinline)) void say_a(int x) { printf(msg, x); }\n")
    (tmp_path / "b.c").write_text("#include <stdio.h>\nstatic char buf[4096];\nvoid say_a(int);\n"
                                  "__attribute__((noinline)) void say_b(int x) { snprintf(buf, sizeof buf, \"%d\", x); "
                                  "puts(buf); }\nint main(int c, char **v) { (void)v; say_a(c); say_b(c); return 0; }\n")
    for unit in ("a", "b"):
        subprocess.run(["cc", "-O2", "-fno-pie", "-c", "-o", str(tmp_path / f"{unit}.o"), str(tmp_path / f"{unit}.c")],
                       check=True)
    for name, order in (("ab", ["a.o", "b.o"]), ("ba", ["b.o", "a.o"])):
        subprocess.run(["cc", "-no-pie", "-o", name, *order], cwd=tmp_path, check=True)
    base, moved = elf.load(tmp_path / "ab"), elf.load(tmp_path / "ba")
    assert not base.pie
    assert base.by_name()["say_a"].vaddr != moved.by_name()["say_a"].vaddr
    d = bindiff.diff(base, moved)
    assert d.nothing_changed, d


def test_a_padded_build_never_reuses_the_work_trees_unpadded_objects(tmp_path):
    """The user built the clean HEAD in the work tree without the pad; a check that wants padded entries
    (`check --collect` by default, or build.probe_pad) builds in a fresh worktree: make in the work
    tree would find its objects up to date and leave them unpadded (a check once compared a padded base
    with an unpadded target and called all 737 functions changed)."""
    from gitperf.collect.context import CollectRequest, Target
    from gitperf.collect.resolve import resolve
    from gitperf.core.config import BuildConfig
    from gitperf.git.repo import open_repo
    from gitperf.git.worktree import checkout, run_build
    root = tmp_path / "w"
    root.mkdir()
    (root / "p.c").write_text("__attribute__((noinline)) long leaf(long x) { return x * 3 + 1; }\n"
                              "int main(int c, char **v) { (void)v; return (int)leaf(c); }\n")
    (root / "Makefile").write_text("CFLAGS ?= -O2 -g\np: p.c\n\t$(CC) $(CFLAGS) -o $@ $<\n")
    (root / ".gitignore").write_text("p\n")
    (root / ".gitperf.toml").write_text('[build]\ncommand = "make -s"\nbinary = "p"\n'
                                        '[[workload]]\nname = "w"\ncommand = "./p"\n')
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("-c", "user.name=t", "-c", "user.email=t@t",
                                                               "commit", "-qm", "one")):
        subprocess.run(["git", *args], cwd=root, check=True)
    subprocess.run(["make", "-s"], cwd=root, check=True)  # the user's own, unpadded build
    assert elf.load(root / "p").by_name()["leaf"].entry == "singlestep"
    repo = open_repo(root)
    head = str(repo.head.target)
    perf = tmp_path / "perf"
    perf.mkdir()

    def target(**req) -> Target:
        return Target(repo, CollectRequest(rev=head, **req), head, None, lambda _m: None, perf)

    assert resolve(target()).in_worktree  # nothing asks for the pad: the work tree's build is this commit's
    for t in (target(probe_pad=True), target(fresh=True)):
        assert not resolve(t).in_worktree
    with checkout(repo, head, fresh=not resolve(target(probe_pad=True)).in_worktree) as tree:
        assert tree != root
        run_build(BuildConfig(command="make -s", binary="p", probe_pad=True), tree, head, perf)
        assert elf.load(tree / "p").by_name()["leaf"].entry == "nop"
    assert elf.load(root / "p").by_name()["leaf"].entry == "singlestep"  # the user's tree untouched
    assert not list(perf.glob("build-*.lock"))  # a temporary worktree's build lock does not pile up


def test_a_cold_part_is_its_functions_code():
    from gitperf.core.names import whole
    assert whole("main.cold") == "main"
    assert whole("_ZN5Index8add_termERKSsl.cold.2") == "_ZN5Index8add_termERKSsl"
    # callable clones stay apart
    assert whole("f.part.0") == "f.part.0"
    assert whole("g.isra.0") == "g.isra.0"


def test_kernel_field_offsets_come_from_its_btf_and_bad_input_is_a_clear_error(tmp_path):
    """The probes read a thread's run-queue wait at the offset the running kernel's BTF gives
    (the installed headers may be another kernel's: 6.1 headers on a 6.18 kernel here)."""
    from gitperf.engine import btf
    if not btf.VMLINUX.exists():
        pytest.skip("this kernel has no /sys/kernel/btf/vmlinux")
    assert btf.field_offset("sched_info.run_delay") < 64  # (pcount, then run_delay, in every kernel since 2.6)
    assert btf.field_offset("task_struct.sched_info.run_delay") == \
        btf.field_offset("task_struct.sched_info") + btf.field_offset("sched_info.run_delay")
    with pytest.raises(btf.BtfError, match="no member nonesuch"):
        btf.field_offset("task_struct.nonesuch")
    bad = tmp_path / "vmlinux"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(btf.BtfError, match="not BTF"):
        btf.field_offset("task_struct.pid", bad)
    with pytest.raises(btf.BtfError, match="cannot read"):
        btf.field_offset("task_struct.pid", tmp_path / "missing")


LIB_C = "unsigned sum(const unsigned char *p, int n) { unsigned s = 0; for (int i = 0; i < n; i++) s += p[i]; return s; }\n"
FASTER_LIB_C = ("unsigned sum(const unsigned char *p, int n) { unsigned a = 0, b = 0; int i = 0;\n"
                "  for (; i + 1 < n; i += 2) { a += p[i]; b += p[i + 1]; } if (i < n) a += p[i]; return a + b; }\n")
PROG_C = ("#include <stdio.h>\nunsigned sum(const unsigned char *p, int n);\n"
          "int main(void) { unsigned char b[64] = {1}; printf(\"%u\\n\", sum(b, 64)); return 0; }\n")


def _build_with_library(tree, lib_c: str) -> str:
    """A program linked with its own shared library in build/, found through its run path, as CMake
    builds zlib's minigzip with build/libz.so.1."""
    (tree / "build").mkdir(parents=True)
    (tree / "lib.c").write_text(lib_c)
    (tree / "prog.c").write_text(PROG_C)
    subprocess.run(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,-soname,libsum.so.1", "-o", "build/libsum.so.1", "lib.c"],
                   cwd=tree, check=True)
    subprocess.run(["gcc", "-O2", "-g", "-o", "build/prog", "prog.c", "build/libsum.so.1",
                    f"-Wl,-rpath,{tree / 'build'}"], cwd=tree, check=True)
    return str(tree / "build" / "prog")


def test_a_change_in_the_projects_own_library_is_seen_though_the_binary_is_the_same(tmp_path):
    """zlib's f8719f5 made crc32 1.5-3x faster and left minigzip's code as it was (CMake links it
    with build/libz.so.1): the binary's diff found no function changed and the paired check measured
    nothing.  The binary's own libraries are found through its run path and diffed by function;
    libraries outside the tree (libc) are not the project's."""
    from gitperf.analysis import bindiff
    base, same, target = (_build_with_library(tmp_path / side, code)
                          for side, code in (("a", LIB_C), ("b", LIB_C), ("c", FASTER_LIB_C)))
    libs = {p: elf.own_libraries(p, str(Path(p).parents[1])) for p in (base, same, target)}
    assert list(libs[base]) == ["libsum.so.1"]
    assert libs[base]["libsum.so.1"].startswith(str(tmp_path / "a"))
    assert bindiff.diff(elf.load(base), elf.load(target)).nothing_changed  # what the binary alone says
    assert bindiff.library_changes(libs[base], libs[same]).said == ""  # the same source built elsewhere
    assert bindiff.library_changes(libs[base], libs[target]).said == "libsum.so.1: changed sum"
    assert bindiff.library_changes(libs[base], libs[target]).functions == {"sum"}
    assert bindiff.library_changes(libs[base], {}).said == "libsum.so.1 gone"
    assert elf.own_libraries(base, str(tmp_path / "elsewhere")) == {}  # a run path outside the tree


def test_a_function_the_projects_library_lost_is_removed_and_one_inlined_says_where(tmp_path):
    """A function gone from the project's own library is no row of a check unless the focus says the
    base's library had it (`Focus.library_removed`: the base's plan lists it, `checks.sides.lacks`); one
    the compiler now inlines is told as inlined into its callers, as the binary's own are."""
    from gitperf.analysis import bindiff
    helper = ("static {attr} unsigned mix(unsigned s, unsigned char c) {{ return s * 31 + c; }}\n"
              "unsigned sum(const unsigned char *p, int n) {{ unsigned s = 0; for (int i = 0; i < n; i++) "
              "s = {body}; return s; }}\n")
    sides = {"a": helper.format(attr="__attribute__((noinline))", body="mix(s, p[i])"),
             "b": helper.format(attr="inline __attribute__((always_inline))", body="mix(s, p[i])"),
             "c": "unsigned sum(const unsigned char *p, int n) { unsigned s = 0; for (int i = 0; i < n; i++) "
                  "s += p[i]; return s; }\n"}
    libs = {side: elf.own_libraries(_build_with_library(tmp_path / side, code), str(tmp_path / side))
            for side, code in sides.items()}
    inlined, gone = bindiff.library_changes(libs["a"], libs["b"]), bindiff.library_changes(libs["a"], libs["c"])
    assert (inlined.removed, inlined.inlined) == ({"mix"}, {"mix": ("sum",)}), inlined
    assert (gone.removed, gone.inlined) == ({"mix"}, {}), gone
    assert gone.functions == {"sum"}, "a removed function is not among the changed and new"


def test_a_library_beside_the_program_at_the_trees_root_is_the_projects_own(tmp_path):
    """A Makefile project (cJSON) builds its library and program at the tree's root, the program's run
    path `$ORIGIN`: its library is the project's own, and a change in it is seen."""
    from gitperf.analysis import bindiff
    progs = []
    for side, code in (("a", LIB_C), ("c", FASTER_LIB_C)):
        tree = tmp_path / side
        tree.mkdir()
        (tree / "lib.c").write_text(code)
        (tree / "prog.c").write_text(PROG_C)
        subprocess.run(["gcc", "-O2", "-g", "-shared", "-fPIC", "-Wl,-soname,libsum.so.1", "-o", "libsum.so.1",
                        "lib.c"], cwd=tree, check=True)
        subprocess.run(["gcc", "-O2", "-g", "-o", "prog", "prog.c", "libsum.so.1", "-Wl,-rpath,$ORIGIN"], cwd=tree,
                       check=True)
        progs.append(str(tree / "prog"))
    libs = [elf.own_libraries(p, str(Path(p).parent)) for p in progs]
    assert libs[0] == {"libsum.so.1": str(tmp_path / "a" / "libsum.so.1")}
    assert bindiff.library_changes(libs[0], libs[1]).functions == {"sum"}
    assert elf.own_libraries(progs[0], str(tmp_path / "a" / "sub")) == {}  # the root below the library: not inside


def _calls(binary, name: str) -> dict[str, int]:
    """The functions `name` calls directly -> the return address of (the first) such call."""
    import capstone
    f = binary.by_name()[name]
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    with open(binary.path, "rb") as fh:
        fh.seek(f.offset)
        code = fh.read(f.size)
    out = {}
    for i in md.disasm(code, f.vaddr):
        if i.mnemonic == "call" and i.op_str.startswith("0x") and (g := binary.symbolize(int(i.op_str, 16))):
            out.setdefault(g.name, i.address + i.size)  # (calls through the PLT name no function here)
    return out


def test_a_frameless_leaf_and_a_tail_call_are_put_back_under_their_real_callers(tmp_path):
    """Issue #55, item 2, on a real build: the unwind table says where `travel`'s return address is
    at every instruction (its frame is never set up), and a sample in it gets the caller a
    frame-pointer walk skips — `relax`, or `via`, which tail-called it from `astar`."""
    from helpers import build_leaf

    from gitperf.analysis import unwind
    binary = elf.load(build_leaf(tmp_path))
    f = binary.by_name()
    frames = unwind.Frames(binary)
    travel, relax = f["travel"], f["relax"]
    # the premises: a frameless leaf, and a tail jump the compiler really made
    assert {frames.slots.slot(a) for a in range(travel.vaddr, travel.vaddr + travel.size)} == {0}
    assert frames._tail_jumps(f["via"].vaddr) == {travel.vaddr}
    # relax keeps a frame: its return address is at %rsp only at its entry
    assert frames.slots.slot(relax.vaddr) == 0
    assert None in {frames.slots.slot(a) for a in range(relax.vaddr, relax.vaddr + relax.size)}
    main_calls = _calls(binary, "main")
    in_travel = travel.vaddr + travel.size // 2
    named = lambda addrs: [binary.symbolize(a - (1 if k else 0)).name for k, a in enumerate(addrs)]  # noqa: E731
    # the walk from main's frame: [sample, main's return address of its call of relax]; the word at
    # %rsp is relax's return address, which the table says is the one to take
    walk = frames.walk([in_travel, main_calls["relax"]], (_calls(binary, "relax")["travel"], 0))
    assert named(walk) == ["travel", "relax", "main"]
    # through the tail call: the word at %rsp returns into astar after its call of via
    walk = frames.walk([in_travel, main_calls["astar"]], (_calls(binary, "astar")["via"], 0))
    assert named(walk) == ["travel", "via", "astar", "main"]
    # a word that follows no call is no return address: the walk is left as it was
    assert frames.walk([in_travel, main_calls["relax"]], (travel.vaddr, 0)) == [in_travel, main_calls["relax"]]
    # nor is anything put back where the frame is set up (relax's body after `mov %rsp,%rbp`)
    framed = next(a for a in range(relax.vaddr, relax.vaddr + relax.size) if frames.slots.slot(a) is None)
    assert frames.walk([framed, main_calls["relax"]], (main_calls["astar"], 0)) == [framed, main_calls["relax"]]


def test_a_cxx_function_whose_signature_changed_is_paired_with_its_old_self():
    """Issue #55: `find_id(const std::string&)` -> `find_id(std::string)` (4.8x its instructions) was
    "new" beside "removed".  Its qualified name is the same: one function, renamed and changed.  Two
    overloads changed at once are ambiguous, and C names carry no signature: no match."""
    from gitperf.analysis.bindiff import Code, renames
    ref = "_ZN5Index7find_idERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    val = "_ZN5Index7find_idENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    a = Code({ref: "old code", "main": "m", "c_fn": "x"}, {})
    b = Code({val: "new code", "main": "m", "c_fn2": "y"}, {})
    assert renames(a, b) == {ref: val}
    other = "_ZN5Index7find_idEi"  # a second overload of find_id added too: which is which is unknown
    assert renames(a, Code({**b.fingerprints, other: "z"}, {})) == {}


def test_the_plugins_a_program_may_dlopen_from_its_build_are_its_own_libraries(tmp_path):
    """Issue #55, item 1: a program that calls dlopen has the shared objects beside it and under it
    (two levels) among the project's own libraries, once each (a versioned library's symlinks are
    one file); a program that does not call dlopen has only what it needs."""
    import os
    from gitperf.analysis import elf
    (tmp_path / "build" / "plugins").mkdir(parents=True)
    (tmp_path / "p.c").write_text("unsigned work(int r) { return r * 3u; }\n")
    subprocess.run(["cc", "-O2", "-g", "-shared", "-fPIC", "-o", "build/plugins/libwork.so.1", "p.c"], cwd=tmp_path,
                   check=True)
    os.symlink("libwork.so.1", tmp_path / "build" / "plugins" / "libwork.so")
    (tmp_path / "build" / "notes.so.txt").write_text("not a library")
    (tmp_path / "a.c").write_text('#include <dlfcn.h>\nint main(void) { return dlopen("x", RTLD_NOW) != 0; }\n')
    (tmp_path / "b.c").write_text("int main(void) { return 0; }\n")
    for prog in ("a", "b"):
        subprocess.run(["cc", "-O2", "-o", f"build/{prog}", f"{prog}.c", "-ldl"], cwd=tmp_path, check=True)
    found = elf.own_libraries(str(tmp_path / "build" / "a"), str(tmp_path))
    assert list(found) in (["libwork.so"], ["libwork.so.1"]), found
    assert elf.own_libraries(str(tmp_path / "build" / "b"), str(tmp_path)) == {}
