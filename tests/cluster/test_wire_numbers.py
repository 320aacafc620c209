"""Routing and backoff give their messages wire numbers themselves
(``gactors._messages.register_wire_class``); the cluster's wire format reads them
lazily and never imports those packages to learn them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gactors import _messages
from gactors._messages import (
    WIRE_CLASSES,
    WIRE_SINGLETONS,
    register_wire_class,
    register_wire_singleton,
)
from gactors.backoff import CurrentChild, GetCurrentChild, GetRestartCount, Reset, RestartCount
from gactors.routing import (
    AdjustPoolSize,
    Broadcast,
    ConsistentHashableEnvelope,
    GetRoutees,
    Routees,
)


def test_routing_and_backoff_register_their_numbers() -> None:
    # The numbers are part of the wire format between nodes: these must never change.
    assert {n: c for n, (c, _, _) in WIRE_CLASSES.items()} == {
        8: Broadcast,
        10: Routees,
        11: AdjustPoolSize,
        12: ConsistentHashableEnvelope,
        16: CurrentChild,
        17: RestartCount,
    }
    assert {
        9: GetRoutees,
        13: Reset,
        14: GetCurrentChild,
        15: GetRestartCount,
    } == WIRE_SINGLETONS


def test_a_taken_number_is_refused_with_a_clear_error() -> None:
    class Other:
        pass

    with pytest.raises(ValueError, match=r"wire number 8 is taken by .*Broadcast"):
        register_wire_class(8, Other, 0, lambda m: ())
    with pytest.raises(ValueError, match="wire number 9 is taken"):
        register_wire_singleton(9, object())
    with pytest.raises(ValueError, match="must be an int >= 0"):
        register_wire_class(-1, Other, 0, lambda m: ())
    # Registering the same message again (a module imported twice) is harmless.
    register_wire_class(8, Broadcast, 1, lambda m: (m.message,))
    register_wire_singleton(9, GetRoutees)
    assert WIRE_CLASSES[8][0] is Broadcast
    assert _messages.WIRE_SINGLETONS[9] is GetRoutees


def test_a_node_decodes_them_without_having_imported_routing_or_backoff() -> None:
    # A fresh interpreter: the wire format is loaded, routing and backoff are not,
    # and still their messages (bytes as another node sends them) decode.
    code = textwrap.dedent(
        """
        import sys
        from gactors.cluster._serialization import _gactors_message
        assert "gactors.routing" not in sys.modules, "imported at import time"
        assert "gactors.backoff" not in sys.modules, "imported at import time"
        b = _gactors_message([8, "hello"])
        assert type(b).__qualname__ == "Broadcast" and b.message == "hello", b
        assert _gactors_message([17, 3]).count == 3
        from gactors.backoff import Reset
        assert _gactors_message([13]) is Reset
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_they_round_trip_through_the_msgpack_serializer() -> None:
    from gactors.cluster._serialization import MsgpackSerializer

    ser = MsgpackSerializer()
    back = ser.decode(ser.encode(Broadcast(("x", 1))))
    assert type(back) is Broadcast
    assert back.message == ("x", 1)
    assert ser.decode(ser.encode(AdjustPoolSize(-2))).change == -2
    assert ser.decode(ser.encode(RestartCount(4))).count == 4
    for single in (GetRoutees, Reset, GetCurrentChild, GetRestartCount):
        assert ser.decode(ser.encode(single)) is single
