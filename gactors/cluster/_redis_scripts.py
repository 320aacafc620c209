"""The cluster's Lua scripts (a Redis seam module: one of the few that import
``redis``).

The scripts are package data, ``gactors/cluster/lua/*.lua`` (each file says its keys,
arguments and reply), read once at import. The membership scripts share
``membership.lua`` (the view, tombstone trimming and removal), prepended to each;
its ``ARGV_VIEW_REMOVED`` names the argument that says how many tombstones a view
lists. Every decision about membership is taken inside one script that reads the
server's ``TIME`` (see ``_redis.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

import redis
from redis.exceptions import NoScriptError

__all__ = ["SCRIPTS", "lua_source"]


def lua_source(name: str) -> str:
    """The text of ``gactors/cluster/lua/<name>.lua`` (package data)."""
    return (
        resources.files("gactors.cluster")
        .joinpath("lua")
        .joinpath(f"{name}.lua")
        .read_text(encoding="utf-8")
    )


def _membership_script(name: str, view_removed: str) -> str:
    """``membership.lua`` (with ``view_removed`` as the view's tombstone count)
    followed by ``<name>.lua``."""
    return lua_source("membership").replace("ARGV_VIEW_REMOVED", view_removed) + lua_source(name)


def _alloc_script(name: str) -> str:
    """``alloc.lua`` (the allocation table's helpers) followed by ``<name>.lua``."""
    return lua_source("alloc") + lua_source(name)


def _execute(target: Any, *args: Any) -> Any:
    """``target.execute_command(*args)`` (a client or a pipeline)."""
    # redis-py leaves execute_command unannotated.
    return target.execute_command(*args)


class _Script:
    """A Lua script run with EVALSHA, loaded on the first NOSCRIPT (after a restart
    or a ``SCRIPT FLUSH`` the server forgets scripts)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def run(self, client: redis.Redis, keys: Sequence[str], args: Sequence[Any]) -> Any:
        try:
            return _execute(client, "EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return _execute(client, "EVAL", self.source, len(keys), *keys, *args)


_JOIN = _Script(_membership_script("join", "ARGV[4]"))
_HEARTBEAT = _Script(_membership_script("heartbeat", "ARGV[5]"))
_VIEW = _Script(_membership_script("view", "ARGV[1]"))
_SET_LEAVING = _Script(_membership_script("set_leaving", "1"))
_REMOVE = _Script(_membership_script("remove", "1"))
_ACQUIRE = _Script(lua_source("acquire"))
_RENEW = _Script(lua_source("renew"))
_RELEASE = _Script(lua_source("release"))
_HOLDER = _Script(lua_source("holder"))
_INBOX_OPEN = _Script(lua_source("inbox_open"))
_SEND = _Script(lua_source("send"))
_INBOX_DRAIN = _Script(lua_source("inbox_drain"))
_ALLOC_SYNC = _Script(_alloc_script("alloc_sync"))
_ALLOC_REGISTER = _Script(_alloc_script("alloc_register"))
_ALLOC_UNREGISTER = _Script(_alloc_script("alloc_unregister"))
_ALLOC_PLAN = _Script(_alloc_script("alloc_plan"))
_ALLOC_ACK = _Script(_alloc_script("alloc_ack"))
_ALLOC_STREAM_ADD = _Script(lua_source("alloc_stream_add"))
_ALLOC_STREAM_TAKE = _Script(lua_source("alloc_stream_take"))

#: Every script of the cluster by name (the tests load each one into a server).
SCRIPTS: dict[str, _Script] = {
    "join": _JOIN,
    "heartbeat": _HEARTBEAT,
    "view": _VIEW,
    "set_leaving": _SET_LEAVING,
    "remove": _REMOVE,
    "acquire": _ACQUIRE,
    "renew": _RENEW,
    "release": _RELEASE,
    "holder": _HOLDER,
    "inbox_open": _INBOX_OPEN,
    "send": _SEND,
    "inbox_drain": _INBOX_DRAIN,
    "alloc_sync": _ALLOC_SYNC,
    "alloc_register": _ALLOC_REGISTER,
    "alloc_unregister": _ALLOC_UNREGISTER,
    "alloc_plan": _ALLOC_PLAN,
    "alloc_ack": _ALLOC_ACK,
    "alloc_stream_add": _ALLOC_STREAM_ADD,
    "alloc_stream_take": _ALLOC_STREAM_TAKE,
}
