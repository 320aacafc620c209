"""Two nodes in two processes: a remote ask, then DeathWatch of a crashed node.

    python examples/cluster/run.py [redis://127.0.0.1:6379/0]

Without a URL (and without ``GACTORS_REDIS_URL``) it starts a throwaway
``redis-server`` (or ``valkey-server``) found on PATH. It starts ``inventory.py`` and
``shop.py`` as two processes; once the shop watches the inventory actor, it kills the
inventory process with SIGKILL, and the shop sees ``Terminated`` with
``address_terminated=True``.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if binary is None:
        sys.exit("no redis-server or valkey-server on PATH: pass a redis:// URL")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="gactors-example-redis-")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return f"redis://127.0.0.1:{port}/0", server
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit("the redis server did not start")


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GACTORS_REDIS_URL")
    server = None
    if not url:
        url, server = start_server()
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
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
