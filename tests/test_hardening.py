"""Issue #18's reproductions, each now a clear error or a harmless skip: hostile note lines, a
corrupt index, values that pass a type check and fail later, a mistyped revision, unwritable
outputs, a descriptor closed twice.  (SIGKILL leftovers and workloads that never run the binary
need eBPF: test_hardening_collect.py.)"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.error
import urllib.request
from pathlib import Path

import msgspec
import pytest
from conftest import git, history, init_repo, run_cli, read_cli
from interrupts import running
from test_codec import mutations

from gitperf.core.config import CheckConfig
from gitperf.git.repo import open_repo
from gitperf.store.notes import NOTES_REF, NotesStore
from gitperf.views.index import Index, index_path

# the issue's reproduction: the right encoding, a function list whose item is not an object
ISSUE_LINE = ('{"v":1,"h":{"tool_version":"x","commit":"c","binary":"b","build_id":"","command":[],"workload":"w",'
              '"engine":"bcc","machine":"m","kernel":"k","started":0,"finished":0},"m":{},"p":{},"f":[1]}')


def _note(root) -> str:
    return git(root, "notes", f"--ref={NOTES_REF}", "show", "HEAD")


def test_hostile_note_lines_are_reported_skipped_and_left_as_they_are(empty_repo):
    commits = history(empty_repo, 5)
    git(empty_repo, "notes", "--ref=perf", "append", "-m", ISSUE_LINE, "HEAD")
    store = NotesStore(open_repo(empty_repo))
    for line in mutations(7, 300):
        store.add_line(commits[-1], line)
    before = _note(empty_repo)
    for args in (("log",), ("show", "HEAD"), ("check", "HEAD", "--json"), ("diff", "HEAD~1", "HEAD"),
                 ("report", "HEAD", "--format", "markdown"), ("log", "--json")):
        r = run_cli(empty_repo, *args)
        assert "Traceback" not in r.stderr, (args, r.returncode, r.stderr[-2000:])
        assert r.returncode in (0, 1), (args, r.returncode, r.stderr[-2000:])
    r = read_cli(empty_repo, "show", "HEAD")
    assert "f[0]': expected an object, got 1" in r.stderr, r.stderr[-2000:]
    assert "skipped, left as is" in r.stderr, r.stderr[-2000:]
    out = json.loads(read_cli(empty_repo, "check", "HEAD", "--json").stdout)
    assert out["base"] == commits[-2]  # the readable profiles of HEAD were still checked
    assert any("line" in w and "skipped" in w for w in out["warnings"])
    stats = Index(open_repo(empty_repo), CheckConfig()).update()
    assert stats.notes == 5
    assert _note(empty_repo) == before  # never rewritten


def test_a_corrupt_index_is_rebuilt_from_the_notes(empty_repo):
    history(empty_repo, 3)
    repo = open_repo(empty_repo)
    first = Index(repo, CheckConfig())
    first.update()
    first.db.close()
    path = index_path(repo)
    for leftover in path.parent.glob(path.name + "-*"):
        leftover.unlink()
    path.write_bytes(b"this is not a database" * 100)
    said = []
    stats = Index(repo, CheckConfig()).update(progress=said.append)
    assert stats.rebuilt
    assert stats.notes == 3
    assert "unreadable" in said[0]
    assert sum(1 for c in Index(repo, CheckConfig()).commits() if c["profiles"]) == 3


@pytest.mark.parametrize("section, line, key", [
    ("workload", "timeout = nan", "workload[0].timeout: expected a number at least 0.01, got nan"),
    ("workload", "timeout = inf", "workload[0].timeout: expected a number at most 86400, got inf"),
    ("collect", "period_ms = nan", "collect.period_ms: expected a number above 0, got nan"),
    ("collect", "stack_hz = -5", "collect.stack_hz: expected an integer at least 0, got -5"),
    ("check", "confidence = 7", "check.confidence: expected a number at most 0.9999, got 7"),
    ("check", "min_relative = -3", "check.min_relative: expected a number at least 0, got -3"),
    # large finite numbers that passed and failed later (an OverflowError in the timer thread, a BPF
    # compile error reported as "cannot collect", detection silently off)
    ("workload", "timeout = 9223372036854775807", "workload[0].timeout: expected a number at most 86400"),
    ("collect", "period_ms = 1e308", "collect.period_ms: expected a number at most 3600000"),
    ("collect", "stack_hz = 9223372036854775807", "collect.stack_hz: expected an integer at most 100000"),
    ("check", "min_relative = 1e308", "check.min_relative: expected a number at most 10"),
])
def test_values_that_pass_the_type_check_and_would_fail_later_exit_2(empty_repo, section, line, key):
    history(empty_repo, 2)
    wl = '[[workload]]\nname = "w"\ncommand = "./app"\n'
    text = wl + line + "\n" if section == "workload" else wl + f"[{section}]\n{line}\n"
    (empty_repo / ".gitperf.toml").write_text(text)
    r = read_cli(empty_repo, "check", "HEAD")
    assert r.returncode == 2, r.stderr
    assert key in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args, words", [
    (("collect", "--binary", "/bin/true", "--no-build", "--timeout", "nan", "--", "/bin/true"), "finite number"),
    (("collect", "--binary", "/bin/true", "--no-build", "--timeout", "inf", "--", "/bin/true"), "finite number"),
    (("collect", "--binary", "/bin/true", "--no-build", "--timeout", "-1", "--", "/bin/true"), "seconds > 0"),
    (("collect", "--binary", "/bin/true", "--no-build", "--timeout", "1e10", "--", "/bin/true"), "at most 86400"),
    (("collect", "--optimization-arg", "keep_top=abc"), "keep_top=abc: expected a whole number from 0 to 10000"),
    (("collect", "--optimization-arg", "keep_top=-5"), "keep_top=-5: expected a whole number"),
    (("collect", "--optimization-arg", "call_limit=-1"), "call_limit=-1: expected a whole number from 1"),
    (("collect", "--optimization-arg", "iqr_ratio=nan"), "iqr_ratio=nan: expected a number from 0 to 1000"),
    (("collect", "--optimization-arg", "criterion=loose"), "expected one of soft, semi-strict, strict"),
    (("collect", "nosuchrev", "--binary", "/bin/true", "--no-build", "--", "/bin/true"),
     "unknown revision 'nosuchrev'"),
    (("collect", "--binary", "/bin/true", "--no-build", "--workload", "a|b", "--", "/bin/true"), "without '|'"),
    (("collect", "--binary", "/bin/true", "--no-build", "--workload", "a\nb", "--", "/bin/true"), "control characters"),
    (("collect", "--range", "HEAD..HEAD~2"), "did you mean HEAD~2..HEAD?"),
    (("check", "HEAD", "--base", "nosuch"), "unknown revision 'nosuch'"),
    (("log", "-n", "-5"), "-5 is not in the range x>=1"),
    (("report", "HEAD", "-o", "/proc/x"), "/proc/x"),
])
def test_bad_command_line_values_exit_2_with_what_is_wrong(empty_repo, args, words):
    history(empty_repo, 3)
    r = run_cli(empty_repo, *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert words in r.stderr, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert not NotesStore(open_repo(empty_repo)).read(git(empty_repo, "rev-parse", "HEAD"))[1]


def test_a_link_closed_while_interrupted_is_not_closed_twice(monkeypatch):
    """Ctrl-C landing inside close(): the second close (from __del__ or the clean-up) must not close
    the number again -- by then it may name another file."""
    from gitperf.engine import bpflink
    link = object.__new__(bpflink.UprobeMultiLink)
    r, w = os.pipe()
    os.close(w)
    link.fd = r
    closed = []

    def interrupted_close(fd):
        closed.append(fd)
        os.close(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(bpflink, "os", types.SimpleNamespace(close=interrupted_close))
    with pytest.raises(KeyboardInterrupt):
        link.close()
    monkeypatch.setattr(bpflink, "os", types.SimpleNamespace(close=closed.append))
    link.close()
    assert closed == [r]


READER = "gitperf-reader"


def _as_reader(cwd, *args, timeout=120) -> subprocess.CompletedProcess:
    """`git perf ARGS` run by another user, with only the project's venv on PATH besides the system's."""
    env = {"HOME": f"/home/{READER}", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    return subprocess.run(["runuser", "-u", READER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                           "git", "perf", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def shared_repo():
    """A repository of another user (mode 755 all the way down) with profiles, whose .git/perf
    belongs to root, as after `sudo git perf collect`."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root (to create a second user) and runuser")
    subprocess.run(["useradd", "-m", READER], capture_output=True)  # exit 9 when it exists: fine
    script = Path(sys.executable).parent / "git-perf"  # a file in the checkout (the interpreter is what is tested)
    if subprocess.run(["runuser", "-u", READER, "--", "test", "-r", str(script)]).returncode != 0:
        closed = next((str(d) for d in script.parents if not os.stat(d).st_mode & 0o001), "?")
        pytest.skip(f"this checkout lies under {closed}, which other users cannot enter: install it elsewhere "
                    "to test (what git perf controls, the venv's interpreter, is checked by setup.sh)")
    base = Path(tempfile.mkdtemp(prefix="gitperf-shared-"))
    base.chmod(0o755)
    repo = init_repo(base / "repo")
    history(repo, 4, slow_at=3)
    subprocess.run(["chown", "-R", READER, str(repo)], check=True)
    subprocess.run(["chown", "-R", "root", str(repo / ".git" / "perf")], check=True)  # root's, mode 755
    yield repo
    shutil.rmtree(base, ignore_errors=True)


def test_another_user_can_run_help_show_check_and_serve(shared_repo):
    assert _as_reader(shared_repo, "-h").returncode == 0
    r = _as_reader(shared_repo, "show", "HEAD")
    assert r.returncode == 0, r.stderr
    assert "parse" in r.stdout, r.stderr
    r = _as_reader(shared_repo, "check", "HEAD", "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["changes"][0]["function"] == "parse", r.stderr
    port = _free_port()
    env = ["HOME=/home/" + READER, f"PATH={Path(sys.executable).parent}:/usr/bin:/bin"]
    proc = subprocess.Popen(["runuser", "-u", READER, "--", "env", "-i", *env, "git", "perf", "serve", "--port",
                             str(port)], cwd=shared_repo, stderr=subprocess.PIPE, text=True)
    try:
        body = _get_when_up(f"http://127.0.0.1:{port}/api/commits", proc)
        assert len([c for c in json.loads(body) if c["profiles"]]) == 4
    finally:
        proc.terminate()
        proc.wait(10)
    assert list((Path(f"/home/{READER}") / ".cache" / "git-perf").glob("index-*.db"))  # .git/perf is root's


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_when_up(url: str, proc: subprocess.Popen) -> bytes:
    for _ in range(600):
        try:
            return urllib.request.urlopen(url, timeout=2).read()
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None:
                raise AssertionError(f"git perf serve exited: {proc.stderr.read()}") from None
            time.sleep(0.1)
    raise AssertionError("git perf serve did not answer within 60 s")


def _orphan_note(root: Path) -> str:
    """A note on a commit the repository no longer holds: collected, amended, gc'd."""
    (root / "a.txt").write_text("orphan\n")
    git(root, "commit", "-qam", "to be amended")
    old = git(root, "rev-parse", "HEAD")
    line = git(root, "notes", "--ref=perf", "show", "HEAD~1").splitlines()[0]
    git(root, "notes", "--ref=perf", "add", "-m", line, old)
    git(root, "commit", "-q", "--amend", "-m", "amended")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    return old


def test_hostile_pulled_notes_leave_every_read_command_and_page_up(empty_repo, tmp_path):
    """Issue #28's reproductions: a 100,000-deep JSON line, a name that is a lone surrogate, accept
    records with a non-numeric time, a note on a blob and on a commit gone from the repository."""
    commits = history(empty_repo, 3)
    deep = '{"v":1,"x":' + "[" * 100_000 + "]" * 100_000 + "}"
    surrogate = ISSUE_LINE.replace('"workload":"w"', '"workload":"\\ud800x"').replace('"f":[1]', '"f":[]')
    lines = [deep, surrogate, 'gitperf-accept {"time":"abc"}', 'gitperf-accept {"time":5, "reason": "\\ud800"}',
             "gitperf-accept " + "[" * 100_000]
    (tmp_path / "lines").write_text("\n".join(lines) + "\n")
    git(empty_repo, "notes", "--ref=perf", "append", "-F", str(tmp_path / "lines"), "HEAD")
    blob = git(empty_repo, "hash-object", "-w", "a.txt")
    git(empty_repo, "notes", "--ref=perf", "add", "-m", "x", blob)
    orphan = _orphan_note(empty_repo)
    for args in (("log",), ("show", commits[-1]), ("check", commits[-1], "--json"), ("diff", commits[0], commits[-1]),
                 ("report", commits[-1]), ("report", commits[-1], "--format", "html", "-o", str(tmp_path / "site"))):
        r = run_cli(empty_repo, *args)
        assert "Traceback" not in r.stderr, (args, r.returncode, r.stderr[-2000:])
        assert r.returncode in (0, 1, 3), (args, r.returncode, r.stderr[-2000:])
    r = read_cli(empty_repo, "show", commits[-1])
    assert "nested too deeply" in r.stderr, r.stderr[-2000:]
    assert "lone surrogate" in r.stderr, r.stderr[-2000:]
    assert json.loads(read_cli(empty_repo, "check", commits[-1], "--json").stdout)["result"] != "accepted"
    said = []
    stats = Index(open_repo(empty_repo), CheckConfig()).update(rebuild=True, progress=said.append)
    assert stats.notes == 5, said
    assert any("2 note(s) on objects that are not commits" in s for s in said), said
    from gitperf.web import create_app
    client = create_app(empty_repo).test_client()
    for url in ("/", f"/commit/{commits[-1]}", f"/commit/{orphan}", "/function/parse", "/regressions", "/api/commits"):
        assert client.get(url).status_code in (200, 404), url
    assert (tmp_path / "site" / "index.html").exists()


def test_names_from_pulled_notes_cannot_drive_the_terminal(empty_repo):
    """A function or workload name holding an OSC title sequence, a bell and a bidi override reaches
    the terminal as escapes (`\\x1b`), in every text command and in the progress and error lines."""
    import numpy as np

    from conftest import profile as make
    commits = history(empty_repo, 2)
    evil = "evil\x1b]0;pwned\x07\u202e"
    p = make(commits[-1], np.random.default_rng(3), {"parse": 2.0})
    from dataclasses import replace as dc_replace
    p = dc_replace(p, functions=tuple(msgspec.structs.replace(f, name=evil) if f.name == "parse" else f for f in p.functions))
    NotesStore(open_repo(empty_repo)).add(commits[-1], p)
    for args in (("show", "HEAD", "--top", "0"), ("check", "HEAD"), ("diff", "HEAD~1", "HEAD", "--top", "0"),
                 ("report", "HEAD")):
        r = run_cli(empty_repo, *args)
        out = r.stdout + r.stderr
        assert "evil" in out, (args, out[-500:])
        assert "\x1b" not in out, (args, out[-500:])
        assert "\x07" not in out, (args, out[-500:])
        assert "\u202e" not in out, (args, out[-500:])
        assert "evil\\x1b]0;pwned\\x07\\u202e" in out, args


SIGNAL_AT_FORK = """
import os, signal, sys, time
from gitperf.engine import launcher, workload
# the issue's race, made certain: SIGINT arrives while the workload is started -- as the launcher's
# command line is made (engine.launcher), or, where there is no launcher, while Popen forks (in the
# parent's at-fork handler)
if sys.argv[1] == "launcher":
    made = launcher.wrapped
    launcher.wrapped = lambda *a: os.kill(os.getpid(), signal.SIGINT) or made(*a)
else:
    launcher.launcher = lambda: None
    os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
t0 = time.monotonic()
try:
    workload.run(workload.Command(["sleep", "30"], "."), 60, workload.Scope(None, 0))
except KeyboardInterrupt:
    print("interrupted after %.1f s" % (time.monotonic() - t0))
    sys.exit(130)
print("ran to the end: the signal was lost")
"""


@pytest.mark.parametrize("start", ["launcher", "fork"])
def test_a_signal_while_the_workload_starts_is_not_lost(tmp_path, start):
    """Issue #28: SIGINT/SIGTERM landing while the workload was being forked was swallowed by the
    interpreter's at-fork handlers ("Exception ignored in: <function _releaseLock>"), and the run went on
    and was stored.  Held back while the workload starts, it interrupts the run, which kills the
    workload: started by the launcher (vfork) or, without one, by a fork."""
    r = subprocess.run([sys.executable, "-c", SIGNAL_AT_FORK, start], capture_output=True, text=True, timeout=90,
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert r.returncode == 130, (r.stdout, r.stderr[-1000:])
    assert "interrupted after" in r.stdout, (r.stdout, r.stderr[-1000:])
    assert float(r.stdout.split()[2]) < 10
    assert "Exception ignored" not in r.stderr


def test_a_workload_name_with_control_characters_is_refused(empty_repo):
    history(empty_repo, 2)
    (empty_repo / ".gitperf.toml").write_text('[[workload]]\nname = "a\\u001b]0;x\\u0007"\ncommand = "./app"\n')
    r = read_cli(empty_repo, "check", "HEAD")
    assert r.returncode == 2, r.stderr
    assert "workload[0].name: expected a non-empty name without '|' or control" in r.stderr, r.stderr


def test_a_zombie_owner_counts_as_dead_for_the_sweep():
    """A collector killed while its parent has not reaped it yet is a zombie: its worktrees and
    cgroups are swept at once, not ~5 s later when the parent gets round to it."""
    from gitperf.core.proc import alive
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 10
    while time.time() < deadline and not Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
        time.sleep(0.01)
    assert not alive(p.pid)  # exited, not reaped: a zombie
    p.wait()
    assert not alive(p.pid)
    assert alive(os.getpid())


def test_scratch_directories_of_a_process_that_is_gone_are_swept_and_no_others(tmp_path, monkeypatch):
    """What a SIGKILLed git perf left in /tmp (its callgrind output, a padding probe: root's under sudo,
    which the user cannot remove from the sticky /tmp) goes with the next collection's sweep; a live
    process's directory, and one that is not git perf's, stay."""
    from gitperf.core import scratch
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"gitperf-callgrind-{gone.pid}-x1"
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "cg.1").write_text("events: Ir\n")
    mine = scratch.make("pad")
    others = [tmp_path / f"gitperf-notes-{gone.pid}-x", tmp_path / f"other-{gone.pid}-x"]
    for d in others:
        d.mkdir()
    assert scratch.sweep() == [str(dead)]
    assert not dead.exists(), "the directory of a process that is gone was left"
    assert mine.exists(), "a directory that is not a dead process's went"
    assert all(d.exists() for d in others), "a directory that is not a dead process's went"


BUILD_THEN_SIGTERM = """
import signal, sys
from pathlib import Path
from gitperf.core.config import BuildConfig
from gitperf.git.worktree import run_build
signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))  # as the CLI does
root = Path(sys.argv[1])
try:
    run_build(BuildConfig(command="(sleep 300.25; echo never) & sleep 300.25"), root, "0" * 40, root)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_a_build_stops_with_git_perf(tmp_path):
    """SIGTERM to git perf alone (not its process group, as CI's cancel may send it) stops the whole
    build: the shell's children too, which killing the shell alone left compiling."""
    import signal
    p = subprocess.Popen([sys.executable, "-c", BUILD_THEN_SIGTERM, str(tmp_path)],
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})

    def sleeps() -> set[int]:
        """This build's two `sleep 300.25`s (descendants of `p`: not a process of another test run)."""
        return {pid for pid in running("300.25") if _descends(pid, p.pid)}
    deadline = time.time() + 20
    while time.time() < deadline and len(sleeps()) < 2:
        time.sleep(0.05)
    started = sleeps()
    assert len(started) == 2, started
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 130
    deadline = time.time() + 10  # killed at once; reaped by init a moment later
    while time.time() < deadline and any(_alive(pid) for pid in started):
        time.sleep(0.05)
    left = [pid for pid in started if _alive(pid)]
    for pid in left:  # (do not leave them running if the assertion fails)
        os.kill(pid, signal.SIGKILL)
    assert left == []


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def test_a_corrupt_index_is_rebuilt_by_the_first_page_request(empty_repo):
    from gitperf.web import create_app
    history(empty_repo, 3)
    repo = open_repo(empty_repo)
    Index(repo, CheckConfig()).update()
    path = index_path(repo)
    for leftover in path.parent.glob(path.name + "-*"):
        leftover.unlink()
    path.write_bytes(b"this is not a database" * 100)
    client = create_app(empty_repo).test_client()
    assert client.get("/").status_code == 200
    assert sum(1 for c in client.get("/api/commits").get_json() if c["profiles"]) == 3


def test_a_note_is_read_up_to_a_budget_not_line_by_line(empty_repo, monkeypatch):
    """Each line is bounded (64 MB inflated), a note was not: ten lines just under the bound made `show
    --json` take 2.7 GB.  A note's profiles are read until they hold MAX_NOTE_JSON; the lines after are
    reported unread, and a line that would cross it is refused at the budget, not inflated whole."""
    import base64
    import zlib

    from gitperf.core import codec
    commits = history(empty_repo, 2, runs=2)
    store = NotesStore(open_repo(empty_repo))
    good, _ = store.read(commits[-1])
    size = max(len(codec.inflated(ln)) for ln in store.note_text(commits[-1]).splitlines() if ln.strip())
    monkeypatch.setattr(codec, "MAX_NOTE_JSON", 2 * size + size // 2)  # two profiles and a half
    padded = codec.PREFIX + base64.b64encode(zlib.compress(b"{" + b" " * (4 * size) + b"}")).decode()
    store.add_line(commits[-1], padded)  # compresses to a few hundred bytes, inflates past the rest
    store.add(commits[-1], store.read(commits[0])[0][0].profile)  # a small one after it: no room left
    read, bad = NotesStore(open_repo(empty_repo)).read(commits[-1])
    assert len(read) == 2, bad
    assert [b.line_no for b in bad] == [3, 4], bad
    assert all("it would hold more than" in b.reason for b in bad), bad


def test_function_names_that_do_not_survive_a_url_path_still_have_pages_and_export(empty_repo, tmp_path):
    """A pulled profile naming functions `/etc/passwd`, `""`, `x\\ny` and `..`: the static export
    stopped (HTTP 308/404 while rendering).  Such a name travels as `~` + base64url; its page answers
    and the export writes it."""
    from dataclasses import replace as dc_replace

    from gitperf.web import create_app
    from gitperf.web.links import function_file
    commits = history(empty_repo, 2)
    store = NotesStore(open_repo(empty_repo))
    [p, *_], _ = store.read(commits[-1])
    odd = ["/etc/passwd", "", "x\ny", "..", "a/../b", "~tilde"]
    renamed = tuple(msgspec.structs.replace(f, name=odd[i]) if i < len(odd) else f
                    for i, f in enumerate(x for x in p.profile.functions if x.name != "main"))
    main = [f for f in p.profile.functions if f.name == "main"]
    store.add(commits[-1], dc_replace(p.profile, functions=tuple(main) + renamed))
    client = create_app(empty_repo).test_client()
    from flask import url_for
    with client.application.test_request_context():
        urls = {n: url_for("pages.function", name=n) for n in odd}
    for n, url in urls.items():
        r = client.get(url)
        assert r.status_code == 200, (n, url, r.status_code)
    r = read_cli(empty_repo, "report", commits[-1], "--format", "html", "-o", str(tmp_path / "site"))
    assert r.returncode in (0, 1), r.stderr[-2000:]
    written = {n for n in odd if (tmp_path / "site" / "function" / f"{function_file(n)}.html").exists()}
    assert written == set(odd), set(odd) - written


def test_a_range_killed_with_sigkill_takes_its_workers_builds_along(empty_repo, tmp_path):
    """`collect --range` runs each commit in a worker process; SIGKILL to the range (an OOM killer, a
    CI cancel that does not wait) left the worker building, and collecting, with no one to report to.
    The worker gets SIGTERM when its parent dies, which stops it as Ctrl-C would: its build killed."""
    import signal
    from gitperf.core.proc import alive
    pidfile = tmp_path / "build.pid"
    (empty_repo / ".gitperf.toml").write_text(
        f'[build]\ncommand = "echo $$ > {pidfile}; exec sleep 300"\nbinary = "app"\n\n'
        '[[workload]]\nname = "w"\ncommand = "./app"\n')
    git(empty_repo, "add", "-A")
    git(empty_repo, "commit", "-qm", "configured")
    git(empty_repo, "commit", "-q", "--allow-empty", "-m", "next")
    p = subprocess.Popen([sys.executable, "-m", "gitperf", "collect", "--range", "HEAD~1..HEAD", "-q"],
                         cwd=empty_repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    deadline = time.time() + 60
    while time.time() < deadline and not (pidfile.exists() and pidfile.read_text().strip()):
        time.sleep(0.05)
    build = int(pidfile.read_text())
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 20
    while time.time() < deadline and alive(build):
        time.sleep(0.05)
    if alive(build):  # (do not leave it running if the assertion fails)
        os.kill(build, signal.SIGKILL)
        pytest.fail("the worker's build outlived the range killed with SIGKILL")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a repository to another user")
def test_what_sudo_writes_under_git_is_the_owners_and_what_a_killed_run_left_is_given_back():
    """Issue #59: root's files under .git (a notes write: objects, refs, the lock; a SIGKILLed run's
    leftovers) made the owner's `git gc` fail.  `sudo git perf accept` leaves none, and the next
    command hands back what a killed one left."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="gitperf-owner-"))
    try:
        top.chmod(0o755)
        root = init_repo(top / "p")
        subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(root)], check=True)
        sudo = {"SUDO_UID": str(nobody.pw_uid), "SUDO_GID": str(nobody.pw_gid)}
        assert run_cli(root, "accept", "HEAD", "-m", "intended", env=sudo).returncode == 0
        left = root / ".git" / "perf" / "builds" / "killed"
        left.mkdir(parents=True)  # as a SIGKILLed root run leaves it
        (left / "built.json").write_text("{}")
        assert read_cli(root, "log", env=sudo).returncode == 0
        roots = [str(p) for p in (root / ".git").rglob("*") if p.lstat().st_uid == 0]
        assert roots == [], roots[:10]
        gc = subprocess.run(["git", "gc", "-q"], cwd=root, user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                            capture_output=True, text=True, env={"PATH": os.environ["PATH"], "HOME": str(top)})
        assert gc.returncode == 0, gc.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a repository to another user")
def test_another_users_repository_is_one_line_with_gits_hint_not_a_traceback():
    import pwd
    nobody = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="gitperf-other-"))
    try:
        root = init_repo(top / "p")
        subprocess.run(["chown", "-R", f"{nobody.pw_uid}:{nobody.pw_gid}", str(root)], check=True)
        env = {k: v for k, v in os.environ.items() if k != "SUDO_UID"}
        r = subprocess.run([sys.executable, "-m", "gitperf", "log"], cwd=root, capture_output=True, text=True,
                           env={**env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
        assert "belongs to another user" in r.stderr, r.stderr
        assert "safe.directory" in r.stderr, r.stderr
        r = subprocess.run([sys.executable, "-m", "gitperf", "log"], cwd=root, capture_output=True, text=True,
                           env={**env, "SUDO_UID": str(nobody.pw_uid),
                                "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
        assert r.returncode == 0, r.stderr  # sudo by the owner: trusted, as git trusts it
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_a_full_disk_is_one_line_and_the_notes_stay_as_they_were(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        root = init_repo(mnt / "p")
        run_cli(root, "accept", "HEAD", "-m", "first")
        before = _note(root)
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)  # the rest of the 2 MB
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        r = run_cli(root, "accept", "HEAD", "-m", "second " + "x" * 100_000)
        assert r.returncode == 2, r.stderr[-3000:]
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        assert "no space left" in r.stderr, r.stderr
        assert "intact" in r.stderr, r.stderr
        (mnt / "filler").unlink()
        assert _note(root) == before
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _hostile_shapes(valid: dict) -> list[str]:
    """Note lines of the shapes issue #37 measured, built on a valid profile: a 20,000-frame stack, a
    20,000-point call series, names no URL or terminal takes as they are, times from 1e300 to
    negative, counts beyond 64 bits."""
    import copy
    lines = []

    def shaped(change) -> None:
        d = copy.deepcopy(valid)
        change(d)
        lines.append(json.dumps(d))
    deep = ";".join(f"frame{i}" for i in range(20_000))
    shaped(lambda d: d.__setitem__("s", {deep: 5}))
    f0 = lambda d: d["f"][0]  # noqa: E731
    shaped(lambda d: f0(d).__setitem__("series", [[i, i * 7 % 1000] for i in range(20_000)]))
    for name in ("/etc/passwd", "", "x\ny", "\x1b]0;pwned\x07", "n" * 20_000, "<script>alert(1)</script>"):
        shaped(lambda d, name=name: f0(d).__setitem__("name", name))
    for t in (1e300, -1.0, 1e17, 4e11):
        shaped(lambda d, t=t: d["h"].update(started=t, finished=t))
    shaped(lambda d: f0(d).update(count=10 ** 30, total_ns=10 ** 30))
    lines.append('gitperf-check {"v":1,"pairings":[],"time":1e300,"result":{"commit":"x","result":"degradation"}}')
    return lines


def test_fuzzed_and_hostile_notes_leave_every_read_command_bounded_and_clean(empty_repo, tmp_path):
    """Real note lines mutated (types, sizes, signs) and the hostile shapes issue #37 measured, in the
    notes of one commit: every read command and the static export end with 0-3, no traceback, under a
    1 GB address-space limit and a time limit."""
    import resource

    from gitperf.core import codec
    from test_codec import mutations
    commits = history(empty_repo, 3)
    store = NotesStore(open_repo(empty_repo))
    valid = codec.to_json(store.read(commits[-1])[0][0].profile)
    for line in list(mutations(11, 60)) + _hostile_shapes(valid):
        store.add_line(commits[-1], line)

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    for args in (("log",), ("show", "HEAD"), ("show", "HEAD", "--json"), ("show", "HEAD", "--folded"),
                 ("check", "HEAD", "--json"), ("diff", "HEAD~1", "HEAD"), ("report", "HEAD", "--format", "markdown"),
                 ("report", "HEAD", "--format", "html", "-o", str(tmp_path / "site"))):
        r = subprocess.run([sys.executable, "-m", "gitperf", *args], cwd=empty_repo, capture_output=True, text=True,
                           env=env, preexec_fn=limited, timeout=120)
        assert r.returncode in (0, 1, 2, 3), (args, r.returncode, r.stderr[-3000:])
        assert "Traceback" not in r.stderr, (args, r.returncode, r.stderr[-3000:])
        assert "MemoryError" not in r.stderr, (args, r.returncode, r.stderr[-3000:])


def test_a_commit_dated_beyond_pythons_calendar_has_a_page_and_exports(empty_repo, tmp_path):
    """git accepts a commit dated in the year 11476; its page answered 500 and the export exited 2."""
    history(empty_repo, 2)
    (empty_repo / "a.txt").write_text("far\n")
    env = {**os.environ, "GIT_COMMITTER_DATE": "@300000000000 +0000", "GIT_AUTHOR_DATE": "@300000000000 +0000"}
    subprocess.run(["git", "commit", "-qam", "from the future"], cwd=empty_repo, env=env, check=True)
    far = git(empty_repo, "rev-parse", "HEAD")
    store = NotesStore(open_repo(empty_repo))
    store.add(far, store.read(git(empty_repo, "rev-parse", "HEAD~1"))[0][0].profile)
    from gitperf.web import create_app
    client = create_app(empty_repo).test_client()
    for url in ("/", f"/commit/{far}", "/regressions", "/function/parse"):
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
    assert "out-of-range date" in client.get(f"/commit/{far}").get_data(as_text=True)
    r = read_cli(empty_repo, "report", far, "--format", "html", "-o", str(tmp_path / "site"))
    assert r.returncode in (0, 1, 3), r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


def test_the_programs_a_command_runs_instead_of_the_binary_are_named(tmp_path):
    """What `never_ran` names when a workload never ran the binary: the ELF files in the work tree its
    command names other than the binary (a copy the build made), not scripts, the binary itself or
    programs outside the tree."""
    from gitperf.collect.collection import other_programs
    (tmp_path / "bin").mkdir()
    for name in ("app", "bin/app"):
        shutil.copy("/bin/true", tmp_path / name)
    (tmp_path / "run.sh").write_text("#!/bin/sh\n./app\n")
    (tmp_path / "run.sh").chmod(0o755)
    command = "./bin/app -x && ./run.sh && ./app && /bin/true && ./missing 'unbalanced"
    assert other_programs(command, tmp_path, tmp_path / "app") == ["bin/app"]
    assert other_programs("./app", tmp_path, tmp_path / "app") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_process_run_as_the_owner_still_dies_with_git_perf():
    """`Owner.become` (a build or workload run as the repository's owner when git perf runs as root)
    keeps the parent-death signal asked for before it: the kernel clears it when the uid changes, and
    the owner's workload outlived a SIGKILLed git perf."""
    from gitperf.core.owner import Owner
    from gitperf.core.proc import die_with_parent, parent_death_signal
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # (the child: syscalls only, then out)
        try:
            die_with_parent(signal.SIGKILL)
            Owner(65534, 65534).become()
            os.write(w, str(parent_death_signal()).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 16).decode()
    os.waitpid(pid, 0)
    assert got == str(int(signal.SIGKILL))
