"""``python -m gactors demo``: a guided tour of supervision, printed as it happens.

``python -m gactors demo cluster``: sharded counters and a cluster singleton on three
node processes, one of which is killed (needs ``gactors[cluster]``).

``python -m gactors dashboard``: serve the live dashboard of an actor system alone.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys

_log = logging.getLogger("gactors.dashboard")


def _parse_bind(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"--bind wants HOST:PORT, e.g. 127.0.0.1:8020, not {value!r}"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# What a dashboard served alone without a cluster shows: its own, empty system.
_NO_CLUSTER_NOTICE = (
    "This dashboard shows its own actor system {name!r}, started by `python -m gactors "
    "dashboard` in this process: it has no actors of yours. To see a cluster, start it "
    "with `--cluster-url redis://HOST:6379/0 --system NAME` (the cluster's Redis and the "
    "system name its nodes use); to see an application's actors, mount DashboardApp in "
    "that application (docs/dashboard.md)."
)


def _dashboard(args: argparse.Namespace) -> int:
    import gevent

    from gactors import ActorSystem
    from gactors.contrib.dashboard import DashboardApp, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    token = os.environ.get("GACTORS_DASHBOARD_TOKEN") or None
    host, port = args.bind
    if not _is_loopback(host) and token is None:
        _log.warning(
            "serving the dashboard on %s without a token: anyone who reaches this address "
            "sees your actors (set GACTORS_DASHBOARD_TOKEN)",
            host,
        )
    config = (
        {"cluster": {"url": args.cluster_url, "roles": ["dashboard"]}} if args.cluster_url else None
    )
    try:
        system = ActorSystem(args.system, config=config)
    except Exception as e:  # a bad cluster URL, an unreachable Redis, no cluster support
        print(f"python -m gactors dashboard: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    app = DashboardApp(system, token=token)
    if not args.cluster_url:
        app.notice = _NO_CLUSTER_NOTICE.format(name=system.name)
    server = serve(app, host, port)
    _log.info("gactors dashboard of %r on http://%s:%d/", system.name, host, server.server_port)
    if app.notice:
        _log.info("%s", app.notice)
    # SIGTERM (a process manager stopping us) ends it as cleanly as Ctrl-C.
    gevent.signal_handler(signal.SIGTERM, system.terminate)
    try:
        system.await_termination()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(timeout=1)
        system.terminate()
        system.await_termination(5)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gactors")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="a tour of supervision (about 15 s): a live actor tree while failures are injected",
    )
    demo.add_argument(
        "topic",
        nargs="?",
        choices=["supervision", "cluster"],
        default="supervision",
        help="supervision (default), or cluster: sharding and a singleton on three node "
        "processes while one is killed (under a minute; needs gactors[cluster])",
    )
    demo.add_argument("--fast", action="store_true", help="the same tour with short pauses (CI)")
    dash = sub.add_parser(
        "dashboard",
        help="serve the live dashboard (token: the GACTORS_DASHBOARD_TOKEN environment variable)",
    )
    dash.add_argument(
        "--bind",
        type=_parse_bind,
        default=("127.0.0.1", 8020),
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:8020: loopback only)",
    )
    dash.add_argument(
        "--cluster-url",
        default=None,
        help="join this cluster (Redis URL) as a node with the role 'dashboard' and show it",
    )
    dash.add_argument("--system", default="default", help="the actor system's (and cluster's) name")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from gevent import monkey

        monkey.patch_all()
        if args.topic == "cluster":
            from gactors._demo_cluster import run as run_cluster

            return run_cluster(fast=args.fast)
        from gactors._demo import run

        return run(fast=args.fast)
    if args.command == "dashboard":
        from gevent import monkey

        monkey.patch_all()
        return _dashboard(args)
    return 2  # pragma: no cover - argparse rejects other commands


if __name__ == "__main__":
    sys.exit(main())
