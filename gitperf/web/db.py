"""The index as a per-request resource (Flask tutorial's `get_db`): opened lazily on `g` by the first
view that asks for it, brought up to date with the notes first when they moved, closed on teardown."""

from __future__ import annotations

import pygit2
from flask import Flask, current_app, g

from gitperf.views.index import Index, IndexQuery


def refresh(app: Flask) -> None:
    """Update the index when the notes or HEAD moved (cheap to ask: the notes ref's commit and HEAD).  Concurrent
    requests wait on the index's update lock, then find nothing left to do."""
    idx = Index(pygit2.Repository(app.config["REPO_PATH"]), app.config["CHECK"], app.config["INDEX_PATH"])
    try:
        if idx.stale():
            idx.update()
    finally:
        idx.close()


def get_index() -> IndexQuery:
    """This request's read-only view of the index."""
    if "index" not in g:
        app = current_app._get_current_object()
        if not app.config["EXPORT"]:  # an export updated it once, before rendering
            refresh(app)
        g.index = IndexQuery(app.config["INDEX_PATH"])
    return g.index


def close_index(_exc: BaseException | None = None) -> None:
    idx = g.pop("index", None)
    if idx is not None:
        idx.close()


def init_app(app: Flask) -> None:
    app.teardown_appcontext(close_index)
