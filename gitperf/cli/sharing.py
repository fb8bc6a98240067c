"""Commands that share the history: `push`, `pull` of the notes, and the pre-push hook (`hooks`)."""


from __future__ import annotations

import sys

import click

from gitperf.core.errors import (
    EXIT_DEGRADATION,
    EXIT_USAGE,
    epilog,
)

from gitperf.cli.app import Collector, _echo, _progress, _repo, main

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
    engine = Collector.here().engine
    sys.exit(hooks_mod.run_pre_push(_repo(), remote, sys.stdin.read(), _progress(False, verbose=True), engine))
