"""A fast diff of two builds, function by function, and their direct calls (ARCHITECTURE.md §7).

`check --collect` needs to know which functions a commit changed in seconds, not the minutes angr
takes on a large binary.  Each function's machine code is disassembled (capstone) and normalised
so that code which merely moved compares equal: branch and call targets become the callee's name
or an offset inside the function, RIP-relative displacements and absolute addresses inside the
binary are masked.  What remains differs only where the compiler emitted different code: the
function's own source changed, or code inlined into it did.  The same pass yields the direct
call graph (calls through pointers are not seen), from which the callers of a changed function come.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import capstone

from gitperf.analysis.elf import BinaryInfo, FunctionSymbol

_HEX = re.compile(r"0x[0-9a-f]+")
_RIP = re.compile(r"\[rip [+-] 0x[0-9a-f]+\]")


@dataclass(frozen=True)
class Code:
    """One build's functions: a fingerprint of each one's normalised code, and whom each calls."""

    fingerprints: dict[str, str]
    calls: dict[str, frozenset[str]]

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


def _normalise(insn, f: FunctionSymbol, starts: dict[int, str], lo: int, hi: int) -> str:
    ops = insn.op_str
    if insn.group(capstone.x86.X86_GRP_JUMP) or insn.group(capstone.x86.X86_GRP_CALL):
        if ops.startswith("0x"):
            target = int(ops, 16)
            if f.vaddr <= target < f.vaddr + f.size:
                ops = f"L{target - f.vaddr}"
            else:
                ops = starts.get(target, "X")
    ops = _RIP.sub("[rip]", ops)
    ops = _HEX.sub(lambda m: "A" if lo <= int(m.group(0), 16) < hi else m.group(0), ops)
    return f"{insn.mnemonic} {ops}"


def read_code(binary: BinaryInfo) -> Code:
    """Fingerprints and direct calls (tail calls included) of every function (one capstone pass over the text)."""
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    md.detail = True
    starts = {f.vaddr: f.name for f in binary.functions}
    lo = min(f.vaddr for f in binary.functions)
    hi = max(f.vaddr + f.size for f in binary.functions)
    fingerprints, calls = {}, {}
    with open(binary.path, "rb") as fh:
        for f in binary.functions:
            fh.seek(f.offset)
            code = fh.read(f.size)
            lines, callees = [], set()
            for insn in md.disasm(code, f.vaddr):
                lines.append(_normalise(insn, f, starts, lo, hi))
                # a call, or a jump to another function's start: a tail call (Lua's luaS_newlstr ends
                # in `jmp internshrstr`), whose callee's time its caller's return probe still covers
                call = insn.group(capstone.x86.X86_GRP_CALL)
                if (call or insn.group(capstone.x86.X86_GRP_JUMP)) and insn.op_str.startswith("0x"):
                    callee = starts.get(int(insn.op_str, 16))
                    if callee and (call or callee != f.name):  # a jump to its own start is a loop
                        callees.add(callee)
            fingerprints[f.name] = hashlib.sha1("\n".join(lines).encode()).hexdigest()
            calls[f.name] = frozenset(callees)
    return Code(fingerprints, calls)


def diff(base: BinaryInfo, target: BinaryInfo) -> BinDiff:
    a, b = read_code(base), read_code(target)
    both = a.fingerprints.keys() & b.fingerprints.keys()
    return BinDiff(changed=tuple(sorted(n for n in both if a.fingerprints[n] != b.fingerprints[n])),
                   new=tuple(sorted(b.fingerprints.keys() - a.fingerprints.keys())),
                   removed=tuple(sorted(a.fingerprints.keys() - b.fingerprints.keys())),
                   target_calls=b.calls)
