"""The dashboard: the sqlite index, every page and API route through Flask's test client, the static
export, `git perf serve` as a real server, and a real headless Chromium on the eBPF-profiled demo."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import NAMES, commit_line, git, history, profile, run_cli, read_cli

from gitperf.core.config import CheckConfig
from gitperf.git.repo import open_repo
from gitperf.store.notes import NotesStore
from gitperf.store.caching import CachingStore
from gitperf.views.index import Index
from gitperf.web import create_app

XSS = "<script>alert(1)</script>"


@pytest.fixture
def synthetic(empty_repo):
    """Six commits, three runs each; `parse` 50% slower from commit 4 on."""
    commits = history(empty_repo, 6, slow_at=4)
    return empty_repo, commits


def test_index_builds_updates_incrementally_and_rebuilds_from_the_notes(synthetic):
    import gc
    root, commits = synthetic
    repo = open_repo(root)
    idx = Index(repo, CheckConfig())
    collector = gc.get_threshold()
    first = idx.update()
    assert (first.notes, first.read, first.checked) == (6, 6, 6)
    assert gc.get_threshold() == collector  # (relaxed during the build only)
    line = idx.commits()  # HEAD's first-parent line, oldest first: the repository's first commit has no note
    assert [c["sha"] for c in line] == [git(root, "rev-parse", "HEAD~6"), *commits]
    assert line[0]["profiles"] == 0
    assert line[0]["result"] is None
    assert [r["function"] for r in idx.regressions()] == ["parse"]
    assert idx.regressions()[0]["commit"] == commits[4]
    assert idx.update().read == 0  # nothing changed: nothing read

    # one new commit with one note: only that note is read and only that commit checked
    (root / "a.txt").write_text("new\n")
    git(root, "commit", "-qam", "new")
    new = git(root, "rev-parse", "HEAD")
    NotesStore(repo).add(new, profile(new, np.random.default_rng(9), {"parse": 1.5}))
    second = Index(open_repo(root), CheckConfig()).update()
    assert (second.read, second.checked, second.removed) == (1, 1, 0)
    assert Index(open_repo(root), CheckConfig()).commit_info(new)["subject"] == "new"

    # the index is derived: removing a note removes its rows; deleting the file rebuilds the same
    git(root, "notes", "--ref", "refs/notes/perf", "remove", commits[0])
    third = Index(open_repo(root), CheckConfig()).update()
    assert third.removed == 1
    assert commits[0] not in Index(open_repo(root), CheckConfig()).noted_commits()
    before = Index(open_repo(root), CheckConfig()).regressions()
    idx.path.unlink()
    rebuilt = Index(open_repo(root), CheckConfig()).update()
    assert rebuilt.rebuilt
    assert rebuilt.read == 6
    assert Index(open_repo(root), CheckConfig()).regressions() == before


def test_stale_asks_the_notes_ref_and_head_without_listing_the_notes(synthetic, monkeypatch):
    """Every page asks whether the index is stale: it compares the notes ref's commit and HEAD with
    what the last update recorded, and lists no note (at 10,000 commits that cost each page ~25 ms)."""
    from gitperf.views import index as index_mod
    root, commits = synthetic
    Index(open_repo(root), CheckConfig()).update()
    listed = index_mod._note_ids
    monkeypatch.setattr(index_mod, "_note_ids", lambda repo: pytest.fail("stale() listed the notes"))
    fresh = lambda: Index(open_repo(root), CheckConfig())  # noqa: E731
    assert not fresh().stale()
    NotesStore(open_repo(root)).add_line(commits[2], "# a line the index reads again")
    assert fresh().stale()  # a note written moves the notes ref
    monkeypatch.setattr(index_mod, "_note_ids", listed)
    assert fresh().update().read == 1
    assert not fresh().stale()
    git(root, "commit", "-q", "--allow-empty", "-m", "no note")
    assert fresh().stale()  # HEAD moved: the line to draw is another
    fresh().update()
    assert not fresh().stale()
    assert Index(open_repo(root), replace(CheckConfig(), history=5)).stale()  # another check configuration
    # the notes ref moved with the same notes (a note removed and written again as it was): one
    # update that reads nothing records it, and the pages stop asking
    blob = git(root, "notes", "--ref", "refs/notes/perf", "list", commits[1])
    git(root, "notes", "--ref", "refs/notes/perf", "remove", commits[1])
    git(root, "notes", "--ref", "refs/notes/perf", "add", "-C", blob, commits[1])
    assert fresh().stale()
    assert fresh().update().read == 0
    assert not fresh().stale()


def test_a_long_history_is_indexed_by_workers_into_the_same_rows(empty_repo, monkeypatch):
    """A full build of many commits derives their rows in worker processes (views.index_build): the
    index is the one the calling process alone builds, row for row, and no worker outlives it."""
    import multiprocessing
    import sqlite3

    from gitperf.views import index_build
    commits = history(empty_repo, 60, slow_at=50)
    monkeypatch.setattr(index_build, "cpus", lambda: 2)  # (two workers even on a one-CPU machine)
    monkeypatch.setattr(index_build, "MIN_RUN", 5)

    def build(path: Path, parallel_from: int) -> tuple[dict, list[str]]:
        monkeypatch.setattr(index_build, "PARALLEL_FROM", parallel_from)
        said: list[str] = []
        assert Index(open_repo(empty_repo), CheckConfig(), path).update(progress=said.append).checked == 60
        db = sqlite3.connect(path)
        indexes = {i for (i,) in db.execute("select name from sqlite_master where type = 'index'")}
        assert {"functions_by_name", "changes_by_type", "function_natives_by_name", "series_by_name"} <= indexes
        tables = [t for (t,) in db.execute("select name from sqlite_master where type in ('table', 'view') "
                                           "and name not like '%_rows' and name not in ('texts', 'meta')")]
        return {t: sorted(db.execute(f"select * from [{t}]"), key=repr) for t in tables}, said

    alone, _ = build(empty_repo / "alone.db", 10_000)
    workers, said = build(empty_repo / "workers.db", 8)  # (two workers, runs of 15 commits down to 5)
    assert said[-1] == "indexing commits: 60/60", said
    assert len(said) == 8, said
    assert multiprocessing.active_children() == []
    assert len(alone["changes"]) > 60 * 5
    assert workers == alone
    assert [r[0] for r in alone["verdicts"] if r[2] == "degradation"] == [commits[50]]


def test_an_interrupted_build_ends_its_workers_at_once_not_after_their_runs():
    """Ctrl-C or SIGTERM during a build (views.index_build): the workers are ended, not waited for
    through the runs they hold (seconds each)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from gitperf.views import index_build
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(time.sleep, 60) for _ in range(4)]
        started = time.monotonic()
        while not all(r.running() for r in runs[:2]):
            assert time.monotonic() - started < 60, "the workers never started their runs"
            time.sleep(0.05)
        pids = list(pool._processes)
        index_build._terminate(pool)
        # (from /proc: a worker the executor's own thread reaped first still reads as alive to its
        # Process object for a moment)
        while any(_running(pid) for pid in pids):
            assert time.monotonic() - started < 30, "a worker still runs its 60 s run"
            time.sleep(0.05)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] not in "ZX"
    except FileNotFoundError:
        return False


def test_the_index_keeps_each_text_once_and_a_removed_notes_rows_go_with_it(synthetic):
    """The per-function tables hold ids of `texts` behind views of their own names (the layout that
    took bench/dashboard.py's index from 191.8 to 44.9 MiB); the checks it runs find each commit's
    ancestors from its parent's, as git's walk does."""
    root, commits = synthetic
    repo = open_repo(root)
    idx = Index(repo, CheckConfig())
    idx.update()
    db = idx.db.conn
    assert db.execute("select count(*) from texts where text = 'parse'").fetchone()[0] == 1
    assert {type(v) for v in db.execute("select [commit], name, config_key from functions_rows").fetchone()} == {int}
    assert db.execute("select count(distinct [commit]) from functions where name = 'parse'").fetchone()[0] == 6
    assert db.execute("select count(*) from changes where [commit] = ?", [commits[2]]).fetchone()[0] > 0
    git(root, "notes", "--ref", "refs/notes/perf", "remove", commits[2])
    idx.update()
    for table in ("functions", "function_natives", "changes"):
        assert db.execute(f"select count(*) from {table} where [commit] = ?", [commits[2]]).fetchone()[0] == 0, table
    walked = NotesStore(repo)
    for order in (commits, commits[::-1]):  # parents first (each from its parent's), then children first
        for keep in (None, 2):  # (keeping two commits: the rest forgotten and read again)
            store = CachingStore(repo, keep=keep)
            assert [store.ancestors(c) for c in order] == [walked.ancestors(c) for c in order]
            assert [store.read(c)[0] for c in order] == [walked.read(c)[0] for c in order]


def test_an_unresolved_changes_words_stay_in_its_row_and_its_method_reads_whole(empty_repo):
    """An unresolved outcome's words are its own figures ("unresolved: a change between -22% and +31%
    ..."): interned whole, 23,487 of 59,800 changes' methods were texts of their own, 9.4 of the index's
    24.7 MB with their unique index (300 commits of bench/dashboard.py's history).  They are kept in the
    change's row; the view's method is the check's, character for character."""
    from gitperf import checks
    commits = history(empty_repo, 30, slow_at=20)
    repo = open_repo(empty_repo)
    idx = Index(repo, CheckConfig())
    idx.update()
    db = idx.db.conn
    assert db.execute("select count(*) from texts where text like '%unresolved:%'").fetchone()[0] == 0
    store = NotesStore(repo)
    want = {(c, x.workload, x.function): x.method for c in commits
            for x in checks.check(store, c, replace(CheckConfig(), votes=False)).changes}
    got = {(c, w, f): m for c, w, f, m in db.execute("select [commit], workload, function, method from changes")}
    assert got == want
    assert any("; unresolved: " in m for m in got.values()), "the history gives unresolved changes"


def test_every_change_row_reads_as_the_checks_own_change(empty_repo):
    """The index's changes go to its writer as columns (`index_rows.change_columns`): each row must read
    as the check's `Change.to_dict()`, the one JSON shape, column for column (nanoseconds whole), in the
    check's report order."""
    from gitperf import checks
    from gitperf.views.index_rows import CHANGE_NUMBERS, CHANGE_TEXTS
    commits = history(empty_repo, 12, slow_at=8)
    repo = open_repo(empty_repo)
    idx = Index(repo, CheckConfig())
    idx.update()
    whole = ("absolute_ns", "base_ns", "target_ns", "exclusive_delta_ns")
    cols = CHANGE_TEXTS + CHANGE_NUMBERS + ("changed", "since", "rank")
    store = NotesStore(repo)
    want, got = [], []
    for c in commits:
        for rank, x in enumerate(checks.check(store, c, replace(CheckConfig(), votes=False)).changes):
            d = x.to_dict() | {"changed": int(x.changed), "since": x.since or "", "rank": rank}
            want.append(tuple(round(d[k]) if k in whole and d[k] is not None else d[k] for k in cols))
        got += idx.db.conn.execute(f"select {', '.join(f'[{k}]' for k in cols)} from changes where [commit] = ? "
                                   "order by rank", (c,)).fetchall()
    assert len(got) > 2 * len(commits), "every function's change has a row"
    assert got == want
    assert any(None in row for row in got), "some change has an undefined number (NaN written as null)"


def test_the_writer_stores_nanoseconds_whole_as_round_does_and_keeps_what_is_no_number():
    """`index_build.Rows.add` rounds the nanosecond columns half to even, as `round`, whether a column
    holds only numbers (one `map`) or also None, NaN and infinities (kept as they are), from columns or
    from row dicts alike; other columns stay as given."""
    import math
    from gitperf.views.index_build import Rows
    from gitperf.views.index_rows import Columns
    numbers = [0.5, 1.5, 2.5, -0.5, -1.5, 3.7, 7, 2 ** 60 + 0.0, 1e15 + 0.5]
    mixed = numbers + [None, math.nan, math.inf, -math.inf]
    for ns in (numbers, mixed):
        rows = Rows()
        rows.add("t", Columns(ns=list(ns), other=list(ns)), whole=("ns",))
        rows.add("t", [{"ns": v, "other": v} for v in ns], whole=("ns",))
        stored, other = rows.tables["t"][1]
        expected = [v if v is None or not math.isfinite(v) else round(v) for v in ns] * 2
        assert [type(v) for v in stored] == [type(v) for v in expected]
        assert all(a == b or a is b for a, b in zip(stored, expected)), (stored, expected)
        assert len(other) == 2 * len(ns)
        assert all(a is b for a, b in zip(other, list(ns) * 2))
    assert stored[:5] == [0, 2, 2, 0, -2]


def test_paired_ratios_chain_from_the_parents_measured_time_and_break_where_a_commit_has_none():
    from gitperf.web.plots import chained
    total = [{"seq": q, "total_ns": t * 1e6} for q, t in ((1, 10.0), (2, 11.0), (3, 30.0), (4, 20.0), (5, 21.0), (8, 9.0))]
    step = lambda q, rel: {"seq": q, "relative": rel, "ci_low": rel - 0.01, "ci_high": rel + 0.01}  # noqa: E731
    xs, ys, text = chained(total, [step(2, 0.5), step(3, -0.2), step(5, 0.1), step(8, 0.5), step(10, 0.1)])
    # 2 and 3 chain from 1's 10 ms (not 2's and 3's own times); 5 starts again at 4; 8's parent has no
    # point: it starts at 8's own time divided back; 10 has neither (nothing drawn)
    assert xs == [1, 2, 3, None, 4, 5, None, 7, 8]
    assert ys == pytest.approx([10.0, 15.0, 12.0, None, 20.0, 22.0, None, 6.0, 9.0])
    assert text[2].startswith("-20.0% [-21.0%, -19.0%] vs its parent")


def test_the_functions_log_axis_labels_every_tick_in_full():
    """lz4's top functions ran 0.2 to 30 ms: plotly labelled 0.2, 2 and 20 ms each "2"."""
    from gitperf.web.plots import functions_timeline
    rows = lambda ms: [{"seq": 1, "commit": "a" * 40, "subject": "s", "exclusive_ns": ms * 1e6}]  # noqa: E731
    axis = functions_timeline("t", {"f": rows(0.21), "g": rows(29.0)})["layout"]["yaxis"]
    assert axis["ticktext"] == ["0.2", "0.5", "1", "2", "5", "10", "20", "50"]
    assert axis["tickvals"] == pytest.approx([0.2, 0.5, 1, 2, 5, 10, 20, 50])


def test_every_page_and_api_route_answers_with_the_data(synthetic):
    root, commits = synthetic
    client = create_app(root).test_client()
    slowed = commits[4]

    page = client.get("/").get_data(as_text=True)
    assert "Workload <code>w</code>" in page
    assert 'data-click-commits' in page
    figure = json.loads(re.search(r'<script type="application/json" id="total-1">(.*?)</script>', page, re.S)[1])
    assert {t.get("name") for t in figure["data"]} >= {"run time (median of runs)", "degradations"}
    band = [t for t in figure["data"] if t.get("legendgroup") == "main" and t.get("hoverinfo") == "skip"]
    assert "95% interval of the median (runs' spread moderated along the line)" in band[1]["name"]
    line = next(t for t in figure["data"] if t.get("name") == "run time (median of runs)")
    assert all(lo < y < hi for hi, lo, y in zip(band[0]["y"], band[1]["y"], line["y"]))  # (around every point)
    marker = next(t for t in figure["data"] if t.get("name") == "degradations")
    shas = json.loads(re.search(r'<script type="application/json" id="shas">(.*?)</script>', page, re.S)[1])
    assert [shas[str(x)] for x in marker["x"]] == [slowed]  # the marker sits on the slowed commit
    assert 'id="window"' not in page  # (the whole line fits the default window)

    # a window of the line's last two commits (of seven: the first has no note): their points, markers
    # and commit links only
    def drawn(url):
        page = client.get(url).get_data(as_text=True)
        figure = json.loads(re.search(r'<script type="application/json" id="total-1">(.*?)</script>', page, re.S)[1])
        return page, {t["name"]: t["x"] for t in figure["data"] if t.get("name") in ("run time (median of runs)", "degradations")}
    page, traces = drawn("/?commits=2")
    assert traces == {"run time (median of runs)": [5, 6], "degradations": [5]}
    assert f"last 2 of {len(commits) + 1} commits" in " ".join(page.split())
    assert "?commits=all" in page
    windowed = json.loads(re.search(r'<script type="application/json" id="shas">(.*?)</script>', page, re.S)[1])
    assert windowed == {"5": slowed, "6": commits[5]}
    assert drawn("/?commits=1")[1] == {"run time (median of runs)": [6]}  # (the slowed commit is older)
    page = client.get("/function/parse?commits=2").get_data(as_text=True)
    figure = json.loads(re.search(r'<script type="application/json" id="history-1">(.*?)</script>', page, re.S)[1])
    assert {x for t in figure["data"] for x in t["x"]} == {5, 6}
    assert page.count('href="/commit/') >= 2
    assert commits[3][:12] not in page.split("<h2>Per commit</h2>")[1]
    assert 'id="window"' in page
    assert client.get("/?commits=all").get_data(as_text=True).count('id="window"') == 0
    assert client.get("/?commits=-2").status_code == client.get("/?commits=x").status_code == 400

    page = client.get(f"/commit/{slowed[:10]}").get_data(as_text=True)  # a unique prefix works too
    assert "degradation" in page
    assert "src/file1.c:11" in page
    assert "parse" in page
    assert "decided by time" in page  # (no instruction counts: what the CLI line says too, report.decided_by)
    assert f'href="/compare/{commits[3]}/{slowed}"' in page
    assert 'class="sortable functions"' in page

    page = client.get("/function/parse").get_data(as_text=True)
    assert "src/file1.c:11" in page
    assert slowed[:12] in page

    page = client.get(f"/compare/{commits[3]}/{slowed}").get_data(as_text=True)
    assert "degradation" in page
    assert "parse" in page

    page = client.get("/regressions").get_data(as_text=True)
    assert page.count('<tr class="degradation">') == 1
    assert slowed[:12] in page

    api = client.get("/api/commits").get_json()
    assert [c["sha"] for c in api] == list(shas.values())
    assert api[5]["result"] == "degradation"
    assert api[1]["result"] == "not-enough-data"
    one = client.get(f"/api/commit/{slowed}").get_json()
    assert one["check"]["result"] == "degradation"
    assert one["check"]["changes"][0]["function"] == "parse"
    assert len(one["profiles"]) == 3
    assert {f["name"] for f in one["functions"]} == set(NAMES)
    fn = client.get("/api/function/std::vector<int>::push_back").get_json()
    assert len(fn["history"]) == 6
    assert client.get(f"/api/compare/{commits[3]}/{slowed}").get_json()["result"] == "degradation"
    assert client.get("/api/regressions").get_json()[0]["commit"] == slowed
    js = client.get("/static/plotly.min.js")
    # served locally, not from a CDN
    assert js.status_code == 200
    assert b"plotly" in js.data[:2000]


def test_names_are_escaped_everywhere(synthetic):
    root, commits = synthetic
    client = create_app(root).test_client()
    for url in ("/", f"/commit/{commits[4]}", "/function/" + XSS, f"/compare/{commits[3]}/{commits[4]}",
                "/regressions"):
        r = client.get(url)
        assert r.status_code == 200, url
        assert XSS not in r.get_data(as_text=True), url
    # the API returns the name as data, in JSON, which no browser renders as HTML
    r = client.get("/api/function/" + XSS)
    assert r.mimetype == "application/json"
    assert r.get_json()["function"] == XSS
    page = client.get("/function/" + XSS).get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("url", ["/commit/0123456789abcdef", "/commit/not-a-sha;rm -rf", "/function/no_such_fn",
                                 "/?workload=nope", "/compare/abcd1234/HEAD", "/nowhere"])
def test_unknown_things_are_a_404_page_not_a_traceback(synthetic, url):
    root, _ = synthetic
    r = create_app(root).test_client().get(url)
    assert r.status_code == 404
    assert "Not found" in r.get_data(as_text=True)
    assert "Traceback" not in r.get_data(as_text=True)


def test_api_404_is_json(synthetic):
    root, _ = synthetic
    r = create_app(root).test_client().get("/api/commit/0123456789abcdef")
    assert r.status_code == 404
    assert "no commit" in r.get_json()["error"]


def test_corrupt_note_line_is_reported_on_the_commit_page_and_kept(synthetic):
    root, commits = synthetic
    store = NotesStore(open_repo(root))
    store.add_line(commits[5], "gp1:not-base64!")
    page = create_app(root).test_client().get(f"/commit/{commits[5]}").get_data(as_text=True)
    assert "1 line(s) of this commit" in page
    assert "gp1:not-base64!" in store.note_text(commits[5])


def test_static_export_writes_relative_pages_for_ci_artifacts(synthetic, tmp_path):
    root, commits = synthetic
    out = tmp_path / "site"
    r = read_cli(root, "report", "--format", "html", "-o", str(out))
    assert r.returncode == 0, r.stderr  # the exit code is HEAD's check: no change against its parent
    assert (out / "index.html").exists()
    assert (out / "regressions.html").exists()
    assert (out / "static" / "plotly.min.js").stat().st_size > 1_000_000
    for c in commits:
        assert (out / "commit" / f"{c}.html").exists()
    index = (out / "index.html").read_text()
    # opens from disk
    assert 'href="/' not in index
    assert 'src="/' not in index
    assert f'href="commit/{commits[-1]}.html"' in index
    page = (out / "commit" / f"{commits[4]}.html").read_text()
    assert 'src="../static/plotly.min.js"' in page
    assert 'href="../function/' in page
    linked = re.findall(r'href="\.\./(function/[0-9a-f]+\.html)"', page)
    assert linked
    assert all((out / p).exists() for p in linked)


def test_report_html_needs_an_output_directory(synthetic):
    root, _ = synthetic
    r = read_cli(root, "report", "--format", "html")
    assert r.returncode == 2
    assert "-o DIR" in r.stderr
    (root / "afile").write_text("x")
    r = read_cli(root, "report", "--format", "html", "-o", "afile")
    assert r.returncode == 2
    assert "is a file" in r.stderr
    assert (root / "afile").read_text() == "x"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(synthetic):
    """`git perf serve` as a user starts it."""
    root, commits = synthetic
    port = _free_port()
    proc, url = _serve(root, port)
    yield url, root, commits, port
    proc.terminate()
    proc.wait(10)


def _serve(root: Path, port: int) -> tuple[subprocess.Popen, str]:
    """Start `git perf serve` and wait until it answers (its first start builds the index)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["git", "perf", "serve", "--port", str(port)], cwd=root, stderr=subprocess.PIPE,
                            text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/api/commits", timeout=2)
            return proc, url
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None:
                raise AssertionError(f"git perf serve exited: {proc.stderr.read()}")
            time.sleep(0.1)
    raise AssertionError("git perf serve did not answer within 60 s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_on_sigterm_and_ctrl_c_and_says_so(synthetic, sig):
    """SIGTERM (CI ending a job, `timeout`) and Ctrl-C stop the dashboard through its loop's shutdown,
    which nothing in the process can swallow (a KeyboardInterrupt raised inside a finalizer can be: a
    CI run's server served on after SIGTERM, its git parent waiting).  git passes the signal on and waits."""
    root, _ = synthetic
    proc, _url = _serve(root, _free_port())
    proc.send_signal(sig)
    proc.wait(10)
    assert proc.stderr.read().splitlines()[-1] == "stopped"


def test_serve_listens_on_loopback_and_answers(server):
    url, root, commits, port = server
    body = urllib.request.urlopen(url + "/").read().decode()
    assert "Workload <code>w</code>" in body
    # loopback only: the port is not open on another local address
    other = socket.gethostbyname(socket.gethostname())
    if not other.startswith("127."):
        with socket.socket() as s:
            s.settimeout(1)
            assert s.connect_ex((other, port)) != 0


def test_serve_answers_only_its_own_names_and_sends_security_headers(server):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends Host:
    evil.example; it gets a 400, not the JSON API."""
    import http.client
    _, _, _, port = server
    for host, status in (("evil.example", 400), (f"evil.example:{port}", 400), (f"localhost:{port}", 200),
                         (f"127.0.0.1:{port}", 200)):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/commits", headers={"Host": host})
        r = conn.getresponse()
        body = r.read()
        assert r.status == status, (host, r.status, body[:200])
        if status == 200:
            assert r.getheader("X-Content-Type-Options") == "nosniff"
            assert r.getheader("X-Frame-Options") == "DENY"
            assert "frame-ancestors 'none'" in r.getheader("Content-Security-Policy")
        else:
            assert b"commits" not in body
            assert b"answers to" in body
        conn.close()


def test_serve_on_a_busy_port_says_what_to_do(server):
    _, root, _, port = server
    r = run_cli(root, "serve", "--port", str(port), timeout=30)
    assert r.returncode == 2
    assert "choose another --port" in r.stderr


# -- a real browser -------------------------------------------------------------------------------

def _chromium(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
              f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def _wait_rendered(driver, timeout=30):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(driver, timeout).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "div.plot[data-rendered='true'] svg.main-svg"))


# std::map<std::string, std::vector<int>>'s insert position: 755 characters demangled
LONG_CXX = ("_ZNSt8_Rb_treeINSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEESt4pairIKS5_St6vectorIiSaIiEEESt10_"
            "Select1stISB_ESt4lessIS5_ESaISB_EE24_M_get_insert_unique_posERS7_")


@pytest.mark.browser
def test_browser_a_cxx_commit_page_of_long_template_names_fits_1400_pixels(empty_repo, tmp_path):
    """Issue #36: a C++ commit page's tables (300-character symbols) pushed change and interval off
    the screen.  A degradation of a 755-character name: every page of it without a horizontal scroll
    in a 1,400-pixel window, the name readable (templates' arguments elided, the function's own name kept)."""
    rng = np.random.default_rng(7)
    commits = commit_line(empty_repo, 2)
    store = NotesStore(open_repo(empty_repo))
    rename = lambda n: LONG_CXX if n == "parse" else n  # noqa: E731
    for i, c in enumerate(commits):
        for _ in range(3):
            p = profile(c, rng, {"parse": 1.6} if i else {})
            store.add(c, replace(p, functions=tuple(msgspec.structs.replace(f, name=rename(f.name)) for f in p.functions),
                                 plan=replace(p.plan, probed=tuple(rename(n) for n in p.plan.probed)),
                                 stacks={";".join(rename(f) for f in k.split(";")): v for k, v in p.stacks.items()}))
    proc, url = _serve(empty_repo, _free_port())
    driver = _chromium(tmp_path)
    try:
        for page in (f"/commit/{commits[1]}", "/", "/regressions"):
            driver.get(url + page)
            if page != "/regressions":  # (a table, no charts)
                _wait_rendered(driver)
            assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), page
            if page != "/":  # (the overview names functions in its charts only)
                assert "::_M_get_insert_unique_pos(" in driver.execute_script("return document.body.innerText"), page
        driver.get(url + f"/commit/{commits[1]}")
        _wait_rendered(driver)
        driver.save_screenshot(str(tmp_path / "cxx-commit.png"))
    finally:
        driver.quit()
        proc.terminate()
        proc.wait(10)


@pytest.mark.browser
def test_browser_shows_names_as_text_and_runs_no_script_from_them(server, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    url, *_ = server
    driver = _chromium(tmp_path)
    try:
        driver.get(url + "/function/" + urllib.request.quote(XSS, safe=""))
        _wait_rendered(driver)
        assert driver.find_element(By.CSS_SELECTOR, "code.function-name").text == XSS
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text
        driver.get(url + "/")
        _wait_rendered(driver)
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text
    finally:
        driver.quit()


@pytest.mark.browser
def test_browser_draws_the_differential_flame_graph_and_finds_a_function_in_it(server, tmp_path):
    """The slowed commit's page: the icicle is drawn as SVG (no WebGL), its frames carry the
    names as text, and the search box outlines the frames of the function typed."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    url, _, commits, _ = server
    driver = _chromium(tmp_path)
    try:
        driver.get(url + f"/commit/{commits[4]}")
        _wait_rendered(driver)
        WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#plot-flamediff-1 g.slice"))
        texts = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#plot-flamediff-1 g.slice text")]
        assert "parse" in texts, texts
        assert "main" in texts, texts
        grew, shrank = driver.execute_script(
            "const t = document.getElementById('plot-flamediff-1').data[0];"
            "const at = (p, n) => t.labels.findIndex((l, i) => l.replace('◆ ', '') === n"
            "  && t.labels[t.ids.indexOf(t.parents[i])] === p);"
            "return [t.marker.colors[at('main', 'parse')], t.marker.colors[at('main', 'f0')]]"
            .replace("f0", "std::vector&lt;int&gt;::push_back"))
        # parse 50% slower: with its library time its share went 500/750 -> 700/950 (+10%), the rest's fell
        assert grew > 0.05, (grew, shrank)
        assert shrank < -0.1, (grew, shrank)
        box = driver.find_element(By.CSS_SELECTOR, "input.flame-search")
        box.send_keys("pars")
        WebDriverWait(driver, 10).until(lambda d: "outlined" in d.find_element(By.CSS_SELECTOR, ".flame-found").text)
        widths = driver.execute_script(
            "const t = document.getElementById('plot-flamediff-1').data[0];"
            "const at = (p, n) => t.labels.findIndex((l, i) => l.replace('◆ ', '') === n"
            "  && t.labels[t.ids.indexOf(t.parents[i])] === p);"
            "return [t.marker.line.width[at('main', 'parse')], t.marker.line.width[at('all samples', 'main')]]")
        assert widths == [3, 0.5]
        driver.execute_script("document.getElementById('plot-flamediff-1').scrollIntoView()")
        driver.save_screenshot(str(tmp_path / "flame.png"))
    finally:
        driver.quit()


@pytest.mark.ebpf
@pytest.mark.browser
def test_browser_overview_of_the_profiled_demo_clicks_through_to_the_slowed_commit(profiled, tmp_path):
    """The example history under real eBPF: the overview draws the timeline, the slowed commit's
    marker opens that commit's page, whose report names checksum_block."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    root, commits = profiled
    slowed = commits[3]
    proc, url = _serve(root, _free_port())
    driver = _chromium(tmp_path)
    try:
        driver.get(url + "/")
        _wait_rendered(driver)
        driver.save_screenshot(str(tmp_path / "overview.png"))
        plot = driver.find_element(By.ID, "plot-total-1")
        # the degradation marker (▲) of the slowed commit: plotly draws each trace's points as paths
        markers = plot.find_elements(By.CSS_SELECTOR, "g.trace.scatter")
        names = driver.execute_script(
            "return document.getElementById('plot-total-1').data.map(t => t.name || '')")
        degr = names.index("degradations")
        point = markers[degr].find_element(By.CSS_SELECTOR, "path.point")
        ActionChains(driver).move_to_element(point).pause(0.3).click().perform()
        WebDriverWait(driver, 20).until(lambda d: "/commit/" in d.current_url)
        assert driver.current_url.endswith(f"/commit/{slowed}")
        _wait_rendered(driver)
        report = driver.find_element(By.CSS_SELECTOR, "table.report").text
        assert "checksum_block" in report
        assert "changed in this commit" in report
        driver.save_screenshot(str(tmp_path / "commit.png"))
        assert (tmp_path / "overview.png").stat().st_size > 10_000
        assert (tmp_path / "commit.png").stat().st_size > 10_000
    finally:
        driver.quit()
        proc.terminate()
        proc.wait(10)


def test_index_keeps_modes_apart_one_series_each(empty_repo):
    """Exact totals (trace) and stack-sample estimates of the same configuration on one commit are
    two series of function times in the index, never one averaged point (issue: the index grouped
    by configuration without mode); the overview's timeline is the workload's native run time."""
    commits = history(empty_repo, 2, runs=2)
    repo = open_repo(empty_repo)
    store = NotesStore(repo)
    rng = np.random.default_rng(3)
    for c in commits:
        for _ in range(2):  # the same configuration in stack mode: every total ten times the trace's
            p = profile(c, rng, {n: 10.0 for n in NAMES})
            store.add(c, replace(p, plan=replace(p.plan, mode="stack")))
    idx = Index(repo, CheckConfig())
    idx.update()
    keys = sorted(r["config_key"] for r in idx.configurations())
    assert [k.split("|")[4] for k in keys] == ["stack", "trace"]
    assert len({k.rsplit("|", 3)[0] for k in keys}) == 1  # one configuration (and command), two modes
    trace_key, stack_key = (k for k in sorted(keys, key=lambda k: k.split("|")[4] != "trace"))
    trace_main = idx.timeline(trace_key, ["main"])["main"]
    stack_main = idx.timeline(stack_key, ["main"])["main"]
    assert [r["runs"] for r in trace_main] == [2, 2]
    assert [r["runs"] for r in stack_main] == [2, 2]
    for t, s in zip(trace_main, stack_main):
        assert 9 < s["total_ns"] / t["total_ns"] < 11  # not averaged together
    with create_app(str(empty_repo)).test_client() as client:
        page = client.get("/").get_data(as_text=True)
    # the overview: one timeline for the workload (native run time, whatever the plan), the function
    # chart of one plan, named
    assert page.count('data-workload="w"') == 1
    assert page.count('id="total-') == 1
    assert page.count('id="functions-') == 1
    assert "stack: 1 traced" in page or "trace all" in page


def test_serve_answers_fifty_concurrent_requests_while_notes_are_appended(server):
    """Each request opens its own index reader; only one request at a time updates the index (under a
    lock), and only when the notes changed: no "database is locked", no error page."""
    from concurrent.futures import ThreadPoolExecutor
    url, root, commits, _port = server
    paths = ["/", f"/commit/{commits[4]}", "/function/parse", "/regressions", "/api/commits",
             f"/api/commit/{commits[2]}", "/static/app.css"]
    repo = open_repo(root)
    rng = np.random.default_rng(5)

    def append_notes():
        for k, c in enumerate(commits * 2):  # every note changes twice while the requests run
            NotesStore(repo).add(c, profile(c, rng, {"parse": 1.0 + k / 100}))
            time.sleep(0.05)

    def get(path):
        try:
            with urllib.request.urlopen(url + path, timeout=120) as r:
                return r.status, ""
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")[:300]

    with ThreadPoolExecutor(max_workers=51) as pool:
        writer = pool.submit(append_notes)
        statuses = list(pool.map(get, [paths[i % len(paths)] for i in range(50)]))
        writer.result()
    assert [s for s in statuses if s[0] != 200] == []
    # and the index caught up with every note appended
    after = json.loads(urllib.request.urlopen(url + "/api/commits", timeout=120).read())
    assert sum(c["profiles"] for c in after) == 6 * 3 + 12


def test_a_profile_of_20000_functions_gives_bounded_pages_and_export(empty_repo, tmp_path):
    """A pulled line with 20,000 functions: the commit page lists the 300 with the most time (and any
    with a verdict) and says how many more there are; the export writes the function pages those link
    to, not 20,000 (it took 34 s, the page 8 MB)."""
    from gitperf.core.model import FunctionStats
    from gitperf.web.pages import PAGE_FUNCTIONS
    commit = git(empty_repo, "rev-parse", "HEAD")
    p = profile(commit, np.random.default_rng(0))
    many = tuple(FunctionStats(f"ns::fn_{i}<int>(int)", i + 1, 1000 * i + 5, 500 * i + 1) for i in range(20_000))
    NotesStore(open_repo(empty_repo)).add(commit, replace(p, functions=p.functions + many))
    page = create_app(empty_repo).test_client().get(f"/commit/{commit}").get_data(as_text=True)
    rows = page.split('class="sortable functions"')[1].split("</table>")[0].count("<tr")
    assert rows == PAGE_FUNCTIONS + 1  # and the heading row
    assert "ns::fn_19999&lt;int&gt;(int)" in page
    assert "ns::fn_0&lt;int&gt;(int)" not in page
    assert f"{20_000 + len(p.functions) - PAGE_FUNCTIONS} more function(s)" in page
    out = tmp_path / "site"
    assert read_cli(empty_repo, "report", "--format", "html", "-o", str(out)).returncode in (0, 3)
    assert len(list((out / "function").iterdir())) == PAGE_FUNCTIONS


def test_a_function_page_draws_one_chart_per_workload_whatever_the_plans(empty_repo):
    """Traced and stack-sampled runs of one function, under two plans: one chart, a line per measure
    (inclusive at native speed, own time from samples), each labelled; the checks' marks on it."""
    commits = history(empty_repo, 3, runs=2)
    store = NotesStore(open_repo(empty_repo))
    rng = np.random.default_rng(7)
    for c in commits:
        for _ in range(2):
            p = profile(c, rng)
            sampled = tuple(msgspec.structs.replace(f, sampled=True) if f.name == "parse" else f for f in p.functions)
            store.add(c, replace(p, functions=sampled, plan=replace(p.plan, mode="hybrid")))
    page = create_app(empty_repo).test_client().get("/function/parse").get_data(as_text=True)
    figs = re.findall(r'<script type="application/json" id="history-\d+">(.*?)</script>', page, re.S)
    assert len(figs) == 1
    names = {t.get("name", "") for t in json.loads(figs[0])["data"]}
    assert {"inclusive at native speed (traced) (median of runs)", "own time (stack samples) (median of runs)"} <= names


def test_a_commit_page_lists_each_function_once_with_its_other_sessions_under_it():
    """A commit collected twice (a paired check's plan and a plain collect's) listed every function
    twice with different totals.  One row each: the session its check compared, else the one with
    the most runs; the others as a drill-down."""
    from gitperf.web.pages import one_row_each
    rows = [{"workload": "w", "name": "parse", "config_key": "k-collect", "runs": 5, "plan": "trace all"},
            {"workload": "w", "name": "parse", "config_key": "k-paired", "runs": 3, "plan": "hybrid: 2 traced"},
            {"workload": "w", "name": "emit", "config_key": "k-collect", "runs": 5, "plan": "trace all"}]
    out = {r["name"]: r for r in one_row_each(rows, {("w",): "k-paired"})}
    assert out["parse"]["config_key"] == "k-paired"
    assert [o["config_key"] for o in out["parse"]["others"]] == ["k-collect"]
    assert out["emit"]["others"] == []
    assert len(one_row_each(rows, {})) == 2
    assert one_row_each(rows, {})[0]["config_key"] == "k-collect"  # unchecked: the session with the most runs


def test_a_commit_whose_run_got_faster_is_one_green_marker_and_no_regression(empty_repo):
    """Issue #34: `/` drew a commit with a degraded function inside a faster run as a red ▲ over a
    green ▼.  The timeline draws one marker per commit from its check's verdict for the workload
    (`checks.result_of`: the run got faster, so the commit is faster), with that verdict's functions
    on hover; /regressions lists only commits whose verdict is a degradation, as `check` says."""
    # commit 4: the run (main) 40% faster, parse 50% slower inside it
    commits = history(empty_repo, 5, slow_at=4, slow={"main": 0.6, "parse": 1.5})
    verdict = json.loads(read_cli(empty_repo, "check", commits[4], "--json").stdout)
    kinds = {c["function"]: c["type"] for c in verdict["changes"]}
    assert verdict["result"] == "optimization"
    assert kinds["main"] == "optimization"
    assert kinds["parse"] == "degradation"
    with create_app(str(empty_repo)).test_client() as client:
        page = client.get("/").get_data(as_text=True)
        regressions = client.get("/api/regressions").get_json()
        seq = {c["sha"]: c["seq"] for c in client.get("/api/commits").get_json()}
    fig = json.loads(re.search(r'<script type="application/json" id="total-1">(.*?)</script>', page, re.S)[1])
    markers = {t["name"]: t["x"] for t in fig["data"] if t.get("mode") == "markers"}
    assert markers == {"optimizations": [seq[commits[4]]]}, markers
    hover = next(t for t in fig["data"] if t.get("name") == "optimizations")["text"][0]
    assert "main" in hover
    assert "parse" not in hover
    assert regressions == []
    assert "Latest degradations" not in page


def test_a_function_page_lists_each_commit_once_with_its_other_sessions_under_it(empty_repo):
    """Issue #34: the slowed function's page listed the same commit once per session, with different
    totals and no label.  One row per commit and workload (the session its check compared), the
    other sessions as a drill-down."""
    commits = history(empty_repo, 3)
    store = NotesStore(open_repo(empty_repo))
    rng = np.random.default_rng(7)
    for _ in range(2):  # commit 2 collected again under another plan
        p = profile(commits[2], rng)
        store.add(commits[2], replace(p, plan=replace(p.plan, mode="stack")))
    with create_app(str(empty_repo)).test_client() as client:
        page = client.get("/function/parse").get_data(as_text=True)
    table = page[page.index("<h2>Per commit</h2>"):]
    assert table.count(f'/commit/{commits[2]}"') == 1, table[:3000]
    assert "1 other session" in table
    assert "stack" in table
    assert all(table.count(f'/commit/{c}"') == 1 for c in commits)


def _figure(page: str, fig_id: str) -> dict:
    """The plotly figure a page embeds under `fig_id` (the `plot` macro's JSON script)."""
    import html
    m = re.search(rf'<script type="application/json" id="{re.escape(fig_id)}">(.*?)</script>', page, re.S)
    assert m, f"no figure {fig_id}"
    return json.loads(html.unescape(m.group(1)))


def test_the_commit_page_shows_the_checks_changes_at_a_glance(synthetic):
    """Issue #60: the commit page was a wall of text.  Above its table, one picture: every tested
    function's change with its interval, coloured by verdict, the threshold's band shaded, the run as
    a whole first; the table says what before → after measure once, below it; the bars' names are
    the axis labels only."""
    from gitperf.web import create_app
    root, commits = synthetic
    client = create_app(root).test_client()
    page = client.get(f"/commit/{commits[4]}").get_data(as_text=True)
    check = client.get(f"/api/commit/{commits[4]}").get_json()["check"]
    forest = _figure(page, "forest-1")
    [trace] = forest["data"]
    tested = [c for c in check["changes"] if c["relative"] is not None]
    assert len(trace["y"]) == len(tested)
    assert trace["y"][-1] == "main (the run)"  # first from the top (plotly draws the first row at the bottom)
    import html
    drawn = {html.unescape(d[2]): x for d, x in zip(trace["customdata"], trace["x"])}
    for c in tested:  # each function where the stored check puts it (the ratio after/before), in its direction
        assert drawn[c["function"]] == pytest.approx(1 + c["relative"]), c["function"]
    parse = next(c for c in tested if c["function"] == "parse")
    assert parse["type"] == "degradation"
    assert drawn["parse"] > 1
    assert forest["layout"]["xaxis"]["type"] == "log"
    band = forest["layout"]["shapes"][0]
    assert (band["x0"], band["x1"]) == pytest.approx((1 - CheckConfig().min_relative, 1 + CheckConfig().min_relative))
    shown = re.sub(r"<[^>]+>", "", page.split('<table class="report">')[1].split("</table>")[0])  # (titles hover)
    assert "inclusive time per run" not in shown  # the measure: once, below the table
    assert "before → after:" in page.split('<table class="report">')[1].split("<h2")[0]
    bars = _figure(page, "bars-1")
    assert bars["data"][0]["textposition"] == "none"  # a bar's name once: its axis label


def _runs_of(workload: str, seed: int, kinds: str):
    """One run of `workload`: its functions traced (t), traced with probes beyond CORRECTABLE_SHARE (p),
    stack-sampled (s) or not called (0), one a letter."""
    from helpers import make_profile
    from gitperf.core.model import StoredProfile
    p = make_profile("c" * 40, workload, n_functions=len(kinds), seed=seed)
    fs = [msgspec.structs.replace(f, sampled=k == "s", count=0 if k in "s0" else f.count, total_ns=0 if k == "0" else f.total_ns,
                  probe_ns={"t": f.total_ns // 10 + seed, "p": f.total_ns // 2}.get(k, 0))
          for f, k in zip(p.functions, kinds)]
    return StoredProfile("c" * 40, seed, f"id{seed}", replace(p, functions=tuple(fs)))


def test_the_function_pages_natives_from_arrays_are_the_rows_one_function_at_a_time():
    """`function_native_rows` reads the runs of a workload that list the same functions, each of one kind,
    from their arrays (`Profile.numbers`): the same rows in the same order as one function of one run at a
    time, for interleaved workloads too; runs that differ take the one-at-a-time path."""
    from gitperf.views import index_rows as R

    def one_at_a_time(runs):
        by = R._natives_by_function([sp.profile for sp in runs if sp.profile.complete])
        return R._native_columns("c" * 40, [*by], [len(v) for v in by.values()], R._centered([*by.values()]))

    aligned = [_runs_of("w1", 1, "ttpst0t"), _runs_of("w2", 2, "tst"), _runs_of("w1", 3, "ttpst0t"),
               _runs_of("w2", 4, "tst"), _runs_of("w1", 5, "ttpst0t")]
    assert all(R._aligned_natives([sp.profile for sp in aligned[k::2]]) is not None for k in (0, 1))
    assert R.function_native_rows("c" * 40, aligned) == one_at_a_time(aligned)
    assert len(R.function_native_rows("c" * 40, aligned)["name"]) == 8, "w1: 5 rows (one not correctable, one not called), w2: 3"
    for differing in ([_runs_of("w1", 1, "ttps"), _runs_of("w1", 2, "tpps")],  # (a kind differs between runs)
                      [_runs_of("w1", 1, "tts"), _runs_of("w2", 2, "tt"), _runs_of("w1", 3, "ttst")]):  # (a function more)
        assert R._aligned_natives([sp.profile for sp in differing if sp.profile.header.workload == "w1"]) is None
        assert R.function_native_rows("c" * 40, differing) == one_at_a_time(differing)


def test_a_notes_summaries_from_the_counted_table_are_those_from_each_functions_values():
    """`index_rows.summaries` takes the counted functions' table (`timing.exact`) as the rows' values where
    every function was counted in every run, else each function's values one at a time: the same row of
    every function either way (here the second way by a sampled function only one run has)."""
    from helpers import make_profile
    from gitperf.core.model import FunctionStats, StoredProfile
    from gitperf.views import index_rows as R
    runs = [make_profile("c" * 40, n_functions=5, seed=s) for s in (1, 7, 3)]
    extra = FunctionStats(name="extra", count=0, total_ns=900, exclusive_ns=900, sampled=True, ci=(800.0, 1000.0))
    more = runs[:2] + [replace(runs[2], functions=runs[2].functions + (extra,))]
    rows = lambda ps: R.summaries("c" * 40, [StoredProfile("c" * 40, i, f"id{i}", p) for i, p in enumerate(ps)])  # noqa: E731
    table = lambda s: [tuple(s[k][i] for k in R.SUMMARY_COLUMNS) for i in range(len(s["name"]))]  # noqa: E731
    counted, each = table(rows(runs)), table(rows(more))
    assert [r[3] for r in each] == [f"fn_{i}<int>" for i in range(5)] + ["extra"]
    assert counted == each[:5]
    assert all(r[8] is not None and r[8] < r[7] < r[9] for r in counted), "a range around each center"
