"""Every ``examples/*.py`` runs to completion in a fresh interpreter and says what it
should: each is run as a subprocess (as a reader would run it), with a timeout, and
must exit 0, print its key lines and log no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

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


def run_script(path: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GACTORS_CONFIG", None)  # the examples run with the defaults
    return subprocess.run(
        [sys.executable, str(path)],
        cwd=ROOT,
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
