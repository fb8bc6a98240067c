"""Shared fixtures: real git repositories, the demo history, synthetic profiles, and the gates.

Tests marked `ebpf` need root, bcc and kernel headers; tests marked `browser` need Debian's chromium
and chromedriver (scripts/setup.sh installs both).  Without them they skip with the reason; with
GITPERF_REQUIRE_EBPF=1 / GITPERF_REQUIRE_BROWSER=1 (set by .ci/run) a missing capability fails; the
same for `valgrind` and `viewers` (node and the npm readers of exported files).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gitperf.core.model import FunctionStats, Header, Metrics, PlanRecord, Profile
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo"
sys.path.insert(0, str(DEMO))

# A test run started as a background job of a non-interactive shell (`make test &` in a script, some CI
# wrappers) inherits SIGINT ignored, and so would every git perf a test starts: the Ctrl-C tests then
# failed for want of a signal (one such run: 4 failures).  With a handler here, children start with the
# default again (exec resets handlers, not an ignored signal).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def ebpf_missing() -> str:
    """Why this machine cannot run eBPF collection tests ("" = it can)."""
    from gitperf.core.errors import EnvironmentUnavailable
    from gitperf.engine.bcc_engine import BccEngine
    try:
        BccEngine().check()
    except EnvironmentUnavailable as e:
        return str(e)
    return ""


def browser_missing() -> str:
    """Why this machine cannot run the headless-browser tests ("" = it can)."""
    missing = [p for p in ("chromium", "chromedriver") if not shutil.which(p)]
    if missing:
        return f"{' and '.join(missing)} not installed (run scripts/setup.sh as root)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed in this environment (run scripts/setup.sh)"
    return ""


def valgrind_missing() -> str:
    return "" if shutil.which("valgrind") else "valgrind is not installed (run scripts/setup.sh as root)"


NODE_MODULES = Path(__file__).resolve().parent.parent / ".venv" / "npm" / "node_modules"


def viewers_missing() -> str:
    """Why the export tests cannot open git perf's files in other tools' readers here ("" = they can)."""
    if not shutil.which("node"):
        return "node is not installed (run scripts/setup.sh as root)"
    missing = [m for m in ("pprof-format", "speedscope") if not (NODE_MODULES / m).is_dir()]
    return f"{', '.join(missing)} not in {NODE_MODULES} (run scripts/setup.sh)" if missing else ""


GATES = {"ebpf": (ebpf_missing, "GITPERF_REQUIRE_EBPF", "needs eBPF"),
         "browser": (browser_missing, "GITPERF_REQUIRE_BROWSER", "needs a headless browser"),
         "valgrind": (valgrind_missing, "GITPERF_REQUIRE_VALGRIND", "needs valgrind"),
         "viewers": (viewers_missing, "GITPERF_REQUIRE_VIEWERS", "needs the npm readers")}


def pytest_collection_modifyitems(config, items):
    reasons: dict[str, str] = {}
    for item in items:
        for mark, (probe, env, what) in GATES.items():
            if mark not in item.keywords:
                continue
            if mark not in reasons:
                reasons[mark] = probe()
            if reasons[mark]:
                if os.environ.get(env) == "1":
                    item.fixturenames.insert(0, f"_fail_without_{mark}")
                else:
                    item.add_marker(pytest.mark.skip(reason=f"{what}: {reasons[mark]}"))


@pytest.fixture
def _fail_without_ebpf(request):
    pytest.fail(f"GITPERF_REQUIRE_EBPF=1 but this machine cannot collect: {ebpf_missing()}")


@pytest.fixture
def _fail_without_valgrind(request):
    pytest.fail(f"GITPERF_REQUIRE_VALGRIND=1 but {valgrind_missing()}")


@pytest.fixture
def _fail_without_viewers(request):
    pytest.fail(f"GITPERF_REQUIRE_VIEWERS=1 but {viewers_missing()}")


@pytest.fixture
def _fail_without_browser(request):
    pytest.fail(f"GITPERF_REQUIRE_BROWSER=1 but this machine cannot drive a browser: {browser_missing()}")


@pytest.fixture(autouse=True)
def git_identity(monkeypatch, tmp_path_factory):
    """Every test sees the same git identity and no user/system config.  The session's one home holds
    the one calibration every collection of the session shares (it belongs to the machine:
    `git.state.user_cache`), apart from the user's own."""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("GITPERF_CACHE", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k, v in {"GIT_AUTHOR_NAME": "Tester", "GIT_AUTHOR_EMAIL": "t@example.com",
                 "GIT_COMMITTER_NAME": "Tester", "GIT_COMMITTER_EMAIL": "t@example.com"}.items():
        monkeypatch.setenv(k, v)


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="session")
def demo_history(tmp_path_factory) -> tuple[Path, list[str]]:
    """The demo repository (six commits), built once; tests copy it before writing to it."""
    import make_history
    dest = tmp_path_factory.mktemp("demo-pristine") / "wordstat"
    commits = make_history.build(dest)
    return dest, commits


@pytest.fixture(scope="session")
def profiled(demo_history, tmp_path_factory) -> tuple[Path, list[str]]:
    """The demo history's first five commits profiled under real eBPF (workload `gate`, five runs
    each, in five interleaved rounds: a machine disturbed for a few seconds spoils one run of every
    commit, which the medians ignore, rather than every run of one).  Shared by the check and the
    dashboard tests; they only read it (and the index under .git/perf)."""
    src, commits = demo_history
    root = tmp_path_factory.mktemp("profiled") / "wordstat"
    shutil.copytree(src, root, symlinks=True)
    for _ in range(5):
        for c in commits[:5]:
            r = run_cli(root, "collect", c, "--workload", "gate", "--repeat", "1", "-q")
            assert r.returncode == 0, r.stderr
    return root, commits


@pytest.fixture
def demo_repo(demo_history, tmp_path) -> tuple[Path, list[str]]:
    src, commits = demo_history
    dest = tmp_path / "wordstat"
    shutil.copytree(src, dest, symlinks=True)
    return dest, commits


def init_repo(d: Path) -> Path:
    """A new repository at `d` with one commit."""
    d.mkdir()
    git(d, "init", "-q", "-b", "main")
    (d / "a.txt").write_text("a\n")
    git(d, "add", "a.txt")
    git(d, "commit", "-q", "-m", "first")
    return d


@pytest.fixture
def empty_repo(tmp_path) -> Path:
    return init_repo(tmp_path / "repo")


def run_cli(cwd, *args, env=None, timeout=600) -> subprocess.CompletedProcess:
    """The real `git perf` command, through git, as a user runs it."""
    e = dict(os.environ)
    e["PATH"] = f"{Path(sys.executable).parent}:{e['PATH']}"
    if env:
        e.update(env)
    return subprocess.run(["git", "perf", *args], cwd=cwd, capture_output=True, text=True, env=e, timeout=timeout)


READ_COMMANDS = ("show", "log", "report", "diff", "check")  # (check without --collect)


def read_cli(cwd, *args, env=None) -> subprocess.CompletedProcess:
    """A read command of `git perf` (READ_COMMANDS) run in this process through click's CliRunner, as
    `run_cli` runs it through git: the same exit code, stdout and stderr, without a process and its
    imports (~0.4 s) a call (issue #56 item 5).  An error the CLI does not turn into its exit code is
    raised here, with its traceback; the signal handlers the CLI installs are put back."""
    from click.testing import CliRunner
    from gitperf.cli import main
    args = [str(a) for a in args]
    assert args[0] in READ_COMMANDS, args
    assert "--collect" not in args, args
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with contextlib.chdir(cwd):
            r = CliRunner().invoke(main, args, env=env)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return subprocess.CompletedProcess(["git", "perf", *args], r.exit_code, r.stdout, r.stderr)


def collect_json(root, *args) -> list[dict]:
    """`git perf collect --json` that must succeed: the profiles it stored."""
    r = run_cli(root, "collect", "--json", "-q", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["profiles"]


# Synthetic profiles (no eBPF) for checks and the dashboard; the names include what breaks naive
# escaping in markdown, HTML and URLs.
NAMES = ["main", "parse", "std::vector<int>::push_back", "hash|mix", "<script>alert(1)</script>"] + [
    f"f{i}" for i in range(10)]


def profile(commit: str, rng, slow: dict[str, float] | None = None, partial: str = "", environment: str = ""):
    slow = slow or {}
    funcs = []
    for i, n in enumerate(NAMES):
        t = 1e8 / (i + 1) * math.exp(rng.normal(0, 0.01)) * slow.get(n, 1.0)
        funcs.append(FunctionStats(n, 10 * (i + 1), int(t), int(t * 0.5), location=f"src/file{i}.c:{10 * i + 1}"))
    h = Header("t", commit, "app", "b", ("./app",), "w", "bcc", "m1", "k", 0.0, 1.0, partial=partial,
               environment=environment)
    # call stacks with the same names (folded: `;` between frames), parse's grown with its slowdown
    st = {"main;parse": round(400 * slow.get("parse", 1.0)), "main;parse;[library]": 100,
          f"main;{NAMES[2]}": 200, f"main;{NAMES[4]};{NAMES[3]}": 50}
    # the run's wall time: main's plus start and exit; 2% of it calibrated probe time
    prt = funcs[0].total_ns / 1e9 * 1.05
    return Profile(h, Metrics(PRT=prt, predicted_overhead_s=0.02 * prt), PlanRecord(probed=tuple(NAMES)),
                   tuple(funcs), stacks=st)


def commit_line(root, n: int) -> list[str]:
    """n new commits on `root`'s branch (each a change to a.txt), oldest first."""
    commits = []
    for i in range(n):
        (root / "a.txt").write_text(f"{i}\n")
        git(root, "commit", "-qam", f"commit {i}")
        commits.append(git(root, "rev-parse", "HEAD"))
    return commits


def history(empty_repo, n: int, slow_at: int | None = None, runs: int = 3, factor: float = 1.5,
            slow: dict[str, float] | None = None):
    """n commits, each with `runs` profiles; from the commit at index slow_at on, `parse` is
    `factor` times slower (or the functions in `slow` are)."""
    rng = np.random.default_rng(0)
    commits = commit_line(empty_repo, n)
    store = NotesStore(open_repo(empty_repo))
    for i, c in enumerate(commits):
        now = (slow or {"parse": factor}) if slow_at is not None and i >= slow_at else {}
        for _ in range(runs):
            store.add(c, profile(c, rng, now))
    return commits
