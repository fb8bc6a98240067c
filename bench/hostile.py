#!/usr/bin/env python3
"""Memory and time of every read command and dashboard page over each hostile note shape issue #37
measured (a note line someone else pushed), one shape at a time, beside the same history without it.

    .venv/bin/python bench/hostile.py [--shapes deep,series,...]

Each command runs as `python -m gitperf ...` in its own process and each page in its own process
(the Flask app's test client; the first page's request builds the index); a row gives that process's peak
resident memory (ru_maxrss of a runner's only child) and its wall time (commands: the whole process, Python's start
included; pages: the request).  Target (#37): under 500 MB and 2 s for every shape and reader.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

from _common import ROOT, Header, Metrics, PlanRecord, Profile, codec, table

from gitperf.core.model import FunctionStats
from gitperf.store.notes import NotesStore

COMMANDS = (("log",), ("show", "HEAD"), ("show", "HEAD", "--json"), ("check", "HEAD", "--json"),
            ("diff", "HEAD~1", "HEAD"), ("report", "HEAD", "--format", "html", "-o", "site"))
PAGES = ("/", "/commit/<head>", "/regressions", "/function/parse", "/api/commits")
LIMIT_MB, LIMIT_S = 500, 2.0


def _profile(commit: str, scale: float) -> Profile:
    fs = tuple(FunctionStats(n, c, int(t * scale), int(t * scale * 0.5), location=f"src/{n}.c:1")
               for n, c, t in (("main", 1, 9e7), ("parse", 400, 5e7), ("work", 9000, 3e7)))
    h = Header("bench", commit, "app", "b1d", ("./app",), "w", "bcc", "m1", "k", 0.0, 1.0)
    return Profile(h, Metrics(PL=3, PLR=3, PRT=0.1), PlanRecord(probed=tuple(f.name for f in fs)), fs,
                   stacks={"main;parse": 40, "main;work": 25})


def _packed(d: dict) -> str:
    """A line as `git perf collect` writes one: zlib-compressed JSON (a 60 MB field is a 60 KB line)."""
    return codec.PREFIX + base64.b64encode(zlib.compress(json.dumps(d).encode(), 9)).decode()


def shapes(valid: dict) -> dict[str, list[str]]:
    """Shape name -> the lines added to the newest commit's note."""
    def one(change) -> dict:
        d = copy.deepcopy(valid)
        change(d)
        return d
    f0 = lambda d: d["f"][1]  # noqa: E731  (`parse`)
    return {
        "20,000-frame stack": [_packed(one(lambda d: d.__setitem__("st", {";".join(f"f{i}" for i in range(20_000)): 5})))],
        "127 frames of 20,000-char names": [_packed(one(lambda d: d.__setitem__(
            "st", {";".join(f"{i}" + "n" * 20_000 for i in range(127)): 5})))],
        "20,000-point call series": [_packed(one(lambda d: f0(d).update(so=[1] * 20_000,
                                                                          sd=[i * 7 % 1000 for i in range(20_000)])))],
        "1,000,000-point call series": [_packed(one(lambda d: f0(d).update(so=[1] * 1_000_000, sd=[5] * 1_000_000)))],
        "ten lines of 60 MB each": [_packed(one(lambda d: f0(d).update(loc="x" * (60 << 20))))] * 10,
        "names no URL or terminal takes": [_packed(one(lambda d: d["f"].extend(
            dict(valid["f"][2], n=n) for n in ("/etc/passwd", "", "x\ny", "\x1b]0;pwned\x07", "..", "<script>x</script>",
                                               "n" * 20_000))))],
        "100,000 functions": [_packed(one(lambda d: d["f"].extend(dict(valid["f"][2], n=f"fn_{i:06d}")
                                                                  for i in range(100_000))))],
        "times from 1e300 to negative": [_packed(one(lambda d: d["h"].update(started=t, finished=t)))
                                         for t in (1e300, 1e17, -1.0)],
        "check record dated 1e300": ['gitperf-check {"v":1,"pairings":[],"time":1e300,'
                                     '"result":{"commit":"x","result":"degradation"}}'],
    }


def _base(dest: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(dest)], check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x"}
    import pygit2
    repo = pygit2.Repository(str(dest))
    for i in range(3):
        (dest / "a.txt").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(dest), "add", "a.txt"], check=True)
        subprocess.run(["git", "-C", str(dest), "commit", "-qm", f"c{i}"], check=True, env=env)
        sha = str(repo.revparse_single("HEAD").id)
        for r in range(3):
            NotesStore(repo).add(sha, _profile(sha, 1 + 0.01 * r))


PAGE = """
import sys, time, json
from gitperf.web import create_app
client = create_app(sys.argv[1]).test_client()
t = time.perf_counter(); r = client.get(sys.argv[2]); print(json.dumps([r.status_code, time.perf_counter() - t]))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="", help="comma-separated names (default: all); 'none' is the plain history")
    a = ap.parse_args()
    rows, worst = [], {"MB": 0.0, "s": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        _base(base)
        import pygit2
        store = NotesStore(pygit2.Repository(str(base)))
        head = str(store.repo.revparse_single("HEAD").id)
        valid = codec.to_json(store.read(head)[0][0].profile)
        todo = {"none": [], **shapes(valid)}
        wanted = [s.strip() for s in a.shapes.split(",") if s.strip()]
        for name, lines in todo.items():
            if wanted and not any(w in name for w in wanted):
                continue
            repo = Path(tmp) / "r"
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(base, repo, symlinks=True)
            s = NotesStore(pygit2.Repository(str(repo)))
            for line in lines:
                s.add_line(head, line)
            for args in COMMANDS:
                peak, wall, rc, err = _run_alone([sys.executable, "-m", "gitperf", *args], repo)
                rows.append([name, "git perf " + " ".join(args), f"{peak:.0f}", f"{wall:.2f}", rc, err])
                worst = {"MB": max(worst["MB"], peak), "s": worst["s"]}
            for f in (repo / ".git" / "perf").glob("index.db*"):
                f.unlink()  # (the first page's time includes building the index)
            for url in PAGES:
                peak, wall, rc, out = _run_alone([sys.executable, "-c", PAGE, str(repo), url.replace("<head>", head)], repo, page=True)
                rows.append([name, url, f"{peak:.0f}", f"{wall:.2f}", rc, out])
                worst = {"MB": max(worst["MB"], peak), "s": max(worst["s"], wall)}
            print(f"{name}: done", file=sys.stderr)
    print(table(["shape", "reader", "peak MB", "time s", "exit/status", "error"], rows))
    print(f"\nlargest peak {worst['MB']:.0f} MB (target {LIMIT_MB}); slowest page {worst['s']:.2f} s (target {LIMIT_S})")


RUNNER = """
import os, resource, subprocess, sys, time, json
t = time.perf_counter()
p = subprocess.run(sys.argv[2:], cwd=sys.argv[1], capture_output=True)
wall = time.perf_counter() - t
err = p.stderr.decode(errors="replace")
print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, wall, p.returncode,
                  p.stdout.decode(errors="replace")[-200:], err[-2000:]]))
"""


def _run_alone(argv: list[str], cwd: Path, page: bool = False) -> tuple[float, float, int, str]:
    """One reader under a fresh runner process, so that RUSAGE_CHILDREN is that reader's peak alone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", RUNNER, str(cwd), *argv], env=env, capture_output=True, timeout=900)
    peak, wall, rc, out, err = json.loads(r.stdout)
    if page:
        status, seconds = json.loads(out.strip().splitlines()[-1]) if rc == 0 else (f"exit {rc}", wall)
        return peak, seconds, status, err.strip().splitlines()[-1][:60] if rc else ""
    bad = rc not in (0, 1, 3) or "Traceback" in err
    return peak, wall, rc, (err.strip().splitlines() or [""])[-1][:60] if bad else ""


if __name__ == "__main__":
    main()
