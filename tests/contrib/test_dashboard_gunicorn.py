"""The documented gunicorn setup (docs/_code/dashboard/) under real gunicorn, 2 workers.

Checks what docs/dashboard.md promises: ``/metrics`` adds up both workers
(prometheus_client's multiprocess mode), a worker that exits stops counting in the live
gauges but not in the counters (``child_exit`` marks it dead), and the dashboard answers
under its prefix, with its token. Loopback only; every wait bounded; processes killed on
failure.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

CODE = Path(__file__).resolve().parents[2] / "docs" / "_code" / "dashboard"
TOKEN = "ops-token"
PER_WORKER = 3 + 5  # the guardians and the five greeters


def _skip_without_tools() -> None:
    try:
        import gunicorn.workers.ggevent  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as e:
        pytest.skip(f"gunicorn and prometheus_client are needed ({e})")
    except RuntimeError as e:  # this gunicorn refuses the installed gevent
        pytest.skip(f"gunicorn's gevent worker is unusable here: {e}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    try:
        conn.request("GET", path, headers={"Connection": "close", **(headers or {})})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def _metric(text: str, name: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == {"system": "shop"}:
                return float(s.value)
    return None


def _until(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, http.client.HTTPException) as e:
            last = e
        time.sleep(0.2)  # another process changes: nothing to wait on but polling
    raise AssertionError(f"{what}: not within {timeout} s (last: {last!r})")


def _worker_pids(log: Path) -> list[int]:
    text = log.read_text(errors="replace") if log.exists() else ""
    return [int(p) for p in re.findall(r"Booting worker with pid: (\d+)", text)]


def test_metrics_of_two_gunicorn_workers_and_the_dashboard(tmp_path: Path) -> None:
    _skip_without_tools()
    port = _free_port()
    log = tmp_path / "gunicorn.log"
    env = dict(
        os.environ,
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"),
        GACTORS_DASHBOARD_TOKEN=TOKEN,
    )
    cmd = [
        sys.executable, "-m", "gunicorn",
        "-c", str(CODE / "gunicorn.conf.py"),
        "--pythonpath", str(CODE),
        "--bind", f"127.0.0.1:{port}",
        "--error-logfile", str(log),
        "ops_app:application",
    ]  # fmt: skip
    # The workers' stderr (Python's warnings go there), to check it stays clean.
    stderr = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, start_new_session=True, stderr=stderr)
    try:
        _until("both workers booted", lambda: len(_worker_pids(log)) >= 2)
        _until("gunicorn answers", lambda: _get(port, "/")[0] == 200)

        def actors_total(expected: float) -> Callable[[], bool]:
            return lambda: _metric(_get(port, "/metrics")[1], "gactors_actors") == expected

        _until("both workers in gactors_actors", actors_total(2 * PER_WORKER))
        for _ in range(10):
            assert _get(port, "/lost")[0] == 200

        def dead_letters() -> float | None:
            return _metric(_get(port, "/metrics")[1], "gactors_dead_letters_total")

        _until("10 dead letters summed over the workers", lambda: dead_letters() == 10)

        # One worker exits; gunicorn starts another one. The gauge counts live workers
        # only (child_exit marked the old one dead), the counter keeps its dead letters.
        first = _worker_pids(log)[0]
        os.kill(first, signal.SIGTERM)
        _until("a replacement worker", lambda: len(_worker_pids(log)) >= 3)
        new = _worker_pids(log)[2]
        prom = tmp_path / "prom"
        _until(
            "the new worker's live gauges written",
            lambda: (prom / f"gauge_livesum_{new}.db").exists(),
        )
        _until("back to two workers' actors", actors_total(2 * PER_WORKER))
        time.sleep(1.5)  # more refreshes of every worker: nothing more turns up
        text = _get(port, "/metrics")[1]
        assert _metric(text, "gactors_actors") == 2 * PER_WORKER
        assert _metric(text, "gactors_dead_letters_total") == 10

        # The dashboard, under its prefix, with its token.
        status, _ = _get(port, "/ops/actors/api/state")
        assert status == 401
        status, body = _get(port, "/ops/actors/api/state", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and '"name":"shop"' in body
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        stderr.close()
    # Every worker terminated its system on the way out (the first by SIGTERM mid-test,
    # the others at the end): prometheus_client warned about nothing. It used to warn
    # "Removal of labels has not been implemented in multi process mode" per worker.
    errors = (tmp_path / "stderr.txt").read_text(errors="replace")
    assert "Warning" not in errors, errors
