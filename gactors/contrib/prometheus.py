"""Prometheus metrics of an actor system, through ``prometheus_client`` (``gactors[prometheus]``).

::

    from gactors.contrib.prometheus import ActorSystemMetrics, metrics_app

    ActorSystemMetrics(system)            # once per system
    app = metrics_app()                   # a WSGI app serving /metrics

The metrics (every one labelled ``system``, the actor system's name):

========================================  =======  ================  ===========================
name                                      type     multiprocess      what
========================================  =======  ================  ===========================
``gactors_actors``                        gauge    livesum           live actors (guardians too)
``gactors_mailbox_messages``              gauge    livesum           user messages waiting
``gactors_mailbox_max_depth``             gauge    livemax           the deepest mailbox
``gactors_messages_processed_total``      counter  summed            user messages processed
``gactors_failures_total{directive}``     counter  summed            failures by supervisor
                                                                     directive (restart, resume,
                                                                     stop): restarts by directive
``gactors_dead_letters_total``            counter  summed            dead letters
``gactors_hub_blocked_total``             counter  summed            hub-blocking episodes
``gactors_hub_blocked_seconds_total``     counter  summed            seconds the hub was blocked
``gactors_cluster_members{status}``       gauge    livemax           cluster members by status
                                                                     (absent unless a system of
                                                                     the registry is a cluster
                                                                     node)
``gactors_cluster_messages_total``        counter  summed            remote messages of this node
``{outcome}``                                                        by outcome: sent, received,
                                                                     dead_letters (here: gone,
                                                                     full, not sent), full,
                                                                     unknown, drained (SPEC 17
                                                                     "Precisely"; cluster nodes
                                                                     only)
``gactors_cluster_flush_seconds``         histo-   summed            round trip of one flush of
                                          gram                       outgoing remote messages
                                                                     (per flush, not per message)
``gactors_cluster_read_seconds``          histo-   summed            round trip of one inbox read
                                          gram                       that could not wait (sent
                                                                     without BLOCK while a backlog
                                                                     remained): no idle time
``gactors_cluster_inbox_backlog``         gauge    livesum           unread entries of the node's
                                                                     inbox (XINFO GROUPS lag,
                                                                     sampled by the heartbeat at
                                                                     most once a second)
``gactors_message_processing_seconds``    histo-   summed            one receive of an actor of a
``{actor_class}``                         gram                       timed class (the setting
                                                                     ``metrics.timed_actors``;
                                                                     absent while none is timed)
``gactors_ask_seconds{actor_class}``      histo-   summed            an ask to such an actor, to
                                          gram                       the end of the receive that
                                                                     answered it
``gactors_mailbox_wait_seconds``          histo-   summed            an asked message's wait in
``{actor_class}``                         gram                       the mailbox of such an actor
``gactors_persistence_events_persisted``  counter  summed            events the stores
``_total``                                                           confirmed (a durable state
                                                                     write is one)
``gactors_persistence_persist_seconds``   histo-   summed            latency of a batch of
                                          gram                       writes: from its first
                                                                     write queued to the store's
                                                                     answer
``gactors_persistence_failures_total``    counter  summed            events whose write failed
                                                                     (``on_persist_failure``)
``gactors_persistence_rejections_total``  counter  summed            events refused
                                                                     (``on_persist_rejected``)
``gactors_persistence_recovery_seconds``  histo-   summed            one recovery of a persistent
                                          gram                       actor, start to
                                                                     ``RecoveryCompleted``
``gactors_reminders_registered_total``    counter  summed            reminders registered here
``gactors_reminders_fired_total``         counter  summed            reminder firings made here
``gactors_reminders_lateness_seconds``    histo-   summed            firing time minus due time
                                          gram                       (the three absent unless a
                                                                     system uses gactors.reminders)
``gactors_delivery_resent_total``         counter  summed            reliable-delivery copies a
                                                                     producer here sent again
``gactors_delivery_duplicates_dropped``   counter  summed            copies an entity here dropped
``_total``                                                           as already processed (the
                                                                     two absent unless a system
                                                                     uses gactors.delivery)
========================================  =======  ================  ===========================

The three per-class histograms are measured by :mod:`gactors._timing` (actor classes
are timed only when named in ``metrics.timed_actors``, e.g. ``ActorSystem(config=
{"metrics": {"timed_actors": ["Cart", "shop.actors.Order"]}})``, ``"*"`` for all; at
most ``metrics.max_classes`` labels, the rest is ``actor_class="other"``): a timed
message costs a bucket increment, and the histograms are brought up to date at each
refresh, so prometheus_client is not called per message.

The persistence metrics are counted by :mod:`gactors.persistence` itself, through
``Persistence.listeners``: an actor that does not persist pays nothing for them.

Every counter is exported at 0 from the creation of :class:`ActorSystemMetrics` on.
Counters move at once (they are incremented from the event stream, or per refresh for
messages processed); gauges are read from the actor tree by :meth:`ActorSystemMetrics.refresh`,
which runs every ``interval`` seconds and, in a single process, at every scrape.

**gunicorn with several workers** (``PROMETHEUS_MULTIPROC_DIR`` set before the
workers start): every worker writes its metrics to files in that directory and
:func:`metrics_app` (in whichever worker gets the scrape) adds them up. Counters are
summed over all workers, including exited ones (totals stay monotonic); the gauges
marked *livesum* / *livemax* count live workers only, which needs ``child_exit`` in
``gunicorn.conf.py`` to call ``prometheus_client.multiprocess.mark_process_dead(worker.pid)``
(see ``docs/dashboard.md``). In that mode the gauges are as fresh as the last periodic
refresh of each worker (``interval``, default 5 s).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

try:
    from prometheus_client import (
        REGISTRY,
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        make_wsgi_app,
    )
    from prometheus_client.multiprocess import MultiProcessCollector
except ImportError as _e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "gactors.contrib.prometheus needs prometheus_client: pip install prometheus_client "
        "(or, from a gactors checkout, pip install '.[prometheus]')"
    ) from _e

from gactors._observer import observer_for
from gactors._timing import BOUNDS, TimingExtension, timing_for
from gactors.contrib import worker_system
from gactors.contrib._members import cluster_members

if TYPE_CHECKING:
    from gactors._messages import HubBlocked
    from gactors._supervision import FailureHandled
    from gactors._system import ActorSystem

__all__ = ["DEFAULT_INTERVAL", "ActorSystemMetrics", "metrics_app", "multiprocess_mode"]

_log = logging.getLogger("gactors.prometheus")

DEFAULT_INTERVAL = 5.0
"""Seconds between two periodic refreshes of the gauges."""

# Seconds: a batched write takes a disk sync or a round trip (sub-millisecond to
# tens of milliseconds); a recovery from nothing to a long replay.
_PERSIST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_RECOVERY_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def multiprocess_mode() -> bool:
    """True when prometheus_client writes to ``PROMETHEUS_MULTIPROC_DIR`` (gunicorn)."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class _Family:
    """The metric objects of one registry (each shared by every system, by label)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.live: weakref.WeakSet[ActorSystemMetrics] = weakref.WeakSet()
        # Live systems by name: the name is the label, so it must be unique.
        self.names: dict[str, ActorSystemMetrics] = {}
        # Registered before the metrics, so a scrape refreshes the gauges before it
        # reads them (the registry collects in registration order).
        registry.register(_RefreshOnScrape(self))
        labels = ["system"]
        self.actors = Gauge(
            "gactors_actors",
            "Live actors, guardians included",
            labels,
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.mailbox = Gauge(
            "gactors_mailbox_messages",
            "User messages waiting in mailboxes",
            labels,
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.max_depth = Gauge(
            "gactors_mailbox_max_depth",
            "The deepest mailbox",
            labels,
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.processed = Counter(
            "gactors_messages_processed",
            "User messages processed",
            labels,
            registry=registry,
        )
        self.failures = Counter(
            "gactors_failures",
            "Actor failures by the supervisor's directive (restart, resume, stop)",
            [*labels, "directive"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "gactors_dead_letters", "Dead letters", labels, registry=registry
        )
        self.blocked = Counter(
            "gactors_hub_blocked",
            "Episodes of an actor blocking the gevent hub",
            labels,
            registry=registry,
        )
        self.blocked_seconds = Counter(
            "gactors_hub_blocked_seconds",
            "Seconds the gevent hub was blocked (a lower bound)",
            labels,
            registry=registry,
        )
        self.persisted = Counter(
            "gactors_persistence_events_persisted",
            "Events the persistence stores confirmed (a durable state write is one)",
            labels,
            registry=registry,
        )
        self.persist_seconds = Histogram(
            "gactors_persistence_persist_seconds",
            "Latency of a batch of persistence writes, from its first write queued to the "
            "store's answer",
            labels,
            registry=registry,
            buckets=_PERSIST_BUCKETS,
        )
        self.persist_failures = Counter(
            "gactors_persistence_failures",
            "Events whose write failed (on_persist_failure ran)",
            labels,
            registry=registry,
        )
        self.persist_rejections = Counter(
            "gactors_persistence_rejections",
            "Events the encoder or the store refused (on_persist_rejected ran)",
            labels,
            registry=registry,
        )
        self.recovery_seconds = Histogram(
            "gactors_persistence_recovery_seconds",
            "Time a persistent actor took to recover, from its start to RecoveryCompleted",
            labels,
            registry=registry,
            buckets=_RECOVERY_BUCKETS,
        )
        self._registry = registry
        # Created by the first cluster node only: a system without a cluster exports no
        # gactors_cluster_members at all (rather than a family without samples).
        self.members: Gauge | None = None
        self.cluster_messages: Counter | None = None
        self.cluster_io: tuple[Histogram, Histogram, Gauge] | None = None
        self.reminders: tuple[Counter, Counter, Histogram] | None = None
        self.delivery: tuple[Counter, Counter] | None = None
        # The metrics registered on first use since the scrape under way began: the
        # registry collects the collectors it had when the scrape began, so
        # _RefreshOnScrape hands these over itself (else they would miss one scrape,
        # and a rate() its first increase).
        self.new_in_scrape: list[Any] = []
        self.timing: tuple[Histogram, Histogram, Histogram] | None = None

    def timing_histograms(self) -> tuple[Histogram, Histogram, Histogram]:
        """Processing time, ask latency and mailbox wait per actor class, registered on
        first use (only a system that times some class has them)."""
        with _families_lock:
            if self.timing is None:
                labels = ["system", "actor_class"]
                self.timing = (
                    Histogram(
                        "gactors_message_processing_seconds",
                        "Time one receive of an actor of a timed class took",
                        labels,
                        registry=self._registry,
                        buckets=BOUNDS,
                    ),
                    Histogram(
                        "gactors_ask_seconds",
                        "From an ask to the end of the receive of a timed actor that answered it",
                        labels,
                        registry=self._registry,
                        buckets=BOUNDS,
                    ),
                    Histogram(
                        "gactors_mailbox_wait_seconds",
                        "Time an asked message waited in the mailbox of a timed actor",
                        labels,
                        registry=self._registry,
                        buckets=BOUNDS,
                    ),
                )
                self.new_in_scrape.extend(self.timing)
            return self.timing

    def cluster_messages_counter(self) -> Counter:
        """``gactors_cluster_messages_total``, registered on first use."""
        with _families_lock:
            if self.cluster_messages is None:
                self.cluster_messages = Counter(
                    "gactors_cluster_messages",
                    "Remote messages of this cluster node by outcome (SPEC 17)",
                    ["system", "outcome"],
                    registry=self._registry,
                )
                self.new_in_scrape.append(self.cluster_messages)
            return self.cluster_messages

    def cluster_io_metrics(self) -> tuple[Histogram, Histogram, Gauge]:
        """The remote flush and read latencies and the inbox backlog, registered on
        first use (cluster nodes only)."""
        with _families_lock:
            if self.cluster_io is None:
                labels = ["system"]
                self.cluster_io = (
                    Histogram(
                        "gactors_cluster_flush_seconds",
                        "Round trip of one flush of this node's outgoing remote messages "
                        "(one per flush, whatever its number of messages and destinations), "
                        "from the send of the batch to the last reply; failed flushes are "
                        "not counted",
                        labels,
                        registry=self._registry,
                        buckets=BOUNDS,
                    ),
                    Histogram(
                        "gactors_cluster_read_seconds",
                        "Round trip of one read of this node's inbox that could not wait "
                        "for entries: a read sent without blocking because the read before "
                        "it returned a full batch (a backlog); reads that may block waiting "
                        "for new entries are not counted, so no idle time is included",
                        labels,
                        registry=self._registry,
                        buckets=BOUNDS,
                    ),
                    Gauge(
                        "gactors_cluster_inbox_backlog",
                        "Entries (batches of remote messages) in this node's inbox not read "
                        "yet, sampled by the heartbeat at most once a second (absent if the "
                        "server cannot tell: Redis before 7)",
                        labels,
                        registry=self._registry,
                        multiprocess_mode="livesum",
                    ),
                )
            return self.cluster_io

    def members_gauge(self) -> Gauge:
        """``gactors_cluster_members``, registered on first use."""
        with _families_lock:
            if self.members is None:
                self.members = Gauge(
                    "gactors_cluster_members",
                    "Cluster members by status, as this node sees them",
                    ["system", "status"],
                    registry=self._registry,
                    multiprocess_mode="livemax",
                )
                self.new_in_scrape.append(self.members)
            return self.members

    def reminders_metrics(self) -> tuple[Counter, Counter, Histogram]:
        """The reminders' counters and lateness histogram, registered on first use."""
        with _families_lock:
            if self.reminders is None:
                self.reminders = (
                    Counter(
                        "gactors_reminders_registered",
                        "Reminders registered through this node",
                        ["system"],
                        registry=self._registry,
                    ),
                    Counter(
                        "gactors_reminders_fired",
                        "Reminder firings made by this node (messages told)",
                        ["system"],
                        registry=self._registry,
                    ),
                    Histogram(
                        "gactors_reminders_lateness_seconds",
                        "Firing time minus due time of the reminders this node fired",
                        ["system"],
                        registry=self._registry,
                        buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0),
                    ),
                )
                self.new_in_scrape.extend(self.reminders)
            return self.reminders

    def delivery_metrics(self) -> tuple[Counter, Counter]:
        """The reliable-delivery counters (resent, duplicates dropped), registered on
        first use."""
        with _families_lock:
            if self.delivery is None:
                self.delivery = (
                    Counter(
                        "gactors_delivery_resent",
                        "Reliable-delivery copies sent again by the producers of this node",
                        ["system"],
                        registry=self._registry,
                    ),
                    Counter(
                        "gactors_delivery_duplicates_dropped",
                        "Reliable-delivery copies dropped as already processed by the "
                        "entities of this node",
                        ["system"],
                        registry=self._registry,
                    ),
                )
                self.new_in_scrape.extend(self.delivery)
            return self.delivery


class _RefreshOnScrape:
    """A collector without metrics of its own: it refreshes the gauges first."""

    def __init__(self, family: _Family) -> None:
        self._family = weakref.ref(family)

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> list[Any]:
        family = self._family()
        if family is None:
            return []
        with _families_lock:
            family.new_in_scrape.clear()
        for m in list(family.live):
            try:
                m.refresh()
            except Exception:
                # A scrape must still answer with what the other collectors have.
                _log.exception("refreshing the gactors metrics of %r failed", m.system)
        with _families_lock:
            new, family.new_in_scrape = family.new_in_scrape, []
        if multiprocess_mode():
            # The scrape reads every process's files (MultiProcessCollector), where the
            # new metrics' values are already.
            return []
        # Registered by this refresh, after the registry chose what this scrape reads.
        return [metric for collector in new for metric in collector.collect()]


_families: weakref.WeakKeyDictionary[CollectorRegistry, _Family] = weakref.WeakKeyDictionary()
_families_lock = threading.Lock()


def _family(registry: CollectorRegistry) -> _Family:
    with _families_lock:
        family = _families.get(registry)
        if family is None:
            family = _families[registry] = _Family(registry)
    return family


class ActorSystemMetrics:
    """Exposes ``system`` (None: the worker system) as Prometheus metrics in ``registry``.

    Create it once per system, in the process that runs the system (under gunicorn: in
    ``post_worker_init``, after the system is started). ``interval`` is the period of
    the background refresh of the gauges (None: only at scrapes, in a single process).
    Failures, dead letters and hub blocks are counted from creation on.
    """

    def __init__(
        self,
        system: ActorSystem | None = None,
        *,
        registry: CollectorRegistry = REGISTRY,
        interval: float | None = DEFAULT_INTERVAL,
    ) -> None:
        if interval is not None and not interval > 0:
            raise ValueError(
                f"interval must be a positive number of seconds or None, not {interval!r}"
            )
        self.system = system if system is not None else worker_system()
        self._family = family = _family(registry)
        name = self.system.name
        with _families_lock:
            other = family.names.get(name)
            if other is not None and not other.system.is_terminated:
                # Twice the same label: the counters would count every event twice, or
                # two systems' figures would overwrite each other.
                raise ValueError(
                    f"the actor system {name!r} already has its metrics in this registry"
                    + ("" if other.system is self.system else " (another system of that name)")
                )
            family.names[name] = self
        self._observer = obs = observer_for(self.system)
        self._processed_seen = obs.processed()
        # Every counter of this system is exported from the start, at 0 (a rate() or an
        # increase() needs the first sample).
        family.processed.labels(name)
        self._dead_letters = family.dead_letters.labels(name)
        self._blocked = family.blocked.labels(name)
        self._blocked_seconds = family.blocked_seconds.labels(name)
        self._failures: dict[str, Any] = {
            d: family.failures.labels(name, d) for d in ("restart", "resume", "stop")
        }
        self._member_statuses: set[str] = set()
        self._cluster_seen: dict[str, int] = {}
        # What the node's flush and read buckets held at the last refresh.
        self._cluster_io_seen: list[tuple[list[int], float]] = [([], 0.0), ([], 0.0)]
        self._backlog_set = False
        self._persistence: dict[str, Callable[[float], None]] = {
            "persisted": family.persisted.labels(name).inc,
            "persist_seconds": family.persist_seconds.labels(name).observe,
            "failure": family.persist_failures.labels(name).inc,
            "rejection": family.persist_rejections.labels(name).inc,
            "recovery_seconds": family.recovery_seconds.labels(name).observe,
        }
        # The persistence extension (made here if the system has none yet: an object
        # without stores) tells us what its persistent actors do. Without msgspec there
        # is no persistence to watch: its counters stay at 0.
        self._persistence_of: Any = None
        try:
            from gactors.persistence._extension import persistence_of
        except ImportError:
            _log.debug("gactors.persistence is not importable: no persistence metrics")
        else:
            self._persistence_of = persistence_of(self.system)
            self._persistence_of.listeners.append(self._on_persistence)
        self._reminders_seen = (0, 0)
        # What the timing's buckets held at the last refresh: (label, kind) -> counts, sum.
        self._timing_seen: dict[tuple[str, int], tuple[list[int], float]] = {}
        if self.system.has_extension(TimingExtension) and timing_for(self.system).enabled:
            # Registered now, not inside the first scrape (that scrape's list of
            # collectors is already made): the families are there from the start.
            family.timing_histograms()
        self._delivery_seen = (0, 0)
        obs.listeners.append(self._on_event)
        family.live.add(self)
        self.refresh()
        if interval is not None:
            self._task: Any = self.system.scheduler.schedule_with_fixed_delay(
                interval, interval, self.refresh
            )
        self.system.register_on_termination(self._forget)

    def _on_event(self, kind: str, event: Any) -> None:
        # Called in the hub thread by the observer, for each event it records.
        if kind == "dead_letter":
            self._dead_letters.inc()
        elif kind == "failure":
            handled: FailureHandled = event
            d = handled.directive.name.lower()
            counter = self._failures.get(d)
            if counter is None:
                counter = self._failures[d] = self._family.failures.labels(self.system.name, d)
            counter.inc()
        elif kind == "hub_blocked":
            blocked: HubBlocked = event
            self._blocked.inc()
            self._blocked_seconds.inc(blocked.seconds)

    def _on_persistence(self, kind: str, value: float) -> None:
        # Called in the hub thread by gactors.persistence.
        record = self._persistence.get(kind)
        if record is not None:
            record(value)

    def refresh(self) -> None:
        """Read the gauges off the actor tree and add the newly processed messages."""
        system = self.system
        if system.is_terminated:
            return
        family = self._family
        name = system.name
        totals = self._observer.totals(max_age=0.0)
        family.actors.labels(name).set(totals["actors"])
        family.mailbox.labels(name).set(totals["mailbox"])
        family.max_depth.labels(name).set(totals["max_mailbox"])
        processed = self._observer.processed()
        if processed > self._processed_seen:
            family.processed.labels(name).inc(processed - self._processed_seen)
        self._processed_seen = processed
        # The members as this node sees them (no I/O; gactors.cluster only imported
        # on a cluster node).
        members = self._observer.in_hub(cluster_members, system)
        if members is not None:
            counts: dict[str, int] = {}
            for m in members:
                counts[m["status"]] = counts.get(m["status"], 0) + 1
            gauge = family.members_gauge()
            for status in self._member_statuses | set(counts):
                gauge.labels(name, status).set(counts.get(status, 0))
            self._member_statuses |= set(counts)
            # The node's delivery counters (ClusterNode.stats: plain ints, no I/O).
            node = _cluster_node(system)
            stats = getattr(node, "stats", None)
            if isinstance(stats, dict):
                counter = family.cluster_messages_counter()
                seen = self._cluster_seen
                for outcome, value in stats.items():
                    if value > seen.get(outcome, -1):
                        counter.labels(name, outcome).inc(value - seen.get(outcome, 0))
                        seen[outcome] = value
                self._refresh_cluster_io(node)
        self._refresh_reminders()
        self._refresh_delivery()
        self._refresh_timing()

    def _refresh_cluster_io(self, node: Any) -> None:
        # The node's own buckets (gactors._timing.Histo, same bounds), as deltas: the
        # flusher and the reader add to them, prometheus_client is not called per flush.
        flush, read, backlog = self._family.cluster_io_metrics()
        name = self.system.name
        for i, (hist, histo) in enumerate(
            (
                (flush, getattr(node, "flush_seconds", None)),
                (read, getattr(node, "read_seconds", None)),
            )
        ):
            child = hist.labels(name)
            if histo is None:
                continue
            counts, total = list(histo.counts), histo.sum
            before, before_sum = self._cluster_io_seen[i]
            self._cluster_io_seen[i] = (counts, total)
            deltas = counts if not before else [a - b for a, b in zip(counts, before, strict=True)]
            if any(deltas):
                _add_buckets(child, deltas, total - before_sum)
        value = getattr(node, "inbox_backlog", None)
        if value is not None:
            backlog.labels(name).set(value)
            self._backlog_set = True

    def _refresh_timing(self) -> None:
        # The timing's own buckets (gactors._timing, same bounds) added to the
        # histograms as deltas: bucket by bucket through the children's value objects
        # (what Histogram.observe increments), so no observe() runs per message and the
        # multiprocess files get the same numbers.
        system = self.system
        if not system.has_extension(TimingExtension):
            return
        timing = system.extension(TimingExtension)
        if not timing.classes:
            return
        hists = self._family.timing_histograms()
        seen = self._timing_seen
        for label, times in list(timing.classes.items()):
            for kind, histo in enumerate((times.processing, times.ask, times.wait)):
                counts, total = list(histo.counts), histo.sum
                before, before_sum = seen.get((label, kind), (None, 0.0))
                child = hists[kind].labels(system.name, label)
                seen[(label, kind)] = (counts, total)
                if before is None:
                    deltas = counts
                else:
                    deltas = [a - b for a, b in zip(counts, before, strict=True)]
                if not any(deltas):
                    continue
                _add_buckets(child, deltas, total - before_sum)

    def _refresh_reminders(self) -> None:
        # Only a system that uses reminders has them (and only then is the module
        # imported: gactors.reminders needs the persistence extra).
        mod = sys.modules.get("gactors.reminders._extension")
        system = self.system
        if mod is None or not system.has_extension(mod.RemindersExtension):
            return
        rem = system.extension(mod.RemindersExtension)
        registered, fired, late = self._family.reminders_metrics()
        name = system.name
        seen_r, seen_f = self._reminders_seen
        if rem.registered > seen_r:
            registered.labels(name).inc(rem.registered - seen_r)
        else:
            registered.labels(name)
        if rem.fired > seen_f:
            fired.labels(name).inc(rem.fired - seen_f)
        else:
            fired.labels(name)
        self._reminders_seen = (rem.registered, rem.fired)
        hist = late.labels(name)
        for seconds in rem.drain_lateness():
            hist.observe(seconds)

    def _refresh_delivery(self) -> None:
        # Only a system that uses reliable delivery has its counters (and only then is
        # the module imported: gactors.delivery needs the cluster extra).
        mod = sys.modules.get("gactors.delivery._metrics")
        system = self.system
        if mod is None or not system.has_extension(mod.DeliveryCountsExtension):
            return
        counts = system.extension(mod.DeliveryCountsExtension)
        resent, dropped = self._family.delivery_metrics()
        name = system.name
        seen_r, seen_d = self._delivery_seen
        now_r, now_d = counts.resent, counts.duplicates_dropped
        resent.labels(name).inc(max(0, now_r - seen_r))
        dropped.labels(name).inc(max(0, now_d - seen_d))
        self._delivery_seen = (now_r, now_d)

    def _forget(self) -> None:
        # A terminated system has no live gauges; its counters keep their totals.
        family = self._family
        family.live.discard(self)
        if self._persistence_of is not None:
            try:
                self._persistence_of.listeners.remove(self._on_persistence)
            except ValueError:  # pragma: no cover - removed once
                pass
        name = self.system.name
        with _families_lock:
            if self._family.names.get(name) is self:
                del self._family.names[name]
        gauges: list[tuple[Gauge, tuple[str, ...]]] = [
            (g, (name,)) for g in (family.actors, family.mailbox, family.max_depth)
        ]
        if family.members is not None:
            gauges += [(family.members, (name, status)) for status in self._member_statuses]
        if family.cluster_io is not None and self._backlog_set:
            gauges.append((family.cluster_io[2], (name,)))
        for gauge, labels in gauges:
            if multiprocess_mode():
                # prometheus_client cannot remove a label set from the files of other
                # processes (it warns at every worker's exit if asked to): zero it, so the
                # live sums are right until child_exit marks this process dead.
                gauge.labels(*labels).set(0)
                continue
            try:
                gauge.remove(*labels)
            except KeyError:
                pass


def _cluster_node(system: ActorSystem) -> Any:
    """The system's cluster node (its provider; read for ``stats``, ``flush_seconds``,
    ``read_seconds`` and ``inbox_backlog``, plain attributes: no I/O)."""
    return system.provider


def _add_buckets(child: Any, deltas: list[int], seconds: float) -> None:
    """Add bucket counts (not cumulative, the last one above every bound) and their sum
    to a histogram child."""
    buckets = getattr(child, "_buckets", None)
    value_sum = getattr(child, "_sum", None)
    if buckets is not None and value_sum is not None and len(buckets) == len(deltas):
        for bucket, n in zip(buckets, deltas, strict=True):
            if n:
                bucket.inc(n)
        value_sum.inc(seconds)
        return
    # A prometheus_client whose histogram children are shaped otherwise: observe each
    # value at its bucket's upper bound (counts exact, the sum an upper estimate).
    _log.debug("prometheus_client histograms have no _buckets: observing one by one")
    for i, n in enumerate(deltas):  # pragma: no cover - depends on prometheus_client
        for _ in range(n):
            child.observe(BOUNDS[i] if i < len(BOUNDS) else BOUNDS[-1] * 2)


def metrics_app(registry: CollectorRegistry | None = None) -> Callable[..., Iterable[bytes]]:
    """A WSGI app serving the metrics in Prometheus' text format.

    ``registry`` None: the default registry, or with ``PROMETHEUS_MULTIPROC_DIR`` set a
    fresh registry adding up every process's files (refreshing this process's gauges
    first, so the worker that answers is never stale).
    """
    if registry is None and multiprocess_mode():
        registry = CollectorRegistry()
        # First this process's refresh (it writes to its files), then the files are read.
        registry.register(_RefreshOnScrape(_family(REGISTRY)))
        MultiProcessCollector(registry)
    # prometheus_client is left untyped (setup.cfg): make_wsgi_app returns a WSGI app.
    app = make_wsgi_app(registry if registry is not None else REGISTRY)
    return cast("Callable[..., Iterable[bytes]]", app)
