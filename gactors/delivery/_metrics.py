"""Counters of reliable delivery, per actor system (plain ints, no I/O):

* ``resent`` -- copies a producer of this system sent again (timeouts, restarts);
* ``duplicates_dropped`` -- copies an entity of this system dropped as already
  processed.

:class:`gactors.contrib.prometheus.ActorSystemMetrics` exports them as
``gactors_delivery_resent_total`` and ``gactors_delivery_duplicates_dropped_total``
(labelled ``system``) once the system uses reliable delivery: a ``ReliableSender``
was made or a ``ReliableEntity`` got its first delivery there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gactors._extension import ExtensionId

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = ["DeliveryCounts", "DeliveryCountsExtension"]


class DeliveryCounts:
    """The reliable-delivery counters of one actor system (monotonic)."""

    __slots__ = ("duplicates_dropped", "resent")

    def __init__(self) -> None:
        self.resent = 0
        self.duplicates_dropped = 0


class DeliveryCountsExtension(ExtensionId[DeliveryCounts]):
    """The system's :class:`DeliveryCounts` (created on first use)."""

    def create(self, system: ActorSystem) -> DeliveryCounts:
        return DeliveryCounts()


def counts(system: ActorSystem) -> DeliveryCounts:
    """The counters of ``system`` (created, and from then on exported, on first use)."""
    return system.extension(DeliveryCountsExtension)
