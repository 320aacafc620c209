"""What travels and what is stored by reliable delivery (all registered for the wire
and the persistence codec, under stable tags)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gactors._ref import ActorRef
from gactors.serialization import register_message

__all__ = ["Delivery"]


@register_message(tag="gactors.delivery.Delivery")
@dataclass(frozen=True, slots=True)
class Delivery:
    """A message from a :class:`~gactors.delivery.ReliableSender`, as the entity gets it.

    ``message`` is what was sent, ``producer_id`` who sent it, ``sequence_nr`` its
    number (1, 2, 3, ... per producer and entity). An actor that handles deliveries
    itself calls :meth:`confirm` once it has processed the message (the
    :class:`~gactors.delivery.ReliableEntity` mixin does it, and drops duplicates).
    The other fields are the protocol's: the entity the message is for, the producer's
    incarnation, its lowest unconfirmed sequence number when this copy left, and where
    confirmations go.
    """

    message: Any
    producer_id: str
    sequence_nr: int
    entity_id: str = ""
    epoch: int = 0
    low: int = 1
    reply_to: ActorRef | None = None

    def confirm(self) -> None:
        """Tell the producer that this message (and every earlier one from it) was
        processed; the producer stops resending them and frees its window."""
        if self.reply_to is not None:
            self.reply_to.tell(
                Confirm(self.producer_id, self.entity_id, self.epoch, self.sequence_nr), None
            )


@register_message(tag="gactors.delivery.Confirm")
@dataclass(frozen=True, slots=True)
class Confirm:
    """Entity -> producer: everything up to ``sequence_nr`` of ``epoch`` is processed."""

    producer_id: str
    entity_id: str
    epoch: int
    sequence_nr: int


# -- the durable producer's journal --------------------------------------------------------
@register_message(tag="gactors.delivery.Queued")
@dataclass(frozen=True, slots=True)
class Queued:
    entity_id: str
    sequence_nr: int
    message: Any


@register_message(tag="gactors.delivery.Confirmed")
@dataclass(frozen=True, slots=True)
class Confirmed:
    entity_id: str
    sequence_nr: int


@register_message(tag="gactors.delivery.Epoch")
@dataclass(frozen=True, slots=True)
class Epoch:
    epoch: int


# -- what a persistent ReliableEntity stores ----------------------------------------------
@register_message(tag="gactors.delivery.Tagged")
@dataclass(frozen=True, slots=True)
class Tagged:
    """A user event persisted while processing delivery ``(producer_id, epoch, seq)``."""

    event: Any
    producer_id: str
    epoch: int
    sequence_nr: int


@register_message(tag="gactors.delivery.Seen")
@dataclass(frozen=True, slots=True)
class Seen:
    """A delivery processed without an event of its own (the record alone)."""

    producer_id: str
    epoch: int
    sequence_nr: int


@register_message(tag="gactors.delivery.TaggedSnapshot")
@dataclass(frozen=True, slots=True)
class TaggedSnapshot:
    """A user snapshot with the consumer books: producer id -> [epoch, seq]."""

    snapshot: Any
    seen: dict[str, list[int]]
