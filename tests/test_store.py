import subprocess
import sys
from pathlib import Path

import pygit2
from conftest import git, run_cli, read_cli
from helpers import make_profile

from gitperf.core import codec
from gitperf.git.repo import open_repo
from gitperf.store.notes import NOTES_REF, NotesStore


def head(repo_dir: Path) -> str:
    return git(repo_dir, "rev-parse", "HEAD")


def test_add_and_read_back(empty_repo):
    store = NotesStore(open_repo(empty_repo))
    c = head(empty_repo)
    p1, p2 = make_profile(c, "a"), make_profile(c, "b")
    i1, i2 = store.add(c, p1), store.add(c, p2)
    assert i1 != i2
    good, bad = store.read(c)
    assert [g.profile for g in good] == [p1, p2]
    assert not bad
    assert store.add(c, p1) == i1  # same content: same id, not stored twice
    assert len(store.read(c)[0]) == 2
    assert store.commits() == [c]
    # git itself sees one line per profile
    assert len(git(empty_repo, "notes", f"--ref={NOTES_REF}", "show", c).splitlines()) == 2


def test_corrupt_line_is_reported_skipped_and_survives_later_writes(empty_repo):
    c = head(empty_repo)
    good_line = codec.encode(make_profile(c, "a"))
    git(empty_repo, "notes", f"--ref={NOTES_REF}", "add", "-m", good_line + "\nthis is not a profile", c)
    store = NotesStore(open_repo(empty_repo))
    profiles, bad = store.read(c)
    assert len(profiles) == 1
    assert len(bad) == 1
    assert bad[0].line_no == 2
    assert "unknown encoding" in bad[0].reason
    store.add(c, make_profile(c, "b"))
    text = git(empty_repo, "notes", f"--ref={NOTES_REF}", "show", c)
    assert "this is not a profile" in text.splitlines()
    r = read_cli(empty_repo, "show", c)
    assert r.returncode == 0
    assert "line 2" in r.stderr
    assert "skipped" in r.stderr


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from gitperf.store.notes import NotesStore
from gitperf.git.repo import open_repo
from helpers import make_profile
store = NotesStore(open_repo({repo!r}))
for k in range(3):
    store.add({commit!r}, make_profile({commit!r}, "w%s-%d" % (sys.argv[1], k)))
"""


def test_eight_concurrent_writers_lose_nothing(empty_repo):
    c = head(empty_repo)
    script = WRITER.format(tests=str(Path(__file__).parent), repo=str(empty_repo), commit=c)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)]) for i in range(8)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    good, bad = NotesStore(open_repo(empty_repo)).read(c)
    assert not bad
    assert sorted(g.profile.header.workload for g in good) == sorted(f"w{i}-{k}" for i in range(8) for k in range(3))


def _clone(remote: Path, dest: Path) -> Path:
    git(dest.parent, "clone", "-q", str(remote), dest.name)
    return dest


def test_two_clones_push_and_pull_in_either_order_keep_both(empty_repo, tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(empty_repo), str(remote))
    c = head(empty_repo)
    for order in ("ab", "ba"):
        a, b = _clone(remote, tmp_path / f"a-{order}"), _clone(remote, tmp_path / f"b-{order}")
        pa, pb = make_profile(c, f"from-a-{order}"), make_profile(c, f"from-b-{order}")
        NotesStore(open_repo(a)).add(c, pa)
        NotesStore(open_repo(b)).add(c, pb)
        first, second = (a, b) if order == "ab" else (b, a)
        assert run_cli(first, "push").returncode == 0
        r = run_cli(second, "push")  # rejected as non-fast-forward inside: must merge and retry
        assert r.returncode == 0, r.stderr
        assert run_cli(first, "pull").returncode == 0
        for clone in (a, b):
            names = {g.profile.header.workload for g in NotesStore(open_repo(clone)).read(c)[0]}
            assert {f"from-a-{order}", f"from-b-{order}"} <= names, (order, clone, names)
    # the remote holds all four, and its notes ref was never force-pushed (history is linear merges)
    r = pygit2.Repository(str(remote))
    lines = r.lookup_note(c, NOTES_REF).message.splitlines()
    assert len(lines) == 4


def test_pull_from_remote_without_notes_is_fine(empty_repo, tmp_path):
    remote = tmp_path / "r.git"
    git(tmp_path, "clone", "-q", "--bare", str(empty_repo), str(remote))
    a = _clone(remote, tmp_path / "a")
    r = run_cli(a, "pull")
    assert r.returncode == 0, r.stderr


def test_a_remote_whose_notes_ref_is_not_a_commit_is_refused_and_nothing_breaks(empty_repo, tmp_path):
    """Issue #37: a remote's refs/notes/perf pointing at a blob became the clone's own notes ref, and
    every read command failed with a pygit2 error until `git update-ref -d` by hand."""
    remote = tmp_path / "r.git"
    git(tmp_path, "clone", "-q", "--bare", str(empty_repo), str(remote))
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input="not notes\n", cwd=remote,
                          capture_output=True, text=True, check=True).stdout.strip()
    git(remote, "update-ref", NOTES_REF, blob)
    a = _clone(remote, tmp_path / "a")
    r = run_cli(a, "pull")
    assert r.returncode == 2, r.stderr
    assert "is a blob, not a commit of notes" in r.stderr, r.stderr
    assert read_cli(a, "log").returncode == 0
    assert read_cli(a, "check", "HEAD").returncode == 3


PAIR_WRITER = """
import sys
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore
store = NotesStore(open_repo(sys.argv[1]))
a, b = sys.argv[2], sys.argv[3]
print("ready", flush=True)
for k in range(100000):
    store.add_lines({a: [f"pair {k} base"], b: [f"pair {k} target"]})
"""


def test_a_writer_killed_at_any_moment_leaves_both_commits_lines_or_neither(empty_repo):
    """A paired check stores its base and target profiles together (`add_lines`): SIGKILL between the
    two commits' notes once left the base's half of a check (issue #28: 47 of 120 lines, all on the
    base).  Ten writers killed at moments spread over their writing: every pair is whole, and the
    staging ref a killed writer leaves is swept by the next write."""
    import signal
    import time
    git(empty_repo, "commit", "-q", "--allow-empty", "-m", "second")
    a, b = git(empty_repo, "rev-parse", "HEAD~1"), head(empty_repo)
    for i in range(10):
        p = subprocess.Popen([sys.executable, "-c", PAIR_WRITER, str(empty_repo), a, b], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.037 * i)
        p.send_signal(signal.SIGKILL)
        p.wait()
    store = NotesStore(open_repo(empty_repo))
    base = {ln.split()[1] for ln in store.note_text(a).splitlines()}
    target = {ln.split()[1] for ln in store.note_text(b).splitlines()}
    assert base, sorted(base ^ target)[:5]
    assert base == target, sorted(base ^ target)[:5]
    store.add_lines({a: ["after base"], b: ["after target"]})
    assert not [r for r in open_repo(empty_repo).references if "staging" in r]


def _commits(repo_dir: Path, n: int) -> list[str]:
    """`n` commits on top of HEAD, made directly (a notes tree only needs their ids)."""
    repo = open_repo(repo_dir)
    sig, tree, parent, made = pygit2.Signature("T", "t@example.com"), repo.head.peel().tree.id, repo.head.target, []
    for i in range(n):
        parent = repo.create_commit(None, sig, sig, f"c{i}", tree, [parent])
        made.append(str(parent))
    repo.references.create("refs/heads/main", parent, force=True)
    return made


def _notes_tree(repo_dir: Path) -> pygit2.Tree:
    return open_repo(repo_dir).references[NOTES_REF].peel(pygit2.Commit).tree


def test_notes_fan_out_as_git_does_so_a_write_copies_small_trees(empty_repo):
    """300 notes written one at a time: the top level of the notes tree is two-digit subtrees (at most
    256 entries) as git's own `git notes add` lays it out, and git reads every note back."""
    commits = _commits(empty_repo, 300)
    store = NotesStore(open_repo(empty_repo))
    for c in commits:
        store.add_line(c, f"line of {c}")
    top = _notes_tree(empty_repo)
    assert len(top) <= 256
    assert all(e.filemode == pygit2.GIT_FILEMODE_TREE and len(e.name) == 2 for e in top)
    assert max(len(open_repo(empty_repo)[e.id]) for e in top) < 20  # 300 notes over ~190 subtrees
    listed = git(empty_repo, "notes", f"--ref={NOTES_REF}", "list").splitlines()
    assert sorted(ln.split()[1] for ln in listed) == sorted(commits)
    assert git(empty_repo, "notes", f"--ref={NOTES_REF}", "show", commits[123]) == f"line of {commits[123]}"
    store.add_line(commits[123], "second line")  # a note already fanned out grows in place
    assert store.note_text(commits[123]).splitlines() == [f"line of {commits[123]}", "second line"]
    assert len(store.commits()) == 300


def test_a_flat_notes_tree_of_an_older_version_is_read_then_fanned_out_without_losing_a_line(empty_repo):
    """Older versions (libgit2's create_note) wrote every note at the top level.  Such a history reads
    as before, and the first write fans it out with every line of every note kept."""
    commits = _commits(empty_repo, 300)
    repo = open_repo(empty_repo)
    sig = pygit2.Signature("T", "t@example.com")
    for c in commits:
        repo.create_note(f"old {c}\n", sig, sig, c, NOTES_REF, True)
    assert len(_notes_tree(empty_repo)) == 300  # flat
    store = NotesStore(open_repo(empty_repo))
    assert store.note_text(commits[7]) == f"old {commits[7]}\n"
    assert len(store.commits()) == 300
    store.add_line(commits[7], "new")
    top = _notes_tree(empty_repo)
    assert all(e.filemode == pygit2.GIT_FILEMODE_TREE for e in top)
    for c in commits:
        assert store.note_text(c).splitlines() == [f"old {c}"] + (["new"] if c == commits[7] else [])
    subprocess.run(["git", "fsck", "--no-progress"], cwd=empty_repo, check=True, capture_output=True)
