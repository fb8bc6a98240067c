"""The pre-push hook: each pushed commit's paired check against its parent (`check --collect`, with
the working tree's reviewed `.gitperf.toml`, never a pushed commit's own), or the one already stored
for that pair; a push that makes the program slower is stopped.  `install` keeps an existing hook and
runs it first (chaining).

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

import pygit2

from gitperf.checks import DEGRADATION, NOT_ENOUGH_DATA, CheckResult, check, record
from gitperf.core import config
from gitperf.core.errors import EnvironmentUnavailable, GitPerfError, InputError
from gitperf.core.fmt import printable
from gitperf.core.progress import Progress
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


def pushed_commits(repo: pygit2.Repository, r: PushedRange, mode: str, limit: int) -> list[str]:
    """The commits a push brings, newest first (first-parent): the tip only, or up to `limit`."""
    if mode == "tip":
        return [r.local_sha]
    if r.remote_sha != ZERO and r.remote_sha in repo:
        hide = (r.remote_sha,)
    else:  # a new branch: what no remote-tracking branch has
        hide = tuple(str(repo.references[n].peel(pygit2.Commit).id) for n in repo.references
                     if n.startswith("refs/remotes/") and not n.endswith("/HEAD"))
    out = [str(c.id) for c in first_parent(repo, r.local_sha, hide=hide, limit=limit)]
    return out or [r.local_sha]


def run_pre_push(repo: pygit2.Repository, remote: str, stdin: str, say: Progress) -> int:
    """0 = let the push go, 1 = stop it."""
    cfg = config.load(repo.workdir) if repo.workdir else None
    if cfg is None:
        say("no .gitperf.toml here: nothing to check")
        return 0
    hook = cfg.hook
    say(f"builds and workloads run as {cfg.path} says, not as a pushed commit's own .gitperf.toml")
    workloads = hook.workloads or tuple(w.name for w in cfg.workloads)
    store = NotesStore(repo)
    targets = []
    for r in parse_stdin(stdin):
        targets += [c for c in pushed_commits(repo, r, hook.commits, hook.max_commits) if c not in targets]
    status = 0
    for c in targets:
        result = _check(repo, c, cfg, workloads, say)
        if result is None:
            return 1
        status = max(status, _judge(repo, c, result, hook, say))
    if status == 0 and hook.push_notes:
        try:
            store.push(remote)
            say(f"pushed refs/notes/perf to {remote}")
        except GitPerfError as e:
            say(f"warning: could not push the notes: {e}")
    return status


def _check(repo: pygit2.Repository, commit: str, cfg: config.Config, workloads: tuple[str, ...],
           say: Progress) -> CheckResult | None:
    """The paired check of `commit` against its parent (`check --collect`); where this machine
    cannot collect, the check of the stored profiles (or None: the hook's policy rejects the push)."""
    from gitperf.checks.paired import PairedOptions, check_collect
    from gitperf.engine.bcc_engine import BccEngine
    base = parent(repo, commit)
    if not base:
        say(f"{commit[:12]} has no parent: nothing to compare with")
        return check(NotesStore(repo), commit, cfg.check, workloads=workloads)
    stored = None if cfg.hook.recollect else record.newest(NotesStore(repo), commit, base, workloads)
    if stored is not None:  # the paired check that `check --collect` (or an earlier push) kept: its verdict
        say(f"{commit[:12]}: its paired check against {base[:12]} of {record.when(stored.time)} is stored: that verdict "
            "([hook] recollect = true measures again)")
        return check(NotesStore(repo), commit, cfg.check, base_rev=base, workloads=workloads)
    try:
        say(f"checking {commit[:12]} against its parent: both built and profiled, interleaved")
        # the working tree's configuration, never a pushed commit's own: the hook runs as root, and a
        # pulled commit that changed build.command would otherwise run that command (issue #37)
        opts = PairedOptions(rev=commit, workloads=workloads, rounds=cfg.hook.rounds or None, config=cfg.path)
        return check_collect(repo, opts, cfg.check, BccEngine(), lambda m: say("  " + m))
    except EnvironmentUnavailable as e:
        if cfg.hook.on_cannot_collect == "reject":
            say(f"cannot collect here ({e}); hook.on_cannot_collect = reject: push stopped")
            return None
        say(f"warning: cannot collect here ({e}); checking with the profiles there are")
        return check(NotesStore(repo), commit, cfg.check, workloads=workloads)


def _judge(repo: pygit2.Repository, commit: str, result: CheckResult, hook: config.HookConfig, say: Progress) -> int:
    """1 when the result stops the push."""
    if result.result == DEGRADATION:
        from gitperf.views.report import check_markdown
        print(printable(check_markdown(result, repo.get(commit).message.splitlines()[0])), file=sys.stderr)
        say(f"push stopped: {commit[:12]} makes the program slower (bypass: git push --no-verify, or "
            f"git perf accept {commit[:12]} if it is intended)")
        return 1
    if result.result == NOT_ENOUGH_DATA:
        if hook.on_not_enough_data == "reject":
            say(f"{commit[:12]}: not enough data to decide; hook.on_not_enough_data = reject: push stopped")
            return 1
        say(f"warning: {commit[:12]}: not enough data to decide ({'; '.join(result.warnings)}); allowing the push")
        return 0
    say(f"{commit[:12]}: {result.result}")
    return 0
