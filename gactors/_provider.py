"""The ref provider: what makes refs to actors of other nodes (Akka's ``ActorRefProvider``).

The actor system itself only knows local actors. A system whose settings install an
extension that ``provides_refs`` (the cluster) gets that extension's object as its
:class:`RefProvider`: its ``node_id`` is the node part of the system's address, the
system starts it once the guardians exist, and :class:`~gactors.ActorSelection`
reaches other nodes' paths through ``remote_ref``. Every other system has
:data:`LOCAL_PROVIDER`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The protocol lives with the other protocols of the internal API (gactors/_spi.py),
# which SystemSPI types `provider` with; re-exported here, where it is documented.
from gactors._spi import RefProvider
from gactors.exceptions import IllegalStateError

if TYPE_CHECKING:
    from gactors._path import ActorPath
    from gactors._ref import ActorRef

__all__ = ["LOCAL_PROVIDER", "LocalRefProvider", "RefProvider"]


class LocalRefProvider:
    """The provider of a system that is not a node of anything: local refs only."""

    __slots__ = ()

    node_id: str | None = None

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def remote_ref(self, path: ActorPath, uid: int) -> ActorRef:
        raise IllegalStateError(f"{path} is another node's path, and this system is no node")


LOCAL_PROVIDER: RefProvider = LocalRefProvider()
