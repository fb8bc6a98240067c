"""The notes store (ARCHITECTURE.md §4): profiles as lines of git notes under `refs/notes/perf`.

* One profile per line; a line is self-contained, so notes merge by union (`cat_sort_uniq`).
* Local writers serialise on a lock file under `.git/perf/`, and re-read the note inside the lock,
  so concurrent `collect` runs on one machine never lose a profile.
* A line that does not decode is reported (commit, line number, why) and skipped; writes append to
  the note's existing text verbatim, so a corrupt line is never rewritten or dropped.
* Reads and local writes use pygit2; sync with a remote uses the git command, which knows the user's
  remotes, credentials and the notes merge strategies.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import msgspec
import pygit2

from gitperf.core import codec, typed
from gitperf.core.errors import InputError, NoteFormatError, StoreConflict
from gitperf.core.model import Profile, StoredProfile, content_id
from gitperf.core.typed import Real
from gitperf.git.repo import ancestors
from gitperf.git.state import NOTES_WAIT, Held, locked, notes_lock, perf_dir
from gitperf.store import notestree

NOTES_REF = "refs/notes/perf"
SIDE_REF = "refs/notes/perf-remote"  # where `pull` fetches the remote's notes before merging
STAGING = "-staging-"  # + a pid: refs/notes/perf-staging-PID, where writers of older versions wrote first
ACCEPT_PREFIX = "gitperf-accept "  # a note line recording that this commit's performance change was intended
CHECK_PREFIX = "gitperf-check "  # a note line holding a paired check's result (checks.record)
RECORDS = (ACCEPT_PREFIX, CHECK_PREFIX)  # lines that are records, not profiles
# what this process has added to the notes, commit -> lines: an interrupt says what was kept (cli.app)
STORED_HERE: dict[str, int] = {}
NETWORK_TIMEOUT = 300  # seconds a `git perf push`/`pull` may take (a notes ref of years is a few MB)


@dataclass(frozen=True)
class Acceptance:
    """A `git perf accept` record: why the commit's slowdown is intended, who said so, when (unix time)."""

    time: Real
    reason: str = ""
    by: str = ""


# (a pulled note may hold anything: a record that does not read is ignored like an unreadable profile line)
_ACCEPTANCE = msgspec.json.Decoder(Acceptance)


@dataclass(frozen=True)
class BadLine:
    commit: str
    line_no: int  # 1-based within the note
    reason: str

    def __str__(self) -> str:
        return f"note of {self.commit[:12]} line {self.line_no}: {self.reason} (skipped, left as is)"


def _signature(repo: pygit2.Repository) -> pygit2.Signature:
    try:
        return repo.default_signature
    except (KeyError, pygit2.GitError):
        return pygit2.Signature("git perf", "git-perf@localhost")


class NotesStore:
    def __init__(self, repo: pygit2.Repository, ref: str = NOTES_REF):
        self.repo = repo
        self.ref = ref

    # -- reading ---------------------------------------------------------------------------------
    def ancestors(self, commit: str) -> list[str]:
        """First-parent ancestors of `commit`, nearest first: where a check looks for its baseline
        and history."""
        return ancestors(self.repo, commit)

    def note_text(self, commit: str) -> str:
        try:
            return self.repo.lookup_note(commit, self.ref).message
        except KeyError:
            return ""

    def read(self, commit: str) -> tuple[list[StoredProfile], list[BadLine]]:
        """All profiles of a commit, and the lines that could not be read."""
        good, bad = [], []
        left = codec.MAX_NOTE_JSON  # what this note's profiles may still inflate to
        for no, line in enumerate(self.note_text(commit).splitlines(), start=1):
            if not line.strip() or line.startswith(RECORDS):
                continue
            try:
                raw = self._within(line, left)
                left -= len(raw)
                profile = codec.parse(raw)
            except NoteFormatError as e:
                bad.append(BadLine(commit, no, str(e)))
                continue
            good.append(StoredProfile(commit, no, content_id(line.strip()), profile))
        return good, bad

    @staticmethod
    def _within(line: str, left: int) -> bytes | str:
        """The line's profile JSON, if it fits in what is `left` of the note's budget (MAX_NOTE_JSON)."""
        full = f"{codec.MAX_NOTE_JSON / 2**20:.3g} MB, all a note may (a real note holds a few)"
        if left <= 0:
            raise NoteFormatError(f"not read: the note's profiles before it hold {full}")
        if left >= codec.MAX_JSON:
            return codec.inflated(line)
        try:
            return codec.inflated(line, left)
        except codec.TooLarge:
            raise NoteFormatError(f"not read: with the note's profiles before it, it would hold more than {full}") from None

    def record_lines(self, commit: str, prefix: str) -> list[str]:
        """The lines of a commit's note that start with `prefix` (a kind of record), in note order."""
        return [ln for ln in self.note_text(commit).splitlines() if ln.startswith(prefix)]

    def arrivals(self, commit: str, lines: list[str]) -> dict[str, int]:
        """How many of this clone's notes commits ago each of `lines` (of `commit`'s note) arrived: 0 in
        the newest.  The notes ref's first parents are this clone's own history of writes, and a pull
        is one merge on it, so a pulled line arrives when it was pulled, whatever its content claims."""
        key, left, ages, tip = _full_id(self.repo, commit), set(lines), {}, self._tip()
        notes, depth, seen = (self.repo[tip] if tip is not None else None), 0, (None, frozenset())
        while notes is not None and left:
            blob = notestree.find(notes.tree, key)
            if blob != seen[0]:
                seen = (blob, frozenset(self.repo[blob].data.decode(errors="replace").splitlines()) if blob else ())
            for ln in [ln for ln in left if ln not in seen[1]]:
                ages[ln] = depth - 1  # not here, so it arrived in the commit after this one
                left.discard(ln)
            notes, depth = (notes.parents[0] if notes.parents else None), depth + 1
        return {**ages, **{ln: depth - 1 for ln in left}}

    def acceptance(self, commit: str) -> Acceptance | None:
        """The `git perf accept` record of a commit, if any (the newest when there are several)."""
        found = None
        for line in self.note_text(commit).splitlines():
            if line.startswith(ACCEPT_PREFIX):
                try:
                    rec = typed.decode(line[len(ACCEPT_PREFIX):], _ACCEPTANCE)
                except typed.Invalid:
                    continue
                if found is None or rec.time >= found.time:
                    found = rec
        return found

    def accept(self, commit: str, reason: str, who: str) -> None:
        self.add_line(commit, ACCEPT_PREFIX + json.dumps({"reason": reason, "by": who, "time": int(time.time())},
                                                         sort_keys=True))

    def commits(self) -> list[str]:
        """Commits that carry a perf note."""
        try:
            return [str(note.annotated_id) for note in self.repo.notes(self.ref)]
        except (KeyError, pygit2.GitError):
            return []

    def find(self, profile_id: str) -> StoredProfile | None:
        for c in self.commits():
            for sp in self.read(c)[0]:
                if sp.id.startswith(profile_id):
                    return sp
        return None

    # -- writing ----------------------------------------------------------------------------------
    @contextmanager
    def _lock(self) -> Iterator[None]:
        try:
            with locked(notes_lock(self.repo), wait=NOTES_WAIT):
                yield
        except Held as e:
            raise StoreConflict(str(e)) from None

    def add(self, commit: str, profile: Profile) -> str:
        """Append one profile to the commit's note; returns its id.  Adding the same line twice is a
        no-op (identity is the content hash)."""
        line = codec.encode(profile)
        return self.add_line(commit, line)

    def add_line(self, commit: str, line: str) -> str:
        return self.add_lines({commit: [line]})[commit][0]

    def add_lines(self, lines: dict[str, list[str]]) -> dict[str, list[str]]:
        """Append lines to several commits' notes, all or nothing; returns each line's id.  A line
        already in a note is not added twice (identity is the content hash).  Under the lock, every
        commit's new note goes into one notes commit on the notes' tip, and the ref moves to it in one
        update: a reader (or a SIGKILL at any moment) sees every line or none -- a paired check's base
        and target profiles together, never half a set."""
        if any("\n" in line for ls in lines.values() for line in ls):
            raise ValueError("a profile line cannot contain a newline")
        with self._lock():
            # Re-read inside the lock: another process may have written since we last looked.
            self.repo = pygit2.Repository(self.repo.path)
            self._sweep_staging()  # what a writer of an older version killed mid-write left
            texts, added = {}, {}
            for commit, new in lines.items():
                text = self.note_text(commit)
                existing = set(text.splitlines())
                fresh = [ln for ln in dict.fromkeys(new) if ln not in existing]
                if fresh:
                    text = text if text.endswith("\n") or not text else text + "\n"
                    texts[key := _full_id(self.repo, commit)] = text + "".join(ln + "\n" for ln in fresh)
                    added[key] = len(fresh)
            if texts:
                try:
                    self._commit_notes(texts)
                except pygit2.GitError as e:
                    _raise_if_disk_full(perf_dir(self.repo).parent / "objects", sum(map(len, texts.values())), e)
                    raise
                for key, n in added.items():
                    STORED_HERE[key] = STORED_HERE.get(key, 0) + n
                self._pack_if_due()
        return {c: [content_id(ln) for ln in ls] for c, ls in lines.items()}

    def _commit_notes(self, texts: dict[str, str]) -> None:
        """One notes commit on the tip setting each commit's note, then the ref moved to it."""
        tip = self._tip()
        tree = self.repo[tip].peel(pygit2.Tree) if tip is not None else None
        blobs = {commit: self.repo.create_blob(text) for commit, text in texts.items()}
        sig = _signature(self.repo)
        written = self.repo.create_commit(None, sig, sig, "Notes added by 'git perf'",
                                          notestree.write(self.repo, tree, blobs), [tip] if tip else [])
        self.repo.references.create(self.ref, written, force=True)

    def _pack_if_due(self) -> None:
        """Pack loose objects as `git gc --auto` would, under our lock so that no git perf writes
        meanwhile.  git's own estimate (builtin/gc.c, too_many_loose_objects): objects/17 holding more
        than gc.auto/256 files (6,700/256 by default); the count is a directory listing, the gc runs
        only then and keeps the user's gc settings (gc.auto = 0 turns it off)."""
        try:
            loose = sum(1 for _ in os.scandir(perf_dir(self.repo).parent / "objects" / "17"))
        except FileNotFoundError:
            return
        if loose > 6700 // 256:
            self._git("-c", "gc.autoDetach=false", "gc", "--auto", "--quiet", check=False)

    def _tip(self):
        try:
            return self.repo.references[self.ref].target
        except KeyError:
            return None

    def _sweep_staging(self) -> None:
        """Staging refs, and git's lock files of the notes refs, are only ever taken under our lock,
        which we hold: any that exist were left by a writer killed with SIGKILL."""
        refs = perf_dir(self.repo).parent / self.ref  # the common git directory, also from a linked worktree
        for stale in refs.parent.glob(refs.name + "*.lock"):
            stale.unlink(missing_ok=True)
        for name in [r for r in self.repo.references if r.startswith(self.ref + STAGING)]:
            self.repo.references.delete(name)

    # -- sync with a remote ------------------------------------------------------------------------
    def _git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        workdir = self.repo.workdir or self.repo.path
        return subprocess.run(["git", *args], cwd=workdir, capture_output=True, text=True, check=check)

    def _network(self, *args: str) -> subprocess.CompletedProcess:
        """`git fetch`/`git push` of the notes, bounded in time: a remote that stalls must not hold a
        CI job (or the user) for minutes; the notes are on their own ref, nothing is lost by stopping."""
        try:
            return subprocess.run(["git", *args], cwd=self.repo.workdir or self.repo.path, capture_output=True,
                                  text=True, timeout=NETWORK_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise InputError(f"git {args[0]} did not finish in {NETWORK_TIMEOUT} s: nothing was lost (the notes stay "
                             f"under {self.ref}); check the remote and run the command again") from None

    def merge_from(self, other_ref: str) -> None:
        """Union-merge another notes ref into ours (no line is ever lost)."""
        with self._lock():
            if self._git("rev-parse", "-q", "--verify", other_ref, check=False).returncode != 0:
                return
            if self._git("rev-parse", "-q", "--verify", self.ref, check=False).returncode != 0:
                self._git("update-ref", self.ref, other_ref)
                return
            r = self._git("notes", f"--ref={self.ref}", "merge", "-q", "-s", "cat_sort_uniq", other_ref, check=False)
            if r.returncode != 0:
                raise StoreConflict(f"merging {other_ref} into {self.ref} failed: {r.stderr.strip()}")

    def pull(self, remote: str = "origin") -> None:
        _remote_name(remote)
        r = self._network("fetch", "-q", "--", remote, f"+{self.ref}:{SIDE_REF}")
        if r.returncode != 0:
            if "couldn't find remote ref" in r.stderr:
                return  # the remote has no profiles yet
            raise InputError(f"git fetch {remote} failed: {r.stderr.strip()}")
        kind = self._git("cat-file", "-t", SIDE_REF, check=False).stdout.strip()
        if kind != "commit":  # a blob there once broke every read command of a clone that had no notes
            self._git("update-ref", "-d", SIDE_REF, check=False)
            raise InputError(f"{remote}'s {self.ref} is a {kind or 'missing object'}, not a commit of notes: nothing "
                             f"was pulled (whoever can push to {remote} should delete or restore that ref)")
        self.merge_from(SIDE_REF)

    def push(self, remote: str = "origin", attempts: int = 5) -> None:
        """Push without force; when another clone pushed first, pull (union) and try again."""
        _remote_name(remote)
        for _ in range(attempts):
            if self._git("rev-parse", "-q", "--verify", self.ref, check=False).returncode != 0:
                return  # nothing to push
            # --no-verify: pushing notes is not pushing code; it must not run (our own) pre-push hook
            r = self._network("push", "-q", "--no-verify", "--", remote, f"{self.ref}:{self.ref}")
            if r.returncode == 0:
                return
            if "rejected" not in r.stderr and "fetch first" not in r.stderr and "non-fast-forward" not in r.stderr:
                raise InputError(f"git push {remote} failed: {r.stderr.strip()}")
            self.pull(remote)
        raise StoreConflict(f"{remote}'s {self.ref} kept moving during {attempts} attempts; run git perf push again")


def _raise_if_disk_full(objects: os.PathLike, size: int, e: Exception) -> None:
    """libgit2 reports a failed object write on a full disk as "no error": say what it was."""
    st = os.statvfs(objects)
    if st.f_bavail * st.f_frsize < 2 * size + 2**16:
        raise OSError(errno.ENOSPC, f"no space left on the device for {size} bytes of notes under {objects}") from e


def _full_id(repo: pygit2.Repository, commit: str) -> str:
    """The id a notes tree is keyed by: the full hex id (an abbreviated one is resolved)."""
    return commit.lower() if len(commit) in (40, 64) else str(repo[commit].id)


def _remote_name(remote: str) -> str:
    """A remote's name or URL, never an option: `git perf pull -- --upload-pack=CMD` would have git run
    CMD (the remote is passed after `--` as well)."""
    if not remote or remote.startswith("-"):
        raise InputError(f"{remote!r} is not a remote (a name such as origin, or a URL)")
    return remote
