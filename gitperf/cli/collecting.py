"""Commands that build and profile (root for eBPF): `init`, `collect` (one commit or a range),
`noise` (A/A), `bisect`."""


from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from gitperf.core import config
from gitperf.core.errors import (
    EXIT_NOT_ENOUGH_DATA,
    EXIT_USAGE,
    GitPerfError,
    epilog,
)

from gitperf.cli.app import _check_config, _subject, COLLECTS, json_option, quiet_option, verbose_option, MAX_COUNT, MAX_JOBS, repeat_option, workloads_option, base_option, config_option, _echo, _echo_json, Seconds, _progress, _repo, _engine, main, Collector

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
    from gitperf.collect.range import WORKER, Parallel, collect_range
    from gitperf.git.repo import first_parent_range
    repo = _repo()
    commits = first_parent_range(repo, spec)
    _engine(req.per_probe)
    if not req.workloads:  # the configured ones, named, so that a commit lacking any of them is collected
        cfg = config.load_file(Path(req.config)) if req.config else config.load(repo.workdir) or config.Config("")
        req = replace(req, workloads=tuple(w.name for w in cfg.workloads))
    result = collect_range(repo, commits, req, Parallel(jobs, Collector.here().worker or WORKER), say)
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
