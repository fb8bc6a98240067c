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

import fcntl
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
from gitperf.git.repo import ancestors, perf_dir

NOTES_REF = "refs/notes/perf"
SIDE_REF = "refs/notes/perf-remote"  # where `pull` fetches the remote's notes before merging
STAGING = "-staging-"  # + the writer's pid: refs/notes/perf-staging-PID, where `add_lines` writes first
ACCEPT_PREFIX = "gitperf-accept "  # a note line recording that this commit's performance change was intended
CHECK_PREFIX = "gitperf-check "  # a note line holding a paired check's result (checks.record)
RECORDS = (ACCEPT_PREFIX, CHECK_PREFIX)  # lines that are records, not profiles


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
    def _lock(self, timeout: float = 60.0) -> Iterator[None]:
        path = perf_dir(self.repo) / "notes.lock"
        with open(path, "a") as fh:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StoreConflict(f"another git perf holds {path} for over {timeout:.0f}s") from None
                    time.sleep(0.01)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def add(self, commit: str, profile: Profile) -> str:
        """Append one profile to the commit's note; returns its id.  Adding the same line twice is a
        no-op (identity is the content hash)."""
        line = codec.encode(profile)
        return self.add_line(commit, line)

    def add_line(self, commit: str, line: str) -> str:
        return self.add_lines({commit: [line]})[commit][0]

    def add_lines(self, lines: dict[str, list[str]]) -> dict[str, list[str]]:
        """Append lines to several commits' notes, all or nothing; returns each line's id.  A line
        already in a note is not added twice (identity is the content hash).  Under the lock, the
        notes are written on a staging ref that starts at the notes' tip, and the notes ref is then
        moved to it in one update: a reader (or a SIGKILL between two commits' notes) sees every
        line or none -- a paired check's base and target profiles together, never half a set."""
        if any("\n" in line for ls in lines.values() for line in ls):
            raise ValueError("a profile line cannot contain a newline")
        with self._lock():
            # Re-read inside the lock: another process may have written since we last looked.
            self.repo = pygit2.Repository(self.repo.path)
            sig, staging = _signature(self.repo), f"{self.ref}{STAGING}{os.getpid()}"
            self._sweep_staging()  # a writer killed here before: its staging ref is all that is left
            tip = self._tip()
            if tip is not None:
                self.repo.references.create(staging, tip, force=True)
            try:
                for commit, new in lines.items():
                    text = self.note_text(commit)
                    existing = set(text.splitlines())
                    fresh = [ln for ln in dict.fromkeys(new) if ln not in existing]
                    if fresh:
                        text = text if text.endswith("\n") or not text else text + "\n"
                        self.repo.create_note(text + "".join(ln + "\n" for ln in fresh), sig, sig, commit, staging, True)
                if staging in self.repo.references and self.repo.references[staging].target != tip:
                    self.repo.references.create(self.ref, self.repo.references[staging].target, force=True)
            finally:
                self._sweep_staging()
        return {c: [content_id(ln) for ln in ls] for c, ls in lines.items()}

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
        r = self._git("fetch", "-q", "--", remote, f"+{self.ref}:{SIDE_REF}", check=False)
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
            r = self._git("push", "-q", "--no-verify", "--", remote, f"{self.ref}:{self.ref}", check=False)
            if r.returncode == 0:
                return
            if "rejected" not in r.stderr and "fetch first" not in r.stderr and "non-fast-forward" not in r.stderr:
                raise InputError(f"git push {remote} failed: {r.stderr.strip()}")
            self.pull(remote)
        raise StoreConflict(f"{remote}'s {self.ref} kept moving during {attempts} attempts; run git perf push again")


def _remote_name(remote: str) -> str:
    """A remote's name or URL, never an option: `git perf pull -- --upload-pack=CMD` would have git run
    CMD (the remote is passed after `--` as well)."""
    if not remote or remote.startswith("-"):
        raise InputError(f"{remote!r} is not a remote (a name such as origin, or a URL)")
    return remote
