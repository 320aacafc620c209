"""Project-wide test configuration.

The project's own suite uses the gactors pytest plugin (fixtures ``actor_system`` and
``probe``). Installed packages register it through the ``pytest11`` entry point; an
older editable install may not have that entry point yet, so it is loaded here in that
case only (loading it twice would make pytest refuse the second registration).
"""

from __future__ import annotations

from importlib.metadata import entry_points

_PLUGIN = "gactors.testkit._pytest_plugin"

if not any(ep.value == _PLUGIN for ep in entry_points(group="pytest11")):
    pytest_plugins = [_PLUGIN]
