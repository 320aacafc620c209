"""gunicorn for the end-to-end tests (tests/contrib and tests/cluster)."""

from __future__ import annotations

from typing import Any

import pytest


def gunicorn_or_skip() -> Any:
    """``gunicorn.config``, or skip the test when gunicorn, flask or gunicorn's gevent
    worker cannot be used here."""
    try:
        import flask  # noqa: F401
        import gunicorn.config
    except ImportError as e:
        pytest.skip(f"gunicorn and flask are needed for the end-to-end test ({e})")
    try:
        import gunicorn.workers.ggevent
    except RuntimeError as e:  # this gunicorn refuses the installed gevent
        pytest.skip(f"gunicorn's gevent worker is unusable here: {e}")
    return gunicorn.config
