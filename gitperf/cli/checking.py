"""Commands that judge: `check` (stored, or `--collect`: a paired check now), `diff`, `report`,
`accept`."""


from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from gitperf.core.errors import (
    EXIT_CANNOT_COLLECT,
    EXIT_DEGRADATION,
    EXIT_INTERRUPTED,
    EXIT_NOT_ENOUGH_DATA,
    EXIT_USAGE,
    GitPerfError,
    epilog,
)

from gitperf.cli.app import _check_config, _subject, json_option, verbose_option, MAX_COUNT, workloads_option, base_option, config_option, _echo, _echo_json, _progress, _repo, _engine, main



def _stored_check(repo, rev, base=None, workloads=(), recompute=False):
    """The check of REV from the notes: the stored result of its paired check, or (none, or
    `recompute`) one derived from the stored profiles."""
    from gitperf.checks import check as stored_or_recomputed
    from gitperf.checks import recompute as from_profiles
    from gitperf.store.notes import NotesStore
    run_check = from_profiles if recompute else stored_or_recomputed
    return run_check(NotesStore(repo), rev, _check_config(repo), base, tuple(workloads))




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
@click.option("--rebuild", is_flag=True, help="--collect: build both sides again from fresh worktrees instead of "
              "reusing the builds kept from an earlier check (a kept build is reused only while its tree is clean "
              "and its binary and libraries are the ones it built).")
@click.option("--fresh", is_flag=True, help="--collect: a new series of rounds with a plan measured now, instead of "
              "adding rounds to the stored check of the same pair (which a re-check does while both builds are the "
              "kept ones).")
@click.option("--recompute", is_flag=True, help="Derive the result from all stored profiles even when REV has the "
                                                "stored result of a paired check (`check --collect`).")
@click.option("--range", "rev_range", metavar="A..B", help="--collect: every first-parent commit of A..B against its "
              "parent, one after another; a commit already checked against its parent keeps its stored check "
              "(--fresh checks it again).  Exit 1 when any got slower.")
@click.option("--shard", "shard_spec", metavar="I/N", help="--range: only this runner's share, runner I of N (a commit "
              "goes to the runner its id picks, whatever the range): N CI runners check every commit once, push "
              "their notes, and `git perf pull` brings them into one history.")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="No progress messages (--collect).")
@verbose_option
def check(rev, base, workloads, all_functions, collect_now, rounds, config_file, rebuild, fresh, recompute, rev_range,
          shard_spec, as_json, quiet, verbose):
    """Degradations of REV (default HEAD) against its baseline and history.

    \b
    git perf check --collect   profile REV and its parent now, like with like, decide, and
                               store the result with the profiles; again, it adds rounds
                               to the stored ones and decides on all of them
    git perf check --collect --range A..B [--shard I/N]
                               every commit of A..B against its parent (this
                               runner's share of them): N CI runners, one history
    git perf check             the stored result of REV's paired check; without one (or with
                               --recompute), from stored profiles: the baseline is the nearest
                               first-parent ancestor with profiles of the same configuration
                               and probe plan
    Thresholds come from [check] in .gitperf.toml.
    """
    from gitperf.views.report import check_text
    repo = _repo()
    if rev_range or shard_spec:
        if not (collect_now and rev_range) or base:
            raise click.UsageError("--range A..B goes with --collect (each commit against its parent: no --base); "
                                   "--shard with --range")
        from gitperf.checks.paired import PairedOptions
        opts = PairedOptions(workloads=tuple(workloads), rounds=rounds, config=config_file, rebuild=rebuild,
                             fresh=fresh)
        out = (all_functions, as_json, _progress(quiet or as_json, verbose))
        return _check_range(repo, rev_range, shard_spec, opts, out)
    if collect_now:
        from gitperf.checks.paired import PairedOptions, check_collect
        opts = PairedOptions(rev=rev, base=base, workloads=tuple(workloads), rounds=rounds, config=config_file,
                             rebuild=rebuild, fresh=fresh)
        result = check_collect(repo, opts, _check_config(repo), _engine(), _progress(quiet or as_json, verbose))
    else:
        if rounds or config_file or rebuild or fresh:
            raise click.UsageError("--rounds, --config, --rebuild and --fresh go with --collect")
        result = _stored_check(repo, rev, base, workloads, recompute)
    if as_json:
        _echo_json(result.to_dict(all_functions))
    else:
        _echo(_fitted(check_text(result)))
    sys.exit(result.exit_code)


def _check_range(repo, rev_range: str, shard_spec: str | None, opts, out: tuple) -> None:
    """`check --collect --range A..B [--shard I/N]`: each commit's report, then a line for the range
    (`out`: --all, --json and the progress)."""
    from gitperf.checks.ranges import RangeRequest, Shard, check_range
    from gitperf.views.report import check_text
    all_functions, as_json, progress = out
    which = Shard.parse(shard_spec) if shard_spec else Shard()
    done = check_range(repo, RangeRequest(rev_range, which, opts), _check_config(repo), _engine(), progress)
    if as_json:
        _echo_json(done.to_dict(all_functions))
    else:
        for r in done.checked:
            _echo(_fitted(check_text(r)) + "\n")
        slower = [r.commit[:12] for r in done.checked if r.exit_code == EXIT_DEGRADATION]
        _echo(f"range {rev_range}, shard {which}: {len(done.checked)} commit(s) checked ({len(done.kept)} of them "
              f"stored already), {done.others} left to the other runners, {len(done.skipped)} without a parent; "
              + (f"slower: {', '.join(slower)}" if slower else "none slower"))
    sys.exit(done.exit_code)


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
