"""URLs and formatting for the templates.

A page links with `link(endpoint, **values)`: a Flask route when served, a relative file path when
exported as static files (`git perf report --format html`), so the same templates serve both.
Exported function pages are named by a hash: C++ names hold `<`, `>`, `/` and `:`."""

from __future__ import annotations

import base64
import hashlib

from flask import current_app, request, url_for
from werkzeug.routing import PathConverter, ValidationError

from gitperf.core import names
from gitperf.core.fmt import fmt_confidence, fmt_date, fmt_ns
from gitperf.views.report import amount, decided_by

# endpoint -> path of the exported file (None: not exported, the link is left out)
EXPORTED = {
    "pages.overview": lambda v: "index.html",
    "pages.regressions": lambda v: "regressions.html",
    "pages.commit": lambda v: f"commit/{v['sha']}.html",
    "pages.function": lambda v: f"function/{function_file(v['name'])}.html",
}
TOP_LEVEL = ("pages.overview", "pages.regressions")


class FunctionName(PathConverter):
    """A function's name in a URL (`<fn:name>`), whatever a pulled note calls it.  A name that would
    not come back from its path as it is (empty, a leading or doubled `/`, a `.` or `..` segment, a
    control character, a leading `~`: `/etc/passwd`, `x\ny`) travels as `~` + its base64url; every
    other name, C++ ones included, as its readable path."""

    def to_url(self, value: str) -> str:
        parts = value.split("/")
        if (value and not value.startswith("~") and "" not in parts and not {".", ".."} & set(parts)
                and value.isprintable()):
            return super().to_url(value)
        return "~" + base64.urlsafe_b64encode(value.encode("utf-8", "surrogatepass")).decode().rstrip("=")

    def to_python(self, value: str) -> str:
        if not value.startswith("~"):
            return value
        try:
            return base64.urlsafe_b64decode(value[1:] + "=" * (-len(value[1:]) % 4)).decode("utf-8", "surrogatepass")
        except ValueError:
            raise ValidationError() from None


def function_file(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()[:16]


def _prefix() -> str:
    return "" if request.endpoint in TOP_LEVEL else "../"


def link(endpoint: str, **values) -> str | None:
    if not current_app.config["EXPORT"]:
        return url_for(endpoint, **values)
    path = EXPORTED.get(endpoint)
    return _prefix() + path(values) if path else None


def static(filename: str) -> str:
    if current_app.config["EXPORT"]:
        return f"{_prefix()}static/{filename}"
    return url_for("pages.static_file", filename=filename)


def commit_url_template() -> str:
    """For the plots' click handler: a commit's URL with SHA where the id goes."""
    return link("pages.commit", sha="SHA")


def _pct(x) -> str:
    return "" if x is None else f"{x * 100:+.1f}%"


def _ns(x) -> str:
    return "" if x is None else fmt_ns(x)


def _amount(change: dict) -> str:
    """A time verdict's ns a run and share of the run's change, as the CLI words it (views.report.amount)."""
    if change.get("type") not in ("degradation", "optimization", "accepted"):
        return ""
    return amount(change.get("absolute_ns"), change.get("share"))


def _profiled(name: str) -> bool:
    """Whether a function's page exists (`IndexQuery.profiled`), asked once a request per name."""
    from flask import g

    from gitperf.web.db import get_index
    seen = g.setdefault("profiled", {})
    if name not in seen:
        seen[name] = get_index().profiled(name)
    return seen[name]


def profiled_already(names) -> None:
    """Names a page read from profiles' rows: their pages exist, and `_profiled` need not ask the
    index for each (a query a name was a third of the commit page's time at 200 functions)."""
    from flask import g
    g.setdefault("profiled", {}).update((n, True) for n in names)


FILTERS = {"pct": _pct, "confidence": fmt_confidence, "date": fmt_date, "ns": _ns, "short": lambda s: (s or "")[:12],
           "amount": _amount, "decided_by": decided_by,
           # function names: the symbol stays in links and data; people read these (core.names)
           "readable": names.readable, "shortname": lambda s: names.short(s, 70), "profiled": _profiled}
