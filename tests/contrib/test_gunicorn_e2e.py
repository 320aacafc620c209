"""End to end: the Flask example under real ``gunicorn -k gevent -w 2``.

Starts the example's backend and gunicorn on free loopback ports, sends a few hundred
concurrent requests (a few of which make a fetcher actor fail on purpose, mid-load),
checks every response, then sends SIGTERM and checks in gunicorn's log that both
workers terminated their actor systems cleanly within the shutdown budget.
Everything is bounded: loopback only, timeouts on every wait, processes killed on
failure.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _gunicorn import gunicorn_or_skip

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flask-gunicorn"
REQUESTS = 300
CRASHES = 4
CLIENTS = 16
BUDGET = 5.0  # shutdown_budget in the example's gunicorn.conf.py


def _wait_for(path: Path, pattern: str, deadline: float, count: int = 1) -> list[re.Match[str]]:
    """Poll a log file written by another process until ``pattern`` matched ``count`` times."""
    rx = re.compile(pattern)
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = list(rx.finditer(text))
        if len(found) >= count:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not seen {count} time(s) in {path}:\n{text}")
        time.sleep(0.05)  # another process writes it: nothing to wait on but the file


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # our own session: gunicorn and its workers
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def _request(port: int, method: str, path: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    try:
        conn.request(method, path, headers={"Connection": "close"})
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    try:
        data = json.loads(body)
    except ValueError:
        data = {"raw": body.decode(errors="replace")}
    return response.status, data


def test_flask_example_under_gunicorn_gevent(tmp_path: Path) -> None:
    gunicorn_config = gunicorn_or_skip()
    start = time.monotonic()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GACTORS_CONFIG", None)
    backend_log = tmp_path / "backend.log"
    gunicorn_log = tmp_path / "gunicorn.log"
    backend = server = None
    try:
        with backend_log.open("wb") as out:
            backend = subprocess.Popen(
                [sys.executable, "backend.py", "--host", "127.0.0.1", "--port", "0"],
                cwd=EXAMPLE,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (m,) = _wait_for(backend_log, r"backend listening on (http://127\.0\.0\.1:\d+)", start + 15)
        env["BACKEND_URL"] = m.group(1)

        cmd = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
        cmd += ["-k", "gevent", "-w", "2", "-b", "127.0.0.1:0", "--graceful-timeout", "15"]
        if "control_socket" in gunicorn_config.Config().settings:
            cmd.append("--no-control-socket")  # gunicorn >= 27: no shared socket file
        with gunicorn_log.open("wb") as out:
            server = subprocess.Popen(
                [*cmd, "app:app"],
                cwd=EXAMPLE,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (m,) = _wait_for(gunicorn_log, r"Listening at: http://127\.0\.0\.1:(\d+)", start + 20)
        port = int(m.group(1))
        started = _wait_for(
            gunicorn_log,
            r"gactors: actor system '(flask-\d+)' started in worker (\d+)",
            start + 20,
            2,
        )
        worker_pids = {int(s.group(2)) for s in started}
        assert len(worker_pids) == 2

        # The load: REQUESTS item fetches from CLIENTS threads, with CRASHES failures
        # injected at a steady pace once the load is under way.
        jobs: list[tuple[str, str]] = [("GET", f"/item/key-{i}") for i in range(REQUESTS)]
        for n in range(CRASHES):
            jobs.insert(60 + n * 50, ("POST", "/crash"))
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            futures = [pool.submit(_request, port, method, path) for method, path in jobs]
            results = [f.result(timeout=30) for f in futures]

        items = crashes = 0
        crashed: list[tuple[int, str]] = []
        served_by: set[int] = set()
        for (method, path), (status, data) in zip(jobs, results, strict=True):
            assert status == 200, (method, path, status, data)
            if path == "/crash":
                crashes += 1
                assert data["crashed"].startswith(f"gactors://flask-{data['worker']}/user/gateway/")
                crashed.append((data["worker"], data["crashed"]))
            else:
                items += 1
                key = path.rsplit("/", 1)[1]
                assert data["key"] == key
                assert data["value"] == hashlib.sha256(key.encode()).hexdigest()[:16]
                assert data["fetched_by"].startswith("fetcher-")
                served_by.add(data["worker"])
        assert (items, crashes) == (REQUESTS, CRASHES)
        assert served_by <= worker_pids and served_by

        # After the failures the fetchers still answer, on whichever worker.
        for i in range(10):
            status, data = _request(port, "GET", f"/item/after-{i}")
            assert status == 200 and data["key"] == f"after-{i}"

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=25) == 0
        log = gunicorn_log.read_text(errors="replace")

        # Every injected failure was supervised: logged, and the fetcher restarted.
        for _worker, path in crashed:
            assert f"[{path}] RuntimeError" in log, log
            assert f"[{path}] restarted after RuntimeError" in log, log
        # Both workers terminated their systems cleanly, within the budget.
        for pid in worker_pids:
            m2 = re.search(
                rf"gactors: actor system 'flask-{pid}' terminated cleanly in ([\d.]+) s "
                rf"\(budget ([\d.]+) s, worker {pid}\)",
                log,
            )
            assert m2 is not None, log
            assert float(m2.group(2)) == BUDGET
            assert float(m2.group(1)) <= BUDGET
        assert "did not terminate within its budget" not in log
        assert "Worker graceful timeout" not in log
        assert "Exception in worker process" not in log
    finally:
        _kill(server)
        if backend is not None and backend.poll() is None:
            backend.terminate()
            try:
                backend.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _kill(backend)
