"""`git perf`: a thin click layer over the library.  Library errors carry their exit code."""

from __future__ import annotations

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
from gitperf.core.errors import GitPerfError

EXIT_CODES = """\b
Exit codes:
  0  success / no degradation
  1  degradation found (check, hook)
  2  usage, configuration or input error
  3  not enough data to decide
  4  this machine cannot collect (no eBPF, no privileges)
"""


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
        _follow_git()
        try:
            return super().invoke(ctx)
        except GitPerfError as e:
            click.echo(f"git perf: error: {e}", err=True)
            ctx.exit(e.exit_code)
        except OSError as e:
            if not e.filename:  # not about a file the user can fix: a bug, keep the traceback
                raise
            click.echo(f"git perf: error: {e.filename}: {e.strerror or e} (check the path and its permissions)",
                       err=True)
            ctx.exit(2)


class Seconds(click.ParamType):
    """A finite, positive number of seconds (click's FloatRange lets nan and inf through)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            v = float(value)
        except ValueError:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(v) or v <= 0:
            self.fail(f"{value!r}: expected a finite number of seconds > 0", param, ctx)
        return v


def _progress(quiet: bool):
    def say(msg: str) -> None:
        if not quiet:
            click.echo(f"git perf: {msg}", err=True)
    return say


def _repo():
    from gitperf.git.repo import open_repo
    return open_repo(".")


@click.group(cls=PerfGroup, epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git perf")
def main():
    """Continuous performance analysis of native programs: eBPF profiles stored as git notes."""


@main.command()
@click.option("--binary", default="build/app", help="Path of the binary the build produces.")
@click.option("--command", "command", default=None, help="Workload command line.")
@click.option("--force", is_flag=True, help="Overwrite an existing .gitperf.toml.")
@click.option("--hooks", "with_hooks", is_flag=True, help="Also install the pre-push hook.")
def init(binary, command, force, with_hooks):
    """Write a commented .gitperf.toml at the repository root."""
    repo = _repo()
    path = Path(repo.workdir) / config.FILENAME
    if path.exists() and not force:
        raise GitPerfError(f"{path} exists; use --force to overwrite it")
    text = config.template(binary, command or f"./{binary}")
    config.parse(text, str(path))  # the template must always be valid
    path.write_text(text)
    click.echo(f"wrote {path}")
    if with_hooks:
        from gitperf import hooks as hooks_mod
        click.echo(hooks_mod.install(repo))


@main.command(epilog=EXIT_CODES)
@click.argument("rev", required=False, default="HEAD")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.option("--workload", "workloads", multiple=True, help="Workload name (repeatable; default all). "
              "Ad hoc: the name to store the profile under (default adhoc).")
@click.option("--func", "funcs", multiple=True, help="Probe only this function (repeatable); main is always probed.")
@click.option("--mode", type=click.Choice(config.MODES), help="Probing mode (overrides collect.mode).")
@click.option("--pipeline", type=click.Choice(config.PIPELINES), help="Optimization pipeline: none | basic "
              "(match, diff tracing, static baseline) | advanced (+ trim, prune, dynamic baseline) | full "
              "(+ strict trim, dynamic sampling).")
@click.option("--optimization-on", "opt_on", multiple=True, metavar="NAME", help="Add a method (repeatable): "
              "match, diff-tracing, static-baseline, trim, prune, dynamic-baseline, dynamic-sampling.")
@click.option("--optimization-off", "opt_off", multiple=True, metavar="NAME", help="Remove a method (repeatable).")
@click.option("--optimization-arg", "opt_args", multiple=True, metavar="NAME=VALUE",
              help="Override a predicted parameter, e.g. keep_top=2, criterion=semi-strict, standalone=true.")
@click.option("--base", help="Diff tracing and baseline statistics against this commit (default: the parent).")
@click.option("--max-overhead", "max_overhead", metavar="PCT", help="Overhead budget, e.g. 5%: trace the functions "
              "whose information is worth their calibrated cost (changed ones first), stack-sample the rest. "
              "Costs a pilot run per workload, and a counting run when a changed function has no call "
              "count yet (overrides collect.max_overhead; replaces --mode).")
@click.option("--range", "rev_range", metavar="A..B", help="Every first-parent commit in A..B that lacks profiles "
              "(resumable: an interrupted range continues where it stopped).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --range: collections at once (each in its own worktree; timings get noisier).")
@click.option("--repeat", type=click.IntRange(min=1), help="Runs per workload (one profile each).")
@click.option("--timeout", type=Seconds(), help="Seconds before a run is killed.")
@click.option("--binary", type=click.Path(dir_okay=False), help="Ad hoc: the ELF binary to probe.")
@click.option("--no-build", is_flag=True, help="Do not run the build command.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="The configuration to use (default: "
              "the commit's .gitperf.toml, else the working tree's: history from before adopting git perf).")
@click.option("--per-probe", is_flag=True, help="Attach one uprobe per function instead of uprobe_multi links.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("-q", "--quiet", is_flag=True, help="No progress messages.")
def collect(rev, command, workloads, funcs, mode, pipeline, opt_on, opt_off, opt_args, base, max_overhead, rev_range,
            jobs, repeat, timeout, binary, no_build, config_file, per_probe, as_json, quiet):
    """Profile REV (default HEAD) under eBPF and store one profile per workload run as a git note.

    \b
    With .gitperf.toml:  git perf collect [REV] [--workload NAME]
    Ad hoc:              git perf collect --binary PATH --no-build [--workload NAME] -- CMD ARGS...
    Needs root (or CAP_BPF and CAP_PERFMON).  Ctrl-C detaches every probe and stores nothing.
    """
    from gitperf.collect.collection import collect as do_collect
    from gitperf.collect.context import CollectRequest
    from gitperf.engine.bcc_engine import BccEngine

    # Ad hoc, click cannot tell REV from the command's first word after `--`: a word that names a
    # commit and is followed by more words is REV, anything else starts the command -- unless it
    # came before a `--`, where only REV can be (a mistyped REV must not become the command).
    if binary and rev != "HEAD" and not (command and _looks_like_rev(rev)):
        if _before_dashdash(rev):
            from gitperf.git.repo import resolve_commit
            resolve_commit(_repo(), rev)  # raises "unknown revision"
        command, rev = (rev, *command), "HEAD"
    budget = None
    if max_overhead is not None:
        from gitperf.plan.hybrid import parse_percent
        try:
            budget = parse_percent(max_overhead)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--max-overhead") from None
        if mode:
            raise click.UsageError("--max-overhead chooses the probing itself; leave out --mode")
    req = CollectRequest(
        rev=rev, workloads=() if binary else tuple(workloads), funcs=tuple(funcs), mode=mode, repeat=repeat,
        timeout=timeout, binary=binary, no_build=no_build, command=tuple(command),
        adhoc_name=workloads[0] if binary and workloads else "adhoc", pipeline=pipeline, optimization_on=opt_on,
        optimization_off=opt_off, optimization_args=opt_args, base=base, max_overhead=budget,
        config=str(Path(config_file).resolve()) if config_file else None,
    )
    from gitperf.plan.pipelines import resolve
    resolve(pipeline or "none", opt_on, opt_off, opt_args)  # bad names: exit 2 before any work
    if rev_range:
        if binary or command:
            raise GitPerfError("--range collects configured workloads; it cannot be combined with ad hoc --binary/CMD")
        return _collect_range(rev_range, replace(req, workloads=tuple(workloads)), jobs, as_json, quiet)
    engine = BccEngine(force_per_probe=per_probe)
    engine.check()  # exit 4 before anything else when this machine cannot collect
    commit, stored = do_collect(_repo(), req, engine, _progress(quiet or as_json))
    if as_json:
        click.echo(json.dumps({"commit": commit, "profiles": [c.to_dict() for c in stored]}, indent=2))
        return
    from gitperf.views.render import collect_summary
    click.echo(collect_summary(commit, stored))


def _range_args(req) -> tuple[str, ...]:
    """The options of one `collect` of a range, for each commit's own `git perf collect` process."""
    extra = [a for f in req.funcs for a in ("--func", f)]
    budget = f"{req.max_overhead * 100:g}%" if req.max_overhead is not None else None
    for flag, value in (("--mode", req.mode), ("--pipeline", req.pipeline), ("--repeat", req.repeat),
                        ("--timeout", req.timeout), ("--max-overhead", budget)):
        if value is not None:
            extra += [flag, str(value)]
    return tuple(extra)


def _collect_range(spec, req, jobs, as_json, quiet):
    from gitperf.collect.range import collect_range
    from gitperf.engine.bcc_engine import BccEngine
    from gitperf.git.repo import first_parent_range
    repo = _repo()
    commits = first_parent_range(repo, spec)
    BccEngine().check()
    names = req.workloads or tuple(w.name for w in (config.load(repo.workdir) or config.Config("")).workloads)
    done, skipped, failed = collect_range(repo, commits, names, jobs, _range_args(req), _progress(quiet or as_json))
    if as_json:
        click.echo(json.dumps({"collected": done, "skipped": skipped, "failed": failed}, indent=2))
    else:
        click.echo(f"collected {len(done)}, skipped {len(skipped)} (already profiled), failed {len(failed)} "
                   f"of {len(commits)} commits")
    if failed:
        sys.exit(2)


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


@main.command()
@click.option("-n", "--max-count", type=click.IntRange(min=1), default=20, help="How many commits.")
@click.option("--json", "as_json", is_flag=True)
@click.argument("rev", required=False, default="HEAD")
def log(max_count, as_json, rev):
    """First-parent commits from REV and how many profiles each has."""
    from gitperf.store.query import first_parent_log
    rows = first_parent_log(_repo(), rev, max_count)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
        return
    for r in rows:
        mark = f"{r.profiles:3d} profile{'s' if r.profiles != 1 else ' '}" if r.profiles else "  -         "
        bad = f"  ({r.unreadable} unreadable)" if r.unreadable else ""
        click.echo(f"{r.commit[:12]} {mark}  {r.subject}{bad}")


@main.command()
@click.argument("rev", required=False, default="HEAD")
@click.option("--workload", help="Only this workload.")
@click.option("--top", type=int, default=25, help="Functions per profile (by exclusive time); 0 = all.")
@click.option("--models", is_flag=True, help="Fit performance models (duration over call order) with R².")
@click.option("--json", "as_json", is_flag=True)
def show(rev, workload, top, models, as_json):
    """The profiles stored for REV."""
    from gitperf.git.repo import resolve_commit
    from gitperf.store.notes import NotesStore
    from gitperf.views.render import show_json, show_text
    repo = _repo()
    commit = resolve_commit(repo, rev)
    profiles, bad = NotesStore(repo).read(commit)
    if workload:
        profiles = [p for p in profiles if p.profile.header.workload == workload]
    for b in bad:
        click.echo(f"git perf: warning: {b}", err=True)
    if as_json:
        click.echo(json.dumps(show_json(commit, profiles), indent=2))
    else:
        click.echo(show_text(commit, profiles, top, models))


@main.command()
@click.argument("remote", required=False, default="origin")
def push(remote):
    """Push the profiles (refs/notes/perf) to REMOTE without force; merges first if needed."""
    from gitperf.store.notes import NotesStore
    NotesStore(_repo()).push(remote)
    click.echo(f"pushed refs/notes/perf to {remote}")


@main.command()
@click.argument("remote", required=False, default="origin")
def pull(remote):
    """Fetch REMOTE's profiles and merge them into ours by union (nothing is lost)."""
    from gitperf.store.notes import NotesStore
    NotesStore(_repo()).pull(remote)
    click.echo(f"merged refs/notes/perf from {remote}")


def _check_collect(repo, rev, opts, say):
    from gitperf.checks.paired import check_collect
    from gitperf.engine.bcc_engine import BccEngine
    return check_collect(repo, rev, _check_config(repo), BccEngine(), say, opts)


def _check_config(repo):
    """[check] from the work tree's .gitperf.toml (defaults without one)."""
    cfg = config.load(repo.workdir) if repo.workdir else None
    return cfg.check if cfg else config.CheckConfig()


def _subject(repo, commit: str) -> str:
    msg = repo.get(commit).message
    return msg.splitlines()[0] if msg else ""


@main.command(epilog=EXIT_CODES)
@click.argument("rev", required=False, default="HEAD")
@click.option("--base", help="Compare with this commit instead of the nearest profiled ancestor.")
@click.option("--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("--all", "all_functions", is_flag=True, help="--json: every function, not only the changed ones.")
@click.option("--collect", "collect_now", is_flag=True, help="Build REV and its base and profile both now, with one "
              "probe plan focused on what REV changed, in interleaved rounds (needs root); then check.")
@click.option("--rounds", type=click.IntRange(min=2), help="--collect: this many rounds (default: until every "
              "changed function is decided, 3 to 60 rounds, rounds added for at most 90 s).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="--collect: the configuration for "
              "commits without a .gitperf.toml (default: the working tree's).")
@click.option("--json", "as_json", is_flag=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress messages (--collect).")
def check(rev, base, workloads, all_functions, collect_now, rounds, config_file, as_json, quiet):
    """Degradations of REV (default HEAD) against its baseline and history.

    \b
    git perf check --collect   profile REV and its parent now, like with like, and decide
    git perf check             use stored profiles: the baseline is the nearest first-parent
                               ancestor with profiles of the same configuration and probe plan
    Thresholds come from [check] in .gitperf.toml.
    """
    from gitperf.checks import check as run_check
    from gitperf.views.report import check_text
    repo = _repo()
    if collect_now:
        from gitperf.checks.paired import PairedOptions
        opts = PairedOptions(base=base, workloads=tuple(workloads), rounds=rounds,
                             config=str(Path(config_file).resolve()) if config_file else None)
        result = _check_collect(repo, rev, opts, _progress(quiet or as_json))
    else:
        if rounds or config_file:
            raise click.UsageError("--rounds and --config go with --collect")
        result = run_check(repo, rev, _check_config(repo), base, tuple(workloads))
    if as_json:
        click.echo(json.dumps(result.to_dict(all_functions), indent=2))
    else:
        click.echo(check_text(result))
    sys.exit(result.exit_code)


@main.command(epilog=EXIT_CODES)
@click.argument("a")
@click.argument("b", required=False, default="HEAD")
@click.option("--workload", "workloads", multiple=True, help="Only this workload (repeatable).")
@click.option("--top", type=int, default=30, help="Functions per workload, by time; 0 = all.")
@click.option("--json", "as_json", is_flag=True)
def diff(a, b, workloads, top, as_json):
    """Per-function comparison of commits A and B (default HEAD): time per run, ratio, interval."""
    from gitperf.checks import check as run_check
    from gitperf.views.report import diff_text
    repo = _repo()
    result = run_check(repo, b, _check_config(repo), a, tuple(workloads))
    if as_json:
        click.echo(json.dumps(result.to_dict(all_functions=True), indent=2))
    else:
        click.echo(diff_text(result, top))
    if result.exit_code == 3:
        sys.exit(3)


@main.command(epilog=EXIT_CODES)
@click.argument("rev", required=False, default="HEAD")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "html"]), default="markdown")
@click.option("-o", "--output", type=click.Path(), help="Write here instead of standard output (html: a directory).")
@click.option("--base", help="Compare with this commit instead of the nearest profiled ancestor.")
def report(rev, fmt, output, base):
    """The check of REV as a report: markdown (for a pull-request comment) or JSON.

    The exit code is the check's, so CI can post the report and fail in one step.  `--format html
    -o DIR` writes the dashboard's pages for the whole profiled history as static files (open
    DIR/index.html; no server, no network); its exit code is still REV's check.
    """
    from gitperf.checks import check as run_check
    from gitperf.views.report import check_markdown
    repo = _repo()
    result = run_check(repo, rev, _check_config(repo), base)
    if fmt == "html":
        if not output:
            raise GitPerfError("--format html writes a directory of pages: name it with -o DIR")
        if Path(output).exists() and not Path(output).is_dir():
            raise GitPerfError(f"{output} is a file; --format html writes a directory of pages there")
        from gitperf.web.export import export_site
        files = export_site(repo.workdir or repo.path, output, lambda m: click.echo(m, err=True))
        click.echo(f"wrote {len(files)} pages to {output} (open {Path(output) / 'index.html'}); "
                   f"{result.commit[:12]}: {result.result}", err=True)
        sys.exit(result.exit_code)
    text = (check_markdown(result, _subject(repo, result.commit)) if fmt == "markdown"
            else json.dumps(result.to_dict(), indent=2) + "\n")
    if output:
        Path(output).write_text(text)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)
    sys.exit(result.exit_code)


@main.command(epilog=EXIT_CODES)
@click.argument("rev", required=False, default="HEAD")
@click.option("--workload", "workloads", multiple=True, help="Workload (repeatable; default all).")
@click.option("-k", "--sessions", type=click.IntRange(min=2), default=5, show_default=True,
              help="Collections of REV to compare with each other.")
@click.option("--repeat", type=click.IntRange(min=1), help="Runs per collection (default: the workload's).")
@click.option("--keep", is_flag=True, help="Store the profiles as notes (they are valid profiles of REV).")
@click.option("--json", "as_json", is_flag=True)
@click.option("-q", "--quiet", is_flag=True, help="No progress messages.")
def noise(rev, workloads, sessions, repeat, keep, as_json, quiet):
    """A/A: collect REV k times, check every collection against every other, and report the
    run-to-run noise per function, the smallest detectable change, and thresholds that fit.
    Needs the same privileges as collect."""
    from gitperf.checks import noise as noise_mod
    from gitperf.collect.collection import collect as do_collect
    from gitperf.collect.context import CollectRequest
    from gitperf.engine.bcc_engine import BccEngine
    repo = _repo()
    engine = BccEngine()
    engine.check()
    say = _progress(quiet or as_json)
    runs: dict[str, list[list]] = {}
    for k in range(sessions):
        say(f"session {k + 1}/{sessions}")
        _, got = do_collect(repo, CollectRequest(rev=rev, workloads=tuple(workloads), repeat=repeat), engine, say,
                            keep=keep)
        by_wl: dict[str, list] = {}
        for c in got:
            if not c.profile.header.partial:
                by_wl.setdefault(c.profile.header.workload, []).append(c.profile)
        for wl, ps in by_wl.items():
            runs.setdefault(wl, []).append(ps)
    cfg = _check_config(repo)
    reports = [noise_mod.analyse(wl, s, cfg) for wl, s in runs.items() if len(s) >= 2]
    if as_json:
        click.echo(json.dumps([noise_mod.as_json(r) for r in reports], indent=2))
    else:
        click.echo("\n\n".join(noise_mod.text(r) for r in reports))


@main.command(epilog=EXIT_CODES)
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
    stats = Index(repo, _check_config(repo)).update(rebuild=rebuild, progress=lambda m: click.echo(m, err=True))
    click.echo(f"index: {stats.notes} profiled commit(s), {stats.read} note(s) read in {stats.seconds:.1f} s", err=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        click.echo(f"warning: serving on {host}: anyone who can reach it sees your profiles and history", err=True)
    try:  # bind here: werkzeug would print its own message and exit 1 on a busy port
        sock = socket.create_server((host, port))
    except OSError as e:
        raise GitPerfError(f"cannot listen on {host}:{port}: {e.strerror or e} (choose another --port)") from None
    # answer only to the names this address is reached by (DNS rebinding); a wildcard address cannot know them
    names = () if host in ("0.0.0.0", "::", "") else (*LOOPBACK, host)
    server = make_server(host, sock.getsockname()[1], create_app(repo.workdir or repo.path, hosts=names), threaded=True,
                         fd=sock.fileno())
    click.echo(f"git perf dashboard on http://{host}:{server.port}/  (Ctrl-C stops)", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


@main.group(epilog=EXIT_CODES)
def hooks():
    """Install or uninstall the pre-push hook that stops a push making the program slower.

    \b
    The hook collects the pushed tip (and its parent) when they lack profiles, checks it, and
    rejects the push on a degradation, printing the report.  [hook] in .gitperf.toml sets which
    commits and workloads, and what to do when this machine cannot collect or there is not enough
    data (default: warn and allow).  Bypass: git push --no-verify, or GITPERF_SKIP=1 git push.
    """


@hooks.command("install")
def hooks_install():
    """Install .git/hooks/pre-push (an existing hook is kept and runs first)."""
    from gitperf import hooks as hooks_mod
    click.echo(hooks_mod.install(_repo()))


@hooks.command("uninstall")
def hooks_uninstall():
    """Remove the git perf hook (restoring a hook it had chained)."""
    from gitperf import hooks as hooks_mod
    click.echo(hooks_mod.uninstall(_repo()))


@hooks.command("run", hidden=True)
@click.argument("name", type=click.Choice(["pre-push"]))
@click.argument("remote", required=False, default="origin")
@click.argument("url", required=False, default="")
def hooks_run(name, remote, url):
    """What the installed hook calls (reads git's pre-push input on stdin)."""
    from gitperf import hooks as hooks_mod
    sys.exit(hooks_mod.run_pre_push(_repo(), remote, sys.stdin.read(), _progress(False)))


@main.command(epilog=EXIT_CODES)
@click.argument("rev")
@click.option("-m", "--message", "reason", default="", help="Why the change is intended.")
def accept(rev, reason):
    """Record that REV's performance change is intended: checking REV passes, and later checks use
    REV as the new baseline (history before it is not mixed in).  Stored in the notes, so it
    travels with `git perf push`."""
    from gitperf.git.repo import resolve_commit
    from gitperf.store.notes import NotesStore
    repo = _repo()
    commit = resolve_commit(repo, rev)
    who = ""
    try:
        who = repo.default_signature.email
    except Exception:  # noqa: BLE001 - no identity configured: record without it
        pass
    NotesStore(repo).accept(commit, reason, who)
    click.echo(f"accepted the performance of {commit[:12]} as the new baseline")


@main.command(epilog=EXIT_CODES)
@click.argument("good")
@click.argument("bad", required=False, default="HEAD")
@click.option("--workload", required=True, help="Workload whose time to follow.")
@click.option("--function", "function", default="main", show_default=True, help="Function whose time to follow.")
@click.option("--repeat", type=click.IntRange(min=1), help="Runs per collected commit (default: the workload's).")
@click.option("--pipeline", type=click.Choice(config.PIPELINES), help="Pipeline for the collections.")
@click.option("--json", "as_json", is_flag=True)
def bisect(good, bad, workload, function, repeat, pipeline, as_json):
    """Find the first commit in GOOD..BAD where FUNCTION's time in WORKLOAD jumped to BAD's level.

    Assumes one step between the two levels (a binary search over first-parent commits, judging
    each by which level it is nearer, geometrically).  Collects only the commits the search visits
    and that have no profile yet.
    """
    from gitperf.checks.bisect import Followed
    from gitperf.checks.bisect import bisect as do_bisect
    from gitperf.collect.collection import collect as do_collect
    from gitperf.collect.context import CollectRequest
    from gitperf.engine.bcc_engine import BccEngine
    repo = _repo()
    say = _progress(as_json)
    engine = []

    def collect_one(c: str) -> None:
        if not engine:
            engine.append(BccEngine())
            engine[0].check()
        say(f"collecting {c[:12]}")
        do_collect(repo, CollectRequest(rev=c, workloads=(workload,), repeat=repeat, pipeline=pipeline), engine[0],
                   lambda m: None)

    r = do_bisect(repo, good, bad, Followed(workload, function), collect_one, say)
    if as_json:
        click.echo(json.dumps({"first_bad": r.first_bad, "good": r.good, "bad": r.bad, "function": r.metric,
                               "values_ns": r.values, "collected": r.collected, "range": r.range_size}, indent=2))
        return
    vals = r.values
    click.echo(f"first slow commit: {r.first_bad[:12]} {_subject(repo, r.first_bad)}")
    click.echo(f"  {function}: {vals[r.good] / 1e6:.3f} ms at {r.good[:12]} (good), "
               f"{vals[r.first_bad] / 1e6:.3f} ms at {r.first_bad[:12]}, {vals[r.bad] / 1e6:.3f} ms at {r.bad[:12]} (bad)")
    click.echo(f"  collected {len(r.collected)} commit(s); the range holds {r.range_size}; assumes a single step")


if __name__ == "__main__":
    sys.exit(main())
