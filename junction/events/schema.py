"""Every event kind a node writes, and the one encoding of them (JSON Lines).

An event is one JSON object per line.  Every object has the common fields
``v`` (the schema version, :data:`SCHEMA_VERSION`), ``kind``, ``ts`` (epoch
milliseconds, a float), ``node`` (the node's name) and ``node_id``; the rest
are the kind's own fields, listed in :data:`KINDS`.  A field a writer does not
know is written as null.  Readers refuse an object whose ``v`` is newer than
theirs (its meaning may have changed) and ignore fields they do not know
(additions keep the version).

This module is pure: no I/O, no Twisted, so the pipeline imports it alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    "SCHEMA_VERSION",
    "COMMON_FIELDS",
    "KINDS",
    "FIELD_TYPES",
    "ALL_FIELDS",
    "CATEGORIES",
    "Event",
    "SchemaError",
    "encode",
    "decode",
    "category_of",
]

#: the version of this schema; a reader refuses events of a newer one
SCHEMA_VERSION = 1

#: fields every event has, in this order
COMMON_FIELDS = ("v", "kind", "ts", "node", "node_id")

#: kind -> its own fields (each may be null).  Sizes are bytes, durations milliseconds,
#: decision times microseconds.
KINDS: dict[str, tuple[str, ...]] = {
    # a client connection (gateway or broker core)
    "connection.accepted": ("conn", "remote", "acceptor", "protocol", "sni_host", "user", "client_id"),
    "connection.routed": (
        "conn", "router", "key_type", "key", "transformed_key", "target", "target_node_id",
        "decision", "reason", "cache_hit", "decision_us", "user", "client_id",
    ),
    "connection.closed": ("conn", "bytes_in", "bytes_out", "duration_ms", "reason"),
    # a message (broker core)
    "message.sent": (
        "message_id", "duplicate_id", "address", "queues", "size", "durable", "group_id",
        "group_seq", "conn", "user", "client_id", "routing_type",
    ),
    "message.forwarded": ("message_id", "duplicate_id", "address", "to_node", "size"),
    "message.redistributed": ("message_id", "duplicate_id", "address", "queue", "to_node", "size"),
    "message.delivered": (
        "message_id", "duplicate_id", "address", "queue", "consumer", "conn", "delivery_count", "user", "client_id",
    ),
    "message.acknowledged": ("message_id", "duplicate_id", "address", "queue", "consumer", "conn", "user", "client_id"),
    "message.expired": ("message_id", "duplicate_id", "address", "queue"),
    "message.dead_lettered": ("message_id", "duplicate_id", "address", "queue", "reason"),
    # a broker core's restart (written with the message events, at start, after its journal
    # was read): the node's own marker, then one event per message reference its journal
    # still held (recovered) or shows settled in its newest records (settled)
    "node.started": ("recovered", "settled", "persistent", "queues", "paged"),
    "message.recovered": ("message_id", "duplicate_id", "address", "queue", "durable", "delivery_count"),
    "message.settled": ("message_id", "duplicate_id", "address", "queue"),
    # the cluster and its links
    "topology.link_up": ("cluster", "peer_node_id", "peer", "direction"),
    "topology.link_down": ("cluster", "peer_node_id", "peer", "direction", "reason"),
}

#: every field's type, for readers that need a schema (Spark): "string", "long",
#: "double", "boolean" or "array<string>".  A field has one type whatever its kind.
FIELD_TYPES: dict[str, str] = {
    "v": "long", "kind": "string", "ts": "double", "node": "string", "node_id": "string",
    "conn": "string", "remote": "string", "acceptor": "string", "protocol": "string", "sni_host": "string",
    "router": "string", "key_type": "string", "key": "string", "transformed_key": "string",
    "target": "string", "target_node_id": "string", "decision": "string", "reason": "string",
    "cache_hit": "boolean", "decision_us": "double", "user": "string", "client_id": "string",
    "bytes_in": "long", "bytes_out": "long", "duration_ms": "double",
    "message_id": "string", "duplicate_id": "string", "address": "string", "queues": "array<string>",
    "size": "long", "durable": "boolean", "group_id": "string", "group_seq": "long",
    "routing_type": "string", "to_node": "string", "queue": "string", "consumer": "string",
    "delivery_count": "long",
    "recovered": "long", "settled": "long", "persistent": "boolean", "paged": "array<string>",
    "cluster": "string", "peer_node_id": "string", "peer": "string", "direction": "string",
}

#: the per-kind enable flags of ``<junction><events>`` group kinds by their prefix
CATEGORIES = ("connection", "message", "topology")
#: kinds written with another category's events: ``node.started`` goes with the message events
CATEGORY_OF = {"node.started": "message"}

#: the decisions of ``connection.routed``
DECISIONS = ("local", "forward", "redirect", "refused")


#: every field of every kind, common ones first, each once (the pipeline's columns)
ALL_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(COMMON_FIELDS + tuple(f for spec in KINDS.values() for f in spec)))


class SchemaError(ValueError):
    """An event line that is not an event of this schema (or of a newer one)."""


def category_of(kind: str) -> str:
    """The ``<events>`` category that turns ``kind`` on (its prefix, but see :data:`CATEGORY_OF`)."""
    return CATEGORY_OF.get(kind) or kind.split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its kind, time, node and the kind's fields (a dict of JSON values)."""

    kind: str
    ts: float
    node: str
    node_id: str
    fields: dict

    def get(self, name: str):
        return self.fields.get(name)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)


def encode(event: Event) -> str:
    """The event as one JSON line (without the newline); unknown kinds and fields refused."""
    spec = KINDS.get(event.kind)
    if spec is None:
        raise SchemaError(f"unknown event kind {event.kind!r}")
    extra = set(event.fields) - set(spec)
    if extra:
        raise SchemaError(f"{event.kind}: fields {sorted(extra)} are not in the schema")
    obj = {"v": SCHEMA_VERSION, "kind": event.kind, "ts": event.ts, "node": event.node, "node_id": event.node_id}
    fields = event.fields
    for name in spec:
        obj[name] = fields.get(name)
    return _ENCODER.encode(obj)


def decode(line: str | bytes) -> Event:
    """One JSON line back to an :class:`Event`; :class:`SchemaError` says what is wrong."""
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise SchemaError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise SchemaError("an event is a JSON object")
    version = obj.get("v")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError("an event needs its schema version v (an integer)")
    if version > SCHEMA_VERSION:
        raise SchemaError(f"schema version {version} is newer than this reader's {SCHEMA_VERSION}")
    kind = obj.get("kind")
    spec = KINDS.get(kind)
    if spec is None:
        raise SchemaError(f"unknown event kind {kind!r}")
    ts = obj.get("ts")
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise SchemaError(f"{kind}: ts must be a number (epoch milliseconds)")
    return Event(
        kind=kind,
        ts=float(ts),
        node=str(obj.get("node") or ""),
        node_id=str(obj.get("node_id") or ""),
        fields={name: obj.get(name) for name in spec},
    )
