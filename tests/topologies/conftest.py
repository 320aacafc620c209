"""The Redis topologies (a Redis Cluster of 3 masters and 3 replicas, a Sentinel group of
1 master, 1 replica and 3 sentinels), started for real on loopback ports.

They need Debian's ``redis-server``, ``redis-cli`` and ``redis-sentinel`` and take
minutes, so they are a step of their own: ``tox -e topologies`` (and ``.ci/run``) sets
``GACTORS_TOPOLOGIES=require``, under which a topology that cannot start is a failure
with its reason, never a skip. Elsewhere (the ordinary test command) they are skipped,
with the reason printed by ``-ra``.
"""

from __future__ import annotations

import os

import pytest

REQUIRED = os.environ.get("GACTORS_TOPOLOGIES", "") == "require"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.topology)
            if not REQUIRED:
                item.add_marker(
                    pytest.mark.skip(
                        reason="a Redis topology test: run by `tox -e topologies` "
                        "(GACTORS_TOPOLOGIES=require)"
                    )
                )
