"""gunicorn settings for the example: gevent workers, one actor system each.

BACKEND_URL=http://127.0.0.1:8001 gunicorn -c gunicorn.conf.py app:app
"""

import os

from gactors.contrib.gunicorn import GunicornHooks

bind = os.environ.get("BIND", "127.0.0.1:8000")
worker_class = "gevent"
workers = int(os.environ.get("WORKERS", "2"))
worker_connections = 1000
# The master kills a worker that has not exited this long after SIGTERM; the actor
# system's shutdown budget (below) stays well inside it.
graceful_timeout = 15
loglevel = "info"

# post_worker_init: build the worker's actor system with app.make_system, after the
# fork and after the gevent worker monkey-patched the process.
# worker_exit: terminate it within 5 s, logging what was still queued.
_gactors = GunicornHooks("app:make_system", shutdown_budget=5.0)
post_worker_init = _gactors.post_worker_init
worker_exit = _gactors.worker_exit
