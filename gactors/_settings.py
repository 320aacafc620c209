"""Settings of an actor system (docs/settings.md).

``ActorSystem(config=...)`` takes a mapping or the path of a TOML file with a
``[gactors]`` table; with no config, the file named by ``GACTORS_CONFIG`` is read if
that variable is set. Unknown keys and values of the wrong type raise
:class:`~gactors.ConfigError` naming the key.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Any

from gactors._duration import seconds
from gactors.exceptions import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["Settings", "load_settings"]

ENV_VAR = "GACTORS_CONFIG"


@dataclass(frozen=True)
class Settings:
    """The effective settings of an actor system. Every field has a documented default."""

    guardian_supervisor_strategy: Any = "default"
    """The ``/user`` guardian's strategy configurator: a registered name, a
    ``"package.module:Name"`` path, or the configurator class/object itself."""
    default_ask_timeout: float = 5.0
    """Seconds an ``ask`` waits when no timeout is given."""
    dispatcher_throughput: int = 100
    """Messages one actor processes before other actors get a turn."""
    stash_capacity: int | None = None
    """Most messages a ``Stash`` may hold; ``None`` means unbounded."""
    log_dead_letters: int = 10
    """How many dead letters are logged before logging goes quiet (0: none)."""
    log_dead_letters_during_shutdown: bool = False
    """Whether dead letters are logged while the system terminates."""
    debug_lifecycle: bool = False
    """Log (DEBUG) and publish every actor start, restart and stop."""
    blocking_threshold: float | None = None
    """Seconds an actor may block the hub before ``HubBlocked`` is published; None: off."""
    shutdown_timeout: float = 10.0
    """Seconds the context manager (and integrations) wait for termination."""
    extension_tables: Mapping[str, Any] = field(default_factory=dict)
    """The settings tables of extensions (``ExtensionId.settings_key`` -> what the
    extension's ``validate_settings`` made of its table), in the order of the config:
    the ``cluster`` table (docs/cluster/operations.md) is one of them."""


def _number(key: str, value: Any, *, allow_none: bool = False, allow_zero: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise ConfigError(
            f"setting {key!r} must be a number of seconds{' or None' if allow_none else ''}, "
            f"not {type(value).__name__} {value!r}"
        )
    # The rule of every timeout gactors takes (``ask(timeout=...)`` and the rest): a
    # setting is a default for those, so a value they would refuse (NaN, infinite, too
    # large to arm a timer with) is refused here, at creation, rather than at first use.
    try:
        return seconds(value, f"setting {key!r}", zero_ok=allow_zero)
    except ValueError as e:
        raise ConfigError(str(e)) from None


MIN_BLOCKING_THRESHOLD = 0.01
"""Seconds: the smallest ``blocking_threshold``. Blocks are timed within a resolution of
a quarter of the threshold (at least 2 ms) plus the interpreter's switch interval (5 ms)
for code that holds the GIL (gactors/_monitor.py): below 10 ms that resolution would be
larger than the threshold itself, and a setting that promises what the detection cannot
see is refused rather than silently missing blocks."""


def _blocking_threshold(key: str, value: Any) -> Any:
    threshold = _number(key, value, allow_none=True)
    if threshold is not None and threshold < MIN_BLOCKING_THRESHOLD:
        raise ConfigError(
            f"setting {key!r} must be at least {MIN_BLOCKING_THRESHOLD} s: {value!r} "
            "(shorter blocks cannot be told from the interpreter's own thread switches; "
            "see the resolution in docs/settings.md)"
        )
    return threshold


def _int(key: str, value: Any, minimum: int, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"setting {key!r} must be an int, not {type(value).__name__} {value!r}")
    if value < minimum:
        raise ConfigError(f"setting {key!r} must be >= {minimum}: {value!r}")
    return value


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"setting {key!r} must be a bool, not {type(value).__name__} {value!r}")
    return value


def _strategy_ref(key: str, value: Any) -> Any:
    if isinstance(value, str):
        if not value:
            raise ConfigError(f"setting {key!r} must not be empty")
        return value
    if value is None:
        raise ConfigError(f"setting {key!r} must name a configurator, not None")
    return value


_VALIDATORS: dict[str, Callable[[str, Any], Any]] = {
    "guardian_supervisor_strategy": _strategy_ref,
    "default_ask_timeout": lambda k, v: _number(k, v),
    "dispatcher_throughput": lambda k, v: _int(k, v, 1),
    "stash_capacity": lambda k, v: _int(k, v, 0, allow_none=True),
    "log_dead_letters": lambda k, v: _int(k, v, 0),
    "log_dead_letters_during_shutdown": _bool,
    "debug_lifecycle": _bool,
    "blocking_threshold": _blocking_threshold,
    "shutdown_timeout": lambda k, v: _number(k, v, allow_zero=True),
}
assert set(_VALIDATORS) == {f.name for f in fields(Settings)} - {"extension_tables"}
CORE_KEYS: frozenset[str] = frozenset(_VALIDATORS)
"""The keys of the actor system's own settings (no extension may claim one)."""


def unknown_key_message(key: object, known: Iterable[str], prefix: str = "") -> str:
    """The error for an unknown setting ``key``: a "did you mean" for a near miss.

    ``prefix`` is prepended to the names shown (``"cluster."`` for the cluster table).
    """
    names = sorted(known)
    hint = ""
    if isinstance(key, str):
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
        if close:
            hint = f"; did you mean {prefix + close[0]!r}?"
    listed = ", ".join(prefix + n for n in names)
    shown = prefix + key if isinstance(key, str) else key
    return f"unknown setting {shown!r}{hint} (known settings: {listed})"


def _read_toml(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config file {os.fspath(path)!r}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {os.fspath(path)!r} is not valid TOML: {e}") from e
    table = data.get("gactors")
    if not isinstance(table, dict):
        raise ConfigError(f"config file {os.fspath(path)!r} has no [gactors] table")
    return table


def load_settings(
    config: Mapping[str, Any] | str | os.PathLike[str] | None,
    extension_table: Callable[[str, Any], Any] | None = None,
) -> Settings:
    """Validate ``config`` into :class:`Settings` (see the module docstring).

    A key that is not one of the system's own goes to ``extension_table(key, value)``
    (the actor system passes ``gactors._extension.validate_table``): it returns what
    the owning extension made of the table, or raises :class:`ConfigError`. Without
    it, such a key is unknown.
    """
    if config is None:
        env = os.environ.get(ENV_VAR)
        config = _read_toml(env) if env else {}
    elif isinstance(config, (str, os.PathLike)):
        config = _read_toml(config)
    elif isinstance(config, Settings):
        return config
    elif not isinstance(config, Mapping):
        raise ConfigError(
            f"config must be a mapping or the path of a TOML file, not {type(config).__name__}"
        )
    values: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    for key, value in config.items():
        validator = _VALIDATORS.get(key)
        if validator is not None:
            values[key] = validator(key, value)
        elif extension_table is not None and isinstance(key, str):
            # The settings table of an extension, if one claims it.
            tables[key] = extension_table(key, value)
        else:
            raise unknown_setting(key)
    return Settings(**values, extension_tables=tables)


def unknown_setting(key: Any, tables: str = "") -> ConfigError:
    """The error of a key no one owns (``tables``: the extension tables known), with
    a "did you mean" for a near miss of a core key or an extension table."""
    extra = tables.split(", ") if tables and tables != "none" else []
    hint = ""
    if isinstance(key, str):
        close = difflib.get_close_matches(key, [*_VALIDATORS, *extra], n=1, cutoff=0.75)
        if close:
            hint = f"; did you mean {close[0]!r}?"
    known = ", ".join(sorted(_VALIDATORS))
    also = f"; extension tables: {tables}" if tables else ""
    return ConfigError(f"unknown setting {key!r}{hint} (known settings: {known}{also})")
