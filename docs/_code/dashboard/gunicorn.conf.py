"""gunicorn.conf.py for several workers with gactors' Prometheus metrics (docs/dashboard.md).

Start with ``gunicorn -c gunicorn.conf.py ops_app:application``; the test suite runs it
(tests/contrib/test_dashboard_gunicorn.py).
"""

import os
import shutil

# Before anything imports prometheus_client: gunicorn reads this file first, in the
# master, and the workers inherit the environment.
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", "/run/myapp/prometheus")

from prometheus_client import multiprocess

from gactors.contrib.gunicorn import GunicornHooks

worker_class = "gevent"
workers = 2

_gactors = GunicornHooks("ops_app:make_system")
post_worker_init = _gactors.post_worker_init
worker_exit = _gactors.worker_exit


def on_starting(server):
    # A fresh directory per start: a previous run's files would be added in.
    path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)


def child_exit(server, worker):
    # The worker is gone: its live gauges must stop counting (its counters stay).
    multiprocess.mark_process_dead(worker.pid)
