"""A run's stack samples read from the BPF maps and symbolised (ARCHITECTURE.md §6): each sample's
frames as the code ran them (`analysis.unwind`), in the binary and in the project's own libraries
(their load addresses from `libinits`), probe handling told apart (`probe_handling`), the stacks
folded from the root down.  The driver (`bcc_engine`) calls `read` once a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from gitperf.analysis.elf import BinaryInfo, FunctionSymbol
from gitperf.analysis.unwind import Frames
from gitperf.core.names import whole
from gitperf.core.stacks import KERNEL, LIBRARY, UNKNOWN
from gitperf.plan.probes import ProbePlan


# Kernel functions that run only while a uprobe or uretprobe is handled (kernel/events/uprobes.c,
# arch/x86/kernel/uprobes.c): the int3 trap, the single-step, the system calls of the return
# trampoline and of an optimized nop5 entry (__x64_sys_uretprobe, __x64_sys_uprobe), and the exit
# of the int3 and debug exceptions they enter by (a traced workload sets no breakpoints of its own).
PROBE_FRAMES = ("handle_swbp", "handle_singlestep", "handle_trampoline", "asm_exc_int3", "exc_int3",
                "asm_exc_debug", "exc_debug")


def probe_handling(kernel_frames: Iterable[str]) -> bool:
    """Whether a kernel stack (function names) was taken inside probe handling."""
    return any(name.startswith(PROBE_FRAMES) or "uprobe" in name for name in kernel_frames)


@dataclass
class Samples:
    """One run's stack samples: per probed-function index, outside every function, in probe
    handling, and the bytes read."""

    by_function: dict[int, int]
    unknown: int
    probe: int
    nbytes: int
    # of by_function, the samples taken in a library and given to the function from the stack
    library: dict[int, int] = field(default_factory=dict)
    # frames of the binary from the root down (LIBRARY last when taken in a library) -> samples
    stacks: dict[tuple[str, ...], int] = field(default_factory=dict)
    rooted: int = 0  # samples whose stack reaches the plan's root: the unwinding worked
    # samples taken in a function of the project's own libraries (BinaryInfo.libraries), by its name
    library_functions: dict[str, int] = field(default_factory=dict)


@dataclass
class Known:
    """What a session's runs share in symbolising their samples (one binary, one plan): what the stack
    words mean (`Frames`, with its caches), where a sample means probe time (the probed entries,
    link-time), and which kernel stacks are probe handling."""

    calls: Frames
    points: set[int]
    in_probe: dict[tuple[int, ...], bool] = field(default_factory=dict)  # kernel stack -> probe handling


def _at_probe(k, bias: int | None, addrs: list[int], points: set[int]) -> bool:
    """A user sample at a probed entry or just after it; or in the optimized nop5's trampoline, which
    the entry called: the return address above the stack pointer is then the one after the NOP."""
    if bias is None:
        return False
    return ((k.kstackid < 0 and bool(addrs) and addrs[0] - bias in points)
            or bool(k.ret and k.ret - bias in points))


def _path(frames: list[str], own: bool, in_kernel: bool) -> tuple[str, ...]:
    """A sample's stack from the root down: the binary's frames, then where the sample was when not in
    the innermost frame's own code (the kernel: exec, page faults, system calls, exit; a library)."""
    leaf = (KERNEL,) if in_kernel else () if own or not frames else (LIBRARY,)
    return tuple(reversed(frames)) + leaf or (UNKNOWN,)


@dataclass(frozen=True)
class _Objects:
    """Where one process has the binary and the project's own libraries: their load biases, and what
    their stack words mean (`Frames`)."""

    binary: BinaryInfo
    bias: int | None
    libs: list[tuple[int, int]]  # (index in binary.libraries, load bias)
    calls: Frames
    # run-time address -> its function's name as a frame (`whole`), None outside the binary and its
    # libraries: the process's samples share most of their frames (Lua's ~36 a stack: ~8,000 lookups a
    # run of ~200 sampled stacks)
    named: dict[int, str | None] = field(default_factory=dict)

    def symbol(self, addr: int) -> FunctionSymbol | None:
        """The function of the binary or of one of its libraries at a run-time address."""
        if self.bias is not None and (f := self.binary.symbolize(addr - self.bias)) is not None:
            return f
        return next((f for i, b in self.libs if (f := self.binary.libraries[i].symbolize(addr - b))), None)

    def name(self, addr: int) -> str | None:
        """`symbol`'s function at `addr` as a frame's name."""
        if addr not in self.named:
            self.named[addr] = whole(sym.name) if (sym := self.symbol(addr)) is not None else None
        return self.named[addr]

    def library_frameless(self, addr: int) -> bool:
        """Whether a sample at `addr` in a library is where that library's function has no frame set
        up (its unwind table): the frame-pointer walk then skips its caller."""
        for i, b in self.libs:
            if self.binary.libraries[i].symbolize(addr - b) is not None:
                return self.calls.library_slots[i].slot(addr - b) is not None
        return True  # (a library not the project's: glibc keeps no frame pointers)


def _binary_frames(k, where: _Objects, addrs: list[int]) -> tuple[list[str], bool, int]:
    """(the functions of the binary and of its own libraries on a sample's stack, innermost first;
    whether the innermost is the sampled frame itself rather than the caller of another library; how
    many stack words were read).  A sample in another library, or in a frameless spot of one of the
    project's (`k.ret` set), takes its caller from the return address found above the stack pointer
    (`_read_samples`); the frame-pointer walk above it may name that caller again, when the library
    function kept a frame of its own: it is counted once.  A sample in the binary whose function has
    no frame set up at the sampled instruction gets the caller the walk skipped (`_walked`).  The
    walk's words above its first are return addresses, looked up one byte back: a call may be the
    last instruction of a function."""
    bias = where.bias
    if bias is None:
        return [], True, 0
    addrs = _walked(k, bias, addrs, where.calls)
    frames: list[str] = []
    own = bool(addrs) and (leaf := where.symbol(addrs[0])) is not None
    if own:
        frames.append(whole(leaf.name))
    # a `.cold` part runs in its function's frame: its samples are that function's
    walked = [name for addr in addrs[1:] if (name := where.name(addr - 1)) is not None]
    if (k.ret and (not own or where.library_frameless(addrs[0])) and where.calls.after_call(k.ret - bias)
            and (fn := where.binary.symbolize(k.ret - 1 - bias)) is not None
            and whole(fn.name) not in walked[1:]):
        # (`ret` is the first word into the binary: a caller the walk skipped, or, under a caller in a
        # library, one it names further up (the kernel's walk puts the return addresses that return
        # probes replaced back, in order, which can make up for the frame a frameless leaf skips)
        frames.append(whole(fn.name))
        walked = walked[1:] if walked[:1] == frames[-1:] else walked
    return frames + walked, own, len(addrs)


def _library_biases(b, binary: BinaryInfo) -> dict[int, list[tuple[int, int]]]:
    """Per process: (library index, load bias) of each of the project's own libraries it loaded, from
    the address of the library's DT_INIT that `on_lib_load` saw."""
    out: dict[int, list[tuple[int, int]]] = {}
    for k, v in b["libinits"].items():
        if k.lib < len(binary.libraries) and (init := binary.libraries[k.lib].init):
            out.setdefault(k.tgid, []).append((k.lib, v.value - init[0]))
    return out


def _walked(k, bias: int, addrs: list[int], calls: Frames) -> list[int]:
    """The sample's frame-pointer walk (`addrs`) with the frames it cannot see put back
    (`unwind.Frames.walk`: the caller of a function whose frame is not set up at the sampled
    instruction, tail callers)."""
    words = tuple(w - bias if w else 0 for w in k.top)
    return [a + bias for a in calls.walk([a - bias for a in addrs], words)]


def _probe_handling(b, addrs: tuple[int, ...], known: Known) -> bool:
    """`probe_handling` of a kernel stack (its addresses), remembered for the session."""
    if addrs not in known.in_probe:
        known.in_probe[addrs] = probe_handling(b.ksym(a).decode(errors="replace") for a in addrs)
    return known.in_probe[addrs]


def _up_to(root: str, frames: list[str]) -> list[str]:
    """A sample's frames (innermost first) up to the root's outermost: nothing calls the root, so what
    a walk names above it is not the program's (a pending return probe's fixed-up address once named
    the plugin's `work` above `main`)."""
    return frames[:len(frames) - frames[::-1].index(root)] if root in frames else frames


def read(b, binary: BinaryInfo, plan: ProbePlan, known: Known) -> Samples:
    """Attribute each stack sample to the innermost frame inside the binary (time in libc
    counts for its caller, as exclusive time does in traced mode).  A sample in a library
    prefers the return address found on the stack (`ret`): the frame-pointer walk through
    library code misses the immediate caller.  But the first text address above the stack
    pointer is a return address only if a call precedes it: a code pointer or a word left
    behind by an earlier call is not one, and where such words lie shifts with any change
    of the callers' frames (on Lua, 26 samples a build went to `panic`, a function never
    called, and none in a build that differed only in `internshrstr`).  A sample taken while
    the kernel handled one of our probes is probe time: it goes to no function.  So is a user
    sample at a probed entry (the trap about to be taken) or at the instruction after it,
    where the thread goes on once the kernel has handled the entry (`points`).  Samples in a
    library are counted apart as well (`library`): their function comes from the stack, and a
    stale return address can still pass for the caller's - which one does shifts with the
    callers' frames (on Lua, a commit that changed only `internshrstr`'s frame moved two thirds
    of malloc's samples away from `luaM_malloc_`, in all 60 rounds of a paired check)."""
    index = {f.name: i for i, f in enumerate(plan.functions)}
    own_names = {whole(f.name) for f in binary.functions} | index.keys()  # (and a library's the plan probes)
    root, bases = plan.functions[plan.root].name, {k.value: v.value for k, v in b["bases"].items()}
    got, libs = Samples({}, 0, 0, 0), _library_biases(b, binary)
    stacks, kstacks = b["ustacks"], b["kstacks"]
    in_probe: dict[int, bool] = {}  # kernel stack id -> taken inside probe handling
    objects: dict[int, _Objects] = {}  # per process
    for k, v in b["samples"].items():
        got.nbytes += 40  # the key: struct skey
        if k.kstackid >= 0 and k.kstackid not in in_probe:
            in_probe[k.kstackid] = _probe_handling(b, tuple(kstacks.walk(k.kstackid)), known)
        bias = bases.get(k.tgid, 0 if not binary.pie else None)
        addrs = list(stacks.walk(k.stackid))
        if k.xol or in_probe.get(k.kstackid, False) or _at_probe(k, bias, addrs, known.points):
            got.probe += v.value
            continue
        where = objects.get(k.tgid) or objects.setdefault(k.tgid, _Objects(binary, bias, libs.get(k.tgid, []),
                                                                           known.calls))
        frames, first, walked = _binary_frames(k, where, addrs)
        frames = _up_to(root, frames)
        got.nbytes += 8 * walked
        path = _path(frames, first, k.kstackid >= 0)
        got.stacks[path] = got.stacks.get(path, 0) + v.value
        got.rooted += v.value if root in frames else 0
        if frames and first and frames[0] not in own_names:  # (a function of the project's own libraries)
            got.library_functions[frames[0]] = got.library_functions.get(frames[0], 0) + v.value
        elif not frames or frames[0] not in index:
            got.unknown += v.value
        else:
            i = index[frames[0]]
            got.by_function[i] = got.by_function.get(i, 0) + v.value
            if not first:
                got.library[i] = got.library.get(i, 0) + v.value
    return got
