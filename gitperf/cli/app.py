"""The `git perf` command group and what its commands share: options, output (`_echo`, a terminal's
status line), errors turned into exit codes (`PerfGroup`), the repository and the engine."""


from __future__ import annotations

import errno
import json
import math
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import click

from gitperf import __version__
from gitperf.core import config
from gitperf.core.errors import (
    EXIT_CANNOT_COLLECT,
    EXIT_INTERRUPTED,
    EXIT_MEANINGS,
    EXIT_USAGE,
    GitPerfError,
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
            return self._invoke(ctx)
        finally:  # also after an error, Ctrl-C or SIGTERM (SIGKILL: the next command's `_repo`)
            from gitperf.core.owner import give_back
            for d in _OPENED:
                give_back(d)

    def _invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GitPerfError as e:
            _echo(f"git perf: error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:  # outside a collection (which says what it left): notes are written whole or not
            _echo(f"git perf: interrupted: {_stored_here()}", err=True)
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


def _stored_here() -> str:
    """What this command stored before an interrupt (`store.notes.STORED_HERE`; a write is whole or
    not at all), for the line that says it stopped."""
    stored = getattr(sys.modules.get("gitperf.store.notes"), "STORED_HERE", {})
    if not stored:
        return "nothing was stored"
    lines, commits = sum(stored.values()), sorted(stored)
    return (f"what it stored before is kept: {lines} note line(s) on {', '.join(c[:12] for c in commits[:3])}"
            + (f" and {len(commits) - 3} more commit(s)" if len(commits) > 3 else "") + "; nothing after")


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


_OPENED: list = []  # the git directories this command opened: handed back to their owners as it ends


def _repo():
    """The repository here.  Run as root in one another user owns (sudo), what root left in its git
    directory is handed back to the owner now (a SIGKILLed run's) and as the command ends (`core.owner`)."""
    from gitperf.core.owner import give_back
    from gitperf.git.repo import common_dir, open_repo
    repo = open_repo(".")
    if (d := common_dir(repo)) not in _OPENED:
        _OPENED.append(d)
        give_back(d)
    return repo


def _bcc(per_probe: bool = False):
    from gitperf.engine.bcc_engine import BccEngine
    return BccEngine(force_per_probe=per_probe)


@dataclass(frozen=True)
class Collector:
    """What the commands that collect collect with, handed down through click's context object: the
    engine, made only when a command collects (reading needs no root), and the command that collects
    one commit of `collect --range` in a process of its own with that engine (() for
    `collect.worker`'s, with the eBPF one).  `main(obj=Collector(...))` collects with another (the
    tests' fake engine); `engine(per_probe)` makes one."""

    engine: Callable = _bcc
    worker: tuple[str, ...] = ()

    @staticmethod
    def here() -> Collector:
        """This command's (the eBPF engine unless `main` was given another)."""
        return click.get_current_context().ensure_object(Collector)


def _engine(per_probe: bool = False):
    """This command's engine, after making sure this machine can collect (exit 4 before any other work)."""
    engine = Collector.here().engine(per_probe)
    engine.check()
    return engine


@click.group(cls=PerfGroup, epilog=epilog(*EXIT_MEANINGS), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="git perf")
@click.pass_context
def main(ctx):
    """Continuous performance analysis of native programs: eBPF profiles stored as git notes."""
    ctx.ensure_object(Collector)


def _check_config(repo):
    """[check] from the work tree's .gitperf.toml (defaults without one)."""
    cfg = config.load(repo.workdir) if repo.workdir else None
    return cfg.check if cfg else config.CheckConfig()


def _subject(repo, commit: str) -> str:
    msg = repo.get(commit).message
    return msg.splitlines()[0] if msg else ""
