"""Per-peer virtual environments under ``benchmarks/.venvs/<name>`` (git-ignored).

Each peer (and the plotting helper) gets its own environment, created with
``python -m venv`` from the running interpreter and filled with ``pip``. An environment
is reused when its marker file records the same requirements and its check passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

VENV_ROOT = Path(__file__).resolve().parent / ".venvs"
MARKER = "gactors-bench.json"


@dataclass(frozen=True)
class VenvSpec:
    """What a peer environment must contain."""

    name: str
    requirements: tuple[str, ...]
    check: str  # Python source that must run without error inside the environment

    def marker_data(self) -> dict[str, object]:
        """The content recorded in (and compared against) the marker file."""
        return {
            "requirements": list(self.requirements),
            "base": sys.version.split()[0],
        }


class VenvError(RuntimeError):
    """A peer environment could not be created or does not work."""


def venv_python(path: Path) -> Path:
    """The interpreter inside the environment at ``path``."""
    if os.name == "nt":
        return path / "Scripts" / "python.exe"
    return path / "bin" / "python"


def _check(python: Path, spec: VenvSpec) -> bool:
    try:
        proc = subprocess.run(
            [str(python), "-c", spec.check],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _run(cmd: list[str], what: str, timeout: float) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise VenvError(f"{what}: timed out after {timeout:.0f} s") from exc
    except OSError as exc:
        raise VenvError(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise VenvError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def ensure_venv(spec: VenvSpec, root: Path = VENV_ROOT, log: bool = True) -> Path:
    """Return the interpreter of the environment for ``spec``, creating it if needed.

    Raises :class:`VenvError` when the environment cannot be built (for example when
    the package index is unreachable).
    """
    path = root / spec.name
    python = venv_python(path)
    marker = path / MARKER
    if python.exists() and marker.exists():
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = None
        if recorded == spec.marker_data() and _check(python, spec):
            return python
    started = time.perf_counter()
    if log:
        print(f"creating venv {path} with {' '.join(spec.requirements)} ...", flush=True)
    if path.exists():
        shutil.rmtree(path)
    root.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(path)], f"python -m venv {path}", 300)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *spec.requirements,
        ],
        f"pip install {' '.join(spec.requirements)}",
        900,
    )
    if not _check(python, spec):
        raise VenvError(f"venv {path} was built but its check failed: {spec.check}")
    marker.write_text(json.dumps(spec.marker_data()), encoding="utf-8")
    if log:
        print(f"  ready in {time.perf_counter() - started:.1f} s", flush=True)
    return python
