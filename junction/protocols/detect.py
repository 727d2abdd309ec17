"""Which protocol a connection speaks, from its first bytes (sans-IO).

Used by acceptors that serve several protocols on one port (Artemis's
``protocols=CORE,AMQP,STOMP,...``) and by the gateway's sniffing listener.
:func:`detect` is pure: give it every byte received so far and it answers
with a protocol name, :data:`NEED_MORE`, or :data:`UNKNOWN`.

The signatures are the protocol table's
(:mod:`junction.protocols.registry`; the built-ins in
:mod:`junction.protocols.signatures`), tried in the table's order: the first
that matches names the protocol, the first that could still match asks for
more bytes.
"""

from __future__ import annotations

from junction.protocols.registry import MATCH, NEED_MORE, load, protocol_table
from junction.protocols.signatures import MAX_SNIFF_BYTES

__all__ = ["detect", "NEED_MORE", "UNKNOWN", "MAX_SNIFF_BYTES", "describe"]

UNKNOWN = "unknown"

_detectors = None


def _table():
    """(name, detector) in the table's order, loaded once per table."""
    global _detectors
    table = protocol_table()
    if _detectors is None or _detectors[0] is not table:
        _detectors = (table, tuple((entry.name, load(entry.detector)) for entry in table))
    return _detectors[1]


def detect(data: bytes) -> str:
    """The protocol ``data`` (everything received so far) starts, or NEED_MORE / UNKNOWN."""
    if not data:
        return NEED_MORE
    for name, detector in _table():
        verdict = detector(data)
        if verdict == MATCH:
            return name
        if verdict == NEED_MORE:
            return NEED_MORE
    return UNKNOWN


def describe(data: bytes, limit: int = 32) -> str:
    """A short printable account of unrecognised bytes, for a log line."""
    shown = data[:limit]
    text = repr(bytes(shown))
    return text + ("..." if len(data) > limit else "") + f" ({len(data)} bytes)"
