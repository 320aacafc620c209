"""One actor in detail, for a dashboard (the drill-down): read in the hub thread, by
this node's ``api/actor`` (:mod:`gactors.contrib._views`) and by its inspector for
another node's dashboard (:mod:`gactors.cluster._inspect`). Read-only."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gactors._observer import SystemObserver, _cell_info, local_path

if TYPE_CHECKING:
    from gactors._cell import ActorCell

__all__ = ["actor_in_hub", "producer_of"]

_CHILDREN_SHOWN = 50
_ENTITIES_SHOWN = 10


def _ref_path(ref: Any) -> str:
    return str(getattr(ref, "path", ref))


def actor_in_hub(obs: SystemObserver, path: str) -> dict[str, Any] | None:
    cell = obs.cell_at(path)
    if cell is None:
        return None
    path = "/" + "/".join(n for n in path.split("/") if n)
    parent = path.rpartition("/")[0] or "/" if path != "/" else None
    info = _cell_info(cell, path, parent)
    info["recent_restart"] = obs.recently_restarted(path)
    children: list[dict[str, Any]] = []
    for name, child in cell.child_cells.items():
        if len(children) == _CHILDREN_SHOWN:
            break
        child_path = f"/{name}" if path == "/" else f"{path}/{name}"
        children.append(
            {
                "path": child_path,
                "name": name,
                "state": child.state_name,
                "mailbox": len(child.mailbox),
                "restarts": child.restarts,
            }
        )
    samples = obs.track(path)
    samples.append((int(time.time()), len(cell.mailbox)))
    return {
        "node": info,
        "entity": _entity_of(cell),
        "mailbox_history": {"seconds": [s for s, _ in samples], "depth": [d for _, d in samples]},
        "last_failure": obs.last_failure.get(path),
        "children": children,
        "more_children": len(cell.child_cells) - len(children),
        "watchers": sorted(_ref_path(r) for r in cell.watched_by),
        "watching": sorted(_ref_path(r) for r in cell.watching),
        "delivery": producer_of(cell.actor),
    }


def _entity_of(cell: ActorCell) -> tuple[str, str] | None:
    """(type name, entity id) of a sharded entity's cell, else None."""
    shard = cell.parent_cell
    region = shard.parent_cell if shard is not None else None
    if region is None or type(region.actor).__qualname__ != "_Region":
        return None
    return region.name.removeprefix("sharding-"), cell.name


# -- reliable delivery --------------------------------------------------------------------------
def producer_of(actor: Any) -> dict[str, Any] | None:
    """A ReliableSender's producer actor, summarised: None for any other actor."""
    sender = getattr(actor, "sender_obj", None)
    machine = getattr(actor, "machine", None)
    if sender is None or machine is None or not hasattr(machine, "queues"):
        return None
    pending = {e: len(q.unconfirmed) for e, q in machine.queues.items() if q.unconfirmed}
    top = sorted(pending.items(), key=lambda kv: kv[1], reverse=True)[:_ENTITIES_SHOWN]
    stats = getattr(sender, "stats", None)
    return {
        "producer_id": sender.producer_id,
        "type_name": sender.type_name,
        "durable": bool(sender.durable),
        "window": sender.window,
        "unconfirmed": sum(pending.values()),
        "entities_pending": len(pending),
        "waiting": sum(len(w) for w in sender.waiting.values()),
        "top": [{"entity_id": e, "unconfirmed": n} for e, n in top],
        "sent": getattr(stats, "sent", None),
        "resent": getattr(stats, "resent", None),
        "path": local_path(str(sender.ref.path)),
    }
