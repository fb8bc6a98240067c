"""`git perf report --format html -o DIR`: the dashboard's pages as static files (a CI artifact).

The pages are rendered by the same app and templates in export mode, where links are relative file
paths (web/links.py), so DIR opens from disk or any static host with no server and no network."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import pygit2
from flask import url_for

from gitperf.core.errors import GitPerfError
from gitperf.views.index import Index
from gitperf.web import create_app
from gitperf.web.links import EXPORTED
from gitperf.web.pages import PAGE_FUNCTIONS, PLOTLY_JS, STATIC


def export_site(repo_path: str | Path, out: str | Path, progress: Callable[[str], None] | None = None) -> list[Path]:
    say = progress or (lambda _m: None)
    out = Path(out)
    app = create_app(repo_path, export=True)
    with app.app_context():
        repo = pygit2.Repository(app.config["REPO_PATH"])
        idx = Index(repo, app.config["CHECK"], app.config["INDEX_PATH"])
        try:
            idx.update(progress=say)
            # every commit of HEAD's line (pages link parents and level-shift starts) and every noted one
            commits = list(dict.fromkeys([c["sha"] for c in idx.commits()] + idx.noted_commits()))
            functions = idx.function_names(PAGE_FUNCTIONS)  # the pages the commit pages link to
        finally:
            idx.close()
    pages = [("pages.overview", "/", {}), ("pages.regressions", "/regressions", {})]
    pages += [("pages.commit", f"/commit/{c}", {"sha": c}) for c in commits]
    pages += [("pages.function", None, {"name": n}) for n in functions]
    written = []
    (out / "static").mkdir(parents=True, exist_ok=True)
    for f in ("app.css", "app.js"):
        shutil.copyfile(STATIC / f, out / "static" / f)
    shutil.copyfile(PLOTLY_JS / "plotly.min.js", out / "static" / "plotly.min.js")
    client = app.test_client()
    with app.test_request_context():
        urls = [url or url_for(ep, **values) for ep, url, values in pages]
    for i, ((endpoint, _, values), url) in enumerate(zip(pages, urls)):
        if i % 50 == 0 and len(pages) > 50:
            say(f"writing pages: {i}/{len(pages)}")
        r = client.get(url)
        if r.status_code != 200:
            raise GitPerfError(f"rendering {url} failed with HTTP {r.status_code} (a bug: please report it)")
        dest = out / EXPORTED[endpoint](values)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(r.data)
        written.append(dest)
    return written
