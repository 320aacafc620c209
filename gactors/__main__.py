"""``python -m gactors demo``: a guided tour of supervision, printed as it happens.

``python -m gactors demo cluster``: sharded counters and a cluster singleton on three
node processes, one of which is killed (needs ``gactors[cluster]``).
"""

from __future__ import annotations

import argparse
import sys


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
    args = parser.parse_args(argv)
    if args.command == "demo":
        from gevent import monkey

        monkey.patch_all()
        if args.topic == "cluster":
            from gactors._demo_cluster import run as run_cluster

            return run_cluster(fast=args.fast)
        from gactors._demo import run

        return run(fast=args.fast)
    return 2  # pragma: no cover - argparse rejects other commands


if __name__ == "__main__":
    sys.exit(main())
