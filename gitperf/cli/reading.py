"""Commands that read what is stored: `log`, `show` (and its exports), `serve` (the dashboard)."""


from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gitperf.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    GitPerfError,
    InputError,
    epilog,
)
from gitperf.core.fmt import printable

from gitperf.cli.app import _check_config, json_option, _echo, _echo_json, _repo, main

@main.command(epilog=epilog(0, EXIT_USAGE))
@click.option("-n", "--max-count", type=click.IntRange(min=1), default=20, help="How many commits.")
@json_option
@click.argument("rev", required=False, default="HEAD")
def log(max_count, as_json, rev):
    """First-parent commits from REV, how many profiles each has, and its stored checks: the result and
    the machine that measured it (a commit checked by several runners lists each)."""
    from gitperf.checks.record import checked
    from gitperf.store.caching import CachingStore
    from gitperf.store.query import first_parent_log
    repo = _repo()
    store = CachingStore(repo)  # (each note decoded once: its profiles counted, then its checks read)
    rows = first_parent_log(repo, rev, max_count, store)
    checks = {r.commit: checked(store, r.commit) if r.profiles else [] for r in rows}
    if as_json:
        return _echo_json([{**r.to_dict(), "checks": checks[r.commit]} for r in rows])
    for r in rows:
        mark = f"{r.profiles:3d} profile{'s' if r.profiles != 1 else ' '}" if r.profiles else "  -         "
        bad = f"  ({r.unreadable} unreadable)" if r.unreadable else ""
        said = ", ".join(f"{c['result']} on {'+'.join(m[:8] for m in c['machines']) or '?'}" for c in checks[r.commit])
        _echo(f"{r.commit[:12]} {mark}  {'checked: ' + said + '  ' if said else ''}{r.subject}{bad}")


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
    import msgspec

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
        # (msgspec: the same text as json.dumps(indent=2) in half the memory: a pulled line of 100,000
        # functions took 571 MB that way, 294 MB this way; issue #59)
        return _emit(msgspec.json.format(msgspec.json.encode(show_json(commit, profiles)), indent=2) + b"\n", "json",
                     output)
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
    _stop_on_signals(server)
    server.serve_forever()
    _echo("stopped", err=True)


def _stop_on_signals(server) -> None:
    """Ctrl-C and SIGTERM end the dashboard by asking its loop to stop (`shutdown`, from a thread: it waits
    for the loop), not by the KeyboardInterrupt the CLI raises for them: raised at whatever bytecode the
    main thread is at, it can be swallowed (inside a finalizer: "Exception ignored in ..."), and a CI run's
    `git perf serve` served on after SIGTERM, its git parent waiting for it in git's handler.  (werkzeug's
    loop swallowed the others: "stopped" was never printed.)"""
    import signal
    import threading

    def stop(_signum, _frame):
        threading.Thread(target=server.shutdown, daemon=True).start()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, stop)
