"""Prometheus counters of reliable delivery (in ``prometheus_client``'s default registry,
which :func:`gactors.contrib.prometheus.metrics_app` serves), when it is installed:

* ``gactors_delivery_resent_total`` -- copies a producer sent again (timeouts, restarts);
* ``gactors_delivery_duplicates_dropped_total`` -- copies an entity dropped as already
  processed.
"""

from __future__ import annotations

from typing import Any

_counters: dict[str, Any] | None = None


def _get() -> dict[str, Any]:
    global _counters
    if _counters is None:
        try:
            from prometheus_client import Counter
        except ImportError:
            _counters = {}
        else:
            _counters = {
                "resent": Counter("gactors_delivery_resent", "Reliable-delivery copies sent again"),
                "duplicates": Counter(
                    "gactors_delivery_duplicates_dropped",
                    "Reliable-delivery copies dropped by an entity as already processed",
                ),
            }
    return _counters


def resent(n: int) -> None:
    c = _get().get("resent")
    if c is not None and n:
        c.inc(n)


def duplicate_dropped() -> None:
    c = _get().get("duplicates")
    if c is not None:
        c.inc()
