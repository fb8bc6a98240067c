"""Where a sampled function keeps its return address when its frame is not set up (ARCHITECTURE.md §6,
"Frames as the code ran them").

A frame-pointer walk names a sample's caller from `%rbp`.  That is right only where the sampled
function has set its frame up: before its `push %rbp; mov %rsp,%rbp`, after its `pop %rbp`, and
throughout a leaf the compiler left frameless, `%rbp` is still the caller's, so the walk's first
return address is the caller's own and the caller is skipped.  GCC schedules a small leaf's frame
set-up into its body (issue #55: a 13-instruction leaf whose frame existed for one instruction), so
most of such a leaf's samples landed under its caller's caller.

The unwind table (`.eh_frame`, which x86-64 compilers emit by default) says at every instruction
where the canonical frame address (CFA) is.  Where it is `%rsp + 8` the return address is the word
at the stack pointer; at `%rsp + 16` (after `push %rbp`) the word above it.  The sampler records
those two words where they point into the binary (`probe.bpf.c`, `on_sample`), and `Frames.missed`
turns them into the return address the walk skipped.  A word counts only where a call precedes it
(`elf.CallSites`).  FDEs are found through `.eh_frame_hdr`'s sorted table and parsed one at a time,
when a sample first lands in their function: parsing all of a large binary's costs ~1.2 s per
10,000 FDEs (pyelftools 0.33, python3.11's 10,221).
"""

from __future__ import annotations

import bisect
import io
import struct

from elftools.dwarf.callframe import FDE, CallFrameInfo
from elftools.elf.elffile import ELFFile

from gitperf.analysis.elf import BinaryInfo, CallSites, FunctionSymbol, direct_target
from gitperf.core.names import whole

RSP = 7  # DWARF's number for %rsp (System V x86-64 psABI, "DWARF Register Number Mapping")
TAIL_HOPS = 3  # tail jumps followed from a call's target to the function below it
WORDS = 2  # stack words the sampler records: the return address at CFA = %rsp + 8 or %rsp + 16
# .eh_frame_hdr encodings GNU ld, gold, lld and mold write: the pointer pc-relative, the count a
# 4-byte unsigned, the table's pairs 4-byte signed and relative to the header (LSB 5.0, "eh_frame_hdr")
HDR_ENCODINGS = (0x1B, 0x03, 0x3B)


class ReturnSlots:
    """For an address of a binary: which word above the stack pointer holds the return address
    there (0: at `%rsp`, 1: at `%rsp + 8`), when the unwind table puts the CFA at `%rsp + 8` or
    `%rsp + 16`; else None (the frame is set up, or the table says nothing of the address)."""

    def __init__(self, path: str):
        self.path = path
        self._index: tuple[list[int], list[int]] | None = None  # FDE starts, their offsets in .eh_frame
        self._cfi: CallFrameInfo | None = None
        self._fdes: dict[int, tuple[int, int, list[int], list[int | None]] | None] = {}  # offset -> rows

    def slot(self, vaddr: int) -> int | None:
        starts, offsets = self._load()
        i = bisect.bisect_right(starts, vaddr) - 1
        if i < 0:
            return None
        rows = self._rows(offsets[i])
        if rows is None or not rows[0] <= vaddr < rows[1]:
            return None
        pcs, slots = rows[2], rows[3]
        return slots[bisect.bisect_right(pcs, vaddr) - 1]

    def _load(self) -> tuple[list[int], list[int]]:
        if self._index is None:
            self._index = ([], [])
            try:
                self._index = self._read()
            except Exception:  # noqa: BLE001  (a binary whose tables we cannot read: no slots, as before)
                pass
        return self._index

    def _read(self) -> tuple[list[int], list[int]]:
        with open(self.path, "rb") as fh:
            elf = ELFFile(fh)
            frame, hdr = elf.get_section_by_name(".eh_frame"), elf.get_section_by_name(".eh_frame_hdr")
            if frame is None or hdr is None:
                return [], []
            data, head = frame.data(), hdr.data()
            self._cfi = CallFrameInfo(io.BytesIO(data), len(data), frame["sh_addr"],
                                      elf.get_dwarf_info(relocate_dwarf_sections=False).structs, for_eh_frame=True)
            if tuple(head[1:4]) != HDR_ENCODINGS:
                return [], []
            (count,) = struct.unpack_from("<I", head, 8)
            pairs = struct.iter_unpack("<ii", head[12:12 + 8 * count])
            table = sorted((hdr["sh_addr"] + loc, hdr["sh_addr"] + fde - frame["sh_addr"]) for loc, fde in pairs)
            return [s for s, _ in table], [o for _, o in table]

    def _rows(self, offset: int) -> tuple[int, int, list[int], list[int | None]] | None:
        if offset not in self._fdes:
            self._fdes[offset] = None
            try:
                fde = self._cfi._parse_entry_at(offset)  # (pyelftools parses one entry only through this)
                if isinstance(fde, FDE):
                    table = fde.get_decoded().table
                    lo = fde.header["initial_location"]
                    self._fdes[offset] = (lo, lo + fde.header["address_range"], [r["pc"] for r in table],
                                          [_slot(r["cfa"]) for r in table])
            except Exception:  # noqa: BLE001  (an opcode pyelftools does not know: this function as before)
                pass
        return self._fdes[offset]


def _slot(cfa) -> int | None:
    if cfa.expr is None and cfa.reg == RSP and cfa.offset in range(8, 8 * WORDS + 1, 8):
        return cfa.offset // 8 - 1
    return None


class Frames:
    """What the words of one binary's sampled stacks mean: whether a word is a return address
    (`after_call`), and a sample's frames as the code ran them (`walk`): the caller a frame-pointer
    walk skipped put back (`missed`), and the functions that tail-called the ones below them
    (`tail_callers`)."""

    def __init__(self, binary: BinaryInfo):
        self.binary = binary
        self.calls = CallSites(binary)
        self.slots = ReturnSlots(binary.path)
        self.library_slots = [ReturnSlots(lib.path) for lib in binary.libraries]
        self._jumps: dict[int, frozenset[int]] = {}  # function entry -> the entries it tail-jumps to
        # (return address, callee entry) -> `tail_callers`: asked for every frame of every sampled stack
        self._tails: dict[tuple[int, int | None], list[FunctionSymbol]] = {}
        # (an address in a frame, the return address above it) -> `_step`: asked for every frame of every
        # sampled stack (Lua: ~16 frames a stack, ~210 stacks a run, few of them alike)
        self._steps: dict[tuple[int, int], list[int]] = {}

    def after_call(self, vaddr: int) -> bool:
        return self.calls.after_call(vaddr)

    def walk(self, addrs: list[int], words: tuple[int, ...]) -> list[int]:
        """A sample's frame-pointer walk (link-time addresses, the sampled one first, then return
        addresses) with the frames it cannot see put back: each put-back tail caller as its entry + 1,
        which reads as a return address inside it."""
        if not addrs:
            return addrs
        out = addrs[:1]
        rest = addrs[1:]
        if (ret := self.missed(addrs[0], words)) is not None and rest[:1] != [ret]:
            rest.insert(0, ret)
        for ret in rest:
            at = out[-1] - (1 if len(out) > 1 else 0)
            if (step := self._steps.get((at, ret))) is None:
                step = self._steps[(at, ret)] = self._step(at, ret)
            out += step
        return out

    def _step(self, at: int, ret: int) -> list[int]:
        """What follows the frame at `at` when the next return address is `ret`: the tail callers in
        between (each as its entry + 1), then `ret`."""
        return [f.vaddr + 1 for f in self.tail_callers(ret, self.binary.symbolize(at))] + [ret]

    def missed(self, ip: int, words: tuple[int, ...]) -> int | None:
        """The return address of the sampled frame at `ip` that the frame-pointer walk skips, from the
        recorded words above the stack pointer (link-time addresses; 0 where a word was not in the
        binary); None where its frame is set up or the word is no return address."""
        if not any(words):
            return None
        slot = self.slots.slot(ip)
        ret = words[slot] if slot is not None and slot < len(words) else 0
        return ret if ret and self.calls.after_call(ret) else None

    def tail_callers(self, ret: int, callee: FunctionSymbol | None) -> list[FunctionSymbol]:
        """The functions between a call returning to `ret` and `callee`, innermost first: where the
        call's direct target is not `callee` but reaches it through tail jumps (`jmp callee` after
        the frame is torn down, which no stack shows), the one shortest chain of at most TAIL_HOPS;
        none where there is no such chain or more than one."""
        key = (ret, callee.vaddr if callee is not None else None)
        if key not in self._tails:
            self._tails[key] = self._tail_callers(ret, callee)
        return self._tails[key]

    def _tail_callers(self, ret: int, callee: FunctionSymbol | None) -> list[FunctionSymbol]:
        target = self.calls.call_target(ret)
        if callee is None or target is None or target == callee.vaddr:
            return []
        chains, frontier = [], [[target]]
        for _ in range(TAIL_HOPS):
            chains = [c + [j] for c in frontier for j in self._tail_jumps(c[-1]) if j not in c]
            found = [c for c in chains if c[-1] == callee.vaddr]
            if found:
                if len(found) > 1:
                    return []
                return [self.binary.symbolize(v) for v in reversed(found[0][:-1])]
            frontier = chains
        return []

    def _tail_jumps(self, entry: int) -> frozenset[int]:
        if entry not in self._jumps:
            self._jumps[entry] = frozenset()
            f = self.binary.symbolize(entry)
            if f is not None and f.vaddr == entry:
                self._jumps[entry] = frozenset(self._jumped_to(f))
        return self._jumps[entry]

    def _jumped_to(self, f: FunctionSymbol) -> set[int]:
        """Entries of other functions that `f` jumps to (`jmp`, or a conditional jump: GCC emits both
        as tail calls); its own `.cold` part is not another function."""
        with open(self.binary.path, "rb") as fh:
            fh.seek(f.offset)
            code = fh.read(f.size)
        out = set()
        for insn in self.calls.disasm(code, f.vaddr):
            if insn.mnemonic.startswith("j") and (t := direct_target(insn)) is not None \
                    and not f.vaddr <= t < f.vaddr + f.size:
                g = self.binary.symbolize(t)
                if g is not None and g.vaddr == t and whole(g.name) != whole(f.name):
                    out.add(t)
        return out
