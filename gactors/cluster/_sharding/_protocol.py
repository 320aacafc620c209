"""The sharding protocol's messages: what travels between regions (registered wire
messages: their tags must never change), and what a region, its shards and the node
tell each other inside one process. See :mod:`gactors.cluster._sharding`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from gevent.event import Event

from gactors._messages import register_carrier
from gactors._ref import ActorRef
from gactors.cluster._serialization import register_message


@register_message(tag="gactors.cluster.ShardingEnvelope")
@dataclass(frozen=True, slots=True, init=False)
class ShardingEnvelope:
    """A message for the entity ``entity_id``, sent to a region."""

    entity_id: str
    message: Any

    def __init__(self, entity_id: str, message: Any) -> None:
        # A frozen dataclass's generated __init__ sets each field through
        # object.__setattr__ (0.5 µs, a sixth of an entity message's CPU on the
        # sending node): the slots' own setters do the same in a third of the time.
        _set_entity_id(self, entity_id)
        _set_message(self, message)


_set_entity_id = vars(ShardingEnvelope)["entity_id"].__set__
_set_message = vars(ShardingEnvelope)["message"].__set__


@register_message(tag="gactors.cluster.sharding.Msg")
class _RegionMsg(NamedTuple):
    # A message sent by one region to the owner's region (a NamedTuple: the cheapest
    # registered shape to build and encode, once per message). hops and host are
    # kept for the wire format's sake (regions of earlier versions set them); the
    # allocation table made them meaningless.
    shard: int
    entity_id: str
    message: Any
    hops: int = 0
    host: bool = False
    # The node of the region that forwarded it.
    src: str = ""


@register_message(tag="gactors.cluster.sharding.Batch")
class _RegionBatch(NamedTuple):
    # Messages one region sends to another, gathered while its mailbox had more (one
    # wire message, one decode and one mailbox hop per batch instead of per message).
    # flat: shard, entity_id, message, sender index (-1: no sender), hops (always 0
    # now; kept for the wire format), then the next message..., in the order sent;
    # each sender travels once per batch in senders (a flat list of plain values
    # costs the codec least per message). The same shape is the payload of a
    # hand-over stream entry. host is kept for the wire format (always False now).
    flat: list[Any]
    senders: list[ActorRef]
    host: bool
    src: str


def _unpack_batch(batch: _RegionBatch, _sender: ActorRef | None) -> list[tuple[Any, Any]]:
    f, snd = batch.flat, batch.senders
    return [(f[k + 2], snd[f[k + 3]] if f[k + 3] >= 0 else None) for k in range(0, len(f), 5)]


def _unpack_msg(msg: _RegionMsg, sender: ActorRef | None) -> list[tuple[Any, Any]]:
    return [(msg.message, sender)]


class _Out:
    # A batch being gathered for one node (the wire form of _RegionBatch).
    __slots__ = ("flat", "index", "last", "last_i", "senders")

    def __init__(self) -> None:
        self.flat: list[Any] = []
        self.senders: list[ActorRef] = []
        self.index: dict[ActorRef, int] = {}
        self.last: ActorRef | None = None
        self.last_i = -1

    def add(self, s: int, eid: str, msg: Any, snd: ActorRef | None, hops: int) -> int:
        if snd is None:
            i = -1
        elif snd is self.last:
            i = self.last_i
        else:
            i = self.index_of(snd)
        flat = self.flat
        flat += (s, eid, msg, i, hops)
        return len(flat)

    def index_of(self, snd: ActorRef) -> int:
        # The sender's index in senders (added on its first message), remembered as
        # the last one (a run of messages from one sender looks it up once).
        got = self.index.get(snd)
        if got is None:
            got = self.index[snd] = len(self.senders)
            self.senders.append(snd)
        self.last_i = got
        self.last = snd
        return got

    def messages(self) -> list[tuple[int, str, Any, ActorRef | None, int]]:
        f, snd = self.flat, self.senders
        return [
            (f[k], f[k + 1], f[k + 2], snd[f[k + 3]] if f[k + 3] >= 0 else None, f[k + 4])
            for k in range(0, len(f), 5)
        ]


#: The most messages in one batch between regions (bounds the wire message and the
#: latency of the first one). 1,000 rather than 200: a host's shards then get longer
#: slices and its entities several messages per run (a host's CPU per message 0.75x,
#: docs/performance.md); a batch larger than max_message_size is sent in halves.
BATCH_LIMIT = 1000
_FLAT_LIMIT = 5 * BATCH_LIMIT


class _Flush:
    __slots__ = ()


_FLUSH = _Flush()


@register_message(tag="gactors.cluster.sharding.Drain")
@dataclass(frozen=True, slots=True)
class _Drain:
    # "The shard moves; confirm you routed what I sent you before this marker."
    shard: int
    reply_to: ActorRef
    node: str


@register_message(tag="gactors.cluster.sharding.Drained")
@dataclass(frozen=True, slots=True)
class _Drained:
    shard: int
    node: str


class _Env:
    # An entity message for a local shard; origin: the node of the region it came
    # from ("" when it entered the cluster here): what the shard could not deliver
    # before a hand-off goes to the hand-over stream if it came from elsewhere.
    __slots__ = ("entity_id", "message", "origin")

    def __init__(self, entity_id: str, message: Any, origin: str = "") -> None:
        self.entity_id = entity_id
        self.message = message
        self.origin = origin


class _Envs:
    # The messages for one shard out of one batch from another region, in order:
    # items is flat, entity id, message, sender, then the next one... (no object per
    # message, as in _RegionBatch).
    __slots__ = ("items", "origin")

    def __init__(self, items: list[Any], origin: str) -> None:
        self.items = items
        self.origin = origin  # the node of the region the batch came from

    def messages(self) -> list[tuple[Any, ActorRef | None]]:
        """The (message, sender) pairs it carries, in order."""
        f = self.items
        return [(f[k + 1], f[k + 2]) for k in range(0, len(f), 3)]


# A region batch or forward that cannot reach its node (gone, drained, full), or an
# envelope for a shard that stopped, is dead-lettered as the entity messages it
# carries: one DeadLetter per message, as if it had been sent alone.
register_carrier(_RegionBatch, _unpack_batch)
register_carrier(_RegionMsg, _unpack_msg)
register_carrier(_Env, lambda env, sender: [(env.message, sender)])
register_carrier(_Envs, lambda envs, _sender: envs.messages())


class _Acquired:
    __slots__ = ("token",)

    def __init__(self, token: int | None) -> None:
        self.token = token


class _HandOff:
    __slots__ = ()


class _Taken:
    # The shard's hand-over stream, taken: (entity_id, message, sender) in order.
    __slots__ = ("items",)

    def __init__(self, items: list[tuple[str, Any, Any]]) -> None:
        self.items = items


class _TableRead:
    # A snapshot of the allocation table, read by the region's I/O greenlet.
    __slots__ = ("table",)

    def __init__(self, table: Any) -> None:
        self.table = table


class _AllocFailed:
    # The region's allocation table refused it (ShardCountMismatch): it stops.
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _HandedOff:
    __slots__ = ("leftover", "shard")

    def __init__(self, shard: int, leftover: list[tuple[Any, ActorRef | None]]) -> None:
        self.shard = shard
        self.leftover = leftover


class _Lost:
    __slots__ = ()


class _Released:
    __slots__ = ()


class _PassivateTick:
    __slots__ = ()


class _ViewTick:
    __slots__ = ()


_VIEW_TICK = _ViewTick()


class _Leave:
    __slots__ = ("done",)

    def __init__(self, done: Event) -> None:
        self.done = done


_PASSIVATE_TICK = _PassivateTick()


# A taken hand-over stream that reaches a shard that stopped meanwhile: its messages
# are dead letters, one per message.
register_carrier(_Taken, lambda taken, _sender: [(msg, snd) for _eid, msg, snd in taken.items])
# A shard's hand-off report that reaches a region that stopped meanwhile: the same
# (found by review: it was one dead letter of the report, its messages uncounted).
register_carrier(
    _HandedOff, lambda report, _sender: [(env.message, snd) for env, snd in report.leftover]
)
