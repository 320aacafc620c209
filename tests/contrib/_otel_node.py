"""A traced cluster node in a process of its own, for tests/contrib/test_otel.py.

``python _otel_node.py <redis-url> <system-name> <spans-file>``: the node runs
``/user/cart`` and ``/user/stock`` with tracing on, writes each finished span to
``<spans-file>`` (one JSON record a line), prints ``{"address": ...}`` once it joined
and runs until its standard input closes.
"""

from __future__ import annotations

if __name__ == "__main__":
    from gevent import monkey

    monkey.patch_all()

import json
import os
import sys
from typing import Any

import gevent
from gevent.os import make_nonblocking, nb_read
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from gactors import Actor, ActorSystem, Props

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _otel_spans import AddItem, Audited, FileSpanExporter, Reserve


class Stock(Actor):
    """Reserves an item and tells the audit actor (on the first node) about it."""

    def receive(self, m: Any) -> None:
        if type(m) is Reserve:
            m.audit.tell(Audited(m.item))
            self.sender.tell(("reserved", m.item))


class Cart(Actor):
    """Adds an item: asks the stock (another actor of this node), then replies."""

    def receive(self, m: Any) -> None:
        if type(m) is AddItem:
            stock = self.context.system.lookup("/user/stock")
            reserved = stock.ask(Reserve(m.item, m.audit), timeout=10.0)
            self.sender.tell(("added", m.item, reserved[0]))


def main() -> None:
    url, name, spans = sys.argv[1], sys.argv[2], sys.argv[3]
    provider = TracerProvider(resource=Resource.create({"service.name": "node-2"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    system = ActorSystem(
        name,
        config={
            "cluster": {"url": url, "heartbeat_interval": 0.2},
            "tracing": {"tracer_provider": provider},
        },
    )
    system.actor_of(Props(Stock), "stock")
    system.actor_of(Props(Cart), "cart")
    sys.stdout.write(json.dumps({"address": str(system.address), "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
    make_nonblocking(0)
    while True:  # until the test closes our stdin
        try:
            if not nb_read(0, 1024):
                break
        except OSError:
            gevent.sleep(0.05)
    system.terminate()
    system.await_termination(10)


if __name__ == "__main__":
    main()
