"""A stand-in for a slow, occasionally failing HTTP API, so that the tutorial runs
anywhere. In your application this is ``requests.get(...)`` or a database driver: any
blocking call that gevent's monkey-patching makes cooperative."""

from __future__ import annotations

import time

RATES = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.3, "CHF": 0.88}


class RatesAPI:
    """``fetch(currency)`` takes ``latency`` seconds and returns the rate."""

    def __init__(self, latency: float = 0.05) -> None:
        self.latency = latency
        self.calls = 0
        self.failures: list[Exception] = []  # raised by the next calls, in order

    def fail_next(self, error: Exception) -> None:
        """Make the next call raise ``error`` (to see what failures do)."""
        self.failures.append(error)

    def fetch(self, currency: str) -> float:
        self.calls += 1
        time.sleep(self.latency)  # a network round trip; other greenlets run meanwhile
        if self.failures:
            raise self.failures.pop(0)
        if currency not in RATES:
            raise KeyError(f"unknown currency {currency!r}")
        return RATES[currency]
