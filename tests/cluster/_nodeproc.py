"""A cluster node in a process of its own, for the tests (a crash is SIGKILL).

Run as ``python _nodeproc.py <url> <system> <cluster-json>``: the process builds an
actor system with that ``cluster`` table, creates ``/user/echo`` and ``/user/watcher``,
prints one JSON line ``{"address": ..., "pid": ...}`` once joined, then reads one JSON
command per line on stdin and answers each with one JSON line on stdout. Actors print
what the tests look for (``Terminated`` of watched actors, membership events) as JSON
lines too. When the system terminates (``leave``, or downed) it prints
``{"terminated": true, "reason": ...}`` and exits.

:class:`NodeProc` is the test side: starts the process, sends commands, waits for
lines, kills it.
"""

from __future__ import annotations

if __name__ == "__main__":
    from gevent import monkey

    monkey.patch_all()

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent

from gactors import Actor, ActorSystem, Props, Terminated
from gactors.cluster import register_message
from gactors.cluster._extension import cluster_node


@register_message(tag="tests.cluster.Order")
@dataclass(frozen=True)
class Order:
    """A registered message class (the same tag on both sides)."""

    item: str
    qty: int


def emit(obj: dict[str, Any]) -> None:
    """One JSON line on stdout (the test reads them)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Echo(Actor):
    """Replies ``("echo", m)``; ``"boom"`` raises; ``("tell", ref, m)`` tells ``ref``;
    ``("fwd", ref, m)`` forwards; ``("reply-later", m)`` keeps the sender and replies
    on the next ``"flush"``; ``("count",)`` answers how many messages it got."""

    def __init__(self) -> None:
        self.kept: list[Any] = []
        self.count = 0

    def receive(self, m: Any) -> None:
        self.count += 1
        if m == "boom":
            raise ValueError("boom on purpose")
        if isinstance(m, tuple) and m:
            if m[0] == "tell":
                m[1].tell(m[2])
                return
            if m[0] == "fwd":
                m[1].forward(m[2])
                return
            if m[0] == "reply-later":
                self.kept.append((self.sender, m[1]))
                return
            if m[0] == "count":
                self.sender.tell(("count", self.count - 1))
                return
        if m == "flush":
            for ref, v in self.kept:
                ref.tell(("later", v))
            self.kept.clear()
            return
        self.sender.tell(("echo", m))


class Sink(Actor):
    """Counts what it gets; ``("count",)`` answers ``("count", n)``."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, m: Any) -> None:
        if type(m) is tuple and m == ("count",):
            self.sender.tell(("count", self.count))
        else:
            self.count += 1


class Parent(Actor):
    """``("make", n)`` creates ``n`` more :class:`Sink` children and answers their
    number."""

    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "make":
            for _ in range(m[1]):
                self.context.actor_of(Props(Sink))
            self.sender.tell(len(self.context.children))


class Watcher(Actor):
    """``("watch", ref)`` watches ``ref``; each ``Terminated`` becomes a JSON line."""

    def receive(self, m: Any) -> None:
        if isinstance(m, tuple) and m[0] == "watch":
            self.context.watch(m[1])
            self.sender.tell(("watching", m[1]))
        elif type(m) is Terminated:
            emit(
                {
                    "event": "terminated",
                    "path": str(m.actor.path),
                    "existence_confirmed": m.existence_confirmed,
                    "address_terminated": m.address_terminated,
                    "t": time.time(),
                }
            )


def _append(log_path: str, rec: dict[str, Any]) -> None:
    # One line per write(2) on an O_APPEND descriptor: several processes append to one
    # file and lines never interleave. A reader can still see a line half copied (a
    # write that crosses a page boundary becomes visible page by page): read_log skips
    # a last line without its newline.
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(rec) + "\n").encode())
    finally:
        os.close(fd)


class Lifecycle(Actor):
    """A singleton or entity that writes its own lifecycle (start/stop with time, pid,
    node, entity id and fencing token) and the messages it got to a shared log file.
    ``("who",)`` answers ``(node, pid, token, entity_id)``; ``("rec", x)`` logs x;
    ``("ask-rec", x)`` logs x and answers ``("rec", x)``; ``("count",)`` answers how
    many messages this incarnation got; ``"hang"`` sleeps (monkey-patched) 0.3 s."""

    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.count = 0

    def _rec(self, ev: str, **extra: Any) -> None:
        c = self.context
        _append(
            self.log_path,
            dict(
                ev=ev,
                t=time.time(),
                pid=os.getpid(),
                node=c.system.address.node,
                entity=c.entity_id,
                token=c.fencing_token,
                **extra,
            ),
        )

    def pre_start(self) -> None:
        self._rec("start")

    def post_stop(self) -> None:
        self._rec("stop")

    def receive(self, m: Any) -> None:
        self.count += 1
        if isinstance(m, tuple) and m:
            if m[0] == "who":
                c = self.context
                self.sender.tell((c.system.address.node, os.getpid(), c.fencing_token, c.entity_id))
                return
            if m[0] == "rec":
                self._rec("msg", x=m[1])
                return
            if m[0] == "ask-rec":
                self._rec("msg", x=m[1])
                self.sender.tell(("rec", m[1]))
                return
            if m[0] == "count":
                self.sender.tell(("count", self.count))
                return
        if m == "stop-please":
            self._rec("stop-message")
            self.context.stop(self.ref)
            return
        self.sender.tell(("echo", m))


def _extract(m: Any) -> tuple[str, Any]:
    """A custom extract_entity_id: ``("to", entity_id, message)``."""
    if isinstance(m, tuple) and len(m) == 3 and m[0] == "to":
        return m[1], m[2]
    raise ValueError(f"not for an entity: {m!r}")


def _main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url, name, cluster_json = sys.argv[1], sys.argv[2], sys.argv[3]
    cluster = dict(json.loads(cluster_json), url=url)
    system = ActorSystem(name, config={"cluster": cluster})
    from gactors.cluster import Cluster

    system.actor_of(Props(Echo), "echo")
    watcher = system.actor_of(Props(Watcher), "watcher")

    def on_terminated(_: Any) -> None:
        node = cluster_node(system)
        emit({"terminated": True, "reason": getattr(node, "termination_reason", None)})
        os._exit(0)

    system.when_terminated.add_done_callback(on_terminated)
    emit({"address": str(Cluster(system).self_address), "pid": os.getpid()})
    from gevent.fileobject import FileObject

    proxies: dict[str, Any] = {}
    regions: dict[str, Any] = {}
    streamer: list[Any] = []
    streamed = [0]
    dead: list[Any] = []
    from gactors import DeadLetter

    class _DeadLetters(Actor):
        def receive(self, m: Any) -> None:
            dead.append(m)

    system.event_stream.subscribe(system.actor_of(Props(_DeadLetters), "dl"), DeadLetter)
    stdin = FileObject(sys.stdin.fileno(), "r")
    for line in stdin:
        cmd = json.loads(line)
        c = cmd["cmd"]
        try:
            if c == "spawn":
                kind = Sink if cmd.get("kind") == "sink" else Echo
                ref = system.actor_of(Props(kind), cmd["name"])
                emit({"ok": True, "path": str(ref.path)})
            elif c == "stop":
                ref = system.lookup(f"/user/{cmd['name']}")
                assert ref is not None
                system.stop(ref)
                emit({"ok": True})
            elif c == "watch":
                target = system.actor_selection(cmd["path"])
                ref = target.resolve_one(5.0) if cmd.get("resolve", True) else None
                if ref is None:
                    from gactors._path import ActorPath

                    ref = cluster_node(system).remote_ref(
                        ActorPath.parse(cmd["path"], system.name), int(cmd.get("uid", 1))
                    )
                watcher.ask(("watch", ref), timeout=5.0)
                emit({"ok": True, "watching": str(ref.path)})
            elif c == "ask":
                reply = system.actor_selection(cmd["path"]).ask(cmd["message"], timeout=5.0)
                emit({"ok": True, "reply": repr(reply)})
            elif c == "block":
                # Blocks the hub with unpatched code (what a C extension or a
                # deadlock would do): nothing of gevent runs meanwhile.
                from gevent import monkey

                monkey.get_original("time", "sleep")(float(cmd["seconds"]))
                emit({"ok": True})
            elif c == "tell":
                system.actor_selection(cmd["path"]).tell(cmd["message"], None)
                emit({"ok": True})
            elif c == "members":
                emit(
                    {
                        "ok": True,
                        "members": [[str(m.address), m.status] for m in Cluster(system).members],
                    }
                )
            elif c == "singleton":
                from gactors.cluster import ClusterSingleton

                proxies[cmd["name"]] = ClusterSingleton(system).init(
                    cmd["name"],
                    Props(Lifecycle, cmd["log"]),
                    role=cmd.get("role"),
                    stop_message=cmd.get("stop_message", "stop-please"),
                    buffer_size=int(cmd.get("buffer_size", 1000)),
                )
                emit({"ok": True})
            elif c == "singleton-tell":
                proxy = proxies[cmd["name"]]
                for x in cmd["messages"]:
                    proxy.tell(tuple(x) if isinstance(x, list) else x, None)
                emit({"ok": True})
            elif c == "singleton-ask":
                reply = proxies[cmd["name"]].ask(
                    tuple(cmd["message"]), timeout=float(cmd.get("ask_timeout", 5.0))
                )
                emit({"ok": True, "reply": list(reply) if isinstance(reply, tuple) else reply})
            elif c == "shard-start":
                from gactors.cluster import ClusterSharding

                passivate = cmd.get("passivate", 120.0)
                regions[cmd["type"]] = ClusterSharding(system).start(
                    cmd["type"],
                    Props(Lifecycle, cmd["log"]),
                    extract_entity_id=_extract if cmd.get("extract") else None,
                    number_of_shards=int(cmd.get("shards", 100)),
                    role=cmd.get("role"),
                    passivate_idle_after=passivate,
                    stop_message=cmd.get("stop_message", "stop-please"),
                )
                emit({"ok": True})
            elif c == "shard-proxy":
                from gactors.cluster import ClusterSharding

                regions[cmd["type"]] = ClusterSharding(system).start_proxy(
                    cmd["type"],
                    extract_entity_id=_extract if cmd.get("extract") else None,
                    number_of_shards=int(cmd.get("shards", 100)),
                    role=cmd.get("role"),
                )
                emit({"ok": True})
            elif c == "shard-tell":
                # messages: [[entity, message], ...] in this order, from one sender.
                from gactors.cluster import ClusterSharding

                sharding = ClusterSharding(system)
                for eid, x in cmd["messages"]:
                    x = tuple(x) if isinstance(x, list) else x
                    if cmd.get("extract"):
                        regions[cmd["type"]].tell(("to", eid, x), None)
                    else:
                        sharding.entity_ref(cmd["type"], eid).tell(x)
                emit({"ok": True})
            elif c == "shard-ask":
                from gactors.cluster import ClusterSharding

                reply = (
                    ClusterSharding(system)
                    .entity_ref(cmd["type"], cmd["entity"])
                    .ask(tuple(cmd["message"]), timeout=float(cmd.get("ask_timeout", 5.0)))
                )
                emit({"ok": True, "reply": list(reply) if isinstance(reply, tuple) else reply})
            elif c == "shard-stream":
                # A sender that keeps telling ("rec", i) to each entity, round robin,
                # every `interval` s, in a greenlet; "shard-stream-stop" ends it.
                from gactors.cluster import ClusterSharding

                def stream(t: str, ents: list[str], interval: float) -> None:
                    sharding = ClusterSharding(system)
                    refs = [sharding.entity_ref(t, e) for e in ents]
                    i = 0
                    while True:
                        for r in refs:
                            r.tell(("rec", i))
                        i += 1
                        streamed[0] = i
                        gevent.sleep(interval)

                streamer.append(
                    gevent.spawn(stream, cmd["type"], cmd["entities"], float(cmd["interval"]))
                )
                emit({"ok": True})
            elif c == "shard-stream-stop":
                for g in streamer:
                    g.kill()
                streamer.clear()
                emit({"ok": True, "sent": streamed[0]})
            elif c == "dead-letters":
                emit({"ok": True, "dead_letters": [repr(d.message) for d in dead]})
            elif c == "spawn-many":
                # /user/<name> with `count` children (a large node for the dashboard).
                parent = system.actor_of(Props(Parent), cmd["name"])
                made = parent.ask(("make", int(cmd["count"])), timeout=60.0)
                emit({"ok": True, "made": made})
            elif c == "leave":
                Cluster(system).leave()
                emit({"ok": True})
            else:
                emit({"ok": False, "error": f"unknown command {c!r}"})
        except Exception as e:
            emit({"ok": False, "error": f"{type(e).__name__}: {e}"})
    system.terminate()
    system.await_termination(10)


class NodeProc:
    """A node process of the tests; its stderr (logs) goes to a file."""

    def __init__(self, url: str, name: str, **cluster: Any) -> None:
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="gactors-nodeproc-", suffix=".log", delete=False
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        )
        self.proc = subprocess.Popen(
            [sys.executable, __file__, url, name, json.dumps(cluster)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        first = self.read(30.0)
        if first is None or "address" not in first:
            self.close()
            raise AssertionError(f"node process did not join: {first!r}\n{self.log()}")
        self.address: str = first["address"]
        self.pid: int = first["pid"]
        self.lines: list[dict[str, Any]] = []

    def path(self, name: str) -> str:
        """The full path of ``/user/<name>`` on this node."""
        return f"{self.address}/user/{name}"

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line, or None on timeout or end of output."""
        assert self.proc.stdout is not None
        with gevent.Timeout(timeout, False):
            line = self.proc.stdout.readline()
            if not line:
                return None
            return json.loads(line)  # type: ignore[no-any-return]
        return None

    def command(self, timeout: float = 15.0, **cmd: Any) -> dict[str, Any]:
        """Send a command and return its answer (event lines met meanwhile are kept)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            line = self.read(max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"no answer to {cmd!r}\n{self.log()}")
            if "ok" in line:
                return line
            self.lines.append(line)

    def wait_for(self, key: str, timeout: float) -> dict[str, Any] | None:
        """The first line (kept or new) that has ``key``."""
        for i, line in enumerate(self.lines):
            if key in line:
                return self.lines.pop(i)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.read(max(0.1, deadline - time.monotonic()))
            if line is None:
                return None
            if key in line:
                return line
            self.lines.append(line)
        return None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process (SIGKILL: a crash; SIGSTOP/SIGCONT: a pause)."""
        os.kill(self.proc.pid, sig)

    def log(self) -> str:
        """What the process logged."""
        return Path(self._log.name).read_text(errors="replace")

    def close(self) -> None:
        """Kill the process if it still runs, remove its log."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


if __name__ == "__main__":
    _main()
