"""The one-instance messages (PoisonPill, Kill, ReceiveTimeout, backoff's Reset, ...):
identity, isinstance, pickling, repr, and the public submodules of ``gactors``."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from typing import Any

import pytest

import gactors
from gactors import (
    Identify,
    Kill,
    NotInfluenceReceiveTimeout,
    PoisonPill,
    ReceiveTimeout,
)
from gactors._messages import AutoReceivedMessage
from gactors.backoff import GetCurrentChild, GetRestartCount, Reset

SINGLETONS: list[tuple[Any, str]] = [
    (PoisonPill, "PoisonPill"),
    (Kill, "Kill"),
    (ReceiveTimeout, "ReceiveTimeout"),
    (Reset, "Reset"),
    (GetCurrentChild, "GetCurrentChild"),
    (GetRestartCount, "GetRestartCount"),
]
ALL = [single for single, _ in SINGLETONS]


@pytest.mark.parametrize("single", ALL, ids=[name for _, name in SINGLETONS])
def test_isinstance_is_true_for_the_one_instance_only(single: Any) -> None:
    assert isinstance(single, single)
    others = [other for other in ALL if other is not single]
    assert not any(isinstance(other, single) for other in others)
    for value in (None, 0, "PoisonPill", Identify(1), object()):
        assert not isinstance(value, single)
    # a tuple mixing singletons and classes, as in ``isinstance(m, (PoisonPill, Kill))``
    assert isinstance(single, (int, single))
    assert not isinstance(single, (int, *others))


def test_isinstance_against_a_tuple_of_singletons() -> None:
    stop = (PoisonPill, Kill)
    assert isinstance(PoisonPill, stop)
    assert isinstance(Kill, stop)
    assert not isinstance(ReceiveTimeout, stop)


def test_match_by_identity_and_by_isinstance_agree() -> None:
    def kind(message: Any) -> str:
        if isinstance(message, ReceiveTimeout):
            return "idle"
        if isinstance(message, (PoisonPill, Kill)):
            return "stop"
        return "other"

    assert [kind(m) for m in (ReceiveTimeout, PoisonPill, Kill, "x")] == [
        "idle",
        "stop",
        "stop",
        "other",
    ]


def test_marker_bases_are_unchanged() -> None:
    # the cell handles PoisonPill and Kill before receive; ReceiveTimeout goes to receive
    assert isinstance(PoisonPill, AutoReceivedMessage)
    assert isinstance(Kill, AutoReceivedMessage)
    assert not isinstance(ReceiveTimeout, AutoReceivedMessage)
    assert not isinstance(ReceiveTimeout, NotInfluenceReceiveTimeout)


@pytest.mark.parametrize(("single", "name"), SINGLETONS, ids=[name for _, name in SINGLETONS])
def test_identity_survives_pickle_and_copy(single: Any, name: str) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(single, protocol)) is single
    assert copy.copy(single) is single
    assert copy.deepcopy([single]) == [single]
    assert copy.deepcopy([single])[0] is single


def test_pickle_refers_to_the_module_level_name() -> None:
    # the pickle wire format of the cluster's PickleSerializer: a global reference
    assert pickle.dumps(PoisonPill, 2) == b"\x80\x02cgactors._messages\nPoisonPill\nq\x00."


@pytest.mark.parametrize(("single", "name"), SINGLETONS, ids=[name for _, name in SINGLETONS])
def test_repr_is_the_public_name(single: Any, name: str) -> None:
    assert repr(single) == name
    assert str(single) == name


def test_msgpack_wire_format_of_the_singletons() -> None:
    pytest.importorskip("msgspec")
    from gactors.cluster._serialization import MsgpackSerializer

    serializer = MsgpackSerializer()
    # Ext(7, [number]): the numbers are part of the wire format between nodes
    expected = {PoisonPill: b"\xd5\x07\x91\x00", Kill: b"\xd5\x07\x91\x01"}
    expected[ReceiveTimeout] = b"\xd5\x07\x91\x02"
    for single, data in expected.items():
        assert serializer.encode(single) == data
        assert serializer.decode(data) is single


@pytest.mark.parametrize(
    "name",
    ["backoff", "contrib", "exceptions", "interfaces", "pattern", "plugins", "routing", "testkit"],
)
def test_public_submodules_are_attributes_of_the_package(name: str) -> None:
    module = getattr(gactors, name)
    assert module is sys.modules[f"gactors.{name}"]
    assert name in dir(gactors)


def test_an_unknown_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        gactors.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_submodules_are_imported_on_first_access_only() -> None:
    # A fresh interpreter: a system without a cluster never imports gactors.cluster,
    # and gactors.cluster / gactors.routing work after a bare ``import gactors``.
    code = (
        "import sys, gactors\n"
        "s = gactors.ActorSystem('lazy')\n"
        "s.terminate().get(timeout=10)\n"
        "assert 'gactors.cluster' not in sys.modules, 'cluster imported'\n"
        "assert 'gactors.routing' not in sys.modules, 'routing imported'\n"
        "assert gactors.routing.RoundRobinPool.__module__ == 'gactors.routing'\n"
        "assert gactors.cluster.Cluster.__module__.startswith('gactors.cluster')\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
