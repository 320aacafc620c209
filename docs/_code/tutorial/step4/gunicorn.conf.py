# Tutorial, step 4: run with  gunicorn -c gunicorn.conf.py app:app
# [start conf]
from gactors.contrib.gunicorn import GunicornHooks

worker_class = "gevent"  # monkey-patches each worker before it loads the app
workers = 2
bind = "127.0.0.1:8000"
graceful_timeout = 10

_gactors = GunicornHooks("actors:make_system", shutdown_budget=5.0)
post_worker_init = _gactors.post_worker_init  # one actor system per worker, after fork
worker_exit = _gactors.worker_exit  # terminated when the worker stops
# [end conf]
