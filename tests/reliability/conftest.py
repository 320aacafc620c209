"""Hypothesis profiles of the reliability suite (its ``system`` fixture is
``tests/conftest.py``'s).

Hypothesis profiles (applied to this suite's tests only, never loaded globally):

* ``ci`` (the default): a bounded, derandomized run, so that the whole directory stays
  well under a minute and a CI run is reproducible.
* ``long``: many more, random, examples and longer programs; run it on demand with
  ``GACTORS_HYPOTHESIS_PROFILE=long GACTORS_TEST_HARD_TIMEOUT=3600 pytest -s
  tests/reliability/test_model.py`` (the long profile lifts the test's pytest-timeout;
  the variable lifts the hard watchdog of ``tests/conftest.py``).

``GACTORS_HYPOTHESIS_EXAMPLES`` overrides the number of examples of either profile.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

PROFILE_ENV = "GACTORS_HYPOTHESIS_PROFILE"
EXAMPLES_ENV = "GACTORS_HYPOTHESIS_EXAMPLES"

_COMMON = {
    "deadline": None,  # one example drives a whole actor system: its duration varies
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile(
    "gactors-ci",
    max_examples=60,
    stateful_step_count=40,
    derandomize=True,
    database=None,
    print_blob=True,
    **_COMMON,  # type: ignore[arg-type]
)
settings.register_profile(
    "gactors-long",
    max_examples=2000,
    stateful_step_count=80,
    print_blob=True,
    **_COMMON,  # type: ignore[arg-type]
)


def hypothesis_settings() -> settings:
    """The settings of the selected profile (``GACTORS_HYPOTHESIS_PROFILE``)."""
    name = os.environ.get(PROFILE_ENV, "ci").strip() or "ci"
    if name not in ("ci", "long"):
        raise pytest.UsageError(f"{PROFILE_ENV} must be 'ci' or 'long', not {name!r}")
    base = settings.get_profile(f"gactors-{name}")
    examples = os.environ.get(EXAMPLES_ENV, "").strip()
    if examples:
        return settings(base, max_examples=int(examples))
    return base
