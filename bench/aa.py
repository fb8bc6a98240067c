"""False alarms and detection of `git perf check REV --collect` on real projects, quiet and beside a
busy neighbour, in one run (ARCHITECTURE.md §10d).

Real projects of different shapes, each pinned, each with a base commit and one commit per case
branched from it and checked at defaults (`git perf check C --collect --base BASE --json`):

* **ninja** (C++, CMake, `std::`/template-heavy; https://github.com/ninja-build/ninja at f1a2f421,
  the commit that switched its hash maps from `std::unordered_map` to `emhash8`).  Workload: parse a
  Chromium-like fake manifest (its own misc/write_fake_manifests.py, 400 targets, 8 MB) and list
  every target, ~50 ms.
* **lua** (C, Make; Lua 5.4 from bench/realworld.py).  Workload bench/lua/detect.lua, ~30 ms.
* **indexer** (C++, the term indexer of tests/cxxproj.py, ~90 ms): its `map` case moves the term
  dictionary from `std::unordered_map` to `std::map` (issue #33's C++ case: `add_term` 3x the
  instructions, the run ~+33%).
* **snappy** (C++, CMake, small inlined hot functions in a template main loop;
  https://github.com/google/snappy at 4d2dc9dc, "Optimize zippy unzipping by upto >10% by making
  IncrementalCopy faster", built with SNAPPY_REQUIRE_AVX so that its SSSE3 path is the one compiled),
  with a driver commit added (uncompress four of its testdata files 150 times each, ~100 ms).  Its
  `revert` case undoes 4d2dc9d.
* **leveldb** (C++, CMake, a database run by its own benchmark; https://github.com/google/leveldb at
  d3d1c8a0, "don't check current key in DBIter::Next()", the author's readseq 0.196 -> 0.181
  micros/op).  Workload: `db_bench --benchmarks=readseq` over a 1,000,000-entry database written once,
  ~0.2 s.  Its `revert` case undoes d3d1c8a.

Cases (`--cases`):

* harmless: `comment` (a comment in a hot file), `rename` (a hot function renamed everywhere),
  `unused` (a function nothing calls), `moved` (a function moved to the end of its file), `reordered`
  (the object files linked in reverse order: every function at another address), `nop` (one `nop`
  instruction in a hot function: its code differs, its speed does not — the one harmless case the
  rounds must decide, not the diff);
* slowdowns: `slow30`, `slow2x` (a busy loop at the entry of a hot function worth +30% and +100% of
  its inclusive native time per call, sized by measurement: calls from callgrind, inclusive time from
  stack samples that hold it, the loop's cost measured alone) and, on ninja, `revert` (f1a2f421
  undone: `std::unordered_map` again, the author's 5.14 s -> 4.62 s on a Chromium no-op build read
  backwards: a container change slowing every lookup through a template callee and libc); on snappy,
  4d2dc9d undone; on leveldb, d3d1c8a undone.  With `--both-ways` each documented change is also read forwards: the base
  checked against the case's commit (`--base`), the author's speedup expected as `optimization`.

Neighbours (`--neighbours`): `quiet`; `one` / `two`: one or two processes that each keep a core busy
in bursts (busy 50-300 ms, idle 50-300 ms, at random), started before the check and stopped after.

A harmless case's check is a false alarm when it gives any function a time verdict of either sign
(degradation or optimization); a slowdown is detected when the check's result is `degradation`.
Rates are printed with Wilson 95% intervals.  `--demo N` runs `make demo`'s job (examples/demo) N
times beside each neighbour instead and counts how often its truth table held.  Usage:

    .venv/bin/python bench/aa.py [--projects ninja,lua,indexer,snappy,leveldb] [--cases ...] [--neighbours quiet,two]
                                 [--repeat N] [--slow-repeat N] [--work DIR] [--ninja-src URL_OR_PATH]
                                 [--snappy-src URL_OR_PATH] [--leveldb-src URL_OR_PATH] [--both-ways] [--align 64]
    .venv/bin/python bench/aa.py --demo 5 --neighbours two
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from _common import ROOT, neighbour, table  # noqa: F401  (sets sys.path)

import detection  # noqa: E402  (the busy-loop snippet and its measured costs, Lua's repository)

from gitperf.analysis import elf  # noqa: E402
from gitperf.core.names import readable  # noqa: E402
from gitperf.core import stacks  # noqa: E402
from gitperf.core.config import CollectConfig  # noqa: E402
from gitperf.engine import callgrind, workload  # noqa: E402
from gitperf.engine.bcc_engine import BccEngine  # noqa: E402
from gitperf.plan.probes import make_plan  # noqa: E402

NINJA_URL = "https://github.com/ninja-build/ninja"
NINJA_COMMIT = "f1a2f421859742f45c3b964a579221c869ef276c"  # "Switch hash tables to emhash8::HashMap."
HARMLESS = ("comment", "rename", "unused", "moved", "reordered", "nop")
SLOWDOWNS = ("slow30", "slow2x", "revert", "map")
DOCUMENTED = ("revert", "map")  # changes whose speedup a project documented (its commit undone)
REVERTS = {"ninja": "f1a2f421 undone: std::unordered_map again",
           "leveldb": "d3d1c8a undone: DBIter::Next checks the current key again (author: readseq -7.7%)",
           "snappy": "4d2dc9d undone: IncrementalCopy's 8-byte pattern copies (author: up to >10%)"}


def git(cwd: Path, *args: str) -> str:
    return detection.git(cwd, *args)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise SystemExit(f"{path.name} no longer contains the text this case edits:\n{old[:200]}")
    path.write_text(text.replace(old, new, 1))


def rename_everywhere(repo: Path, pattern: str, old: str, new: str) -> None:
    """`old` renamed `new` as a whole word in every source file matching `pattern` (a glob)."""
    for path in repo.glob(pattern):
        text = path.read_text()
        if re.search(rf"\b{old}\b", text):
            path.write_text(re.sub(rf"\b{old}\b", new, text))


def move_to_end(path: Path, head: str, before: str = "") -> None:
    """The function whose definition starts with the line `head` moved to the end of its file (or to
    just before the line `before`: the end of its namespace)."""
    lines = path.read_text().split("\n")
    i = lines.index(head)
    j = next(k for k in range(i, len(lines)) if lines[k] == "}")
    block = lines[i:j + 1]
    del lines[i:j + 1]
    if before:
        k = lines.index(before)
        lines[k:k] = block + [""]
        path.write_text("\n".join(lines))
    else:
        path.write_text("\n".join(lines).rstrip("\n") + "\n\n" + "\n".join(block) + "\n")


@dataclass
class Project:
    name: str
    workload: str
    make: Callable[[Path], Path]  # work dir -> repository at the base commit (built once, for sizing)
    exe: str  # the binary, relative to the repository
    cases: dict[str, Callable[[Path], None]]
    hot: str  # the function the nop and slowdowns go into (linkage name)
    hot_file: str
    hot_head: str  # the first line of its definition


# ---------------------------------------------------------------- ninja (C++)

NINJA_CONFIG = """\
[build]
command = "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DCMAKE_CXX_FLAGS=-fno-omit-frame-pointer > /dev/null && cmake --build build -j2 --target ninja > /dev/null"
binary = "build/ninja"

[[workload]]
name = "parse"
command = "./build/ninja -C {fake} -t targets all"
timeout = 120
"""
NINJA_HOT = "_ZN5State7GetNodeE11StringPiecem"
NINJA_HOT_HEAD = "Node* State::GetNode(StringPiece path, uint64_t slash_bits) {"


def pinned(work: Path, name: str, src: str, commit: str) -> Path:
    """A clone of `src` at `commit`, on a branch `bench`."""
    repo = work / name
    if not repo.exists():
        subprocess.run(["git", "clone", "-q", src, str(repo)], check=True)
    git(repo, "checkout", "-q", "-B", "bench", commit)
    return repo


def adopted(repo: Path, config: str, message: str) -> Path:
    """The bench's configuration (and whatever else was written into the clone) committed: the base
    every case branches from, built once (what sizing the slowdowns runs)."""
    shutil.rmtree(repo / "build", ignore_errors=True)
    (repo / ".gitperf.toml").write_text(config)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    subprocess.run(["sh", "-c", config.split('"')[1]], cwd=repo, check=True)
    return repo


def ninja_repo(work: Path, src: str) -> Path:
    repo = pinned(work, "ninja", src, NINJA_COMMIT)
    fake = work / "ninja-manifest"
    if not fake.exists():
        subprocess.run([sys.executable, str(repo / "misc" / "write_fake_manifests.py"), "-t", "400", str(fake)],
                       check=True, capture_output=True)
    return adopted(repo, NINJA_CONFIG.format(fake=fake), "bench: git perf configuration")


def lines_reversed(path: Path, pattern: str) -> None:
    """The lines `pattern`'s first group matches in `path` put in reverse order (a build's sources:
    its objects linked in another order)."""
    text = path.read_text()
    m = re.search(pattern, text)
    path.write_text(text.replace(m.group(1), "".join(reversed(m.group(1).splitlines(True))), 1))


def reverted(commit: str) -> Callable[[Path], None]:
    """A case that undoes `commit` (a project's documented change)."""
    def revert(repo: Path) -> None:
        r = subprocess.run(["git", "revert", "--no-commit", commit], cwd=repo, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"cannot revert {commit[:12]}: {r.stderr}")
    return revert


def ninja_revert(repo: Path) -> None:
    h = repo / "src" / "hash_map.h"
    edit(h, '#include "third_party/emhash/hash_table8.hpp"\n', "")
    edit(h, "namespace std {", "#include <unordered_map>\n\nnamespace std {")
    edit(h, "typedef emhash8::HashMap<StringPiece, V> Type;", "typedef std::unordered_map<StringPiece, V> Type;")


def ninja(src: str) -> Project:
    return Project(
        "ninja", "parse", lambda work: ninja_repo(work, src), "build/ninja", {
            "comment": lambda r: edit(r / "src" / "state.cc", NINJA_HOT_HEAD,
                                      "// Every path of the manifest is looked up or added here.\n" + NINJA_HOT_HEAD),
            "rename": lambda r: rename_everywhere(r, "src/*.[ch]*", "LookupNode", "FindNode"),
            "unused": lambda r: edit(r / "src" / "util.cc", "void SetCloseOnExec(int fd) {",
                                     "int UnusedBenchHelper(int x) { return x * 3 + 1; }\n\nvoid SetCloseOnExec(int fd) {"),
            "moved": lambda r: move_to_end(r / "src" / "state.cc", "Edge* State::AddEdge(const Rule* rule) {"),
            "reordered": lambda r: lines_reversed(r / "CMakeLists.txt", r"add_library\(libninja OBJECT\n((?:\tsrc/[^\n]+\n)+)\)"),
            "revert": ninja_revert,
        }, NINJA_HOT, "src/state.cc", NINJA_HOT_HEAD)


# ---------------------------------------------------------------- snappy (C++, small hot functions)

SNAPPY_URL = "https://github.com/google/snappy"
# "Optimize zippy unzipping by upto >10% by making IncrementalCopy faster" (with SSSE3: built with
# SNAPPY_REQUIRE_AVX): the decompressor's pattern copies, inlined into its template main loop
SNAPPY_COMMIT = "4d2dc9dcbb4c4c68872e9a2952426dd7dee91e56"
SNAPPY_DRIVER = """\
// git perf bench driver: compress each file once, uncompress it `reps` times, check the round trip
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include "snappy.h"

int main(int argc, char** argv) {
  int reps = atoi(argv[1]);
  size_t total = 0;
  for (int a = 2; a < argc; a++) {
    std::ifstream f(argv[a], std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string in = ss.str(), packed, back;
    snappy::Compress(in.data(), in.size(), &packed);
    for (int r = 0; r < reps; r++) {
      if (!snappy::Uncompress(packed.data(), packed.size(), &back) || back != in) return 1;
      total += back.size();
    }
  }
  printf("%zu\\n", total);
  return 0;
}
"""
SNAPPY_CONFIG = """\
[build]
command = "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNAPPY_BUILD_TESTS=OFF -DSNAPPY_REQUIRE_AVX=ON -DCMAKE_CXX_STANDARD=14 > /dev/null && cmake --build build -j2 --target snappy_driver > /dev/null"
binary = "build/snappy_driver"

[[workload]]
name = "uncompress"
command = "./build/snappy_driver 150 testdata/geo.protodata testdata/html testdata/urls.10K testdata/alice29.txt"
timeout = 120
"""
SNAPPY_HOT = "_ZN6snappy18SnappyDecompressor17DecompressAllTagsINS_17SnappyArrayWriterEEEvPT_"
SNAPPY_HOT_HEAD = "  DecompressAllTags(Writer* writer) {"


def snappy_repo(work: Path, src: str) -> Path:
    repo = pinned(work, "snappy", src, SNAPPY_COMMIT)
    (repo / "snappy_driver.cc").write_text(SNAPPY_DRIVER)
    with open(repo / "CMakeLists.txt", "a") as f:
        f.write("\nadd_executable(snappy_driver snappy_driver.cc)\ntarget_link_libraries(snappy_driver snappy)\n"
                # as exported, 4d2dc9d builds with clang only (a clang pragma under -Werror, <array> not
                # included, C++14's integer_sequence under C++11: fixed upstream later); GCC 12 needs
                # these and CMAKE_CXX_STANDARD=14
                "target_compile_options(snappy PRIVATE -Wno-error -Wno-unknown-pragmas -include array)\n")
    return adopted(repo, SNAPPY_CONFIG, "bench: a driver and the git perf configuration")


def snappy(src: str) -> Project:
    loop = "  // Process the next item found in the input."
    return Project(
        "snappy", "uncompress", lambda work: snappy_repo(work, src), "build/snappy_driver", {
            "comment": lambda r: edit(r / "snappy.cc", loop, "  // the decompressor's main loop\n" + loop),
            "rename": lambda r: rename_everywhere(r, "*.[ch]*", "IncrementalCopySlow", "IncrementalCopyByte"),
            "unused": lambda r: edit(r / "snappy-sinksource.cc", "namespace snappy {",
                                     "namespace snappy {\n\nint UnusedBenchHelper(int x) { return 3 * x + 1; }"),
            "moved": lambda r: move_to_end(r / "snappy.cc", "bool GetUncompressedLength(const char* start, size_t n, "
                                           "size_t* result) {", before="}  // namespace snappy"),
            "reordered": lambda r: edit(r / "CMakeLists.txt", '    "snappy-c.cc"\n    "snappy-sinksource.cc"\n',
                                        '    "snappy-sinksource.cc"\n    "snappy-c.cc"\n'),
            "revert": reverted(SNAPPY_COMMIT),
        }, SNAPPY_HOT, "snappy.cc", SNAPPY_HOT_HEAD)


# ---------------------------------------------------------------- leveldb (C++, a database's own benchmark)

LEVELDB_URL = "https://github.com/google/leveldb"
# "don't check current key in DBIter::Next()": the author's readseq 0.196 -> 0.181 micros/op (-7.7%)
LEVELDB_COMMIT = "d3d1c8a0f40a7eaa12a5bb702fa01786b7c3a646"
LEVELDB_CONFIG = """\
[build]
command = "cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLEVELDB_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS=-fno-omit-frame-pointer > /dev/null && cmake --build build -j2 --target db_bench > /dev/null"
binary = "build/db_bench"

[[workload]]
name = "readseq"
command = "./build/db_bench --benchmarks=readseq --use_existing_db=1 --num={num} --db={db}"
timeout = 120
"""
LEVELDB_NUM = 1_000_000  # entries: readseq reads them all, ~0.2 s
LEVELDB_HOT = "_ZN7leveldb12_GLOBAL__N_16DBIter4NextEv"
LEVELDB_HOT_HEAD = "void DBIter::Next() {"


def leveldb_repo(work: Path, src: str) -> Path:
    repo = pinned(work, "leveldb", src, LEVELDB_COMMIT)
    db = work / "leveldb-db"
    repo = adopted(repo, LEVELDB_CONFIG.format(num=LEVELDB_NUM, db=db), "bench: git perf configuration")
    if not db.exists():  # the database every run reads, written once by the base's db_bench
        subprocess.run(["./build/db_bench", "--benchmarks=fillseq,compact", f"--num={LEVELDB_NUM}", f"--db={db}"],
                       cwd=repo, check=True, capture_output=True)
    return repo


def leveldb(src: str) -> Project:
    return Project(
        "leveldb", "readseq", lambda work: leveldb_repo(work, src), "build/db_bench", {
            "comment": lambda r: edit(r / "db" / "db_iter.cc", LEVELDB_HOT_HEAD,
                                      "// Moves to the next user key, skipping older versions.\n" + LEVELDB_HOT_HEAD),
            "rename": lambda r: rename_everywhere(r, "db/db_iter.cc", "FindNextUserEntry", "FindNextVisibleEntry"),
            "unused": lambda r: edit(r / "util" / "coding.cc", "namespace leveldb {",
                                     "namespace leveldb {\n\nint UnusedBenchHelper(int x) { return 3 * x + 1; }"),
            "moved": lambda r: move_to_end(r / "db" / "db_iter.cc", "void DBIter::Prev() {",
                                           before="}  // anonymous namespace"),
            # the library's db/ sources
            "reordered": lambda r: lines_reversed(r / "CMakeLists.txt", r'((?:    "\$\{PROJECT_SOURCE_DIR\}/db/[^"\n]+"\n)+)'),
            "revert": reverted(LEVELDB_COMMIT),
        }, LEVELDB_HOT, "db/db_iter.cc", LEVELDB_HOT_HEAD)


# ---------------------------------------------------------------- Lua (C)

# internshrstr: 89k calls of ~20 ns a run (README); luaH_getshortstr, 46k calls, is inlined where it is
# hot and read 2 ns a call: a "+30%" of it would be a loop of no iteration
LUA_HOT = "internshrstr"
LUA_HOT_HEAD = "static TString *internshrstr (lua_State *L, const char *str, size_t l) {"


def lua_repo(work: Path) -> Path:
    repo = detection.make_repo(work / "lua", "detect")
    git(repo, "checkout", "-q", "-B", "bench")
    return repo


def lua_reorder(repo: Path) -> None:
    path = repo / "makefile"
    text = path.read_text()
    m = re.search(r"CORE_O=\t((?:[^\n]*\\\n)*[^\n]*)", text)  # continued lines, then the last
    objs = [o for o in m.group(1).split() if o != "\\"]
    path.write_text(text.replace(m.group(1), " ".join(reversed(objs))))


def lua() -> Project:
    return Project(
        "lua", "detect", lua_repo, "lua", {
            "comment": lambda r: edit(r / "lstring.c", LUA_HOT_HEAD, "/* short strings are interned */\n" + LUA_HOT_HEAD),
            "rename": lambda r: rename_everywhere(r, "*.[ch]", "luaH_getint", "luaH_getinteger"),
            "unused": lambda r: edit(r / "lauxlib.c", "LUALIB_API int luaL_getmetafield",
                                     "int unused_bench_helper (int x) { return x * 3 + 1; }\n\n"
                                     "LUALIB_API int luaL_getmetafield"),
            "moved": lambda r: move_to_end(r / "ltable.c", "void luaH_resizearray (lua_State *L, Table *t, unsigned int nasize) {"),
            "reordered": lua_reorder,
        }, LUA_HOT, "lstring.c", LUA_HOT_HEAD)


# ---------------------------------------------------------------- the term indexer (C++, issue #33's case)

sys.path.insert(0, str(ROOT / "tests"))
import cxxproj  # noqa: E402  (the indexer's sources: tests check the same program)

INDEXER_HEAD = "void Index::add_term(const std::string& term, long doc) {"


def indexer_repo(work: Path) -> Path:
    repo = work / "indexer"
    shutil.rmtree(repo, ignore_errors=True)
    cxxproj.build_indexer(repo)
    git(repo, "checkout", "-q", "-B", "bench", "HEAD~1")
    subprocess.run(["make", "-s"], cwd=repo, check=True)
    return repo


def indexer() -> Project:
    return Project(
        "indexer", "index", indexer_repo, "indexer", {
            "comment": lambda r: edit(r / "index.cc", INDEXER_HEAD, "// one posting per term\n" + INDEXER_HEAD),
            "rename": lambda r: rename_everywhere(r, "*.[ch]*", "stats", "summary"),
            "unused": lambda r: edit(r / "index.cc", INDEXER_HEAD, "int unused_helper(int x) { return 3 * x + 1; }\n\n"
                                     + INDEXER_HEAD),
            "moved": lambda r: move_to_end(r / "index.cc", INDEXER_HEAD),
            "reordered": lambda r: edit(r / "Makefile", "OBJS = indexer.o index.o", "OBJS = index.o indexer.o"),
            "map": lambda r: (r / "index.h").write_text(cxxproj.INDEX_H.format(header="map", container="map")),
        }, cxxproj.ADD_TERM, "index.cc", INDEXER_HEAD)


# ---------------------------------------------------------------- sizing the slowdowns


def workload_argv(repo: Path, p: Project) -> list[str]:
    import shlex
    import tomllib
    cfg = tomllib.loads((repo / ".gitperf.toml").read_text())
    return shlex.split(next(w["command"] for w in cfg["workload"] if w["name"] == p.workload))


def inclusive_per_call(p: Project, repo: Path, runs: int = 10) -> tuple[float, float, float, str]:
    """(calls a run, inclusive native ns a call, native run time s, what sized it) of the hot function:
    calls from callgrind, inclusive time as the share of stack samples whose stack holds it x the
    native run; where its samples make it less than half its share of the run's instructions (a build
    without frame pointers: the indexer's -O2 leaves its callees' samples with no caller), that share.
    (Lua: 12.5 ns a call from samples, 10.1 from instructions.)"""
    exe, argv = repo / p.exe, workload_argv(repo, p)
    counted = callgrind.run(workload.Command(argv, str(repo)), 600, str(exe))
    if counted.error:
        raise SystemExit(f"callgrind: {counted.error}")
    calls = counted.functions[p.hot][0]
    binary = elf.load(exe)
    plan = make_plan(binary, CollectConfig(mode="stack", stack_hz=4999))
    held, total, wall = 0, 0, 0.0
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=repo, check=True, capture_output=True)
        wall += time.perf_counter() - t0
        raw = BccEngine().collect(binary, plan, lambda where: workload.run(workload.Command(argv, str(repo)), 600, where),
                                  lambda _m: None)
        folded = stacks.folded(raw.stacks)
        held += stacks.inclusive(folded).get(p.hot, 0)
        total += sum(folded.values())
    native_s = wall / runs
    share, how = held / max(total, 1), "stack samples"
    instructions = counted.functions[p.hot][2] / max(counted.total, 1)
    if share < instructions / 2:  # (indexer: 0.117 ns a call from its samples, 27 ns from its 9.1% of instructions)
        share, how = instructions, "its share of instructions (callgrind): its stacks lack it"
    return calls, share * native_s * 1e9 / max(calls, 1), native_s, how


def slowdown(p: Project, magnitude: float, per_call_ns: float, costs: dict[int, float]) -> tuple[Callable, str]:
    iters, added = detection.size(costs, magnitude * per_call_ns)
    snippet = detection.SNIPPET.format(n=iters)
    return (lambda r: edit(r / p.hot_file, p.hot_head, p.hot_head + f"\n  {snippet}  /* injected by bench/aa.py */"),
            f"+{added:.0f} ns on {per_call_ns:.0f} ns a call ({added / per_call_ns:+.0%})")


def nop(p: Project) -> Callable:
    return lambda r: edit(r / p.hot_file, p.hot_head, p.hot_head + '\n  __asm__ volatile("nop");  /* harmless */')


# ---------------------------------------------------------------- neighbours and checks


def check(repo: Path, commit: str, base: str, workload: str) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "gitperf", "check", commit, "--collect", "--base", base, "--workload",
                        workload, "--json", "--all", "-q"], cwd=repo, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if r.returncode not in (0, 1, 3):
        raise SystemExit(f"check of {commit[:12]} failed (exit {r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout), time.perf_counter() - t0


def commit_case(repo: Path, base: str, label: str, change: Callable[[Path], None]) -> str:
    git(repo, "checkout", "-q", "--detach", base)
    change(repo)
    git(repo, "commit", "-q", "-am", label)
    return git(repo, "rev-parse", "HEAD")


def wilson(k: int, n: int, z: float = 1.96) -> str:
    if not n:
        return "-"
    p = k / n
    mid, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} [{max(mid - half, 0):.0%}, {min(mid + half, 1):.0%}]"


def summarise(out: dict, expected: str = "degradation") -> tuple[int, str, str, int]:
    """(time verdicts of either sign, the result, the first function with the `expected` verdict, rounds)."""
    timed = [c for c in out["changes"] if c["type"] in ("degradation", "optimization")]
    first = next((c.get("name") or c["function"] for c in out["changes"] if c["type"] == expected), "-")
    rounds = max([w["target_profiles"] for w in out["workloads"]] or [0])
    return len(timed), out["result"], first, rounds


def unmoved(out: dict) -> str:
    """The check's spread of time changes where the code's work did not change: the 90% quantile of
    |time change| over functions whose inclusive instructions are equal within 0.1% (what
    checks.witness.placement measures, without its 20% floor), and how many there were."""
    still = sorted(abs(c["relative"]) for c in out["changes"] if c.get("instructions") and c["relative"] is not None
                   and min(c["instructions"]) > 0 and abs(c["instructions"][1] / c["instructions"][0] - 1) < 1e-3)
    return f"{still[int(0.9 * (len(still) - 1))]:.1%} ({len(still)})" if still else "-"


HEADER = ["project", "case", "neighbour", "what", "result", "time verdicts", "first as expected", "rounds",
          "unmoved q90 (n)", "check time"]


def demo(work: Path, times: int, hoods: list[str]) -> None:
    """`make demo`'s job (examples/demo/run-demo.sh: five checks, the truth table) `times` times beside
    each neighbour: how often its truth table holds."""
    script = ROOT / "examples" / "demo" / "run-demo.sh"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    for hood in hoods:
        held = []
        for k in range(times):
            t0 = time.perf_counter()
            with neighbour(hood):
                r = subprocess.run(["bash", str(script), str(work / f"demo-{hood}-{k}")], capture_output=True,
                                   text=True, env=env)
            held.append(r.returncode == 0)
            table_lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("commit ", "why:")) or " yes" in ln
                           or " NO" in ln]
            print(f"demo {hood} {k}: truth table {'held' if held[-1] else 'FAILED'} in "
                  f"{time.perf_counter() - t0:.0f} s", *table_lines[1:6], sep="\n  ", flush=True)
        print(f"demo truth table beside {hood}: {wilson(sum(held), len(held))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--projects", default="ninja,lua")
    ap.add_argument("--cases", default=",".join(HARMLESS + SLOWDOWNS))
    ap.add_argument("--neighbours", default="quiet,two")
    ap.add_argument("--repeat", type=int, default=1, help="checks of each harmless case beside each neighbour")
    ap.add_argument("--slow-repeat", type=int, default=1, help="checks of each slowdown beside each neighbour")
    ap.add_argument("--work", type=Path, help="working directory (default: a temporary one)")
    ap.add_argument("--ninja-src", default=NINJA_URL, help="a clone URL or path of ninja's repository")
    ap.add_argument("--snappy-src", default=SNAPPY_URL, help="a clone URL or path of snappy's repository")
    ap.add_argument("--leveldb-src", default=LEVELDB_URL, help="a clone URL or path of leveldb's repository")
    ap.add_argument("--both-ways", action="store_true", help="also check each documented change read forwards "
                    "(the base against the case's commit: an optimization expected)")
    ap.add_argument("--align", type=int, default=0, help="check.align_functions for every check (0 = off)")
    ap.add_argument("--demo", type=int, default=0, help="run make demo's job this many times beside each "
                                                        "neighbour instead (its truth table held or not)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="gitperf-aa-"))
    work.mkdir(parents=True, exist_ok=True)
    if a.demo:
        return demo(work, a.demo, a.neighbours.split(","))
    cases = a.cases.split(",")
    projects = {"ninja": lambda: ninja(a.ninja_src), "lua": lua, "indexer": indexer,
                "snappy": lambda: snappy(a.snappy_src), "leveldb": lambda: leveldb(a.leveldb_src)}
    rows, alarms, detected = [], {}, {}
    for name in a.projects.split(","):
        p = projects[name]()
        repo = p.make(work)
        if a.align:  # in the base commit's configuration, so every case's commit has it too
            with open(repo / ".gitperf.toml", "a") as f:
                f.write(f"\n[check]\nalign_functions = {a.align}\n")
            git(repo, "commit", "-q", "-am", f"bench: functions aligned to {a.align} bytes in checks")
        base = git(repo, "rev-parse", "HEAD")
        plan: dict[str, tuple[Callable, str]] = {c: (p.cases[c], "harmless") for c in cases if c in p.cases
                                                 and c in HARMLESS}
        if "nop" in cases:
            plan["nop"] = (nop(p), "harmless: code differs")
        if {"slow30", "slow2x"} & set(cases):
            calls, per_call, native_s, how = inclusive_per_call(p, repo)
            costs = detection.loop_costs(work, 2 * per_call)
            print(f"# {name}: {readable(p.hot)} {calls:,.0f} calls a run, {per_call:.0f} ns inclusive a call (from {how}), "
                  f"run {native_s * 1e3:.0f} ms natively", flush=True)
            for c, m in (("slow30", 0.3), ("slow2x", 1.0)):
                if c in cases:
                    plan[c] = slowdown(p, m, per_call, costs)
        if "revert" in cases and "revert" in p.cases:
            plan["revert"] = (p.cases["revert"], REVERTS[name])
        if "map" in cases and "map" in p.cases:
            plan["map"] = (p.cases["map"], "terms in std::map instead of std::unordered_map")
        commits = {c: commit_case(repo, base, f"bench case {c}", change) for c, (change, _) in plan.items()}
        for hood in a.neighbours.split(","):
            for k in range(max(a.repeat, a.slow_repeat)):
                for c, (_, what) in plan.items():
                    if k >= (a.repeat if c in HARMLESS else a.slow_repeat):
                        continue
                    # a documented change is also read forwards (`--both-ways`): the base checked
                    # against the case's commit, the author's speedup expected as an optimization
                    ways = [(c, commits[c], base, "degradation")] + (
                        [(f"{c} read forwards", base, commits[c], "optimization")]
                        if a.both_ways and c in DOCUMENTED else [])
                    for label, commit, against, expected in ways:
                        with neighbour(hood):
                            out, secs = check(repo, commit, against, p.workload)
                        (work / "checks").mkdir(exist_ok=True)
                        (work / "checks" / f"{name}-{label.replace(' ', '-')}-{hood}-{k}.json").write_text(
                            json.dumps(out, indent=1))
                        timed, result, first, rounds = summarise(out, expected)
                        rows.append([name, label, hood, what, result, timed, first[:40], rounds, unmoved(out),
                                     f"{secs:.0f} s"])
                        print(table(HEADER, rows[-1:]).split("\n")[-1], flush=True)
                        if c in HARMLESS:  # (split by whether the diff left anything to measure: rounds ran)
                            alarms.setdefault((name, hood, rounds > 0), []).append(timed > 0)
                        else:
                            detected.setdefault((name, hood, label), []).append(result == expected)
    print()
    print(table(HEADER, rows))
    print("\nfalse alarms (harmless commits with any time verdict):")
    for (name, hood, rounds), xs in sorted(alarms.items()):
        print(f"  {name:7s} {hood:6s} {'measured (rounds ran)' if rounds else 'told by the diff':22s} "
              f"{wilson(sum(xs), len(xs))}")
    print("detection (result: degradation):")
    for (name, hood, c), xs in sorted(detected.items()):
        print(f"  {name:7s} {hood:6s} {c:22s} {wilson(sum(xs), len(xs))}")


if __name__ == "__main__":
    main()
