"""How gactors turns values into bytes: the registry of classes that keep their type.

:func:`register_message` is the cluster's (``gactors.cluster.register_message``),
importable here too because persistence uses the same rules and registry for events,
snapshots and states (needs msgspec: ``gactors[cluster]`` or ``gactors[persistence]``).
"""

from __future__ import annotations

from gactors.cluster._registry import register_message, registered_tag

__all__ = ["register_message", "registered_tag"]
