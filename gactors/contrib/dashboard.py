"""A live dashboard of an actor system in the browser: a read-only WSGI application.

``DashboardApp(system=None, *, token=None)`` serves one page (the supervision tree,
the latest failures with their directive, dead letters per second, hub-blocking events
naming the actor and, with a cluster, the members, every node's tree and where each
singleton and shard runs) that updates itself by polling the JSON view ``api/state``.

Mount it anywhere (it only looks at ``PATH_INFO`` and builds every link relative to
``SCRIPT_NAME``)::

    from werkzeug.middleware.dispatcher import DispatcherMiddleware
    from gactors.contrib.dashboard import DashboardApp

    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/actors": DashboardApp(token=TOKEN)})

or serve it alone: ``python -m gactors dashboard --bind 127.0.0.1:8020``.

Routes (``GET`` and ``HEAD`` only; anything else is 404 or 405):

* ``/`` — the page (its script and style are inlined from the package's
  ``dashboard_static`` files: there is no file serving at all);
* ``/api/state`` — the whole state as JSON (see ``docs/dashboard.md``); repeat
  ``open=/user/x`` to include the children of those nodes, ``limit`` children each;
* ``/api/tree?path=/user/x`` — one actor and its first ``limit`` children.

With ``token`` set, every request must carry it, as ``Authorization: Bearer <token>``
or ``?token=<token>``; others get 401. ``system=None`` means the worker system of the
process (:func:`gactors.contrib.worker_system`), looked up at each request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from gactors.contrib import worker_system
from gactors.contrib._observer import SystemObserver, observer_for
from gactors.exceptions import IllegalStateError

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_OPEN", "POLL_INTERVAL", "DashboardApp"]

_log = logging.getLogger("gactors.dashboard")

DEFAULT_LIMIT = 100
"""Children listed per open node unless ``limit`` says otherwise."""

MAX_LIMIT = 1000
"""The largest ``limit`` accepted."""

MAX_OPEN = 500
"""Open nodes one request may ask for (more are ignored)."""

POLL_INTERVAL = 1.0
"""Seconds between two polls of ``api/state`` by the page (5 s while it is hidden)."""

StartResponse = Callable[..., Any]
Environ = dict[str, Any]

# The page's files, shipped in the package (package-data); read once, on first use.
_STATIC = "dashboard_static"
_page_cache: tuple[bytes, str] | None = None


def _static_text(name: str) -> str:
    return resources.files("gactors.contrib").joinpath(_STATIC).joinpath(name).read_text("utf-8")


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _page() -> tuple[bytes, str]:
    """The page with its script and style inlined, and the CSP that allows only them."""
    global _page_cache
    if _page_cache is None:
        html = _static_text("index.html")
        css = _static_text("dashboard.css")
        js = _static_text("dashboard.js").replace("__POLL_MS__", str(int(POLL_INTERVAL * 1000)))
        body = html.replace("/*__CSS__*/", css).replace("/*__JS__*/", js)
        # Only the page's own inline script and style may run; data is fetched from the
        # same origin only; the page cannot be framed.
        csp = (
            f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
            "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
            "base-uri 'none'; form-action 'none'"
        )
        _page_cache = (body.encode("utf-8"), csp)
    return _page_cache


def _cluster_state(system: ActorSystem) -> dict[str, Any] | None:
    """The cluster part of ``api/state``, or None when the system is not a cluster node.

    The one place that knows about :mod:`gactors.cluster` (imported here, lazily: the
    dashboard must work without it). The shape, which the page renders::

        {"self": "gactors://shop@node-a",
         "members": [{"address": str, "status": "up" | "leaving" | "unreachable",
                      "roles": [str, ...]}, ...],
         "nodes": [{"address": str, "tree": [node, ...] | None, "error": str | None}],
         "singletons": [{"name": str, "node": str | None}],
         "shards": [{"type_name": str, "shard": str, "node": str | None,
                     "entities": int | None}]}

    ``nodes[].tree`` has the shape of the top-level ``tree`` (the local node's is filled
    in by the caller); another node's tree is None until it can be fetched from it.
    """
    if getattr(system.settings, "cluster", None) is None:
        return None
    from gactors.cluster import Cluster  # type: ignore[import-not-found, unused-ignore]

    cluster = Cluster(system)
    self_address = str(cluster.self_address)
    members = [
        {"address": str(m.address), "status": str(m.status), "roles": sorted(m.roles)}
        for m in cluster.members
    ]
    return {
        "self": self_address,
        "members": members,
        "nodes": [
            {"address": m["address"], "tree": None, "error": None}
            for m in members
            if m["address"] != self_address
        ],
        # Filled once gactors.cluster says where singletons and shards run.
        "singletons": [],
        "shards": [],
    }


class _HTTPError(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DashboardApp:
    """The dashboard as a WSGI application (read-only; see the module docstring).

    ``system`` is the actor system to show (None: the worker system of the process,
    looked up at every request, so the app can be created before the system exists,
    e.g. in a gunicorn app module). ``token``, when set, is required on every request.
    Failures, dead letters and hub blocks are recorded from the moment the app first
    sees the system (at construction when ``system`` is given).
    """

    def __init__(self, system: ActorSystem | None = None, *, token: str | None = None) -> None:
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("token must be a non-empty string or None")
        self._system = system
        self._token = token.encode("utf-8") if token is not None else None
        if system is not None:
            observer_for(system)

    # -- WSGI -------------------------------------------------------------------------------
    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        try:
            query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            self._check_token(environ, query)
            if method not in ("GET", "HEAD"):
                raise _HTTPError("405 Method Not Allowed", "the dashboard is read-only")
            status, headers, body = self._route(environ, query)
        except _HTTPError as e:
            status, headers, body = self._error(e)
        except IllegalStateError as e:  # no worker system in this process
            status, headers, body = self._error(_HTTPError("503 Service Unavailable", str(e)))
        except Exception:
            _log.exception("dashboard request %s failed", environ.get("PATH_INFO"))
            status, headers, body = self._error(
                _HTTPError("500 Internal Server Error", "internal error (see the server log)")
            )
        headers = [
            *headers,
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ]
        start_response(status, headers)
        return [b""] if method == "HEAD" else [body]

    def _check_token(self, environ: Environ, query: dict[str, list[str]]) -> None:
        expected = self._token
        if expected is None:
            return
        given = b""
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if auth[:7].lower() == "bearer ":
            given = auth[7:].strip().encode("utf-8", "replace")
        elif query.get("token"):
            given = query["token"][0].encode("utf-8", "replace")
        if not hmac.compare_digest(given, expected):
            raise _HTTPError(
                "401 Unauthorized",
                "this dashboard needs its token: add ?token=... to the address, or send "
                "'Authorization: Bearer ...'",
            )

    def _error(self, e: _HTTPError) -> tuple[str, list[tuple[str, str]], bytes]:
        headers = [("Content-Type", "application/json")]
        if e.status.startswith("401"):
            headers.append(("WWW-Authenticate", 'Bearer realm="gactors dashboard"'))
        if e.status.startswith("405"):
            headers.append(("Allow", "GET, HEAD"))
        return e.status, headers, json.dumps({"error": e.message}).encode("utf-8")

    def _route(
        self, environ: Environ, query: dict[str, list[str]]
    ) -> tuple[str, list[tuple[str, str]], bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "":
            # Mounted at /prefix and asked for /prefix: the page's links are relative,
            # so they need the trailing slash.
            qs = environ.get("QUERY_STRING", "")
            location = environ.get("SCRIPT_NAME", "") + "/" + (f"?{qs}" if qs else "")
            return "301 Moved Permanently", [("Location", location)], b""
        if path == "/":
            body, csp = _page()
            return (
                "200 OK",
                [("Content-Type", "text/html; charset=utf-8"), ("Content-Security-Policy", csp)],
                body,
            )
        if path == "/api/state":
            return self._json(self.state(query.get("open", ()), _limit(query)))
        if path == "/api/tree":
            where = query.get("path", ["/"])[0]
            if not where.startswith("/"):
                raise _HTTPError("400 Bad Request", f"path must start with '/': {where!r}")
            level = self._observer().node(where, _limit(query))
            if level is None:
                raise _HTTPError("404 Not Found", f"no actor at {where}")
            return self._json(level)
        raise _HTTPError("404 Not Found", f"no such page: {path}")

    @staticmethod
    def _json(data: Any) -> tuple[str, list[tuple[str, str]], bytes]:
        body = json.dumps(data, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return "200 OK", [("Content-Type", "application/json")], body

    # -- the state --------------------------------------------------------------------------
    def _observer(self) -> SystemObserver:
        system = self._system if self._system is not None else worker_system()
        return observer_for(system)

    def state(self, open_paths: Iterable[str] = (), limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
        """What ``api/state`` returns (documented in ``docs/dashboard.md``)."""
        obs = self._observer()
        opened = {"/", "/user"}
        for p in open_paths:
            if len(opened) >= MAX_OPEN:
                break
            if p.startswith("/"):
                opened.add(p.rstrip("/") or "/")
        totals = obs.totals()
        tree = obs.tree(opened, limit)
        cluster = _cluster_state(obs.system)
        if cluster is not None:
            cluster["nodes"].insert(0, {"address": cluster["self"], "tree": tree, "error": None})
        return {
            "version": 1,
            "time": time.time(),
            "poll_interval": POLL_INTERVAL,
            "system": obs.system_info(),
            "totals": {
                k: totals[k] for k in ("actors", "mailbox", "max_mailbox", "restarts", "truncated")
            },
            "hot": {
                "mailbox": totals["deepest_mailboxes"],
                "restarts": totals["most_restarts"],
            },
            "messages": {
                "processed": obs.processed(),
                "per_second": round(obs.messages_per_second(), 1),
            },
            "dead_letters": {
                "total": obs.dead_letters,
                "per_second": obs.dead_letters_per_second(),
                "history": obs.dead_letter_history(),
            },
            "failures": list(obs.failures),
            "directives": dict(obs.directives),
            "hub_blocked": {
                "total": obs.hub_blocked,
                "seconds": round(obs.hub_blocked_seconds, 4),
                "recent": list(obs.blocks),
            },
            "tree": tree,
            "limit": limit,
            "cluster": cluster,
        }


def _limit(query: dict[str, list[str]]) -> int:
    raw = query.get("limit", [str(DEFAULT_LIMIT)])[0]
    try:
        n = int(raw)
    except ValueError:
        raise _HTTPError("400 Bad Request", f"limit must be an integer, not {raw!r}")
    if not 1 <= n <= MAX_LIMIT:
        raise _HTTPError("400 Bad Request", f"limit must be between 1 and {MAX_LIMIT}, not {n}")
    return n


class _AccessLog:
    """pywsgi's access log, into logging, with ``token=...`` blanked out of the lines."""

    _TOKEN = re.compile(r"([?&]token=)[^&\s\"]*")

    def write(self, line: str) -> None:
        _log.info("%s", self._TOKEN.sub(r"\1***", line.rstrip("\n")))


def serve(app: DashboardApp, host: str = "127.0.0.1", port: int = 8020) -> Any:
    """Serve ``app`` with gevent's WSGI server on ``host:port`` (returns the started server)."""
    from gevent.pywsgi import WSGIServer

    server = WSGIServer((host, port), app, log=_AccessLog(), error_log=_log)
    server.start()
    return server
