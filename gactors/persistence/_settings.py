"""The ``persistence`` settings table (docs/settings.md, SPEC section 19)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from gactors.exceptions import ConfigError, PluginError

__all__ = ["DEFAULT_PATH", "PersistenceSettings", "load_persistence_settings"]

DEFAULT_PATH = "gactors-persistence.sqlite3"


@dataclass(frozen=True)
class PersistenceSettings:
    """The effective ``persistence`` table of an actor system."""

    journal: Any = None
    """The journal plugin (a registered name, ``"package.module:Name"`` or a factory);
    None: ``"redis"`` for a cluster node, else ``"sqlite"``."""
    snapshot_store: Any = None
    """The snapshot store plugin; default as ``journal``."""
    state_store: Any = None
    """The durable state store plugin; default as ``journal``."""
    path: str = DEFAULT_PATH
    """The SQLite file (relative paths: from the working directory at system start)."""
    url: str | None = None
    """The Redis url; None: the cluster's."""
    write_timeout: float = 5.0
    """Seconds a write may take before it counts as failed (``on_persist_failure``)."""
    wait_replicas: int = 0
    """With n > 0, a Redis write is confirmed once n replicas have it (``WAIT``)."""
    max_payload_size: int = 16 * 1024 * 1024
    """The largest encoded event, snapshot or state in bytes; a larger one is rejected
    (``on_persist_rejected``)."""

    def store_ref(self, kind: str, clustered: bool) -> Any:
        """The plugin reference of ``kind`` (``"journal"``, ...) with its default."""
        ref = getattr(self, kind)
        if ref is None:
            return "redis" if clustered else "sqlite"
        return ref


def _plugin_ref(key: str, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        if not value:
            raise ConfigError(f"setting 'persistence.{key}' must not be empty")
        if ":" not in value:
            # A name: known now (built-in, registered or an entry point), else the
            # error lists the known ones where the name is given (ActorSystem(...)).
            from gactors import plugins

            known = plugins.names(cast("plugins.Kind", key))  # a store kind: a plugin kind
            if value not in known:
                raise PluginError(
                    f"setting 'persistence.{key}': unknown {key.replace('_', ' ')} "
                    f"{value!r}; known names: {', '.join(map(repr, known)) or 'none'} (or a "
                    "'package.module:Name' reference or the factory itself)"
                )
        return value
    if callable(value):
        return value
    raise ConfigError(
        f"setting 'persistence.{key}' must name a store (a registered name, "
        f"'package.module:Name' or a factory), not {type(value).__name__} {value!r}"
    )


def _str(key: str, value: Any, allow_none: bool) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, os.PathLike) and key == "path":
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"setting 'persistence.{key}' must be a non-empty str"
            f"{' or None' if allow_none else ''}, not {type(value).__name__} {value!r}"
        )
    return value


def _seconds(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"setting 'persistence.{key}' must be a number of seconds, "
            f"not {type(value).__name__} {value!r}"
        )
    if not value > 0 or math.isinf(value):
        raise ConfigError(f"setting 'persistence.{key}' must be > 0 and finite: {value!r}")
    return float(value)


def _int(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"setting 'persistence.{key}' must be an int, not {type(value).__name__} {value!r}"
        )
    if value < minimum:
        raise ConfigError(f"setting 'persistence.{key}' must be >= {minimum}: {value!r}")
    return value


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "journal": _plugin_ref,
    "snapshot_store": _plugin_ref,
    "state_store": _plugin_ref,
    "path": lambda k, v: _str(k, v, False),
    "url": lambda k, v: _str(k, v, True),
    "write_timeout": _seconds,
    "wait_replicas": lambda k, v: _int(k, v, 0),
    "max_payload_size": lambda k, v: _int(k, v, 1),
}


def load_persistence_settings(table: Any) -> PersistenceSettings:
    """Validate the ``persistence`` table (a mapping; None: every default) into
    :class:`PersistenceSettings`; an unknown key or a value of the wrong type raises
    :class:`~gactors.ConfigError` naming it."""
    if table is None:
        return PersistenceSettings()
    if isinstance(table, PersistenceSettings):
        return table
    if not isinstance(table, Mapping):
        raise ConfigError(f"setting 'persistence' must be a table, not {type(table).__name__}")
    values: dict[str, Any] = {}
    for key, value in table.items():
        validator = _VALIDATORS.get(key)
        if validator is None:
            known = ", ".join(sorted(_VALIDATORS))
            raise ConfigError(f"unknown setting 'persistence.{key}' (known: {known})")
        values[key] = validator(key, value)
    return PersistenceSettings(**values)
