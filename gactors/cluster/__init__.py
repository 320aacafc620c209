"""gactors.cluster: actor systems in several processes, on Redis (SPEC section 17)."""

from __future__ import annotations

from gactors.cluster._serialization import register_message
from gactors.exceptions import ActorNotFound, ClusterError, RemoteError, SerializationError

__all__ = ["ActorNotFound", "ClusterError", "RemoteError", "SerializationError", "register_message"]
