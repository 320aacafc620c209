"""The reminders extension: one :class:`Reminders` per actor system (SPEC section 20).

With a cluster, reminders live on the cluster's Redis server, one sorted set per
shard (:mod:`gactors.reminders._redis`); every node runs a tick that reads the due
reminders of the shards it owns now (and of the singletons running on it), delivers
their messages through the sharding region (or to the local singleton instance), and
then advances each one with a script that checks it is still the one it read. Without a
cluster they live in the SQLite file of SPEC section 19 and target actor paths.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any, cast

import gevent

from gactors import _context
from gactors._extension import ExtensionId
from gactors._threads import get_ident
from gactors.exceptions import ConfigError
from gactors.persistence._codec import codec
from gactors.reminders._model import (
    Target,
    check_misfire,
    check_name,
    due_ms,
    period_ms,
    plan,
    target,
)

if TYPE_CHECKING:
    from gactors._context import ActorContext
    from gactors._system import ActorSystem
    from gactors.reminders._redis import RedisReminderStore

__all__ = ["ActorReminders", "Reminders", "RemindersExtension"]

_log = logging.getLogger("gactors.reminders")


class Reminders:
    """The durable reminders of ``system`` (the same object each time).

    ``Reminders(system)`` also starts this node's tick: every node that may host a
    reminder's target (a sharded entity, a singleton) must have created it (or have a
    ``reminders`` settings table, which creates it as the system starts).
    """

    system: ActorSystem

    def __new__(cls, system: ActorSystem) -> Reminders:
        return system.extension(RemindersExtension)

    def _setup(self, system: ActorSystem, table: dict[str, Any]) -> None:
        self.system = system
        self.tick = float(table["tick"])
        self.batch = int(table["batch"])
        tables = getattr(system.settings, "extension_tables", None) or {}
        cluster = tables.get("cluster")
        self.clustered = cluster is not None
        #: Reminders registered through this object, and firings made by this node.
        self.registered = 0
        self.fired = 0
        self.lateness: list[float] = []  # lateness (s) of the firings not drained yet
        self._closed = False
        self._undecodable: set[str] = set()
        self._store: Any
        if cluster is not None:
            from gactors.cluster._redis import RedisBackend
            from gactors.reminders._redis import RedisReminderStore

            backend = RedisBackend(
                cluster.url,
                system.name,
                getattr(cluster, "key_prefix", "gactors"),
                client_name=f"gactors-reminders-{system.name}",
            )
            self._backend: Any = backend
            self._store = RedisReminderStore(backend)
        else:
            from gactors.persistence._settings import load_persistence_settings
            from gactors.reminders._sqlite import SqliteReminderStore

            path = load_persistence_settings(tables.get("persistence")).path
            self._backend = None
            self._store = SqliteReminderStore(os.path.abspath(path))
        self._ticker = gevent.spawn(self._loop)

    # -- the API -----------------------------------------------------------------------------
    def register(
        self,
        name: str,
        message: Any,
        *,
        entity: tuple[str, str] | None = None,
        singleton: str | None = None,
        path: str | None = None,
        due: Any,
        period: Any = None,
        misfire: str = "once",
    ) -> None:
        """Store the reminder ``name`` of the target (replacing one of the same name)
        before returning. ``message`` is delivered at ``due`` (seconds from now, a
        ``timedelta`` or an aware ``datetime``) and then every ``period`` (seconds or a
        ``timedelta``; None: once). ``misfire`` (``"once"``, ``"all"``, ``"skip"``)
        says what happens to due times that passed while no node could fire them."""
        check_name(name)
        t = target(entity, singleton, path)
        when = due_ms(due)
        every = period_ms(period)
        mode = check_misfire(misfire)
        self._check_mode(t)
        record = codec().encode_for_store(
            [message, every, mode], f"the message of reminder {name!r}"
        )
        if self.clustered:
            self._store.register(self._keys(t), self._store.member(t, name), when, record)
        else:
            self._store.register(t.path, name, when, record)
        self.registered += 1

    def unregister(
        self,
        name: str,
        *,
        entity: tuple[str, str] | None = None,
        singleton: str | None = None,
        path: str | None = None,
    ) -> bool:
        """Remove the reminder ``name`` of the target; True if it existed."""
        check_name(name)
        t = target(entity, singleton, path)
        self._check_mode(t)
        if self.clustered:
            return bool(self._store.unregister(self._keys(t), self._store.member(t, name)))
        return bool(self._store.unregister(t.path, name))

    def names(
        self,
        *,
        entity: tuple[str, str] | None = None,
        singleton: str | None = None,
        path: str | None = None,
    ) -> list[str]:
        """The names of the target's reminders, sorted."""
        t = target(entity, singleton, path)
        self._check_mode(t)
        if self.clustered:
            return list(self._store.names(self._keys(t), f"{t.entity_id}\x00"))
        return list(self._store.names(t.path))

    def upcoming(self, limit: int = 200) -> list[dict[str, Any]]:
        """The reminders this node fires, the earliest first, at most ``limit``: on a
        cluster those of the shards it owns now and of the singletons running on it,
        else all of the SQLite store. Each is ``{"target": "cart/42" | "singleton x" |
        "/user/a", "name", "due": epoch seconds}`` (read-only; one round trip or query;
        what the dashboard shows)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"limit must be an int >= 1, not {limit!r}")
        far = 2**62  # every reminder is due before it: the first ``limit`` of each key
        out: list[dict[str, Any]] = []
        if not self.clustered:
            for path, name, due, _record in self._store.due(far, limit):
                out.append({"target": path, "name": name, "due": due / 1000.0})
            return out
        from gactors.cluster._singleton import local_singletons

        store = self._store
        where: list[tuple[str, str]] = []  # (zset key, what the target is called)
        for type_name, (_n, mine) in self._shards().items():
            for s in mine:
                where.append((store.shard_keys(type_name, s)[0], type_name + "/"))
        for single in local_singletons(self.system):
            if single["running"]:
                t = Target("singleton", name=single["name"])
                where.append((store.keys(t, None)[0], f"singleton {single['name']}"))
        replies = store.due([k for k, _ in where], far, limit)
        for (_key, label), items in zip(where, replies, strict=True):
            for member, due in items:
                entity_id, _, name = member.partition("\x00")
                target_name = label + entity_id if label.endswith("/") else label
                out.append({"target": target_name, "name": name, "due": due / 1000.0})
        out.sort(key=lambda r: r["due"])
        return out[:limit]

    def _check_mode(self, t: Target) -> None:
        if self.clustered and t.kind == "path":
            raise ValueError(
                f"a reminder of {t} needs a single process on the SQLite store; on a cluster "
                "node, target a sharded entity (entity=) or a singleton (singleton=)"
            )
        if not self.clustered and t.kind != "path":
            raise ValueError(
                f"a reminder of {t} needs a cluster (a 'cluster' settings table); a single "
                "process targets an actor path (path='/user/...')"
            )

    def _shards(self) -> dict[str, tuple[int, tuple[int, ...]]]:
        from gactors.cluster._sharding import owned_shards

        system = self.system
        if system._tid == get_ident():
            return owned_shards(system)
        return system.run_in_hub(owned_shards, system)

    def _keys(self, t: Target) -> tuple[str, str]:
        if t.kind == "singleton":
            return cast("RedisReminderStore", self._store).keys(t, None)  # clustered: Redis
        from gactors.cluster._sharding import shard_of

        known = self._shards().get(t.type_name)
        if known is None:
            raise ValueError(
                f"no sharding region {t.type_name!r} on this node: call ClusterSharding(system)"
                ".start or start_proxy first (its number of shards decides where the "
                "reminder is stored)"
            )
        return cast("RedisReminderStore", self._store).keys(t, shard_of(t.entity_id, known[0]))

    # -- the tick ----------------------------------------------------------------------------
    def _loop(self) -> None:
        # A fixed cadence (not a pause after each tick): the resolution stays the tick.
        at = time.monotonic()
        while not self._closed:
            at += self.tick
            gevent.sleep(max(0.0, at - time.monotonic()))
            if self._closed:
                return
            if time.monotonic() - at > self.tick:
                at = time.monotonic()  # fell behind (a blocked hub): no burst of ticks
            try:
                if self.clustered:
                    self._tick_cluster()
                else:
                    self._tick_local()
            except Exception as e:
                # The next tick tries again: nothing advanced is lost, nothing read and
                # not advanced is forgotten (it is still due).
                _log.warning("reminders: a tick of %r failed: %r", self.system.name, e)

    def _fired(self, due: int, now_ms: int, n: int) -> None:
        self.fired += n
        self.lateness.append((now_ms - due) / 1000.0)
        if len(self.lateness) > 10_000:
            # Nobody drains them (no metrics exporter): keep the newest.
            del self.lateness[:5000]

    def drain_lateness(self) -> list[float]:
        """The lateness in seconds (firing time minus due time) of the firings since
        the last call, for a metrics exporter (``gactors.contrib.prometheus``)."""
        out, self.lateness = self.lateness, []
        return out

    def _tick_cluster(self) -> None:
        from gactors.cluster._sharding import ClusterSharding
        from gactors.cluster._singleton import local_singletons

        system = self.system
        store = self._store
        where: list[tuple[tuple[str, str], Any]] = []
        for type_name, (_n, mine) in self._shards().items():
            for s in mine:
                where.append((store.shard_keys(type_name, s), ("entity", type_name)))
        for single in local_singletons(system):
            if single["running"]:
                t = Target("singleton", name=single["name"])
                where.append((store.keys(t, None), ("singleton", single["name"])))
        if not where:
            return
        now = int(time.time() * 1000)
        replies = store.due([k[0] for k, _ in where], now, self.batch)
        due_where = [(w, items) for w, items in zip(where, replies, strict=True) if items]
        if not due_where:
            return
        grace = int(2 * self.tick * 1000)
        records = store.records_many([(w[0][1], [m for m, _ in items]) for w, items in due_where])
        sharding = ClusterSharding(system)
        advances: list[tuple[tuple[str, str], str, int, bytes, int | None]] = []
        counts: list[tuple[int, int]] = []
        for ((keys, (kind, what)), items), recs in zip(due_where, records, strict=True):
            for (member, due), record in zip(items, recs, strict=True):
                if record is None:
                    continue  # unregistered between the two reads
                decoded = self._decode(record, member)
                if decoded is None:
                    continue
                message, every, mode = decoded
                entity_id, _, _name = member.partition("\x00")
                fires, nxt = plan(due, every, mode, now, grace)
                if kind == "entity":
                    ref: Any = sharding.entity_ref(what, entity_id)
                else:
                    ref = system.actor_selection(f"/system/singletonManager-{what}/singleton")
                # Told first, advanced after: a node that dies in between leaves the
                # reminder due, and the next owner fires it again (at least once).
                for _ in range(fires):
                    ref.tell(message, None)
                advances.append((keys, member, due, record, nxt))
                counts.append((due, fires))
        for ok, (due, fires) in zip(store.advance_many(advances), counts, strict=True):
            if ok:
                self._fired(due, now, fires)

    def _decode(self, record: bytes, what: str) -> tuple[Any, int | None, str] | None:
        """The stored ``(message, period, misfire)``, or None when this node cannot
        decode it (a message class not registered here): left due, for a node that
        can, and logged once per reminder rather than failing the whole tick."""
        try:
            message, every, mode = codec().decode(record)
        except Exception as e:
            if what not in self._undecodable:
                self._undecodable.add(what)
                _log.warning("reminders: cannot decode the reminder %r: %r", what, e)
            return None
        return message, every, mode

    def _tick_local(self) -> None:
        now = int(time.time() * 1000)
        grace = int(2 * self.tick * 1000)
        system = self.system
        for path, name, due, record in self._store.due(now, self.batch):
            decoded = self._decode(record, f"{path} {name}")
            if decoded is None:
                continue
            message, every, mode = decoded
            fires, nxt = plan(due, every, mode, now, grace)
            sel = system.actor_selection(path)
            for _ in range(fires):
                sel.tell(message, None)
            if self._store.advance(path, name, due, record, nxt):
                self._fired(due, now, fires)

    def close(self) -> None:
        """Stop the tick and close the store (at the system's termination)."""
        self._closed = True
        self._ticker.kill(block=False)
        try:
            self._store.close()
        finally:
            if self._backend is not None:
                self._backend.close()

    def __repr__(self) -> str:
        where = "redis" if self.clustered else "sqlite"
        return f"<Reminders of {self.system.name!r} ({where}, tick {self.tick} s)>"


class ActorReminders:
    """``self.context.reminders``: the reminders of one entity, singleton or actor,
    with the arguments of :class:`Reminders` minus the target."""

    __slots__ = ("_kw", "_reminders")

    def __init__(self, reminders: Reminders, kw: dict[str, Any]) -> None:
        self._reminders = reminders
        self._kw = kw

    def register(
        self, name: str, message: Any, *, due: Any, period: Any = None, misfire: str = "once"
    ) -> None:
        """:meth:`Reminders.register` for this actor."""
        self._reminders.register(name, message, due=due, period=period, misfire=misfire, **self._kw)

    def unregister(self, name: str) -> bool:
        """:meth:`Reminders.unregister` for this actor."""
        return self._reminders.unregister(name, **self._kw)

    def names(self) -> list[str]:
        """:meth:`Reminders.names` for this actor."""
        return self._reminders.names(**self._kw)


def _of_context(context: ActorContext) -> ActorReminders:
    cell = context._cell  # noqa: SLF001  resolved here, lazily, not on the hot path
    system = cell.system
    reminders = Reminders(system)
    elements = cell.ref.path.elements
    entity_id = context.entity_id
    if entity_id is not None:
        for e in elements:
            if e.startswith("sharding-"):
                return ActorReminders(reminders, {"entity": (e[len("sharding-") :], entity_id)})
    if (
        context.fencing_token is not None
        and len(elements) >= 2
        and elements[-1] == "singleton"
        and elements[-2].startswith("singletonManager-")
    ):
        return ActorReminders(reminders, {"singleton": elements[-2][len("singletonManager-") :]})
    return ActorReminders(reminders, {"path": "/" + "/".join(elements)})


_context._hooks["reminders"] = _of_context  # noqa: SLF001  the context's lazy hook


class RemindersExtension(ExtensionId[Reminders]):
    """The reminders extension: owns the ``reminders`` settings table (``tick``: seconds
    between two looks at the due reminders, default 1.0; ``batch``: at most this many
    due reminders per shard per tick, default 1000)."""

    settings_key = "reminders"
    settings_fields = {"tick": (float, 1.0), "batch": (int, 1000)}

    def validate_settings(self, table: Any) -> Any:
        """The table with defaults; ``ConfigError`` for a tick or batch that is not > 0."""
        values = super().validate_settings(table)
        if not values["tick"] > 0:
            raise ConfigError(
                f"setting 'reminders.tick' must be > 0 seconds, not {values['tick']!r}"
            )
        if isinstance(values["batch"], bool) or values["batch"] < 1:
            raise ConfigError(
                f"setting 'reminders.batch' must be an int >= 1, not {values['batch']!r}"
            )
        return values

    def create(self, system: ActorSystem) -> Reminders:
        """The system's :class:`Reminders`; its tick stops when the system terminates."""
        tables = getattr(system.settings, "extension_tables", None) or {}
        table = tables.get("reminders") or self.validate_settings({})
        inst = object.__new__(Reminders)
        inst._setup(system, table)
        system.register_on_termination(inst.close)
        return inst
