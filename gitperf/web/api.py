"""The JSON API: the pages' data for scripts (stable routes; fields may be added, never renamed)."""

from __future__ import annotations

from flask import Blueprint, abort, jsonify

from gitperf.web.db import get_index
from gitperf.web.pages import commit_or_404, compare_result

bp = Blueprint("api", __name__)


@bp.route("/commits")
def commits():
    """HEAD's first-parent line, oldest first: id, subject, author, date, profiles, check result."""
    return jsonify(get_index().commits())


@bp.route("/commit/<sha>")
def commit(sha: str):
    sha = commit_or_404(sha)
    idx = get_index()
    return jsonify({"commit": sha, "info": idx.commit_info(sha), "profiles": idx.profiles(sha),
                    "functions": idx.functions(sha), "check": idx.check(sha)})


@bp.route("/function/<fn:name>")
def function(name: str):
    history = get_index().function_history(name)
    if not history:
        abort(404, f"no function {name!r} in any profile")
    return jsonify({"function": name, "history": history, "changes": get_index().function_changes(name)})


@bp.route("/compare/<a>/<b>")
def compare(a: str, b: str):
    return jsonify(compare_result(a, b).to_dict(all_functions=True))


@bp.route("/regressions")
def regressions():
    return jsonify(get_index().regressions())


@bp.errorhandler(404)
def not_found(e):
    return jsonify({"error": getattr(e, "description", "not found")}), 404
