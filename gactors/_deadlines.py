"""The timeouts of pending asks: one hub timer for all of them.

An ask used to arm a libev timer of its own and close it on the reply. Creating,
starting and closing a timer costs about 3,600 CPU instructions (counted with
``python -m benchmarks.instructions``), a tenth of a whole ask round trip. Here an ask
only appends its promise to a queue; one timer, armed for the earliest deadline, fails
the asks whose deadline has passed.

Asks with the same timeout are queued in the order they were made, so each queue is
sorted by deadline and only its head is ever compared with the clock. A reply takes its
promise off the queue when it is at either end (always the case for sequential asks);
otherwise the promise stays queued, marked done, until it reaches the head, and
:meth:`AskDeadlines.discard` compacts the queues when such entries outnumber the live
ones (a done promise keeps its message and reply alive while it is queued).

Deadlines are read from :func:`time.monotonic`, not from the loop's clock, which only
advances once per loop iteration and lags after the hub was blocked: an ask's timeout
counts from the call, and the timer never fires early (docs/reliability.md).

While the system runs, its own async watcher keeps the hub's loop alive, and the timer
is not referenced (an armed timer of answered asks must not keep a loop alive once the
system is gone). After the system terminated, asks to its actors still time out: from
then on an armed timer is referenced, and it is closed when no ask is pending.
"""

from __future__ import annotations

import math
from collections import deque
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gevent.hub import Hub

__all__ = ["AskDeadlines", "Expiring"]

# Done entries tolerated in the queues before a compaction is considered.
_COMPACT_AFTER = 1024


class Expiring(Protocol):
    """What a queued promise provides (``PromiseRef``)."""

    deadline: float
    queue: deque[Any] | None

    def expire(self, timeout: float) -> None:
        """Fail with a timeout after ``timeout`` seconds (hub thread)."""


class AskDeadlines:
    """The deadlines of one system's pending asks (hub thread only)."""

    __slots__ = (
        "_final",
        "_fire_at",
        "_hub",
        "_last",
        "_last_timeout",
        "_queues",
        "_stale",
        "_timer",
    )

    def __init__(self, hub: Hub) -> None:
        self._hub = hub
        self._queues: dict[float, deque[Expiring]] = {}
        # The queue of the last timeout used: most asks of a program use one timeout.
        self._last_timeout = math.nan  # equal to no float
        self._last: deque[Expiring] = deque()
        self._timer: Any = None
        self._fire_at = math.inf  # when the timer fires; inf: not armed
        self._stale = 0  # done promises still queued
        self._final = False  # the system terminated: the timer keeps the loop alive

    @property
    def pending(self) -> int:
        """Asks waiting for a reply or their timeout."""
        return sum(len(q) for q in self._queues.values()) - self._stale

    def add(self, promise: Expiring, timeout: float) -> None:
        """Fail ``promise`` after ``timeout`` seconds unless :meth:`discard` comes first."""
        now = monotonic()
        deadline = promise.deadline = now + timeout
        queue: deque[Expiring] | None
        if timeout == self._last_timeout:
            queue = self._last
        else:
            queue = self._queues.get(timeout)
            if queue is None:
                queue = self._queues[timeout] = deque()
            self._last_timeout = timeout
            self._last = queue
        queue.append(promise)
        promise.queue = queue
        if deadline < self._fire_at:
            self._arm(deadline, now)

    def timeout_of(self, promise: Expiring) -> float | None:
        """The timeout ``promise`` was queued with, or None if it is not queued (its
        ask started at ``promise.deadline - timeout``). Not for the hot path: it looks
        through the queues (one per distinct timeout)."""
        queue = promise.queue
        if queue is None:
            return None
        if queue is self._last:
            return self._last_timeout
        for timeout, q in self._queues.items():
            if q is queue:
                return timeout
        return None

    def discard(self, promise: Expiring) -> None:
        """``promise`` is done: it needs no timeout any more."""
        queue = promise.queue
        if queue is None:
            return
        promise.queue = None
        if queue[-1] is promise:
            queue.pop()
        elif queue[0] is promise:
            queue.popleft()
        else:
            self._stale += 1
            if self._stale > _COMPACT_AFTER:
                self._compact()
            return
        if self._final and not queue and self.pending == 0:
            self.close()

    def system_terminated(self) -> None:
        """From now on an armed timer keeps the hub's loop alive (see the module)."""
        self._final = True
        if self.pending == 0:
            self.close()
        elif self._timer is not None:
            self._timer.ref = True

    def close(self) -> None:
        """Stop the timer (the pending asks then wait for their replies only)."""
        timer = self._timer
        self._timer = None
        self._fire_at = math.inf
        if timer is not None:
            timer.close()

    # -- internals ------------------------------------------------------------------------
    def _arm(self, deadline: float, now: float) -> None:
        old = self._timer
        if old is not None:
            old.close()
        loop = self._hub.loop
        # libev counts `after` from its own clock: refreshed here, so that a lagging
        # clock does not make the timer fire early (it would only re-arm, but late
        # clocks are the rule after a blocked hub).
        loop.update_now()
        timer = self._timer = loop.timer(max(0.0, deadline - now), ref=self._final)
        timer.start(self._fire)
        self._fire_at = deadline

    def _fire(self) -> None:
        self._fire_at = math.inf
        timer = self._timer
        self._timer = None
        if timer is not None:
            timer.close()
        now = monotonic()
        # Expiring a promise runs its future's callbacks, which may ask again (and
        # arm a new timer): iterate over a copy, and re-read each queue's head.
        for timeout, queue in list(self._queues.items()):
            while queue:
                promise = queue[0]
                if promise.queue is not queue:  # done: left here by discard
                    queue.popleft()
                    self._stale -= 1
                    continue
                if promise.deadline > now:
                    break
                queue.popleft()
                promise.queue = None
                promise.expire(timeout)
            if not queue and queue is not self._last and self._queues.get(timeout) is queue:
                del self._queues[timeout]
        nearest = min((q[0].deadline for q in self._queues.values() if q), default=math.inf)
        if nearest < self._fire_at:
            self._arm(nearest, monotonic())

    def _compact(self) -> None:
        for timeout, queue in list(self._queues.items()):
            live = [p for p in queue if p.queue is queue]
            queue.clear()
            queue.extend(live)
            if not live and queue is not self._last:
                del self._queues[timeout]
        self._stale = 0
