"""The cluster wire format (SPEC 17, "Serialization"): gactors/cluster/_serialization.py.

Refs are real local refs of a real ActorSystem; the RefCodec used here is a small real
codec mapping each ref to a triple and back through a dict (what a node does through
its paths, without a second node).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import pickle
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.msgpack import Ext

from gactors import (
    Actor,
    ActorIdentity,
    ActorNotFound,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    ClusterError,
    GactorsError,
    Identify,
    Kill,
    PoisonPill,
    Props,
    ReceiveTimeout,
    RemoteError,
    SerializationError,
    Status,
    Terminated,
)
from gactors._sysmsg import DeathWatchNotification, Suspend, Unwatch, Watch
from gactors.backoff import (
    CurrentChild,
    GetCurrentChild,
    GetRestartCount,
    Reset,
    RestartCount,
)
from gactors.cluster import register_message
from gactors.cluster._serialization import (
    KIND_SYSTEM,
    KIND_USER,
    MsgpackSerializer,
    PickleSerializer,
    Record,
    WireCodec,
    WireError,
    describe_payload,
    registered_tag,
    serializer_id,
)
from gactors.routing import (
    AdjustPoolSize,
    Broadcast,
    ConsistentHashableEnvelope,
    GetRoutees,
    Routees,
)

MAX = 64 * 1024
ADDRESS = "gactors://wire@node-1"


# -- a real RefCodec over a dict --------------------------------------------------------------
class DictRefCodec:
    """Maps each ref it sees to ``(ADDRESS, str(path) without address, n)`` and back."""

    def __init__(self) -> None:
        self.to_wire: dict[ActorRef, tuple[str, str, int]] = {}
        self.from_wire: dict[tuple[str, str, int], ActorRef] = {}

    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        triple = self.to_wire.get(ref)
        if triple is None:
            path = "/" + "/".join(ref.path.elements)
            triple = (ADDRESS, path, len(self.to_wire) + 1)
            self.to_wire[ref] = triple
            self.from_wire[triple] = ref
        return triple

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        return self.from_wire[(address, path, uid)]


class Idle(Actor):
    def receive(self, message: Any) -> None:
        pass


@pytest.fixture(scope="module")
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("wire")
    yield s
    s.terminate().get(timeout=10)
    assert s.when_terminated.done()


# The refs of the module's system, also for hypothesis strategies built at import time.
REFS: list[ActorRef] = []


@pytest.fixture(scope="module")
def refs(system: ActorSystem) -> list[ActorRef]:
    REFS[:] = [system.actor_of(Props(Idle), f"a{i}") for i in range(3)]
    return REFS


@pytest.fixture
def ref_codec() -> DictRefCodec:
    return DictRefCodec()


@pytest.fixture
def codec(ref_codec: DictRefCodec) -> WireCodec:
    return WireCodec(MsgpackSerializer(), ref_codec, MAX)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        if a.keys() != b.keys():
            return False
        bkeys = {k: k for k in b}
        return all(same(k, bkeys[k]) and same(v, b[k]) for k, v in a.items())
    if type(a) in (set, frozenset):
        if a != b:
            return False
        bitems = {y: y for y in b}
        return all(same(x, bitems[x]) for x in a)
    return bool(a == b)


def roundtrip(codec: WireCodec, message: Any) -> Any:
    sid, payload = codec.encode_message(message)
    assert type(payload) is bytes
    return codec.decode_message(sid, payload)


# -- registered classes used below -------------------------------------------------------------
@register_message
@dataclasses.dataclass(frozen=True)
class Placed:
    order: str
    items: tuple[str, ...]
    by: Any = None


@register_message(tag="wire-test.point")
class Point(NamedTuple):
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


register_message(Color)


@register_message
class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@register_message
class Cart(msgspec.Struct):
    owner: str
    lines: dict[str, int]
    tags: frozenset[str] = frozenset()


@register_message
class OutOfStock(Exception):
    def __init__(self, sku: str, wanted: int) -> None:
        super().__init__(f"{sku}: {wanted} wanted")
        self.sku = sku
        self.wanted = wanted


@register_message
@dataclasses.dataclass
class KwOnly:
    a: int
    b: list[Any] = dataclasses.field(default_factory=list)
    computed: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        self.computed = self.a * 2


@dataclasses.dataclass
class Unregistered:
    a: int


class Shade(enum.Enum):
    DARK = 1


# -- every type arrives as the same type ------------------------------------------------------
SCALARS: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    2**64 - 1,
    -(2**63),
    2**64,
    -(2**63) - 1,
    10**40,
    -(10**40),
    1.5,
    float("inf"),
    -0.0,
    "",
    "héllo ✓",
    b"",
    b"\x00\xff",
]
CONTAINERS: list[Any] = [
    (),
    ("seq", 1),
    [],
    [1, "a"],
    [(1, 2), [3, (4,)]],
    {},
    {"k": (1, 2)},
    {(1, "a"): "tuple key", frozenset({1}): "frozenset key", 3: "int key"},
    {1: "a", None: b"x", b"k": 2.5, 1.5: True},
    {10**30: "big int key"},
    set(),
    {1, "a", (2, 3)},
    frozenset(),
    frozenset({frozenset({1}), (1, (2,))}),
    ([{"deep": ({1}, frozenset({(1, 2)}))}],),
    [[[[[[("deep",)]]]]]],
    [10**20, -(10**25)],
    ((),),
]


UTC_PLUS_2 = datetime.timezone(datetime.timedelta(hours=2))
STDLIB_VALUES: list[Any] = [
    datetime.datetime(2024, 2, 29, 23, 59, 59, 999999),
    datetime.datetime(2024, 1, 1, 12, tzinfo=UTC_PLUS_2),
    datetime.date(2024, 2, 29),
    datetime.time(1, 2, 3, 4),
    datetime.time(1, 2, tzinfo=UTC_PLUS_2),
    datetime.timedelta(days=-3, microseconds=5),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    decimal.Decimal("1.10"),
    decimal.Decimal("-1E+30"),
    {datetime.date(2024, 1, 1): [uuid.UUID(int=1)]},
]


@pytest.mark.parametrize("message", SCALARS + CONTAINERS + STDLIB_VALUES, ids=repr)
def test_builtin_types_arrive_as_the_same_type(codec: WireCodec, message: Any) -> None:
    assert same(roundtrip(codec, message), message)


def test_nan(codec: WireCodec) -> None:
    assert math.isnan(roundtrip(codec, float("nan")))


SCALAR_STRATEGY = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.datetimes()
    | st.dates()
    | st.times()
    | st.timedeltas()
    | st.uuids()
    | st.decimals(allow_nan=False)
)


def nested(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Any nesting of the SPEC's container types over ``leaves`` (keys and set elements
    hashable: leaves, tuples and frozensets of them)."""
    hashables = st.recursive(
        leaves,
        lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
        max_leaves=8,
    )
    # deferred: the same strategy with a short repr (hypothesis warns about long ones)
    keys = st.deferred(lambda: hashables)
    return st.recursive(
        keys,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(inner, max_size=4).map(tuple)
            | st.dictionaries(keys, inner, max_size=4)
            | st.sets(keys, max_size=4)
            | st.frozensets(keys, max_size=4)
        ),
        max_leaves=12,
    )


values = nested(SCALAR_STRATEGY)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_nested_builtins_property(message: Any) -> None:
    codec = WireCodec(MsgpackSerializer(), DictRefCodec(), 1 << 20)
    assert same(roundtrip(codec, message), message)


@settings(max_examples=100, deadline=None)
@given(values)
def test_nested_builtins_property_pickle(message: Any) -> None:
    codec = WireCodec(PickleSerializer(), DictRefCodec(), 1 << 20)
    assert same(roundtrip(codec, message), message)


def test_a_top_level_tuple_is_one_plain_array_and_a_list_is_not(codec: WireCodec) -> None:
    # The common ("seq", 1) message costs no extension at all.
    _, payload = codec.encode_message(("seq", 1))
    assert payload == msgspec.msgpack.encode(["seq", 1])
    assert type(roundtrip(codec, ["seq", 1])) is list


# -- refs at any depth --------------------------------------------------------------------------
def test_refs_at_any_depth(codec: WireCodec, refs: list[ActorRef]) -> None:
    a, b, c = refs
    message = {
        "top": a,
        "deep": [({b}, frozenset({(c, 1)}))],
        (a, "key"): Placed("o1", ("x",), by=c),
        "status": Status.Success([a]),
    }
    back = roundtrip(codec, message)
    assert back == message
    assert back["top"] is a  # resolved through the codec: the very ref of this system
    assert next(iter(back["deep"][0][0])) is b
    assert back["status"].value[0] is a
    assert back[(a, "key")].by is c
    assert roundtrip(codec, a) is a


values_with_refs = nested(SCALAR_STRATEGY | st.integers(0, 2).map(lambda i: REFS[i]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=values_with_refs)
def test_refs_at_any_depth_property(refs: list[ActorRef], message: Any) -> None:
    for serializer in (MsgpackSerializer(), PickleSerializer()):
        codec = WireCodec(serializer, DictRefCodec(), 1 << 20)
        assert same(roundtrip(codec, message), message)


def test_a_ref_in_a_bad_triple_or_unknown_is_a_wire_error(codec: WireCodec) -> None:
    bad = msgspec.msgpack.encode(Ext(6, msgspec.msgpack.encode(["addr", 1, 2])))
    with pytest.raises(WireError, match="ref"):
        codec.decode_message(1, bad)
    unknown = msgspec.msgpack.encode(Ext(6, msgspec.msgpack.encode([ADDRESS, "/user/x", 99])))
    with pytest.raises(WireError, match="KeyError"):
        codec.decode_message(1, unknown)


def test_an_unbound_serializer_refuses_refs(refs: list[ActorRef]) -> None:
    for ser in (MsgpackSerializer(), PickleSerializer()):
        with pytest.raises(SerializationError, match="not bound"):
            ser.encode(("x", refs[0]))


# -- gactors' own messages ----------------------------------------------------------------------
def test_singletons_arrive_as_the_same_objects(codec: WireCodec) -> None:
    for single in (PoisonPill, Kill, ReceiveTimeout, GetRoutees, Reset, GetCurrentChild):
        assert roundtrip(codec, single) is single
    assert roundtrip(codec, GetRestartCount) is GetRestartCount
    assert roundtrip(codec, [PoisonPill, (Kill,)]) == [PoisonPill, (Kill,)]


def test_gactors_messages(codec: WireCodec, refs: list[ActorRef]) -> None:
    a, b, _ = refs
    messages = [
        Identify(("id", 1)),
        ActorIdentity(("id", 1), a),
        ActorIdentity(7, None),
        Status.Success({"v": (1,)}),
        Broadcast(("hello", {1})),
        Routees([a, b]),
        AdjustPoolSize(-2),
        CurrentChild(b),
        CurrentChild(None),
        RestartCount(3),
    ]
    for message in messages:
        back = roundtrip(codec, message)
        assert type(back) is type(message)
        assert back == message
    t = roundtrip(codec, Terminated(a, existence_confirmed=False, address_terminated=True))
    assert (t.actor, t.existence_confirmed, t.address_terminated) == (a, False, True)
    env = roundtrip(codec, ConsistentHashableEnvelope(("m",), hash_key=("k", 1)))
    assert (env.message, env.hash_key) == (("m",), ("k", 1))
    assert type(roundtrip(codec, Routees([a])).routees) is tuple


def test_a_registered_exception_travels_as_itself(codec: WireCodec) -> None:
    back = roundtrip(codec, Status.Failure(OutOfStock("sku-1", 3)))
    cause = back.cause
    assert type(back) is Status.Failure and type(cause) is OutOfStock
    assert (cause.sku, cause.wanted, cause.args, str(cause)) == (
        "sku-1",
        3,
        ("sku-1: 3 wanted",),
        "sku-1: 3 wanted",
    )


@pytest.mark.parametrize(
    "cause, type_name",
    [
        (ValueError("bad value"), "ValueError"),
        (KeyError("k"), "KeyError"),
        (Shade.DARK and ZeroDivisionError("division by zero"), "ZeroDivisionError"),
        (GactorsError("framework"), "gactors.exceptions.GactorsError"),
    ],
)
def test_any_other_exception_becomes_a_remote_error(
    codec: WireCodec, cause: BaseException, type_name: str
) -> None:
    back = roundtrip(codec, Status.Failure(cause))
    assert type(back.cause) is RemoteError
    assert back.cause.type_name == type_name
    assert back.cause.message == str(cause)
    assert type_name in str(back.cause)


def test_a_registered_exception_whose_state_cannot_travel_becomes_a_remote_error(
    codec: WireCodec,
) -> None:
    exc = OutOfStock("sku", 1)
    exc.handle = lambda: None  # type: ignore[attr-defined]
    back = roundtrip(codec, Status.Failure(exc))
    assert type(back.cause) is RemoteError
    assert back.cause.type_name == f"{__name__}.OutOfStock"


def test_gactors_cluster_exceptions_travel_as_themselves(codec: WireCodec) -> None:
    for exc in (RemoteError("x.Y", "boom"), ActorNotFound("no /user/a"), AskTimeoutError("t")):
        back = roundtrip(codec, Status.Failure(exc)).cause
        assert type(back) is type(exc)
        assert str(back) == str(exc)
    remote = roundtrip(codec, RemoteError("x.Y", "boom"))
    assert (remote.type_name, remote.message) == ("x.Y", "boom")


# -- registered classes -------------------------------------------------------------------------
def test_registered_classes_of_each_kind(codec: WireCodec, refs: list[ActorRef]) -> None:
    messages = [
        Placed("o1", ("a", "b"), by=refs[0]),
        Point(1, 2),
        Color.RED,
        Color.PAIR,
        Level.HIGH,
        Cart("ann", {"sku": 2}, frozenset({"gift"})),
        [Point(3, 4), (Color.RED,)],
        Placed("o2", (), by=Point(5, 6)),
    ]
    for message in messages:
        back = roundtrip(codec, message)
        assert same(back, message), (back, message)
    assert roundtrip(codec, Color.PAIR) is Color.PAIR
    assert type(roundtrip(codec, Cart("b", {})).tags) is frozenset
    back = roundtrip(codec, KwOnly(4, [(1,)]))
    assert (back.a, back.b, back.computed) == (4, [(1,)], 8)


def test_default_and_explicit_tags() -> None:
    assert registered_tag(Placed) == f"{__name__}.Placed"
    assert registered_tag(Point) == "wire-test.point"
    assert registered_tag(Unregistered) is None


def test_register_message_returns_the_class_in_every_form() -> None:
    @dataclasses.dataclass
    class A:
        x: int

    @dataclasses.dataclass
    class B:
        x: int

    assert register_message(A) is A
    assert register_message(A) is A  # the same registration again is harmless
    assert register_message(tag="wire-test.b")(B) is B
    assert registered_tag(B) == "wire-test.b"


def test_a_tag_registered_twice_names_both_classes() -> None:
    @dataclasses.dataclass
    class First:
        x: int

    @dataclasses.dataclass
    class Second:
        x: int

    register_message(First, tag="wire-test.dup")
    with pytest.raises(ValueError, match=r"'wire-test\.dup'.*First.*Second"):
        register_message(Second, tag="wire-test.dup")
    with pytest.raises(ValueError, match=r"already registered under tag 'wire-test\.dup'"):
        register_message(First, tag="wire-test.other")


@pytest.mark.parametrize(
    "cls, match",
    [
        (object, "not a dataclass, NamedTuple"),
        (dict, "not a dataclass, NamedTuple"),
        (KeyboardInterrupt, "not an Exception"),
        ("Placed", "needs a class"),
    ],
)
def test_register_message_refuses_what_it_cannot_carry(cls: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        register_message(cls)


def test_a_bad_tag_is_refused() -> None:
    @dataclasses.dataclass
    class C:
        x: int

    with pytest.raises(TypeError, match="non-empty str"):
        register_message(C, tag="")


# -- what cannot be sent ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "message, type_name, where",
    [
        (lambda: 1, "function", "message "),
        ((i for i in range(2)), "generator", "message "),
        (Unregistered(1), "Unregistered", "message "),
        (("x", [1, {"k": object()}]), "object", r"message\[1\]\[1\]\['k'\]"),
        ({(1, object()): 1}, "object", "a key"),
        (Shade.DARK, "Shade", "message "),
        (Placed("o", ("a",), by=Unregistered(2)), "Unregistered", r"message\.by"),
        (ValueError("not as a message"), "ValueError", "message "),
        (Status.Success([sys]), "module", r"field 0"),
    ],
)
def test_what_cannot_be_serialized_names_the_type_and_where(
    codec: WireCodec, message: Any, type_name: str, where: str
) -> None:
    with pytest.raises(SerializationError, match=type_name) as info:
        codec.encode_message(message)
    assert isinstance(info.value, TypeError)  # SerializationError is also a TypeError
    assert isinstance(info.value, ClusterError)
    assert re.search(where, str(info.value)), str(info.value)


def test_a_subclass_of_a_registered_class_is_not_sent_as_its_base(codec: WireCodec) -> None:
    class Sub(OutOfStock):
        pass

    with pytest.raises(SerializationError, match="Sub"):
        codec.encode_message(Sub("a", 1))


def test_a_cycle_or_too_deep_nesting(codec: WireCodec) -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(SerializationError, match="nested too deeply"):
        codec.encode_message(cyclic)


def test_unencodable_str(codec: WireCodec) -> None:
    with pytest.raises(SerializationError, match="str"):
        codec.encode_message("\ud800")


# -- sizes --------------------------------------------------------------------------------------
def test_too_large_when_encoding_names_type_and_size(codec: WireCodec) -> None:
    with pytest.raises(SerializationError, match=r"list is \d+ bytes serialized, more than max"):
        codec.encode_message(["x" * MAX])
    with pytest.raises(SerializationError, match=r"bytes is \d+ bytes"):
        codec.user_record("/user/a", 1, b"x" * (MAX + 1), None)
    _, payload = codec.encode_message(b"x" * (MAX - 10))  # just fits
    assert len(payload) <= MAX


def test_too_large_when_decoding(codec: WireCodec, ref_codec: DictRefCodec) -> None:
    big = WireCodec(MsgpackSerializer(), ref_codec, MAX * 4)
    sid, payload = big.encode_message("x" * (MAX * 2))
    with pytest.raises(WireError, match="more than max_message_size"):
        codec.decode_message(sid, payload)
    entry = big.encode_batch([big.user_record("/user/a", 1, "x" * (MAX * 2), None)])
    with pytest.raises(WireError, match="more than max_message_size"):
        codec.decode_batch(entry)
    with pytest.raises(WireError, match="system payload"):
        codec.decode_system(b"\x00" * (MAX + 1))


def test_encode_batches_splits_at_max_message_size_in_order(codec: WireCodec) -> None:
    records = [codec.user_record("/user/a", 1, ("n", i, "x" * 1000), None) for i in range(300)]
    entries = codec.encode_batches(records)
    assert len(entries) > 1
    assert all(len(e) <= MAX for e in entries)
    back = [codec.decode_record(r) for e in entries for r in codec.decode_batch(e)]
    assert back == [("n", i, "x" * 1000) for i in range(300)]
    # One message of nearly the maximum still goes (alone) and is accepted.
    near = [codec.user_record("/user/" + "p" * 500, 1, b"x" * (MAX - 10), None)]
    (entry,) = codec.encode_batches(near)
    assert len(entry) > MAX
    assert codec.decode_record(codec.decode_batch(entry)[0]) == b"x" * (MAX - 10)
    assert codec.encode_batches([]) == [codec.encode_batch([])]


def test_paths_too_long_for_a_record(codec: WireCodec) -> None:
    with pytest.raises(SerializationError, match="characters long"):
        codec.user_record("/user/" + "a" * 20000, 1, "m", None)


# -- records, batches, system messages ----------------------------------------------------------
def test_records_in_a_batch(codec: WireCodec, refs: list[ActorRef]) -> None:
    a, b, c = refs
    records = [
        codec.user_record("/user/a0", 11, ("hello", 1), a),
        codec.user_record("/temp/$12", 0, Status.Success("x"), None),
        codec.system_record("/user/a1", 5, Watch(b, c)),
        codec.system_record("/user/a1", 5, Unwatch(b, c)),
        codec.system_record("/user/a2", 5, DeathWatchNotification(c, True, False)),
        codec.system_record("/user/a2", 5, DeathWatchNotification(a, False, True)),
    ]
    decoded = codec.decode_batch(codec.encode_batch(records))
    assert decoded == records
    first = decoded[0]
    assert (first.kind, first.recipient, first.serializer_id) == (KIND_USER, ("/user/a0", 11), 1)
    assert codec.sender_from_wire(first.sender) is a
    assert codec.decode_record(first) == ("hello", 1)
    assert codec.sender_from_wire(decoded[1].sender) is None
    assert codec.decode_record(decoded[1]) == Status.Success("x")
    watch = codec.decode_record(decoded[2])
    assert type(watch) is Watch and (watch.watchee, watch.watcher) == (b, c)
    assert decoded[2].kind == KIND_SYSTEM and decoded[2].serializer_id == 0
    unwatch = codec.decode_record(decoded[3])
    assert type(unwatch) is Unwatch and (unwatch.watchee, unwatch.watcher) == (b, c)
    dwn = codec.decode_record(decoded[4])
    assert type(dwn) is DeathWatchNotification
    assert (dwn.actor, dwn.existence_confirmed, dwn.address_terminated) == (c, True, False)
    dwn = codec.decode_record(decoded[5])
    assert (dwn.actor, dwn.existence_confirmed, dwn.address_terminated) == (a, False, True)


def test_other_system_messages_do_not_travel(codec: WireCodec) -> None:
    with pytest.raises(SerializationError, match="Suspend"):
        codec.system_record("/user/a", 1, Suspend())


def test_a_sender_the_node_cannot_resolve(codec: WireCodec) -> None:
    with pytest.raises(WireError, match="unusable sender"):
        codec.sender_from_wire((ADDRESS, "/user/nobody", 42))


# -- garbage ------------------------------------------------------------------------------------
GARBAGE = [
    b"",
    b"\xc1",
    b"\x91",
    b"\xdd\xff\xff\xff\xff",
    b"\x91\x95\x00",
    msgspec.msgpack.encode([[0, ["/user/a", 1], None, 1]]),  # a record too short
    msgspec.msgpack.encode([[0, "/user/a", None, 1, b""]]),  # recipient not [path, uid]
    msgspec.msgpack.encode([[0, ["/user/a", 1], ["a", "b"], 1, b""]]),  # bad sender
    msgspec.msgpack.encode([[0, ["/user/a", 1], None, 1, "text, not bytes"]]),
    msgspec.msgpack.encode({"not": "a batch"}),
    b"\x00" * 40,
]


@pytest.mark.parametrize("data", GARBAGE, ids=repr)
def test_garbage_batches_are_wire_errors(codec: WireCodec, data: bytes) -> None:
    with pytest.raises(WireError):
        codec.decode_batch(data)


def test_every_truncation_of_a_batch_is_a_wire_error(
    codec: WireCodec, refs: list[ActorRef]
) -> None:
    records = [codec.user_record("/user/a0", 1, ("m", i, {"k": (1, 2)}), refs[0]) for i in range(3)]
    data = codec.encode_batch(records)
    for n in range(len(data)):
        with pytest.raises(WireError):
            codec.decode_batch(data[:n])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([0, 1, 2, 99, 256]))
def test_random_bytes_never_escape_as_anything_but_wire_error(data: bytes, sid: int) -> None:
    codec = WireCodec(MsgpackSerializer(), DictRefCodec(), MAX)
    for decode in (
        codec.decode_batch,
        lambda d: codec.decode_message(1, d),
        lambda d: codec.decode_message(sid, d),
        codec.decode_system,
    ):
        try:
            decode(data)
        except WireError as e:
            assert str(e)
        # anything else propagates and fails the test


def test_a_bad_record_kind(codec: WireCodec) -> None:
    (record,) = codec.decode_batch(msgspec.msgpack.encode([[7, ["/user/a", 1], None, 1, b"\x01"]]))
    with pytest.raises(WireError, match="unknown kind 7"):
        codec.decode_record(record)


def encode_ext(code: int, inner: Any) -> bytes:
    return msgspec.msgpack.encode(Ext(code, msgspec.msgpack.encode(inner)))


@pytest.mark.parametrize(
    "payload, match",
    [
        (encode_ext(8, ["no.such.Tag", 1]), "unknown message tag 'no.such.Tag'"),
        (encode_ext(8, []), "without a tag"),
        (encode_ext(8, [f"{__name__}.Placed", "o"]), "1 fields on the wire, 3 expected"),
        (encode_ext(8, ["wire-test.point", "x", "y"]), None),  # ok: NamedTuples don't check
        (encode_ext(7, [999]), "unknown gactors message number 999"),
        (encode_ext(7, [3]), "0 fields, 1 expected"),
        (encode_ext(7, ["x"]), "without its number"),
        (encode_ext(1, {"a": 1}), "not an array"),
        (encode_ext(4, [1, 2, 3]), "odd number"),
        (encode_ext(4, [[1], 2]), "unhashable"),
        (encode_ext(2, [[1]]), "unhashable"),
        (msgspec.msgpack.encode(Ext(100, b"")), "unknown msgpack extension type 100"),
        (encode_ext(10, [99, "x"]), "unknown standard-library value"),
        (encode_ext(10, [0, "not a date"]), "bad datetime value"),
        (encode_ext(10, [4, b"short"]), "bad UUID value"),
        (encode_ext(8, [f"{__name__}.Color", "blue"]), "not a valid"),
        (encode_ext(8, [f"{__name__}.OutOfStock", "notatuple", None]), "expected"),
    ],
)
def test_bad_payloads_are_wire_errors_naming_the_problem(
    codec: WireCodec, payload: bytes, match: str | None
) -> None:
    if match is None:
        assert codec.decode_message(1, payload) == Point("x", "y")  # type: ignore[arg-type]
        return
    with pytest.raises(WireError, match=match):
        codec.decode_message(1, payload)


def test_describe_payload() -> None:
    assert describe_payload(b"\x01\x02") == "<2 bytes: 0102>"
    assert describe_payload(b"x" * 100).endswith("...>")


# -- serializers: ids, pickle, foreign payloads -------------------------------------------------
def test_serializer_ids() -> None:
    assert serializer_id("msgpack") == 1
    assert serializer_id("pickle") == 2
    assert serializer_id("json") == serializer_id("json") >= 256
    assert serializer_id("json") != serializer_id("cbor")


RAN: list[str] = []


def record_run(what: str) -> None:
    RAN.append(what)


class Boom:
    """Unpickling it runs code (record_run): the test sees whether it ran."""

    def __reduce__(self) -> Any:
        return (record_run, ("unpickled!",))


def test_pickle_is_refused_unless_configured(codec: WireCodec, ref_codec: DictRefCodec) -> None:
    pickled = pickle.dumps(Boom())
    with pytest.raises(WireError, match="refused a payload of the 'pickle' serializer"):
        codec.decode_message(serializer_id("pickle"), pickled)
    with pytest.raises(WireError, match="refused"):  # and stays refused
        codec.decode_message(2, pickled)
    (record,) = codec.decode_batch(
        codec.encode_batch([Record(0, ("/user/a", 1), None, 2, pickled)])
    )
    with pytest.raises(WireError, match="refused"):
        codec.decode_record(record)
    assert RAN == []  # nothing was unpickled
    # A node configured with pickle does unpickle it.
    pickling = WireCodec(PickleSerializer(), ref_codec, MAX)
    assert pickling.decode_message(2, pickled) is None
    assert RAN == ["unpickled!"]
    RAN.clear()


def test_pickle_serializer(ref_codec: DictRefCodec, refs: list[ActorRef]) -> None:
    codec = WireCodec(PickleSerializer(), ref_codec, MAX)
    assert codec.serializer_id == 2
    a, b, _ = refs
    message = {"refs": [(a, {b})], "status": Status.Success(Placed("o", ("x",), by=a))}
    back = roundtrip(codec, message)
    assert back == message
    assert back["refs"][0][0] is a
    assert roundtrip(codec, PoisonPill) is PoisonPill
    assert roundtrip(codec, Reset) is Reset
    back = roundtrip(codec, Status.Failure(ValueError("v")))
    assert type(back.cause) is ValueError and back.cause.args == ("v",)
    unpicklable = ValueError("x")
    unpicklable.f = lambda: 1  # type: ignore[attr-defined]
    back = roundtrip(codec, Status.Failure(unpicklable))
    assert type(back.cause) is RemoteError and back.cause.type_name == "ValueError"
    with pytest.raises(SerializationError, match="function"):
        codec.encode_message(lambda: 1)
    with pytest.raises(WireError, match="undecodable"):
        codec.decode_message(2, b"garbage")


def test_a_pickle_node_decodes_msgpack_payloads(
    codec: WireCodec, ref_codec: DictRefCodec, refs: list[ActorRef]
) -> None:
    pickling = WireCodec(PickleSerializer(), ref_codec, MAX)
    sid, payload = codec.encode_message(("x", refs[0], {1}))
    assert sid == 1
    assert pickling.decode_message(sid, payload) == ("x", refs[0], {1})


def test_an_unknown_serializer_id(codec: WireCodec) -> None:
    with pytest.raises(WireError, match=r"unknown serializer \(id 12345\).*'msgpack' \(1\)"):
        codec.decode_message(12345, b"\x01")
    with pytest.raises(WireError, match="system payload"):
        codec.decode_message(0, b"\x01")


def test_create_resolves_names(ref_codec: DictRefCodec) -> None:
    assert WireCodec.create("msgpack", ref_codec, MAX).name == "msgpack"
    assert WireCodec.create("pickle", ref_codec, MAX).serializer_id == 2
    with pytest.raises(ValueError, match="max_message_size"):
        WireCodec(MsgpackSerializer(), ref_codec, 0)


def test_nesting_too_deep_for_the_receiver_is_a_wire_error(codec: WireCodec) -> None:
    inner = msgspec.msgpack.encode(1)
    for _ in range(3000):  # tuples in tuples: each level is a decoder callback
        inner = msgspec.msgpack.encode(Ext(1, msgspec.msgpack.encode([msgspec.Raw(inner)])))
    with pytest.raises(WireError, match="RecursionError"):
        codec.decode_message(1, inner)
    arrays = b"\x91" * 60_000 + b"\x01"  # plain arrays in arrays
    with pytest.raises(WireError, match="RecursionError"):
        codec.decode_message(1, arrays)


@pytest.mark.parametrize("message", [m for m in SCALARS if m is not None], ids=repr)
def test_user_record_payload_is_the_encode_message_one(codec: WireCodec, message: Any) -> None:
    # user_record_to encodes plain types with msgspec itself (a call less per tell);
    # what it sends must still be what encode_message makes, big ints included.
    rec = codec.user_record_to(("/user/a", 1), message, None)
    assert (rec.serializer_id, rec.payload) == codec.encode_message(message)
    assert same(codec.decode_message(rec.serializer_id, rec.payload), message)
