"""What this node's regions know, read in the hub for the inspector and the reminders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gactors.cluster._sharding._api import _ShardingExtension
from gactors.cluster._sharding._region import _Region
from gactors.cluster._sharding._shard import _Shard

if TYPE_CHECKING:
    from gactors._system import ActorSystem


def local_shards(system: ActorSystem) -> list[dict[str, Any]]:
    """What this node's sharding regions know, for the node's inspector (internal).

    One entry per region started here (``start`` or ``start_proxy``)::

        {"type_name": str, "number_of_shards": int, "role": str | None,
         "hosting": bool,                      # start (True) or start_proxy (False)
         "allocation": {address: shards},      # where this region sends each shard now
         "shards": [{"shard": int, "entities": int, "token": int | None,
                     "state": "running" | "waiting for lease" | "handing off"}]}

    ``allocation`` is the owners in the type's allocation table as this region last
    read it (a moving shard counts for its old owner); ``shards`` are the shard
    actors that exist on this node. Read in the hub thread (cells are only touched
    there), without any I/O.
    """
    if not system.has_extension(_ShardingExtension):
        return []
    inst = system.extension(_ShardingExtension)
    out: list[dict[str, Any]] = []
    children = system.system_cell.child_cells
    prefix = f"gactors://{system.name}@"
    for type_name in list(inst._regions):  # noqa: SLF001  this module's inspection of its own actors
        cell = children.get(f"sharding-{type_name}")
        region = cell.actor if cell is not None else None
        if cell is None or not isinstance(region, _Region):
            continue
        allocation: dict[str, int] = {}
        for owner in region._sm.owners:  # noqa: SLF001  this module's inspection of its own actors
            if owner is not None:
                key = prefix + owner
                allocation[key] = allocation.get(key, 0) + 1
        shards: list[dict[str, Any]] = []
        for s in sorted(region._shards):  # noqa: SLF001  this module's inspection of its own actors
            shard_cell = cell.child_cells.get(str(s))
            shard = shard_cell.actor if shard_cell is not None else None
            if shard_cell is None or not isinstance(shard, _Shard):
                continue
            if shard._handing_off:  # noqa: SLF001  this module's inspection of its own actors
                state = "handing off"
            elif shard._token is None:  # noqa: SLF001  this module's inspection of its own actors
                state = "waiting for lease"
            else:
                state = "running"
            shards.append(
                {
                    "shard": s,
                    "entities": len(shard._entities),  # noqa: SLF001  this module's inspection of its own actors
                    "token": shard._token,  # noqa: SLF001  this module's inspection of its own actors
                    "state": state,
                }
            )
        out.append(
            {
                "type_name": type_name,
                "number_of_shards": region._n,  # noqa: SLF001  this module's inspection of its own actors
                "role": region._role,  # noqa: SLF001  this module's inspection of its own actors
                "hosting": region._entity_props is not None,  # noqa: SLF001  this module's inspection of its own actors
                "allocation": allocation,
                "shards": shards,
            }
        )
    return out


def owned_shards(system: ActorSystem) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Read-only, for the reminders (internal): ``{type_name: (number_of_shards, the
    shards allocated to this node now)}`` for every region started here (a proxy's
    tuple is empty). The allocation is the table as the region last read it; read
    in the hub thread, without any I/O."""
    if not system.has_extension(_ShardingExtension):
        return {}
    inst = system.extension(_ShardingExtension)
    children = system.system_cell.child_cells
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    for type_name in list(inst._regions):  # noqa: SLF001  this module's own extension
        cell = children.get(f"sharding-{type_name}")
        if cell is None:
            continue
        region = cell.actor
        if not isinstance(region, _Region):
            # Just started, not built yet: the number of shards is in its props (the
            # fourth argument of _start_in_hub's Props), it owns nothing yet.
            out[type_name] = (int(cell.props.args[3]), ())
            continue
        me = region._node_id  # noqa: SLF001  this module's own actor
        hosting = region._entity_props is not None  # noqa: SLF001  this module's own actor
        mine = tuple(s for s, o in enumerate(region._sm.owners) if hosting and o == me)  # noqa: SLF001
        out[type_name] = (region._n, mine)  # noqa: SLF001  this module's own actor
    return out
