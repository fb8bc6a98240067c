"""The pre-push hook: what the push does to the branch, judged by a paired check (`check --collect`,
with the working tree's reviewed `.gitperf.toml`, never a pushed commit's own), or by the ones already
stored; a push that makes the program slower is stopped.  `install` keeps an existing hook and runs it
first (chaining).

[hook] commits: `range` (the default) checks the pushed tip against the remote's tip (a new branch:
its merge base with what the remote has), so a slow commit under a harmless one is seen, and names the
commit responsible (`_responsible`); `tip` checks the tip against its parent only; `all` each pushed
commit against its parent (up to max_commits).

Bypass: `git push --no-verify` (git skips hooks) or `GITPERF_SKIP=1 git push` (skips only ours).
Policies for "this machine cannot collect" and "not enough data" come from [hook] (fail-open by
default: warn and allow).
"""

from __future__ import annotations

import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pygit2

from gitperf.checks import DEGRADATION, NOT_ENOUGH_DATA, UNRESOLVED, CheckResult, check, record
from gitperf.core import config
from gitperf.core.errors import EnvironmentUnavailable, GitPerfError, InputError
from gitperf.core.fmt import printable
from gitperf.core.names import short
from gitperf.core.progress import Progress
from gitperf.engine.base import Engine
from gitperf.git.repo import first_parent, parent
from gitperf.store.notes import NotesStore

MARKER = "# git perf pre-push hook"
CHAINED = "pre-push.gitperf-chained"
ZERO = "0" * 40

SCRIPT = f"""#!/bin/sh
{MARKER} (installed by `git perf hooks install`; `git perf hooks uninstall` removes it).
# Bypass: git push --no-verify, or GITPERF_SKIP=1 git push (skips only the performance check).
input=$(cat)
hooks=$(dirname "$0")
if [ -x "$hooks/{CHAINED}" ]; then
    printf '%s\\n' "$input" | "$hooks/{CHAINED}" "$@" || exit $?
fi
if [ "$GITPERF_SKIP" = "1" ]; then
    echo "git perf: GITPERF_SKIP=1: performance not checked" >&2
    exit 0
fi
printf '%s\\n' "$input" | exec "{{python}}" -m gitperf hooks run pre-push "$@"
"""


def hooks_dir(repo: pygit2.Repository) -> Path:
    """Where git looks for hooks (honours core.hooksPath)."""
    cwd = repo.workdir or repo.path
    r = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError(f"cannot locate the hooks directory: {r.stderr.strip()}")
    return (Path(cwd) / r.stdout.strip()).resolve()


def install(repo: pygit2.Repository) -> str:
    d = hooks_dir(repo)
    d.mkdir(parents=True, exist_ok=True)
    hook = d / "pre-push"
    note = ""
    if hook.exists():
        if MARKER in hook.read_text(errors="replace"):
            note = " (updated)"
        else:
            chained = d / CHAINED
            if chained.exists():
                raise InputError(f"{chained} exists already: remove it or uninstall first")
            hook.rename(chained)
            note = f" (your existing hook now runs first, from {chained.name})"
    hook.write_text(SCRIPT.replace("{python}", sys.executable))
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return f"installed {hook}{note}"


def uninstall(repo: pygit2.Repository) -> str:
    d = hooks_dir(repo)
    hook, chained = d / "pre-push", d / CHAINED
    if not hook.exists() or MARKER not in hook.read_text(errors="replace"):
        return f"no git perf hook in {d}"
    hook.unlink()
    if chained.exists():
        chained.rename(hook)
        return f"removed the git perf hook; restored your previous {hook}"
    return f"removed {hook}"


@dataclass(frozen=True)
class PushedRange:
    local_sha: str
    remote_sha: str


def parse_stdin(text: str) -> list[PushedRange]:
    """git's pre-push input: `<local ref> <local sha> <remote ref> <remote sha>` per line."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[1] != ZERO:  # a deletion pushes no code
            out.append(PushedRange(parts[1], parts[3]))
    return out


def _hidden(repo: pygit2.Repository, r: PushedRange) -> tuple[str, ...]:
    """What the remote has already: its tip of the pushed ref, or (a new branch) every remote-tracking branch."""
    if r.remote_sha != ZERO and r.remote_sha in repo:
        return (r.remote_sha,)
    return tuple(str(repo.references[n].peel(pygit2.Commit).id) for n in repo.references
                 if n.startswith("refs/remotes/") and not n.endswith("/HEAD"))


def pushed_commits(repo: pygit2.Repository, r: PushedRange, mode: str, limit: int) -> list[str]:
    """The commits a push brings, newest first (first-parent): the tip only, or up to `limit`."""
    if mode == "tip":
        return [r.local_sha]
    out = [str(c.id) for c in first_parent(repo, r.local_sha, hide=_hidden(repo, r), limit=limit)]
    return out or [r.local_sha]


def range_base(repo: pygit2.Repository, r: PushedRange) -> str | None:
    """What the pushed tip is judged against: the remote's tip of the ref when it is an ancestor of
    the pushed one (a fast-forward); else the newest merge base with what the remote has; None when
    the remote has nothing in common with it (the tip is then checked against its parent)."""
    bases = [repo.merge_base(h, r.local_sha) for h in _hidden(repo, r)]
    found = [str(b) for b in bases if b is not None]
    if not found:
        return None
    return max(found, key=lambda c: repo.get(c).commit_time)


def run_pre_push(repo: pygit2.Repository, remote: str, stdin: str, say: Progress,
                 engine: Callable[[], Engine]) -> int:
    """0 = let the push go, 1 = stop it; `engine` makes the engine a check collects with."""
    cfg = config.load(repo.workdir) if repo.workdir else None
    if cfg is None:
        say("no .gitperf.toml here: nothing to check")
        return 0
    hook = cfg.hook
    say(f"builds and workloads run as {cfg.path} says, not as a pushed commit's own .gitperf.toml")
    workloads = hook.workloads or tuple(w.name for w in cfg.workloads)
    store = NotesStore(repo)
    h = _Hook(repo, cfg, workloads, say, engine)
    status = 0
    for r in parse_stdin(stdin):
        status = max(status, _pushed_range(h, r) if hook.commits == "range" else
                     _each(h, pushed_commits(repo, r, hook.commits, hook.max_commits)))
    if status == 0 and hook.push_notes:
        try:
            store.push(remote)
            say(f"pushed refs/notes/perf to {remote}")
        except GitPerfError as e:
            say(f"warning: could not push the notes: {e}")
    return status


@dataclass(frozen=True)
class _Hook:
    """What every check of one push shares."""

    repo: pygit2.Repository
    cfg: config.Config  # the working tree's: builds and workloads as it says, never a pushed commit's own
    workloads: tuple[str, ...]
    say: Progress
    engine: Callable[[], Engine]


def _each(h: _Hook, commits: list[str]) -> int:
    """Each commit against its parent ([hook] commits = tip or all): 1 when one stops the push."""
    status = 0
    for c in commits:
        result = _check(h, c)
        if result is None:
            return 1
        status = max(status, _judge(h.repo, c, result, h.cfg.hook, h.say))
    return status


def _pushed_range(h: _Hook, r: PushedRange) -> int:
    """[hook] commits = range: the pushed tip against what the remote has, in one paired check; a range
    whose every commit has a stored check against its parent is judged by those instead (nothing is
    measured again).  When the range is slower, the commit responsible is named (`_responsible`)."""
    repo, say = h.repo, h.say
    base = range_base(repo, r)
    commits = [str(c.id) for c in first_parent(repo, r.local_sha, hide=(base,) if base else (), limit=1_000)]
    if base is None or len(commits) <= 1:
        return _each(h, [r.local_sha])
    say(f"{len(commits)} commits pushed on top of {base[:12]}: the pushed tip {r.local_sha[:12]} is checked "
        "against it")
    store = NotesStore(repo)
    kept = {c: record.newest(store, c, parent(repo, c), h.workloads) for c in commits}
    if all(kept.values()) and not h.cfg.hook.recollect:
        say("every pushed commit has a stored paired check against its parent: those verdicts")
        return _each(h, commits)
    result = _check(h, r.local_sha, base=base)
    if result is None:
        return 1
    if result.result != DEGRADATION:
        return _judge(repo, r.local_sha, result, h.cfg.hook, say)
    _print_report(repo, r.local_sha, result, f"{len(commits)} commits since {base[:12]}")
    culprit = _responsible(h, commits, kept)
    where = (f"{culprit[:12]} ({printable(repo.get(culprit).message.splitlines()[0])}) makes it slower" if culprit
             else f"the slowdown is somewhere in these {len(commits)} commits (none of the {h.cfg.hook.max_commits} "
                  "newest is slower alone: [hook] max_commits checks more)")
    say(f"push stopped: the push makes the program slower; {where} (bypass: git push --no-verify, or git perf "
        "accept REV if it is intended)")
    return 1


def _responsible(h: _Hook, commits: list[str], kept: dict) -> str | None:
    """The pushed commit that is slower than its parent: a stored check's degradation (`kept`: each
    commit's stored check against its parent, or None), else each commit checked against its parent,
    newest first, up to [hook] max_commits (a commit whose machine code is its parent's is told in
    seconds)."""
    for c in commits:
        if kept[c] is not None and kept[c].result.result == DEGRADATION:
            return c
    h.say("finding the commit responsible: each pushed commit against its parent, newest first")
    for c in commits[:h.cfg.hook.max_commits]:
        result = _check(h, c)
        if result is not None and result.result == DEGRADATION:
            return c
    return None


def _check(h: _Hook, commit: str, base: str | None = None) -> CheckResult | None:
    """The paired check of `commit` against `base` (its parent by default; `check --collect`); where
    this machine cannot collect, the check of the stored profiles (or None: the hook's policy rejects
    the push)."""
    from gitperf.checks.paired import PairedOptions, check_collect
    repo, cfg, workloads, say = h.repo, h.cfg, h.workloads, h.say
    base = base or parent(repo, commit)
    if not base:
        say(f"{commit[:12]} has no parent: nothing to compare with")
        return check(NotesStore(repo), commit, cfg.check, workloads=workloads)
    stored = None if cfg.hook.recollect else record.newest(NotesStore(repo), commit, base, workloads)
    if stored is not None:  # the paired check that `check --collect` (or an earlier push) kept: its verdict
        say(f"{commit[:12]}: its paired check against {base[:12]} of {record.when(stored.time)} is stored: that verdict "
            "([hook] recollect = true measures again)")
        return check(NotesStore(repo), commit, cfg.check, base_rev=base, workloads=workloads)
    try:
        say(f"checking {commit[:12]} against {base[:12]}: both built and profiled, interleaved")
        # the working tree's configuration, never a pushed commit's own: the hook runs as root, and a
        # pulled commit that changed build.command would otherwise run that command (issue #37)
        opts = PairedOptions(rev=commit, base=base, workloads=workloads, rounds=cfg.hook.rounds or None,
                             config=cfg.path)
        return check_collect(repo, opts, cfg.check, h.engine(), lambda m: say("  " + m))
    except EnvironmentUnavailable as e:
        if cfg.hook.on_cannot_collect == "reject":
            say(f"cannot collect here ({e}); hook.on_cannot_collect = reject: push stopped")
            return None
        say(f"warning: cannot collect here ({e}); checking with the profiles there are")
        return check(NotesStore(repo), commit, cfg.check, workloads=workloads)


def _print_report(repo: pygit2.Repository, commit: str, result: CheckResult, subject: str) -> None:
    from gitperf.views.report import check_markdown
    print(printable(check_markdown(result, subject)), file=sys.stderr)


def _judge(repo: pygit2.Repository, commit: str, result: CheckResult, hook: config.HookConfig, say: Progress) -> int:
    """1 when the result stops the push."""
    if result.result == DEGRADATION:
        _print_report(repo, commit, result, repo.get(commit).message.splitlines()[0])
        say(f"push stopped: {commit[:12]} makes the program slower (bypass: git push --no-verify, or "
            f"git perf accept {commit[:12]} if it is intended)")
        return 1
    if result.result == NOT_ENOUGH_DATA:
        if hook.on_not_enough_data == "reject":
            say(f"{commit[:12]}: not enough data to decide; hook.on_not_enough_data = reject: push stopped")
            return 1
        say(f"warning: {commit[:12]}: not enough data to decide ({'; '.join(result.warnings)}); allowing the push")
        return 0
    if result.result == UNRESOLVED:
        asked = ", ".join(short(c.function, 60) for c in result.notable() if c.type == UNRESOLVED)
        say(f"{commit[:12]}: unresolved ({asked}): no verdict, the push goes on; `git perf check {commit[:12]} "
            "--collect` adds rounds to the stored ones")
        return 0
    say(f"{commit[:12]}: {result.result}")
    return 0
