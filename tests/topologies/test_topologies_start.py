"""The topologies' tests are gated: this module only checks the gate itself."""

from __future__ import annotations

import pytest

from . import conftest


def test_the_gate_is_required_here(request: pytest.FixtureRequest) -> None:
    # Runs only where GACTORS_TOPOLOGIES=require (elsewhere it is skipped by the gate).
    assert conftest.REQUIRED
    assert request.node.get_closest_marker("topology") is not None
