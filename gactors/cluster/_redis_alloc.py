"""The allocation tables of sharding on Redis (a Redis seam module): the
:class:`~gactors.cluster._seam.AllocationStore` of :class:`~._redis.RedisBackend`.

Keys (``{P}`` the membership hash tag, see ``_redis.py``; every script reads the
membership keys in the same slot, so it also runs on a Redis Cluster):

==============================  ========================================================
``{P}:alloc:<type>``            HASH ``epoch``; ``n`` the number of shards (every
                                region registers with the same); ``o:<s>`` owner of
                                shard ``s``;
                                ``m:<s>`` ``"<from>|<to>"`` while it moves; ``a:<s>``
                                ``",n1,n2,"`` the regions that acked that move
``{P}:alloc:<type>:regions``    HASH node -> ``"1"`` (hosting region) / ``"0"`` (proxy)
                                / ``"-"`` (stopped, its node may still be a member)
``{P}:alloc:<type>:ho:<s>``     STREAM, shard ``s``'s hand-over messages (fields ``i``
                                serializer id, ``d`` payload), read by the new owner,
                                then deleted entry by entry (all of them when the
                                table starts anew with another number of shards)
``...:ho:<s>:tokens``           SET, the tokens of the appends taken (a retried append
                                is not appended twice); expires 10 min after the last.
                                An append is taken only while the shard moves away
                                from the node it was written for
==============================  ========================================================

The scripts are ``lua/alloc*.lua``; each one flips the moves every registered member
acked and returns the table with the membership it was read with (a read whose caller
has seen the table and the membership as they are gets ``0`` instead).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import redis

from gactors.cluster._redis_conn import _Connections
from gactors.cluster._redis_scripts import (
    _ALLOC_ACK,
    _ALLOC_PLAN,
    _ALLOC_REGISTER,
    _ALLOC_STREAM_ADD,
    _ALLOC_STREAM_TAKE,
    _ALLOC_SYNC,
    _ALLOC_UNREGISTER,
    _Script,
)
from gactors.cluster._seam import AllocationTable, ShardCountMismatch

if TYPE_CHECKING:
    from gactors.cluster._redis import RedisBackend


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _check_type(type_name: str) -> str:
    if not isinstance(type_name, str) or not type_name or "/" in type_name:
        raise ValueError(f"type_name must be a non-empty str without '/', not {type_name!r}")
    return type_name


def _check_node_name(node: str) -> str:
    if not isinstance(node, str) or not node or any(c in node for c in ",|"):
        raise ValueError(f"a node id must be a non-empty str without ',' or '|', not {node!r}")
    return node


def _count(what: str, args: Sequence[Any]) -> int:
    # The number of shards a register or plan call was made with.
    return int(args[2]) if what == "alloc register" else len(args) - 2


def parse_table(raw: Sequence[Any]) -> AllocationTable:
    """The :class:`AllocationTable` of a script's reply."""
    epoch, version, fields, regs, members, info = raw
    owners: dict[int, str] = {}
    moving: dict[int, tuple[str, str]] = {}
    for i in range(0, len(fields), 2):
        name = _text(fields[i])
        if name.startswith("o:"):
            owners[int(name[2:])] = _text(fields[i + 1])
        elif name.startswith("m:"):
            f, _, t = _text(fields[i + 1]).partition("|")
            moving[int(name[2:])] = (f, t)
    registered: dict[str, bool] = {}
    stopped: set[str] = set()
    for i in range(0, len(regs), 2):
        value = _text(regs[i + 1])
        if value == "-":
            stopped.add(_text(regs[i]))
        else:
            registered[_text(regs[i])] = value == "1"
    status: dict[str, str] = {}
    roles: dict[str, tuple[str, ...]] = {}
    for i in range(0, len(info), 2):
        node = _text(info[i])
        st, _joined, raw_roles = [*_text(info[i + 1]).split("|", 2), "", ""][:3]
        status[node] = st
        try:
            roles[node] = tuple(json.loads(raw_roles))
        except ValueError:
            roles[node] = ()
    return AllocationTable(
        epoch=int(epoch),
        version=int(version),
        owners=owners,
        moving=moving,
        registered=registered,
        members={_text(n): status.get(_text(n), "up") for n in members},
        roles={_text(n): roles.get(_text(n), ()) for n in members},
        stopped=frozenset(stopped),
    )


class _RedisAllocationStore:
    """:class:`~gactors.cluster._seam.AllocationStore` on Redis (Lua scripts under the
    membership hash tag)."""

    def __init__(self, backend: RedisBackend) -> None:
        self._backend = backend
        self._members = backend.membership_keys()
        self._conn = _Connections(backend, socket_timeout=backend.socket_timeout, max_connections=1)

    def __repr__(self) -> str:
        return f"<RedisAllocationStore of {self._backend!r}>"

    def _keys(self, type_name: str) -> tuple[str, ...]:
        members, info, version, _epoch, tomb, _reasons = self._members
        base = self._backend.alloc_key(_check_type(type_name))
        return (members, info, version, tomb, base, base + ":regions")

    def _call(self, what: str, script: _Script, type_name: str, args: Sequence[Any]) -> Any:
        keys = self._keys(type_name)

        def run(client: redis.Redis) -> Any:
            try:
                return script.run(client, keys, args)
            except redis.ResponseError as e:
                # Raised past the connection's error mapping: not the backend's fault,
                # and no retry can help.
                text = str(e)
                if text.startswith("GACTORS_SHARD_COUNT "):
                    table = int(text.split()[1])
                    raise ShardCountMismatch(type_name, table, _count(what, args)) from None
                raise

        return self._conn.call(what, run)

    def _run(self, what: str, script: _Script, type_name: str, args: Sequence[Any]) -> Any:
        return parse_table(self._call(what, script, type_name, args))

    def register(
        self, type_name: str, node: str, hosting: bool, number_of_shards: int
    ) -> AllocationTable:
        if isinstance(number_of_shards, bool) or not isinstance(number_of_shards, int):
            raise TypeError(f"number_of_shards must be an int, not {number_of_shards!r}")
        if number_of_shards < 1:
            raise ValueError(f"number_of_shards must be >= 1, not {number_of_shards}")
        args = (_check_node_name(node), "1" if hosting else "0", number_of_shards)
        result: AllocationTable = self._run("alloc register", _ALLOC_REGISTER, type_name, args)
        return result

    def unregister(self, type_name: str, node: str) -> AllocationTable:
        args = (_check_node_name(node),)
        result: AllocationTable = self._run("alloc unregister", _ALLOC_UNREGISTER, type_name, args)
        return result

    def sync(self, type_name: str, seen: tuple[int, int] | None = None) -> AllocationTable | None:
        args = ("", "") if seen is None else (int(seen[0]), int(seen[1]))
        raw = self._call("alloc sync", _ALLOC_SYNC, type_name, args)
        if raw == 0:
            return None
        return parse_table(raw)

    def plan(
        self, type_name: str, version: int, epoch: int, desired: Sequence[str]
    ) -> AllocationTable:
        for d in desired:
            if d:
                _check_node_name(d)
        args = (int(version), int(epoch), *desired)
        result: AllocationTable = self._run("alloc plan", _ALLOC_PLAN, type_name, args)
        return result

    def ack(self, type_name: str, node: str, moves: Sequence[tuple[int, str]]) -> AllocationTable:
        args: list[Any] = [_check_node_name(node)]
        for s, from_ in moves:
            args += (int(s), from_)
        result: AllocationTable = self._run("alloc ack", _ALLOC_ACK, type_name, args)
        return result

    def stream_append(
        self,
        type_name: str,
        shard: int,
        items: Sequence[tuple[int, bytes]],
        token: str,
        from_node: str,
    ) -> bool:
        if not items:
            return True
        if not isinstance(token, str) or not token:
            raise ValueError(f"an append token must be a non-empty str, not {token!r}")
        base = self._backend.alloc_key(_check_type(type_name))
        key = base + f":ho:{int(shard)}"
        keys = (key, key + ":tokens", base)
        args: list[Any] = [token, _check_node_name(from_node)]
        for sid, payload in items:
            args += (int(sid), payload)
        n = self._conn.call("alloc stream append", lambda c: _ALLOC_STREAM_ADD.run(c, keys, args))
        return int(n) >= 0

    def stream_read(self, type_name: str, shard: int) -> list[tuple[str, int, bytes]]:
        key = self._backend.alloc_key(_check_type(type_name)) + f":ho:{int(shard)}"
        raw = self._conn.call("alloc stream read", lambda c: c.xrange(key, "-", "+"))
        out: list[tuple[str, int, bytes]] = []
        for entry_id, fields in raw or ():
            f = {_text(k): v for k, v in (fields or {}).items()}
            payload = f["d"]
            out.append(
                (
                    _text(entry_id),
                    int(f["i"]),
                    payload if isinstance(payload, bytes) else payload.encode(),
                )
            )
        return out

    def stream_delete(self, type_name: str, shard: int, ids: Sequence[str]) -> None:
        keys = (self._backend.alloc_key(_check_type(type_name)) + f":ho:{int(shard)}",)
        args = [str(i) for i in ids]
        self._conn.call("alloc stream delete", lambda c: _ALLOC_STREAM_TAKE.run(c, keys, args))

    def close(self) -> None:
        self._conn.close()
