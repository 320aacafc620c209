"""The cluster settings both nodes of the example use.

The failure detector is set short so that the example finishes quickly: a node is
unreachable after 1 s without heartbeat and downed after 2 s (defaults: 5 s, 10 s).
"""

from typing import Any


def cluster_settings(url: str) -> dict[str, Any]:
    return {"url": url, "heartbeat_interval": 0.25, "unreachable_after": 1.0, "down_after": 2.0}
