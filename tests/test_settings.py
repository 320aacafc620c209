"""Settings (SPEC section 12): a mapping, a TOML file, GACTORS_CONFIG; clear errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from _inputs import NAN

from gactors import ActorSystem, ConfigError, PluginError, Settings
from gactors._settings import ENV_VAR, load_settings

DEFAULTS = {
    "guardian_supervisor_strategy": "default",
    "default_ask_timeout": 5.0,
    "dispatcher_throughput": 100,
    "stash_capacity": None,
    "log_dead_letters": 10,
    "log_dead_letters_during_shutdown": False,
    "debug_lifecycle": False,
    "blocking_threshold": None,
    "shutdown_timeout": 10.0,
    "extension_tables": {},
}


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's own GACTORS_CONFIG must not leak into these tests."""
    monkeypatch.delenv(ENV_VAR, raising=False)


def write_toml(tmp_path: Path, text: str, name: str = "gactors.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    s = load_settings(None)
    assert dataclasses.asdict(s) == DEFAULTS
    assert load_settings({}) == s
    assert Settings() == s


def test_mapping() -> None:
    s = load_settings(
        {
            "default_ask_timeout": 2,
            "dispatcher_throughput": 5,
            "stash_capacity": 100,
            "log_dead_letters": 0,
            "log_dead_letters_during_shutdown": True,
            "debug_lifecycle": True,
            "blocking_threshold": 0.5,
            "shutdown_timeout": 0,
            "guardian_supervisor_strategy": "stopping",
        }
    )
    assert s.default_ask_timeout == 2.0 and isinstance(s.default_ask_timeout, float)
    assert s.dispatcher_throughput == 5
    assert s.stash_capacity == 100
    assert s.log_dead_letters == 0
    assert s.log_dead_letters_during_shutdown is True
    assert s.debug_lifecycle is True
    assert s.blocking_threshold == 0.5
    assert s.shutdown_timeout == 0.0
    assert s.guardian_supervisor_strategy == "stopping"


def test_settings_object_passes_through() -> None:
    s = Settings(default_ask_timeout=1.0)
    assert load_settings(s) is s  # type: ignore[arg-type]


def test_toml_file(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
[gactors]
default_ask_timeout = 1.5
dispatcher_throughput = 7
guardian_supervisor_strategy = "stopping"

[other-tool]
ignored = true
""",
    )
    for given in (path, str(path)):
        s = load_settings(given)
        assert (s.default_ask_timeout, s.dispatcher_throughput) == (1.5, 7)
        assert s.guardian_supervisor_strategy == "stopping"
        assert s.shutdown_timeout == DEFAULTS["shutdown_timeout"]


def test_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_toml(tmp_path, "[gactors]\ndefault_ask_timeout = 0.25\n")
    monkeypatch.setenv(ENV_VAR, str(path))
    assert load_settings(None).default_ask_timeout == 0.25
    # An explicit config wins over the environment.
    assert load_settings({}).default_ask_timeout == DEFAULTS["default_ask_timeout"]
    assert load_settings({"default_ask_timeout": 3}).default_ask_timeout == 3.0


def test_environment_variable_reaches_the_actor_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_toml(tmp_path, "[gactors]\ndefault_ask_timeout = 0.25\ndebug_lifecycle = true\n")
    monkeypatch.setenv(ENV_VAR, str(path))
    with ActorSystem("settings-env") as system:
        assert system.settings.default_ask_timeout == 0.25
        assert system.settings.debug_lifecycle is True


def test_actor_system_takes_a_mapping_and_a_path(tmp_path: Path) -> None:
    with ActorSystem("settings-map", config={"dispatcher_throughput": 3}) as system:
        assert system.settings.dispatcher_throughput == 3
    path = write_toml(tmp_path, "[gactors]\nshutdown_timeout = 4\n")
    with ActorSystem("settings-path", config=str(path)) as system:
        assert system.settings.shutdown_timeout == 4.0


def test_environment_variable_naming_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(None)
    with pytest.raises(ConfigError, match=r"missing\.toml"):
        ActorSystem("settings-bad-env")


def test_unknown_key_names_the_key_and_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({"dispatcher_througput": 10})
    text = str(info.value)
    assert "'dispatcher_througput'" in text
    for key in DEFAULTS.keys() - {"extension_tables"}:
        assert key in text


def test_unknown_key_in_a_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[gactors]\nask_timeout = 1\n")
    with pytest.raises(ConfigError, match="'ask_timeout'"):
        load_settings(path)
    with pytest.raises(ConfigError, match="'ask_timeout'"):
        ActorSystem("settings-unknown", config=path)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("default_ask_timeout", "5"),
        ("default_ask_timeout", True),
        ("default_ask_timeout", None),
        ("default_ask_timeout", 0),
        ("default_ask_timeout", -1.0),
        ("dispatcher_throughput", 1.5),
        ("dispatcher_throughput", "100"),
        ("dispatcher_throughput", 0),
        ("dispatcher_throughput", True),
        ("stash_capacity", -1),
        ("stash_capacity", 2.0),
        ("log_dead_letters", None),
        ("log_dead_letters", -3),
        ("log_dead_letters_during_shutdown", 1),
        ("log_dead_letters_during_shutdown", "yes"),
        ("debug_lifecycle", None),
        ("blocking_threshold", "0.1"),
        ("blocking_threshold", 0),
        ("shutdown_timeout", -1),
        ("shutdown_timeout", None),
        ("guardian_supervisor_strategy", ""),
        ("guardian_supervisor_strategy", None),
    ],
)
def test_wrong_values_name_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'"):
        load_settings({key: value})


def test_wrong_type_in_a_file_names_the_key(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[gactors]\ndispatcher_throughput = "many"\n')
    with pytest.raises(ConfigError, match="'dispatcher_throughput'"):
        load_settings(path)


def test_none_where_allowed() -> None:
    s = load_settings({"stash_capacity": None, "blocking_threshold": None})
    assert s.stash_capacity is None and s.blocking_threshold is None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[other]\nx = 1\n", "no [gactors] table"),
        ("gactors = 3\n", "no [gactors] table"),
        ("[gactors\n", "not valid TOML"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, fragment: str) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "nope.toml")


def test_config_of_the_wrong_type() -> None:
    with pytest.raises(ConfigError, match="mapping or the path of a TOML file"):
        load_settings(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="mapping or the path"):
        ActorSystem("settings-type", config=[("debug_lifecycle", True)])  # type: ignore[arg-type]


def test_plugin_names_are_resolved_when_the_system_is_created(tmp_path: Path) -> None:
    # The settings layer only checks the type; the name is resolved by ActorSystem.
    assert load_settings({"guardian_supervisor_strategy": "nope"}).guardian_supervisor_strategy
    path = write_toml(tmp_path, '[gactors]\nguardian_supervisor_strategy = "nope"\n')
    with pytest.raises(PluginError, match=r"guardian_supervisor_strategy.*'nope'.*'default'"):
        ActorSystem("settings-plugin", config=path)


def test_settings_are_immutable() -> None:
    s = load_settings({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.default_ask_timeout = 1.0  # type: ignore[misc]


# -- bad inputs (issue 8: what this API must refuse; nothing may hang) -----------------------------
@pytest.mark.parametrize(
    ("config", "match"),
    [
        ([("default_ask_timeout", 1)], "mapping"),
        ({"no_such_setting": 1}, "unknown setting 'no_such_setting'"),
        ({"default_ask_timeout": "5"}, "'default_ask_timeout'"),
        ({"default_ask_timeout": 0}, "'default_ask_timeout'"),
        ({"default_ask_timeout": NAN}, "'default_ask_timeout'"),
        ({"default_ask_timeout": True}, "'default_ask_timeout'"),
        ({"dispatcher_throughput": 0}, "'dispatcher_throughput'"),
        ({"dispatcher_throughput": 1.5}, "'dispatcher_throughput'"),
        ({"log_dead_letters": -1}, "'log_dead_letters'"),
        ({"debug_lifecycle": "yes"}, "'debug_lifecycle'"),
        ({"stash_capacity": -1}, "'stash_capacity'"),
        ({"blocking_threshold": -1.0}, "'blocking_threshold'"),
        ({"shutdown_timeout": NAN}, "'shutdown_timeout'"),
        # issue 29: the rule of ask(timeout=...): nothing infinite or too large to arm
        ({"default_ask_timeout": float("inf")}, "'default_ask_timeout' is too large"),
        ({"default_ask_timeout": 1e308}, "'default_ask_timeout' is too large"),
        ({"shutdown_timeout": 10**400}, "'shutdown_timeout' is too large"),
        ({"blocking_threshold": float("inf")}, "'blocking_threshold' is too large"),
        # issue 29: below the detection's resolution, refused rather than missed
        ({"blocking_threshold": 0.005}, r"'blocking_threshold' must be at least 0\.01 s"),
        ({"blocking_threshold": 1e-9}, r"'blocking_threshold' must be at least 0\.01 s"),
        ({"guardian_supervisor_strategy": None}, "'guardian_supervisor_strategy'"),
        ({"guardian_supervisor_strategy": ""}, "'guardian_supervisor_strategy'"),
    ],
)
def test_invalid_settings_raise_config_error_naming_the_key(config: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ActorSystem("bad", config=config)


def test_invalid_config_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        ActorSystem("bad", config=tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[gactors\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        ActorSystem("bad", config=broken)
    other = tmp_path / "other.toml"
    other.write_text("[other]\nx = 1\n")
    with pytest.raises(ConfigError, match=r"no \[gactors\] table"):
        ActorSystem("bad", config=other)
    monkeypatch.setenv("GACTORS_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="cannot read config file"):
        ActorSystem("bad")


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("default_ask_timout", "default_ask_timeout"),
        ("blocking_treshold", "blocking_threshold"),
        ("dispatcher-throughput", "dispatcher_throughput"),
        ("Shutdown_Timeout", "shutdown_timeout"),
    ],
)
def test_a_near_miss_key_gets_a_did_you_mean(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown setting '{key}'; did you mean '{suggestion}'"):
        ActorSystem("bad", config={key: 1.0})


def test_an_unknown_key_far_from_any_gets_no_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        ActorSystem("bad", config={"frobnicate": 1})
    assert "did you mean" not in str(info.value)
    assert "known settings: blocking_threshold" in str(info.value)
