"""Extensions (SPEC §11): one object per system, created once on first use, settings
tables, shutdown steps, system-message handlers and the ``gactors.extensions`` group."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from _actors import Echo
from gevent import monkey

import gactors
from gactors import (
    Actor,
    ActorSystem,
    ConfigError,
    ExtensionId,
    IllegalStateError,
    Props,
)
from gactors import _sysmsg as sm
from gactors._threads import allocate_lock, get_ident, start_new_thread
from gactors.testkit import await_condition

real_sleep: Callable[[float], None] = monkey.get_original("time", "sleep")


@pytest.fixture
def system() -> Iterator[ActorSystem]:
    s = ActorSystem("ext")
    try:
        yield s
    finally:
        s.terminate()
        assert s.await_termination(10), s.tree()


class Thing:
    def __init__(self, system: ActorSystem) -> None:
        self.system = system
        self.tid = get_ident()


class SlowCounted(ExtensionId[Thing]):
    """Counts its creations; create() yields to other greenlets for a while."""

    created = 0

    def create(self, system: ActorSystem) -> Thing:
        type(self).created += 1
        gevent.sleep(0.05)  # the window in which concurrent first calls arrive
        return Thing(system)


@pytest.fixture(autouse=True)
def _reset() -> None:
    SlowCounted.created = 0


def test_public_name() -> None:
    assert "ExtensionId" in gactors.__all__
    assert gactors.ExtensionId is ExtensionId


def test_one_object_per_system_created_on_first_use(system: ActorSystem) -> None:
    assert not system.has_extension(SlowCounted)
    first = system.extension(SlowCounted)
    assert isinstance(first, Thing) and first.system is system
    assert system.has_extension(SlowCounted)
    assert system.extension(SlowCounted) is first
    assert SlowCounted.get(system) is first
    assert SlowCounted.created == 1
    with ActorSystem("ext-other") as other:
        assert not other.has_extension(SlowCounted)
        assert other.extension(SlowCounted) is not first
    assert SlowCounted.created == 2


def test_an_instance_is_an_id_of_its_own(system: ActorSystem) -> None:
    class Sized(ExtensionId[int]):
        def __init__(self, n: int) -> None:
            self.n = n

        def create(self, system: ActorSystem) -> int:
            return self.n

    small, big = Sized(1), Sized(2)
    assert system.extension(small) == 1
    assert system.extension(big) == 2
    assert system.has_extension(small) and not system.has_extension(Sized)


def test_not_an_extension_id(system: ActorSystem) -> None:
    with pytest.raises(TypeError, match="ExtensionId"):
        system.extension(Thing)  # type: ignore[arg-type]


def test_concurrent_first_calls_from_greenlets_create_once(system: ActorSystem) -> None:
    greenlets = [gevent.spawn(system.extension, SlowCounted) for _ in range(20)]
    gevent.joinall(greenlets, timeout=5, raise_error=True)
    results = {id(g.value) for g in greenlets}
    assert len(results) == 1
    assert SlowCounted.created == 1


def test_concurrent_first_calls_from_os_threads_create_once(system: ActorSystem) -> None:
    n = 6
    results: list[Any] = []
    errors: list[BaseException] = []
    done = allocate_lock()
    remaining = [n]

    def worker() -> None:
        try:
            results.append(system.extension(SlowCounted))
        except BaseException as e:
            errors.append(e)
        finally:
            remaining[0] -= 1  # under the GIL; the hub thread polls it
            if remaining[0] == 0:
                done.release()

    done.acquire()
    for _ in range(n):
        start_new_thread(worker, ())
    # The hub must keep running (the threads' calls are carried to it): wait
    # cooperatively.
    await_condition(lambda: not done.locked(), 10)
    assert not errors
    assert len(results) == n
    assert len({id(r) for r in results}) == 1
    assert SlowCounted.created == 1
    assert results[0].tid == system._tid  # created in the system's hub thread


def test_from_a_thread_after_creation_returns_it(system: ActorSystem) -> None:
    ext = system.extension(SlowCounted)
    out: list[Any] = []
    lock = allocate_lock()
    lock.acquire()

    def worker() -> None:
        out.append(system.extension(SlowCounted))
        out.append(system.has_extension(SlowCounted))
        lock.release()

    start_new_thread(worker, ())
    await_condition(lambda: not lock.locked(), 5)
    assert out == [ext, True]


def test_from_inside_an_actor(system: ActorSystem) -> None:
    class User(Actor):
        def receive(self, message: Any) -> None:
            self.sender.tell(self.context.system.extension(SlowCounted))

    ref = system.actor_of(Props(User))
    from gactors import pattern

    got = pattern.ask(ref, "go", 5).get(5)
    assert got is system.extension(SlowCounted)


def test_a_failed_create_leaves_nothing_and_is_tried_again(system: ActorSystem) -> None:
    class Flaky(ExtensionId[str]):
        calls = 0

        def create(self, system: ActorSystem) -> str:
            type(self).calls += 1
            if type(self).calls == 1:
                raise RuntimeError("first time fails")
            return "ok"

    with pytest.raises(RuntimeError, match="first time fails"):
        system.extension(Flaky)
    assert not system.has_extension(Flaky)
    assert system.extension(Flaky) == "ok"
    assert Flaky.calls == 2


def test_an_extension_asking_for_itself_while_created(system: ActorSystem) -> None:
    class Selfish(ExtensionId[Any]):
        def create(self, system: ActorSystem) -> Any:
            return system.extension(Selfish)

    with pytest.raises(IllegalStateError, match="asked for itself"):
        system.extension(Selfish)


# -- settings tables -----------------------------------------------------------------------------
class Tabled(ExtensionId[dict]):  # type: ignore[type-arg]
    settings_key = "ext_test_tabled"
    settings_fields = {"size": (int, 3), "label": ((str, None), None), "delay": (float, 0.5)}
    created = 0

    def create(self, system: ActorSystem) -> dict:  # type: ignore[type-arg]
        type(self).created += 1
        return dict(system.settings.extension_tables["ext_test_tabled"])


def test_a_settings_table_is_validated_and_creates_the_extension_at_start() -> None:
    Tabled.created = 0
    with ActorSystem("ext-tabled", config={"ext_test_tabled": {"size": 5}}) as s:
        assert s.has_extension(Tabled)  # created while the system started
        assert s.extension(Tabled) == {"size": 5, "label": None, "delay": 0.5}
        assert s.settings.extension_tables == {
            "ext_test_tabled": {"size": 5, "label": None, "delay": 0.5}
        }
    assert Tabled.created == 1
    with ActorSystem("ext-untabled") as s:
        assert not s.has_extension(Tabled)
        assert s.settings.extension_tables == {}


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"bogus": 1}, r"unknown setting 'ext_test_tabled\.bogus'"),
        ({"size": "5"}, r"setting 'ext_test_tabled\.size' must be int, not str"),
        ({"size": True}, r"setting 'ext_test_tabled\.size' must be int"),
        ({"label": 3}, r"setting 'ext_test_tabled\.label' must be str or None"),
        ({"delay": "x"}, r"setting 'ext_test_tabled\.delay' must be float"),
        ([1, 2], r"setting 'ext_test_tabled' must be a table"),
    ],
)
def test_a_bad_settings_table_is_a_config_error(table: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("ext-bad", config={"ext_test_tabled": table})


def test_a_settings_table_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text('[gactors]\nshutdown_timeout = 3.0\n[gactors.ext_test_tabled]\nlabel = "x"\n')
    with ActorSystem("ext-toml", config=path) as s:
        assert s.extension(Tabled)["label"] == "x"


def test_an_unknown_table_is_still_an_unknown_setting() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'ext_nobody_owns'"):
        ActorSystem("ext-none", config={"ext_nobody_owns": {}})


def test_a_settings_key_is_owned_once() -> None:
    with pytest.raises(TypeError, match="already owned"):

        class Thief(ExtensionId[None]):
            settings_key = "ext_test_tabled"

    with pytest.raises(TypeError, match="setting of the actor system itself"):

        class Core(ExtensionId[None]):
            settings_key = "shutdown_timeout"

    with pytest.raises(TypeError, match="identifier"):

        class Odd(ExtensionId[None]):
            settings_key = "not a key"


def test_a_failing_configured_extension_fails_the_system() -> None:
    class Broken(ExtensionId[None]):
        settings_key = "ext_test_broken"

        def create(self, system: ActorSystem) -> None:
            raise RuntimeError("cannot start")

    with pytest.raises(RuntimeError, match="cannot start"):
        ActorSystem("ext-broken", config={"ext_test_broken": {}})


# -- entry points --------------------------------------------------------------------------------
def test_an_entry_point_owns_a_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ext_ep_module.py").write_text(
        textwrap.dedent(
            """
            from gactors import ExtensionId

            class EpExt(ExtensionId[str]):
                settings_key = "ext_ep_table"
                settings_fields = {"greeting": (str, "hi")}

                def create(self, system):
                    return system.settings.extension_tables["ext_ep_table"]["greeting"]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        importlib.metadata.EntryPoint("ext_ep_table", "ext_ep_module:EpExt", "gactors.extensions"),
        importlib.metadata.EntryPoint(
            "ext_ep_broken", "ext_no_such_module:X", "gactors.extensions"
        ),
    ]
    asked: list[str] = []

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        asked.append(group)
        return [ep for ep in eps if ep.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    assert "ext_ep_module" not in sys.modules
    try:
        with ActorSystem("ext-ep") as s:
            assert "ext_ep_module" not in sys.modules  # no table: not imported
        with ActorSystem("ext-ep", config={"ext_ep_table": {"greeting": "hello"}}) as s:
            ep_ext = sys.modules["ext_ep_module"].EpExt
            assert s.extension(ep_ext) == "hello"
        assert asked == ["gactors.extensions"]
        with pytest.raises(ConfigError, match=r"ext_ep_broken.*cannot load"):
            ActorSystem("ext-ep", config={"ext_ep_broken": {}})
    finally:
        sys.modules.pop("ext_ep_module", None)


# -- shutdown steps ------------------------------------------------------------------------------
def test_shutdown_steps_run_before_the_user_guardian_stops_last_created_first() -> None:
    log: list[str] = []

    class Step(ExtensionId[str]):
        def __init__(self, name: str, later: bool) -> None:
            self.name, self.later = name, later

        def create(self, system: ActorSystem) -> str:
            return self.name

        def shutdown(self, extension: str, proceed: Callable[[], None]) -> None:
            alive = system.lookup("/user/worker") is not None
            log.append(f"{extension} alive={alive}")
            if self.later:
                gevent.spawn_later(0.05, proceed)
            else:
                proceed()

    system = ActorSystem("ext-shutdown")
    system.actor_of(Props(Echo), "worker")
    system.extension(Step("a", later=False))
    system.extension(Step("b", later=True))
    system.terminate()
    assert system.await_termination(10)
    assert log == ["b alive=True", "a alive=True"]


def test_a_failing_shutdown_step_does_not_stop_the_shutdown() -> None:
    class Bad(ExtensionId[None]):
        def create(self, system: ActorSystem) -> None:
            return None

        def shutdown(self, extension: None, proceed: Callable[[], None]) -> None:
            raise RuntimeError("step failed")

    system = ActorSystem("ext-badstep")
    system.extension(Bad)
    system.terminate()
    assert system.await_termination(10)


# -- system messages -----------------------------------------------------------------------------
class Poke(sm.SystemMessage):
    __slots__ = ("tag",)

    def __init__(self, tag: str) -> None:
        self.tag = tag


poked: list[tuple[str, str]] = []


class Poker(ExtensionId[None]):
    system_messages = {Poke: lambda cell, msg: poked.append((str(cell.path), msg.tag))}

    def create(self, system: ActorSystem) -> None:
        return None


def test_an_extension_handles_its_system_messages(system: ActorSystem) -> None:
    ref = system.actor_of(Props(Echo), "poked")
    system.extension(Poker)
    ref._send_system(Poke("one"))
    await_condition(lambda: poked == [(str(ref.path), "one")], 5)


def test_the_core_system_messages_cannot_be_taken_over(system: ActorSystem) -> None:
    class Hijack(ExtensionId[None]):
        system_messages = {sm.Terminate: lambda cell, msg: None}

        def create(self, system: ActorSystem) -> None:
            return None

    with pytest.raises(TypeError, match="core system message"):
        system.extension(Hijack)
    assert not system.has_extension(Hijack)


# -- the ref provider ----------------------------------------------------------------------------
made: list[FakeNode] = []


class FakeNode:
    """A provider of refs to other nodes that records what the system asks of it."""

    def __init__(self, system: ActorSystem, fail_start: bool) -> None:
        made.append(self)
        self.system = system
        self.fail_start = fail_start
        self.calls: list[str] = []
        self.guardians_at_start = False

    @property
    def node_id(self) -> str:
        return "n1"

    def start(self) -> None:
        self.guardians_at_start = self.system.lookup("/user") is not None
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("cannot join")

    def close(self) -> None:
        self.calls.append("close")

    def remote_ref(self, path: Any, uid: int) -> Any:
        self.calls.append(f"remote_ref {path} {uid}")
        return self.system.dead_letters


class FakeNodeExt(ExtensionId[FakeNode]):
    settings_key = "ext_fake_node"
    settings_fields = {"fail_start": (bool, False)}
    provides_refs = True

    def create(self, system: ActorSystem) -> FakeNode:
        table = system.settings.extension_tables["ext_fake_node"]
        return FakeNode(system, table["fail_start"])


class OtherFakeNodeExt(FakeNodeExt):
    settings_key = "ext_fake_node2"


def test_a_configured_ref_provider_gives_the_address_and_reaches_other_nodes() -> None:
    with ActorSystem("ext-provider", config={"ext_fake_node": {}}) as s:
        node = s.extension(FakeNodeExt)
        assert s.provider is node
        assert str(s.address) == "gactors://ext-provider@n1"
        assert node.calls == ["start"] and node.guardians_at_start
        s.actor_selection("gactors://ext-provider@n2/user/a").tell("hi")
        assert node.calls[-1] == "remote_ref gactors://ext-provider@n2/user/a 0"
        here = s.actor_of(Props(Echo), "here")
        assert s.actor_selection("gactors://ext-provider@n1/user/here").resolve_one(5) == here


def test_a_ref_provider_that_cannot_start_fails_the_system_and_is_closed() -> None:
    with pytest.raises(RuntimeError, match="cannot join"):
        ActorSystem("ext-provider-fails", config={"ext_fake_node": {"fail_start": True}})
    assert made[-1].calls == ["start", "close"]


def test_one_ref_provider_per_system() -> None:
    with pytest.raises(ConfigError, match="provides refs"):
        ActorSystem("ext-two", config={"ext_fake_node": {}, "ext_fake_node2": {}})
    assert made[-1].calls == ["close"]  # the first one made is closed


def test_a_plain_system_has_the_local_provider(system: ActorSystem) -> None:
    from gactors._provider import LOCAL_PROVIDER

    assert system.provider is LOCAL_PROVIDER
    assert system.address.node is None
    with pytest.raises(IllegalStateError, match="no node"):
        system.provider.remote_ref(system.address, 0)  # type: ignore[arg-type]
