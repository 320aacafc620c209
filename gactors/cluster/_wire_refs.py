"""The ref wire format of a cluster node (:class:`_WireRefs`, a part of
:class:`~gactors.cluster._node.ClusterNode`): a ref becomes ``(address, path, uid)``
on the wire and back (the ``RefCodec`` of ``_serialization.py``), and a local path
resolves to its actor, an exported ask promise or an empty ref.

``ref_to_wire`` is on the hot path of every remote tell (the sender of each message):
it keeps the last local ref it turned into a triple.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from gactors._path import ActorPath, Address
from gactors._ref import ActorRef, EmptyLocalActorRef, LocalActorRef, PromiseRef
from gactors.cluster._node_base import _NodeBase
from gactors.cluster._remote import RemoteActorRef
from gactors.cluster._serialization import WireError
from gactors.exceptions import SerializationError

# Bounds of the decode caches (cleared when full: they only save work).
_CACHE_MAX = 20_000

if TYPE_CHECKING:
    from gactors.cluster._node import ClusterNode


class _Quarantined:
    __slots__ = ()


#: What the sender cache holds for a sender of a removed node: its messages are
#: dropped as dead letters (a removed node never comes back).
_QUARANTINED = _Quarantined()


def _elements(path: str) -> tuple[str, ...]:
    if not path.startswith("/"):
        raise WireError(f"a path must start with '/': {path[:100]!r}")
    return tuple(e for e in path[1:].split("/") if e)


class _WireRefs(_NodeBase):
    """Refs to and from the wire (see the module docstring)."""

    def ref_to_wire(self, ref: ActorRef) -> tuple[str, str, int]:
        """``(address, path without address, uid)`` of ``ref``."""
        if ref is self._last_wired:
            # An actor telling many messages in a row: its triple once, not per message.
            return self._last_wire
        t = type(ref)
        if type(ref) is RemoteActorRef:  # (type() again: mypy narrows on it, not on t)
            return (ref.addr, ref.rpath, ref._uid)
        if type(ref) is PromiseRef:
            # Exported so that a reply to /temp/$uid finds it; weakly, so a forgotten
            # ask costs nothing (a late reply is a dead letter).
            uid = ref._uid
            self._exported[uid] = ref
            return (self.address_str, f"/temp/${uid}", uid)
        if ref._system is not self.system:
            raise SerializationError(
                f"a ref of another actor system ({ref._system.name!r}) cannot be sent: {ref!r}"
            )
        wire = (self.address_str, ref.path.path_str, ref._uid)
        if t is LocalActorRef:
            self._last_wired, self._last_wire = ref, wire
        return wire

    def ref_from_wire(self, address: str, path: str, uid: int) -> ActorRef:
        """The ref a wire triple stands for on this node."""
        if address == self.address_str:
            return self._resolve_local(path, uid)
        key = (address, path, uid)
        ref = self._remote_refs.get(key)
        if ref is not None and ref is not _QUARANTINED:
            remote: RemoteActorRef = ref  # (not None, not quarantined: a remote ref)
            return remote
        node = self._nodes_of.get(address)
        if node is None:
            try:
                addr = Address.parse(address)
            except ValueError as e:
                raise WireError(str(e)) from None
            if addr.system != self.system.name or addr.node is None:
                raise WireError(f"a ref of another cluster: {address}")
            node = addr.node
            if len(self._nodes_of) >= 1000:
                self._nodes_of.clear()
            self._nodes_of[address] = node
        return RemoteActorRef(
            cast("ClusterNode", self),
            ActorPath(self.system.name, _elements(path), None, node),
            uid,
            path,
        )

    def remote_ref(self, path: ActorPath, uid: int) -> ActorRef:
        """A ref to ``path`` on another node (uid 0: whatever lives there)."""
        if path.node == self.node_id:
            return self._resolve_local(path.path_str, uid)
        return RemoteActorRef(cast("ClusterNode", self), path, uid, path.path_str)

    def _resolve_local(self, path: str, uid: int) -> ActorRef:
        if path.startswith("/temp/$"):
            # The reply to an ask of this node (the hot path of remote asks).
            # The uid names the promise: exported under it by ref_to_wire.
            promise = self._exported.get(uid)
            if promise is not None:
                return promise
        system = self.system
        elements = _elements(path)
        if len(elements) == 2 and elements[0] == "temp":
            promise = self._exported.get(uid)
            if promise is not None:
                return promise
        elif elements == ("deadLetters",):
            return system.dead_letters
        else:
            ref = system.resolve_local(elements, uid)
            if ref is not None:
                return ref
        return EmptyLocalActorRef(system, ActorPath(system.name, elements, None, self.node_id), uid)

    def _sender_ref(self, snd: tuple[str, str, int]) -> Any:
        address, path, uid = snd
        if address != self.address_str:
            node = address.partition("@")[2]
            if node in self._removed:
                return _QUARANTINED
        try:
            ref = self.ref_from_wire(address, path, uid)
        except WireError:
            raise
        except Exception as e:
            raise WireError(f"an unusable sender {snd!r}: {e}") from e
        if path.startswith("/temp/"):
            return ref  # an ask's promise: used once, not worth a cache entry
        if len(self._remote_refs) >= _CACHE_MAX:
            self._remote_refs.clear()
        self._remote_refs[snd] = ref
        return ref

    def _recipient(self, recipient: tuple[str, int]) -> ActorRef:
        path, uid = recipient
        ref = self._resolve_local(path, uid)
        if uid and type(ref) is LocalActorRef:
            # Only exact incarnations are cached: uid 0 is "whatever lives there now".
            if len(self._local_refs) >= _CACHE_MAX:
                self._local_refs.clear()
            self._local_refs[recipient] = ref
        return ref
