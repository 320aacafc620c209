"""Which plugin kinds there are, and the verification of a plugin against its interface.

Split out of :mod:`gactors.plugins` (the registry, discovery and resolution), which
re-exports :data:`Kind` and :data:`KINDS` and calls these checks: a plugin of each kind
is verified against its public interface of :mod:`gactors.interfaces` (zope.interface's
``verifyClass``/``verifyObject``), and a failure becomes a :class:`~gactors.PluginError`
listing every reason in words.
"""

from __future__ import annotations

from typing import Any, Literal

from zope.interface import exceptions as _zope_exceptions
from zope.interface.exceptions import (
    BrokenImplementation,
    BrokenMethodImplementation,
    DoesNotImplement,
    Invalid,
)
from zope.interface.interface import InterfaceClass
from zope.interface.verify import verifyClass, verifyObject

from gactors.exceptions import PluginError
from gactors.interfaces import (
    IBackoffPolicy,
    IDurableStateStore,
    IJournal,
    ISerializer,
    ISnapshotStore,
    ISupervisorStrategy,
    ISupervisorStrategyConfigurator,
)

__all__ = [
    "INTERFACE",
    "KINDS",
    "LABEL",
    "STORE_KINDS",
    "Kind",
    "check",
    "verify",
    "verify_strategy",
]

Kind = Literal[
    "strategy",
    "configurator",
    "backoff_policy",
    "serializer",
    "journal",
    "snapshot_store",
    "state_store",
]
KINDS: tuple[Kind, ...] = (
    "strategy",
    "configurator",
    "backoff_policy",
    "serializer",
    "journal",
    "snapshot_store",
    "state_store",
)
"""The plugin kinds, as accepted by :func:`gactors.plugins.names`,
:func:`~gactors.plugins.resolve` and :func:`~gactors.plugins.unregister`."""
STORE_KINDS: tuple[Kind, ...] = ("journal", "snapshot_store", "state_store")


INTERFACE: dict[Kind, InterfaceClass] = {
    "strategy": ISupervisorStrategy,
    "configurator": ISupervisorStrategyConfigurator,
    "backoff_policy": IBackoffPolicy,
    "serializer": ISerializer,
    "journal": IJournal,
    "snapshot_store": ISnapshotStore,
    "state_store": IDurableStateStore,
}
LABEL: dict[Kind, str] = {
    "strategy": "supervisor strategy",
    "configurator": "supervisor strategy configurator",
    "backoff_policy": "backoff policy",
    "serializer": "serializer",
    "journal": "journal",
    "snapshot_store": "snapshot store",
    "state_store": "durable state store",
}


# zope.interface (>= 5) raises MultipleInvalid for several problems at once; the stubs
# of mypy-zope predate it.
MultipleInvalid: type[Invalid] = _zope_exceptions.MultipleInvalid  # type: ignore[attr-defined]


def _reasons(error: Invalid) -> list[str]:
    errors: list[BaseException] = (
        list(getattr(error, "exceptions", [error]))
        if isinstance(error, MultipleInvalid)
        else [error]
    )
    out: list[str] = []
    for e in errors:
        iface = getattr(e, "interface", None)
        iname = getattr(iface, "__name__", "the interface")
        if isinstance(e, DoesNotImplement):
            out.append(
                f"it does not declare {iname} (decorate its class with "
                f"@zope.interface.implementer({iname}))"
            )
        elif isinstance(e, BrokenMethodImplementation):
            method = getattr(e.method, "__name__", e.method)
            out.append(f"method {method!r} has the wrong signature: {e.mess}")
        elif isinstance(e, BrokenImplementation):
            what = getattr(e.name, "__name__", e.name)
            out.append(f"attribute or method {what!r} is missing")
        else:
            out.append(str(e))
    return out


def verify(iface: InterfaceClass, obj: Any, what: str, *, as_class: bool) -> None:
    try:
        if as_class:
            verifyClass(iface, obj)
        else:
            verifyObject(iface, obj)
    except Invalid as e:
        raise PluginError(
            f"{what} does not implement {iface.__name__}: " + "; ".join(_reasons(e))
        ) from e


def check(kind: Kind, obj: Any, what: str, name: str | None = None) -> None:
    """Verify a plugin object of ``kind`` to be registered as ``name`` (raises PluginError)."""
    iface = INTERFACE[kind]
    if kind in STORE_KINDS:
        if isinstance(obj, type):
            verify(iface, obj, what, as_class=True)
        elif iface.providedBy(obj) and not callable(obj):
            raise PluginError(
                f"{what} is a store instance; register a factory (settings, system) -> "
                f"{iface.__name__} instead, such as its class or a function returning it"
            )
        elif not callable(obj):
            raise PluginError(
                f"{what} is not callable: a store is registered as a factory "
                f"(settings, system) -> {iface.__name__}"
            )
        return
    if kind == "backoff_policy":
        if isinstance(obj, type):
            verify(iface, obj, what, as_class=True)
        elif IBackoffPolicy.providedBy(obj) and not callable(obj):
            raise PluginError(
                f"{what} is a backoff policy instance; register a factory "
                "(min_backoff, max_backoff, random_factor) -> IBackoffPolicy instead, "
                "such as its class"
            )
        elif not callable(obj):
            raise PluginError(
                f"{what} is not callable: a backoff policy is registered as a factory "
                "(min_backoff, max_backoff, random_factor) -> IBackoffPolicy"
            )
        # Any other callable is verified by what it returns, on its first call.
        return
    verify(iface, obj, what, as_class=isinstance(obj, type))
    if kind == "serializer":
        # The name is what identifies a payload's serializer on the wire (and what a
        # receiving node looks up): a serializer claiming another name would be
        # decoded by the wrong one.
        own = getattr(obj, "name", None)
        if not isinstance(own, str) and not isinstance(obj, type):
            raise PluginError(f"{what} has a name that is not a str: {own!r}")
        if isinstance(own, str) and name is not None and own != name:
            raise PluginError(
                f"{what} has name {own!r}: a serializer must be registered under its own name"
            )


def verify_strategy(obj: Any, what: str = "supervisor strategy") -> Any:
    """Return ``obj`` if it provides :class:`ISupervisorStrategy`, else raise PluginError."""
    verify(ISupervisorStrategy, obj, f"{what} {obj!r}", as_class=False)
    return obj
