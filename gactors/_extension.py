"""Extensions: one object per actor system, created on first use (docs/extensions.md).

An :class:`ExtensionId` names an extension; ``system.extension(ExtId)`` returns the one
object ``ExtId.create(system)`` made for that system. The actor system keeps them in an
:class:`ExtensionRegistry` and knows nothing else about them: an extension that owns a
settings table is found by its ``settings_key`` (among the subclasses imported so far,
the built-ins of :mod:`gactors.plugins` and the entry-point group
``gactors.extensions``), is created when the system starts if its table is present, and
may add shutdown steps and system-message handlers.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import gevent
from gevent.event import Event
from greenlet import getcurrent

from gactors._settings import CORE_KEYS, unknown_setting
from gactors._threads import allocate_lock, get_ident
from gactors.exceptions import ConfigError, IllegalStateError

if TYPE_CHECKING:
    from gactors._system import ActorSystem

__all__ = [
    "ENTRY_POINT_GROUP",
    "ExtensionId",
    "ExtensionRegistry",
    "settings_owner",
    "validate_table",
]

_log = logging.getLogger("gactors.extensions")

T = TypeVar("T")

ENTRY_POINT_GROUP = "gactors.extensions"
"""Third-party extensions: the entry point's name is the settings key the extension
owns, its value a ``"module:Name"`` reference to the :class:`ExtensionId` subclass."""

# Settings keys claimed by ExtensionId subclasses (filled as they are defined).
_by_key: dict[str, type[ExtensionId[Any]]] = {}
# The original (OS-thread) lock: subclasses may be defined in any thread.
_registry_lock = allocate_lock()


class ExtensionId(Generic[T]):
    """The identity of an extension: a subclass defines :meth:`create`.

    ``system.extension(MyExt)`` (or ``MyExt.get(system)``) returns the one object
    ``MyExt().create(system)`` made for that system, created on first use; concurrent
    first calls (from greenlets or OS threads) create it once. A subclass may also set:

    ``settings_key``
        The name of a settings table the extension owns (``ActorSystem(config={key:
        {...}})`` or ``[gactors.<key>]`` in TOML). The table is validated when the
        system is created and the extension is created as the system starts. Must not
        be a key of :class:`~gactors.Settings` nor another extension's.
    ``settings_fields``
        ``{name: (types, default)}``: the keys the table accepts, what type each value
        must be (a type or a tuple of types; ``None`` in the tuple admits None) and its
        default. An unknown key or a value of the wrong type raises
        :class:`~gactors.ConfigError` naming it. Override :meth:`validate_settings` for
        more than that.
    ``system_messages``
        ``{SystemMessage subclass: handler(cell, message)}``: handlers of the
        extension's own system messages, registered when the extension is created.

    and override :meth:`shutdown` to run a step before the ``/user`` guardian stops.
    """

    settings_key: ClassVar[str | None] = None
    settings_fields: ClassVar[Mapping[str, tuple[Any, Any]]] = {}
    system_messages: ClassVar[Mapping[type, Callable[[Any, Any], None]]] = {}
    provides_refs: ClassVar[bool] = False
    """Internal: the extension object is the system's ref provider
    (``gactors._provider.RefProvider``, how the cluster plugs in). It is created, from
    its settings table, before the system's address exists (the address takes the
    provider's ``node_id``) and started once the guardians exist; one per system."""

    _instance: ClassVar[ExtensionId[Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._instance = None
        key = cls.__dict__.get("settings_key")
        if key is None:
            return
        if not isinstance(key, str) or not key.isidentifier():
            raise TypeError(f"{cls.__qualname__}.settings_key must be an identifier, not {key!r}")
        if key in CORE_KEYS:
            raise TypeError(
                f"{cls.__qualname__}.settings_key {key!r} is a setting of the actor system itself"
            )
        with _registry_lock:
            other = _by_key.get(key)
            # The same class defined again (a module reloaded) replaces the old one.
            if other is not None and (other.__module__, other.__qualname__) != (
                cls.__module__,
                cls.__qualname__,
            ):
                raise TypeError(
                    f"settings table {key!r} of {cls.__module__}.{cls.__qualname__} is already "
                    f"owned by the extension {other.__module__}.{other.__qualname__}"
                )
            _by_key[key] = cls

    def create(self, system: ActorSystem) -> T:
        """Make the extension object of ``system`` (called once per system, in the
        system's hub thread; it may block on gevent-friendly I/O)."""
        raise NotImplementedError(f"{type(self).__qualname__} must define create(system)")

    def shutdown(self, extension: T, proceed: Callable[[], None]) -> None:
        """A step of ``terminate()``, run in the hub thread before the ``/user``
        guardian stops: call ``proceed()`` once the step is done (at once, or later from
        the hub thread). The default proceeds at once. Steps run one after the other,
        the extension created last first."""
        proceed()

    def validate_settings(self, table: Any) -> Any:
        """Check the settings table (what the system's config holds under
        ``settings_key``) and return what ``settings.extension_tables[key]`` keeps:
        by default a dict of every field of ``settings_fields``, defaults filled in."""
        key = self.settings_key
        if not isinstance(table, Mapping):
            raise ConfigError(f"setting {key!r} must be a table, not {type(table).__name__}")
        fields = self.settings_fields
        values: dict[str, Any] = {}
        for name, value in table.items():
            spec = fields.get(name)
            if spec is None:
                known = ", ".join(sorted(fields)) or "none"
                raise ConfigError(f"unknown setting '{key}.{name}' (known: {known})")
            types, _default = spec
            if not _instance_of(value, types):
                raise ConfigError(
                    f"setting '{key}.{name}' must be {_describe_types(types)}, "
                    f"not {type(value).__name__} {value!r}"
                )
            values[name] = value
        for name, (_types, default) in fields.items():
            values.setdefault(name, default)
        return values

    @classmethod
    def get(cls, system: ActorSystem) -> T:
        """``system.extension(cls)``."""
        return system.extension(cls)

    @classmethod
    def _the_instance(cls) -> ExtensionId[Any]:
        inst = cls._instance
        if inst is None:
            inst = cls._instance = cls()
        return inst


def _type_tuple(types: Any) -> tuple[Any, ...]:
    return types if isinstance(types, tuple) else (types,)


def _instance_of(value: Any, types: Any) -> bool:
    for t in _type_tuple(types):
        if t is None:
            if value is None:
                return True
        elif t is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return True
        elif isinstance(value, t) and not (isinstance(value, bool) and t is int):
            return True
    return False


def _describe_types(types: Any) -> str:
    return " or ".join("None" if t is None else t.__name__ for t in _type_tuple(types))


# -- finding the owner of a settings table -------------------------------------------------------
def _entry_point(key: str) -> Any:
    """The ``gactors.extensions`` entry point (or built-in) named ``key``, or None."""
    from gactors import plugins

    ref = plugins.BUILTIN_EXTENSIONS.get(key)
    if ref is not None:
        return ref
    try:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as e:  # a broken distribution must not break gactors
        _log.warning("cannot scan entry-point group %r: %s", ENTRY_POINT_GROUP, e)
        return None
    found = [ep for ep in eps if ep.name == key]
    if len({ep.value for ep in found}) > 1:
        raise ConfigError(
            f"settings table {key!r} is claimed by several entry points of group "
            f"{ENTRY_POINT_GROUP!r}: {', '.join(ep.value for ep in found)}"
        )
    return found[0].value if found else None


def known_settings_keys() -> set[str]:
    """The settings tables known without importing anything (for error messages)."""
    from gactors import plugins

    keys = set(_by_key) | set(plugins.BUILTIN_EXTENSIONS)
    try:
        keys.update(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken distribution must not hide the real error
        pass
    return keys


def validate_table(key: str, table: Any) -> Any:
    """What the extension owning the settings table ``key`` makes of ``table``;
    :class:`~gactors.ConfigError` if no extension owns it (or the table is wrong)."""
    owner = settings_owner(key)
    if owner is None:
        raise unknown_setting(key, ", ".join(sorted(known_settings_keys())) or "none")
    return owner._the_instance().validate_settings(table)  # noqa: SLF001  this module's class


def settings_owner(key: str) -> type[ExtensionId[Any]] | None:
    """The :class:`ExtensionId` subclass owning the settings table ``key``, or None.

    Looks at the subclasses defined so far, then imports the built-in or entry point
    named ``key`` (only then: a system without that table imports nothing of it)."""
    owner = _by_key.get(key)
    if owner is not None:
        return owner
    ref = _entry_point(key)
    if ref is None:
        return None
    module_name, _, attr = str(ref).partition(":")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except Exception as e:
        raise ConfigError(
            f"settings table {key!r}: cannot load its extension {ref!r}: {type(e).__name__}: {e}"
        ) from e
    if not (isinstance(obj, type) and issubclass(obj, ExtensionId)) or obj.settings_key != key:
        raise ConfigError(
            f"settings table {key!r}: {ref!r} is not an ExtensionId subclass with "
            f"settings_key = {key!r}"
        )
    return obj


# -- one registry per system -------------------------------------------------------------------
_MISSING: Any = object()


class ExtensionRegistry:
    """The extensions of one actor system (its ``_extensions``).

    Creation runs in the system's hub thread, in a greenlet of its own when asked from
    another OS thread; a greenlet asking while another creates the same extension waits
    for it. A ``create()`` that raises leaves nothing behind: the next call tries again.
    """

    __slots__ = ("_creating", "_done", "_order", "_system")

    def __init__(self, system: ActorSystem) -> None:
        self._system = system
        self._done: dict[Any, Any] = {}
        # key -> (greenlet creating it, event set when it finished either way)
        self._creating: dict[Any, tuple[Any, Event]] = {}
        self._order: list[tuple[ExtensionId[Any], Any]] = []

    @staticmethod
    def _key(ext_id: Any) -> tuple[Any, ExtensionId[Any]]:
        """(registry key, the ExtensionId instance whose methods are called)."""
        if isinstance(ext_id, type) and issubclass(ext_id, ExtensionId):
            return ext_id, ext_id._the_instance()  # noqa: SLF001
        if isinstance(ext_id, ExtensionId):
            return ext_id, ext_id
        raise TypeError(
            f"an extension is named by an ExtensionId subclass or instance, not {ext_id!r}"
        )

    def has(self, ext_id: Any) -> bool:
        if not isinstance(ext_id, ExtensionId) and not (
            isinstance(ext_id, type) and issubclass(ext_id, ExtensionId)
        ):
            self._key(ext_id)  # raises the TypeError
        return ext_id in self._done

    def get(self, ext_id: Any) -> Any:
        key, id_obj = self._key(ext_id)
        ext = self._done.get(key, _MISSING)  # one dict read: safe from any thread
        if ext is not _MISSING:
            return ext
        system = self._system
        if system.forked:
            raise system.fork_error()
        if get_ident() != system._tid:
            system.check_thread_alive(f"create the extension {_name(key)}")
            return self._from_thread(key, id_obj)
        return self._create(key, id_obj)

    def _from_thread(self, key: Any, id_obj: ExtensionId[Any]) -> Any:
        # A greenlet of the hub thread creates it (create() may block on gevent I/O,
        # which the hub greenlet itself may not); this thread waits on an OS lock.
        lock = allocate_lock()
        lock.acquire()
        out: list[Any] = []

        def run() -> None:
            try:
                out.append((True, self._create(key, id_obj)))
            except BaseException as e:
                out.append((False, e))
            finally:
                lock.release()

        self._system.run_in_hub_async(gevent.spawn, run)
        if not lock.acquire(True, 60.0):
            raise IllegalStateError(
                f"the hub thread of actor system {self._system.name!r} did not create the "
                f"extension {_name(key)} within 60 s"
            )
        ok, value = out[0]
        if not ok:
            raise value
        return value

    def _create(self, key: Any, id_obj: ExtensionId[Any]) -> Any:
        while True:
            ext = self._done.get(key, _MISSING)
            if ext is not _MISSING:
                return ext
            pending = self._creating.get(key)
            if pending is None:
                break
            creator, event = pending
            current = getcurrent()
            if creator is current:
                raise IllegalStateError(
                    f"the extension {_name(key)} asked for itself while being created"
                )
            if current is self._system._hub:
                raise IllegalStateError(
                    f"the extension {_name(key)} is being created by another greenlet; "
                    "the hub greenlet cannot wait for it"
                )
            event.wait()  # then look again: created, or failed (and tried again here)
        event = Event()
        self._creating[key] = (getcurrent(), event)
        try:
            for msg_type, handler in id_obj.system_messages.items():
                _register_system_message(msg_type, handler)
            ext = id_obj.create(self._system)
            self._done[key] = ext
            self._order.append((id_obj, ext))
        finally:
            del self._creating[key]
            event.set()
        _log.debug("extension %s of %r created", _name(key), self._system.name)
        return ext

    def shutdown(self, then: Callable[[], None]) -> None:
        """Run the shutdown steps (the extension created last first), then ``then``."""
        steps = list(reversed(self._order))

        def step(i: int) -> None:
            if i == len(steps):
                then()
                return
            id_obj, ext = steps[i]
            called = False

            def proceed() -> None:
                nonlocal called
                if not called:
                    called = True
                    step(i + 1)

            try:
                id_obj.shutdown(ext, proceed)
            except Exception:
                _log.exception("shutdown step of the extension %s failed", _name(id_obj))
                proceed()

        step(0)


def _name(key: Any) -> str:
    cls = key if isinstance(key, type) else type(key)
    return f"{cls.__module__}.{cls.__qualname__}"


def _register_system_message(msg_type: type, handler: Callable[[Any, Any], None]) -> None:
    from gactors import _sysmsg as sm
    from gactors._dungeon.dispatch import _SYSTEM_HANDLERS

    if not (isinstance(msg_type, type) and issubclass(msg_type, sm.SystemMessage)):
        raise TypeError(f"system_messages keys must be SystemMessage subclasses, not {msg_type!r}")
    if msg_type.__module__ == sm.__name__:
        raise TypeError(f"the handler of the core system message {msg_type.__name__} is fixed")
    known = _SYSTEM_HANDLERS.get(msg_type)
    if known is not None and known is not handler:
        raise TypeError(f"system message {msg_type.__qualname__} already has another handler")
    _SYSTEM_HANDLERS[msg_type] = handler
