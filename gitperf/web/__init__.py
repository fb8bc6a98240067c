"""The git perf dashboard (ARCHITECTURE.md §11): a Flask app over the sqlite index.

`create_app(path)` wires the configuration and the blueprints.  A view's first look at the index
(`db.get_index`) brings it up to date with the notes when they moved, so a collection that just
finished shows on reload.  The app reads the repository and writes only its index; it runs no
command and needs no privileges.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, abort, render_template, request

from gitperf.core import config
from gitperf.git.repo import open_repo
from gitperf.views import index

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The pages load only their own scripts and styles (plotly sets inline styles); no frames, no plugins.
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
}


def host_name(host: str) -> str:
    """The name in a Host header, without the port ("[::1]:8642" -> "::1")."""
    if host.startswith("["):
        return host[1:host.find("]")].lower()
    return (host.rsplit(":", 1)[0] if host.count(":") == 1 else host).lower()


def create_app(repo_path: str | Path = ".", index_path: str | Path | None = None, export: bool = False,
               hosts: tuple[str, ...] = LOOPBACK) -> Flask:
    """`hosts`: the names the Host header may carry (a page on another site that rebinds its DNS name
    to 127.0.0.1 sends its own name, and is refused); empty allows any (serving on 0.0.0.0)."""
    app = Flask(__name__, static_folder=None)  # pages.static_file serves assets and plotly.js
    repo = open_repo(repo_path)
    cfg = config.load(repo.workdir) if repo.workdir else None
    app.config.update(REPO_PATH=str(repo.path), CHECK=cfg.check if cfg else config.CheckConfig(),
                      INDEX_PATH=str(index_path or index.index_path(repo)), EXPORT=export)
    app.json.sort_keys = False  # the API keeps the index's column order

    from gitperf.web import api, db, links, pages
    app.url_map.converters["fn"] = links.FunctionName  # before the blueprints' routes use it
    db.init_app(app)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp, url_prefix="/api")
    app.jinja_env.globals.update(link=links.link, static=links.static, commit_url_template=links.commit_url_template)
    app.jinja_env.filters.update(links.FILTERS)

    allowed = {h.lower() for h in hosts}

    @app.before_request
    def _host():
        if allowed and host_name(request.host) not in allowed:
            abort(400, f"this dashboard answers to {', '.join(sorted(allowed))}, not {request.host!r}")

    @app.after_request
    def _headers(response):
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.errorhandler(404)
    def _not_found(e):
        return render_template("404.html", message=getattr(e, "description", "")), 404

    @app.errorhandler(400)
    def _bad_request(e):
        return f"400 Bad Request: {getattr(e, 'description', '')}\n", 400, {"Content-Type": "text/plain; charset=utf-8"}

    return app
