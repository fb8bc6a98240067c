"""Which NOP padding of function entries links with each compiler (ARCHITECTURE.md §6).

A padded entry makes a traced call ~10x cheaper (the uprobe lands on a NOP the kernel emulates), so
`check --collect` builds both sides padded, through compiler wrappers first on the build's PATH.
Two paddings exist, and neither links everywhere:

* `patchable`, `-fpatchable-function-entry=5`: five one-byte NOPs.  GCC 12 (Debian bookworm) emits
  the `__patchable_function_entries` section outside a template instantiation's COMDAT group, so a
  C++ program instantiating one template in two translation units fails to link ("referenced in
  section `__patchable_function_entries' ... defined in discarded section"): nearly every real one.
* `mfentry`, `-pg -mfentry -mnop-mcount`: one 5-byte NOP, which GCC implements only without PIE
  (`-fno-pie`, linked `-no-pie`) and refuses with `-fPIC`; `-pg` must stay off the link line, where it
  would start gprof's run-time (a SIGPROF timer and a gmon.out at exit).

So each compiler is asked once (`choose`: a two-unit test program compiled, linked, run and its
entry read, cached by the compiler's path and version) which padding it links with, `patchable`
first; a C compiler is tried on C, a C++ one on two units sharing `std::vector<std::string>`.  The
wrapper (`shim`) of a compiler that links with neither adds frame pointers only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gitperf.core import scratch
from gitperf.git.state import pads_cache

# Frame pointers with every padding, so that a stack sample's walk reaches `main` (stored call
# stacks, flame graphs; ARCHITECTURE.md §5).  Our flags go first: a build's own flags still win.
FRAME_POINTERS = "-fno-omit-frame-pointer"
# Debug information, for the source locations a report gives each function: lz4's Makefile builds
# with -O3 and no -g, and its check's *source* column was "-" throughout.  -g changes no generated
# code (GCC checks that with -fcompare-debug; Clang holds to it too), so both sides still run the
# code the build's own flags make; a build's own -g0 still wins.
DEBUG_INFO = "-g"
_PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Pad:
    name: str  # what the plan records ("" = no padding)
    compile: tuple[str, ...] = ()  # added when the invocation compiles (-c, -S)
    link: tuple[str, ...] = ()  # added when it links (and compiles: `cc a.c -o a` gets no padding)
    # an invocation with one of these gets frame pointers only (mfentry: GCC refuses -mnop-mcount with PIC)
    not_with: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()  # the build's own flags taken out of a padded compile (-pg refuses them)


PATCHABLE = Pad("patchable", compile=("-fpatchable-function-entry=5",), link=("-fpatchable-function-entry=5",))
MFENTRY = Pad("mfentry", compile=("-fno-pie", "-pg", "-mfentry", "-mnop-mcount"), link=("-fno-pie", "-no-pie"),
              not_with=("-fPIC", "-fpic", "-fPIE", "-fpie", "-shared"), drop=("-fomit-frame-pointer",))
NONE = Pad("")
PADS = (PATCHABLE, MFENTRY)  # in order of preference: patchable keeps PIE
CXX = ("c++", "g++", "clang++")

_C_UNITS = {"a.c": "int g(int);\nint main(void) { return g(1) - 2; }\n",
            "b.c": "int g(int x) { return x + 1; }\n"}
_CXX_UNITS = {  # the same template instantiated in both units (the COMDAT case)
    "a.cc": "#include <string>\n#include <vector>\nvoid fa(std::vector<std::string>& v) { v.push_back(\"a\"); }\n",
    "b.cc": "#include <string>\n#include <vector>\nvoid fa(std::vector<std::string>& v);\n"
            "int main() { std::vector<std::string> v; v.push_back(\"b\"); fa(v); return v.size() == 2 ? 0 : 1; }\n"}
# main's first bytes (after an optional endbr64) when padded: five 1-byte NOPs, or `nopl 0x0(%rax,%rax,1)`
_NOPS = (b"\x90" * 5, b"\x0f\x1f\x44\x00\x00")
_ENDBR64 = b"\xf3\x0f\x1e\xfa"


def always(align: int = 0) -> str:
    """The flags every wrapped invocation gets, padded or not: frame pointers, debug information, and
    with `align` every function starting on an `align`-byte boundary (`check.align_functions`,
    ARCHITECTURE.md §10e)."""
    return f"{FRAME_POINTERS} {DEBUG_INFO}" + (f" -falign-functions={align}" if align else "")


# The work tree a wrapped build runs in (set by `git.worktree`): its path in the DWARF is mapped to
# MAPPED_TREE, so that builds of one commit in two worktrees compile to the same objects and a
# compiler cache serves the second from the first (CCACHE_BASEDIR does the same for the command lines
# ccache hashes; `analysis.elf.source_locations` reads paths under it as the tree's).  An absolute
# path: mapped to `.`, a build that compiles in a subdirectory (lz4's `make -C lib`) has the relative
# `./lib` as both its compilation directory and its line table's first directory, and binutils joins
# them: `./lib/./lib/lz4frame.c`.
TREE_VAR = "GITPERF_TREE"
MAPPED_TREE = "/gitperf-tree"


def shim(real: str, pad: Pad, align: int = 0, launcher: str = "") -> str:
    """The wrapper script of compiler `real` that builds with `pad` (and `align`, see `always`),
    through `launcher` (ccache) when given."""
    q, common = (f"{shlex.quote(launcher)} " if launcher else "") + shlex.quote(real), always(align)
    head = (f"#!/bin/sh\n# git perf build.probe_pad: {pad.name or 'no padding links'} (gitperf.git.pad)\n"
            f'[ -n "${TREE_VAR}" ] && set -- "-fdebug-prefix-map=${TREE_VAR}={MAPPED_TREE}" "$@"\n')
    if pad.compile == pad.link and not (pad.not_with or pad.drop):
        return head + f'exec {q} {" ".join((*pad.compile, common))} "$@"\n'
    lines = []
    if pad.not_with:
        lines.append(f'for a do case "$a" in {"|".join(pad.not_with)}) exec {q} {common} "$@";; esac; done')
    lines.append('for a do case "$a" in -c|-S)')
    if pad.drop:  # rebuild "$@" without them
        lines.append(f'  for b do shift; case "$b" in {"|".join(pad.drop)}) ;; *) set -- "$@" "$b";; esac; done')
    lines.append(f'  exec {q} {" ".join(pad.compile)} {common} "$@";; esac; done')
    lines.append(f'exec {q} {" ".join(pad.link)} {common} "$@"')
    return head + "\n".join(lines) + "\n"


def _identity(real: str) -> str:
    """The compiler's path and version: a new compiler at the same path is asked again."""
    try:
        version = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    st = os.stat(real)
    return hashlib.sha1(f"{os.path.realpath(real)}|{st.st_size}|{st.st_mtime_ns}|{version}".encode()).hexdigest()


def _padded_entry(exe: Path) -> bool:
    """Whether `main` in `exe` starts with a NOP pad."""
    from elftools.elf.elffile import ELFFile
    with open(exe, "rb") as fh:
        elf = ELFFile(fh)
        symtab = elf.get_section_by_name(".symtab")
        mains = symtab.get_symbol_by_name("main") if symtab else None
        if not mains:
            return False
        addr = mains[0]["st_value"]
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= addr < seg["p_vaddr"] + seg["p_filesz"]:
                fh.seek(seg["p_offset"] + addr - seg["p_vaddr"])
                head = fh.read(9)
                head = head[4:] if head.startswith(_ENDBR64) else head
                return head[:5] in _NOPS
    return False


def links(real: str, pad: Pad, work: Path) -> bool:
    """Whether two units compiled by `real` with `pad` link into a program that runs, padded."""
    cxx = Path(real).name in CXX
    units = _CXX_UNITS if cxx else _C_UNITS
    for name, text in units.items():
        (work / name).write_text(text)
    objs = []

    def ok(argv: list[str]) -> bool:
        try:
            return subprocess.run(argv, cwd=work, capture_output=True, timeout=_PROBE_TIMEOUT_S).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False
    for name in units:
        objs.append(f"{name}.o")
        if not ok([real, *pad.compile, "-O2", "-c", name, "-o", objs[-1]]):
            return False
    exe = work / f"t-{pad.name or 'none'}"
    return ok([real, *pad.link, *objs, "-o", str(exe)]) and ok([str(exe)]) and (not pad.name or _padded_entry(exe))


def choose(real: str, cache_dir: Path) -> Pad:
    """The first padding in PADS that `real` links with (NONE when none does), asked once per
    compiler version (cached in `cache_dir`/pads.json)."""
    cache = pads_cache(cache_dir)
    key = _identity(real)
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    by_name = {p.name: p for p in (*PADS, NONE)}
    if isinstance(known, dict) and known.get(key) in by_name:
        return by_name[known[key]]
    with scratch.directory("pad") as tmp:
        pad = next((p for p in PADS if links(real, p, tmp)), NONE)
    known = known if isinstance(known, dict) else {}
    known[key] = pad.name
    tmp_cache = cache.with_name(f".pads.{os.getpid()}.json")
    tmp_cache.write_text(json.dumps(known, indent=1, sort_keys=True))
    tmp_cache.replace(cache)  # atomic: a concurrent build reads the old file or this one
    return pad


def describe(pads: dict[str, Pad], align: int = 0) -> str:
    """What the plan records: each wrapped compiler's padding, e.g. `c++=mfentry cc=patchable`, and
    ` align=64` when functions were aligned (part of the plan's fingerprint: like with like)."""
    return " ".join(f"{name}={pad.name or 'none'}" for name, pad in sorted(pads.items())) + (
        f" align={align}" if align else "")
