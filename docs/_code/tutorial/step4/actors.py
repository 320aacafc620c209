"""Tutorial, step 4: the system factory that gunicorn calls in each worker."""

import os
import sys
from pathlib import Path

# The tutorial's earlier steps live one directory up; in your application these are
# ordinary imports from your own package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from step3_supervised import GetRate, RateCache  # noqa: F401 (GetRate: for app.py)
from upstream import RatesAPI

from gactors import ActorSystem, Props


# [start factory]
def make_system() -> ActorSystem:
    """Build this worker's actor system and its top-level actors."""
    system = ActorSystem(f"rates-{os.getpid()}", config={"shutdown_timeout": 5.0})
    system.actor_of(Props(RateCache, RatesAPI(), ttl=60.0), "rates")
    return system


# [end factory]
