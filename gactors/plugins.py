"""The plugin registry: supervisor strategies, guardian configurators, backoff policies,
serializers, persistence stores.

Seven kinds of plugins exist, each with its interface in :mod:`gactors.interfaces`:

====================  ========================================  ============================
kind                  what is registered                        entry-point group
====================  ========================================  ============================
``"strategy"``        an :class:`ISupervisorStrategy`           ``gactors.strategies``
                      provider, or a class implementing it
                      (instantiated on every lookup)
``"configurator"``    an ``ISupervisorStrategyConfigurator``    ``gactors.configurators``
                      class (or instance)
``"backoff_policy"``  a factory ``(min_backoff, max_backoff,    ``gactors.backoff_policies``
                      random_factor) -> IBackoffPolicy``
``"serializer"``      an :class:`ISerializer` provider, or a      ``gactors.serializers``
                      class implementing it (instantiated on
                      every lookup)
``"journal"``         a factory ``(settings, system) ->         ``gactors.journals``
                      IJournal``
``"snapshot_store"``  a factory ``(settings, system) ->         ``gactors.snapshot_stores``
                      ISnapshotStore``
``"state_store"``     a factory ``(settings, system) ->         ``gactors.state_stores``
                      IDurableStateStore``
====================  ========================================  ============================

A store factory that is a class is verified with ``verifyClass`` when it is registered;
what any store factory returns is verified when it is called (:func:`create_store`).

Registration (``register_*``) verifies the object with ``zope.interface.verify`` and
raises :class:`~gactors.PluginError` naming what is missing; a name already taken
raises :class:`~gactors.PluginError` unless ``replace=True``. Third-party packages
register through the entry-point groups above: the groups are scanned once, when a
plugin of that kind is first needed, and each entry point is imported only when its
name is first looked up, so a plugin that fails to import breaks nothing but itself.
The built-in serializers (``"msgpack"``, ``"pickle"``) are loaded the same lazy way, so
``import gactors`` and a system without a cluster never import their dependencies.

Anywhere gactors takes a plugin (``guardian_supervisor_strategy``,
``BackoffOpts.with_policy``, ``BackoffOpts.with_supervisor_strategy``), a registered
name, a ``"package.module:Name"`` path or the object itself is accepted
(:func:`resolve`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Any, cast

from gevent import monkey
from zope.interface import Interface
from zope.interface.registry import Components

from gactors._plugin_verify import (
    INTERFACE,
    KINDS,
    LABEL,
    STORE_KINDS,
    Kind,
    check,
    verify,
    verify_strategy,
)
from gactors.exceptions import PluginError
from gactors.interfaces import IBackoffPolicy, ISupervisorStrategyConfigurator

__all__ = [
    "GROUPS",
    "KINDS",
    "Kind",
    "create_backoff_policy",
    "create_store",
    "get_backoff_policy",
    "get_configurator",
    "get_journal",
    "get_serializer",
    "get_snapshot_store",
    "get_state_store",
    "get_strategy",
    "names",
    "refresh",
    "register_backoff_policy",
    "register_configurator",
    "register_journal",
    "register_serializer",
    "register_snapshot_store",
    "register_state_store",
    "register_strategy",
    "resolve",
    "resolve_backoff_policy",
    "resolve_configurator",
    "resolve_serializer",
    "resolve_strategy",
    "unregister",
    "verify_strategy",
]

_log = logging.getLogger("gactors.plugins")

GROUPS: dict[Kind, str] = {
    "strategy": "gactors.strategies",
    "configurator": "gactors.configurators",
    "backoff_policy": "gactors.backoff_policies",
    "serializer": "gactors.serializers",
    "journal": "gactors.journals",
    "snapshot_store": "gactors.snapshot_stores",
    "state_store": "gactors.state_stores",
}
"""The entry-point group of each kind."""


# The registry keys: one private marker interface per kind. What is stored is not always
# a provider of the public interface (a configurator is registered as its class, a backoff
# policy as its factory), so the public interfaces cannot serve as keys.
class _IStrategyPlugin(Interface):
    """Registry key of supervisor strategies."""


class _IConfiguratorPlugin(Interface):
    """Registry key of guardian strategy configurators."""


class _IBackoffPolicyPlugin(Interface):
    """Registry key of backoff policy factories."""


class _ISerializerPlugin(Interface):
    """Registry key of serializers."""


class _IJournalPlugin(Interface):
    """Registry key of journal factories."""


class _ISnapshotStorePlugin(Interface):
    """Registry key of snapshot store factories."""


class _IStateStorePlugin(Interface):
    """Registry key of durable state store factories."""


_KEY: dict[Kind, type[Interface]] = {
    "strategy": _IStrategyPlugin,
    "configurator": _IConfiguratorPlugin,
    "backoff_policy": _IBackoffPolicyPlugin,
    "serializer": _ISerializerPlugin,
    "journal": _IJournalPlugin,
    "snapshot_store": _ISnapshotStorePlugin,
    "state_store": _IStateStorePlugin,
}

# Built-in plugins registered by reference and imported on first lookup, like entry
# points: the serializers need msgspec (the ``cluster`` extra), which neither
# ``import gactors`` nor a system without a cluster may import.
_BUILTIN_LAZY: dict[Kind, dict[str, str]] = {
    "serializer": {
        "msgpack": "gactors.cluster._serialization:MsgpackSerializer",
        "pickle": "gactors.cluster._serialization:PickleSerializer",
    },
    # The stores: sqlite3 and the encoder are imported only by a system that persists.
    "journal": {
        "memory": "gactors.persistence._memory:memory_store",
        "sqlite": "gactors.persistence._sqlite:sqlite_store",
        "redis": "gactors.persistence._redis_store:redis_store",
    },
    "snapshot_store": {
        "memory": "gactors.persistence._memory:memory_store",
        "sqlite": "gactors.persistence._sqlite:sqlite_store",
        "redis": "gactors.persistence._redis_store:redis_store",
    },
    "state_store": {
        "memory": "gactors.persistence._memory:memory_store",
        "sqlite": "gactors.persistence._sqlite:sqlite_store",
        "redis": "gactors.persistence._redis_store:redis_store",
    },
}

BUILTIN_EXTENSIONS: dict[str, str] = {
    "cluster": "gactors.cluster._extension:ClusterNodeExtension",
    "persistence": "gactors.persistence._extension:PersistenceExtension",
    "reminders": "gactors.reminders._extension:RemindersExtension",
    "tracing": "gactors.contrib.otel:TracingExtension",
    "metrics": "gactors._timing:TimingExtension",
}
"""Built-in extensions that own a settings table: settings key -> ``"module:Name"`` of
the :class:`~gactors.ExtensionId` subclass, imported when a system's settings have that
table (like an entry point of group ``gactors.extensions``, which third parties use)."""

_registry = Components("gactors.plugins")
# The original (OS-thread) RLock: registration may happen in any thread, and nothing
# inside the critical sections switches greenlets.
_lock = monkey.get_original("_thread", "RLock")()
_builtins_registered = False
_scanned: set[Kind] = set()
# Entry points found by the scan and not loaded yet, per kind and name.
_pending: dict[Kind, dict[str, importlib.metadata.EntryPoint]] = {k: {} for k in KINDS}
# Names whose entry point failed to load (or clashed): the error is raised on lookup.
_failed: dict[Kind, dict[str, PluginError]] = {k: {} for k in KINDS}
# Entry points loaded so far (kind -> name -> entry point value), so that a scan after
# refresh() recognises them.
_loaded_from: dict[Kind, dict[str, str]] = {k: {} for k in KINDS}
# Backoff policy factories whose product has been verified already.
_verified_factories: weakref.WeakSet[Any] = weakref.WeakSet()


# -- discovery -----------------------------------------------------------------------------------
def _entry_points(group: str) -> Iterable[importlib.metadata.EntryPoint]:
    """The installed entry points of ``group`` (a seam for tests)."""
    return importlib.metadata.entry_points(group=group)


class _BuiltinRef:
    """A lazily imported built-in plugin; quacks like an entry point for ``_pending``."""

    __slots__ = ("group", "name", "value")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    def load(self) -> Any:
        module_name, _, attr = self.value.partition(":")
        return getattr(importlib.import_module(module_name), attr)


def _add_builtin_lazy() -> None:
    """Put the lazily imported built-ins that are not loaded yet into ``_pending``."""
    for kind, refs in _BUILTIN_LAZY.items():
        for name, value in refs.items():
            if _lookup(kind, name) is None and name not in _pending[kind]:
                _pending[kind][name] = cast(
                    importlib.metadata.EntryPoint, _BuiltinRef(name, value, GROUPS[kind])
                )


def _describe_ep(ep: importlib.metadata.EntryPoint) -> str:
    if isinstance(ep, _BuiltinRef):
        return f"built-in {ep.value}"
    dist = getattr(ep, "dist", None)
    where = f" of distribution {dist.name!r}" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}' in group {ep.group!r}{where}"


def _ensure_builtins() -> None:
    global _builtins_registered
    if _builtins_registered:
        return
    with _lock:
        if _builtins_registered:
            return
        # Imported here: gactors.backoff imports this module.
        from gactors._supervision import (
            DefaultSupervisorStrategy,
            StoppingSupervisorStrategy,
            SupervisorStrategy,
        )
        from gactors.backoff._policies import BUILTIN_POLICIES

        _builtins_registered = True
        _store("strategy", "default", SupervisorStrategy.default_strategy)
        _store("strategy", "stopping", SupervisorStrategy.stopping_strategy)
        _store("configurator", "default", DefaultSupervisorStrategy)
        _store("configurator", "stopping", StoppingSupervisorStrategy)
        for name, factory in BUILTIN_POLICIES.items():
            _store("backoff_policy", name, factory)
        _add_builtin_lazy()


def _scan(kind: Kind) -> None:
    """Scan the entry-point group of ``kind`` once (nothing is imported yet)."""
    _ensure_builtins()
    if kind in _scanned:
        return
    with _lock:
        if kind in _scanned:
            return
        _scanned.add(kind)
        group = GROUPS[kind]
        try:
            eps = list(_entry_points(group))
        except Exception as e:  # a broken distribution must not break gactors
            _log.warning("cannot scan entry-point group %r: %s: %s", group, type(e).__name__, e)
            return
        pending = _pending[kind]
        for ep in eps:
            name = ep.name
            if _loaded_from[kind].get(name) == ep.value:
                continue  # loaded before a refresh()
            if _lookup(kind, name) is not None or isinstance(pending.get(name), _BuiltinRef):
                _log.warning(
                    "ignoring %s: a %s named %r is already registered",
                    _describe_ep(ep),
                    LABEL[kind],
                    name,
                )
                continue
            other = pending.get(name)
            if other is not None:
                if other.value == ep.value:
                    continue  # the same distribution seen twice on sys.path
                del pending[name]
                _failed[kind][name] = PluginError(
                    f"{LABEL[kind]} {name!r} is ambiguous: {_describe_ep(other)} and "
                    f"{_describe_ep(ep)} both claim it"
                )
                continue
            if name in _failed[kind]:
                continue
            pending[name] = ep


def refresh() -> None:
    """Forget the entry points scanned so far; the groups are scanned again when next
    needed.

    For a plugin package installed while the process runs. Plugins already loaded stay
    registered; entry points that failed to load are retried.
    """
    with _lock:
        importlib.invalidate_caches()
        _scanned.clear()
        for kind in KINDS:
            _pending[kind].clear()
            _failed[kind].clear()
        if _builtins_registered:
            _add_builtin_lazy()


def _load_pending(kind: Kind, name: str) -> Any:
    """Import the entry point ``name`` of ``kind`` (once) and register what it names."""
    with _lock:
        ep = _pending[kind].pop(name, None)
        if ep is None:  # loaded (or failed) meanwhile
            return _lookup(kind, name)
        try:
            obj = ep.load()
        except Exception as e:
            err = PluginError(
                f"{LABEL[kind]} {name!r} could not be loaded from {_describe_ep(ep)}: "
                f"{type(e).__name__}: {e}"
            )
            err.__cause__ = e
            _failed[kind][name] = err
            _log.warning("%s", err)
            raise err from e
        try:
            check(kind, obj, f"{LABEL[kind]} {name!r} (from {_describe_ep(ep)})", name)
        except PluginError as e:
            _failed[kind][name] = e
            _log.warning("%s", e)
            raise
        _store(kind, name, obj)
        _loaded_from[kind][name] = ep.value
        return obj


# -- the registry ---------------------------------------------------------------------------------
def _lookup(kind: Kind, name: str) -> Any:
    return _registry.queryUtility(_KEY[kind], name=name)


def _store(kind: Kind, name: str, obj: Any) -> None:
    _registry.registerUtility(obj, _KEY[kind], name, event=False)


def _check_name(kind: Kind, name: Any) -> str:
    if not isinstance(name, str) or not name or name != name.strip() or ":" in name:
        raise PluginError(
            f"invalid {LABEL[kind]} name {name!r}: use a non-empty str without ':' "
            "(':' separates module and attribute in 'package.module:Name' references)"
        )
    return name


def _register(kind: Kind, name: str, obj: Any, replace: bool) -> None:
    _check_name(kind, name)
    check(kind, obj, f"{LABEL[kind]} {name!r} ({obj!r})", name)
    _scan(kind)
    with _lock:
        taken = _lookup(kind, name) is not None or name in _pending[kind]
        if taken and not replace:
            pending = _pending[kind].get(name)
            where = (
                ""
                if pending is None or isinstance(pending, _BuiltinRef)
                else " (by an entry point)"
            )
            raise PluginError(
                f"a {LABEL[kind]} named {name!r} is already registered{where}; "
                "pass replace=True to replace it"
            )
        _pending[kind].pop(name, None)
        _failed[kind].pop(name, None)
        _loaded_from[kind].pop(name, None)
        if replace:
            _registry.unregisterUtility(provided=_KEY[kind], name=name)
        _store(kind, name, obj)


def register_strategy(name: str, obj: Any, *, replace: bool = False) -> None:
    """Register a supervisor strategy under ``name``.

    ``obj`` provides :class:`~gactors.interfaces.ISupervisorStrategy` (it is shared by
    everything that looks it up), or is a class implementing it, instantiated with no
    arguments on every lookup.
    """
    _register("strategy", name, obj, replace)


def register_configurator(name: str, cls: Any, *, replace: bool = False) -> None:
    """Register a guardian strategy configurator under ``name``: a class implementing
    :class:`~gactors.interfaces.ISupervisorStrategyConfigurator` (instantiated with no
    arguments by each actor system using it) or an instance providing it."""
    _register("configurator", name, cls, replace)


def register_backoff_policy(name: str, factory: Any, *, replace: bool = False) -> None:
    """Register a backoff policy factory ``(min_backoff, max_backoff, random_factor) ->
    IBackoffPolicy`` under ``name``.

    A class is verified with ``verifyClass`` now; what any factory returns is verified
    when the factory is first called.
    """
    _register("backoff_policy", name, factory, replace)


def unregister(kind: Kind, name: str) -> bool:
    """Remove the plugin ``name`` of ``kind``; False if there was none.

    Also forgets an entry point of that name that was not loaded yet.
    """
    _check_kind(kind)
    _scan(kind)
    with _lock:
        had_pending = _pending[kind].pop(name, None) is not None
        had_failed = _failed[kind].pop(name, None) is not None
        _loaded_from[kind].pop(name, None)
        removed = bool(_registry.unregisterUtility(provided=_KEY[kind], name=name))
        return removed or had_pending or had_failed


def _check_kind(kind: Any) -> Kind:
    if kind not in KINDS:
        raise ValueError(f"unknown plugin kind {kind!r} (known kinds: {', '.join(KINDS)})")
    return cast(Kind, kind)


def names(kind: Kind) -> tuple[str, ...]:
    """The sorted names of the plugins of ``kind`` (built-in, registered, and discovered
    through entry points but not loaded yet; not the ones that failed to load)."""
    _check_kind(kind)
    _scan(kind)
    with _lock:
        registered = {n for n, _ in _registry.getUtilitiesFor(_KEY[kind])}
        return tuple(sorted(registered | set(_pending[kind])))


def _get(kind: Kind, name: str) -> Any:
    _scan(kind)
    obj = _lookup(kind, name)
    if obj is not None:
        return obj
    if name in _pending[kind]:
        return _load_pending(kind, name)
    failed = _failed[kind].get(name)
    if failed is not None:
        raise PluginError(str(failed)) from failed.__cause__
    known = ", ".join(repr(n) for n in names(kind)) or "none"
    raise PluginError(
        f"unknown {LABEL[kind]} {name!r}; known {LABEL[kind]} names: {known} "
        "(or give a 'package.module:Name' reference or the object itself)"
    )


def get_strategy(name: str) -> Any:
    """The supervisor strategy registered as ``name`` (a registered class is
    instantiated); :class:`~gactors.PluginError` if unknown or broken."""
    obj = _get("strategy", name)
    return obj() if isinstance(obj, type) else obj


def get_configurator(name: str) -> Any:
    """The configurator registered as ``name``, as registered (usually a class)."""
    return _get("configurator", name)


def get_backoff_policy(name: str) -> Callable[[float, float, float], Any]:
    """The backoff policy factory registered as ``name``."""
    return cast("Callable[[float, float, float], Any]", _get("backoff_policy", name))


def register_serializer(name: str, obj: Any, *, replace: bool = False) -> None:
    """Register a cluster message serializer under ``name``.

    ``obj`` provides :class:`~gactors.interfaces.ISerializer`, or is a class
    implementing it, instantiated with no arguments on every lookup. Its ``name``
    attribute must be ``name``: payloads are tagged with it on the wire.
    """
    _register("serializer", name, obj, replace)


def get_serializer(name: str) -> Any:
    """The serializer registered as ``name`` (a registered class is instantiated; the
    built-ins ``"msgpack"`` and ``"pickle"`` need the ``gactors[cluster]`` extra)."""
    obj = _get("serializer", name)
    return obj() if isinstance(obj, type) else obj


# -- resolving references --------------------------------------------------------------------
def _import_ref(kind: Kind, ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr or ":" in attr:
        raise PluginError(
            f"invalid {LABEL[kind]} reference {ref!r}: expected 'package.module:Name'"
        )
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise PluginError(f"cannot import {LABEL[kind]} {ref!r}: {type(e).__name__}: {e}") from e
    return obj


def resolve(kind: Kind, ref: Any) -> Any:
    """Turn a plugin reference into the plugin object of ``kind``.

    ``ref`` is a registered name, a ``"package.module:Name"`` path (imported and
    verified, not registered) or the object itself (verified). The result is what
    ``get_*`` would return for a registered name: a strategy instance, a configurator
    class or instance, a backoff policy factory.
    """
    _check_kind(kind)
    if isinstance(ref, str):
        if ":" not in ref:
            obj = _get(kind, ref)
        else:
            obj = _import_ref(kind, ref)
            check(kind, obj, f"{LABEL[kind]} {ref!r}")
    else:
        obj = ref
        if kind == "backoff_policy" and IBackoffPolicy.providedBy(obj) and not callable(obj):
            # A ready-made policy instance: wrap it in a factory handing it out.
            verify(IBackoffPolicy, obj, f"backoff policy {obj!r}", as_class=False)
            return _InstanceFactory(obj)
        check(kind, obj, f"{LABEL[kind]} {obj!r}")
    if kind in ("strategy", "serializer") and isinstance(obj, type):
        obj = obj()
    return obj


def resolve_strategy(ref: Any) -> Any:
    """:func:`resolve` for supervisor strategies: returns a strategy instance."""
    return resolve("strategy", ref)


def resolve_configurator(ref: Any) -> ISupervisorStrategyConfigurator:
    """:func:`resolve` for configurators, returning an *instance* (a class is
    instantiated with no arguments)."""
    obj = resolve("configurator", ref)
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as e:
            raise PluginError(
                f"supervisor strategy configurator {ref!r} could not be instantiated: "
                f"{type(e).__name__}: {e}"
            ) from e
    # resolve() verified the class (or the object) against the interface.
    return cast("ISupervisorStrategyConfigurator", obj)


def resolve_backoff_policy(ref: Any) -> Callable[[float, float, float], Any]:
    """:func:`resolve` for backoff policies: a name, a path, a factory, or an
    :class:`IBackoffPolicy` instance (wrapped in a factory that always returns it)."""
    return cast("Callable[[float, float, float], Any]", resolve("backoff_policy", ref))


def resolve_serializer(ref: Any) -> Any:
    """:func:`resolve` for serializers: returns a serializer instance."""
    return resolve("serializer", ref)


class _InstanceFactory:
    """The factory of a policy instance given directly: every call returns it."""

    __slots__ = ("__weakref__", "policy")

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def __call__(self, min_backoff: float, max_backoff: float, random_factor: float) -> Any:
        return self.policy

    def __repr__(self) -> str:
        return repr(self.policy)


def create_backoff_policy(
    factory: Callable[[float, float, float], Any],
    min_backoff: float,
    max_backoff: float,
    random_factor: float,
) -> Any:
    """Call a backoff policy ``factory``; what it returns is verified against
    :class:`IBackoffPolicy` on the factory's first call."""
    policy = factory(min_backoff, max_backoff, random_factor)
    try:
        known = factory in _verified_factories
    except TypeError:  # not weakly referenceable: verify every time
        known = False
    if not known:
        verify(
            IBackoffPolicy,
            policy,
            f"backoff policy {policy!r} returned by factory {factory!r}",
            as_class=False,
        )
        try:
            _verified_factories.add(factory)
        except TypeError:
            pass
    return policy


# -- persistence stores ----------------------------------------------------------------------
def register_journal(name: str, factory: Any, *, replace: bool = False) -> None:
    """Register a journal factory ``(settings, system) -> IJournal`` under ``name`` (the
    ``persistence.journal`` setting names it). A class is verified now; what any
    factory returns is verified when it is called."""
    _register("journal", name, factory, replace)


def register_snapshot_store(name: str, factory: Any, *, replace: bool = False) -> None:
    """Register a snapshot store factory ``(settings, system) -> ISnapshotStore`` under
    ``name`` (the ``persistence.snapshot_store`` setting), verified as for
    :func:`register_journal`."""
    _register("snapshot_store", name, factory, replace)


def register_state_store(name: str, factory: Any, *, replace: bool = False) -> None:
    """Register a durable state store factory ``(settings, system) ->
    IDurableStateStore`` under ``name`` (the ``persistence.state_store`` setting),
    verified as for :func:`register_journal`."""
    _register("state_store", name, factory, replace)


def get_journal(name: str) -> Callable[[Any, Any], Any]:
    """The journal factory registered as ``name``."""
    return cast("Callable[[Any, Any], Any]", _get("journal", name))


def get_snapshot_store(name: str) -> Callable[[Any, Any], Any]:
    """The snapshot store factory registered as ``name``."""
    return cast("Callable[[Any, Any], Any]", _get("snapshot_store", name))


def get_state_store(name: str) -> Callable[[Any, Any], Any]:
    """The durable state store factory registered as ``name``."""
    return cast("Callable[[Any, Any], Any]", _get("state_store", name))


def create_store(kind: Kind, ref: Any, settings: Any, system: Any) -> Any:
    """Resolve the store plugin ``ref`` of ``kind`` (``"journal"``,
    ``"snapshot_store"``, ``"state_store"``: a name, a ``"package.module:Name"`` path or
    a factory), call it with ``(settings, system)`` and verify what it returns."""
    if kind not in STORE_KINDS:
        raise ValueError(f"{kind!r} is not a store kind (one of {', '.join(STORE_KINDS)})")
    factory = resolve(kind, ref)
    store = factory(settings, system)
    verify(
        INTERFACE[kind],
        store,
        f"{LABEL[kind]} {store!r} made by {ref!r}",
        as_class=False,
    )
    return store
