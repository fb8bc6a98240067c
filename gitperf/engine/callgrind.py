"""The instruction-count witness (ARCHITECTURE.md §10b): one run of a workload under callgrind
(Debian's valgrind), read back as exact calls and exclusive/inclusive instruction counts of every
function of the binary.  Instructions do not move with the machine's luck or with probes; a function's
inclusive count charges it with what it executes in libraries through the call graph.

A function's inclusive count is its own instructions at every depth plus what it calls, itself
excepted (direct recursion is counted once; mutual recursion, as in callgrind's own inclusive
figures, more than once).

`run` executes the workload's shell command under `valgrind --tool=callgrind --trace-children=yes`
(the command may start the binary several times; every process of it is counted); `parse` reads
callgrind's output format (https://valgrind.org/docs/manual/cl-format.html): `ob=`/`fn=` name the
current object and function, cost lines (`position cost`) add to its own count, and `calls=` says that
the next cost line is the inclusive cost of calls to `cob=`/`cfn=`.  Names may be compressed: `(id)
name` defines an id, `(id)` refers to it.
"""

from __future__ import annotations

import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from gitperf.core import scratch
from gitperf.core.model import InstructionCounts
from gitperf.engine import workload

# Cost of one run under callgrind, predicted from the native run time: valgrind's start-up and
# callgrind's slowdown (bench/witness.py on this VM: 0.50 s for the demo's 3.5 ms, 0.67 s for a 6 ms
# Lua script, 0.91 s for zlib's 40 ms: ~0.45 s of start-up and 10-25x; 50x leaves room for programs
# that callgrind slows more).  A check counts only when one run is predicted within BUDGET_S, and
# stops a run at twice that.
STARTUP_S = 0.5
SLOWDOWN = 50.0
BUDGET_S = 30.0


def predicted_s(native_s: float) -> float:
    return STARTUP_S + SLOWDOWN * native_s


# what callgrind cannot run says so on its standard error, with the bytes and where they are:
#   vex amd64->IR: unhandled instruction bytes: 0x66 0x41 0xF 0x3A 0x61 0x7 0x4 0x83 0xF9 0x10
#   ==24222== valgrind: Unrecognised instruction at address 0x1096fd.
#   ==24222==    at 0x1096FD: parse_request (smmintrin.h:649)
_UNSUPPORTED = re.compile(r"unhandled instruction bytes|Unrecognised instruction")
_BYTES = re.compile(r"unhandled instruction bytes: ((?:0x[0-9A-Fa-f]+ ?){1,6})")
_WHERE = re.compile(r"Unrecognised instruction at address \S+\n==\d+==\s+at \S+ (.+)")
_NAMED = re.compile(r"\((\d+)\)(?: (.*))?$")


def unknown_instruction(log: str) -> str:
    """Why no counts, where valgrind stopped at an instruction it does not know: the function and the
    bytes as its log names them (a guess at the cause once misled: picohttpparser's SSE4.2 `pcmpestri`,
    built with -msse4.2, was called "AVX-512 from -march=native?")."""
    where, code = _WHERE.search(log), _BYTES.search(log)
    at = "".join([f" in {where[1].strip()}" if where else "", f", bytes {code[1].strip()}" if code else ""])
    return (f"valgrind does not know an instruction of this build{at} (an instruction set extension it "
            "does not emulate, such as AVX-512 or some SSE4.2 string compares): no instruction counts")


def available() -> bool:
    return shutil.which("valgrind") is not None


class _Names:
    """One compressed-name table (objects, functions): `(id) name` defines, `(id)` refers."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}

    def read(self, text: str) -> str:
        m = _NAMED.match(text)
        if not m:
            return text
        if m.group(2) is not None:
            self.by_id[m.group(1)] = m.group(2)
        return self.by_id.get(m.group(1), "")


def parse(text: str, binary: str | frozenset[str], counts: dict[str, list[int]] | None = None,
          ) -> tuple[dict[str, list[int]], int]:
    """Per function of `binary` (its object path as callgrind names it; or a set of them: the binary
    and the project's own libraries): [calls, exclusive, inclusive] instructions, added to `counts`;
    and the run's total instructions."""
    objects = frozenset([binary]) if isinstance(binary, str) else binary
    out = counts if counts is not None else {}
    obs, fns = _Names(), _Names()
    ob = cob = cob_was = fn = cfn = ""
    pending_call = False
    total = 0
    for line in text.splitlines():
        if not line:
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            cost = line.split()
            ir = int(cost[1]) if len(cost) > 1 else 0
            mine = out.setdefault(fn, [0, 0, 0]) if ob in objects else None
            if pending_call:
                # calls from this function, libraries included, are in its inclusive count; a call of
                # itself is not: its own instructions at every depth are in its exclusive count already
                if mine is not None and not (cfn == fn and cob_was == ob):
                    mine[2] += ir
                pending_call = False
            elif mine is not None:
                mine[1] += ir
                mine[2] += ir
            continue
        key, _, value = line.partition("=")
        if key == "ob":
            ob = obs.read(value)
        elif key == "fn":
            fn, cob = fns.read(value), ob
        elif key == "cob":
            cob = obs.read(value)
        elif key == "cfn":
            cfn = fns.read(value)
        elif key == "calls":
            pending_call, cob_was = True, cob
            if cob in objects:
                out.setdefault(cfn, [0, 0, 0])[0] += int(value.split()[0])
            cob = ob  # a cob= line holds for the one call that follows it
        elif line.startswith(("totals:", "summary:")) and not total:
            total = int(line.split(":", 1)[1].split()[0])
    return out, total


def run_all(jobs: list[tuple[workload.Command, float, str | tuple[str, ...]]]) -> list[InstructionCounts]:
    """Several `run`s at once, one thread each (instruction counts do not depend on timing), in the
    order given.  An interrupt kills every run still going (`workload.kill_running`) and propagates."""
    with ThreadPoolExecutor(max_workers=max(len(jobs), 1)) as pool:
        futures = [pool.submit(run, *job) for job in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            workload.kill_running()
            raise


def run(command: workload.Command, timeout: float, binary: str | tuple[str, ...]) -> InstructionCounts:
    """The workload once under callgrind; an InstructionCounts with `error` set when valgrind cannot
    run it (an instruction it does not know, a crash, the timeout): the check then goes on on time.
    The functions counted are the binary's, and those of the project's own libraries when `binary` is
    a tuple (the binary first, then the libraries)."""
    paths = (binary,) if isinstance(binary, str) else binary
    objects, binary = frozenset(str(Path(p).resolve()) for p in paths), paths[0]
    with scratch.directory("callgrind") as d, workload.scope() as where:
        # one log a process (%p): with --trace-children the shell's and the workload's lines would
        # share one file and overwrite each other (picohttpparser's note lost the instruction's bytes)
        err = d / "valgrind.%p.log"
        if command.user is not None:  # the workload runs as the repository's owner: its output goes here
            os.chown(d, command.user.uid, command.user.gid)
        # --separate-recs=1: a recursive function is one function at every depth (not `fib'2`)
        # --vgdb=no: no gdbserver FIFOs in /tmp, which a killed valgrind leaves behind (3 a run)
        cmd = ["valgrind", "--tool=callgrind", "--vgdb=no", f"--callgrind-out-file={d}/cg.%p", "--demangle=no",
               "--separate-recs=1", "--trace-children=yes", f"--log-file={err}", *command.argv]
        r = workload.run(replace(command, argv=cmd), timeout, where)
        log = "".join(f.read_text(errors="replace") for f in sorted(d.glob("valgrind.*.log")))
        if r.timed_out:
            return InstructionCounts(error=f"callgrind did not finish within {timeout:.0f} s")
        if _UNSUPPORTED.search(log):
            return InstructionCounts(error=unknown_instruction(log))
        if r.partial:  # (an exit status the workload declares, `exit_codes`, is a finished run)
            return InstructionCounts(error=f"the workload under callgrind exited with status {r.exit_status}")
        counts: dict[str, list[int]] = {}
        total = 0
        for f in sorted(d.glob("cg.*")):
            _, t = parse(f.read_text(errors="replace"), objects, counts)
            total += t
    counts.pop("", None)
    if not counts:
        return InstructionCounts(total=total, error=f"callgrind saw no function of {binary} run")
    return InstructionCounts(total=total, functions={n: (c[0], c[1], c[2]) for n, c in counts.items()})
