"""The cluster's Lua scripts are package data (``gactors/cluster/lua/*.lua``): each one
compiles in a real server, none is left unused, and the wheel carries them all."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from gactors.cluster._redis_scripts import SCRIPTS, lua_source

ROOT = Path(__file__).resolve().parents[2]


def _lua_files() -> set[str]:
    folder = resources.files("gactors.cluster").joinpath("lua")
    return {item.name for item in folder.iterdir() if item.name.endswith(".lua")}


def test_every_script_loads_into_a_real_server(redis_url: str) -> None:
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for name, script in SCRIPTS.items():
            # SCRIPT LOAD compiles the script: a syntax error is an error reply here.
            sha = client.script_load(script.source)
            assert sha == script.sha, name
        assert all(client.script_exists(*(s.sha for s in SCRIPTS.values())))
    finally:
        client.close()


def test_every_lua_file_is_a_script_or_a_shared_part() -> None:
    assert _lua_files() == {f"{name}.lua" for name in SCRIPTS} | {"membership.lua", "alloc.lua"}
    for name in SCRIPTS:
        if name.startswith("alloc_") and not name.startswith("alloc_stream"):
            assert SCRIPTS[name].source == lua_source("alloc") + lua_source(name)
    shared = lua_source("membership")
    assert "ARGV_VIEW_REMOVED" in shared
    for name in ("join", "heartbeat", "view", "set_leaving", "remove"):
        source = SCRIPTS[name].source
        assert "ARGV_VIEW_REMOVED" not in source
        assert source.endswith(lua_source(name))


def test_an_unknown_script_name_is_a_clear_error() -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.lua"):
        lua_source("nope")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_contains_every_lua_file(tmp_path: Path) -> None:
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("not run from a source checkout")
    # A copy of what the wheel is built from, so the checkout gets no build/ folder.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "gactors", src / "gactors", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
        check=True,
        timeout=280,
    )
    (wheel,) = out.glob("gactors-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"gactors/cluster/lua/{name}" for name in _lua_files()}
    assert len(expected) == len(SCRIPTS) + 2  # the shared membership.lua and alloc.lua
    assert expected <= names, sorted(expected - names)
