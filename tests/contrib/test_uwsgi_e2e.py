"""End to end: the uWSGI recipe of docs/gunicorn.md under a real ``uwsgi --gevent``.

Writes the recipe's app module (monkey-patch first, the system made in ``@postfork``,
terminated in the ``uwsgi.atexit`` hook) into a temporary directory, runs
``uwsgi --master --processes 2 --gevent 20`` on a free loopback port, sends requests
whose handler asks an actor of the worker's own system (the answer carries the pid),
until both workers answered, then stops uWSGI with SIGINT (or SIGQUIT) and checks that each worker
wrote the file its ``uwsgi.atexit`` hook writes once its actor system terminated cleanly.

Skipped only when the ``uwsgi`` binary is not installed next to this interpreter (it
is built from PyPI with a C compiler: ``tox -e uwsgi``, which CI runs, installs it).
With ``GACTORS_REQUIRE_UWSGI=1`` (set by that tox env) a missing uwsgi is a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# The recipe from docs/gunicorn.md ("uWSGI and other servers"), with a tiny WSGI app in
# place of Flask and a file written when the system terminated (what the test checks).
APP = """
from gevent import monkey; monkey.patch_all()
import os
from pathlib import Path

import uwsgi
from uwsgidecorators import postfork

from gactors import Actor, ActorSystem, Props
from gactors.contrib import has_worker_system, set_worker_system, worker_system
from gactors.contrib.wsgi import GactorsMiddleware, get_system

OUT = Path(os.environ["GACTORS_UWSGI_OUT"])


class Echo(Actor):
    def receive(self, message):
        self.sender.tell(f"{message} from {os.getpid()}")


def make_system():
    system = ActorSystem(f"uwsgi-{os.getpid()}", config={"shutdown_timeout": 5.0})
    system.actor_of(Props(Echo), "echo")
    return system


def app(environ, start_response):
    answer = get_system(environ).lookup("/user/echo").ask("pong", timeout=5.0)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [answer.encode()]


application = GactorsMiddleware(app)


@postfork
def start_actors():
    set_worker_system(make_system())
    (OUT / f"started-{os.getpid()}").write_text("")


def stop_actors():
    if not has_worker_system():  # the master: it never made a system
        return
    system = worker_system()
    system.terminate()
    clean = system.await_termination(10.0)
    (OUT / f"terminated-{os.getpid()}").write_text(f"{clean} {system.is_terminated}")


uwsgi.atexit = stop_actors
"""


def _uwsgi_or_skip() -> str:
    found = shutil.which("uwsgi", path=str(Path(sys.executable).parent)) or shutil.which("uwsgi")
    if found is None:
        if os.environ.get("GACTORS_REQUIRE_UWSGI") == "1":
            pytest.fail("GACTORS_REQUIRE_UWSGI=1 but no uwsgi binary is installed")
        pytest.skip("uwsgi is not installed (pip install uwsgi, or run tox -e uwsgi)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGQUIT], ids=["SIGINT", "SIGQUIT"])
def test_uwsgi_recipe_serves_from_both_workers_and_stops_cleanly(
    tmp_path: Path, stop_signal: signal.Signals
) -> None:
    uwsgi = _uwsgi_or_skip()
    (tmp_path / "uwsgi_app.py").write_text(APP)
    out = tmp_path / "out"
    out.mkdir()
    port = _free_port()
    log = tmp_path / "uwsgi.log"
    env = {**os.environ, "GACTORS_UWSGI_OUT": str(out), "PYTHONPATH": str(tmp_path)}
    cmd = [
        uwsgi,
        "--master",
        "--processes", "2",
        "--gevent", "20",
        "--http-socket", f"127.0.0.1:{port}",
        "--chdir", str(tmp_path),
        "--module", "uwsgi_app:application",
        "--need-app",
        "--logto", str(log),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(list(out.glob("started-*"))) < 2:
            assert proc.poll() is None, f"uwsgi exited early:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"workers did not start:\n{log.read_text()}"
            time.sleep(0.1)  # another process writes these files
        started = {int(p.name.split("-")[1]) for p in out.glob("started-*")}

        url = f"http://127.0.0.1:{port}/"
        answered: set[int] = set()
        with ThreadPoolExecutor(8) as pool:
            while answered != started:
                assert time.monotonic() < deadline, f"only {answered} of {started} answered"
                for body in pool.map(_get, [url] * 32):
                    prefix, _, pid = body.partition(" from ")
                    assert prefix == "pong", body
                    answered.add(int(pid))
        assert answered == started

        # uWSGI docs: SIGINT and SIGQUIT to the master stop the whole stack; each worker
        # runs uwsgi.atexit on the way out (Python's atexit hooks do not run there).
        proc.send_signal(stop_signal)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    text = log.read_text(errors="replace")
    for pid in started:
        marker = out / f"terminated-{pid}"
        assert marker.exists(), f"worker {pid} did not terminate its system:\n{text}"
        assert marker.read_text() == "True True", f"worker {pid}: {marker.read_text()}\n{text}"
    assert "Traceback" not in text, text
