"""``ClusterSharding``: one actor per entity id across the cluster.

Concepts and guarantees for users: docs/cluster/singleton-sharding.md.

Shape (every name below is internal):

* A *region* per entity type and node, ``/system/sharding-<type>``. It maps an entity
  id to a shard (``crc32(entity_id) % number_of_shards``, the same on every node and
  every Python) and a shard to a node by rendezvous (highest-random-weight) hashing over
  the hosting members: the members with ``role`` (all members for ``role=None``) that
  are not leaving; unreachable ones stay owners until they are downed. Every node
  computes the same answer from the same membership view, and a join or leave moves
  only the shards the joining/leaving node wins/loses. Messages for a shard of this
  node go to the local *shard* actor, the others to the owner's region, in *batches*
  per node: what the region's mailbox holds when it gets to its own flush marker (at
  most ``BATCH_LIMIT``) travels as one wire message, each sender once; the receiving
  region routes the batch in order and hands each local shard its part as one message
  (a batch that cannot travel, too big or with an unserializable message, goes in
  halves, down to single messages).
  A drain marker or a leave flushes first, so batches never overtake or trail them.
* A *shard* actor ``/system/sharding-<type>/<n>`` runs the shard's entities (its
  children, created on their first message) only while it holds the lease
  ``shard:<type>:<n>`` (fencing token in ``self.context.fencing_token`` of each
  entity). Until then it buffers, in order. Idle entities are passivated with
  ``stop_message``; a message for a passivating entity waits for its termination and
  starts it again.
* Rebalance: when a region's view moves shard ``n`` away from the node it last sent
  ``n``'s messages to, it buffers ``n``'s messages (bounded; overflow is dead letters)
  until that node confirmed (a *drain* marker travels the same path as the messages,
  so everything sent before it was routed there first), or until the local shard
  handed off (its entities got ``stop_message`` and terminated, the lease was
  released). The buffer then goes, in order, to the new owner, whose shard delivers it
  once it holds the lease. One path region -> shard -> entity keeps the order per
  sender and entity.
* Crash: the survivors' views drop the node once it is downed; its shards' leases
  expire at most ``lease_ttl`` after its last renewal, and the new owners start them.
* Rolling restart (gunicorn's HUP: every old node leaves while new ones join): views
  disagree for a heartbeat or two. A leaving region marks what it forwards (the
  ``host`` flag), so the receiver stops counting that node as a host before its view
  shows the leave; a node whose stored status is "leaving" stays excluded while it is
  unreachable; a region asked to confirm a drain while it forwarded (or holds) the
  shard's messages for a third region confirms only after that one did, so the
  asker's next messages cannot overtake them; two regions that each wait for the
  other's drain confirmation give each other's messages back and confirm, and a
  longer circle of waits (a message that bounced) is broken the same way after two
  heartbeats: then a message held in it can be overtaken;
  a message that went from region to region
  ``_BOUNCES`` times waits for the next look at the view, in order, with the
  messages behind it, and is a dead letter only if it still bounces after
  ``_HOLDS`` such waits.

Modules: ``_protocol`` (the messages), ``_allocation`` (``shard_of``, ``allocate``),
``_shard`` (the shard actor), ``_region`` (the region actor: routing, batching),
``_handover`` (the hand-over protocol the region runs), ``_api`` (``ClusterSharding``,
``EntityRef``), ``_inspect`` (read-only views for the inspector and the reminders).

A node that only sends calls ``start_proxy``: its region never hosts; it must not have
the hosting ``role`` (with ``role=None`` every member hosts, so a sending-only node
needs the hosts to have a role it lacks).

Guarantees: at most once (a message in flight to a node that crashes is lost; a
message that cannot be buffered or routed is a ``DeadLetter``); order per sender and
entity, also while shards move; one incarnation of an entity at a time *as far as a
lease can promise* (see :mod:`gactors.cluster._lease`: a paused process or a Redis
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
