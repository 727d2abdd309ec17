"""The built-in protocols' signatures: what their first bytes look like (sans-IO).

One detector per protocol of :data:`junction.protocols.registry.BUILT_IN`,
each ``f(data) -> MATCH | NEED_MORE | None`` over every byte received so far;
:func:`junction.protocols.detect.detect` tries them in the table's order.

* CLUSTER: Junction's cluster link preamble, which starts with ``JNCL``
  (:mod:`junction.protocols.cluster.link` checks the version bytes after it);
* AMQP: ``AMQP`` followed by a protocol id (0 AMQP, 2 TLS, 3 SASL);
* STOMP: a ``CONNECT`` or ``STOMP`` command, after any heart-beat EOLs;
* CORE: Artemis's ``ARTEMIS`` handshake (``HORNETQ`` from older clients);
* MQTT: a CONNECT packet (type 1) whose protocol name is ``MQTT`` or ``MQIsdp``;
* OpenWire: a WireFormatInfo command (type 1) whose magic is ``ActiveMQ``,
  after a 4-byte size prefix (tight or loose encoding alike).
"""

from __future__ import annotations

from junction.protocols.registry import MATCH, NEED_MORE

__all__ = ["MAX_SNIFF_BYTES", "amqp", "cluster", "core", "mqtt", "openwire", "prefix_of", "stomp"]

#: the most bytes any signature needs (OpenWire: size + type + magic length + magic)
MAX_SNIFF_BYTES = 64

_STOMP_COMMANDS = (b"CONNECT", b"STOMP")
_OPENWIRE_MAGIC = b"ActiveMQ"
_CORE = (b"ARTEMIS", b"HORNETQ")
_CLUSTER = (b"JNCL",)
_MQTT_NAMES = (b"MQTT", b"MQIsdp")


def prefix_of(data: bytes, candidates):
    """MATCH if data starts with a candidate, NEED_MORE if it could, else None."""
    for candidate in candidates:
        if data.startswith(candidate):
            return MATCH
        if candidate.startswith(data):
            return NEED_MORE
    return None


def cluster(data: bytes):
    return prefix_of(data, _CLUSTER)


def amqp(data: bytes):
    if data[:4] == b"AMQP" or (len(data) < 4 and b"AMQP".startswith(data)):
        return MATCH if len(data) >= 5 else NEED_MORE
    return None


def stomp(data: bytes):
    stripped = data.lstrip(b"\r\n")
    if not stripped:  # heart-beat EOLs only, so far
        return NEED_MORE if len(data) < MAX_SNIFF_BYTES else None
    return prefix_of(stripped, _STOMP_COMMANDS)


def core(data: bytes):
    return prefix_of(data, _CORE)


def openwire(data: bytes):
    # size (4) | type 1 | [tight: boolean stream?] magic as a byte array of 8
    # A WireFormatInfo is far below 16 MiB: its size starts with a zero octet,
    # however many bytes have arrived (else the verdict would depend on them).
    if data[0] != 0x00:
        return None
    if len(data) < 5:
        return NEED_MORE
    if data[4] != 0x01:
        return None
    window = data[5:5 + 16]
    if _OPENWIRE_MAGIC in window:
        return MATCH
    if len(data) < 5 + 16 and any(_OPENWIRE_MAGIC.startswith(window[i:]) for i in range(len(window) + 1)):
        return NEED_MORE
    return None


def mqtt(data: bytes):
    # fixed header (type 1, remaining length as a varint) | name length (2) | name
    if data[0] != 0x10:
        return None
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
        return NEED_MORE if any(n.startswith(name) for n in _MQTT_NAMES) else None
    return MATCH if name in _MQTT_NAMES else None
