"""Reliable delivery: effectively-once from a producer to sharded entities (SPEC section
20, docs/delivery.md).

* :class:`ReliableSender` -- numbers each message per entity, resends it until the
  entity confirms it, at most ``window`` unconfirmed per entity (``send`` blocks
  cooperatively meanwhile); durable with a persistence store.
* :class:`Delivery` -- what the entity receives; :meth:`Delivery.confirm`.
* :class:`ReliableEntity` -- the entity mixin: unwraps, drops duplicates, confirms after
  ``receive`` returns (for a ``PersistentActor``: after the state that includes the
  message is stored).

The protocol itself is the pure state machines of :mod:`gactors.delivery._protocol`.
Needs ``gactors[cluster]`` (sharding and the encoding).
"""

from __future__ import annotations

from gactors.delivery._consumer import ReliableEntity
from gactors.delivery._messages import Delivery
from gactors.delivery._producer import ReliableSender

__all__ = ["Delivery", "ReliableEntity", "ReliableSender"]
