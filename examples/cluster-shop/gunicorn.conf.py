"""gunicorn settings of the cluster shop: gevent workers, each one node of the cluster.

SHOP_REDIS_URL=redis://127.0.0.1:6379/0 gunicorn -c gunicorn.conf.py app:app
"""

import os

from gactors.contrib.gunicorn import GunicornHooks

bind = os.environ.get("BIND", "127.0.0.1:8000")
worker_class = "gevent"
workers = int(os.environ.get("WORKERS", "3"))
worker_connections = 1000
# A leaving worker hands its shards and the singleton over before it exits: the
# shutdown budget leaves time for that, and graceful_timeout is above the budget.
graceful_timeout = 20
loglevel = "info"

_gactors = GunicornHooks("app:make_system", shutdown_budget=15.0)
post_worker_init = _gactors.post_worker_init
worker_exit = _gactors.worker_exit
