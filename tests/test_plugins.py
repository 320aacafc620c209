"""Plugins (SPEC section 11): interfaces, the registry, entry points, name resolution.

Most tests run against a fresh, private copy of the registry state (fixture
``registry``) so that registrations never leak between tests. The tests of the
example plugin package (``examples/plugin-package``) use the real registry and
install that package into the running environment when it is not installed yet.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gevent.queue import Queue
from zope.interface import implementer
from zope.interface.registry import Components
from zope.interface.verify import verifyClass, verifyObject

from gactors import (
    Actor,
    ActorSystem,
    AllForOneStrategy,
    DefaultSupervisorStrategy,
    Directive,
    OneForOneStrategy,
    PluginError,
    Props,
    StoppingSupervisorStrategy,
    SupervisorStrategy,
    SupervisorStrategyConfigurator,
    Terminated,
    plugins,
)
from gactors.backoff import BackoffOpts, ConstantBackoff, ExponentialBackoff
from gactors.interfaces import (
    IBackoffPolicy,
    ISerializer,
    ISupervisorStrategy,
    ISupervisorStrategyConfigurator,
)

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "plugin-package"
EXAMPLE_DIST = "gactors-example-plugins"
TIMEOUT = 3.0


# -- fixtures and helpers -------------------------------------------------------------------------
@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh registry (built-ins only, no entry points) for the duration of a test."""
    monkeypatch.setattr(plugins, "_registry", Components("test"))
    monkeypatch.setattr(plugins, "_builtins_registered", False)
    monkeypatch.setattr(plugins, "_scanned", set())
    monkeypatch.setattr(plugins, "_pending", {k: {} for k in plugins.KINDS})
    monkeypatch.setattr(plugins, "_failed", {k: {} for k in plugins.KINDS})
    monkeypatch.setattr(plugins, "_loaded_from", {k: {} for k in plugins.KINDS})
    monkeypatch.setattr(plugins, "_verified_factories", weakref.WeakSet())
    monkeypatch.setattr(plugins, "_entry_points", lambda group: [])
    yield


class FakeEntryPoint:
    """Quacks like importlib.metadata.EntryPoint; counts its loads."""

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group
        self.loads = 0
        self._real = importlib.metadata.EntryPoint(name, value, group)

    def load(self) -> Any:
        self.loads += 1
        return self._real.load()


def use_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: FakeEntryPoint) -> None:
    monkeypatch.setattr(
        plugins, "_entry_points", lambda group: [ep for ep in eps if ep.group == group]
    )


def run_system(config: dict[str, Any]) -> ActorSystem:
    return ActorSystem("plugins", config=config)


class Counter(Actor):
    """Counts "inc"; "boom" raises ValueError; "get" replies the count."""

    def __init__(self) -> None:
        self.n = 0

    def receive(self, message: Any) -> None:
        if message == "inc":
            self.n += 1
        elif message == "boom":
            raise ValueError("boom")
        elif message == "get":
            self.sender.tell(self.n)


class Watcher(Actor):
    def __init__(self, target: Any, queue: Queue) -> None:
        self.queue = queue
        self.context.watch(target)

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            self.queue.put(message.actor)


# -- plugin objects used by the tests (also reachable as "test module:Name" paths) ----------------
def _resume_all(exc: BaseException) -> Directive:
    return Directive.RESUME


class ResumeAll(OneForOneStrategy):
    def __init__(self) -> None:
        super().__init__(_resume_all)


@implementer(ISupervisorStrategyConfigurator)
class ResumeAllConfigurator:
    def create(self) -> SupervisorStrategy:
        return ResumeAll()


@implementer(IBackoffPolicy)
class TenSeconds:
    def __init__(self, min_backoff: float, max_backoff: float, random_factor: float) -> None:
        pass

    def next_delay(self, restart_count: int) -> float:
        return 10.0

    def reset(self) -> None:
        pass


@implementer(ISupervisorStrategy)
class NoChildTerminated:
    """Declares ISupervisorStrategy but lacks handle_child_terminated."""

    decider = staticmethod(_resume_all)

    def handle_failure(self, context, child, cause, stats, children):  # type: ignore[no-untyped-def]
        return True


class Undeclared:
    """Has every method but does not declare the interface."""

    decider = staticmethod(_resume_all)

    def handle_failure(self, context, child, cause, stats, children):  # type: ignore[no-untyped-def]
        return True

    def handle_child_terminated(self, context, child, children):  # type: ignore[no-untyped-def]
        pass


@implementer(ISupervisorStrategy)
class WrongSignature:
    decider = staticmethod(_resume_all)

    def handle_failure(self, context):  # type: ignore[no-untyped-def]
        return True

    def handle_child_terminated(self, context, child, children):  # type: ignore[no-untyped-def]
        pass


@implementer(ISupervisorStrategyConfigurator)
class NoCreate:
    pass


@implementer(ISupervisorStrategyConfigurator)
class CreatesGarbage:
    def create(self) -> Any:
        return "not a strategy"


@implementer(IBackoffPolicy)
class NoReset:
    def __init__(self, min_backoff: float, max_backoff: float, random_factor: float) -> None:
        pass

    def next_delay(self, restart_count: int) -> float:
        return 1.0


@implementer(ISerializer)
class JsonSerializer:
    """A third-party serializer: JSON (lists stay lists, tuples become lists)."""

    name = "json"

    def encode(self, obj: Any) -> bytes:
        return json.dumps(obj).encode()

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


@implementer(ISerializer)
class UnsafeJsonSerializer(JsonSerializer):
    """Claims to run code when decoding: decoded only where configured."""

    name = "unsafe-json"
    unsafe = True


@implementer(ISerializer)
class NoDecode:
    name = "no-decode"

    def encode(self, obj: Any) -> bytes:
        return b""


class UndeclaredSerializer:
    name = "undeclared"

    def encode(self, obj: Any) -> bytes:
        return b""

    def decode(self, data: bytes) -> Any:
        return None


this_module = __name__


# -- interfaces of the built-ins ------------------------------------------------------------------
def test_builtins_declare_and_implement_their_interfaces() -> None:
    for strategy in (
        OneForOneStrategy(),
        AllForOneStrategy(),
        SupervisorStrategy.default_strategy,
        SupervisorStrategy.stopping_strategy,
    ):
        assert ISupervisorStrategy.providedBy(strategy)
        assert verifyObject(ISupervisorStrategy, strategy)
    for cls in (DefaultSupervisorStrategy, StoppingSupervisorStrategy):
        assert ISupervisorStrategyConfigurator.implementedBy(cls)
        assert verifyClass(ISupervisorStrategyConfigurator, cls)
        assert verifyObject(ISupervisorStrategy, cls().create())
    assert ISupervisorStrategyConfigurator.implementedBy(SupervisorStrategyConfigurator)


@pytest.mark.usefixtures("registry")
class TestRegistry:
    def test_builtin_names(self) -> None:
        assert plugins.names("strategy") == ("default", "stopping")
        assert plugins.names("configurator") == ("default", "stopping")
        assert plugins.names("backoff_policy") == (
            "constant",
            "decorrelated-jitter",
            "exponential",
            "full-jitter",
        )
        assert plugins.get_strategy("default") is SupervisorStrategy.default_strategy
        assert plugins.get_strategy("stopping") is SupervisorStrategy.stopping_strategy
        assert plugins.get_configurator("stopping") is StoppingSupervisorStrategy
        assert plugins.get_backoff_policy("exponential") is ExponentialBackoff

    def test_unknown_kind(self) -> None:
        with pytest.raises(ValueError, match="backoff_policy"):
            plugins.names("policy")  # type: ignore[arg-type]

    def test_register_and_get(self) -> None:
        strategy = ResumeAll()
        plugins.register_strategy("resume-all", strategy)
        plugins.register_configurator("resume-all", ResumeAllConfigurator)
        plugins.register_backoff_policy("ten", TenSeconds)
        assert plugins.get_strategy("resume-all") is strategy
        assert plugins.get_configurator("resume-all") is ResumeAllConfigurator
        assert plugins.get_backoff_policy("ten") is TenSeconds
        assert "resume-all" in plugins.names("strategy")
        assert "ten" in plugins.names("backoff_policy")

    def test_a_registered_strategy_class_is_instantiated_on_lookup(self) -> None:
        plugins.register_strategy("resume-all", ResumeAll)
        a, b = plugins.get_strategy("resume-all"), plugins.get_strategy("resume-all")
        assert isinstance(a, ResumeAll) and isinstance(b, ResumeAll) and a is not b

    def test_function_factory(self) -> None:
        def factory(lo: float, hi: float, rf: float) -> Any:
            return ConstantBackoff(lo, hi, rf)

        plugins.register_backoff_policy("const2", factory)
        policy = plugins.create_backoff_policy(plugins.get_backoff_policy("const2"), 1.0, 2.0, 0.0)
        assert policy.next_delay(5) == 1.0

    def test_strategy_missing_a_method(self) -> None:
        with pytest.raises(PluginError) as info:
            plugins.register_strategy("broken", NoChildTerminated())
        text = str(info.value)
        assert "'broken'" in text
        assert "ISupervisorStrategy" in text
        assert "'handle_child_terminated' is missing" in text
        assert "broken" not in plugins.names("strategy")

    def test_strategy_missing_the_decider_attribute(self) -> None:
        @implementer(ISupervisorStrategy)
        class NoDecider:
            def handle_failure(self, context, child, cause, stats, children):  # type: ignore[no-untyped-def]
                return True

            def handle_child_terminated(self, context, child, children):  # type: ignore[no-untyped-def]
                pass

        with pytest.raises(PluginError, match="'decider' is missing"):
            plugins.register_strategy("no-decider", NoDecider())

    def test_strategy_not_declaring_the_interface(self) -> None:
        with pytest.raises(PluginError, match=r"does not declare ISupervisorStrategy.*implementer"):
            plugins.register_strategy("undeclared", Undeclared())

    def test_strategy_with_a_wrong_signature(self) -> None:
        with pytest.raises(PluginError, match="'handle_failure' has the wrong signature"):
            plugins.register_strategy("wrong", WrongSignature())

    def test_configurator_missing_create(self) -> None:
        with pytest.raises(PluginError, match="'create' is missing"):
            plugins.register_configurator("no-create", NoCreate)

    def test_backoff_policy_class_missing_reset(self) -> None:
        with pytest.raises(PluginError) as info:
            plugins.register_backoff_policy("no-reset", NoReset)
        assert "IBackoffPolicy" in str(info.value)
        assert "'reset' is missing" in str(info.value)

    def test_backoff_policy_must_be_a_factory(self) -> None:
        with pytest.raises(PluginError, match="register a factory"):
            plugins.register_backoff_policy("instance", ConstantBackoff(1.0, 2.0, 0.0))
        with pytest.raises(PluginError, match="not callable"):
            plugins.register_backoff_policy("number", 42)

    def test_what_a_factory_returns_is_verified_on_its_first_call(self) -> None:
        def factory(lo: float, hi: float, rf: float) -> Any:
            return NoReset(lo, hi, rf)

        plugins.register_backoff_policy("sneaky", factory)  # a function: not verifiable yet
        with pytest.raises(PluginError, match="'reset' is missing"):
            plugins.create_backoff_policy(plugins.get_backoff_policy("sneaky"), 1.0, 2.0, 0.0)

    def test_duplicate_names_are_refused(self) -> None:
        plugins.register_strategy("mine", ResumeAll())
        with pytest.raises(PluginError, match=r"'mine' is already registered.*replace=True"):
            plugins.register_strategy("mine", ResumeAll())
        with pytest.raises(PluginError, match="already registered"):
            plugins.register_configurator("default", ResumeAllConfigurator)
        with pytest.raises(PluginError, match="already registered"):
            plugins.register_backoff_policy("exponential", TenSeconds)
        # The same name in another kind is fine.
        plugins.register_backoff_policy("mine", TenSeconds)

    def test_replace(self) -> None:
        first, second = ResumeAll(), ResumeAll()
        plugins.register_strategy("mine", first)
        plugins.register_strategy("mine", second, replace=True)
        assert plugins.get_strategy("mine") is second
        plugins.register_backoff_policy("exponential", TenSeconds, replace=True)
        assert plugins.get_backoff_policy("exponential") is TenSeconds

    @pytest.mark.parametrize("name", ["", "a:b", " padded", 3])
    def test_invalid_names(self, name: Any) -> None:
        with pytest.raises(PluginError, match="invalid supervisor strategy name"):
            plugins.register_strategy(name, ResumeAll())

    def test_unregister(self) -> None:
        plugins.register_strategy("mine", ResumeAll())
        assert plugins.unregister("strategy", "mine")
        assert not plugins.unregister("strategy", "mine")
        assert "mine" not in plugins.names("strategy")
        plugins.register_strategy("mine", ResumeAll())  # free again

    def test_unknown_name_lists_the_known_names(self) -> None:
        plugins.register_configurator("resume-all", ResumeAllConfigurator)
        with pytest.raises(PluginError) as info:
            plugins.get_configurator("resum-all")
        text = str(info.value)
        assert "unknown supervisor strategy configurator 'resum-all'" in text
        assert "'default', 'resume-all', 'stopping'" in text
        with pytest.raises(PluginError, match="'constant', 'decorrelated-jitter'"):
            plugins.get_backoff_policy("linear")

    def test_resolve_forms(self) -> None:
        assert plugins.resolve("strategy", "stopping") is SupervisorStrategy.stopping_strategy
        assert isinstance(plugins.resolve("strategy", f"{this_module}:ResumeAll"), ResumeAll)
        strategy = ResumeAll()
        assert plugins.resolve("strategy", strategy) is strategy
        assert plugins.resolve("configurator", f"{this_module}:ResumeAllConfigurator") is (
            ResumeAllConfigurator
        )
        assert isinstance(plugins.resolve_configurator("default"), DefaultSupervisorStrategy)
        assert plugins.resolve_backoff_policy("gactors.backoff:ConstantBackoff") is ConstantBackoff
        # A path is not registered by resolving it.
        assert "ResumeAll" not in plugins.names("strategy")

    def test_resolve_verifies_objects_and_paths(self) -> None:
        with pytest.raises(PluginError, match="'handle_child_terminated' is missing"):
            plugins.resolve("strategy", NoChildTerminated())
        with pytest.raises(PluginError, match="'create' is missing"):
            plugins.resolve("configurator", f"{this_module}:NoCreate")
        with pytest.raises(PluginError, match="'reset' is missing"):
            BackoffOpts.on_stop(Props(Actor), "c", 1, 2, 0).with_policy(NoReset)

    def test_bad_paths(self) -> None:
        with pytest.raises(
            PluginError, match=r"cannot import .*no_such_module_xyz.*ModuleNotFound"
        ):
            plugins.resolve("strategy", "no_such_module_xyz:Thing")
        with pytest.raises(PluginError, match=r"cannot import .*AttributeError"):
            plugins.resolve("strategy", f"{this_module}:NoSuchThing")
        with pytest.raises(PluginError, match=r"expected 'package\.module:Name'"):
            plugins.resolve("strategy", ":Thing")


@pytest.mark.usefixtures("registry")
class TestEntryPoints:
    def test_discovered_lazily_and_loaded_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = FakeEntryPoint("resume-all", f"{this_module}:ResumeAll", "gactors.strategies")
        other = FakeEntryPoint(
            "resume-all", f"{this_module}:ResumeAllConfigurator", "gactors.configurators"
        )
        use_entry_points(monkeypatch, ep, other)
        assert "resume-all" in plugins.names("strategy")
        assert ep.loads == 0  # listing names imports nothing
        assert isinstance(plugins.get_strategy("resume-all"), ResumeAll)
        assert isinstance(plugins.get_strategy("resume-all"), ResumeAll)
        assert ep.loads == 1
        assert other.loads == 0  # another kind is not touched
        assert plugins.get_configurator("resume-all") is ResumeAllConfigurator
        assert other.loads == 1

    def test_a_broken_entry_point_does_not_break_the_others(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        good = FakeEntryPoint("good", f"{this_module}:ResumeAll", "gactors.strategies")
        broken = FakeEntryPoint("broken", "gactors_no_such_plugin_xyz:Thing", "gactors.strategies")
        use_entry_points(monkeypatch, good, broken)
        assert plugins.names("strategy") == ("broken", "default", "good", "stopping")
        with pytest.raises(PluginError) as info:
            plugins.get_strategy("broken")
        text = str(info.value)
        assert "'broken = gactors_no_such_plugin_xyz:Thing'" in text  # the entry point
        assert "gactors.strategies" in text
        assert "ModuleNotFoundError" in text and "gactors_no_such_plugin_xyz" in text  # cause
        assert isinstance(info.value.__cause__, ModuleNotFoundError)
        assert isinstance(plugins.get_strategy("good"), ResumeAll)
        # Loaded once: the failure is remembered, not retried.
        with pytest.raises(PluginError, match="gactors_no_such_plugin_xyz"):
            plugins.get_strategy("broken")
        assert broken.loads == 1
        assert "broken" not in plugins.names("strategy")

    def test_an_entry_point_failing_verification(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = FakeEntryPoint("no-reset", f"{this_module}:NoReset", "gactors.backoff_policies")
        use_entry_points(monkeypatch, ep)
        with pytest.raises(PluginError) as info:
            BackoffOpts.on_stop(Props(Actor), "c", 1, 2, 0).with_policy("no-reset")
        text = str(info.value)
        assert "'no-reset = " in text and "gactors.backoff_policies" in text
        assert "'reset' is missing" in text

    def test_an_entry_point_raising_on_import(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Exploding(FakeEntryPoint):
            def load(self) -> Any:
                self.loads += 1
                raise RuntimeError("plugin init exploded")

        ep = Exploding("boom", "somewhere:Thing", "gactors.configurators")
        use_entry_points(monkeypatch, ep)
        with pytest.raises(
            PluginError, match=r"'boom = somewhere:Thing'.*RuntimeError: plugin init"
        ):
            run_system({"guardian_supervisor_strategy": "boom"})

    def test_builtin_names_win_over_entry_points(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = FakeEntryPoint("default", f"{this_module}:ResumeAll", "gactors.strategies")
        use_entry_points(monkeypatch, ep)
        assert plugins.get_strategy("default") is SupervisorStrategy.default_strategy
        assert ep.loads == 0

    def test_two_entry_points_with_one_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        a = FakeEntryPoint("twin", f"{this_module}:ResumeAll", "gactors.strategies")
        b = FakeEntryPoint("twin", f"{this_module}:NoChildTerminated", "gactors.strategies")
        use_entry_points(monkeypatch, a, b)
        with pytest.raises(PluginError, match="'twin' is ambiguous"):
            plugins.get_strategy("twin")
        assert a.loads == b.loads == 0

    def test_registering_a_name_taken_by_an_entry_point(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ep = FakeEntryPoint("taken", f"{this_module}:ResumeAll", "gactors.strategies")
        use_entry_points(monkeypatch, ep)
        with pytest.raises(PluginError, match=r"already registered \(by an entry point\)"):
            plugins.register_strategy("taken", ResumeAll())
        mine = ResumeAll()
        plugins.register_strategy("taken", mine, replace=True)
        assert plugins.get_strategy("taken") is mine
        assert ep.loads == 0

    def test_refresh_scans_again(self, monkeypatch: pytest.MonkeyPatch) -> None:
        eps: list[FakeEntryPoint] = []
        monkeypatch.setattr(plugins, "_entry_points", lambda group: list(eps))
        assert "late" not in plugins.names("strategy")
        eps.append(FakeEntryPoint("late", f"{this_module}:ResumeAll", "gactors.strategies"))
        assert "late" not in plugins.names("strategy")  # scanned once only
        plugins.refresh()
        assert "late" in plugins.names("strategy")
        plugins.get_strategy("late")
        plugins.refresh()
        assert isinstance(plugins.get_strategy("late"), ResumeAll)  # no duplicate warning
        assert eps[0].loads == 1


@pytest.mark.usefixtures("registry")
class TestSettings:
    """guardian_supervisor_strategy by name, path or object (SPEC sections 5, 11, 12)."""

    def _top_level_survives_value_error(self, system: ActorSystem) -> int:
        counter = system.actor_of(Props(Counter), "counter")
        counter.tell("inc")
        counter.tell("boom")
        counter.tell("inc")
        return int(counter.ask("get", timeout=TIMEOUT))

    @pytest.mark.parametrize(
        "value",
        [
            "resume-all",
            f"{this_module}:ResumeAllConfigurator",
            ResumeAllConfigurator,
            ResumeAllConfigurator(),
        ],
        ids=["name", "path", "class", "instance"],
    )
    def test_forms(self, value: Any) -> None:
        plugins.register_configurator("resume-all", ResumeAllConfigurator)
        with run_system({"guardian_supervisor_strategy": value}) as system:
            assert self._top_level_survives_value_error(system) == 2  # resumed, state kept

    def test_default_restarts(self) -> None:
        with run_system({}) as system:
            assert self._top_level_survives_value_error(system) == 1  # restarted, state lost

    def test_stopping(self) -> None:
        with run_system({"guardian_supervisor_strategy": "stopping"}) as system:
            counter = system.actor_of(Props(Counter), "counter")
            terminated: Queue = Queue()
            system.actor_of(Props(Watcher, counter, terminated))
            counter.tell("boom")
            assert terminated.get(timeout=TIMEOUT) == counter

    def test_unknown_name_fails_at_actor_system_with_the_known_names(self) -> None:
        with pytest.raises(PluginError) as info:
            run_system({"guardian_supervisor_strategy": "stoping"})
        text = str(info.value)
        assert "guardian_supervisor_strategy" in text
        assert "'stoping'" in text
        assert "'default', 'stopping'" in text

    def test_not_a_configurator(self) -> None:
        with pytest.raises(PluginError, match="ISupervisorStrategyConfigurator"):
            run_system({"guardian_supervisor_strategy": NoCreate})
        with pytest.raises(PluginError, match="ISupervisorStrategyConfigurator"):
            run_system({"guardian_supervisor_strategy": 42})

    def test_a_configurator_creating_no_strategy(self) -> None:
        with pytest.raises(PluginError, match=r"strategy created by .*ISupervisorStrategy"):
            run_system({"guardian_supervisor_strategy": CreatesGarbage})

    def test_bad_path(self) -> None:
        with pytest.raises(PluginError, match=r"guardian_supervisor_strategy.*cannot import"):
            run_system({"guardian_supervisor_strategy": "no_such_module_xyz:Configurator"})


@pytest.mark.usefixtures("registry")
class TestSerializerPlugins:
    """The "serializer" kind (SPEC 17): ISerializer, register_serializer, get_serializer."""

    def test_builtins_are_listed_and_loaded_on_first_lookup(self) -> None:
        from gactors.cluster._serialization import MsgpackSerializer, PickleSerializer

        assert plugins.names("serializer") == ("msgpack", "pickle")
        first = plugins.get_serializer("msgpack")
        assert type(first) is MsgpackSerializer
        assert verifyObject(ISerializer, first)
        assert plugins.get_serializer("msgpack") is not first  # a class: one per lookup
        assert type(plugins.get_serializer("pickle")) is PickleSerializer
        assert verifyClass(ISerializer, MsgpackSerializer)
        assert plugins.names("serializer") == ("msgpack", "pickle")

    def test_import_gactors_and_a_system_without_cluster_never_import_msgspec(self) -> None:
        code = (
            "import sys, gactors\n"
            "from gactors import plugins\n"
            "with gactors.ActorSystem('no-cluster') as s:\n"
            "    assert s.actor_of(gactors.Props(gactors.Actor)) is not None\n"
            "assert plugins.names('serializer') == ('msgpack', 'pickle')\n"
            "assert 'msgspec' not in sys.modules, 'msgspec imported'\n"
            "assert 'gactors.cluster' not in sys.modules, 'gactors.cluster imported'\n"
            "plugins.get_serializer('msgpack')\n"
            "assert 'msgspec' in sys.modules\n"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    def test_register_get_and_resolve(self) -> None:
        plugins.register_serializer("json", JsonSerializer)
        assert "json" in plugins.names("serializer")
        assert type(plugins.get_serializer("json")) is JsonSerializer
        mine = JsonSerializer()
        plugins.register_serializer("json", mine, replace=True)
        assert plugins.get_serializer("json") is mine
        assert plugins.resolve_serializer("json") is mine
        assert type(plugins.resolve_serializer(f"{this_module}:JsonSerializer")) is JsonSerializer
        assert plugins.resolve_serializer(mine) is mine
        assert type(plugins.resolve_serializer(JsonSerializer)) is JsonSerializer
        assert plugins.unregister("serializer", "json")

    def test_verification_names_what_is_missing(self) -> None:
        with pytest.raises(PluginError, match="'decode' is missing"):
            plugins.register_serializer("no-decode", NoDecode)
        with pytest.raises(PluginError, match="does not declare ISerializer"):
            plugins.register_serializer("undeclared", UndeclaredSerializer)
        with pytest.raises(PluginError, match="does not implement ISerializer"):
            plugins.resolve_serializer(f"{this_module}:NoDecode")

    def test_the_name_must_be_its_own(self) -> None:
        with pytest.raises(PluginError, match="registered under its own name"):
            plugins.register_serializer("other", JsonSerializer)

    def test_duplicates_and_builtin_names(self) -> None:
        plugins.register_serializer("json", JsonSerializer)
        with pytest.raises(PluginError, match="named 'json' is already registered"):
            plugins.register_serializer("json", JsonSerializer())

        @implementer(ISerializer)
        class MyMsgpack(JsonSerializer):
            name = "msgpack"

        with pytest.raises(PluginError, match=r"named 'msgpack' is already registered;"):
            plugins.register_serializer("msgpack", MyMsgpack)
        plugins.register_serializer("msgpack", MyMsgpack, replace=True)
        assert type(plugins.get_serializer("msgpack")) is MyMsgpack

    def test_unknown_name_lists_the_known_names(self) -> None:
        with pytest.raises(PluginError, match=r"unknown serializer 'cbor'.*'msgpack', 'pickle'"):
            plugins.get_serializer("cbor")

    def test_entry_points(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = FakeEntryPoint("json", f"{this_module}:JsonSerializer", "gactors.serializers")
        clash = FakeEntryPoint("msgpack", f"{this_module}:JsonSerializer", "gactors.serializers")
        use_entry_points(monkeypatch, ep, clash)
        assert plugins.names("serializer") == ("json", "msgpack", "pickle")
        assert ep.loads == 0
        assert type(plugins.get_serializer("json")) is JsonSerializer
        assert type(plugins.get_serializer("json")) is JsonSerializer
        assert ep.loads == 1
        # A built-in name wins over an entry point.
        assert plugins.get_serializer("msgpack").name == "msgpack"
        assert clash.loads == 0
        plugins.refresh()
        assert plugins.names("serializer") == ("json", "msgpack", "pickle")

    def test_an_entry_point_with_a_wrong_name(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ep = FakeEntryPoint("yaml", f"{this_module}:JsonSerializer", "gactors.serializers")
        use_entry_points(monkeypatch, ep)
        with pytest.raises(PluginError, match=r"'yaml'.*registered under its own name"):
            plugins.get_serializer("yaml")

    def test_a_node_decodes_payloads_of_other_registered_serializers(self) -> None:
        from gactors.cluster._serialization import (
            MsgpackSerializer,
            WireCodec,
            WireError,
            serializer_id,
        )

        class NoRefs:
            def ref_to_wire(self, ref: Any) -> tuple[str, str, int]:
                raise AssertionError

            def ref_from_wire(self, address: str, path: str, uid: int) -> Any:
                raise AssertionError

        plugins.register_serializer("json", JsonSerializer)
        plugins.register_serializer("unsafe-json", UnsafeJsonSerializer)
        json_node = WireCodec(JsonSerializer(), NoRefs(), 1024)
        msgpack_node = WireCodec(MsgpackSerializer(), NoRefs(), 1024)
        sid, payload = json_node.encode_message({"a": [1, 2]})
        assert sid == serializer_id("json") >= 256
        assert msgpack_node.decode_message(sid, payload) == {"a": [1, 2]}
        unsafe_node = WireCodec(UnsafeJsonSerializer(), NoRefs(), 1024)
        sid, payload = unsafe_node.encode_message([1])
        with pytest.raises(WireError, match="refused a payload of the 'unsafe-json'"):
            msgpack_node.decode_message(sid, payload)
        assert unsafe_node.decode_message(sid, payload) == [1]  # where it is configured


# -- the example plugin package, installed --------------------------------------------------------
def _source_version() -> str:
    for line in (EXAMPLE_DIR / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    raise AssertionError("no version in the example's pyproject.toml")


@pytest.fixture(scope="module")
def example_package() -> Iterator[None]:
    """Make sure examples/plugin-package is installed (tox installs it; otherwise pip)."""
    try:
        installed = importlib.metadata.version(EXAMPLE_DIST)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != _source_version():
        try:
            import pip  # noqa: F401
        except ImportError:
            pytest.skip(f"{EXAMPLE_DIST} is not installed and pip is not available to install it")
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "-q", str(EXAMPLE_DIR)],
            capture_output=True,
            text=True,
            timeout=50,
        )
        assert result.returncode == 0, f"pip install failed:\n{result.stdout}\n{result.stderr}"
    # Entry points may have been scanned before the installation.
    plugins.refresh()
    yield


@pytest.mark.usefixtures("example_package")
class TestExamplePackage:
    def test_its_names_are_listed(self) -> None:
        assert "example-resume-value-errors" in plugins.names("strategy")
        assert "example-resuming" in plugins.names("configurator")
        assert "example-linear" in plugins.names("backoff_policy")

    def test_as_guardian_supervisor_strategy(self) -> None:
        with run_system({"guardian_supervisor_strategy": "example-resuming"}) as system:
            counter = system.actor_of(Props(Counter), "counter")
            counter.tell("inc")
            counter.tell("boom")  # ValueError: the example strategy resumes
            counter.tell("inc")
            assert counter.ask("get", timeout=TIMEOUT) == 2

    def test_strategy_and_policy_in_backoff_options(self) -> None:
        from gactors_example_plugins import LinearBackoff, ResumingStrategy

        opts = (
            BackoffOpts.on_failure(Props(Counter), "c", 0.1, 1.0, 0.0)
            .with_supervisor_strategy("example-resume-value-errors")
            .with_policy("example-linear")
        )
        assert isinstance(opts.strategy, ResumingStrategy)
        assert opts.policy is LinearBackoff
        policy = plugins.create_backoff_policy(opts.policy, 0.1, 1.0, 0.0)
        assert [policy.next_delay(n) for n in range(4)] == pytest.approx([0.1, 0.2, 0.3, 0.4])
        assert policy.next_delay(50) == pytest.approx(1.0)

    def test_readme_snippet_runs_as_written(self) -> None:
        """The README's usage snippet defines everything it uses and does what it says."""
        readme = (EXAMPLE_DIR / "README.md").read_text()
        start = readme.index("```python\n") + len("```python\n")
        snippet = readme[start : readme.index("```", start)]
        result = subprocess.run(
            [sys.executable, "-c", "from gevent import monkey; monkey.patch_all()\n" + snippet],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "done: job 1", result.stdout

    def test_unknown_name_lists_the_plugin_names_too(self) -> None:
        with pytest.raises(PluginError, match="'example-linear'"):
            plugins.get_backoff_policy("example-quadratic")
