"""The ``cluster`` settings table (docs/cluster/operations.md).

Loaded lazily (by ``ClusterNodeExtension.validate_settings``) only when a system's
config has a ``cluster`` table. Unknown keys and values of the wrong type raise
:class:`~gactors.ConfigError` naming the key as ``cluster.<key>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from gactors.exceptions import ConfigError

__all__ = ["ClusterSettings", "load_cluster_settings"]

_PREFIX_RE = re.compile(r"[A-Za-z0-9_.:-]+")


@dataclass(frozen=True)
class ClusterSettings:
    """The effective settings of a cluster node."""

    url: str
    """The Redis URL (``redis://``, ``rediss://``, ``unix://``); required."""
    roles: tuple[str, ...] = ()
    """The roles of this node (part 2 places singletons and shards by role)."""
    heartbeat_interval: float = 1.0
    """Seconds between two heartbeats of this node."""
    unreachable_after: float = 5.0
    """Seconds without a heartbeat after which a node is unreachable."""
    down_after: float = 10.0
    """Seconds without a heartbeat after which a node is downed and removed."""
    serializer: Any = "msgpack"
    """The serializer of outgoing messages: a registered name, a reference or an object."""
    max_message_size: int = 4 * 1024 * 1024
    """The largest serialized message in bytes, enforced when sending and receiving."""
    key_prefix: str = "gactors"
    """The prefix of every Redis key of the cluster (several deployments on one server)."""
    lease_ttl: float = 10.0
    """Seconds a singleton's or shard's lease lasts without renewal (renewed every third
    of it). After a crash, the next node starts the singleton/shard once it expired.
    At least ``3 * heartbeat_interval`` (the default is raised to that)."""
    inbox_max_unread: int = 10_000
    """How many unread entries a node's inbox may hold before senders dead-letter new
    messages to it (with a warning) instead of appending: a reader that fell behind is
    never overrun, and nothing is trimmed unread. An entry is one flush of one sender
    (one or many messages); see docs/cluster/operations.md for sizing."""

    def __repr__(self) -> str:
        # The URL may hold a password: never shown.
        from gactors.cluster._redis import mask_url

        return (
            f"ClusterSettings(url={mask_url(self.url)!r}, roles={self.roles!r}, "
            f"heartbeat_interval={self.heartbeat_interval}, "
            f"unreachable_after={self.unreachable_after}, down_after={self.down_after}, "
            f"serializer={self.serializer!r}, max_message_size={self.max_message_size}, "
            f"key_prefix={self.key_prefix!r}, lease_ttl={self.lease_ttl}, "
            f"inbox_max_unread={self.inbox_max_unread})"
        )


def _url(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"setting {key!r} must be a str, not {type(value).__name__}")
    # redis+sentinel:// names a Sentinel-managed master, redis+cluster:// a Redis
    # Cluster (see the operations docs).
    schemes = ("redis://", "rediss://", "unix://", "redis+sentinel://", "redis+cluster://")
    if not value.startswith(schemes):
        raise ConfigError(
            f"setting {key!r} must start with redis://, rediss://, unix://, "
            "redis+sentinel:// or redis+cluster://"
        )
    return value


def _roles(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ConfigError(
            f"setting {key!r} must be a list of str, not {type(value).__name__} {value!r}"
        )
    for r in value:
        if not isinstance(r, str) or not r:
            raise ConfigError(f"setting {key!r} must hold non-empty str, not {r!r}")
    return tuple(value)


def _seconds(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"setting {key!r} must be a number of seconds, not {type(value).__name__} {value!r}"
        )
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"setting {key!r} must be a finite number > 0: {value!r}")
    return float(value)


def _size(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"setting {key!r} must be an int (bytes), not {type(value).__name__} {value!r}"
        )
    if value < 1024:
        raise ConfigError(f"setting {key!r} must be >= 1024 bytes: {value!r}")
    return value


def _count(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"setting {key!r} must be an int >= 1, not {value!r}")
    return value


def _serializer(key: str, value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value):
        raise ConfigError(f"setting {key!r} must name a serializer, not {value!r}")
    return value


def _prefix(key: str, value: Any) -> str:
    if not isinstance(value, str) or not _PREFIX_RE.fullmatch(value):
        raise ConfigError(f"setting {key!r} must match [A-Za-z0-9_.:-]+, not {value!r}")
    return value


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "url": _url,
    "roles": _roles,
    "heartbeat_interval": _seconds,
    "unreachable_after": _seconds,
    "down_after": _seconds,
    "serializer": _serializer,
    "max_message_size": _size,
    "key_prefix": _prefix,
    "lease_ttl": _seconds,
    "inbox_max_unread": _count,
}
assert set(_VALIDATORS) == {f.name for f in fields(ClusterSettings)}


def load_cluster_settings(table: Any) -> ClusterSettings:
    """Validate the ``cluster`` table into :class:`ClusterSettings`."""
    if isinstance(table, ClusterSettings):
        return table
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"setting 'cluster' must be a table (mapping), not {type(table).__name__}"
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        validator = _VALIDATORS.get(key)
        if validator is None:
            known = ", ".join(sorted(_VALIDATORS))
            raise ConfigError(f"unknown setting 'cluster.{key}' (known settings: {known})")
        values[key] = validator(f"cluster.{key}", value)
    if "url" not in values:
        raise ConfigError("setting 'cluster.url' is required (e.g. 'redis://127.0.0.1:6379/0')")
    s = ClusterSettings(**values)
    if not s.heartbeat_interval < s.unreachable_after < s.down_after:
        raise ConfigError(
            "settings 'cluster.heartbeat_interval' < 'cluster.unreachable_after' < "
            f"'cluster.down_after' must hold: {s.heartbeat_interval} < "
            f"{s.unreachable_after} < {s.down_after}"
        )
    if "lease_ttl" not in values and s.lease_ttl < 3 * s.heartbeat_interval:
        # The default follows a slow heartbeat instead of refusing it.
        s = replace(s, lease_ttl=3 * s.heartbeat_interval)
    if s.lease_ttl < 3 * s.heartbeat_interval or s.lease_ttl < 0.3:
        # Renewals every lease_ttl/3 must fit several round trips, and the lease must
        # outlive a heartbeat or two of a node that is merely slow.
        raise ConfigError(
            "setting 'cluster.lease_ttl' must be >= 3 * 'cluster.heartbeat_interval' and "
            f">= 0.3 s: {s.lease_ttl} (heartbeat_interval {s.heartbeat_interval})"
        )
    return s
