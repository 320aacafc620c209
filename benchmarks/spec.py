"""What is measured: implementations, workloads, table rows and targets."""

from __future__ import annotations

from dataclasses import dataclass, field

from .venvs import VenvSpec


@dataclass(frozen=True)
class Impl:
    """One implementation under test, run by ``worker`` in a fresh interpreter."""

    name: str
    label: str
    worker: str
    workloads: tuple[str, ...]
    venv: VenvSpec | None = None
    na: dict[str, str] = field(default_factory=dict)  # workload -> why it cannot run
    # workload -> its main count for this implementation (a slow peer runs fewer
    # operations so that a round stays within minutes; rates stay comparable)
    n: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """A workload: ``n`` is the main count, ``per`` a secondary one (0 when unused)."""

    name: str
    n: int
    per: int
    description: str

    def counts(self, quick: bool, n: int | None = None) -> tuple[int, int]:
        """The counts to run with (``n`` overrides the main count): quick mode divides
        the main count by 50."""
        n = self.n if n is None else n
        if quick:
            return max(1, n // 50), self.per
        return n, self.per


@dataclass(frozen=True)
class Row:
    """One line of the results table: a metric of a workload.

    ``base`` names the gevent-primitive baseline (a raw workload and its metric): the
    same job done with the gevent primitive an actor library would be built on (a
    ``Queue``, an ``AsyncResult``, ``Greenlet.kill``). ``floor`` names the physical
    floor: the cheapest thing the interpreter can do that still does the job's core
    step (a ``greenlet.switch``, a ``deque`` append + popleft + call). Each is shown
    by its name (:data:`REF_NAMES`), never as an anonymous "raw limit".
    """

    label: str
    workload: str
    metric: str
    unit: str
    higher_better: bool
    base: tuple[str, str] | None = None
    floor: tuple[str, str] | None = None


ACTOR_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("tell", 1_000_000, 0, "N tells to one actor; until all are processed"),
        Workload("ping_pong", 200_000, 0, "two actors, N ping/pong round trips"),
        Workload("ask", 100_000, 0, "N sequential asks from a plain greenlet"),
        Workload("spawn", 100_000, 0, "create N actors until each ran its start hook"),
        Workload("stop", 100_000, 0, "stop N started actors until each ran its stop hook"),
        Workload("restart", 10_000, 0, "N cycles: failing message, then ask a ping"),
        Workload("fan_out", 10_000, 100, "N actors x PER messages each (round-robin)"),
        Workload("blocking", 1_000, 50, "N actors each sleep PER ms (patched) in receive"),
    )
}

RAW_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("queue_oneway", 1_000_000, 0, "gevent Queue: N puts, one consumer greenlet"),
        Workload("queue_ping_pong", 200_000, 0, "gevent Queue ping-pong, two greenlets"),
        Workload(
            "queue_ask", 100_000, 0, "N sequential asks: Queue.put((msg, AsyncResult)), get()"
        ),
        Workload("greenlet_kill", 100_000, 0, "kill N waiting greenlets until each ran finally"),
        Workload(
            "greenlet_restart",
            10_000,
            0,
            "N cycles: failing message ends a Queue-serving greenlet, respawn, ask a ping",
        ),
        Workload("switch", 200_000, 0, "greenlet.switch round trips"),
        Workload("deque_call", 1_000_000, 0, "collections.deque append/popleft + call"),
        Workload(
            "sender_tell",
            1_000_000,
            0,
            "minimal Python tell: ref method, message + sender deques, drain + receive",
        ),
        Workload(
            "checked_tell",
            1_000_000,
            0,
            "sender_tell + the actor model's checks: implicit sender, closed mailbox, "
            "batch bound, auto-received type, system queue",
        ),
        Workload("sleep", 1_000, 50, "N greenlets each sleep PER ms; wall time"),
    )
}

# The cluster section: two node processes and a local Redis-protocol server. A remote
# workload's ``per`` is the number of concurrent askers (remote_ask_100); remote_idle's
# ``n`` is the number of seconds of idleness measured.
REMOTE_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("remote_tell", 500_000, 0, "actor-to-actor one-way tells to another process"),
        Workload("remote_ask", 20_000, 0, "N sequential asks to an actor in another process"),
        Workload("remote_ask_100", 100_000, 100, "N asks by PER concurrent askers, remote"),
        Workload("remote_detect", 1, 0, "SIGKILL a watched node: time to Terminated"),
        Workload("remote_idle", 10, 0, "two idle nodes for N s: Redis commands per beat"),
    )
}

# The raw limits of redis-py on the same server (the ``redis`` implementation).
REDIS_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("redis_xadd", 500_000, 100, "XADD, one message per entry, pipelines of PER"),
        Workload(
            "redis_xadd_batch", 5_000_000, 100, "XADD, PER messages per entry, pipelines of 100"
        ),
        Workload("redis_echo", 20_000, 0, "XADD -> blocked XREAD echo in another process"),
    )
}

# gactors.persistence (SPEC section 19, issue 25): ``n`` events in all; ``per`` the
# number of concurrent actors (the recovery with snapshots: the snapshot interval).
PERSISTENCE_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("persist_seq", 20_000, 0, "one PersistentActor, N persists each awaited (redis)"),
        Workload(
            "persist_concurrent",
            50_000,
            1_000,
            "PER actors persist N events in all, one write outstanding each (redis)",
        ),
        Workload("persist_recovery", 10_000, 0, "recover one actor from N events (redis)"),
        Workload(
            "persist_recovery_snap",
            10_000,
            1_000,
            "recover one actor from N events, a snapshot every PER (redis)",
        ),
        Workload(
            "persist_sqlite",
            20_000,
            1_000,
            "PER actors persist N events in all on SQLite; the hub's worst stall",
        ),
    )
}

# The raw floor of persistence: redis-py alone on the same server.
REDIS_WORKLOADS["redis_evalsha"] = Workload(
    "redis_evalsha", 20_000, 0, "N sequential EVALSHA of a minimal append script (RPUSH+HSET)"
)

# Reminders and reliable delivery (SPEC section 20, issue 26), one cluster node and the
# harness's server. ``delivery`` measures plain sharded tell and reliable delivery
# interleaved in one process (so that their ratio is taken under the same load).
DELIVERY_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "delivery",
            50_000,
            100,
            "N messages to PER entities: plain sharded tell, then a ReliableSender "
            "(no store, window 100), three pairs interleaved; rates and their ratio",
        ),
        Workload(
            "reminders_burst",
            10_000,
            100,
            "N one-shot reminders due within one second on PER shards, tick 1 s: "
            "seconds from the last due time until every one fired",
        ),
    )
}

ALL_WORKLOADS: dict[str, Workload] = {
    **ACTOR_WORKLOADS,
    **RAW_WORKLOADS,
    **REMOTE_WORKLOADS,
    **PERSISTENCE_WORKLOADS,
    **DELIVERY_WORKLOADS,
    **REDIS_WORKLOADS,
}

# Workloads that need the Redis-protocol server the harness starts.
NEEDS_REDIS: frozenset[str] = (
    frozenset(REMOTE_WORKLOADS)
    | frozenset(REDIS_WORKLOADS)
    | (frozenset(PERSISTENCE_WORKLOADS) - {"persist_sqlite"})
    | frozenset(DELIVERY_WORKLOADS)
)

# Which references (implementation, workload) an actor workload is compared with; they
# run right after it in each round, so that round i of gactors meets round i of its
# references (the gevent-primitive baseline first, then the physical floor).
RAW_REFERENCE: dict[str, tuple[tuple[str, str], ...]] = {
    "tell": (
        ("raw", "queue_oneway"),
        ("raw", "deque_call"),
        ("raw", "sender_tell"),
        ("raw", "checked_tell"),
    ),
    "ping_pong": (("raw", "queue_ping_pong"), ("raw", "switch")),
    "ask": (("raw", "queue_ask"), ("raw", "switch")),
    "stop": (("raw", "greenlet_kill"),),
    "restart": (("raw", "greenlet_restart"),),
    "fan_out": (("raw", "deque_call"),),
    "blocking": (("raw", "sleep"),),
    "remote_tell": (("redis", "redis_xadd_batch"),),
    "remote_ask": (("redis", "redis_echo"),),
    "persist_seq": (("redis", "redis_evalsha"),),
}

# What each reference is, by name (tables, targets and the chart say which one is meant).
REF_NAMES: dict[str, str] = {
    "queue_oneway": "gevent Queue one-way",
    "queue_ping_pong": "gevent Queue ping-pong",
    "queue_ask": "gevent Queue+AsyncResult ask",
    "greenlet_kill": "greenlet kill",
    "greenlet_restart": "greenlet respawn+ask",
    "switch": "greenlet switch",
    "deque_call": "deque+call",
    "sender_tell": "pure-Python tell",
    "checked_tell": "checked pure-Python tell",
    "sleep": "gevent sleep",
    "redis_xadd": "redis-py XADD",
    "redis_xadd_batch": "redis-py XADD batch",
    "redis_echo": "redis-py XADD/XREAD echo",
    "redis_evalsha": "redis-py EVALSHA append",
}

# The implementations that are raw limits rather than actor systems.
LIMIT_IMPLS: tuple[str, ...] = ("raw", "redis")

_PYKKA_NA = {
    "restart": "no supervision: a failing Pykka actor stops and is never restarted",
}

IMPLS: dict[str, Impl] = {
    i.name: i
    for i in (
        Impl(
            "gactors",
            "gactors (this checkout, current interpreter)",
            "worker_gactors.py",
            (*ACTOR_WORKLOADS, *REMOTE_WORKLOADS, *PERSISTENCE_WORKLOADS, *DELIVERY_WORKLOADS),
        ),
        Impl(
            "pykka4",
            "Pykka 4.x ThreadingActor under gevent.monkey.patch_all()",
            "worker_pykka.py",
            tuple(ACTOR_WORKLOADS),
            VenvSpec(
                "pykka4",
                ("pykka>=4,<5", "gevent"),
                "import importlib.metadata as m, gevent, pykka; "
                "assert m.version('pykka').startswith('4.')",
            ),
            _PYKKA_NA,
        ),
        Impl(
            "pykka2",
            "Pykka 2.0.3 pykka.gevent.GeventActor",
            "worker_pykka.py",
            tuple(ACTOR_WORKLOADS),
            VenvSpec(
                "pykka2",
                ("pykka==2.0.3", "gevent"),
                "import warnings; warnings.simplefilter('ignore'); "
                "import importlib.metadata as m, pykka.gevent; "
                "assert m.version('pykka') == '2.0.3'",
            ),
            _PYKKA_NA,
        ),
        Impl(
            "thespian",
            "Thespian multiprocTCPBase (an actor per process, TCP between them)",
            "worker_thespian.py",
            tuple(REMOTE_WORKLOADS),
            VenvSpec(
                "thespian",
                ("thespian>=4,<5",),
                "import importlib.metadata as m, thespian.actors; "
                "assert m.version('thespian').startswith('4.')",
            ),
            {
                "remote_detect": "a dead remote system is noticed after minutes (no heartbeat)",
                "remote_idle": "no Redis: nothing to count",
            },
            {"remote_tell": 20_000, "remote_ask": 2_000, "remote_ask_100": 5_000},
        ),
        Impl("raw", "raw gevent/greenlet limits", "worker_raw.py", tuple(RAW_WORKLOADS)),
        Impl(
            "redis",
            "raw redis-py limits (same server)",
            "worker_redis.py",
            tuple(REDIS_WORKLOADS),
        ),
    )
}

PEERS: tuple[str, ...] = ("pykka4", "pykka2")
REMOTE_PEERS: tuple[str, ...] = ("thespian",)

PLOT_VENV = VenvSpec("plot", ("matplotlib",), "import matplotlib")

ROWS: tuple[Row, ...] = (
    Row("tell", "tell", "rate", "msgs/s", True, ("queue_oneway", "rate"), ("deque_call", "rate")),
    Row(
        "ping_pong",
        "ping_pong",
        "rate",
        "rt/s",
        True,
        ("queue_ping_pong", "rate"),
        ("switch", "rate"),
    ),
    Row("ask", "ask", "rate", "asks/s", True, ("queue_ask", "rate"), ("switch", "rate")),
    Row("spawn", "spawn", "rate", "actors/s", True),
    Row("spawn memory", "spawn", "bytes_per_actor", "B/actor", False),
    Row("stop", "stop", "rate", "actors/s", True, ("greenlet_kill", "rate")),
    Row("restart", "restart", "median_us", "µs", False, ("greenlet_restart", "median_us")),
    Row("fan_out", "fan_out", "rate", "msgs/s", True, None, ("deque_call", "rate")),
    Row("blocking", "blocking", "seconds", "s", False, ("sleep", "seconds")),
)

REMOTE_ROWS: tuple[Row, ...] = (
    Row("remote tell", "remote_tell", "rate", "msgs/s", True, ("redis_xadd_batch", "rate")),
    Row("remote ask p50", "remote_ask", "median_us", "µs", False, ("redis_echo", "median_us")),
    Row("remote ask", "remote_ask", "rate", "asks/s", True),
    Row("remote ask x100", "remote_ask_100", "rate", "asks/s", True),
    Row("SIGKILL -> Terminated", "remote_detect", "detect_s", "s", False),
    Row("bound for it", "remote_detect", "bound_s", "s", False),
    Row("idle commands/beat", "remote_idle", "per_beat", "cmds", False),
    Row("idle, in the server", "remote_idle", "server_per_beat", "cmds", False),
)

# Labels without counts: --quick runs a fiftieth of them (the JSON has the counts).
PERSISTENCE_ROWS: tuple[Row, ...] = (
    Row(
        "sequential persist",
        "persist_seq",
        "rate",
        "events/s",
        True,
        None,
        ("redis_evalsha", "rate"),
    ),
    Row("concurrent persist", "persist_concurrent", "rate", "events/s", True),
    Row("recovery, events only", "persist_recovery", "median_s", "s", False),
    Row("recovery, snapshots", "persist_recovery_snap", "median_s", "s", False),
    Row("SQLite concurrent", "persist_sqlite", "rate", "events/s", True),
    Row("SQLite worst hub stall", "persist_sqlite", "stall_ms", "ms", False),
)

DELIVERY_ROWS: tuple[Row, ...] = (
    Row("plain sharded tell", "delivery", "plain_rate", "msgs/s", True),
    Row("reliable delivery", "delivery", "reliable_rate", "msgs/s", True),
    Row("reliable / plain (median pair)", "delivery", "ratio", "x", True),
    Row("reminders due in one second: all fired", "reminders_burst", "fired_s", "s", False),
)

RAW_ROWS: tuple[Row, ...] = (
    Row("queue_oneway", "queue_oneway", "rate", "msgs/s", True),
    Row("queue_ping_pong", "queue_ping_pong", "rate", "rt/s", True),
    Row("queue_ask", "queue_ask", "rate", "asks/s", True),
    Row("greenlet_kill", "greenlet_kill", "rate", "greenlets/s", True),
    Row("greenlet_restart", "greenlet_restart", "median_us", "µs", False),
    Row("switch", "switch", "rate", "rt/s", True),
    Row("deque_call", "deque_call", "rate", "msgs/s", True),
    Row("sender_tell", "sender_tell", "rate", "msgs/s", True),
    Row("checked_tell", "checked_tell", "rate", "msgs/s", True),
    Row("sleep", "sleep", "seconds", "s", False),
    Row("redis_xadd", "redis_xadd", "rate", "entries/s", True),
    Row("redis_xadd_batch", "redis_xadd_batch", "rate", "msgs/s", True),
    Row("redis_echo p50", "redis_echo", "median_us", "µs", False),
    Row("redis_evalsha", "redis_evalsha", "rate", "calls/s", True),
)
