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
* ``/api/tree?path=/user/x`` — one actor and its first ``limit`` children;
* ``/api/actor?path=/user/x`` — one actor in detail (the drill-down: mailbox depth over
  time, last failure with its traceback, children, watchers, persistence, reminders).

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
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from greenlet import getcurrent

from gactors._extension import ExtensionId
from gactors._observer import AUTO_EXPAND, SystemObserver, observer_for
from gactors.contrib import worker_system
from gactors.contrib._members import cluster_members
from gactors.contrib._views import actor_view, delivery_view, reminders_view, sum_class_events
from gactors.exceptions import IllegalStateError

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = [
    "CLUSTER_ASK_TIMEOUT",
    "CLUSTER_CACHE",
    "CLUSTER_WAIT",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_OPEN",
    "MAX_SHARD_ROWS",
    "POLL_INTERVAL",
    "DashboardApp",
]

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


CLUSTER_ASK_TIMEOUT = 2.0
"""Seconds another node has to answer for its tree before it is shown as timed out."""

CLUSTER_WAIT = 0.5
"""Seconds one request waits, at most, for the other nodes' answers (asked in
parallel); a slower node is shown with its previous tree and how long it has not
answered."""

CLUSTER_CACHE = 1.0
"""Seconds another node's answer is reused before it is asked again."""

MAX_SHARD_ROWS = 5000
"""Shard rows ``api/state`` lists at most (the per-type summary counts them all)."""


class _Asked:
    """What this process knows of one other node: its last answer, the ask in flight."""

    __slots__ = ("asked_at", "error", "future", "key", "reply", "reply_at")

    def __init__(self) -> None:
        self.key: tuple[Any, ...] | None = None  # (open paths, limit) of the last ask
        self.future: Any = None  # the ask in flight
        self.asked_at = 0.0
        self.reply: Any = None  # the last InspectReply
        self.reply_at = 0.0  # monotonic time of that reply
        self.error: str | None = None  # why the last ask got no reply


class _RemoteNodes:
    """The other nodes' inspector answers for one system, asked in parallel, cached.

    Requests come from any thread or greenlet; the lock guards only the bookkeeping
    (never held while waiting).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.nodes: dict[str, _Asked] = {}

    def collect(
        self,
        system: ActorSystem,
        members: list[dict[str, Any]],
        self_address: str,
        opened: dict[str, set[str]],
        limit: int,
        closed: dict[str, set[str]] | None = None,
        auto: bool = False,
    ) -> dict[str, _Asked]:
        from gactors.cluster._inspect import (
            INSPECTOR,
            InspectRequest,
        )

        now = time.monotonic()
        waiting: list[Any] = []
        with self.lock:
            current = {m["address"] for m in members if m["address"] != self_address}
            for gone in set(self.nodes) - current:
                del self.nodes[gone]  # removed from the cluster: forgotten
            for m in members:
                address = m["address"]
                if address == self_address:
                    continue
                asked = self.nodes.get(address)
                if asked is None:
                    asked = self.nodes[address] = _Asked()
                self._harvest(asked)
                if m["status"] == "unreachable":
                    continue  # asking would only pile messages up in its inbox
                paths = tuple(sorted(opened.get(address, set()) | {"/", "/user"}))
                shut = tuple(sorted((closed or {}).get(address, set())))
                key = (paths, limit, shut, auto)
                if asked.future is not None:
                    # Still in flight: waited for only while it is young; a node that
                    # has not answered for CLUSTER_WAIT costs the next pages nothing.
                    if now - asked.asked_at < CLUSTER_WAIT:
                        waiting.append(asked.future)
                elif (
                    asked.key != key or asked.reply is None or now - asked.reply_at >= CLUSTER_CACHE
                ):
                    asked.key = key
                    asked.asked_at = now
                    asked.future = system.actor_selection(address + INSPECTOR).ask(
                        InspectRequest(paths, limit, auto, shut),
                        timeout=CLUSTER_ASK_TIMEOUT,
                        block=False,
                    )
                    waiting.append(asked.future)
        # Wait for them together: the request waits CLUSTER_WAIT at most in all.
        if waiting and getcurrent() is not system._hub:
            deadline = now + CLUSTER_WAIT
            for fut in waiting:
                try:
                    fut.exception(max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    pass  # still pending: shown as not answering (yet)
        with self.lock:
            for asked in self.nodes.values():
                self._harvest(asked)
            return dict(self.nodes)

    @staticmethod
    def _harvest(asked: _Asked) -> None:
        fut = asked.future
        if fut is None or not fut.done():
            return
        asked.future = None
        exc = fut.exception(0)
        if exc is None:
            reply = fut.get(0)
            if not hasattr(reply, "tree"):  # not an InspectReply: another gactors?
                asked.error = f"unexpected answer: {type(reply).__name__}"
                return
            asked.reply = reply
            asked.reply_at = time.monotonic()
            asked.error = None
        elif isinstance(exc, TimeoutError):
            asked.error = f"timed out: no answer within {CLUSTER_ASK_TIMEOUT:g} s"
        else:
            asked.error = f"{type(exc).__name__}: {exc}"


class _RemoteNodesExtension(ExtensionId[_RemoteNodes]):
    """The other nodes' answers, one cache per system."""

    def create(self, system: ActorSystem) -> _RemoteNodes:
        return _RemoteNodes()


def _node_entry(
    address: str, member: dict[str, Any], asked: _Asked | None, now: float
) -> dict[str, Any]:
    reply = asked.reply if asked is not None else None
    error: str | None = None
    if member["status"] == "unreachable":
        error = "unreachable (no heartbeat): not asked"
    elif asked is not None:
        if asked.future is not None and now - asked.asked_at >= CLUSTER_WAIT:
            error = f"not answering: asked {now - asked.asked_at:.1f} s ago"
        elif asked.error is not None:
            error = asked.error
    entry: dict[str, Any] = {
        "address": address,
        "status": member["status"],
        "tree": None,
        "totals": None,
        "pid": None,
        "as_of": None,
        "truncated": False,
        "error": error,
    }
    if reply is not None:
        entry.update(
            tree=reply.tree,
            totals=reply.totals,
            pid=reply.pid,
            as_of=reply.time,
            truncated=reply.truncated,
        )
    elif error is None:
        entry["error"] = "waiting for its first answer"
    return entry


def _cluster_state(
    system: ActorSystem,
    tree: list[dict[str, Any]] | None = None,
    totals: dict[str, Any] | None = None,
    open_paths: Iterable[str] = (),
    limit: int = DEFAULT_LIMIT,
    closed_paths: Iterable[str] = (),
    auto: bool = False,
    activity: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The cluster part of ``api/state``, or None when the system is not a cluster node.

    The one place of the dashboard that knows about :mod:`gactors.cluster` (imported
    here, lazily: the dashboard must work without it). ``tree``/``totals`` are this
    node's (already walked by the caller); ``open_paths`` are the page's open nodes of
    the other nodes, as full paths (``gactors://shop@node-b/user/x``). The other
    nodes' trees come from their inspectors (:mod:`gactors.cluster._inspect`), asked
    in parallel with a short timeout and cached (:data:`CLUSTER_CACHE`); the request
    waits :data:`CLUSTER_WAIT` at most, so a node that does not answer never holds
    the page up. The shape (documented in ``docs/dashboard.md``)::

        {"self": "gactors://shop@node-a",
         "members": [{"address", "status": "up" | "leaving" | "unreachable", "roles"}],
         "nodes": [{"address", "status", "tree": [row, ...] | None, "totals": {...} | None,
                    "pid": int | None, "as_of": float | None, "truncated": bool,
                    "error": str | None}],      # this node first
         "singletons": [{"name", "node": str | None, "token": int | None}],
         "sharding": [{"type_name", "number_of_shards", "role",
                       "allocation": {address: shards}, "running": int, "entities": int}],
         "shards": [{"type_name", "shard": int, "node", "entities": int,
                     "token": int | None, "state": str}]}
    """
    members = cluster_members(system)
    if members is None:
        return None
    from gactors.cluster._inspect import placement

    self_address = str(system.address)
    obs = observer_for(system)
    local_place = obs.in_hub(placement, system)
    opened = _by_node(open_paths)
    closed = _by_node(closed_paths)
    asked = system.extension(_RemoteNodesExtension).collect(
        system, members, self_address, opened, limit, closed, auto
    )
    now = time.monotonic()
    nodes: list[dict[str, Any]] = [
        {
            "address": self_address,
            "status": next((m["status"] for m in members if m["address"] == self_address), "up"),
            "tree": tree,
            "totals": totals,
            "pid": os.getpid(),
            "as_of": time.time(),
            "truncated": False,
            "error": None,
        }
    ]
    places: list[tuple[str, dict[str, Any]]] = [(self_address, local_place)]
    for m in members:
        address = m["address"]
        if address == self_address:
            continue
        a = asked.get(address)
        nodes.append(_node_entry(address, m, a, now))
        if a is not None and a.reply is not None:
            places.append(
                (address, {"singletons": a.reply.singletons, "sharding": a.reply.sharding})
            )
    singletons, sharding, shards = _where(places)
    if activity is not None and totals is not None:
        nodes[0]["totals"] = {**totals, "activity": activity}
    return {
        "self": self_address,
        "members": members,
        "nodes": nodes,
        "singletons": singletons,
        "sharding": sharding,
        "shards": shards,
        **_cluster_figures(nodes),
    }


def _remote_actor(system: ActorSystem, full_path: str) -> dict[str, Any] | None:
    """Another node's actor in detail (``gactors://shop@node-b/user/x``), asked of that
    node's inspector (:class:`~gactors.cluster._inspect.InspectActor`); None if it has
    no such actor. Its reminders are that node's business: not included (None)."""
    if cluster_members(system) is None:
        raise _HTTPError("404 Not Found", f"not a cluster node: no actor at {full_path}")
    i = full_path.find("/", full_path.find("://") + 3)
    if i < 0:
        raise _HTTPError("400 Bad Request", f"no actor path in {full_path!r}")
    address, local = full_path[:i], full_path[i:]
    from gactors.cluster._inspect import (
        INSPECTOR,
        InspectActor,
    )

    try:
        reply = system.actor_selection(address + INSPECTOR).ask(
            InspectActor(local), timeout=CLUSTER_ASK_TIMEOUT
        )
    except TimeoutError:
        raise _HTTPError(
            "504 Gateway Timeout",
            f"{address} did not answer within {CLUSTER_ASK_TIMEOUT:g} s",
        ) from None
    view = getattr(reply, "view", None)
    if not isinstance(view, dict):
        return None
    view["node_address"] = address
    view["reminders"] = None
    return view


def _by_node(paths: Iterable[str]) -> dict[str, set[str]]:
    """``gactors://shop@node-b/user/x`` paths, by node address: ``{address: {"/user/x"}}``."""
    out: dict[str, set[str]] = {}
    for p in paths:
        i = p.find("/", p.find("://") + 3) if "://" in p else -1
        if i > 0 and len(out.get(p[:i], ())) < MAX_OPEN:
            out.setdefault(p[:i], set()).add(p[i:].rstrip("/") or "/")
    return out


def _cluster_figures(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The cluster's figures from every node's answer: sums with a per-node breakdown,
    grouped failures, hub blocks and hot spots of all nodes (each entry names its
    node), and the per-second history summed second by second.

    A node without an answer (unreachable, not answering yet) counts in none of them;
    ``per_node`` says which nodes were counted (``counted``)."""
    per_node: list[dict[str, Any]] = []
    sums = dict.fromkeys(
        ("actors", "mailbox", "restarts", "messages_per_second", "dead_letters_per_second",
         "hub_blocked"),
        0.0,
    )  # fmt: skip
    max_mailbox = 0
    failures: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    hot_mailbox: list[dict[str, Any]] = []
    hot_restarts: list[dict[str, Any]] = []
    series: dict[str, dict[int, int]] = {"messages": {}, "restarts": {}, "dead_letters": {}}
    views: list[dict[str, Any] | None] = []
    for n in nodes:
        totals = n.get("totals")
        act = totals.get("activity") if isinstance(totals, dict) else None
        if not isinstance(totals, dict) or not isinstance(act, dict):
            per_node.append({"address": n["address"], "counted": False})
            continue
        row = {
            "address": n["address"],
            "counted": True,
            "actors": totals["actors"],
            "mailbox": totals["mailbox"],
            "restarts": totals["restarts"],
            "messages_per_second": act["messages_per_second"],
            "dead_letters_per_second": act["dead_letters_per_second"],
            "hub_blocked": act["hub_blocked"],
        }
        per_node.append(row)
        for k in sums:
            sums[k] += row[k]
        max_mailbox = max(max_mailbox, totals["max_mailbox"])
        failures += [{**f, "node": n["address"]} for f in act["failures"]]
        blocks += [{**b, "node": n["address"]} for b in act["blocks"]]
        hot_mailbox += [{**h, "node": n["address"]} for h in act["hot"]["mailbox"]]
        hot_restarts += [{**h, "node": n["address"]} for h in act["hot"]["restarts"]]
        views.append(act.get("class_events"))
        history = act["history"]
        for name, per_second in series.items():
            values = history[name]
            start = history["end"] - len(values) + 1
            for i, v in enumerate(values):
                per_second[start + i] = per_second.get(start + i, 0) + v
    end = max((max(s) for s in series.values() if s), default=int(time.time()))
    first = min((min(s) for s in series.values() if s), default=end + 1)
    history_sum: dict[str, Any] = {"end": end}
    for name, per_second in series.items():
        history_sum[name] = [per_second.get(s, 0) for s in range(first, end + 1)]
    failures.sort(key=lambda f: f["last"], reverse=True)
    blocks.sort(key=lambda b: b["last"], reverse=True)
    hot_mailbox.sort(key=lambda h: h["mailbox"], reverse=True)
    hot_restarts.sort(key=lambda h: h["restarts"], reverse=True)
    cluster_totals: dict[str, Any] = {
        k: (round(v, 1) if not v.is_integer() else int(v)) for k, v in sums.items()
    }
    cluster_totals["max_mailbox"] = max_mailbox
    cluster_totals["nodes"] = sum(1 for r in per_node if r["counted"])
    return {
        "totals": cluster_totals,
        "per_node": per_node,
        "failures": failures[:20],
        "blocks": blocks[:10],
        "hot": {"mailbox": hot_mailbox[:10], "restarts": hot_restarts[:10]},
        "history": history_sum,
        "class_events": sum_class_events(views),
    }


def _where(
    places: list[tuple[str, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Merge what each node says it runs: singletons, sharding summaries, shards.

    A node's view of an unreachable node is its last answer (marked by the node's
    ``error``); a singleton running on two nodes at once (a lease lost while its
    holder was paused) shows the one with the newest fencing token.
    """
    singletons: dict[str, dict[str, Any]] = {}
    types: dict[str, dict[str, Any]] = {}
    shards: list[dict[str, Any]] = []
    for address, place in places:
        for s in place["singletons"]:
            cur = singletons.setdefault(s["name"], {"name": s["name"], "node": None, "token": None})
            if s["running"] and (cur["token"] is None or (s["token"] or 0) > cur["token"]):
                cur["node"], cur["token"] = address, s["token"]
        for t in place["sharding"]:
            summary = types.get(t["type_name"])
            if summary is None or (not summary["allocation"] and t["allocation"]):
                # The first node's own view of the allocation (this node first).
                summary = types[t["type_name"]] = {
                    "type_name": t["type_name"],
                    "number_of_shards": t["number_of_shards"],
                    "role": t["role"],
                    "allocation": dict(t["allocation"]),
                    "running": summary["running"] if summary else 0,
                    "entities": summary["entities"] if summary else 0,
                }
            for sh in t["shards"]:
                summary["running"] += 1
                summary["entities"] += sh["entities"]
                if len(shards) < MAX_SHARD_ROWS:
                    shards.append({"type_name": t["type_name"], "node": address, **sh})
    shards.sort(key=lambda r: (r["type_name"], r["shard"], r["node"]))
    return (
        sorted(singletons.values(), key=lambda s: s["name"]),
        sorted(types.values(), key=lambda t: t["type_name"]),
        shards,
    )


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
        #: A line the page shows above everything (``python -m gactors dashboard`` says
        #: there what the page shows and how to point it at a cluster).
        self.notice: str | None = None
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
            auto = query.get("auto", ["0"])[0] in ("1", "true")
            return self._json(
                self.state(
                    query.get("open", ()),
                    _limit(query),
                    closed_paths=query.get("closed", ()),
                    auto=auto,
                )
            )
        if path == "/api/actor":
            where = query.get("path", [""])[0]
            obs = self._observer()
            own = str(obs.system.address) + "/"
            if where.startswith(own):
                where = where[len(own) - 1 :]
            if where.startswith("gactors://"):
                view = _remote_actor(obs.system, where)
            elif where.startswith("/"):
                view = actor_view(obs, where)
            else:
                raise _HTTPError(
                    "400 Bad Request",
                    f"path must start with '/' (or be another node's gactors://...): {where!r}",
                )
            if view is None:
                raise _HTTPError("404 Not Found", f"no actor at {where}")
            return self._json(view)
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

    def state(
        self,
        open_paths: Iterable[str] = (),
        limit: int = DEFAULT_LIMIT,
        *,
        closed_paths: Iterable[str] = (),
        auto: bool = False,
    ) -> dict[str, Any]:
        """What ``api/state`` returns (documented in ``docs/dashboard.md``).

        ``auto``: open what the page opens by itself (a tree of at most
        :data:`~gactors._observer.AUTO_EXPAND` actors entirely, the path to
        every hot actor of a larger one) besides ``open_paths``, except
        ``closed_paths``.
        """
        obs = self._observer()
        self_prefix = str(obs.system.address) + "/"
        opened, addressed = _split_paths(open_paths, self_prefix, {"/", "/user"})
        closed, closed_addressed = _split_paths(closed_paths, self_prefix, set())
        totals = obs.totals()
        tree = obs.tree(opened, limit, auto=auto, closed=closed)
        local_totals = {
            k: totals[k] for k in ("actors", "mailbox", "max_mailbox", "restarts", "truncated")
        }
        activity = obs.activity(totals)
        cluster = _cluster_state(
            obs.system, tree, local_totals, addressed, limit, closed_addressed, auto, activity
        )
        return {
            "version": 1,
            "time": time.time(),
            "poll_interval": POLL_INTERVAL,
            "system": obs.system_info(),
            "totals": local_totals,
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
            "failure_groups": activity["failures"],
            "directives": dict(obs.directives),
            "hub_blocked": {
                "total": obs.hub_blocked,
                "seconds": round(obs.hub_blocked_seconds, 4),
                "recent": list(obs.blocks),
                "groups": activity["blocks"],
            },
            "history": activity["history"],
            "tree": tree,
            "limit": limit,
            "auto_expand": AUTO_EXPAND,
            "notice": self.notice,
            "classes": activity["classes"],
            "class_events": activity["class_events"],
            "delivery": delivery_view(obs),
            "reminders": reminders_view(obs.system),
            "cluster": cluster,
        }


def _split_paths(
    paths: Iterable[str], self_prefix: str, base: set[str]
) -> tuple[set[str], list[str]]:
    """This node's paths (``/user/x``, also given as ``<own address>/user/x``) and the
    other nodes' (``gactors://shop@node-b/user/x``), at most MAX_OPEN of each."""
    local = set(base)
    addressed: list[str] = []
    for p in paths:
        if p.startswith(self_prefix):
            p = p[len(self_prefix) - 1 :]
        if p.startswith("/"):
            if len(local) < MAX_OPEN:
                local.add(p.rstrip("/") or "/")
        elif p.startswith("gactors://") and len(addressed) < MAX_OPEN:
            addressed.append(p)
    return local, addressed


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
