"""The persistence extension: one :class:`Persistence` per actor system.

It owns the system's stores (made from the ``persistence`` settings table through
the plugin registry, on first use) and the two *batchers* that give stores their
writes: every write an actor makes goes into a queue; one flusher greenlet per queue
hands everything queued to the store in one ``write_batch`` call, and while that call
waits for the disk or the server, the next batch gathers. Writes of many actors made in
one turn of the hub thus reach the store together, and a store that needs one
transaction (SQLite) or one round trip (Redis) per batch scales with concurrency.
Results come back to the actors as messages, so nothing here ever blocks an actor or
the hub.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, cast

import gevent
import gevent.event
from gevent.lock import RLock

from gactors import plugins
from gactors._extension import ExtensionId
from gactors._plugin_verify import LABEL
from gactors.persistence._model import PersistenceError
from gactors.persistence._settings import PersistenceSettings, load_persistence_settings

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["Persistence", "PersistenceExtension", "persistence_of"]

_log = logging.getLogger("gactors.persistence")

Callback = Callable[[Any], None]
Listener = Callable[[str, float], None]

RUNNERS = 16
"""Greenlets that serve a system's store calls other than batched writes (recoveries,
snapshots, deletions): enough to keep a networked store's connections busy."""


IDLE_FLUSHER_SECONDS = 5.0
"""How long a batcher's flusher greenlet waits for the next write before it ends (a
new one starts with the next write)."""


class _Batcher:
    """Gathers writes for one store method and calls it with a batch at a time, or with
    up to ``lanes()`` batches at a time for a store that serves them in parallel (its
    ``batches_in_flight``: the Redis store has two connections for writes).

    Its flusher greenlets outlive a batch: they wait for the next one instead of
    ending (one ends after :data:`IDLE_FLUSHER_SECONDS` without writes, or when the
    store closes). A greenlet per batch cost more than the rest of a small batch's CPU
    work under Python 3.11+: each new greenlet maps a fresh 16 KiB frame stack (an
    ``mmap`` and a ``munmap``), on top of creating and scheduling it.

    Why a second batch in flight: with one, a thousand actors each waiting for its
    write move in lock-step (the server runs the whole batch while the process waits,
    then the process handles the answers and makes the next batch while the server
    waits). The writes queued while one batch is out go as the next batch at once, so
    the two overlap. Each actor has one write in flight at a time, so two batches never
    hold writes of the same actor."""

    __slots__ = (
        "_closed",
        "_flushers",
        "_idle",
        "_lanes",
        "_listeners",
        "_name",
        "_queue",
        "_since",
        "_timeout",
        "_wake",
        "_write",
    )

    def __init__(
        self,
        name: str,
        write: Callable[[list[Any]], list[Any]],
        timeout: float,
        listeners: list[Listener],
        lanes: Callable[[], int] = lambda: 1,
    ) -> None:
        self._name = name
        self._write = write
        self._timeout = timeout
        self._listeners = listeners
        self._lanes = lanes
        self._queue: list[tuple[Any, Callback]] = []
        self._flushers = 0  # flusher greenlets alive
        self._idle = 0  # of them, waiting for a batch
        self._wake = gevent.event.Event()
        self._closed = False
        self._since = 0.0  # when the first write of the batch gathering now was queued

    def submit(self, write: Any, callback: Callback) -> None:
        if not self._queue:
            self._since = perf_counter()
            # A flusher wakes in the next turn of the hub, after every actor scheduled
            # in this one had its chance to add its writes (set() only schedules it).
            self._wake.set()
            if not self._idle and self._flushers < self._lanes():
                self._flushers += 1
                gevent.spawn(self._run)
        self._queue.append((write, callback))

    def close(self) -> None:
        """End the flushers once they have written what is queued."""
        self._closed = True
        self._wake.set()

    def _run(self) -> None:
        wake = self._wake
        try:
            while True:
                while self._queue:
                    batch, self._queue = self._queue, []
                    since = self._since
                    results = self._write_batch([w for w, _ in batch])
                    if self._listeners:
                        self._observe(batch, results, perf_counter() - since)
                    for (_, callback), result in zip(batch, results, strict=True):
                        try:
                            callback(result)
                        except Exception:  # pragma: no cover - callbacks only tell
                            _log.exception("persistence: a write callback failed")
                wake.clear()
                # Idle: wait for a write; end when none came for a while or on close.
                self._idle += 1
                try:
                    woken = not self._closed and wake.wait(IDLE_FLUSHER_SECONDS)
                finally:
                    self._idle -= 1
                if not self._queue and (not woken or self._closed):
                    return
        finally:
            self._flushers -= 1

    def _observe(self, batch: list[tuple[Any, Callback]], results: list[Any], took: float) -> None:
        # The writes a store confirmed: their events (a state write is one) and their
        # latency, from the queueing of the batch's first write to the store's answer.
        events = 0
        for (write, _), result in zip(batch, results, strict=True):
            if result is None:
                payloads = getattr(write, "payloads", None)
                events += len(payloads) if payloads is not None else 1
        if events:
            for fn in self._listeners:
                try:
                    fn("persisted", float(events))
                    fn("persist_seconds", took)
                except Exception:  # pragma: no cover - listeners only count
                    _log.exception("persistence: a listener failed")

    def _write_batch(self, writes: list[Any]) -> list[Any]:
        n = len(writes)
        try:
            with gevent.Timeout(self._timeout, False):
                results = self._write(writes)
                if not isinstance(results, list) or len(results) != n:
                    err = PersistenceError(
                        f"the {self._name} returned {results!r} for a batch of {n} writes "
                        "(expected a list with one entry per write)"
                    )
                    return [err] * n
                return results
            timeout = PersistenceError(
                f"the {self._name} did not confirm a batch of {n} writes within "
                f"{self._timeout} s (setting persistence.write_timeout)"
            )
            return [timeout] * n
        except Exception as e:
            _log.warning("persistence: the %s failed a batch of %d writes: %r", self._name, n, e)
            return [e] * n


class Persistence:
    """The persistence of one actor system: its settings and stores.

    ``Persistence.get(system)`` (or ``system.extension(PersistenceExtension)``) returns
    it; stores are created on first use.
    """

    def __init__(self, system: ActorSystem, settings: PersistenceSettings) -> None:
        self.system = system
        if not os.path.isabs(settings.path):
            settings = _with_path(settings, os.path.abspath(settings.path))
        self.settings = settings
        self._clustered = "cluster" in (getattr(system.settings, "extension_tables", None) or {})
        self._stores: dict[str, Any] = {}
        self._batchers: dict[str, _Batcher] = {}
        self._creating = RLock()
        self._calls: deque[tuple[str, Callable[[], Any], Callable[[Any, Any], None]]] = deque()
        self._runners = 0  # greenlets serving self._calls
        self._busy = 0  # of them, in a call now
        self.listeners: list[Listener] = []
        """Callables ``(kind, value)`` told what persistence does, in the hub thread
        (:mod:`gactors.contrib.prometheus` adds one): ``"persisted"`` (events a store
        confirmed, per batch), ``"persist_seconds"`` (that batch's latency),
        ``"failure"`` and ``"rejection"`` (events whose write failed or was refused:
        ``on_persist_failure``/``on_persist_rejected`` ran), ``"recovery_seconds"``
        (one recovery, from its start to ``RecoveryCompleted``). Empty: nothing is
        measured."""
        self._closed = False

    @classmethod
    def get(cls, system: ActorSystem) -> Persistence:
        """The persistence of ``system`` (created on first use)."""
        return persistence_of(system)

    # -- stores ------------------------------------------------------------------------------
    def _store(self, kind: plugins.Kind) -> Any:
        store = self._stores.get(kind)
        if store is None:
            # One greenlet makes it, the others wait for it: a factory may block (the
            # SQLite store opens its file in a thread), and a thousand actors recovering
            # at once must not make a thousand stores.
            with self._creating:
                store = self._stores.get(kind)
                if store is None:
                    if self._closed:
                        raise PersistenceError(f"the persistence of {self.system.name!r} is closed")
                    ref = self.settings.store_ref(kind, self._clustered)
                    store = plugins.create_store(kind, ref, self.settings, self.system)
                    self._stores[kind] = store
        return store

    @property
    def journal(self) -> Any:
        """The system's :class:`~gactors.interfaces.IJournal`."""
        return self._store("journal")

    @property
    def snapshot_store(self) -> Any:
        """The system's :class:`~gactors.interfaces.ISnapshotStore`."""
        return self._store("snapshot_store")

    @property
    def state_store(self) -> Any:
        """The system's :class:`~gactors.interfaces.IDurableStateStore`."""
        return self._store("state_store")

    # -- writes and reads --------------------------------------------------------------------
    def _batcher(self, kind: plugins.Kind) -> _Batcher:
        b = self._batchers.get(kind)
        if b is None:
            # The store is made (and opened) in the flusher's greenlet, never in the
            # actor's: opening a file or a connection must not hold up a dispatcher.
            def write(writes: list[Any]) -> list[Any]:
                # A store plugin, verified by create_store: one result per write.
                return cast("list[Any]", self._store(kind).write_batch(writes))

            def lanes() -> int:
                # Never makes the store (submit runs in the actor's greenlet): one batch
                # at a time until the first one made it.
                return int(getattr(self._stores.get(kind), "batches_in_flight", 1))

            b = self._batchers[kind] = _Batcher(
                LABEL[kind],
                write,
                self.settings.write_timeout,
                self.listeners,
                lanes,
            )
        return b

    def write_events(self, write: Any, callback: Callback) -> None:
        """Queue an :class:`AtomicWrite`; ``callback(None | exception)`` runs in the hub
        thread once the journal answered."""
        self._batcher("journal").submit(write, callback)

    def write_state(self, write: Any, callback: Callback) -> None:
        """Queue a :class:`StateWrite`, answered like :meth:`write_events`."""
        self._batcher("state_store").submit(write, callback)

    def run(self, what: str, fn: Callable[[], Any], callback: Callable[[Any, Any], None]) -> None:
        """Run the store call ``fn`` in one of the system's store-call greenlets, bounded
        by ``write_timeout``; then ``callback(result, None)`` or ``callback(None, error)``.

        Calls queue and at most ``RUNNERS`` greenlets serve them, in order. Not one
        greenlet per call: a thousand actors recovering at once would make a thousand
        greenlets (each with its frames and closures) that all wait for the same store.
        Those objects outlived young collections and made CPython's next *full*
        collection both due and long (60 ms with a test runner's heap, all of it on
        the hub); the store serves the calls a few at a time anyway (the SQLite store
        one per threadpool thread, the Redis store one per pooled connection)."""
        self._calls.append((what, fn, callback))
        # A new runner unless enough free ones (started, not in a call yet) will take
        # the queued calls: a call never waits behind a slow one while runners are left.
        if self._runners < RUNNERS and self._runners - self._busy < len(self._calls):
            self._runners += 1
            gevent.spawn(self._serve)

    def _serve(self) -> None:
        timeout = self.settings.write_timeout
        calls = self._calls
        try:
            while calls:
                what, fn, callback = calls.popleft()
                self._busy += 1
                try:
                    with gevent.Timeout(timeout, False):
                        result = fn()
                        callback(result, None)
                        continue
                    callback(
                        None,
                        PersistenceError(
                            f"{what} did not finish within {timeout} s "
                            "(setting persistence.write_timeout)"
                        ),
                    )
                except Exception as e:
                    try:
                        callback(None, e)
                    except Exception:  # pragma: no cover - callbacks only tell
                        _log.exception("persistence: a store call's callback failed")
                finally:
                    self._busy -= 1
        finally:
            self._runners -= 1

    def notify(self, kind: str, value: float) -> None:
        """Tell :attr:`listeners` ``(kind, value)``."""
        for fn in self.listeners:
            try:
                fn(kind, value)
            except Exception:  # pragma: no cover - listeners only count
                _log.exception("persistence: a listener failed")

    def close(self) -> None:
        """Close the stores: once per factory call (a store object serving several
        kinds is closed once per kind, as it was made once per kind)."""
        self._closed = True
        for store in self._stores.values():
            try:
                store.close()
            except Exception:
                _log.exception("persistence: closing %r failed", store)
        self._stores.clear()
        for batcher in self._batchers.values():
            batcher.close()
        self._batchers.clear()


def _with_path(settings: PersistenceSettings, path: str) -> PersistenceSettings:
    from dataclasses import replace

    return replace(settings, path=path)


class PersistenceExtension(ExtensionId[Persistence]):
    """The persistence extension (SPEC section 11): owns the ``persistence`` settings
    table; ``system.extension(PersistenceExtension)`` is :meth:`Persistence.get`."""

    settings_key = "persistence"

    def validate_settings(self, table: Any) -> PersistenceSettings:
        """The ``persistence`` table as :class:`PersistenceSettings` (``ConfigError``
        naming a bad key)."""
        return load_persistence_settings(table)

    def create(self, system: ActorSystem) -> Persistence:
        """The system's :class:`Persistence`; its stores close when the system has
        terminated (persistent actors write until they stop)."""
        tables = getattr(system.settings, "extension_tables", None) or {}
        p = Persistence(system, load_persistence_settings(tables.get("persistence")))
        system.register_on_termination(p.close)
        return p


def persistence_of(system: ActorSystem) -> Persistence:
    """The :class:`Persistence` of ``system``, created on first use."""
    return system.extension(PersistenceExtension)
