"""Sharding's allocation table (``AllocationStore``, ``lua/alloc*.lua``) on a real
Redis-protocol server: the one place where a shard's owner is decided."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("redis")

from gactors.cluster._redis import RedisBackend
from gactors.cluster._seam import AllocationStore, AllocationTable, MembershipStore

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
    alloc.store.register("cart", "a", True)
    t = alloc.store.register("cart", "b", True)
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
    alloc.store.register("cart", "a", True)
    alloc.store.register("cart", "b", True)
    t = alloc.store.register("cart", "p", False)  # a proxy acks too
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
        t = alloc.store.register("cart", node, hosting)
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
    assert t.members["b"] == "leaving"
    assert alloc.plan(t, "b").moving == {0: ("a", "c")}, "a leaving node is no owner"


def test_a_removed_member_needs_no_ack_and_a_new_region_counts_as_acked(alloc: Alloc) -> None:
    alloc.join("a", "b", "c")
    alloc.store.register("cart", "a", True)
    t = alloc.store.register("cart", "b", True)
    t = alloc.plan(t, "a")
    t = alloc.plan(t, "b")
    assert t.moving == {0: ("a", "b")}
    alloc.store.ack("cart", "b", [(0, "a")])
    # A region that registers while the shard moves sent nothing: it is not waited for.
    t = alloc.store.register("cart", "c", True)
    assert t.moving == {0: ("a", "b")}, "a has not acked"
    # a crashes and is removed: nobody waits for it any more.
    assert alloc.members.remove("a", "test")
    t = alloc.store.sync("cart")
    assert t.moving == {} and t.owners == {0: "b"}
    assert "a" not in t.registered, "a removed node's region is forgotten"
    # A stopping region acks nothing any more.
    t = alloc.plan(t, "c")
    assert t.moving == {0: ("b", "c")}
    alloc.store.ack("cart", "c", [(0, "b")])
    t = alloc.store.unregister("cart", "b")
    assert t.moving == {} and t.owners == {0: "c"} and "b" not in t.registered


def test_the_hand_over_stream_keeps_order_and_is_taken_once(alloc: Alloc) -> None:
    store = alloc.store

    def take(shard: int) -> list[tuple[int, bytes]]:
        entries = store.stream_read("cart", shard)
        store.stream_delete("cart", shard, [e[0] for e in entries])
        return [(sid, payload) for _id, sid, payload in entries]

    assert take(3) == []
    store.stream_append("cart", 3, [(1, b"x1"), (1, b"x2")], "n1/a/1")
    store.stream_append("cart", 3, [(2, b"\x00\xff")], "n1/a/2")
    store.stream_append("cart", 4, [(1, b"other")], "n2/b/1")
    # A retry of an append whose reply was lost (the same token) appends nothing.
    store.stream_append("cart", 3, [(1, b"x1"), (1, b"x2")], "n1/a/1")
    assert take(3) == [(1, b"x1"), (1, b"x2"), (2, b"\x00\xff")]
    assert take(3) == []
    # Reading does not delete (a read whose reply was lost is read again); deleting
    # what was read leaves what was appended after the read.
    store.stream_append("cart", 4, [(1, b"late")], "n3/c/1")
    entries = store.stream_read("cart", 4)
    assert store.stream_read("cart", 4) == entries
    store.stream_append("cart", 4, [(1, b"later")], "n3/c/2")
    store.stream_delete("cart", 4, [e[0] for e in entries])
    store.stream_delete("cart", 4, [e[0] for e in entries])  # a retry: nothing more
    assert [(sid, p) for _id, sid, p in entries] == [(1, b"other"), (1, b"late")]
    assert take(4) == [(1, b"later")]
    with pytest.raises(ValueError, match="token"):
        store.stream_append("cart", 3, [(1, b"x")], "")


def test_keys_are_under_the_membership_tag_and_bad_input_is_refused(alloc: Alloc) -> None:
    tag = alloc.backend.membership_keys()[0].split("}")[0] + "}"
    assert alloc.backend.alloc_key("cart").startswith(tag + ":alloc:")
    with pytest.raises(ValueError, match="type_name"):
        alloc.store.sync("a/b")
    with pytest.raises(ValueError, match="node id"):
        alloc.store.register("cart", "a,b", True)
