"""C++ programs (issue #38): padded builds that link, names people read.

The padding tests compile with the machine's real compilers; the check runs under real eBPF on a
three-unit C++ program (`cxxproj`) whose every unit instantiates `std::vector<std::string>`, the case
GCC 12's `-fpatchable-function-entry` cannot link.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, read_cli
from helpers import FLAMEGRAPH_PL, assert_one_estimate, assert_one_scale

import cxxproj
from gitperf.analysis import elf
from gitperf.core import adopt, names
from gitperf.core.config import BuildConfig
from gitperf.git import pad
from gitperf.git.repo import open_repo
from gitperf.git.worktree import checkout, run_build
from gitperf.store.notes import NotesStore

SCAN = "_ZNK6Widget4scanERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
SCAN_READABLE = "Widget::scan(std::string const&) const"
REALLOC = ("_ZNSt6vectorINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESaIS5_EE17_M_realloc_insertIJS5_EEEvN9"
           "__gnu_cxx17__normal_iteratorIPS5_S7_EEDpOT_")


def test_names_are_demangled_with_the_standard_librarys_typedefs():
    assert names.readable(SCAN) == SCAN_READABLE
    assert names.readable(SCAN + ".cold") == SCAN_READABLE + " [clone .cold]"
    assert names.readable(REALLOC) == ("void std::vector<std::string>::_M_realloc_insert<std::string>(__gnu_cxx::"
                                       "__normal_iterator<std::string*, std::vector<std::string> >, std::string&&)")
    for plain in ("main", "luaH_resize", "_Znot_a_symbol", "[library]", ""):
        assert names.readable(plain) == plain


def test_short_names_elide_templates_first_and_stay_apart_in_a_table():
    assert names.short(REALLOC, 60) == "void std::vector<…>::_M_realloc_insert<…>(…)"
    assert names.short(SCAN, 60) == SCAN_READABLE  # fits: unchanged
    # two instantiations whose short forms collide keep the end where they differ
    a, b = "_Z12count_if_lenILi5EElRKSt6vectorINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESaIS6_EE", \
        "_Z12count_if_lenILi7EElRKSt6vectorINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESaIS6_EE"
    la, lb = names.labels([a, b], 30)
    assert la != lb
    assert len(la) <= 30
    assert len(lb) <= 30


def _cxx_compiler() -> str:
    real = shutil.which("g++") or shutil.which("c++")
    if real is None:
        pytest.skip("no C++ compiler (scripts/setup.sh installs gcc and g++)")
    return real


def test_the_chosen_padding_links_the_two_unit_template_program_and_pads_its_functions(tmp_path):
    """Whatever the compiler, the padding chosen for it links two units that both instantiate
    std::vector<std::string> (GCC 12's -fpatchable-function-entry does not), and pads main; the choice is
    cached per compiler version."""
    real = _cxx_compiler()
    chosen = pad.choose(real, tmp_path)
    assert chosen.name, f"no padding links with {real}"
    work = tmp_path / "again"
    work.mkdir()
    assert pad.links(real, chosen, work)
    assert json.loads((tmp_path / "pads.json").read_text()) == {pad._identity(real): chosen.name}
    (tmp_path / "pads.json").write_text("{not json")  # a damaged cache is asked again, not trusted
    assert pad.choose(real, tmp_path) == chosen


def test_the_wrapper_builds_shared_libraries_and_one_step_programs_without_gprofs_run_time(tmp_path):
    """The mfentry wrapper keeps -pg off the link line (gprof's start-up would write gmon.out) and off
    -fPIC compiles (GCC refuses -mnop-mcount there); the build's -fomit-frame-pointer is dropped where
    -pg refuses it."""
    real = _cxx_compiler()
    shim = tmp_path / "c++"
    shim.write_text(pad.shim(real, pad.MFENTRY))
    shim.chmod(0o755)
    (tmp_path / "a.cc").write_text(pad._CXX_UNITS["a.cc"])
    (tmp_path / "b.cc").write_text(pad._CXX_UNITS["b.cc"])
    run = lambda *argv: subprocess.run([str(shim), *argv], cwd=tmp_path, capture_output=True, text=True)  # noqa: E731
    assert run("-O2", "-fomit-frame-pointer", "-c", "a.cc", "b.cc").returncode == 0
    assert run("a.o", "b.o", "-o", "t").returncode == 0
    assert run("-O2", "a.cc", "b.cc", "-o", "one").returncode == 0
    assert run("-O2", "-fPIC", "-shared", "a.cc", "-o", "liba.so").returncode == 0
    for exe in ("t", "one"):
        assert subprocess.run([str(tmp_path / exe)], cwd=tmp_path).returncode == 0
    assert not (tmp_path / "gmon.out").exists()
    assert pad._padded_entry(tmp_path / "t")


def test_the_wrapper_adds_source_locations_and_changes_no_generated_code(tmp_path):
    """lz4 builds with -O3 and no -g: its check's *source* column was "-" throughout.  The wrappers
    add -g (`pad.DEBUG_INFO`), and the program's machine code is byte for byte what the same flags
    without it compile."""
    real = shutil.which("cc") or pytest.skip("no C compiler (scripts/setup.sh installs gcc)")
    (tmp_path / "p.c").write_text("static int sq(int x) { return x * x; }\n"
                                  "int main(int argc, char **argv) { (void)argv; int s = 0;\n"
                                  "  for (int i = 0; i < argc * 1000; i++) s += sq(i) % 7;\n  return s & 1; }\n")
    shim = tmp_path / "cc"
    shim.write_text(pad.shim(real, pad.PATCHABLE))
    shim.chmod(0o755)
    subprocess.run([str(shim), "-O3", "-o", "with", "p.c"], cwd=tmp_path, check=True)
    subprocess.run([real, *pad.PATCHABLE.compile, pad.FRAME_POINTERS, "-O3", "-o", "without", "p.c"], cwd=tmp_path,
                   check=True)
    assert elf.source_locations(str(tmp_path / "with"), str(tmp_path)).get("main", "").startswith("p.c:")
    assert not elf.source_locations(str(tmp_path / "without"), str(tmp_path))

    def text(exe: str) -> bytes:
        return subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", exe, "/dev/stdout"], cwd=tmp_path,
                              capture_output=True, check=True).stdout
    assert text("with") == text("without")
    assert len(text("with")) > 0
    # compiled in a subdirectory of the work tree (lz4's `make -C lib`): the file under its directory
    # once, not `lib/lib/p.c` (binutils joined a mapped `./lib` compilation directory with itself)
    (tmp_path / "lib").mkdir()
    (tmp_path / "p.c").rename(tmp_path / "lib" / "p.c")
    subprocess.run([str(shim), "-O3", "-o", "../sub", "p.c"], cwd=tmp_path / "lib", check=True,
                   env={**os.environ, pad.TREE_VAR: str(tmp_path)})
    assert elf.source_locations(str(tmp_path / "sub")).get("main", "").startswith("lib/p.c:")


def _repo(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "widget"
    return root, cxxproj.build(root)


def test_a_build_that_fails_only_with_our_padding_is_rebuilt_without_it(tmp_path):
    """A failure our flags caused is never the user's: the build is scrubbed and run unpadded, with a
    note; a build that fails unpadded too is the user's error, reported as such."""
    root, commits = _repo(tmp_path)
    perf = tmp_path / "perf"
    perf.mkdir()
    repo = open_repo(root)
    picky = "case $(command -v g++) in *probe-pad-bin*) echo 'unknown flag -pg' >&2; exit 1;; esac; make -s"
    with checkout(repo, commits[1], fresh=True) as tree:
        done = run_build(BuildConfig(command=picky, binary="app", probe_pad=True), tree, commits[1], perf)
        assert done.pad == ""
        assert "rebuilt without them" in done.note
        assert "unknown flag -pg" in done.note
        assert elf.load(tree / "app").by_name()[SCAN]  # built
    with checkout(repo, commits[1], fresh=True) as tree:
        done = run_build(BuildConfig(command="make -s", binary="app", probe_pad=True), tree, commits[1], perf)
        assert "g++=" in done.pad
        assert not done.note
        assert elf.load(tree / "app").by_name()[SCAN].entry in ("nop", "nop5")


def test_aligned_check_builds_start_every_function_on_the_boundary_and_record_it(tmp_path):
    """check.align_functions reaches the compiler through the same wrappers as the padding: every
    function of the program (its own and the instantiated templates) starts on the boundary, and the
    plan's padding names it, so profiles built otherwise are not compared with these."""
    root, commits = _repo(tmp_path)
    perf = tmp_path / "perf"
    perf.mkdir()
    repo = open_repo(root)
    with checkout(repo, commits[1], fresh=True) as tree:
        done = run_build(BuildConfig(command="make -s", binary="app", probe_pad=True, align_functions=64), tree,
                         commits[1], perf)
        own = [f for f in elf.load(tree / "app").functions if f.size and f.name in (SCAN, REALLOC, "main")]
        assert done.pad.endswith(" align=64")
        assert len(own) == 3
        assert all(f.vaddr % 64 == 0 for f in own), [(f.name, hex(f.vaddr)) for f in own]
    assert (perf / "probe-pad-bin-align64").is_dir()  # its own wrappers: an unaligned build never runs them


@pytest.mark.ebpf
@pytest.mark.slow
def test_a_cxx_check_builds_padded_and_names_the_slowed_member_function_readably(tmp_path):
    """Issue #38's test: check --collect at defaults on a C++ program sharing template instantiations
    between units builds (padded, the same on both sides), finds the slowed `Widget::scan`, and every
    view names it readably while the notes keep the symbol."""
    root, commits = _repo(tmp_path)
    r = run_cli(root, "check", "HEAD", "--collect", "--json", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    out = json.loads(r.stdout)
    first = out["changes"][0]
    assert (first["function"], first["name"], first["type"]) == (SCAN, SCAN_READABLE, "degradation"), out["changes"]
    assert first["location"] == "widget.cc:3"
    # every compared function's numbers are one estimate (the stored check, every function)
    every = json.loads(read_cli(root, "check", "HEAD", "--json", "--all").stdout)["changes"]
    assert assert_one_estimate(every) >= 3
    store = NotesStore(open_repo(root))
    pads = {p.profile.plan.pad for c in commits for p in store.read(c)[0]}
    # both sides built alike, padded
    assert len(pads) == 1
    assert "g++=" in pads.pop()
    text = read_cli(root, "check", "HEAD")
    assert f"degradation  scan/{SCAN_READABLE}" in text.stdout
    assert SCAN not in text.stdout
    md = read_cli(root, "report", "HEAD", "--format", "markdown")
    assert f"`{SCAN_READABLE}`" in md.stdout
    show = read_cli(root, "show", "HEAD")
    assert SCAN_READABLE in show.stdout
    assert "built with padded function entries: " in show.stdout
    folded = read_cli(root, "show", "HEAD", "--folded").stdout
    assert f"main;{SCAN_READABLE} " in folded
    assert "_ZN" not in folded
    svg = subprocess.run(["perl", str(FLAMEGRAPH_PL)], input=folded, capture_output=True, text=True)
    assert svg.returncode == 0
    assert re.search(r"<title>Widget::scan\(std::string const&amp;\) const \(", svg.stdout)


@pytest.mark.ebpf
@pytest.mark.slow
def test_a_container_change_is_found_in_the_slowed_member_and_nothing_is_called_faster_against_its_work(tmp_path):
    """Issue #33's C++ case: the term dictionary moved from std::unordered_map to std::map; every
    lookup is now a tree descent of string comparisons (new template code, libc's memcmp), `add_term`
    runs 3x the instructions and the run ~+33%.  Own-code samples once called the caller's neighbours
    "faster"; inclusive samples and the witness rules must name the lookups, call nothing faster
    whose instructions rose, and print numbers that agree with each other."""
    root = tmp_path / "indexer"
    cxxproj.build_indexer(root)
    r = run_cli(root, "check", "HEAD", "--collect", "--json", "--all", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    out = json.loads(r.stdout)
    by = {c["function"]: c for c in out["changes"]}
    degraded = [c for c in out["changes"] if c["type"] == "degradation"]
    assert by["main"]["type"] == "degradation", by["main"]
    assert degraded[0]["function"] in (cxxproj.ADD_TERM, cxxproj.FIND), [c["name"] for c in degraded[:4]]
    assert by[cxxproj.ADD_TERM]["type"] == "degradation"
    b, t = by[cxxproj.ADD_TERM]["instructions"]
    assert t > 2 * b, (b, t)  # the witness saw the 3x
    faster = [c for c in out["changes"] if c["type"] == "optimization"]
    assert not [c for c in faster if c["instructions"] and c["instructions"][1] > 1.01 * c["instructions"][0]], faster
    assert assert_one_estimate(out["changes"]) >= 3
    base = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert assert_one_scale(root, out["commit"], base) >= 3  # show, check and diff on one scale (issue #55)


def test_a_check_says_when_its_sides_were_built_without_the_padding_it_asked_for():
    from dataclasses import replace

    from helpers import make_profile

    from gitperf.checks.paired import pad_note
    from gitperf.core.config import CheckConfig
    from gitperf.core.model import StoredProfile
    p = make_profile("c")
    unpadded = [StoredProfile("c", 0, "id", p)]
    padded = [StoredProfile("c", 0, "id", replace(p, plan=replace(p.plan, pad="c++=mfentry cc=patchable")))]
    assert "built without padded function entries" in pad_note(unpadded, CheckConfig())
    assert pad_note(padded, CheckConfig()) == ""
    assert pad_note(unpadded, CheckConfig(probe_pad=False)) == ""


CMAKELISTS = """\
cmake_minimum_required(VERSION 3.13)
project(widget CXX)
add_executable(widget_tests words.cc)  # no main: only a build of every target would fail on it
add_executable(widget main.cc widget.cc words.cc)
"""


@pytest.mark.parametrize("files, system, binary, command", [
    ({"CMakeLists.txt": CMAKELISTS}, "CMake", "build/widget", adopt.CMAKE.format(target=" --target widget")),
    ({"meson.build": "project('tool', 'c')\nexecutable('tool', 'tool.c')\nexecutable('bench_x', 'b.c')\n"},
     "Meson", "build/tool", adopt.MESON.format(target=" tool")),
    ({"Makefile": ".PHONY: all clean\nall: lua\nlua: lua.o\n\tcc -o $@ $^\nclean:\n\trm -f lua\n"}, "make", "lua",
     adopt.MAKE),
    ({}, "", "build/app", "make"),
    # the programs declared in a subdirectory the root's file adds (libdeflate's programs/), tests skipped
    ({"CMakeLists.txt": "project(widget C)\nadd_library(widget w.c)\nadd_subdirectory(tests)\nadd_subdirectory(programs)\n",
      "tests/CMakeLists.txt": "add_executable(run_all t.c)\n", "programs/CMakeLists.txt": "add_executable(widget-cli c.c)\n"},
     "CMake", "build/programs/widget-cli", adopt.CMAKE.format(target=" --target widget-cli")),
    ({"meson.build": "project('tool', 'c')\nsubdir('src')\n", "src/meson.build": "executable('tool', 'tool.c')\n"},
     "Meson", "build/src/tool", adopt.MESON.format(target=" tool")),
])
def test_init_recognises_the_build_system_and_reads_the_programs_name(tmp_path, files, system, binary, command):
    root = tmp_path / "widget"
    root.mkdir()
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)
    found = adopt.recognise(root)
    assert (found.system, found.binary, found.command) == (system, binary, command)
    assert bool(found.found) == bool(system)


@pytest.mark.ebpf
@pytest.mark.slow
def test_init_in_a_cmake_project_writes_a_configuration_a_check_builds_with(tmp_path):
    """Issue #38: `init` in a CMake project, then only the workload edited: `check --collect` builds
    both sides in fresh worktrees (configure + build into build/, the real binary path) and finds
    the slowed member function."""
    root = tmp_path / "widget"
    files = {"widget.h": cxxproj.WIDGET_H, "widget.cc": cxxproj.WIDGET_CC, "words.cc": cxxproj.WORDS_CC,
             "main.cc": cxxproj.MAIN_CC, "CMakeLists.txt": CMAKELISTS, ".gitignore": "build/\n"}
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    r = run_cli(root, "init")
    assert r.returncode == 0
    assert "recognised CMake" in r.stdout
    assert "build/widget (from add_executable(widget" in r.stdout
    cfg = root / ".gitperf.toml"
    cfg.write_text(cfg.read_text().replace('command = "./build/widget"', 'command = "./build/widget 200"'))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "widget"], cwd=root, check=True)
    (root / "widget.cc").write_text(cxxproj.SLOW_SCAN)
    subprocess.run(["git", "commit", "-qam", "a second pass in scan"], cwd=root, check=True)
    r = run_cli(root, "check", "HEAD", "--collect", "--json", timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]
    first = json.loads(r.stdout)["changes"][0]
    assert (first["name"], first["type"]) == (SCAN_READABLE, "degradation")
