"""Sharding's allocation table (``AllocationStore``, ``lua/alloc*.lua``) on a real
Redis-protocol server: the one place where a shard's owner is decided."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("redis")

import redis

from gactors.cluster._redis import RedisBackend
from gactors.cluster._redis_scripts import (
    _ALLOC_ACK,
    _ALLOC_PLAN,
    _ALLOC_REGISTER,
    _ALLOC_STREAM_ADD,
    _ALLOC_SYNC,
    _ALLOC_UNREGISTER,
)
from gactors.cluster._seam import (
    AllocationStore,
    AllocationTable,
    MembershipStore,
    ShardCountMismatch,
)

pytestmark = [pytest.mark.timeout(60)]


class Alloc:
    def __init__(self, url: str) -> None:
        self.backend = RedisBackend(url, f"alloc{uuid.uuid4().hex[:8]}")
        self.members: MembershipStore = self.backend.membership()
        self.store: AllocationStore = self.backend.allocations()

    def join(self, *nodes: str) -> None:
        for node in nodes:
            self.members.join(node, ())

    def plan(self, t: AllocationTable, *desired: str) -> AllocationTable:
        return self.store.plan("cart", t.version, t.epoch, list(desired))


@pytest.fixture
def alloc(redis_url: str) -> Iterator[Alloc]:
    w = Alloc(redis_url)
    try:
        yield w
    finally:
        w.backend.close()


def test_unowned_shards_get_their_owner_at_once_and_plans_compare_and_set(alloc: Alloc) -> None:
    alloc.join("a", "b")
    assert isinstance(alloc.store, AllocationStore)
    alloc.store.register("cart", "a", True, 3)
    t = alloc.store.register("cart", "b", True, 3)
    assert t.owners == {} and t.moving == {} and t.registered == {"a": True, "b": True}
    assert t.members == {"a": "up", "b": "up"}
    t2 = alloc.plan(t, "a", "b", "")
    assert t2.owners == {0: "a", 1: "b"} and t2.moving == {} and t2.epoch > t.epoch
    # A plan computed from an older table (or membership) does nothing.
    assert alloc.plan(t, "b", "a", "b") == t2
    alloc.join("c")
    stale = alloc.store.plan("cart", t2.version, t2.epoch, ["b", "a", "a"])
    assert stale.owners == t2.owners and stale.version > t2.version


def test_a_move_flips_once_every_registered_member_acked_it(alloc: Alloc) -> None:
    alloc.join("a", "b", "p")
    alloc.store.register("cart", "a", True, 2)
    alloc.store.register("cart", "b", True, 2)
    t = alloc.store.register("cart", "p", False, 2)  # a proxy acks too
    t = alloc.plan(t, "a", "a")
    t = alloc.plan(t, "b", "a")
    assert t.owners == {0: "a", 1: "a"} and t.moving == {0: ("a", "b")}
    t = alloc.store.ack("cart", "a", [(0, "a")])
    t = alloc.store.ack("cart", "p", [(0, "zzz")])  # another move's ack: ignored
    t = alloc.store.ack("cart", "p", [(1, "a")])  # not moving: ignored
    assert t.moving == {0: ("a", "b")}
    t = alloc.store.ack("cart", "p", [(0, "a")])
    assert t.moving == {0: ("a", "b")}, "b has not acked"
    epoch = t.epoch
    t = alloc.store.ack("cart", "b", [(0, "a")])
    assert t.moving == {} and t.owners == {0: "b", 1: "a"} and t.epoch > epoch


def test_a_moving_target_changes_but_never_back_and_only_to_up_hosts(alloc: Alloc) -> None:
    alloc.join("a", "b", "c", "p")
    for node, hosting in (("a", True), ("b", True), ("c", True), ("p", False)):
        t = alloc.store.register("cart", node, hosting, 1)
    t = alloc.plan(t, "a")
    t = alloc.plan(t, "b")
    assert t.moving == {0: ("a", "b")}
    t = alloc.plan(t, "c")
    assert t.moving == {0: ("a", "c")}, "the target follows the plan"
    t = alloc.plan(t, "a")
    assert t.moving == {0: ("a", "c")}, "never back to its from"
    epoch = t.epoch
    for bad in ("p", "nobody"):  # a proxy, a node without a region
        assert alloc.plan(t, bad).epoch == epoch
    alloc.members.set_leaving("b")
    t = alloc.store.sync("cart")
    assert t is not None and t.members["b"] == "leaving"
    assert alloc.plan(t, "b").moving == {0: ("a", "c")}, "a leaving node is no owner"


def test_a_removed_member_needs_no_ack_and_a_new_region_counts_as_acked(alloc: Alloc) -> None:
    alloc.join("a", "b", "c")
    alloc.store.register("cart", "a", True, 1)
    t = alloc.store.register("cart", "b", True, 1)
    t = alloc.plan(t, "a")
    t = alloc.plan(t, "b")
    assert t.moving == {0: ("a", "b")}
    alloc.store.ack("cart", "b", [(0, "a")])
    # A region that registers while the shard moves sent nothing: it is not waited for.
    t = alloc.store.register("cart", "c", True, 1)
    assert t.moving == {0: ("a", "b")}, "a has not acked"
    # a crashes and is removed: nobody waits for it any more.
    assert alloc.members.remove("a", "test")
    t = alloc.store.sync("cart")
    assert t is not None and t.moving == {} and t.owners == {0: "b"}
    assert "a" not in t.registered, "a removed node's region is forgotten"
    # A stopping region acks nothing any more.
    t = alloc.plan(t, "c")
    assert t.moving == {0: ("b", "c")}
    alloc.store.ack("cart", "c", [(0, "b")])
    t = alloc.store.unregister("cart", "b")
    assert t.moving == {} and t.owners == {0: "c"} and "b" not in t.registered
    # Its node is still a member: the table says its region stopped (it hosts nothing,
    # confirms no drain), until the node is removed.
    assert t.stopped == {"b"} and "b" in t.members
    assert alloc.members.remove("b", "test")
    t = alloc.store.sync("cart")
    assert t is not None and t.stopped == frozenset()


def test_the_hand_over_stream_keeps_order_and_is_taken_once(alloc: Alloc) -> None:
    store = alloc.store
    # Shards 3 and 4 move away from a (appends are taken only for a move under way).
    alloc.join("a", "b")
    store.register("cart", "a", True, 5)
    t = store.register("cart", "b", True, 5)
    t = alloc.plan(t, "a", "a", "a", "a", "a")
    t = alloc.plan(t, "a", "a", "a", "b", "b")
    assert t.moving == {3: ("a", "b"), 4: ("a", "b")}

    def take(shard: int) -> list[tuple[int, bytes]]:
        entries = store.stream_read("cart", shard)
        store.stream_delete("cart", shard, [e[0] for e in entries])
        return [(sid, payload) for _id, sid, payload in entries]

    assert take(3) == []
    store.stream_append("cart", 3, [(1, b"x1"), (1, b"x2")], "n1/a/1", "a")
    store.stream_append("cart", 3, [(2, b"\x00\xff")], "n1/a/2", "a")
    store.stream_append("cart", 4, [(1, b"other")], "n2/b/1", "a")
    # A retry of an append whose reply was lost (the same token) appends nothing.
    store.stream_append("cart", 3, [(1, b"x1"), (1, b"x2")], "n1/a/1", "a")
    assert take(3) == [(1, b"x1"), (1, b"x2"), (2, b"\x00\xff")]
    assert take(3) == []
    # Reading does not delete (a read whose reply was lost is read again); deleting
    # what was read leaves what was appended after the read.
    store.stream_append("cart", 4, [(1, b"late")], "n3/c/1", "a")
    entries = store.stream_read("cart", 4)
    assert store.stream_read("cart", 4) == entries
    store.stream_append("cart", 4, [(1, b"later")], "n3/c/2", "a")
    store.stream_delete("cart", 4, [e[0] for e in entries])
    store.stream_delete("cart", 4, [e[0] for e in entries])  # a retry: nothing more
    assert [(sid, p) for _id, sid, p in entries] == [(1, b"other"), (1, b"late")]
    assert take(4) == [(1, b"later")]
    with pytest.raises(ValueError, match="token"):
        store.stream_append("cart", 3, [(1, b"x")], "", "a")
    # An append for another move (away from b), or for shard 4's move once it is over
    # (its new owner may have taken the stream), is refused: nothing is appended.
    assert store.stream_append("cart", 4, [(1, b"x")], "n4/d/1", "b") is False
    store.ack("cart", "a", [(4, "a")])
    assert store.ack("cart", "b", [(4, "a")]).owners[4] == "b"
    assert store.stream_append("cart", 4, [(1, b"too late")], "n4/d/2", "a") is False
    assert take(4) == []
    # A retry of an append that was taken before the move ended is not refused.
    assert store.stream_append("cart", 4, [(1, b"later")], "n3/c/2", "a") is True
    assert take(4) == []


def test_keys_are_under_the_membership_tag_and_bad_input_is_refused(alloc: Alloc) -> None:
    tag = alloc.backend.membership_keys()[0].split("}")[0] + "}"
    assert alloc.backend.alloc_key("cart").startswith(tag + ":alloc:")
    with pytest.raises(ValueError, match="type_name"):
        alloc.store.sync("a/b")
    with pytest.raises(ValueError, match="node id"):
        alloc.store.register("cart", "a,b", True, 1)


def test_every_region_of_a_type_has_the_tables_number_of_shards(alloc: Alloc) -> None:
    alloc.join("a", "b")
    t = alloc.store.register("cart", "a", True, 3)
    with pytest.raises(ShardCountMismatch, match=r"number_of_shards=4 here.* has 3") as e:
        alloc.store.register("cart", "b", True, 4)
    assert (e.value.type_name, e.value.table, e.value.given) == ("cart", 3, 4)
    # A refused region stops: the table marks it stopped (no plan names its node).
    refused = alloc.store.sync("cart")
    assert refused is not None and refused.stopped == {"b"} and refused.epoch > t.epoch
    assert refused.owners == t.owners and refused.registered == t.registered
    t = refused
    # A plan for another number of shards is refused the same way.
    with pytest.raises(ShardCountMismatch, match="has 3"):
        alloc.plan(t, "a", "a", "a", "a")
    t = alloc.plan(t, "a", "a", "a")
    assert t.owners == {0: "a", 1: "a", 2: "a"}
    with pytest.raises(TypeError, match="number_of_shards"):
        alloc.store.register("cart", "b", True, "3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="number_of_shards"):
        alloc.store.register("cart", "b", True, 0)
    # Once no member's region uses the table (a redeploy with another number), the
    # table starts anew with the new number.
    alloc.store.unregister("cart", "a")
    t2 = alloc.store.register("cart", "b", True, 4)
    assert t2.owners == {} and t2.registered == {"b": True} and t2.epoch > t.epoch
    assert alloc.plan(t2, "b", "b", "b", "b").owners == {0: "b", 1: "b", 2: "b", 3: "b"}


def test_a_read_of_an_unchanged_table_gets_the_short_reply(alloc: Alloc) -> None:
    alloc.join("a", "b", "c")
    alloc.store.register("cart", "a", True, 2)
    alloc.store.register("cart", "b", True, 2)
    t = alloc.store.register("cart", "c", True, 2)
    t = alloc.plan(t, "a", "a")
    seen = (t.epoch, t.version)
    assert alloc.store.sync("cart", seen) is None
    t = alloc.plan(t, "b", "a")
    assert t.moving == {0: ("a", "b")}
    assert alloc.store.sync("cart", seen) == t, "a plan changed the table"
    seen = (t.epoch, t.version)
    # Acks that flip nothing change nothing a region reads.
    alloc.store.ack("cart", "a", [(0, "a")])
    alloc.store.ack("cart", "b", [(0, "a")])
    assert alloc.store.sync("cart", seen) is None
    # c is removed: its ack is not needed any more, the next read flips the move
    # (the membership version changed, so the read is not short).
    assert alloc.members.remove("c", "test")
    t2 = alloc.store.sync("cart", seen)
    assert t2 is not None and t2.moving == {} and t2.owners == {0: "b", 1: "a"}
    assert alloc.store.sync("cart", (t2.epoch, t2.version)) is None
    assert alloc.store.sync("cart") == t2, "a read without a snapshot gets the table"


def test_each_script_refuses_a_wrong_number_of_arguments(alloc: Alloc, redis_url: str) -> None:
    keys = alloc.store._keys("cart")  # type: ignore[attr-defined]
    client = redis.Redis.from_url(redis_url)
    try:
        for script, args, name in (
            (_ALLOC_REGISTER, ["a", "1"], "alloc_register"),
            (_ALLOC_UNREGISTER, [], "alloc_unregister"),
            (_ALLOC_SYNC, ["1"], "alloc_sync"),
            (_ALLOC_PLAN, ["1", "1"], "alloc_plan"),
            (_ALLOC_ACK, ["a", "0"], "alloc_ack"),
        ):
            with pytest.raises(redis.ResponseError, match=name):
                script.run(client, keys, args)
        with pytest.raises(redis.ResponseError, match="alloc_stream_add"):
            _ALLOC_STREAM_ADD.run(client, ("k:ho:1", "k:ho:1:tokens", "k"), ["token", "a", "1"])
    finally:
        client.close()


def test_a_table_started_anew_drops_the_old_numbering_s_hand_over_streams(alloc: Alloc) -> None:
    # Found by review: the reset kept the shards' hand-over streams. Their messages were
    # sorted into shards by the old number of shards: the new table's owner of shard 2
    # would take them and start their entities there, while the new numbering puts
    # those entities in other shards (on other nodes): one entity in two places.
    store = alloc.store
    alloc.join("a", "b")
    store.register("cart", "a", True, 3)
    t = store.register("cart", "b", True, 3)
    t = alloc.plan(t, "a", "a", "a")
    t = alloc.plan(t, "a", "a", "b")
    assert t.moving == {2: ("a", "b")}
    assert store.stream_append("cart", 2, [(1, b"old numbering")], "n1/a/1", "a") is True
    # The whole cluster goes (the move never completed), then a redeploy with 4 shards.
    assert alloc.members.remove("a", "test") and alloc.members.remove("b", "test")
    alloc.join("c")
    t = store.register("cart", "c", True, 4)
    assert t.owners == {} and t.moving == {}
    assert store.stream_read("cart", 2) == []
    # A table kept (the same number of shards) keeps its streams for the next owner.
    t = alloc.plan(t, "c", "c", "c", "c")
    alloc.join("d")
    t = store.register("cart", "d", True, 4)
    t = alloc.plan(t, "c", "c", "d", "c")
    assert store.stream_append("cart", 2, [(1, b"kept")], "n2/c/1", "c") is True
    assert alloc.members.remove("d", "test")
    store.register("cart", "e", True, 4)  # not a member: registers, resets nothing
    assert [p for _id, _sid, p in store.stream_read("cart", 2)] == [b"kept"]
