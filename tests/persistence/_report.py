"""Counts of the persistence fault tests, for the issue's note: printed (seen with
``-s``) and, when ``GACTORS_FAULT_REPORT`` names a file, appended to it (as the cluster
delivery tests do), so that repeated runs can be tallied."""

from __future__ import annotations

import os


def report(line: str) -> None:
    """One line ``[persistence] <line>`` in the test log and the report file."""
    line = f"[persistence] {line}"
    print("\n" + line)  # noqa: T201 - seen with -s
    path = os.environ.get("GACTORS_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
