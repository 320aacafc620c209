"""``ActorSelection``: a path looked up when a message is sent (docs/api/refs.md)."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, overload

from gactors._duration import seconds
from gactors._messages import ActorIdentity, Identify
from gactors._path import ActorPath
from gactors._ref import IMPLICIT, ActorRef, EmptyLocalActorRef, _Implicit
from gactors.exceptions import ActorNotFound, AskTimeoutError

if TYPE_CHECKING:
    from gactors._future import Future
    from gactors._spi import SystemSPI

__all__ = ["ActorSelection"]

_identify_ids = itertools.count(1)


class ActorSelection:
    """Whatever actor lives at a path, local or on another node of the cluster.

    Made by :meth:`ActorSystem.actor_selection`. Unlike a ref it names no incarnation:
    each ``tell``/``ask`` goes to the actor living at the path when the message
    arrives (on the remote node for another node's path).
    """

    __slots__ = ("_path", "_system")

    def __init__(self, system: SystemSPI, path: ActorPath) -> None:
        self._system = system
        self._path = path

    @property
    def path(self) -> ActorPath:
        """The selected path (with its address)."""
        return self._path

    def _target(self) -> ActorRef:
        system = self._system
        path = self._path
        provider = system.provider
        node_id = provider.node_id
        if path.node is not None and node_id is not None and path.node != node_id:
            return provider.remote_ref(path, 0)
        ref = system.lookup(path) if path.node is None or node_id is not None else None
        if ref is None:
            return EmptyLocalActorRef(system, path, 0)
        return ref

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        """Send ``message`` to the actor at the path (a dead letter if there is none)."""
        self._target().tell(message, sender)

    @overload
    def ask(
        self,
        message: Any,
        *,
        timeout: float | timedelta | None = None,
        block: Literal[True] = True,
    ) -> Any: ...
    @overload
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: Literal[False]
    ) -> Future[Any]: ...
    @overload
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: bool
    ) -> Any: ...
    def ask(
        self, message: Any, *, timeout: float | timedelta | None = None, block: bool = True
    ) -> Any:
        """Like :meth:`ActorRef.ask`, to the actor at the path."""
        return self._target().ask(message, timeout=timeout, block=block)

    def resolve_one(self, timeout: float | timedelta | None = None) -> ActorRef:
        """The ref of the actor at the path; :class:`ActorNotFound` if there is none
        (or, for another node, if no answer came within ``timeout``; None: the
        system's ``default_ask_timeout``)."""
        target = self._target()
        if isinstance(target, EmptyLocalActorRef):
            raise ActorNotFound(f"no actor at {self._path}")
        if target.path.node is None or target.path.node == self._system.provider.node_id:
            return target  # a local actor: resolved already
        wait = (
            self._system.settings.default_ask_timeout
            if timeout is None
            else seconds(timeout, "resolve_one timeout")
        )
        try:
            reply = target.ask(Identify(("resolve_one", next(_identify_ids))), timeout=wait)
        except AskTimeoutError:
            raise ActorNotFound(f"no actor at {self._path} answered within {wait} s") from None
        if type(reply) is not ActorIdentity or reply.ref is None:
            raise ActorNotFound(f"no actor at {self._path}")
        return reply.ref

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ActorSelection):
            return NotImplemented
        return self._path == other._path

    def __hash__(self) -> int:
        return hash(self._path)

    def __repr__(self) -> str:
        return f"ActorSelection({self._path})"
