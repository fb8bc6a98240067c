"""The git perf dashboard (DESIGN.md §1 views): a Flask app over the sqlite index.

`create_app(path)` serves the repository at `path`.  Every page request first brings the index up to
date with the notes (a no-op costs ~1 ms), so a collection that just finished shows on reload.  The
app reads the repository and writes only its index; it runs no command and needs no privileges.
"""

from __future__ import annotations

from pathlib import Path

import pygit2
from flask import Flask, g, render_template, request

from gitperf import config
from gitperf.index import Index
from gitperf.store import open_repo


def create_app(repo_path: str | Path = ".", index_path: str | Path | None = None, export: bool = False) -> Flask:
    app = Flask(__name__, static_folder=None)  # pages.static_file serves assets and plotly.js
    repo = open_repo(repo_path)
    cfg = config.load(repo.workdir) if repo.workdir else None
    app.config.update(REPO_PATH=str(repo.path), CHECK=cfg.check if cfg else config.CheckConfig(),
                      INDEX_PATH=str(index_path) if index_path else None, EXPORT=export)
    app.json.sort_keys = False  # the API keeps the index's column order

    from web import api, links, pages
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp, url_prefix="/api")
    app.jinja_env.globals.update(link=links.link, static=links.static, commit_url_template=links.commit_url_template)
    app.jinja_env.filters.update(links.FILTERS)

    @app.before_request
    def _index():
        g.repo = pygit2.Repository(app.config["REPO_PATH"])
        g.index = Index(g.repo, app.config["CHECK"], app.config["INDEX_PATH"])
        if not app.config["EXPORT"] and request.endpoint != "pages.static_file":
            g.index.update()

    @app.errorhandler(404)
    def _not_found(e):
        return render_template("404.html", message=getattr(e, "description", "")), 404

    return app
