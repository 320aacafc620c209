"""The gunicorn hooks make a worker whose cluster node was downed exit (SPEC 17)."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pytest

from gactors import ActorSystem
from gactors.contrib.gunicorn import GunicornHooks
from gactors.testkit import dilated

pytest.importorskip("redis")
from gactors.cluster import Cluster


class _Worker:
    """What the hooks use of a gunicorn worker: ``alive``, ``log``, ``cfg``."""

    def __init__(self) -> None:
        self.alive = True
        self.log = logging.getLogger("test.gunicorn.worker")
        self.cfg = None


def _wait(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + dilated(timeout)
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_downed_node_makes_the_worker_exit(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"g{uuid.uuid4().hex[:8]}"
    cfg = {"url": redis_url, "heartbeat_interval": 0.2, "unreachable_after": 1.0, "down_after": 2.0}
    hooks = GunicornHooks(lambda: ActorSystem(name, config={"cluster": cfg}), route_logs=False)
    worker = _Worker()
    other = ActorSystem(name, config={"cluster": cfg})
    try:
        with caplog.at_level(logging.ERROR):
            hooks.post_worker_init(worker)
            system = hooks.system
            assert system is not None
            Cluster(other).down(system.address)
            assert _wait(lambda: system.is_terminated, 10)
            assert _wait(lambda: not worker.alive, 5)
        text = caplog.text
        assert "terminated on its own" in text and "removed from the cluster" in text
        assert "gunicorn starts a fresh one" in text
        hooks.worker_exit(None, worker)  # then gunicorn calls worker_exit: nothing left to do
    finally:
        other.terminate()
        other.await_termination(10)


def test_normal_worker_exit_keeps_the_worker_quiet(redis_url: str) -> None:
    name = f"g{uuid.uuid4().hex[:8]}"
    hooks = GunicornHooks(
        lambda: ActorSystem(name, config={"cluster": {"url": redis_url}}), route_logs=False
    )
    worker = _Worker()
    hooks.post_worker_init(worker)
    hooks.worker_exit(None, worker)
    assert worker.alive  # gunicorn itself is stopping the worker: nothing to add
