"""A fast diff of two builds, function by function, and their direct calls (ARCHITECTURE.md §7).

`check --collect` needs to know which functions a commit changed in seconds, not the minutes angr
takes on a large binary.  Each function's machine code is disassembled (capstone) and normalised
so that code which merely moved compares equal: branch targets inside the function become offsets,
call (and tail-call) targets a placeholder whose callee is kept aside in order (a function of the
binary, a library function through its PLT stub, `memcmp@plt`, or a place inside another function,
`foo.cold+12`), RIP-relative
displacements and absolute addresses inside the binary are masked (inside its text, and for a
position-dependent build, whose code names its data by absolute address, inside every section it
loads).  What remains differs only where
the compiler emitted different code: the function's own source changed, or code inlined into it did.
The same pass yields the direct call graph (calls through pointers are not seen), from which the
callers of a changed function come.

Names are matched before code is compared (`diff`): a function only in the base and one only in the
target with the same normalised code are one function **renamed**, and so are two clones of one
function the compiler numbered otherwise (`foo.isra.0` and `foo.isra.1`) and a C++ function whose
parameters changed (its qualified name the same), changed if their code differs; a function whose
code is the same
and whose callees are the same once renames are followed is **relocated** (the demo's rename commit
changed `main` only in the name of the function it calls), not changed.  A function that now calls
another existing function calls other code: changed.  So `changed`, `new` and `removed` are exactly
what can run differently, and a commit with none of them has nothing to measure (`checks.paired`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import capstone
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

from gitperf.analysis import elf
from gitperf.analysis.elf import BinaryInfo, FunctionSymbol
from gitperf.core.errors import InputError
from gitperf.core.fmt import names
from gitperf.core.names import origin, short, unparameterised, whole

_HEX = re.compile(r"0x[0-9a-f]+")
_RIP = re.compile(r"\[rip [+-] 0x[0-9a-f]+\]")


@dataclass(frozen=True)
class Code:
    """One build's functions: a fingerprint of each one's normalised code, and whom each calls."""

    fingerprints: dict[str, str]  # of the code with call targets masked
    calls: dict[str, frozenset[str]]
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)  # callee of each call site, in order

    def callees(self, name: str, depth: int = 1) -> set[str]:
        """Functions `name` calls, directly or up to `depth` levels down."""
        out, frontier = set(), {name}
        for _ in range(depth):
            frontier = {c for n in frontier for c in self.calls.get(n, ())} - out
            out |= frontier
        return out

    def callers(self, names: set[str], depth: int = 1) -> set[str]:
        """Functions that call any of `names` directly, up to `depth` levels up."""
        callers_of: dict[str, set[str]] = {}
        for caller, callees in self.calls.items():
            for c in callees:
                callers_of.setdefault(c, set()).add(caller)
        out, frontier = set(), set(names)
        for _ in range(depth):
            frontier = {c for n in frontier for c in callers_of.get(n, ())} - out - set(names)
            out |= frontier
        return out


@dataclass(frozen=True)
class BinDiff:
    changed: tuple[str, ...] = ()  # in both builds, with different code
    new: tuple[str, ...] = ()  # only in the target
    removed: tuple[str, ...] = ()  # only in the base
    target_calls: dict[str, frozenset[str]] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)  # base name -> target name (same code, or a clone: `renames`)
    relocated: tuple[str, ...] = ()  # same code and callees, some of them renamed
    # of `removed`, those whose code the target's DWARF shows inlined into other functions: removed
    # as functions, their work done inside these now
    inlined: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the target's calls through its PLT, by caller: the functions of shared libraries it calls
    target_imports: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def nothing_changed(self) -> bool:
        """No function runs other code: what the commit changed is names, comments, layout."""
        return not (self.changed or self.new or self.removed)

    def describe(self) -> str:
        """One bounded line: what the diff found, in readable names (for progress and the report)."""
        parts = [f"{k} {names(v)}" for k, v in (("changed", self.changed), ("new", self.new),
                                                 ("removed", self.removed), ("relocated", self.relocated)) if v]
        renamed = sorted(self.renamed.items())
        if renamed:
            a, b = renamed[0]
            parts.append(f"renamed {short(a, 40)} -> {short(b, 40)}"
                         + (f" and {len(renamed) - 1} more" if len(renamed) > 1 else ""))
        return "; ".join(parts) or "no function differs"


@dataclass(frozen=True)
class _Places:
    """What an address in one build is: a function's start, a PLT stub, inside a function, in the text."""

    binary: BinaryInfo
    starts: dict[int, str]
    plt: dict[int, str]
    lo: int  # the text's bounds: absolute addresses inside it are masked
    hi: int

    @staticmethod
    def of(binary: BinaryInfo) -> _Places:
        lo, hi = min(f.vaddr for f in binary.functions), max(f.vaddr + f.size for f in binary.functions)
        if not binary.pie:  # code refers to its data by absolute address too (`mov edi, 0x447420`)
            lo, hi = _image(binary.path, lo, hi)
        return _Places(binary, {f.vaddr: f.name for f in binary.functions}, plt_names(binary.path), lo, hi)

    def callee(self, address: int) -> str:
        """The function a call or jump to `address` reaches: a function's name, `memcmp@plt`, or for a
        jump into another function's body (a function and its `.cold` part jump to and fro) the
        function and the offset ("X": no function there)."""
        if name := self.starts.get(address) or self.plt.get(address):
            return name
        sym = self.binary.symbolize(address)
        return f"{sym.name}+{address - sym.vaddr}" if sym else "X"


def _image(path: str, lo: int, hi: int) -> tuple[int, int]:
    """The address range of every section a position-dependent binary loads: in it, an immediate is
    an address, which moves when anything before it grows (ninja's object files linked in another
    order changed 165 functions' code by their data addresses alone, its check built -no-pie for
    the 5-byte entry pad)."""
    with open(path, "rb") as fh:
        spans = [(s["sh_addr"], s["sh_addr"] + s["sh_size"]) for s in ELFFile(fh).iter_sections()
                 if s["sh_flags"] & SH_FLAGS.SHF_ALLOC and s["sh_addr"]]
    return min([lo] + [a for a, _ in spans]), max([hi] + [b for _, b in spans])


def _normalise(insn, f: FunctionSymbol, places: _Places) -> tuple[str, str | None]:
    """The instruction with addresses masked, and the function it calls or jumps to (None: none)."""
    ops, callee = insn.op_str, None
    if insn.group(capstone.x86.X86_GRP_JUMP) or insn.group(capstone.x86.X86_GRP_CALL):
        if ops.startswith("0x"):
            target = int(ops, 16)
            if f.vaddr <= target < f.vaddr + f.size:
                ops = f"L{target - f.vaddr}"
            else:
                callee, ops = places.callee(target), "F"
    ops = _RIP.sub("[rip]", ops)
    ops = _HEX.sub(lambda m: "A" if places.lo <= int(m.group(0), 16) < places.hi else m.group(0), ops)
    return f"{insn.mnemonic} {ops}", callee


_SLOT = re.compile(r"\[rip \+ (0x[0-9a-f]+)\]")


def plt_names(path: str) -> dict[int, str]:
    """Address of each PLT stub -> the library function it jumps to (`memcmp@plt`): a call into a
    library is a call target like any other (a commit that calls `strcmp` instead of `memcmp` changed
    its caller).  Each stub's `jmp [rip + d]` reads a GOT slot that a relocation names."""
    with open(path, "rb") as fh:
        e = ELFFile(fh)
        slots: dict[int, str] = {}
        for sec in e.iter_sections():
            if isinstance(sec, RelocationSection) and sec["sh_link"] and sec.name in (".rela.plt", ".rela.dyn"):
                symbols = e.get_section(sec["sh_link"])
                for r in sec.iter_relocations():
                    if r["r_info_sym"] and (name := symbols.get_symbol(r["r_info_sym"]).name):
                        slots[r["r_offset"]] = name
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        out = {}
        for name in (".plt", ".plt.sec", ".plt.got"):
            sec = e.get_section_by_name(name)
            if sec is None:
                continue
            start, size = sec["sh_addr"], sec["sh_entsize"] or 16
            for insn in md.disasm(sec.data(), start):
                m = _SLOT.search(insn.op_str) if insn.mnemonic.endswith("jmp") else None
                if m and (target := slots.get(insn.address + insn.size + int(m.group(1), 16))):
                    out[start + (insn.address - start) // size * size] = f"{target}@plt"
    return out


def read_code(binary: BinaryInfo) -> Code:
    """Fingerprints and direct calls (tail calls included) of every function (one capstone pass over the text)."""
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    places = _Places.of(binary)
    starts = places.starts
    fingerprints, calls, targets = {}, {}, {}
    with open(binary.path, "rb") as fh:
        for f in binary.functions:
            fh.seek(f.offset)
            code = fh.read(f.size)
            lines, callees, order = [], set(), []
            for insn in md.disasm(code, f.vaddr):
                line, target = _normalise(insn, f, places)
                lines.append(line)
                if target is not None:
                    order.append(target)
                # a call, or a jump to another function's start: a tail call (Lua's luaS_newlstr ends
                # in `jmp internshrstr`), whose callee's time its caller's return probe still covers
                call = insn.group(capstone.x86.X86_GRP_CALL)
                if (call or insn.group(capstone.x86.X86_GRP_JUMP)) and insn.op_str.startswith("0x"):
                    callee = starts.get(int(insn.op_str, 16))
                    if callee and (call or callee != f.name):  # a jump to its own start is a loop
                        callees.add(callee)
            fingerprints[f.name] = hashlib.sha1("\n".join(lines).encode()).hexdigest()
            calls[f.name] = frozenset(callees)
            targets[f.name] = tuple(order)
    return Code(fingerprints, calls, targets)


def _one_to_one(gone: set[str], added: set[str], key) -> dict[str, str]:
    """Names of `gone` matched to names of `added` with the same `key(side, name)`, where exactly one
    of each has it."""
    groups: dict[object, tuple[list[str], list[str]]] = {}
    for side, ns in ((0, gone), (1, added)):
        for n in sorted(ns):
            groups.setdefault(key(side, n), ([], []))[side].append(n)
    return {olds[0]: news[0] for olds, news in groups.values() if len(olds) == 1 and len(news) == 1}


def renames(a: Code, b: Code) -> dict[str, str]:
    """Functions only in `a` matched to functions only in `b`: base name -> target name.  First those
    with the same normalised code and number of call sites (a rename), then, of the rest, compiler
    clones of the same function (`foo.isra.0` -> `foo.isra.1`, `foo` -> `foo.constprop.0`:
    `core.names.origin`), whose code may differ, then C++ functions whose signature changed (the same
    qualified name: `core.names.unparameterised`).  Only one-to-one matches (two empty stubs alike, or
    two clones of one function, match nothing)."""
    gone, added = a.fingerprints.keys() - b.fingerprints.keys(), b.fingerprints.keys() - a.fingerprints.keys()
    code = (a, b)
    out = _one_to_one(gone, added, lambda side, n: (code[side].fingerprints[n], len(code[side].targets.get(n, ()))))
    out |= _one_to_one(gone - out.keys(), added - set(out.values()), lambda side, n: origin(n))
    # a C++ function whose signature changed (`find_id(std::string const&)` -> `find_id(std::string)`:
    # "new" beside "removed", 4.8x its instructions unseen, issue #55): its qualified name is the same
    out |= _one_to_one(gone - out.keys(), added - set(out.values()),
                       lambda side, n: unparameterised(n) or ("unmatched", side, n))
    return out


def diff(base: BinaryInfo, target: BinaryInfo) -> BinDiff:
    a, b = read_code(base), read_code(target)
    renamed = renames(a, b)
    follow = lambda ts: tuple(renamed.get(t, t) for t in ts)  # noqa: E731
    changed, relocated = [], []
    for n in sorted(a.fingerprints.keys() & b.fingerprints.keys()):
        ta, tb = a.targets.get(n, ()), b.targets.get(n, ())
        if a.fingerprints[n] != b.fingerprints[n] or follow(ta) != tb:
            changed.append(n)
        elif ta != tb:
            relocated.append(n)
    # a renamed function whose code or callees changed (not only by renames) runs other code: changed too
    changed += [new for old, new in renamed.items()
                if a.fingerprints[old] != b.fingerprints[new] or follow(a.targets.get(old, ())) != b.targets.get(new, ())]
    new = b.fingerprints.keys() - a.fingerprints.keys() - set(renamed.values())
    removed = a.fingerprints.keys() - b.fingerprints.keys() - renamed.keys()
    # a `.cold` part is its function's unlikely code, jumped into, never called: a change, appearance or
    # disappearance of it is a change of its function (when that function is in both builds)
    both = a.fingerprints.keys() & b.fingerprints.keys()
    parts = {n for n in (*changed, *new, *removed) if whole(n) != n and whole(n) in both}
    changed = {whole(n) if n in parts else n for n in changed} | {whole(n) for n in parts}
    removed -= parts
    into = elf.inlined_into(target.path) if removed else {}
    # only into functions the target has (an inlined copy inside another inlined copy counts for the
    # function around both)
    inlined = {n: tuple(sorted(c & b.fingerprints.keys())) for n in sorted(removed) if (c := into.get(n))}
    return BinDiff(changed=tuple(sorted(changed)), new=tuple(sorted(new - parts)), removed=tuple(sorted(removed)),
                   target_calls=b.calls, renamed=renamed, relocated=tuple(sorted(set(relocated) - changed)),
                   inlined={n: c for n, c in inlined.items() if c}, target_imports=_imports(b))


def _imports(code: Code) -> dict[str, frozenset[str]]:
    """Per function, the library functions it calls through the PLT (`memcmp@plt` -> `memcmp`)."""
    out = {n: frozenset(t[:-len("@plt")] for t in ts if t.endswith("@plt")) for n, ts in code.targets.items()}
    return {n: ts for n, ts in out.items() if ts}


@dataclass(frozen=True)
class LibraryChanges:
    """What differs between two builds' own shared libraries: in a few words ("" where nothing does),
    the functions changed or new there (what a paired check's changed set gains), and those removed."""

    said: str = ""
    functions: frozenset[str] = frozenset()
    calls: dict[str, frozenset[str]] = field(default_factory=dict)  # the target libraries' direct calls
    removed: frozenset[str] = frozenset()
    inlined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # of the removed: inlined into these (`diff`)


def library_changes(base: dict[str, str], target: dict[str, str]) -> LibraryChanges:
    """What differs between two builds' own shared libraries (DT_NEEDED name -> path,
    `elf.own_libraries`).  The binary's diff cannot see code there: zlib's minigzip runs crc32 in
    build/libz.so.1, and the commit that made it 1.5-3x faster left minigzip's code as it was.  A
    library without symbols to compare by function differs."""
    said, functions, calls, removed, inlined = [], set(), {}, set(), {}
    for name in sorted(base.keys() | target.keys()):
        if name not in base or name not in target:
            said.append(f"{name} {'new' if name in target else 'gone'}")
            continue
        try:
            d = diff(elf.load(base[name]), elf.load(target[name]))
        except InputError as e:
            said.append(f"{name} not compared by function ({e})")
            continue
        calls.update((n, cs | d.target_imports.get(n, frozenset())) for n, cs in d.target_calls.items())
        if not d.nothing_changed:
            said.append(f"{name}: {d.describe()}")
            functions |= set(d.changed) | set(d.new)
            removed |= set(d.removed)
            inlined.update(d.inlined)
    return LibraryChanges("; ".join(said), frozenset(functions), calls, frozenset(removed), inlined)
