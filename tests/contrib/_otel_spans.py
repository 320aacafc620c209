"""What the tracing tests and their node process (``_otel_node.py``) share: the shop's
messages (registered for the wire), finished spans as JSON records, an exporter writing
them to a file (how the other process's spans reach the test) and the tree printer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from gactors import ActorRef
from gactors.serialization import register_message


@register_message(tag="tests.otel.AddItem")
@dataclass(frozen=True)
class AddItem:
    """To the cart: add ``item``; whoever handles it audits to ``audit``."""

    item: str
    audit: ActorRef


@register_message(tag="tests.otel.Reserve")
@dataclass(frozen=True)
class Reserve:
    item: str
    audit: ActorRef


@register_message(tag="tests.otel.Audited")
@dataclass(frozen=True)
class Audited:
    item: str


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as a JSON-able dict (ids in hex, as trace viewers show them)."""
    ctx = span.context
    assert ctx is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "events": [e.name for e in span.events],
        "service": span.resource.attributes.get("service.name"),
        "start": span.start_time,
        "end": span.end_time,
    }


class FileSpanExporter(SpanExporter):
    """Appends each finished span to a file, one JSON record a line."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            for s in spans:
                f.write(json.dumps(span_record(s), default=str) + "\n")
        return SpanExportResult.SUCCESS


def render_tree(records: Iterable[dict[str, Any]]) -> str:
    """The spans as an indented tree (parents before children, siblings by start time),
    each line ``name [kind] (service) duration actor-path``."""
    recs = sorted(records, key=lambda r: r["start"])
    ids = {r["span_id"] for r in recs}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in recs:
        parent = r["parent_id"] if r["parent_id"] in ids else None
        children.setdefault(parent, []).append(r)
    lines: list[str] = []

    def walk(r: dict[str, Any], prefix: str, last: bool, root: bool) -> None:
        attrs = r["attributes"]
        where = attrs.get("gactors.actor.path", "")
        status = "  ERROR" if r["status"] == "ERROR" else ""
        branch = "" if root else ("└── " if last else "├── ")
        took = (r["end"] - r["start"]) / 1e6 if r["end"] and r["start"] else 0.0
        lines.append(
            f"{prefix}{branch}{r['name']} [{r['kind']}] ({r['service']}) {took:.1f} ms "
            f"{where}{status}".rstrip()
        )
        kids = children.get(r["span_id"], [])
        for i, k in enumerate(kids):
            walk(
                k,
                prefix if root else prefix + ("    " if last else "│   "),
                i == len(kids) - 1,
                False,
            )

    for r in children.get(None, []):
        walk(r, "", True, True)
    return "\n".join(lines)
