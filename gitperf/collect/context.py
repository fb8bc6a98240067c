"""What one collection shares (ARCHITECTURE.md §2): the request as the user made it, and the
context built from it once the binary is known — configuration, ELF, DWARF locations, the
calibration, environment and header fields.  Every later step takes the context."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import pygit2

from gitperf import __version__
from gitperf.analysis import callgraph, elf
from gitperf.core import typed
from gitperf.core.config import CollectConfig, Config, Workload, valid_workload_name
from gitperf.core.config import load as load_config
from gitperf.core.errors import ConfigError, InputError
from gitperf.core.model import Header, Mode
from gitperf.core.names import readable
from gitperf.core.owner import Owner
from gitperf.core.progress import Progress
from gitperf.engine import workload
from gitperf.engine.base import Engine, RunWorkload
from gitperf.git.worktree import checkout, run_build
from gitperf.plan.optimize import PipelineChoice, Subject
from gitperf.store.history import History

if TYPE_CHECKING:  # (collect.resolve reads the request and target defined here)
    from gitperf.collect.resolve import Resolved


@dataclass(frozen=True)
class CollectRequest:
    rev: str = "HEAD"
    workloads: tuple[str, ...] = ()  # names; () = all configured
    funcs: tuple[str, ...] = ()
    mode: str | None = None
    repeat: int | None = None
    timeout: float | None = None
    binary: str | None = None  # ad hoc: the ELF to probe
    no_build: bool = False
    command: tuple[str, ...] = ()  # ad hoc: the workload's command line
    adhoc_name: str = "adhoc"
    pipeline: str | None = None  # overrides collect.pipeline
    optimization_on: tuple[str, ...] = ()
    optimization_off: tuple[str, ...] = ()
    optimization_args: tuple[str, ...] = ()  # NAME=VALUE
    base: str | None = None  # diff tracing and baseline statistics against this commit
    max_overhead: float | None = None  # fraction of native run time (0.05 = 5%); None = collect.max_overhead
    config: str | None = None  # --config FILE: for commits without a .gitperf.toml of their own
    per_probe: bool = False  # one uprobe per function instead of uprobe_multi links
    probe_pad: bool | None = None  # build with NOP-padded entries (None: the configuration's build.probe_pad)
    align_functions: int | None = None  # padded builds align functions (None: build.align_functions)
    fresh: bool = False  # build in a new worktree even when REV is the clean checked-out HEAD
    rebuild: bool = False  # a fresh build made again even where a kept one would be reused (git.buildcache)
    replan: bool = False  # a budgeted plan chosen anew, not kept from the workload's history
    # budgeted plans to keep, given: (workload, stack Hz, traced functions) each (`noise`: its first
    # session's, for the others)
    keep_plans: tuple = ()

    def to_json(self) -> str:
        """The request as JSON (`collect --range` hands it to each commit's worker process)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> CollectRequest:
        return typed.decode(text, _REQUEST)

    @property
    def adhoc(self) -> bool:
        return self.binary is not None

    def adhoc_config(self) -> Config:
        if not self.command:
            raise InputError("ad hoc collection needs the workload's command after `--`, e.g. "
                             "git perf collect --binary ./app --no-build -- ./app input.txt")
        if not valid_workload_name(self.adhoc_name):
            raise InputError(f"--workload {self.adhoc_name!r}: a workload's name must be non-empty, without '|' "
                             "or control characters")
        wl = Workload(name=self.adhoc_name, command=shlex.join(self.command), timeout=self.timeout or 300.0)
        return Config(path="(command line)", workloads=(wl,))


_REQUEST = msgspec.json.Decoder(CollectRequest)


@dataclass(frozen=True)
class Target:
    """What was asked, of which commit, with which engine, and where results and caches go."""

    repo: pygit2.Repository
    req: CollectRequest
    commit: str
    engine: Engine
    progress: Progress
    cache_dir: Path  # .git/perf/: build locks, analysis caches


def machine_fingerprint() -> str:
    """Hardware identity: profiles from different hardware are not comparable."""
    cpu = _cpu()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 30)
    return hashlib.sha1(f"{platform.machine()}|{cpu}|{os.cpu_count()}|{mem}".encode()).hexdigest()[:12]


def _cpu() -> str:
    """The CPU's model name ("unknown" without one: part of `machine_fingerprint`, keep it so)."""
    try:
        return next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                     if ln.startswith("model name")), "unknown")
    except OSError:
        return "unknown"


def environment(binary: elf.BinaryInfo) -> str:
    """What a run's times depend on besides the code, in one line for people (`Header.environment`):
    the CPU and how many, the kernel, the C library, the frequency governor (none: a VM without
    cpufreq), the compilers that built the binary."""
    try:
        governor = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        governor = "none"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown libc"
    except (ValueError, OSError):
        libc = "unknown libc"
    built = "; ".join(binary.compilers) or "compiler unknown"
    return f"{_cpu()} x{os.cpu_count()}, kernel {platform.release()}, {libc}, governor {governor}; built by {built}"


def _check_watch(config: Config, binary: elf.BinaryInfo) -> None:
    """[collect] watch names functions of the binary (by symbol or readable name): one it does not
    have would be watched in vain, so it is refused, with the names it is nearest to."""
    import difflib
    if not config.collect.watch:
        return  # (demangling every name of a large C++ binary costs ~0.1 s)
    names = {n for f in binary.functions for n in (f.name, readable(f.name))}
    unknown = [w for w in config.collect.watch if w not in names]
    if unknown:
        near = sorted({m for w in unknown for m in difflib.get_close_matches(w, names, 3)})
        raise ConfigError(config.path, "collect.watch", f"no function {', '.join(unknown)} in {binary.path}"
                          + (f" (near: {', '.join(near)})" if near else ""))


@dataclass(frozen=True)
class CollectContext:
    target: Target
    config: Config
    collect: CollectConfig  # [collect] with the request's mode applied (trace under a budget)
    root: Path  # the work tree the workloads run in
    subject: Subject  # the binary and what planning may read about it
    cost_ns: dict[str, float]  # the calibration: ns per traced call by entry class, per stack sample
    env: dict[str, str]
    header_base: dict  # the Header fields every profile of this collection shares
    ore: float  # resource extraction: reading the ELF and its DWARF
    max_overhead: float  # fraction of native run time; 0 = no budget
    history: History  # the commit's ancestors' profiles, each note read once for the whole collection
    pad: str = ""  # the NOP padding the build used (git.pad.describe; "" = none): part of the plan

    @classmethod
    def build(cls, target: Target, side: Resolved, root: Path, binary_path: Path) -> CollectContext:
        """The context of `side` (`collect.resolve`) once its binary is at `binary_path` in `root`."""
        req, config = target.req, side.config
        t0 = time.perf_counter()
        binary, left = elf.with_libraries(elf.load(binary_path), str(root))
        for why in left:
            target.progress(f"the project's library {why}: its samples count as [library]")
        locations = elf.source_locations(binary.path, str(root))
        for lib in binary.libraries:
            locations.update((n, loc) for n, loc in elf.source_locations(lib.path, str(root)).items()
                             if n not in locations)
        _check_watch(config, binary)
        ore = time.perf_counter() - t0
        ccfg = config.collect if req.mode is None else replace(config.collect, mode=req.mode)
        # --mode on the command line is a fixed plan, like a mode in the file (config.parse)
        max_overhead = (req.max_overhead if req.max_overhead is not None
                        else 0.0 if req.mode is not None else ccfg.max_overhead / 100)
        if max_overhead:  # the hybrid plan is cut from the full trace plan
            ccfg = replace(ccfg, mode=Mode.TRACE)
        rel = os.path.relpath(binary.path, root) if binary.path.startswith(str(root)) else binary.path
        header_base = dict(tool_version=__version__, commit=target.commit, binary=rel, build_id=binary.build_id,
                           engine=target.engine.name, machine=machine_fingerprint(), kernel=platform.release(),
                           config=side.source, environment=environment(binary))
        subject = Subject(target.commit, binary, config, locations, target.cache_dir,
                          BaseGraphs(target.repo, config, binary.path, target.cache_dir), from_commit=not req.adhoc)
        costs = target.engine.calibration(header_base["machine"], target.progress)
        return cls(target, config, ccfg, root, subject, costs,
                   dict(os.environ, GITPERF_COMMIT=target.commit), header_base, ore, max_overhead,
                   History(target.repo, target.commit))

    @property
    def binary(self) -> elf.BinaryInfo:
        return self.subject.binary

    @property
    def progress(self) -> Progress:
        return self.target.progress

    @property
    def choice(self) -> PipelineChoice:
        req = self.target.req
        return PipelineChoice(req.pipeline or self.collect.pipeline, req.optimization_on, req.optimization_off,
                              req.optimization_args, req.base)

    def workloads(self) -> list[Workload]:
        """The requested workloads (all by default), with --timeout applied."""
        req = self.target.req
        wls = [self.config.workload(n) for n in req.workloads] if req.workloads else list(self.config.workloads)
        if not wls:
            raise ConfigError(self.config.path, "workload", "no workloads defined: add a [[workload]] table")
        return [replace(wl, timeout=req.timeout) if req.timeout else wl for wl in wls]

    def runner(self, wl: Workload, timeout: float | None = None) -> RunWorkload:
        """Runs `wl` once in the work tree, in the engine's scope, killed after `timeout` (default its own)."""
        cmd = self.command(wl)
        return lambda where: workload.run(cmd, timeout or wl.timeout, where)

    def command(self, wl: Workload) -> workload.Command:
        """`wl`'s command in the work tree, as the repository's owner when we run as root for them
        (`core.owner`)."""
        return workload.Command(wl.argv, str(self.root), self.env, Owner.of(self.target.cache_dir.parent),
                                tuple(wl.exit_codes))

    def config_key(self, wl: Workload) -> str:
        return Header(**self.header_base, workload=wl.name, command=(), started=0, finished=0).config_key


@dataclass(frozen=True)
class BaseGraphs:
    """Base commits' call graphs for diff tracing (`plan.optimize.Subject.base_graph`): from the cache
    when that commit was analysed before (by an earlier pipeline collection), else by building it in
    a temporary worktree.  Planning asks; collecting checks out and builds."""

    repo: pygit2.Repository
    cfg: Config
    binary: str  # the binary's path in this collection's tree
    cache_dir: Path

    def __call__(self, base: str, progress: Progress) -> callgraph.CallGraph:
        alias = f"{base}-{self.binary.rsplit('/', 1)[-1]}"
        if callgraph.cached_build_id(self.cache_dir, alias):
            return callgraph.load("", "", self.cache_dir, progress, alias)
        progress(f"diff tracing: building the base {base[:12]} to analyse it")
        with checkout(self.repo, base) as root:
            bcfg = load_config(root) or self.cfg
            if bcfg.build.command:
                run_build(bcfg.build, root, base, self.cache_dir)
            info = elf.load(root / (bcfg.build.binary or self.binary))
            return callgraph.load(info.path, info.build_id, self.cache_dir, progress, alias)
