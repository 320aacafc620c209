"""``ClusterSharding``: one actor per entity id across the cluster.

Concepts and guarantees for users: docs/cluster/singleton-sharding.md.

Shape (every name below is internal):

* A *region* per entity type and node, ``/system/sharding-<type>``. It maps an entity
  id to a shard (``crc32(entity_id) % number_of_shards``, the same on every node and
  every Python). Which node owns a shard is decided in ONE place: the type's
  *allocation table* in Redis, changed only by Lua scripts (``lua/alloc*.lua``, under
  the membership hash tag), read by every region once per heartbeat. The desired
  owners are rendezvous (highest-random-weight) hashing over the hosting members that
  are up (not leaving) and have a region of the type; a join or leave moves only the
  shards the node wins/loses. A region sends a shard's messages only to its owner in
  the table: to the local *shard* actor, or to the owner's region in *batches* per
  node (what the region's mailbox holds when it gets to its own flush marker, at most
  ``BATCH_LIMIT``, travels as one wire message, each sender once; a batch that cannot
  travel, too big or with an unserializable message, goes in halves, down to single
  messages). A drain marker flushes first, so batches never overtake it.
* A *shard* actor ``/system/sharding-<type>/<n>`` runs the shard's entities (its
  children, created on their first message) only while it holds the lease
  ``shard:<type>:<n>`` (fencing token in ``self.context.fencing_token`` of each
  entity), after delivering the shard's *hand-over stream*. Until then it buffers, in
  order. Idle entities are passivated with ``stop_message``; a message for a
  passivating entity waits for its termination and starts it again.
* Rebalance, in two phases (``_handover``): a plan marks the shard *moving*; every
  region holds its messages, drains what it sent to the old owner (a marker behind
  them), writes what it holds of other regions' messages to the hand-over stream and
  acks; the old owner hands the shard off (entities stopped, lease released, leftover
  to the stream). Once every registered region that is a member acked, the script
  flips the owner; the new owner's shard takes the lease, then the stream, then the
  held messages. A crashed node needs no ack once it is downed.

A node that only sends calls ``start_proxy``: its region never hosts; it must not have
the hosting ``role`` (with ``role=None`` every member hosts, so a sending-only node
needs the hosts to have a role it lacks).

Guarantees: at most once (a message in flight to a node that crashes is lost; a
message that cannot be buffered or routed is a ``DeadLetter``); order per sender and
entity, also while shards move, with no exception; one incarnation of an entity at a
time *as far as a lease can promise* (see :mod:`gactors.cluster._lease`: a paused process or a Redis
failover can break it). That is why every entity sees ``self.context.fencing_token``,
which only grows from one incarnation to the next: pass it to the store the entity
writes to, so a stale incarnation's writes are refused there::

    class Cart(Actor):
        def receive(self, m):
            # Only a writer with a token at least as new as the last one wins.
            db.execute(
                "UPDATE carts SET items = ?, token = ? WHERE user = ? AND token <= ?",
                (dump(self.items), self.context.fencing_token,
                 self.context.entity_id, self.context.fencing_token),
            )
"""

from gactors.cluster._sharding._allocation import allocate, shard_of
from gactors.cluster._sharding._api import ClusterSharding, EntityRef, _ShardingExtension
from gactors.cluster._sharding._handover import BUFFER_LIMIT
from gactors.cluster._sharding._inspect import local_shards, owned_shards
from gactors.cluster._sharding._protocol import BATCH_LIMIT, ShardingEnvelope

__all__ = [
    "BATCH_LIMIT",
    "BUFFER_LIMIT",
    "ClusterSharding",
    "EntityRef",
    "ShardingEnvelope",
    "_ShardingExtension",
    "allocate",
    "local_shards",
    "owned_shards",
    "shard_of",
]
