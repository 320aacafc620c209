"""Which shard an entity belongs to, and which node a shard goes to (rendezvous
hashing). Pure functions, the same on every node and every Python."""

from __future__ import annotations

import hashlib
import zlib


def shard_of(entity_id: str, number_of_shards: int) -> int:
    """The shard of ``entity_id`` (stable across processes and Python versions)."""
    return zlib.crc32(entity_id.encode()) % number_of_shards


def allocate(type_name: str, number_of_shards: int, nodes: list[str]) -> list[str | None]:
    """Rendezvous hashing: for every shard, the node with the highest weight."""
    if not nodes:
        return [None] * number_of_shards
    out: list[str | None] = []
    for s in range(number_of_shards):
        best, best_w = None, -1
        for n in nodes:
            w = int.from_bytes(
                hashlib.blake2b(f"{type_name}:{s}:{n}".encode(), digest_size=8).digest(), "big"
            )
            if w > best_w:
                best, best_w = n, w
        out.append(best)
    return out
