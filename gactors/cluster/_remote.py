"""Refs to actors of other nodes (docs/cluster/concepts.md, "Addresses and paths").

A :class:`RemoteActorRef` is a path on another node plus the actor's incarnation uid.
Telling it encodes the message at once (a :class:`~gactors.SerializationError` reaches
the caller and nothing is sent) and hands the record to the node's outbound batcher;
nothing touches the network in ``tell``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from gactors._path import ActorPath
from gactors._ref import IMPLICIT, ActorRef, PromiseRef, _Implicit, current_sender_ref
from gactors.exceptions import InvalidMessageException

if TYPE_CHECKING:
    from gactors._sysmsg import SystemMessage
    from gactors.cluster._node import ClusterNode

__all__ = ["RemoteActorRef"]


class RemoteActorRef(ActorRef):
    """An actor of another node of the cluster; behaves like a local ref.

    Equal and hashed by path (with the address) and uid, like every ref. ``tell`` works
    from any thread; ``ask`` is :meth:`ActorRef.ask` (the reply comes back to an
    exported promise of this node).
    """

    __slots__ = ("_node", "addr", "dest", "rpath", "wire")

    def __init__(self, node: ClusterNode, path: ActorPath, uid: int, rpath: str) -> None:
        ActorRef.__init__(self, node.system, path, uid)
        self._node = node
        #: The destination node id.
        self.dest = cast(str, path.node)  # a remote path always names its node
        #: The path without the address ("/user/a"), as records carry it.
        self.rpath = rpath
        #: The address text of the destination node, as records carry it.
        self.addr = f"gactors://{path.system_name}@{path.node}"
        #: The recipient field of its records (one tuple, not one per message).
        self.wire = (rpath, uid)

    def tell(self, message: Any, sender: ActorRef | _Implicit | None = IMPLICIT) -> None:
        if message is None:
            raise InvalidMessageException(
                "None is not a valid message (use a sentinel object instead)"
            )
        snd: Any = current_sender_ref() if sender is IMPLICIT else sender
        self._node.send_user(self, message, snd)

    def _ask_from_thread(self, promise: PromiseRef, message: Any, timeout: float) -> None:
        # From a foreign thread the tell runs in the hub: an error encoding the
        # message must still reach the asker, through its future.
        promise.start(timeout)
        try:
            self.tell(message, promise)
        except Exception as e:
            promise.complete_exc(e)

    def _send_system(self, message: SystemMessage) -> None:
        self._node.send_system(self, message)

    def fail_from_target(self, exc: BaseException) -> None:
        """A local actor failed processing a message asked by another node: the remote
        promise gets ``Status.Failure`` (an unregistered exception type arrives as
        :class:`~gactors.RemoteError`)."""
        if self.rpath.startswith("/temp/"):
            self._node.send_failure(self, exc)

    def __repr__(self) -> str:
        return f"RemoteActorRef({self.path}#{self._uid})"
