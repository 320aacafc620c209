"""The batcher between persistent actors and a store (gactors/persistence/_extension.py):
the writes of one turn of the hub are one batch; a store serving two batches at once
gets the next one while one is out, a store serving one never does; its flusher
greenlets outlive a batch and end on close."""

from __future__ import annotations

from typing import Any

import gevent
import pytest

from gactors.persistence import _extension
from gactors.persistence._extension import _Batcher


class SlowStore:
    """Records when each batch starts and ends; a batch takes ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.log: list[tuple[str, list[Any]]] = []
        self.greenlets: set[Any] = set()

    def write_batch(self, writes: list[Any]) -> list[Any]:
        self.greenlets.add(gevent.getcurrent())
        self.log.append(("start", list(writes)))
        gevent.sleep(self.delay)
        self.log.append(("end", list(writes)))
        return [None] * len(writes)


def _wait(cond: Any, timeout: float = 5.0) -> None:
    with gevent.Timeout(timeout):
        while not cond():
            gevent.sleep(0.01)


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_second_batch_goes_out_while_one_is_out_only_with_two_lanes(lanes: int) -> None:
    store = SlowStore(0.3)
    batcher = _Batcher("journal", store.write_batch, 5.0, [], lambda: lanes)
    done: list[Any] = []
    for w in ("a1", "a2", "a3"):  # one turn of the hub: one batch
        batcher.submit(w, done.append)
    gevent.sleep(0.1)  # the first batch is out
    batcher.submit("b", done.append)
    _wait(lambda: len(done) == 4)
    assert store.log[0] == ("start", ["a1", "a2", "a3"])
    if lanes == 2:
        assert store.log[1] == ("start", ["b"]), store.log
        assert len(store.greenlets) == 2
    else:
        assert store.log[1] == ("end", ["a1", "a2", "a3"]), store.log
        assert len(store.greenlets) == 1
    batcher.close()
    _wait(lambda: batcher._flushers == 0)


def test_the_flusher_outlives_a_batch_and_ends_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_extension, "IDLE_FLUSHER_SECONDS", 0.3)
    store = SlowStore(0.0)
    batcher = _Batcher("journal", store.write_batch, 5.0, [], lambda: 1)
    done: list[Any] = []
    for i in range(3):  # three batches, one after the other: one greenlet writes them all
        batcher.submit(i, done.append)
        _wait(lambda i=i: len(done) == i + 1)
    assert len(store.greenlets) == 1 and batcher._flushers == 1
    _wait(lambda: batcher._flushers == 0)  # idle for 0.3 s: it ended
    batcher.submit("again", done.append)  # and a new one starts with the next write
    _wait(lambda: len(done) == 4)
    assert len(store.greenlets) == 2
    batcher.close()
    _wait(lambda: batcher._flushers == 0, 1.0)
