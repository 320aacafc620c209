"""Processing time, ask latency and mailbox wait of chosen actor classes.

Nothing here runs unless a system is told which actor classes to time (the
``metrics.timed_actors`` setting, or :meth:`ActorTiming.time_classes`). The message
loop itself (``gactors._dispatch``) is not touched: timing is a wrapper put around the
``receive`` of each actor of an allowed class, when the actor is installed (at its start
and at each restart, through the system's ``receive_hook``) and around the behaviors it
``become``\\ s. An actor of any other class, and every actor of a system without timed
classes, runs exactly the code it ran before; a timed message costs one Python call, two
clock reads and a bucket increment, with no lock and no Prometheus call: the Prometheus
histograms and the dashboard read the buckets here once a second or at a scrape.

What is measured, per actor class (``label``: the class's qualified name without its
``<locals>`` part; beyond ``max_classes`` classes, the rest share the label ``other``,
so the number of label values is bounded):

* processing time: one ``receive`` (or behavior) call, from its start to its end;
* ask latency: for a message sent by ``ask``, from the ask to the end of the
  ``receive`` that handled it (the reply, for the usual actor that replies in
  ``receive``; an ask answered later, after the ``receive`` returned, is not counted);
* mailbox wait: for a message sent by ``ask`` (the only messages that carry the time
  they were sent, without a cost to every ``tell``), from the ask to the start of its
  ``receive``.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable
from time import monotonic, perf_counter
from typing import TYPE_CHECKING, Any, ClassVar

from gactors._extension import ExtensionId
from gactors._ref import PromiseRef
from gactors._threads import get_ident
from gactors.exceptions import ConfigError

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._system import ActorSystem

__all__ = [
    "BOUNDS",
    "HISTORY_SECONDS",
    "MAX_CLASSES",
    "ActorTiming",
    "ClassTimes",
    "TimingExtension",
    "percentile",
    "timing_for",
]

_log = logging.getLogger("gactors.timing")

BOUNDS: tuple[float, ...] = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds) of the buckets; one more bucket holds what is above the last.
A pure-Python receive takes microseconds, a receive doing I/O milliseconds to seconds."""

MAX_CLASSES = 50
"""Default of ``metrics.max_classes``: classes with a label of their own."""

HISTORY_SECONDS = 600
"""Seconds of per-second, per-class history kept (like the observer's)."""

OTHER = "other"


class Histo:
    """Bucket counts (not cumulative: bucket ``i`` counts values in
    ``(BOUNDS[i-1], BOUNDS[i]]``, the last one those above ``BOUNDS[-1]``) and a sum."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BOUNDS) + 1)
        self.sum = 0.0

    def add(self, seconds: float) -> None:
        self.counts[bisect_left(BOUNDS, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)


def percentile(counts: list[int], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of bucket ``counts``, interpolated linearly
    inside its bucket (as Prometheus' ``histogram_quantile`` does); None if empty."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, c in enumerate(counts):
        if c and seen + c >= rank:
            lower = BOUNDS[i - 1] if i > 0 else 0.0
            upper = BOUNDS[i] if i < len(BOUNDS) else BOUNDS[-1]
            return lower + (upper - lower) * (rank - seen) / c
        seen += c
    return BOUNDS[-1]  # pragma: no cover - rank <= total always lands above


class ClassTimes:
    """The measurements of one label (one actor class, or ``other``)."""

    __slots__ = ("ask", "label", "processing", "wait")

    def __init__(self, label: str) -> None:
        self.label = label
        self.processing = Histo()
        self.ask = Histo()
        self.wait = Histo()


class TimingExtension(ExtensionId["ActorTiming"]):
    """The ``metrics`` settings table: which actor classes are timed.

    ``timed_actors``: class names (the qualified name, ``"Cart"``, or with its module,
    ``"shop.actors.Cart"``; ``"*"``: every class); ``max_classes``: classes with a label
    of their own (default :data:`MAX_CLASSES`)."""

    settings_key: ClassVar[str | None] = "metrics"
    settings_fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "timed_actors": ((list, tuple), ()),
        "max_classes": (int, MAX_CLASSES),
    }

    def validate_settings(self, table: Any) -> Any:
        values = super().validate_settings(table)
        names = values["timed_actors"]
        for n in names:
            if not isinstance(n, str) or not n:
                raise ConfigError(
                    "setting 'metrics.timed_actors' must list class names (non-empty "
                    f"strings, or '*'), not {n!r}"
                )
        if isinstance(values["max_classes"], bool) or values["max_classes"] < 1:
            raise ConfigError(
                f"setting 'metrics.max_classes' must be an int >= 1: {values['max_classes']!r}"
            )
        values["timed_actors"] = tuple(names)
        return values

    def create(self, system: ActorSystem) -> ActorTiming:
        timing = ActorTiming(system)
        table = system.settings.extension_tables.get("metrics")
        if table is not None:
            timing.max_classes = table["max_classes"]
            if table["timed_actors"]:
                timing.time_classes(table["timed_actors"])
        return timing


def timing_for(system: ActorSystem) -> ActorTiming:
    """The timing of ``system`` (created, timing nothing, on first use)."""
    return system.extension(TimingExtension)


class ActorTiming:
    """Per-class processing time, ask latency and mailbox wait of one system.

    ``classes`` maps each label to its :class:`ClassTimes` (cumulative since the
    timing began); ``history`` keeps, per second, what each label did in that second.
    """

    def __init__(self, system: ActorSystem) -> None:
        self.system = system
        self.names: frozenset[str] = frozenset()
        self.every = False
        self.max_classes = MAX_CLASSES
        self.classes: dict[str, ClassTimes] = {}
        self._by_class: dict[type, ClassTimes | None] = {}
        # The receive wrappers made so far (a constructor's own receive may be one).
        self._wrappers: weakref.WeakSet[Callable[[Any], Any]] = weakref.WeakSet()
        # Per second: (wall second, {label: (messages, bucket deltas)}), oldest first.
        self.history: deque[tuple[int, dict[str, tuple[int, list[int]]]]] = deque(
            maxlen=HISTORY_SECONDS
        )
        self._sampled: dict[str, list[int]] = {}
        self._task: Any = None

    @property
    def enabled(self) -> bool:
        return self.every or bool(self.names)

    def time_classes(self, names: Iterable[str]) -> None:
        """Time the actors of these classes from now on (their next message; ``"*"``:
        every class). Adds to the classes already timed."""
        names = tuple(names)
        for n in names:
            if not isinstance(n, str) or not n:
                raise ValueError(f"a class name (non-empty string, or '*') was expected: {n!r}")
        self.names |= frozenset(n for n in names if n != "*")
        self.every = self.every or "*" in names
        self._by_class.clear()
        self.system.receive_hook = self._hook
        self._in_hub(self._wrap_running)
        if self._task is None and not self.system.is_terminated:
            self._task = self.system.scheduler.schedule_with_fixed_delay(1.0, 1.0, self.sample)

    def _in_hub(self, fn: Callable[[], None]) -> None:
        system = self.system
        if system.is_terminated:
            return
        if get_ident() == system._tid:
            fn()
        else:
            system.run_in_hub(fn)

    def _wrap_running(self) -> None:
        # The actors that exist already: their receive is wrapped now (hub thread).
        stack: list[ActorCell] = [self.system.root_cell]
        while stack:
            cell = stack.pop()
            actor = cell.actor
            if actor is not None:
                self._hook(cell, actor, None)
                if cell.behavior is not None and cell.behavior_stack is None:
                    cell.behavior = None  # bound again, to the wrapper, on the next message
            stack.extend(cell.child_cells.values())

    def times_of(self, cls: type) -> ClassTimes | None:
        """The measurements for actors of ``cls``, or None if it is not timed."""
        try:
            return self._by_class[cls]
        except KeyError:
            pass
        qualname = getattr(cls, "__qualname__", "")
        full = f"{getattr(cls, '__module__', '')}.{qualname}"
        times: ClassTimes | None = None
        if self.every or qualname in self.names or full in self.names:
            label = qualname.rpartition(".<locals>.")[2] or qualname
            times = self.classes.get(label)
            if times is None:
                if len(self.classes) >= self.max_classes:
                    label = OTHER
                    times = self.classes.get(OTHER)
                if times is None:
                    times = self.classes[label] = ClassTimes(label)
        self._by_class[cls] = times
        return times

    def _hook(self, cell: ActorCell, actor: Any, behavior: Any) -> Any:
        """The system's ``receive_hook``: called with ``behavior`` None when ``actor``
        is installed (wraps its ``receive``), else by ``become`` (returns the behavior
        to use)."""
        times = self.times_of(type(actor))
        if behavior is None:
            if times is not None:
                own = vars(actor).get("receive")  # a receive the constructor assigned
                if own is not None and own in self._wrappers:
                    return None  # wrapped already
                fn = own if own is not None else type(actor).receive.__get__(actor)
                actor.receive = self._wrap(cell, fn, times)
            return None
        return behavior if times is None else self._wrap(cell, behavior, times)

    def _wrap(self, cell: ActorCell, fn: Callable[[Any], Any], times: ClassTimes) -> Any:
        processing = times.processing.counts
        deadlines = self.system.ask_deadlines
        proc = times.processing

        def timed(message: Any) -> Any:
            sender: Any = cell.sender
            asked = None
            if type(sender) is PromiseRef:
                # An ask: it knows its deadline, the timeout its queue (asked before the
                # receive: a reply takes the promise off its queue).
                timeout = deadlines.timeout_of(sender)
                if timeout is not None:
                    asked = sender.deadline - timeout
                    times.wait.add(max(0.0, monotonic() - asked))
            t0 = perf_counter()
            try:
                return fn(message)
            finally:
                d = perf_counter() - t0
                processing[bisect_left(BOUNDS, d)] += 1
                proc.sum += d
                if asked is not None and sender._future._state:  # noqa: SLF001  answered
                    times.ask.add(max(0.0, monotonic() - asked))

        functools.update_wrapper(timed, fn)
        self._wrappers.add(timed)
        return timed

    # -- history (hub thread, every second) -----------------------------------------------------
    def sample(self) -> None:
        """Record what each label did since the previous sample (the system's scheduler
        calls it every second once a class is timed)."""
        second = int(time.time())
        row: dict[str, tuple[int, list[int]]] = {}
        for label, times in self.classes.items():
            now = list(times.processing.counts)
            before = self._sampled.get(label)
            self._sampled[label] = now
            delta = now if before is None else [a - b for a, b in zip(now, before, strict=True)]
            n = sum(delta)
            if n:
                row[label] = (n, delta)
        self.history.append((second, row))

    def chart_view(self, top: int = 6) -> dict[str, Any]:
        """:meth:`history_view` of the ``top`` labels with the most messages in the
        window (what a page draws; the rest are counted in ``omitted``)."""
        view = self.history_view()
        classes = view["classes"]
        ranked = sorted(classes, key=lambda k: sum(classes[k]["messages"]), reverse=True)
        view["omitted"] = max(0, len(ranked) - top)
        view["classes"] = {k: classes[k] for k in ranked[:top]}
        return view

    def history_view(self, seconds: int = HISTORY_SECONDS) -> dict[str, Any]:
        """Per label, per second (oldest first, the last ``seconds``): messages and the
        50th, 90th and 99th percentile of processing time in milliseconds (None in a
        second without messages). ``{"end": second, "classes": {label: {"messages":
        [...], "p50": [...], "p90": [...], "p99": [...]}}}``."""
        rows = list(self.history)[-seconds:]
        end = rows[-1][0] if rows else int(time.time())
        out: dict[str, dict[str, list[Any]]] = {}
        labels = sorted({label for _, row in rows for label in row})
        for label in labels:
            series: dict[str, list[Any]] = {"messages": [], "p50": [], "p90": [], "p99": []}
            for _, row in rows:
                entry = row.get(label)
                if entry is None:
                    series["messages"].append(0)
                    for q in ("p50", "p90", "p99"):
                        series[q].append(None)
                    continue
                n, counts = entry
                series["messages"].append(n)
                for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                    p = percentile(counts, v)
                    series[q].append(None if p is None else round(p * 1000, 4))
            out[label] = series
        return {"end": end, "seconds": len(rows), "classes": out}

    def summary(self) -> list[dict[str, Any]]:
        """Per label, since the timing began: messages, mean and percentiles (ms) of
        processing time, asks and their latency, mailbox wait."""
        out = []
        for label, t in sorted(self.classes.items()):
            counts = t.processing.counts
            n = sum(counts)

            def ms(v: float | None) -> float | None:
                return None if v is None else round(v * 1000, 4)

            out.append(
                {
                    "label": label,
                    "messages": n,
                    "mean_ms": ms(t.processing.sum / n) if n else None,
                    "p50_ms": ms(percentile(counts, 0.5)),
                    "p99_ms": ms(percentile(counts, 0.99)),
                    "asks": t.ask.count,
                    "ask_p99_ms": ms(percentile(t.ask.counts, 0.99)),
                    "wait_p99_ms": ms(percentile(t.wait.counts, 0.99)),
                }
            )
        return out


class ClassEvents:
    """Restarts and dead letters per actor class, per second (the observer counts them
    from the events it already receives: no cost on the message path).

    A restart counts for the class of the actor that failed; a dead letter for the class
    of its intended recipient (``"(remote)"`` for a ref of another node, ``"(none)"``
    without one). At most ``max_classes`` labels; the rest count as ``other``."""

    KINDS = ("restarts", "dead_letters")

    def __init__(self, max_classes: int = MAX_CLASSES) -> None:
        self.max_classes = max_classes
        self.totals: dict[str, list[int]] = {}
        self._sampled: dict[str, list[int]] = {}
        # Per second: (wall second, {label: [restarts, dead letters]}) of the non-zero ones.
        self.history: deque[tuple[int, dict[str, list[int]]]] = deque(maxlen=HISTORY_SECONDS)

    def count(self, label: str, kind: int) -> None:
        """One event of ``kind`` (0: restart, 1: dead letter) for ``label``."""
        row = self.totals.get(label)
        if row is None:
            if len(self.totals) >= self.max_classes:
                label = OTHER
                row = self.totals.get(OTHER)
            if row is None:
                row = self.totals[label] = [0, 0]
        row[kind] += 1

    def sample(self, second: int) -> None:
        """Record the events of each label since the previous sample (every second)."""
        row: dict[str, list[int]] = {}
        for label, now in self.totals.items():
            before = self._sampled.get(label, [0, 0])
            delta = [now[0] - before[0], now[1] - before[1]]
            if delta[0] or delta[1]:
                row[label] = delta
            self._sampled[label] = list(now)
        self.history.append((second, row))

    def view(self, top: int = 6) -> dict[str, Any]:
        """Per label with events in the window (the ``top`` with the most), per second,
        oldest first: ``{"end", "classes": {label: {"restarts": [...], "dead_letters":
        [...]}}, "omitted"}``."""
        rows = list(self.history)
        end = rows[-1][0] if rows else int(time.time())
        sums: dict[str, int] = {}
        for _, row in rows:
            for label, d in row.items():
                sums[label] = sums.get(label, 0) + d[0] + d[1]
        ranked = sorted(sums, key=lambda k: sums[k], reverse=True)
        out: dict[str, dict[str, list[int]]] = {}
        for label in ranked[:top]:
            out[label] = {
                kind: [row.get(label, [0, 0])[i] for _, row in rows]
                for i, kind in enumerate(self.KINDS)
            }
        return {"end": end, "classes": out, "omitted": max(0, len(ranked) - top)}
