"""Which protocol a connection speaks, from its first bytes (sans-IO).

Used by acceptors that serve several protocols on one port (Artemis's
``protocols=CORE,AMQP,STOMP,...``) and by the gateway's sniffing listener.
:func:`detect` is pure: give it every byte received so far and it answers
with a protocol name, :data:`NEED_MORE`, or :data:`UNKNOWN`.

Signatures:

* AMQP: ``AMQP`` followed by a protocol id (0 AMQP, 2 TLS, 3 SASL);
* STOMP: a ``CONNECT`` or ``STOMP`` command, after any heart-beat EOLs;
* OpenWire: a WireFormatInfo command (type 1) whose magic is ``ActiveMQ``,
  after a 4-byte size prefix (tight or loose encoding alike);
* CORE: Artemis's ``ARTEMIS`` handshake (``HORNETQ`` from older clients);
* MQTT: a CONNECT packet (type 1) whose protocol name is ``MQTT`` or ``MQIsdp``;
* CLUSTER: Junction's cluster link preamble, which starts with ``JNCL``
  (:mod:`junction.protocols.cluster.link` checks the version bytes after it).
  Checked first: no other signature starts with ``J``, and without this check
  a lone ``J`` would be UNKNOWN before the rest of the magic arrived.
"""

from __future__ import annotations

__all__ = ["detect", "NEED_MORE", "UNKNOWN", "MAX_SNIFF_BYTES", "describe"]

NEED_MORE = "need-more"
UNKNOWN = "unknown"
#: the most bytes any signature needs (OpenWire: size + type + magic length + magic)
MAX_SNIFF_BYTES = 64

_STOMP_COMMANDS = (b"CONNECT", b"STOMP")
_OPENWIRE_MAGIC = b"ActiveMQ"
_CORE = (b"ARTEMIS", b"HORNETQ")
_CLUSTER = (b"JNCL",)


def _prefix_of(data: bytes, candidates) -> str | None:
    """'match' if data starts with a candidate, 'partial' if it could, else None."""
    for candidate in candidates:
        if data.startswith(candidate):
            return "match"
        if candidate.startswith(data):
            return "partial"
    return None


def detect(data: bytes) -> str:
    """The protocol ``data`` (everything received so far) starts, or NEED_MORE / UNKNOWN."""
    if not data:
        return NEED_MORE
    found = _prefix_of(data, _CLUSTER)
    if found == "match":
        return "CLUSTER"
    if found == "partial":
        return NEED_MORE
    if data[:4] == b"AMQP" or (len(data) < 4 and b"AMQP".startswith(data)):
        return "AMQP" if len(data) >= 5 else NEED_MORE
    stripped = data.lstrip(b"\r\n")
    if not stripped:
        return NEED_MORE if len(data) < MAX_SNIFF_BYTES else UNKNOWN
    found = _prefix_of(stripped, _STOMP_COMMANDS)
    if found == "match":
        return "STOMP"
    if found == "partial":
        return NEED_MORE
    found = _prefix_of(data, _CORE)
    if found == "match":
        return "CORE"
    if found == "partial":
        return NEED_MORE
    if data[0] == 0x10:
        return _mqtt(data)
    return _openwire(data)


def _openwire(data: bytes) -> str:
    # size (4) | type 1 | [tight: boolean stream?] magic as a byte array of 8
    # A WireFormatInfo is far below 16 MiB: its size starts with a zero octet,
    # however many bytes have arrived (else the verdict would depend on them).
    if data[0] != 0x00:
        return UNKNOWN
    if len(data) < 5:
        return NEED_MORE
    if data[4] != 0x01:
        return UNKNOWN
    window = data[5:5 + 16]
    if _OPENWIRE_MAGIC in window:
        return "OPENWIRE"
    if len(data) < 5 + 16 and any(_OPENWIRE_MAGIC.startswith(window[i:]) for i in range(len(window) + 1)):
        return NEED_MORE
    return UNKNOWN


def _mqtt(data: bytes) -> str:
    # fixed header (type 1, remaining length as a varint) | name length (2) | name
    pos = 1
    for _ in range(4):
        if pos >= len(data):
            return NEED_MORE
        if not data[pos] & 0x80:
            break
        pos += 1
    pos += 1
    if len(data) < pos + 2:
        return NEED_MORE
    length = int.from_bytes(data[pos:pos + 2], "big")
    name = data[pos + 2:pos + 2 + length]
    if len(name) < length:
        return NEED_MORE if any(n.startswith(name) for n in (b"MQTT", b"MQIsdp")) else UNKNOWN
    return "MQTT" if name in (b"MQTT", b"MQIsdp") else UNKNOWN


def describe(data: bytes, limit: int = 32) -> str:
    """A short printable account of unrecognised bytes, for a log line."""
    shown = data[:limit]
    text = repr(bytes(shown))
    return text + ("..." if len(data) > limit else "") + f" ({len(data)} bytes)"
