"""A process with reminders, for the fault tests (``test_faults.py``).

``python _reminder_node.py SPEC_JSON``: SPEC has ``book`` (a file: one JSON line per
message an entity or ``/user/rec`` got, written with one ``os.write`` so a SIGKILL
loses at most that line), ``tick``, and either ``url``/``name``/``cluster`` (a cluster
node hosting the sharded type ``cart`` with ``shards`` shards) or ``sqlite`` (a single
process on that file with the actor ``/user/rec``). It prints ``{"pid": ...}`` once
ready, then answers JSON commands on stdin, one line each:

* ``{"cmd": "register", "name": N, "entity": E | "path": P, "due": EPOCH_SECONDS,
  "period": S | null, "misfire": M}`` -> ``{"ok": true}`` once stored.
* ``{"cmd": "leave"}``: terminates the system, then the process exits.
"""

# ruff: noqa: E402
from gevent import monkey

monkey.patch_all()

import json
import logging
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any

import gevent
from gevent.fileobject import FileObject

from gactors import Actor, ActorSystem, Props
from gactors.reminders import Reminders


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Recorder(Actor):
    """Books every message it gets: wall time, pid, who (entity id or path), message."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def receive(self, m: Any) -> None:
        who = self.context.entity_id or "/" + "/".join(self.ref.path.elements)
        line = {"t": time.time(), "pid": os.getpid(), "who": who, "m": m}
        os.write(self.fd, (json.dumps(line) + "\n").encode())


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    spec = json.loads(sys.argv[1])
    fd = os.open(spec["book"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    reminders_table = {"tick": spec["tick"]}
    if "url" in spec:
        from gactors.cluster import ClusterSharding

        system = ActorSystem(
            spec["name"],
            config={
                "cluster": {"url": spec["url"], **spec["cluster"]},
                "reminders": reminders_table,
            },
        )
        ClusterSharding(system).start("cart", Props(Recorder, fd), number_of_shards=spec["shards"])
    else:
        system = ActorSystem(
            "solo", config={"persistence": {"path": spec["sqlite"]}, "reminders": reminders_table}
        )
        system.actor_of(Props(Recorder, fd), "rec")
    reminders = Reminders(system)
    emit({"pid": os.getpid()})

    def commands() -> None:
        for line in FileObject(sys.stdin.fileno(), "r"):
            cmd = json.loads(line)
            if cmd["cmd"] == "register":
                target: dict[str, Any] = (
                    {"entity": ("cart", cmd["entity"])}
                    if "entity" in cmd
                    else {"path": cmd["path"]}
                )
                reminders.register(
                    cmd["name"],
                    cmd.get("message", cmd["name"]),
                    due=datetime.fromtimestamp(cmd["due"], timezone.utc),
                    period=cmd.get("period"),
                    misfire=cmd.get("misfire", "once"),
                    **target,
                )
                emit({"ok": True})
            elif cmd["cmd"] == "leave":
                system.terminate()

    gevent.spawn(commands)
    system.when_terminated.get()
    return 0


if __name__ == "__main__":
    sys.exit(main())
