"""A WSGI app with the dashboard at /ops/actors and the metrics at /metrics.

The system factory is run by the gunicorn hooks in each worker, after the fork.
"""

import os

from gactors import Actor, ActorSystem, Props
from gactors.contrib import worker_system
from gactors.contrib.dashboard import DashboardApp
from gactors.contrib.prometheus import ActorSystemMetrics, metrics_app


class Greeter(Actor):
    def receive(self, message):
        self.sender.tell(f"hello, {message}")


def make_system() -> ActorSystem:
    system = ActorSystem("shop")
    # The gauges of the workers that do not answer a scrape are at most this old.
    ActorSystemMetrics(system, interval=1.0)
    for i in range(5):
        system.actor_of(Props(Greeter), f"greeter-{i}")
    return system


def site(environ, start_response):
    if environ.get("PATH_INFO") == "/lost":
        # A message nobody receives: one dead letter in whichever worker serves this.
        worker_system().dead_letters.tell("lost")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"the shop\n"]


MOUNTS = {
    "/ops/actors": DashboardApp(token=os.environ.get("GACTORS_DASHBOARD_TOKEN")),
    "/metrics": metrics_app(),
}


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    for prefix, app in MOUNTS.items():
        if path == prefix or path.startswith(prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
            environ["PATH_INFO"] = path[len(prefix) :]
            return app(environ, start_response)
    return site(environ, start_response)
