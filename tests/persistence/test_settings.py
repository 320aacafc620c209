"""The ``persistence`` settings table (gactors/persistence/_settings.py), validated
when the system is created (SPEC section 12 rules), and the store plugins
(gactors.plugins: register_journal, ...)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import gevent
import pytest
from zope.interface import implementer

from gactors import ActorSystem, ConfigError, PluginError, Props, plugins
from gactors.interfaces import IJournal
from gactors.persistence import Persistence, PersistenceSettings
from gactors.persistence._memory import MemoryStore, memory_store
from gactors.testkit import TestProbe
from gactors.testkit.persistence import MEMORY_CONFIG

from ._recorder import Recorder


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"bogus": 1}, r"unknown setting 'persistence.bogus' \(known: .*journal"),
        ({"write_timeout": "5"}, r"'persistence.write_timeout' must be a number"),
        ({"write_timeout": 0}, r"'persistence.write_timeout' must be > 0"),
        ({"wait_replicas": -1}, r"'persistence.wait_replicas' must be >= 0"),
        ({"wait_replicas": True}, r"'persistence.wait_replicas' must be an int"),
        ({"path": ""}, r"'persistence.path' must be a non-empty str"),
        ({"url": 5}, r"'persistence.url' must be a non-empty str or None"),
        ({"journal": 3}, r"'persistence.journal' must name a store"),
        ("sqlite", r"'persistence' must be a table"),
    ],
)
def test_bad_settings_raise_config_error_naming_the_key(table: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("bad", config={"persistence": table})


def test_an_unknown_store_name_lists_the_known_ones_when_the_system_is_created() -> None:
    with pytest.raises(
        PluginError, match=r"unknown journal 'nosuch'; known names: .*'memory'.*'sqlite'"
    ):
        ActorSystem("bad", config={"persistence": {"journal": "nosuch"}})


def test_defaults_and_values_reach_the_extension(tmp_path: Any) -> None:
    path = str(tmp_path / "x.sqlite3")
    with ActorSystem("cfg", config={"persistence": {"path": path, "write_timeout": 2}}) as system:
        p = Persistence.get(system)
        assert p.settings == PersistenceSettings(path=path, write_timeout=2.0)
        assert p.settings.store_ref("journal", clustered=False) == "sqlite"
        assert p.settings.store_ref("journal", clustered=True) == "redis"
    with ActorSystem("cfg2") as system:
        assert Persistence.get(system).settings.path.endswith("gactors-persistence.sqlite3")


# -- store plugins --------------------------------------------------------------------------------
class MissingReplay:
    def write_batch(self, writes: Any) -> Any: ...


@implementer(IJournal)
class HalfJournal:
    def __init__(self, settings: Any, system: Any) -> None: ...

    def write_batch(self, writes: Any) -> Any: ...


def test_register_journal_verifies_the_factory() -> None:
    with pytest.raises(PluginError, match=r"does not implement IJournal.*'replay' is missing"):
        plugins.register_journal("half", HalfJournal)
    with pytest.raises(PluginError, match="is a store instance; register a factory"):
        plugins.register_journal("inst", MemoryStore())
    with pytest.raises(PluginError, match="is not callable"):
        plugins.register_journal("num", 5)


def test_a_registered_factory_is_used_and_its_product_verified(mem: Any) -> None:
    made: list[Any] = []

    def factory(settings: Any, system: Any) -> Any:
        made.append(settings)
        gevent.sleep(0.05)  # a factory that blocks (opens a file, connects)
        return mem.store

    plugins.register_journal("counting", factory)
    plugins.register_snapshot_store("broken", lambda settings, system: MissingReplay())
    try:
        cfg = {"persistence": {**MEMORY_CONFIG, "journal": "counting"}}
        with ActorSystem("plug", config=cfg) as system:
            probe = TestProbe(system)
            # Twenty actors recover at once: the journal is still made once.
            refs = [system.actor_of(Props(Recorder, f"plugged{i}", [])) for i in range(20)]
            for i, a in enumerate(refs):
                probe.send(a, ("persist", i))
            assert sorted(probe.receive_n(20, 5)) == sorted(("done", i, 1) for i in range(20))
            assert len(made) == 1 and made[0].journal == "counting"
        cfg = {"persistence": {**MEMORY_CONFIG, "snapshot_store": "broken"}}
        with (
            ActorSystem("plug2", config=cfg) as system,
            pytest.raises(PluginError, match="does not implement ISnapshotStore"),
        ):
            _ = Persistence.get(system).snapshot_store
    finally:
        plugins.unregister("journal", "counting")
        plugins.unregister("snapshot_store", "broken")


def entry_point_store(settings: Any, system: Any) -> Any:
    """A journal factory named by a (fake) entry point."""
    return MemoryStore()


def test_stores_come_from_their_entry_point_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    groups: list[str] = []

    def entry_points(group: str) -> list[Any]:
        groups.append(group)
        if group != "gactors.journals":
            return []
        return [importlib.metadata.EntryPoint("ep-journal", f"{__name__}:entry_point_store", group)]

    monkeypatch.setattr(plugins, "_entry_points", entry_points)
    plugins.refresh()
    try:
        assert "ep-journal" in plugins.names("journal")
        assert "ep-journal" not in plugins.names("state_store")
        cfg = {"persistence": {**MEMORY_CONFIG, "journal": "ep-journal"}}
        with ActorSystem("eps", config=cfg) as system:
            journal = Persistence.get(system).journal
            # A store of its own, not the shared one of the "memory" plugin.
            assert isinstance(journal, MemoryStore) and journal is not memory_store()
        assert {"gactors.journals", "gactors.snapshot_stores", "gactors.state_stores"} <= set(
            groups
        )
    finally:
        plugins.unregister("journal", "ep-journal")
        monkeypatch.undo()
        plugins.refresh()


def test_a_cluster_node_defaults_to_the_redis_store(redis_url: str) -> None:
    from types import SimpleNamespace

    from gactors.persistence._redis_store import RedisStore

    def node(tables: dict[str, Any]) -> Any:
        return SimpleNamespace(name="n", settings=SimpleNamespace(extension_tables=tables))

    # The redis store on the cluster's server, under the cluster's key prefix.
    cluster = SimpleNamespace(url=redis_url, key_prefix="pfx")
    clustered = Persistence(node({"cluster": cluster}), PersistenceSettings())
    try:
        assert isinstance(clustered.journal, RedisStore)
        assert "pfx:n:p" in repr(clustered.journal)
    finally:
        clustered.close()
    # A cluster table without a server (and no persistence.url): the error says so.
    bare = Persistence(node({"cluster": object()}), PersistenceSettings())
    with pytest.raises(ConfigError, match=r"persistence\.url"):
        _ = bare.journal
    plain = Persistence(node({}), PersistenceSettings(path=":memory:"))
    assert plain.settings.store_ref("journal", plain._clustered) == "sqlite"
