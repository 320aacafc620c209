"""The test side of ``_reminder_node.py``: start, command, kill; read the book."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gevent

NODE = str(Path(__file__).with_name("_reminder_node.py"))


class Proc:
    """One process of ``_reminder_node.py`` (its stderr goes to a file)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in close()
            prefix="gactors-remind-", suffix=".log", delete=False
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        )
        self.proc = subprocess.Popen(
            [sys.executable, NODE, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        first = self.read(60.0)
        if first is None or "pid" not in first:
            self.close()
            raise AssertionError(f"reminder node did not start: {first!r}\n{self.log()}")
        self.pid: int = first["pid"]
        self.ready = time.time()

    def read(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        with gevent.Timeout(timeout, False):
            line = self.proc.stdout.readline()
            return json.loads(line) if line else None
        return None

    def command(self, timeout: float = 20.0, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.read(timeout)
        if line is None:
            raise AssertionError(f"no answer to {cmd!r}\n{self.log()}")
        return line

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self.proc.kill()
        self.proc.wait(10)

    def leave(self) -> None:
        """A graceful stop (leases given back)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": "leave"}) + "\n")
        self.proc.stdin.flush()
        self.proc.wait(30)

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


def read_book(path: Path) -> list[dict[str, Any]]:
    """Every complete line of the book (a line still being written is left out)."""
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")[:-1]
    return [json.loads(x) for x in lines if x]


def firings(book: list[dict[str, Any]], who: str) -> list[dict[str, Any]]:
    return sorted((r for r in book if r["who"] == who), key=lambda r: r["t"])


def wait_until(check: Any, limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
