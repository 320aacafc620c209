"""A tiny local HTTP backend for the example: the "slow service" the actors call.

``GET /item/<key>`` answers ``{"key": key, "value": sha256(key)[:16]}`` after a short
pause (``?delay=seconds``, default 5 ms), like a real service would. It is a gevent
``pywsgi`` server listening on the loopback interface only.

    python backend.py --port 8001      # --port 0 picks a free port and prints it
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
from collections.abc import Callable, Iterable  # noqa: E402
from typing import Any  # noqa: E402
from urllib.parse import parse_qs  # noqa: E402

import gevent  # noqa: E402
import gevent.event  # noqa: E402
from gevent.pywsgi import WSGIServer  # noqa: E402

log = logging.getLogger("backend")


def item_value(key: str) -> str:
    """The value the backend returns for ``key`` (the test recomputes it)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path: str = environ.get("PATH_INFO", "")
    if not path.startswith("/item/") or len(path) <= len("/item/"):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    key = path[len("/item/") :]
    query = parse_qs(environ.get("QUERY_STRING", ""))
    delay = min(float(query.get("delay", ["0.005"])[0]), 5.0)
    gevent.sleep(delay)
    body = json.dumps({"key": key, "value": item_value(key)}).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="[backend] %(message)s")
    server = WSGIServer((args.host, args.port), application, log=None)
    server.start()
    # The test (and you) read the real port from this line when --port is 0.
    print(f"backend listening on http://{args.host}:{server.server_port}", flush=True)
    stop = gevent.event.Event()
    gevent.signal_handler(signal.SIGTERM, stop.set)
    gevent.signal_handler(signal.SIGINT, stop.set)
    stop.wait()
    server.stop(timeout=2)


if __name__ == "__main__":
    main()
