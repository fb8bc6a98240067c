"""`git perf`: a thin click layer over the library.  Library errors carry their exit code."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

import click

from gitperf import __version__
from gitperf.core import config
from gitperf.core.errors import (
    EXIT_CANNOT_COLLECT,
    EXIT_DEGRADATION,
    EXIT_INTERRUPTED,
    EXIT_MEANINGS,
    EXIT_NOT_ENOUGH_DATA,
    EXIT_USAGE,
    GitPerfError,
    InputError,
    epilog,
)
from gitperf.core.fmt import printable

COLLECTS = (EXIT_USAGE, EXIT_CANNOT_COLLECT, EXIT_INTERRUPTED)  # what every collecting command can return

# Options that several commands share, declared once (sqlite-utils' way) and stacked.
json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable output (JSON).")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress messages.")
verbose_option = click.option("-v", "--verbose", is_flag=True, help="Every progress message on a line of its own "
                              "(on a terminal the default is one line, updated in place).")
# Counts a user may ask for: enough for any measurement, never a MemoryError before the first run
# (`--repeat 100000000` allocated 3.5 GB) or a check that never ends (fixed rounds skip the time limit).
MAX_COUNT = 1000
MAX_JOBS = 64

repeat_option = click.option("--repeat", type=click.IntRange(min=1, max=MAX_COUNT), help="Runs per workload (default: the "
                             "workload's repeat).")


def workloads_option(what: str = "Only this workload (repeatable; default all)."):
    return click.option("--workload", "workloads", multiple=True, help=what)


def base_option(what: str = "Compare with this commit instead of the nearest profiled ancestor."):
    return click.option("--base", help=what)


def config_option(what: str):
    return click.option("--config", "config_file", type=click.Path(dir_okay=False, resolve_path=True), help=what)


_STATUS = []  # the terminal's status line while one is shown (`_progress`)


def _echo(text, **kw) -> None:
    """Everything git perf prints: names from pulled notes cannot send control sequences to a terminal.
    A progress status line is erased first, so that nothing is printed beside it."""
    _end_status()
    click.echo(printable(str(text)), **kw)


def _end_status() -> None:
    while _STATUS:
        _STATUS.pop().close()


def _echo_json(obj) -> None:
    _echo(json.dumps(obj, indent=2))


def _terminated(_signum, _frame):
    """SIGTERM (CI cancelling a job, `timeout`, `kill`) is handled like Ctrl-C: probes detached,
    the workload killed, nothing half-written stored."""
    raise KeyboardInterrupt


def _follow_git() -> None:
    """Run as `git perf`, git is our parent and waits for us.  When git is killed (SIGKILL of the
    shell's job), end like on SIGTERM instead of collecting on unseen and storing a profile."""
    ppid = os.getppid()
    try:
        parent = Path(f"/proc/{ppid}/comm").read_text().strip()
    except OSError:
        return
    if parent == "git":
        from gitperf.core.proc import die_with_parent
        die_with_parent(signal.SIGTERM)
        if os.getppid() != ppid:  # git died before the request took effect
            raise SystemExit(143)


class PerfGroup(click.Group):
    """Turns library errors into one clear line and the documented exit code."""

    def invoke(self, ctx):
        signal.signal(signal.SIGTERM, _terminated)
        # started with SIGINT ignored (a script's background job, some CI runners): a SIGINT sent to
        # us still means stop, not "collect on unseen and store" (issue #37)
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _follow_git()
        try:
            return super().invoke(ctx)
        except GitPerfError as e:
            _echo(f"git perf: error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:  # outside a collection (which says what it left): notes are written whole or not
            _echo("git perf: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as e:
            if _disk_full(e):  # the notes are written whole or not at all (store.notes)
                _echo(f"git perf: error: no space left on the device ({e}): nothing more was stored, what was "
                      "stored is intact; free space and run it again", err=True)
                ctx.exit(EXIT_USAGE)
            if not isinstance(e, OSError) or not e.filename:  # not about a file the user can fix: a bug
                raise
            _echo(f"git perf: error: {e.filename}: {e.strerror or e} (check the path and its permissions)",
                       err=True)
            ctx.exit(EXIT_USAGE)


def _disk_full(e: Exception) -> bool:
    """A full disk or quota, as the OS says it or libgit2 does (an OSError or pygit2.GitError without
    an errno: "could not write to '.../logs/refs/notes/...': No space left on device")."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    git_error = getattr(sys.modules.get("pygit2"), "GitError", OSError)
    return isinstance(e, (OSError, git_error)) and ("no space left" in str(e).lower() or "quota" in str(e).lower())


class Seconds(click.ParamType):
    """A finite, positive number of seconds (click's FloatRange lets nan and inf through)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            v = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or not 0 < v <= config.DAY_S:
            self.fail(f"{value!r}: expected a finite number of seconds > 0 and at most {config.DAY_S:g} (a day)",
                      param, ctx)
        return v


def _progress(quiet: bool, verbose: bool = False):
    """How a long command says what it is doing: one line updated in place on a terminal
    (`core.progress.StatusLine`), every message on a line of its own with -v or elsewhere."""
    from gitperf.core.progress import StatusLine, bounded
    if not quiet and not verbose and sys.stderr.isatty():
        line = StatusLine(sys.stderr, printable)
        _STATUS.append(line)
        click.get_current_context().call_on_close(_end_status)
        return line

    def say(msg: str) -> None:
        if not quiet:
            _echo("\n".join(bounded(f"git perf: {line}") for line in msg.splitlines() or [""]), err=True)
    return say


def _repo():
    from gitperf.git.repo import open_repo
    return open_repo(".")


def _engine(per_probe: bool = False):
    """The eBPF engine, after making sure this machine can collect (exit 4 before any other work)."""
    from gitperf.engine.bcc_engine import BccEngine
    engine = BccEngine(force_per_probe=per_probe)
    engine.check()
    return engine


@click.group(cls=PerfGroup, epilog=epilog(*EXIT_MEANINGS), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git perf")
def main():
    """Continuous performance analysis of native programs: eBPF profiles stored as git notes."""


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.option("--binary", default=None, help="Path of the binary the build produces (default: read from "
              "CMakeLists.txt, meson.build or the Makefile).")
@click.option("--build", "build", default=None, help="Build command (default: one for the build system found, "
              "configuring in build/ when it is missing).")
@click.option("--command", "command", default=None, help="Workload command line (default: the binary, no arguments).")
@click.option("--force", is_flag=True, help="Overwrite an existing .gitperf.toml.")
@click.option("--hooks", "with_hooks", is_flag=True, help="Also install the pre-push hook.")
def init(binary, build, command, force, with_hooks):
    """Write a commented .gitperf.toml at the repository root, for the build system it finds there
    (CMake, Meson, autotools, make)."""
    from gitperf.core.adopt import placed, program_of, recognise

    repo = _repo()
    path = Path(repo.workdir) / config.FILENAME
    if path.exists() and not force:
        raise GitPerfError(f"{path} exists; use --force to overwrite it")
    found = recognise(Path(repo.workdir))
    runs = command and not binary and program_of(command)
    asked = command
    if runs and not build:  # (a build command of the user's puts its programs where it says)
        runs, command = placed(found, runs, command)
    binary, build = binary or runs or found.binary, build or found.command
    todo = "" if command else f"set [[workload]] command to the run you want measured (now `./{binary}`), "
    command = command or f"./{binary}"
    text = config.template(binary, command, build)
    config.parse(text, str(path))  # the template must always be valid
    path.write_text(text)
    where = (f" (from {found.found})" if found.found else ": a placeholder, edit it") if binary == found.binary else \
        " (the program --command runs)" if binary == runs else ""
    moved = (f"workload command = {command} ({found.system} builds the program in {os.path.dirname(binary)}/, not "
             "at the root)\n" if asked and command != asked else "")
    _echo(f"wrote {path}\n"
          + (f"recognised {found.system}: " if found.system else
             "no CMakeLists.txt, meson.build, configure or Makefile at the root: edit ")
          + f"build.command = {build}\nbuild.binary = {binary}{where}\n{moved}"
          f"next: {todo}commit the file, then `git perf check HEAD --collect`\n"
          f"collect stays within collect.max_overhead = {config.DEFAULT_MAX_OVERHEAD:g}% of the native run time "
          "(a pilot run measures it; collect prints the predicted overhead); --mode trace counts every call "
          "exactly, at the price of probe time")
    if with_hooks:
        from gitperf import hooks as hooks_mod
        _echo(hooks_mod.install(repo))


@main.command(epilog=epilog(0, *COLLECTS))
@click.argument("rev", required=False, default="HEAD")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@workloads_option("Workload name (repeatable; default all). Ad hoc: the name to store the profile under (default adhoc).")
@click.option("--func", "funcs", multiple=True, help="Probe only this function (repeatable); main is always probed.")
@click.option("--mode", type=click.Choice(config.MODES), help="A fixed probing mode instead of the overhead budget "
              "(overrides collect.mode and collect.max_overhead): trace counts every call exactly, at the "
              "price of probe time.")
@click.option("--pipeline", type=click.Choice(config.PIPELINES), help="Optimization pipeline: none | basic "
              "(match, diff tracing, static baseline) | advanced (+ trim, prune, dynamic baseline) | full "
              "(+ strict trim, dynamic sampling).")
@click.option("--optimization-on", "optimization_on", multiple=True, metavar="NAME", help="Add a method (repeatable): "
              "match, diff-tracing, static-baseline, trim, prune, dynamic-baseline, dynamic-sampling.")
@click.option("--optimization-off", "optimization_off", multiple=True, metavar="NAME",
              help="Remove a method (repeatable).")
@click.option("--optimization-arg", "optimization_args", multiple=True, metavar="NAME=VALUE",
              help="Override a predicted parameter, e.g. keep_top=2, criterion=semi-strict, standalone=true.")
@base_option("Diff tracing and baseline statistics against this commit (default: the parent).")
@click.option("--max-overhead", "max_overhead", metavar="PCT", help="Overhead budget, e.g. 5%: trace the functions "
              "whose information is worth their calibrated cost (changed ones first), stack-sample the rest. "
              "Costs a pilot run per workload, and a counting run when a changed function has no call "
              "count yet (overrides collect.max_overhead, default 5%; replaces --mode).")
@click.option("--replan", is_flag=True, help="With the overhead budget: choose the plan anew from this commit's pilot "
              "instead of keeping the one of the nearest earlier collection (profiles of two plans never compare).")
@click.option("--range", "rev_range", metavar="A..B", help="Every first-parent commit in A..B that lacks collected "
              "profiles (a paired check's rounds do not count; resumable: an interrupted range continues "
              "where it stopped).")
@click.option("-j", "--jobs", type=click.IntRange(min=1, max=MAX_JOBS), default=1, show_default=True,
              help="With --range: collections at once (each in its own worktree; timings get noisier).")
@repeat_option
@click.option("--timeout", type=Seconds(), help="Seconds before a run is killed.")
@click.option("--binary", type=click.Path(dir_okay=False), help="Ad hoc: the ELF binary to probe.")
@click.option("--no-build", is_flag=True, help="Do not run the build command.")
@config_option("The configuration to use (default: the commit's .gitperf.toml, else the working tree's: history "
               "from before adopting git perf).")
@click.option("--per-probe", is_flag=True, help="Attach one uprobe per function instead of uprobe_multi links.")
@json_option
@quiet_option
@verbose_option
def collect(rev, command, rev_range, jobs, as_json, quiet, verbose, **opts):
    """Profile REV (default HEAD) under eBPF and store one profile per workload run as a git note.

    \b
    With .gitperf.toml:  git perf collect [REV] [--workload NAME]
    Ad hoc:              git perf collect --binary PATH --no-build [--workload NAME] -- CMD ARGS...
    Needs root (or CAP_BPF and CAP_PERFMON).  Ctrl-C detaches every probe and stores nothing.
    """
    from gitperf.collect.collection import collect as do_collect
    req = _collect_request(rev, command, opts)
    if rev_range:
        if req.adhoc or req.command:
            raise GitPerfError("--range collects configured workloads; it cannot be combined with ad hoc --binary/CMD")
        return _collect_range(rev_range, req, jobs, as_json, _progress(quiet or as_json, verbose))
    result = do_collect(_repo(), req, _engine(req.per_probe), _progress(quiet or as_json, verbose))
    if as_json:
        return _echo_json(result.to_dict())
    from gitperf.views.render import collect_summary
    _echo(collect_summary(result.commit, result.profiles))


def _collect_request(rev: str, command: tuple[str, ...], opts: dict):
    """The `CollectRequest` the options describe; bad values exit 2 before any work."""
    from gitperf.collect.context import CollectRequest
    from gitperf.plan.pipelines import resolve

    # Ad hoc, click cannot tell REV from the command's first word after `--`: a word that names a
    # commit and is followed by more words is REV, anything else starts the command -- unless it
    # came before a `--`, where only REV can be (a mistyped REV must not become the command).
    adhoc = opts["binary"] is not None
    if adhoc and rev != "HEAD" and not (command and _looks_like_rev(rev)):
        if _before_dashdash(rev):
            from gitperf.git.repo import resolve_commit
            resolve_commit(_repo(), rev)  # raises "unknown revision"
        command, rev = (rev, *command), "HEAD"
    budget = None
    if opts["max_overhead"] is not None:
        from gitperf.plan.hybrid import parse_percent
        try:
            budget = parse_percent(opts["max_overhead"])
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--max-overhead") from None
        if opts["mode"]:
            raise click.UsageError("--max-overhead chooses the probing itself; leave out --mode")
    resolve(opts["pipeline"] or "none", opts["optimization_on"], opts["optimization_off"], opts["optimization_args"])
    wls, cfg_file = opts.pop("workloads"), opts.pop("config_file")
    return CollectRequest(**{**opts, "max_overhead": budget}, config=cfg_file, rev=rev, command=tuple(command),
                          workloads=() if adhoc else tuple(wls), adhoc_name=wls[0] if adhoc and wls else "adhoc")


def _collect_range(spec, req, jobs, as_json, say):
    from gitperf.collect.range import collect_range
    from gitperf.git.repo import first_parent_range
    repo = _repo()
    commits = first_parent_range(repo, spec)
    _engine(req.per_probe)
    if not req.workloads:  # the configured ones, named, so that a commit lacking any of them is collected
        cfg = config.load_file(Path(req.config)) if req.config else config.load(repo.workdir) or config.Config("")
        req = replace(req, workloads=tuple(w.name for w in cfg.workloads))
    result = collect_range(repo, commits, req, jobs, say)
    if as_json:
        _echo_json(result.to_dict())
    else:
        _echo(f"collected {len(result.collected)}, skipped {len(result.skipped)} (already profiled), failed "
                   f"{len(result.failed)} of {len(commits)} commits")
    if result.failed:
        sys.exit(EXIT_USAGE)


def _before_dashdash(word: str) -> bool:
    """Whether REV came before a `--` (click hands the first word after `--` to REV when none did)."""
    args = sys.argv[1:]
    after = args[args.index("--") + 1:] if "--" in args else None
    return after is not None and (not after or after[0] != word)


def _looks_like_rev(word: str) -> bool:
    try:
        from gitperf.git.repo import resolve_commit
        resolve_commit(_repo(), word)
        return True
    except GitPerfError:
        return False


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.option("-n", "--max-count", type=click.IntRange(min=1), default=20, help="How many commits.")
@json_option
@click.argument("rev", required=False, default="HEAD")
def log(max_count, as_json, rev):
    """First-parent commits from REV and how many profiles each has."""
    from gitperf.store.query import first_parent_log
    rows = first_parent_log(_repo(), rev, max_count)
    if as_json:
        return _echo_json([r.to_dict() for r in rows])
    for r in rows:
        mark = f"{r.profiles:3d} profile{'s' if r.profiles != 1 else ' '}" if r.profiles else "  -         "
        bad = f"  ({r.unreadable} unreadable)" if r.unreadable else ""
        _echo(f"{r.commit[:12]} {mark}  {r.subject}{bad}")


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.argument("rev", required=False, default="HEAD")
@click.option("--workload", help="Only this workload.")
@click.option("--top", type=int, default=25, help="Functions per profile (by exclusive time); 0 = all.")
@click.option("--models", is_flag=True, help="Fit performance models (duration over call order) with R².")
@click.option("--folded", is_flag=True,
              help="Print the sampled call stacks, summed over the runs, in the folded format that "
                   "flamegraph.pl, inferno and speedscope read (`main;f;g 12`); several workloads under a "
                   "root frame named after each.")
@click.option("--runs", is_flag=True, help="Every run on its own (default: one summary per session: the rounds of "
                                           "one paired check, or the collections under one plan).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "folded", "pprof", "speedscope"]),
              help="text (default), json (= --json), folded (= --folded), pprof (gzipped protobuf: pprof, Perfetto, "
                   "Pyroscope, speedscope open it) or speedscope (its JSON file format). Exports hold the stack samples "
                   "summed over the runs; a traced-only workload its functions' own time, one frame each.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of standard output.")
@json_option
def show(rev, workload, top, models, folded, runs, fmt, output, as_json):
    """The profiles stored for REV."""
    from gitperf.git.repo import resolve_commit
    from gitperf.store.notes import NotesStore
    from gitperf.views.render import folded_text, show_json, show_text
    repo = _repo()
    commit = resolve_commit(repo, rev)
    profiles, bad = NotesStore(repo).read(commit)
    if workload:
        profiles = [p for p in profiles if p.profile.header.workload == workload]
    for b in bad:
        _echo(f"git perf: warning: {b}", err=True)
    if fmt in ("pprof", "speedscope"):
        return _export(commit, profiles, fmt, output)
    folded, as_json = folded or fmt == "folded", as_json or fmt == "json"
    if folded:
        text = folded_text(profiles)
        if not text:
            _echo(f"git perf: no call stacks are stored for {commit[:12]}: collect with stack samples "
                  "(`mode = \"stack\"`, a budgeted plan, or `check --collect`)", err=True)
        return _emit(printable(text).encode() + b"\n", "folded", output) if text else None
    if as_json:
        return _emit(json.dumps(show_json(commit, profiles), indent=2).encode() + b"\n", "json", output)
    _emit(printable(show_text(commit, profiles, top, models, runs or models)).encode() + b"\n", "text", output)


def _export(commit: str, profiles, fmt: str, output: str | None) -> None:
    """`show --format pprof|speedscope`: the file, to OUTPUT or standard output (pprof, being binary,
    not to a terminal)."""
    from gitperf.views import exports
    data = (exports.pprof(commit, profiles) if fmt == "pprof"
            else json.dumps(exports.speedscope(commit, profiles)).encode())
    if fmt == "pprof" and not output and sys.stdout.isatty():
        raise InputError("a pprof file is binary: give -o FILE (or redirect standard output)")
    _emit(data, fmt, output)


def _emit(data: bytes, fmt: str, output: str | None) -> None:
    """What `show` prints, to OUTPUT (and a line saying so) or to standard output, in every format."""
    if output:
        try:
            Path(output).write_bytes(data)
        except OSError as e:
            raise InputError(f"cannot write {output}: {e.strerror}") from None
        _echo(f"wrote {output} ({len(data) / 1024:.0f} KiB, {fmt})", err=True)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.argument("remote", required=False, default="origin")
def push(remote):
    """Push the profiles (refs/notes/perf) to REMOTE without force; merges first if needed."""
    from gitperf.store.notes import NotesStore
    NotesStore(_repo()).push(remote)
    _echo(f"pushed refs/notes/perf to {remote}")


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.argument("remote", required=False, default="origin")
def pull(remote):
    """Fetch REMOTE's profiles and merge them into ours by union (nothing is lost)."""
    from gitperf.store.notes import NotesStore
    NotesStore(_repo()).pull(remote)
    _echo(f"merged refs/notes/perf from {remote}")


def _check_config(repo):
    """[check] from the work tree's .gitperf.toml (defaults without one)."""
    cfg = config.load(repo.workdir) if repo.workdir else None
    return cfg.check if cfg else config.CheckConfig()


def _stored_check(repo, rev, base=None, workloads=(), recompute=False):
    """The check of REV from the notes: the stored result of its paired check, or (none, or
    `recompute`) one derived from the stored profiles."""
    from gitperf.checks import check as stored_or_recomputed
    from gitperf.checks import recompute as from_profiles
    from gitperf.store.notes import NotesStore
    run_check = from_profiles if recompute else stored_or_recomputed
    return run_check(NotesStore(repo), rev, _check_config(repo), base, tuple(workloads))


def _subject(repo, commit: str) -> str:
    msg = repo.get(commit).message
    return msg.splitlines()[0] if msg else ""


CHECKS = (EXIT_DEGRADATION, EXIT_USAGE, EXIT_NOT_ENOUGH_DATA)


@main.command(epilog=epilog(0, *CHECKS, EXIT_CANNOT_COLLECT, EXIT_INTERRUPTED))
@click.argument("rev", required=False, default="HEAD")
@base_option()
@workloads_option()
@click.option("--all", "all_functions", is_flag=True, help="--json: every function, not only the changed ones.")
@click.option("--collect", "collect_now", is_flag=True, help="Build REV and its base and profile both now, with one "
              "probe plan focused on what REV changed, in interleaved rounds (needs root); then check.")
@click.option("--rounds", type=click.IntRange(min=2, max=MAX_COUNT), help="--collect: this many rounds (default: until every "
              "changed function is decided, 3 to 60 rounds, rounds added for at most 90 s).")
@config_option("--collect: the configuration for commits without a .gitperf.toml (default: the working tree's).")
@click.option("--recompute", is_flag=True, help="Derive the result from all stored profiles even when REV has the "
                                                "stored result of a paired check (`check --collect`).")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="No progress messages (--collect).")
@verbose_option
def check(rev, base, workloads, all_functions, collect_now, rounds, config_file, recompute, as_json, quiet, verbose):
    """Degradations of REV (default HEAD) against its baseline and history.

    \b
    git perf check --collect   profile REV and its parent now, like with like, decide, and
                               store the result with the profiles
    git perf check             the stored result of REV's paired check; without one (or with
                               --recompute), from stored profiles: the baseline is the nearest
                               first-parent ancestor with profiles of the same configuration
                               and probe plan
    Thresholds come from [check] in .gitperf.toml.
    """
    from gitperf.views.report import check_text
    repo = _repo()
    if collect_now:
        from gitperf.checks.paired import PairedOptions, check_collect
        opts = PairedOptions(rev=rev, base=base, workloads=tuple(workloads), rounds=rounds, config=config_file)
        result = check_collect(repo, opts, _check_config(repo), _engine(), _progress(quiet or as_json, verbose))
    else:
        if rounds or config_file:
            raise click.UsageError("--rounds and --config go with --collect")
        result = _stored_check(repo, rev, base, workloads, recompute)
    if as_json:
        _echo_json(result.to_dict(all_functions))
    else:
        _echo(_fitted(check_text(result)))
    sys.exit(result.exit_code)


def _fitted(text: str) -> str:
    """On a terminal, each line wrapped to its width, the continuation indented under its start; else
    as it is (a file or a pipe keeps one line per item, for grep)."""
    if not sys.stdout.isatty():
        return text
    import shutil
    import textwrap
    width = shutil.get_terminal_size().columns
    out = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        out.append(textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False) if line else "")
    return "\n".join(out)


@main.command(epilog=epilog(0, EXIT_USAGE, EXIT_NOT_ENOUGH_DATA))
@click.argument("a")
@click.argument("b", required=False, default="HEAD")
@workloads_option()
@click.option("--top", type=int, default=30, help="Functions per workload, by time; 0 = all.")
@json_option
def diff(a, b, workloads, top, as_json):
    """Per-function comparison of commits A and B (default HEAD): time per run, ratio, interval."""
    from gitperf.views.report import diff_text
    result = _stored_check(_repo(), b, a, workloads)
    if as_json:
        _echo_json(result.to_dict(all_functions=True))
    else:
        _echo(diff_text(result, top))
    if result.exit_code == EXIT_NOT_ENOUGH_DATA:
        sys.exit(EXIT_NOT_ENOUGH_DATA)


@main.command(epilog=epilog(0, *CHECKS))
@click.argument("rev", required=False)
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "html"]), default="markdown")
@click.option("-o", "--output", type=click.Path(), help="Write here instead of standard output (html: a directory).")
@base_option()
def report(rev, fmt, output, base):
    """The check of REV (default HEAD) as a report: markdown (for a pull-request comment) or JSON.

    The exit code is the check's, so CI can post the report and fail in one step.  `--format html
    -o DIR` writes the dashboard's pages for the whole profiled history as static files (open
    DIR/index.html; no server, no network); its exit code is REV's check where REV is given, else 0
    once the pages are written.
    """
    from gitperf.views.report import check_markdown
    repo = _repo()
    if fmt == "html" and rev is None:
        return _export_html(repo, output)
    result = _stored_check(repo, rev or "HEAD", base)
    if fmt == "html":
        _export_html(repo, output)
        _echo(f"{result.commit[:12]}: {result.result}", err=True)
        sys.exit(result.exit_code)
    text = (check_markdown(result, _subject(repo, result.commit)) if fmt == "markdown"
            else json.dumps(result.to_dict(), indent=2) + "\n")
    if output:
        Path(output).write_text(text)
        _echo(f"wrote {output}", err=True)
    else:
        _echo(text, nl=False)
    sys.exit(result.exit_code)


def _export_html(repo, output) -> None:
    if not output:
        raise GitPerfError("--format html writes a directory of pages: name it with -o DIR")
    if Path(output).exists() and not Path(output).is_dir():
        raise GitPerfError(f"{output} is a file; --format html writes a directory of pages there")
    from gitperf.web.export import export_site
    files = export_site(repo.workdir or repo.path, output, lambda m: _echo(m, err=True))
    _echo(f"wrote {len(files)} pages to {output} (open {Path(output) / 'index.html'})", err=True)


@main.command(epilog=epilog(0, EXIT_NOT_ENOUGH_DATA, *COLLECTS))
@click.argument("rev", required=False, default="HEAD")
@workloads_option("Workload (repeatable; default all).")
@click.option("-k", "--sessions", type=click.IntRange(min=2, max=MAX_COUNT), default=5, show_default=True,
              help="Collections of REV to compare with each other.")
@repeat_option
@click.option("--keep", is_flag=True, help="Store the profiles as notes (they are valid profiles of REV).")
@json_option
@quiet_option
@verbose_option
def noise(rev, workloads, sessions, repeat, keep, as_json, quiet, verbose):
    """A/A: collect REV k times, check every collection against every other, and report the
    run-to-run noise per function, the smallest detectable change, and thresholds that fit.
    Every session probes as `collect` would: under the overhead budget, with the plan the workload's
    history keeps (else the one the first session chooses) kept for all; with the configuration's
    mode where it fixes one.  Needs the same privileges as collect."""
    from gitperf.checks.noise import analyse
    from gitperf.collect.context import CollectRequest
    from gitperf.collect.sessions import SessionsRequest, collect_sessions
    from gitperf.views.render import noise_text
    repo = _repo()
    asked = SessionsRequest(CollectRequest(rev=rev, workloads=tuple(workloads), repeat=repeat), sessions, keep)
    s = collect_sessions(repo, asked, _engine(), _progress(quiet or as_json, verbose))
    cfg = _check_config(repo)
    reports = [analyse(wl, runs, cfg) for wl, runs in s.runs.items() if len(runs) >= 2]
    # every workload is reported: one whose runs failed in all but one session has no figures, and says why
    missing = s.missing()
    if as_json:
        _echo_json([r.to_dict() for r in reports] + [{"workload": wl, "error": why} for wl, why in missing.items()])
    else:
        _echo("\n\n".join([noise_text(r) for r in reports] + [f"workload {wl}: {why}" for wl, why in missing.items()]))
    if missing:
        sys.exit(EXIT_NOT_ENOUGH_DATA)


@main.command(epilog=epilog(0, EXIT_USAGE, EXIT_INTERRUPTED))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on.  Anything but loopback shows your profiles to the network.")
@click.option("--port", type=click.IntRange(0, 65535), default=8642, show_default=True, help="0 = any free port.")
@click.option("--rebuild", is_flag=True, help="Rebuild the index from the notes before serving.")
def serve(host, port, rebuild):
    """The dashboard: timelines, commit reports, regressions, at http://HOST:PORT/.

    Reads the notes into an sqlite index (.git/perf/index.db, rebuilt from the notes at any time)
    and keeps it up to date on every page load.  Needs no privileges; runs no commands.  Ctrl-C stops.
    It answers only requests addressed to localhost or --host (400 otherwise): a web page cannot
    reach it through a DNS name of its own.
    """
    import socket

    from werkzeug.serving import make_server

    from gitperf.views.index import Index
    from gitperf.web import LOOPBACK, create_app
    repo = _repo()
    idx = Index(repo, _check_config(repo))
    try:
        stats = idx.update(rebuild=rebuild, progress=lambda m: _echo(m, err=True))
    finally:
        idx.close()
    _echo(f"index: {stats.notes} profiled commit(s), {stats.read} note(s) read in {stats.seconds:.1f} s", err=True)
    if host not in LOOPBACK:
        _echo(f"warning: serving on {host}: anyone who can reach it sees your profiles and history", err=True)
    try:  # bind here: werkzeug would print its own message and exit 1 on a busy port
        sock = socket.create_server((host, port))
    except OSError as e:
        raise GitPerfError(f"cannot listen on {host}:{port}: {e.strerror or e} (choose another --port)") from None
    # answer only to the names this address is reached by (DNS rebinding); a wildcard address cannot know them
    names = () if host in ("0.0.0.0", "::", "") else (*LOOPBACK, host)
    server = make_server(host, sock.getsockname()[1], create_app(repo.workdir or repo.path, hosts=names), threaded=True,
                         fd=sock.fileno())
    _echo(f"git perf dashboard on http://{host}:{server.port}/  (Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        _echo("stopped", err=True)


@main.group(epilog=epilog(0, EXIT_DEGRADATION, EXIT_USAGE))
def hooks():
    """Install or uninstall the pre-push hook that stops a push making the program slower.

    \b
    The hook checks each pushed commit against its parent as `git perf check --collect` does (both
    built and profiled now, in interleaved rounds), and rejects the push on a degradation that was
    not accepted (`git perf accept`), printing the report.  [hook] in .gitperf.toml sets which
    commits and workloads, and what to do when this machine cannot collect or there is not enough
    data (default: warn and allow).  Bypass: git push --no-verify, or GITPERF_SKIP=1 git push.
    """


@hooks.command("install")
def hooks_install():
    """Install .git/hooks/pre-push (an existing hook is kept and runs first)."""
    from gitperf import hooks as hooks_mod
    _echo(hooks_mod.install(_repo()))


@hooks.command("uninstall")
def hooks_uninstall():
    """Remove the git perf hook (restoring a hook it had chained)."""
    from gitperf import hooks as hooks_mod
    _echo(hooks_mod.uninstall(_repo()))


@hooks.command("run", hidden=True)
@click.argument("name", type=click.Choice(["pre-push"]))
@click.argument("remote", required=False, default="origin")
@click.argument("url", required=False, default="")
def hooks_run(name, remote, url):
    """What the installed hook calls (reads git's pre-push input on stdin)."""
    from gitperf import hooks as hooks_mod
    sys.exit(hooks_mod.run_pre_push(_repo(), remote, sys.stdin.read(), _progress(False, verbose=True)))


@main.command(epilog=epilog(0, EXIT_USAGE))
@click.argument("rev")
@click.option("-m", "--message", "reason", required=True, help="Why the change is intended (required: it is "
              "what the next reader of the history has).")
def accept(rev, reason):
    """Record that REV's performance change is intended: checking REV passes, and later checks use
    REV as the new baseline (history before it is not mixed in).  Stored in the notes, so it
    travels with `git perf push`."""
    from gitperf.git.repo import resolve_commit
    from gitperf.store.notes import NotesStore
    if not reason.strip():
        raise click.UsageError("-m is empty: say why the change is intended (it is stored with the acceptance)")
    repo = _repo()
    commit = resolve_commit(repo, rev)
    who = ""
    try:
        who = repo.default_signature.email
    except Exception:  # noqa: BLE001 - no identity configured: record without it
        pass
    NotesStore(repo).accept(commit, reason, who)
    _echo(f"accepted the performance of {commit[:12]} as the new baseline")


@main.command(epilog=epilog(0, *COLLECTS))
@click.argument("good")
@click.argument("bad", required=False, default="HEAD")
@click.option("--workload", required=True, help="Workload whose time to follow.")
@click.option("--function", "function", default="main", show_default=True, help="Function whose time to follow.")
@repeat_option
@click.option("--pipeline", type=click.Choice(config.PIPELINES), help="Pipeline for the collections.")
@json_option
@verbose_option
def bisect(good, bad, workload, function, repeat, pipeline, as_json, verbose):
    """Find the first commit in GOOD..BAD where FUNCTION's time in WORKLOAD jumped to BAD's level.

    Assumes one step between the two levels (a binary search over first-parent commits, judging
    each by which level it is nearer, geometrically).  Collects only the commits the search visits
    and that have no profile yet, with the configuration's fixed mode (trace by default).
    """
    from gitperf.checks.bisect import Followed
    from gitperf.checks.bisect import bisect as do_bisect
    from gitperf.collect.collection import collect as do_collect
    from gitperf.collect.context import CollectRequest
    repo, say = _repo(), _progress(as_json, verbose)
    engine = []

    def collect_one(c: str) -> None:
        engine[:] = engine or [_engine()]  # only when a commit lacks profiles: reading needs no root
        say(f"collecting {c[:12]}")
        # the configuration's fixed mode: a budgeted plan (the default) traces other functions at each
        # commit, and the levels compared must be measured the same way
        req = CollectRequest(rev=c, workloads=(workload,), repeat=repeat, pipeline=pipeline, max_overhead=0.0)
        do_collect(repo, req, engine[0], lambda m: None)

    r = do_bisect(repo, good, bad, Followed(workload, function, collect_one), say)
    if as_json:
        return _echo_json(r.to_dict())
    vals = r.values
    _echo(f"first slow commit: {r.first_bad[:12]} {_subject(repo, r.first_bad)}")
    _echo(f"  {function}: {vals[r.good] / 1e6:.3f} ms at {r.good[:12]} (good), "
               f"{vals[r.first_bad] / 1e6:.3f} ms at {r.first_bad[:12]}, {vals[r.bad] / 1e6:.3f} ms at {r.bad[:12]} (bad)")
    _echo(f"  collected {len(r.collected)} commit(s); the range holds {r.range_size}; assumes a single step")


if __name__ == "__main__":
    sys.exit(main())
