"""What the engine needs to know about a binary: its functions, where they are in the file, what
their entry instruction costs to probe, and its build id.

Entry-instruction classes (ARCHITECTURE.md §6): the kernel emulates a few instructions at a uprobe
(`push`, branches, `nop`; a 5-byte NOP costs less still, see NOP5): ~1 us a traced call on the latest
machine; every other instruction is single-stepped out of line: ~10-20 us a call on these virtual
machines.  The class decides the per-call cost in the overhead model; the costs themselves are
calibrated on each machine (engine/calibrate.py).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Iterable

import capstone
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection

from gitperf.core.errors import InputError
from gitperf.git.pad import MAPPED_TREE

# Compiler/runtime scaffolding: never interesting, and some of it runs before main.
_SCAFFOLDING = {
    "_start", "_init", "_fini", "frame_dummy", "register_tm_clones", "deregister_tm_clones",
    "__do_global_dtors_aux", "__libc_csu_init", "__libc_csu_fini", "_dl_relocate_static_pie",
}
ENTRY_CLASSES = ("push", "branch", "nop", "nop5", "endbr", "singlestep")
# The 5-byte NOP (`nopl 0x0(%rax,%rax,1)`) that `-pg -mfentry -mnop-mcount` puts at every entry: kernels
# from 6.18 turn a uprobe on exactly these bytes into a call to a trampoline (no trap) at its first hit.
NOP5 = bytes.fromhex("0f1f440000")


@dataclass(frozen=True)
class FunctionSymbol:
    name: str
    vaddr: int
    size: int
    offset: int  # file offset of the first instruction (what uprobes attach to)
    entry: str  # entry-instruction class, one of ENTRY_CLASSES
    mnemonic: str  # the entry instruction itself, for reports


@dataclass(frozen=True)
class BinaryInfo:
    path: str
    build_id: str
    pie: bool
    functions: tuple[FunctionSymbol, ...]
    compilers: tuple[str, ...] = ()  # what built it, from its .comment section ("GCC: (Debian 12.2.0-14) 12.2.0")
    # (vaddr, file offset) of the code the dynamic loader runs when it loads this object (DT_INIT): a
    # library's load address in a process is read from a probe there (engine/probe.bpf.c, on_lib_load)
    init: tuple[int, int] | None = None
    # the project's own shared libraries this binary loads from its build (`with_libraries`): their
    # functions are sampled and named as the binary's are (ARCHITECTURE.md §6, "The project's own libraries")
    libraries: tuple[BinaryInfo, ...] = ()

    def by_name(self) -> dict[str, FunctionSymbol]:
        return {f.name: f for f in self.functions}

    @cached_property
    def _starts(self) -> list[int]:
        return [f.vaddr for f in self.functions]

    def symbolize(self, vaddr: int) -> FunctionSymbol | None:
        """The function containing a (load-bias-corrected) virtual address."""
        i = bisect.bisect_right(self._starts, vaddr) - 1
        if i >= 0 and vaddr < self.functions[i].vaddr + max(self.functions[i].size, 1):
            return self.functions[i]
        return None


class CallSites:
    """Whether an address in the binary follows a call instruction, i.e. can be a return address.
    (A word on the stack that points into the text is not always one: code pointers and words a
    callee left behind are there too.)  Reads the file lazily; answers are cached."""

    MAX_CALL = 7  # bytes: the longest call forms (REX + FF /2 + SIB + disp32)

    def __init__(self, binary: BinaryInfo):
        self.binary = binary
        self._md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        self._md.detail = True
        self._known: dict[int, tuple[bool, int | None]] = {}  # address -> (after a call, its direct target)

    def after_call(self, vaddr: int) -> bool:
        return self._call(vaddr)[0]

    def call_target(self, vaddr: int) -> int | None:
        """The address the call ending at `vaddr` calls, where it is a direct call (else None)."""
        return self._call(vaddr)[1]

    def disasm(self, code: bytes, vaddr: int):
        """The instructions of `code` (at `vaddr`), with their operands."""
        return self._md.disasm(code, vaddr)

    def _call(self, vaddr: int) -> tuple[bool, int | None]:
        if vaddr not in self._known:
            self._known[vaddr] = self._check(vaddr)
        return self._known[vaddr]

    def _check(self, vaddr: int) -> tuple[bool, int | None]:
        f = self.binary.symbolize(vaddr - 1)
        if f is None or vaddr - f.vaddr < 2:
            return False, None
        n = min(self.MAX_CALL, vaddr - f.vaddr)
        with open(self.binary.path, "rb") as fh:
            fh.seek(f.offset + (vaddr - f.vaddr) - n)
            code = fh.read(n)
        for k in range(2, n + 1):  # a call of k bytes ending exactly at vaddr
            insns = list(self._md.disasm(code[n - k:], vaddr - k))
            if len(insns) == 1 and insns[0].size == k and insns[0].mnemonic == "call":
                return True, direct_target(insns[0])
        return False, None


def direct_target(insn) -> int | None:
    """The immediate target of a call or jump (capstone, with detail), None where it is indirect."""
    ops = insn.operands
    return ops[0].imm if len(ops) == 1 and ops[0].type == capstone.x86.X86_OP_IMM else None


def probe_points(binary: BinaryInfo, funcs: Iterable[FunctionSymbol]) -> set[int]:
    """The addresses where a stack sample of a probed thread means probe time, for each of `funcs`
    (entry-probed): the entry itself (its trap about to be taken) and the instruction after the first,
    where the thread goes on once the kernel has emulated or single-stepped it, or returned from the
    nop5 trampoline.  A branch entry goes on at its target: only its entry counts."""
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    points = set()
    with open(binary.path, "rb") as fh:
        for f in funcs:
            points.add(f.vaddr)
            if f.entry == "branch":
                continue
            fh.seek(f.offset)
            insn = next(md.disasm(fh.read(16), f.vaddr, 1), None)
            if insn is not None:
                points.add(f.vaddr + insn.size)
    return points


def classify(mnemonic: str, code: bytes = b"") -> str:
    """The entry class of a function whose first instruction is `mnemonic` (`code`: its bytes)."""
    if code.startswith(NOP5):
        return "nop5"
    if mnemonic == "push":
        return "push"
    if mnemonic in ("jmp", "call") or (mnemonic.startswith("j") and len(mnemonic) <= 4):
        return "branch"
    if mnemonic.startswith("nop"):
        return "nop"
    if mnemonic == "endbr64":
        return "endbr"
    return "singlestep"


def _build_id(elf: ELFFile, path: str) -> str:
    for sec in elf.iter_sections():
        if isinstance(sec, NoteSection):
            for note in sec.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return note["n_desc"]
    # No build-id note: hash the file, which identifies the build just as well.
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return "sha1:" + h.hexdigest()


def _vaddr_to_offset(elf: ELFFile, vaddr: int) -> int | None:
    for seg in elf.iter_segments():
        if seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] <= vaddr < seg["p_vaddr"] + seg["p_filesz"]:
            return vaddr - seg["p_vaddr"] + seg["p_offset"]
    return None


def load(path: str | os.PathLike) -> BinaryInfo:
    """Read a binary's functions.  Errors say what is wrong and what to do."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"binary not found: {p} (did the build produce it? check build.binary in .gitperf.toml)")
    if not p.is_file():
        raise InputError(f"not a file: {p}")
    with open(p, "rb") as fh:
        if fh.read(4) != b"\x7fELF":
            raise InputError(f"not an ELF binary: {p} (point build.binary / --binary at the compiled program, "
                             "not a script or wrapper)")
        fh.seek(0)
        try:
            elf = ELFFile(fh)
            return _read(elf, str(p.resolve()))
        except ELFError as e:
            raise InputError(f"cannot read ELF file {p}: {e}") from None


def _read(elf: ELFFile, path: str) -> BinaryInfo:
    if elf["e_machine"] != "EM_X86_64":
        raise InputError(f"{path}: only x86-64 binaries are supported (this one is {elf['e_machine']})")
    symtab = elf.get_section_by_name(".symtab")
    if not isinstance(symtab, SymbolTableSection):
        raise InputError(f"{path} is stripped (no symbol table): git perf needs function names. "
                         "Build with -g and do not strip it (no `strip`, no `-s`, no `install -s`).")
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    stream = elf.stream
    seen: dict[int, FunctionSymbol] = {}
    for sym in symtab.iter_symbols():
        if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] == "SHN_UNDEF" or sym["st_size"] == 0:
            continue
        name, vaddr = sym.name, sym["st_value"]
        if not name or name in _SCAFFOLDING or vaddr in seen:
            continue  # aliases at one address are one function: keep the first name
        off = _vaddr_to_offset(elf, vaddr)
        if off is None:
            continue
        stream.seek(off)
        code = stream.read(16)
        insn = next(md.disasm(code, vaddr, 1), None)
        mnemonic = insn.mnemonic if insn else "?"
        seen[vaddr] = FunctionSymbol(name, vaddr, sym["st_size"], off, classify(mnemonic, code), mnemonic)
    if not seen:
        raise InputError(f"{path} has a symbol table but no functions in it")
    return BinaryInfo(
        path=path,
        build_id=_build_id(elf, path),
        pie=elf["e_type"] == "ET_DYN",
        functions=tuple(sorted(seen.values(), key=lambda f: f.vaddr)),
        compilers=_compilers(elf),
        init=_init(elf),
    )


def _init(elf: ELFFile) -> tuple[int, int] | None:
    dynamic = elf.get_section_by_name(".dynamic")
    at = next((t.entry.d_val for t in dynamic.iter_tags() if t.entry.d_tag == "DT_INIT"), None) if dynamic else None
    off = _vaddr_to_offset(elf, at) if at else None
    return (at, off) if off is not None else None


def with_libraries(binary: BinaryInfo, root: str) -> tuple[BinaryInfo, list[str]]:
    """The binary with the project's own shared libraries (`own_libraries`) it loads, each read like
    it; and what was left out and why (a stripped library has no names to give)."""
    libs, left = [], []
    for name, path in own_libraries(binary.path, root).items():
        try:
            libs.append(load(path))
        except InputError as e:
            left.append(f"{name}: {e}")
    return replace(binary, libraries=tuple(libs)), left


def own_libraries(path: str, root: str) -> dict[str, str]:
    """The shared libraries the binary at `path` loads from inside `root`, by name: those it needs
    through its run path (`$ORIGIN` read), by their DT_NEEDED name (zlib's CMake build links minigzip
    with build/libz.so.1), then, where it calls `dlopen`, the plugins it may load (`_plugins`); the
    project's own, whose code a commit can change without the binary's changing.  Read once per file
    as it is (a paired check asks three times a side: its build's outputs, its libraries, their diff)."""
    st = os.stat(path)
    here = os.stat(os.path.dirname(path) or ".").st_mtime_ns  # (a plugin built beside it since)
    return dict(_own_libraries(path, root, (st.st_mtime_ns, st.st_size, here)))


@functools.lru_cache(maxsize=16)
def _own_libraries(path: str, root: str, _as_it_is: tuple[int, int, int]) -> tuple[tuple[str, str], ...]:
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        dynamic = elf.get_section_by_name(".dynamic")
        tags = list(dynamic.iter_tags()) if dynamic is not None else []
        dlopens = _imports(elf, "dlopen")
    needed = [t.needed for t in tags if t.entry.d_tag == "DT_NEEDED"]
    origin = os.path.dirname(path)
    dirs = [d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for t in tags
            if t.entry.d_tag in ("DT_RUNPATH", "DT_RPATH") for d in (t.runpath if t.entry.d_tag == "DT_RUNPATH"
                                                                      else t.rpath).split(":")]
    inside = [d for d in dirs if _inside(d, root)]
    out = {}
    for name in needed:
        found = next((f for d in inside if os.path.isfile(f := os.path.join(d, name))), None)
        if found:
            out[name] = found
    if dlopens and _inside(origin, root):
        have = {os.path.realpath(f) for f in out.values()}
        out.update((name, f) for name, f in _plugins(origin).items() if os.path.realpath(f) not in have)
    return tuple(out.items())


def _inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or below it: a Makefile project links its program at the tree's root
    with its library beside it, run path `$ORIGIN` (cJSON's libcjson.so.1: its 3ece4c8 speedup read
    "no function differs" while the root itself was not counted inside)."""
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def _imports(elf: ELFFile, name: str) -> bool:
    """Whether the binary calls `name` from a shared library (an undefined dynamic symbol)."""
    dynsym = elf.get_section_by_name(".dynsym")
    return dynsym is not None and any(sym.name == name and sym["st_shndx"] == "SHN_UNDEF"
                                      for sym in dynsym.iter_symbols())


# Where a program that calls dlopen keeps the plugins of its build: shared objects beside it and in
# the directories under it, this deep (build/prog with build/plugins/x.so), at most this many: each
# is read like the binary, and the engine watches 64 libraries' loads (bcc_engine.MAX_LIBS; 8 without
# uprobe_multi links), the needed ones first.
PLUGIN_DEPTH = 2
MAX_PLUGINS = 32


def _plugins(top: str) -> dict[str, str]:
    """Shared objects (`*.so`, `*.so.N`) under `top`, by file name, one per file (a versioned
    library's symlinks are one file), nearest first."""
    named = []
    for here, subdirs, files in os.walk(top):
        depth = here.count(os.sep) - top.count(os.sep)
        subdirs[:] = [d for d in subdirs if not d.startswith(".")] if depth + 1 < PLUGIN_DEPTH else []
        named += [(depth, here, name) for name in files if re.search(r"\.so(\.\d+)*$", name)]
    out: dict[str, str] = {}
    seen: set[str] = set()
    for _depth, here, name in sorted(named):
        f = os.path.join(here, name)
        if os.path.realpath(f) not in seen and _is_shared_object(f):
            seen.add(os.path.realpath(f))
            out[name] = f
            if len(out) >= MAX_PLUGINS:
                break
    return out


def _is_shared_object(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF" and ELFFile(fh)["e_type"] == "ET_DYN"
    except (OSError, ELFError):
        return False


def _compilers(elf: ELFFile) -> tuple[str, ...]:
    """The compilers' identification strings each object left in `.comment` (the linker merges equal ones)."""
    sec = elf.get_section_by_name(".comment")
    if sec is None:
        return ()
    return tuple(dict.fromkeys(t.decode(errors="replace") for t in sec.data().split(b"\0") if t.strip()))[:8]


def _symbol_name(die) -> str | None:
    """The symbol a subprogram DIE defines: its linkage (mangled) name, else its name, also through
    the declaration a C++ member's out-of-class definition points at (DW_AT_specification)."""
    for _ in range(3):  # definition -> declaration (-> abstract origin)
        for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name", "DW_AT_name"):
            if key in die.attributes:
                return die.attributes[key].value.decode(errors="replace")
        ref = next((k for k in ("DW_AT_specification", "DW_AT_abstract_origin") if k in die.attributes), None)
        if ref is None:
            return None
        die = die.get_DIE_from_attribute(ref)
    return None


NM_TIMEOUT_S = 120  # nm -l on a large C++ binary with full debug info takes seconds, never minutes


def source_locations(path: str | os.PathLike, root: str = "") -> dict[str, str]:
    """Symbol -> "file:line" where its code starts, from the DWARF line table through binutils' `nm
    -l` (empty without debug info); the file relative to `root` when under it.  `nm` reads the line
    table in C: 0.14 s on ninja where walking every DIE with pyelftools took 4.1 s, twice a check, and
    the lines agreed on all 201 functions both named (the DIE's DW_AT_decl_line)."""
    try:
        out = subprocess.run(["nm", "--line-numbers", "--defined-only", os.fspath(path)], capture_output=True,
                             text=True, errors="replace", timeout=NM_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return {}  # locations are a convenience: without binutils a collection still runs
    prefixes = [p for p in (root.rstrip("/") + "/" if root else "", MAPPED_TREE + "/") if p]
    found = {}
    for line in out.splitlines():
        symbol, _, where = line.partition("\t")
        parts = symbol.split(" ", 2)
        if where and len(parts) == 3 and parts[1] in "tTwW":
            prefix = next((p for p in prefixes if where.startswith(p)), "")
            found[parts[2]] = os.path.normpath(where[len(prefix):])
    return found


def inlined_into(path: str | os.PathLike) -> dict[str, frozenset[str]]:
    """Symbol -> the functions the DWARF shows copies of it inlined into (the innermost out-of-line
    function around each copy); empty without debug info.  Read once per file version (pyelftools
    walks every DIE: seconds on a real C++ program), and only when a diff has removed functions."""
    st = os.stat(path)
    return _inlined_into(os.fspath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=8)
def _inlined_into(path: str, mtime_ns: int, size: int) -> dict[str, frozenset[str]]:
    origins: dict[int, str | None] = {}  # DIE offset -> the symbol it names (abstract instances)
    sites: list[tuple[int, str]] = []  # (abstract origin's offset, enclosing function's symbol)
    with open(path, "rb") as fh:
        try:
            elf = ELFFile(fh)
            if not elf.has_dwarf_info():
                return {}
            for cu in elf.get_dwarf_info().iter_CUs():
                outer: list[tuple[int, str | None]] = []  # (depth, symbol) of the enclosing subprograms
                level = 0  # of the next DIE: iter_DIEs yields a null DIE after each list of children
                for die in cu.iter_DIEs():
                    if die.tag is None:
                        level -= 1
                        continue
                    depth, level = level, level + die.has_children
                    while outer and outer[-1][0] >= depth:
                        outer.pop()
                    if die.tag == "DW_TAG_inlined_subroutine":
                        ref = die.attributes.get("DW_AT_abstract_origin")
                        here = next((n for _, n in reversed(outer) if n), None)
                        if ref is not None and here is not None:
                            sites.append((ref.value + (cu.cu_offset if ref.form != "DW_FORM_ref_addr" else 0), here))
                        continue
                    if die.tag != "DW_TAG_subprogram":
                        continue
                    name = _symbol_name(die)
                    if "DW_AT_inline" in die.attributes:
                        origins[die.offset] = name
                    if "DW_AT_low_pc" in die.attributes or "DW_AT_ranges" in die.attributes:
                        outer.append((depth, name))  # an out-of-line function: code of its own
        except (ELFError, KeyError, IndexError, ValueError, AttributeError):
            pass  # debug info is a convenience: broken DWARF must not stop a check
    inlined: dict[str, set[str]] = {}
    for offset, caller in sites:
        if (name := origins.get(offset)) and name != caller:
            inlined.setdefault(name, set()).add(caller)
    return {n: frozenset(c) for n, c in inlined.items()}

