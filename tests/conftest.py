"""Shared fixtures: real git repositories, the demo history, and the eBPF gate.

Tests marked `ebpf` need root, bcc and kernel headers.  Without them they skip with the reason;
with GITPERF_REQUIRE_EBPF=1 (set by .ci/run) a missing capability fails the test instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo"
sys.path.insert(0, str(DEMO))


def ebpf_missing() -> str:
    """Why this machine cannot run eBPF collection tests ("" = it can)."""
    from gitperf.engine.bcc_engine import BccEngine
    from gitperf.errors import EnvironmentUnavailable
    try:
        BccEngine().check()
    except EnvironmentUnavailable as e:
        return str(e)
    return ""


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "ebpf" in item.keywords:
            if reason is None:
                reason = ebpf_missing()
            if reason:
                if os.environ.get("GITPERF_REQUIRE_EBPF") == "1":
                    item.fixturenames.insert(0, "_fail_without_ebpf")
                else:
                    item.add_marker(pytest.mark.skip(reason=f"needs eBPF: {reason}"))


@pytest.fixture
def _fail_without_ebpf(request):
    pytest.fail(f"GITPERF_REQUIRE_EBPF=1 but this machine cannot collect: {ebpf_missing()}")


@pytest.fixture(autouse=True)
def git_identity(monkeypatch, tmp_path_factory):
    """Every test sees the same git identity and no user/system config."""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
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


@pytest.fixture
def demo_repo(demo_history, tmp_path) -> tuple[Path, list[str]]:
    src, commits = demo_history
    dest = tmp_path / "wordstat"
    shutil.copytree(src, dest, symlinks=True)
    return dest, commits


@pytest.fixture
def empty_repo(tmp_path) -> Path:
    d = tmp_path / "repo"
    d.mkdir()
    git(d, "init", "-q", "-b", "main")
    (d / "a.txt").write_text("a\n")
    git(d, "add", "a.txt")
    git(d, "commit", "-q", "-m", "first")
    return d


def run_cli(cwd, *args, env=None, timeout=600) -> subprocess.CompletedProcess:
    """The real `git perf` command, through git, as a user runs it."""
    e = dict(os.environ)
    e["PATH"] = f"{Path(sys.executable).parent}:{e['PATH']}"
    if env:
        e.update(env)
    return subprocess.run(["git", "perf", *args], cwd=cwd, capture_output=True, text=True, env=e, timeout=timeout)
