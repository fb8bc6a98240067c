"""One side of a collection, resolved once before anything is built (ARCHITECTURE.md §2): the
commit, its configuration as the collection uses it, where that configuration came from, whether the
commit is built in the user's work tree, and the key of a kept build.  `collect.collection.built`
builds what a `Resolved` says; `collect.paired` resolves both sides of a check before building either.

The configuration is read once, from where the build will find it: the work tree's `.gitperf.toml`
when the clean checked-out HEAD is built in place, else the commit's own file (read from its tree,
not from a checkout: a broken file is reported before any build), else one borrowed (`--config
FILE`, or the working tree's for a commit from before the project adopted git perf), else the ad hoc
command line.  Reading it in three places once let them disagree: the padding was decided from the
working tree's file while the build ran with `--config FILE`'s."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pygit2

from gitperf.collect.context import Target
from gitperf.core.config import FILENAME, Config
from gitperf.core.config import load as load_config
from gitperf.core.config import load_file, parse
from gitperf.core.errors import ConfigError
from gitperf.git import buildcache
from gitperf.git.worktree import is_clean_head


@dataclass(frozen=True)
class Resolved:
    commit: str
    config: Config  # as the collection uses it: the request's padding and alignment applied
    source: str  # `Header.config`: "" = the commit's own file, else the borrowed file with its digest
    in_worktree: bool  # built and run in the user's work tree (else in a new worktree)
    key: str | None = None  # a kept build's key (`git.buildcache`): a check's fresh builds only


def resolve(target: Target) -> Resolved:
    """The side `target` asks for (see the module's docstring)."""
    req = target.req
    if req.adhoc:  # an ad hoc binary: no build of the project's, its command on the command line
        cfg = req.adhoc_config()
        return Resolved(target.commit, cfg, cfg.path, in_worktree=not req.fresh)
    clean = not req.fresh and is_clean_head(target.repo, target.commit)
    cfg, own = _config(target, clean)
    asked = _as_asked(target, cfg)
    # a padded build never runs in the work tree: make would find the user's unpadded objects up to
    # date (without a build only the work tree has the binary)
    in_worktree = clean and (req.no_build or not asked.build.probe_pad)
    if clean and not in_worktree:  # the new worktree holds the commit's tracked files only
        cfg, own = _config(target, False)
        asked = _as_asked(target, cfg)
    if not asked.build.binary:
        raise ConfigError(asked.path, "build.binary", "missing: which ELF file should be probed?")
    key = (buildcache.key(target.commit, asked.build)
           if req.fresh and not req.no_build and asked.build.command.strip() else None)
    return Resolved(target.commit, asked, "" if own else f"{asked.path} (sha256 {asked.digest})", in_worktree, key)


def _config(target: Target, in_worktree: bool) -> tuple[Config, bool]:
    """The configuration found where a build in the work tree (or else in a new worktree) finds it,
    and whether it is the commit's own."""
    req, workdir = target.req, target.repo.workdir
    if req.config:
        own = in_worktree and Path(req.config).resolve() == (Path(workdir) / FILENAME).resolve()
        return load_file(Path(req.config)), own
    if not in_worktree and (text := _committed(target)) is not None:
        return parse(text, f"{target.commit[:12]}:{FILENAME}"), True
    cfg = load_config(workdir) if workdir else None  # the work tree's file, tracked or not
    if cfg is None:
        raise ConfigError(f"{target.commit[:12]}:{FILENAME}", "",
                          "not found in this commit nor in the working tree: run `git perf init`, pass "
                          "--config FILE, or collect ad hoc with --binary PATH --no-build -- CMD ARGS...")
    if not in_worktree:  # borrowed: a commit from before the project adopted git perf
        target.progress(f"{target.commit[:12]} has no .gitperf.toml: using the working tree's ({cfg.path})")
    return cfg, in_worktree


def _committed(target: Target) -> str | None:
    """The text of the commit's own .gitperf.toml (None: it has none)."""
    tree = target.repo[target.commit].peel(pygit2.Commit).tree
    if FILENAME not in tree or not isinstance(tree[FILENAME], pygit2.Blob):
        return None
    try:
        return tree[FILENAME].data.decode()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{target.commit[:12]}:{FILENAME}", "", f"cannot read: {e}") from None


def _as_asked(target: Target, cfg: Config) -> Config:
    """The configuration with the request's build overrides (a check's padding and alignment)."""
    req = target.req
    if req.probe_pad is not None:
        cfg = replace(cfg, build=replace(cfg.build, probe_pad=req.probe_pad))
    if req.align_functions is not None:
        cfg = replace(cfg, build=replace(cfg.build, align_functions=req.align_functions))
    return cfg
