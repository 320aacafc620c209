"""The plugin interfaces (zope.interface).

A plugin provides one of these; gactors verifies it with ``zope.interface.verify``
when it is registered. Built-in classes declare them with ``@implementer``.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface

__all__ = ["IBackoffPolicy", "ISupervisorStrategy", "ISupervisorStrategyConfigurator"]


class ISupervisorStrategy(Interface):
    """How a supervisor handles the failures of its children."""

    decider = Attribute("Callable (exception) -> Directive | None (None escalates).")

    def handle_failure(context, child, cause, stats, children):  # type: ignore[no-untyped-def]
        """Decide and act on a child's failure; return False to escalate."""

    def handle_child_terminated(context, child, children):  # type: ignore[no-untyped-def]
        """Called after a child terminated."""


class ISupervisorStrategyConfigurator(Interface):
    """Creates the ``/user`` guardian's strategy."""

    def create():  # type: ignore[misc]
        """Return an ISupervisorStrategy."""


class IBackoffPolicy(Interface):
    """Computes the delays of a backoff supervisor."""

    def next_delay(restart_count):  # type: ignore[no-untyped-def]
        """Seconds to wait before restart number ``restart_count`` (0-based)."""

    def reset():  # type: ignore[misc]
        """Forget any state (called when the backoff is reset)."""
