"""A throwaway Redis Cluster for tests: 3 masters and 3 replicas on loopback ports.

:class:`RedisClusterServer` runs six ``redis-server --cluster-enabled yes`` processes
(each a :class:`~gactors.testkit._redis_server.RedisServer` with its own directory and
log), joins them with ``redis-cli --cluster create ... --cluster-replicas 1``, and
waits until every node reports ``cluster_state:ok`` and agrees on the slot map.
``url`` is ``redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,...``. ``kill_master_of``
SIGKILLs the master of a key's slot (a crash) and ``wait_for_failover`` waits until a
replica took its slots over, for failover tests.

It never imports a Redis client: it talks RESP over raw sockets, and ``redis-cli``
(Debian's ``redis-tools``, or valkey's ``valkey-cli``) creates the cluster.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import time
from typing import Any, BinaryIO

from gactors.testkit._redis_server import (
    RedisServer,
    RedisServerError,
    _Started,
    find_server_binary,
    free_port,
)

__all__ = ["RedisClusterServer", "command", "key_slot"]

log = logging.getLogger(__name__)

_CLIS = ("redis-cli", "valkey-cli")


def _crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM), the checksum of Redis Cluster's key slots."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key: str | bytes) -> int:
    """The hash slot of ``key`` (honouring a ``{hash tag}``)."""
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start != -1:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return _crc16(data) % 16384


def _encode(*args: str | bytes | int) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def _read_reply(reader: BinaryIO) -> Any:
    line = reader.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        return RedisServerError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = reader.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(reader) for _ in range(n)]
    raise ConnectionError(f"unexpected reply {line!r}")


def command(
    port: int, *args: str | bytes | int, host: str = "127.0.0.1", timeout: float = 2.0
) -> Any:
    """Send one command to ``host:port`` over a raw socket and return its reply (an
    error reply is returned as a :class:`RedisServerError`)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(_encode(*args))
        with sock.makefile("rb") as f:
            return _read_reply(f)


class RedisClusterServer(_Started):
    """A local Redis Cluster of ``masters`` masters with ``replicas`` replicas each.

    ``node_timeout_ms`` is the cluster's ``cluster-node-timeout``: a master that does
    not answer for that long is failed over to its replica (about that long plus an
    election, a second or two on loopback).
    """

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 2000,
        binary: str | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
    ) -> None:
        if masters < 3:
            raise ValueError(f"a Redis Cluster needs at least 3 masters, not {masters!r}")
        found = binary or find_server_binary()
        if not found:
            raise RedisServerError("no redis-server (or valkey-server) binary found")
        cli = next((c for c in map(shutil.which, _CLIS) if c), None)
        if cli is None:
            raise RedisServerError(
                "no redis-cli (or valkey-cli) on PATH: it creates the cluster "
                "(apt-get install redis-tools)"
            )
        self.cli = cli
        self.host = host
        self.masters = masters
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.startup_timeout = startup_timeout
        self.servers: list[RedisServer] = []
        for _ in range(masters * (1 + replicas)):
            port = free_port(host)
            server = RedisServer(
                found,
                host=host,
                port=port,
                extra_args=(
                    "--cluster-enabled",
                    "yes",
                    # Its bus port named, not the default port + 10000 (which
                    # may be taken, or above 65535 for a high ephemeral port).
                    "--cluster-port",
                    str(free_port(host)),
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(node_timeout_ms),
                    # A replica serves nothing while its master is away (the default);
                    # a cluster with a slot down answers CLUSTERDOWN for that slot only.
                    "--cluster-require-full-coverage",
                    "no",
                    "--appendonly",
                    "no",
                ),
                startup_timeout=startup_timeout,
            )
            self.servers.append(server)

    def __repr__(self) -> str:
        return f"<RedisClusterServer {self.url}>"

    @property
    def ports(self) -> list[int]:
        """The ports of every node (masters and replicas)."""
        return [s.port for s in self.servers]

    @property
    def url(self) -> str:
        """``redis+cluster://host:port,...`` of every node."""
        return "redis+cluster://" + ",".join(f"{self.host}:{p}" for p in self.ports)

    def server_on(self, port: int) -> RedisServer:
        """The node process on ``port``."""
        for s in self.servers:
            if s.port == port:
                return s
        raise KeyError(port)

    # -- the slot map ------------------------------------------------------------------
    def _live_ports(self) -> list[int]:
        return [s.port for s in self.servers if s.running]

    def slot_map(self) -> list[tuple[int, int, int]]:
        """``(first slot, last slot, master port)`` as a live node sees it."""
        for port in self._live_ports():
            with contextlib.suppress(OSError, ConnectionError):
                reply = command(port, "CLUSTER", "SLOTS", host=self.host)
                if isinstance(reply, list):
                    return [(int(r[0]), int(r[1]), int(r[2][1])) for r in reply]
        raise RedisServerError("no node of the cluster answers CLUSTER SLOTS")

    def master_of(self, key: str | bytes) -> int:
        """The port of the master that serves ``key``'s slot."""
        slot = key_slot(key)
        for first, last, port in self.slot_map():
            if first <= slot <= last:
                return port
        raise RedisServerError(f"slot {slot} is not served")

    def _healthy(self) -> bool:
        """Every live node says ``cluster_state:ok`` and they agree on the masters."""
        maps = set()
        for port in self._live_ports():
            try:
                info = command(port, "CLUSTER", "INFO", host=self.host)
                slots = command(port, "CLUSTER", "SLOTS", host=self.host)
            except (OSError, ConnectionError):
                return False
            if not isinstance(info, bytes) or b"cluster_state:ok" not in info:
                return False
            if not isinstance(slots, list):
                return False
            maps.add(tuple(sorted((int(r[0]), int(r[1]), int(r[2][1])) for r in slots)))
        if len(maps) != 1:
            return False
        (only,) = maps
        live = set(self._live_ports())
        covered = sum(last - first + 1 for first, last, _ in only)
        return covered == 16384 and all(port in live for _, _, port in only)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until every slot is served by a live master and every node
        agrees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._healthy():
                return
            time.sleep(0.1)
        raise RedisServerError(
            f"the Redis Cluster {self.url} is not healthy after {timeout:g} s; a node's "
            f"log:\n{self.servers[0].log_tail()}"
        )

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> RedisClusterServer:
        """Run every node, create the cluster, wait for ``cluster_state:ok``."""
        try:
            for s in self.servers:
                s.start()
            addresses = [f"{self.host}:{p}" for p in self.ports]
            done = subprocess.run(
                [
                    self.cli,
                    "--cluster",
                    "create",
                    *addresses,
                    "--cluster-replicas",
                    str(self.replicas),
                    "--cluster-yes",
                ],
                capture_output=True,
                text=True,
                timeout=self.startup_timeout,
                check=False,
            )
            if done.returncode != 0:
                raise RedisServerError(
                    f"{self.cli} --cluster create failed (status {done.returncode}):\n"
                    f"{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
                )
            self.wait_healthy(self.startup_timeout)
            self._wait_replicas_synced(self.startup_timeout)
        except BaseException:
            self.close()
            raise
        log.debug("test Redis Cluster %s started", self.url)
        return self

    def _wait_replicas_synced(self, timeout: float) -> None:
        """Wait until every replica finished its first sync (else a failover right
        after the start finds no replica able to take over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = 0
            for port in self._live_ports():
                with contextlib.suppress(OSError, ConnectionError):
                    info = command(port, "INFO", "replication", host=self.host)
                    replica = isinstance(info, bytes) and b"role:slave" in info
                    if replica and b"master_link_status:up" not in info:
                        pending += 1
            if not pending:
                return
            time.sleep(0.1)
        raise RedisServerError(f"the replicas of {self.url} did not sync within {timeout:g} s")

    def node_id(self, port: int) -> str:
        """The cluster node id of the node on ``port``."""
        reply = command(port, "CLUSTER", "MYID", host=self.host)
        if not isinstance(reply, bytes):
            raise RedisServerError(f"CLUSTER MYID on port {port} answered {reply!r}")
        return reply.decode()

    def migrate_slot_of(self, key: str | bytes, to_port: int, hold: float = 1.0) -> int:
        """Move ``key``'s slot to the master on ``to_port`` the way ``redis-cli --cluster
        reshard`` does (IMPORTING / MIGRATING, ``MIGRATE`` of its keys, then the new
        owner announced), holding ``hold`` seconds after the keys moved and before
        the owner is announced: meanwhile the old master answers ``ASK`` for them.
        Returns the slot."""
        slot = key_slot(key)
        src = self.master_of(key)
        if src == to_port:
            raise ValueError(f"slot {slot} is on 127.0.0.1:{to_port} already")
        src_id, dst_id = self.node_id(src), self.node_id(to_port)
        steps = [
            (to_port, ("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)),
            (src, ("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)),
        ]
        for port, args in steps:
            reply = command(port, *args, host=self.host)
            if isinstance(reply, Exception):
                raise reply
        while True:
            keys = command(src, "CLUSTER", "GETKEYSINSLOT", slot, 100, host=self.host)
            if not keys:
                break
            reply = command(
                src, "MIGRATE", self.host, to_port, "", 0, 5000, "KEYS", *keys, host=self.host
            )
            if isinstance(reply, Exception):
                raise reply
        time.sleep(hold)
        for port in [to_port, src] + [p for p in self._masters() if p not in (src, to_port)]:
            reply = command(port, "CLUSTER", "SETSLOT", slot, "NODE", dst_id, host=self.host)
            if isinstance(reply, Exception):
                raise reply
        return slot

    def _masters(self) -> list[int]:
        return sorted({port for _, _, port in self.slot_map()})

    def kill_master_of(self, key: str | bytes) -> int:
        """SIGKILL the master serving ``key``'s slot; returns its port."""
        port = self.master_of(key)
        self.server_on(port).kill()
        return port

    def wait_for_failover(self, killed_port: int, timeout: float = 30.0) -> float:
        """Wait until no slot is served by ``killed_port`` any more and the cluster is
        healthy again; returns how long that took (seconds)."""
        start = time.monotonic()
        deadline = start + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(RedisServerError):
                if all(port != killed_port for _, _, port in self.slot_map()) and self._healthy():
                    return time.monotonic() - start
            time.sleep(0.05)
        raise RedisServerError(
            f"no replica took over the slots of 127.0.0.1:{killed_port} within {timeout:g} s"
        )

    def restart_node(self, port: int, timeout: float = 30.0) -> None:
        """Start the (killed) node on ``port`` again: it keeps its ``nodes.conf``, so it
        rejoins, as a replica of whoever took its slots over; wait until the cluster is
        healthy and every replica synced."""
        self.server_on(port).start()
        self.wait_healthy(timeout)
        self._wait_replicas_synced(timeout)

    def close(self) -> None:
        """Stop every node and delete their directories."""
        for s in self.servers:
            with contextlib.suppress(Exception):
                s.kill()
            s.close()
