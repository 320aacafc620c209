"""``ActorContext``: what an actor may do to itself and its surroundings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gactors._cell import ActorCell
    from gactors._props import Props
    from gactors._ref import ActorRef
    from gactors._system import ActorSystem

__all__ = ["ActorContext"]


# Lazy hooks of the layers above the core (the core imports none of them): the
# reminders extension puts "reminders" here when it is imported.
_hooks: dict[str, Any] = {}


class ActorContext:
    """The view of an actor onto its cell: children, watching, behavior, timeouts.

    Use it only from inside the actor (``self.context``), never from other greenlets.
    """

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    # -- children -----------------------------------------------------------------------------
    def actor_of(self, props: Props, name: str | None = None) -> ActorRef:
        """Create a child actor; returns its ref at once."""
        return self._cell.attach_child(props, name)

    def stop(self, ref: ActorRef) -> None:
        """Stop ``ref`` (a child or this actor): its current message finishes, the rest
        of its mailbox goes to dead letters.

        Raises :class:`ValueError` for a ref of another actor system and for the
        guardians (``/user``, ``/system``): ``system.terminate()`` ends a system.
        """
        cell = self._cell
        # An actor may always stop itself and its children: that is how the guardians
        # stop (the root stops /user and /system when they fail).
        if ref is not cell.ref and cell.child_cell_of(ref) is None:
            cell.system.check_stoppable(ref)
        cell.stop_ref(ref)

    @property
    def children(self) -> tuple[ActorRef, ...]:
        """The live children (including those still stopping)."""
        return self._cell.children

    def child(self, name: str) -> ActorRef | None:
        """The child called ``name``, or None."""
        return self._cell.child_by_name(name)

    @property
    def parent(self) -> ActorRef:
        """The supervising parent."""
        return self._cell.parent

    @property
    def self(self) -> ActorRef:
        """This actor's ref."""
        return self._cell.ref

    @property
    def system(self) -> ActorSystem:
        """The actor system."""
        return self._cell.system

    @property
    def props(self) -> Props:
        """The props this actor was created from."""
        return self._cell.props

    @property
    def sender(self) -> ActorRef:
        """The sender of the current message (``system.dead_letters`` if none)."""
        s = self._cell.sender
        return s if s is not None else self._cell.system.dead_letters

    @property
    def reminders(self) -> Any:
        """This actor's durable reminders (``gactors.reminders``, SPEC section 20): a
        sharded entity's, a singleton's, or (single process, SQLite store) this actor
        path's; ``register(name, message, due=..., period=None, misfire="once")``,
        ``unregister(name)``, ``names()``. Resolved when asked (nothing on the hot path)."""
        hook = _hooks.get("reminders")
        if hook is None:
            from gactors.exceptions import IllegalStateError

            raise IllegalStateError(
                "self.context.reminders needs gactors.reminders: import it (or create "
                "Reminders(system), or give the system a 'reminders' settings table)"
            )
        return hook(self)

    # -- cluster sharding ---------------------------------------------------------------------
    @property
    def entity_id(self) -> str | None:
        """The entity id of a sharded entity (``gactors.cluster.ClusterSharding``);
        None for any other actor."""
        # Entities are built from props carrying these two attributes; other actors
        # pay nothing for the feature.
        return getattr(self._cell.props, "entity_id", None)

    @property
    def fencing_token(self) -> int | None:
        """The fencing token of the lease under which this sharded entity runs (pass it
        to your database so writes of a stale incarnation are refused); None for any
        other actor."""
        return getattr(self._cell.props, "fencing_token", None)

    # -- death watch --------------------------------------------------------------------------
    def watch(self, ref: ActorRef) -> ActorRef:
        """Receive ``Terminated(ref)`` once ``ref`` stops (also if already dead)."""
        return self._cell.watch(ref, None)

    def watch_with(self, ref: ActorRef, message: Any) -> ActorRef:
        """Like :meth:`watch` but deliver ``message`` instead of ``Terminated``."""
        if message is None:
            from gactors.exceptions import InvalidMessageException

            raise InvalidMessageException("watch_with needs a message, not None")
        return self._cell.watch(ref, message)

    def unwatch(self, ref: ActorRef) -> ActorRef:
        """Stop watching ``ref``; a ``Terminated`` already queued is dropped."""
        return self._cell.unwatch(ref)

    # -- behavior -----------------------------------------------------------------------------
    def become(self, behavior: Callable[[Any], Any], discard_old: bool = True) -> None:
        """Handle the next messages with ``behavior`` (a callable taking the message)."""
        self._cell.become(behavior, discard_old)

    def unbecome(self) -> None:
        """Go back to the previous behavior."""
        self._cell.unbecome()

    # -- receive timeout ------------------------------------------------------------------------
    def set_receive_timeout(self, timeout: float | None) -> None:
        """Send ``ReceiveTimeout`` after ``timeout`` idle seconds (None: off)."""
        self._cell.set_receive_timeout(timeout)

    @property
    def receive_timeout(self) -> float | None:
        """The current receive timeout in seconds, or None."""
        return self._cell.receive_timeout

    def __repr__(self) -> str:
        return f"<ActorContext {self._cell.path}>"
