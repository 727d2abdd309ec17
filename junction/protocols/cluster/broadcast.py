"""The UDP datagram a broadcast group sends and a discovery group reads (sans-IO).

A node announces where it can be reached -- its node id, its name and the
connectors of one ``<broadcast-group>`` -- in one datagram, every
``broadcast-period``; the discovery groups listening on the same UDP group
keep one entry per node id (:mod:`junction.brokercore.cluster.discovery`).
This module only turns an :class:`Announcement` into bytes and back; it has
no sockets and no clock.

Layout::

    b"JNCB"                  magic, 4 bytes
    0x01                     version, one unsigned byte
    {"node_id": "...",       UTF-8 JSON object, the rest of the datagram
     "name": "...",
     "sequence": 7,
     "connectors": [{"name": "...", "host": "...", "port": 61616,
                     "params": {"key": "value", ...}}, ...]}

Keys the reader does not know are ignored, at the top level and in a
connector, so a later version 1 writer may add some; a connector's
``params`` may be left out (no parameters).  A different version
byte is refused (:class:`~junction.protocols.errors.RemoteProtocolError`
with code ``"unsupported-version"``): a reader cannot guess what a new layout
means.  Limits: a datagram is at most :data:`MAX_DATAGRAM_BYTES` bytes and
carries at most :data:`MAX_CONNECTORS` connectors.

:func:`decode_announcement` raises ``RemoteProtocolError`` for anything
malformed, its ``code`` one of ``"too-large"``, ``"bad-magic"``,
``"unsupported-version"``, ``"bad-encoding"``, ``"bad-json"`` and
``"bad-field"``.  Building an :class:`Announcement` or
:class:`AnnouncedConnector` with a wrong field raises ``ValueError`` (or
``TypeError`` for a wrong type), and :func:`encode_announcement` raises
``ValueError`` for an announcement whose datagram would be too large.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from junction.protocols.errors import RemoteProtocolError

__all__ = [
    "MAGIC",
    "VERSION",
    "HEADER_BYTES",
    "MAX_DATAGRAM_BYTES",
    "MAX_CONNECTORS",
    "MAX_SEQUENCE",
    "AnnouncedConnector",
    "Announcement",
    "encode_announcement",
    "decode_announcement",
]

MAGIC = b"JNCB"
VERSION = 1
#: magic + version byte
HEADER_BYTES = len(MAGIC) + 1
#: The largest datagram written or accepted, header included (IPv4 UDP allows 65,507).
MAX_DATAGRAM_BYTES = 65_000
#: The most connectors one announcement carries.
MAX_CONNECTORS = 64
#: The largest sequence number (a signed 64-bit integer, for readers in other languages).
MAX_SEQUENCE = 2**63 - 1

_HEADER = MAGIC + bytes([VERSION])


def _check_str(what: str, value: Any, *, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise ValueError(f"{what} must not be empty")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{what} is not valid Unicode (a lone surrogate)") from None


def _check_int(what: str, value: Any, low: int, high: int) -> None:
    # bool is an int subclass: True is not a port number
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{what} must be between {low} and {high}, got {value}")


def _normalise_params(params: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    items = params.items() if isinstance(params, Mapping) else params
    pairs: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"connector params must be (key, value) pairs, got {item!r}")
        key, value = item
        _check_str("a connector param key", key)
        _check_str(f"connector param {key!r}", value)
        if key in pairs:
            raise ValueError(f"connector param {key!r} is given twice")
        pairs[key] = value
    return tuple(sorted(pairs.items()))


@dataclass(frozen=True)
class AnnouncedConnector:
    """One connector of an announcement: where and how to connect to the node.

    ``params`` is the connector URL's parameters as ``(key, value)`` string
    pairs sorted by key (a mapping or any iterable of pairs is accepted and
    normalised), so that equal connectors compare and hash equal.
    """

    name: str
    host: str
    port: int
    params: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        _check_str("connector name", self.name, empty=False)
        _check_str(f"connector {self.name!r} host", self.host, empty=False)
        _check_int(f"connector {self.name!r} port", self.port, 1, 65535)
        object.__setattr__(self, "params", _normalise_params(self.params))

    def params_dict(self) -> dict[str, str]:
        """The params as a new ``dict``."""
        return dict(self.params)

    def _to_json(self) -> dict:
        return {"name": self.name, "host": self.host, "port": self.port, "params": dict(self.params)}


@dataclass(frozen=True)
class Announcement:
    """What one broadcast datagram says: a node, its name, a sequence number, its connectors.

    ``sequence`` grows by one with each datagram a broadcast group sends (it
    starts again when the group is restarted).  ``connectors`` is a tuple
    (any iterable is accepted) of at most :data:`MAX_CONNECTORS`.
    """

    node_id: str
    name: str
    sequence: int
    connectors: tuple[AnnouncedConnector, ...] = ()

    def __post_init__(self) -> None:
        _check_str("node_id", self.node_id, empty=False)
        _check_str("name", self.name)
        _check_int("sequence", self.sequence, 0, MAX_SEQUENCE)
        if isinstance(self.connectors, (str, bytes, Mapping)):
            raise TypeError("connectors must be a sequence of AnnouncedConnector")
        connectors = tuple(self.connectors)
        if len(connectors) > MAX_CONNECTORS:
            raise ValueError(f"an announcement carries at most {MAX_CONNECTORS} connectors, got {len(connectors)}")
        for c in connectors:
            if not isinstance(c, AnnouncedConnector):
                raise TypeError(f"connectors must be AnnouncedConnector instances, got {type(c).__name__}")
        object.__setattr__(self, "connectors", connectors)


def encode_announcement(announcement: Announcement) -> bytes:
    """The datagram for ``announcement``; ``ValueError`` if it would exceed :data:`MAX_DATAGRAM_BYTES`."""
    if not isinstance(announcement, Announcement):
        raise TypeError(f"expected an Announcement, got {type(announcement).__name__}")
    body = {
        "node_id": announcement.node_id,
        "name": announcement.name,
        "sequence": announcement.sequence,
        "connectors": [c._to_json() for c in announcement.connectors],
    }
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    size = len(_HEADER) + len(payload)
    if size > MAX_DATAGRAM_BYTES:
        raise ValueError(
            f"announcement of node {announcement.node_id!r} needs {size} bytes, "
            f"more than the {MAX_DATAGRAM_BYTES} a datagram may carry"
        )
    return _HEADER + payload


# --------------------------------------------------------------------------- decoding


def _bad(message: str, code: str = "bad-field") -> RemoteProtocolError:
    return RemoteProtocolError(f"broadcast datagram: {message}", code)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result: dict = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice")
        result[key] = value
    return result


def _field(obj: dict, key: str, types: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise _bad(f"{where} has no {key!r}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _bad(f"{where}: {key!r} must not be a boolean")
    if not isinstance(value, types):
        raise _bad(f"{where}: {key!r} has the wrong type ({type(value).__name__})")
    return value


def _decode_connector(index: int, obj: Any) -> AnnouncedConnector:
    where = f"connector {index}"
    if not isinstance(obj, dict):
        raise _bad(f"{where} is not a JSON object")
    name = _field(obj, "name", str, where)
    host = _field(obj, "host", str, where)
    port = _field(obj, "port", int, where)
    params = _field(obj, "params", dict, where) if "params" in obj else {}
    for key, value in params.items():
        if not isinstance(value, str):
            raise _bad(f"{where}: param {key!r} is not a string")
    try:
        return AnnouncedConnector(name, host, port, params)
    except (TypeError, ValueError) as e:
        raise _bad(f"{where}: {e}") from None


def decode_announcement(datagram: bytes | bytearray | memoryview) -> Announcement:
    """The announcement in ``datagram``; ``RemoteProtocolError`` if it is not a valid one."""
    data = bytes(datagram)
    if len(data) > MAX_DATAGRAM_BYTES:
        raise _bad(f"{len(data)} bytes, more than the limit of {MAX_DATAGRAM_BYTES}", "too-large")
    if len(data) < HEADER_BYTES or not data.startswith(MAGIC):
        raise _bad(f"not a Junction broadcast (expected magic {MAGIC!r})", "bad-magic")
    version = data[len(MAGIC)]
    if version != VERSION:
        raise _bad(
            f"unsupported version {version} (this node reads version {VERSION} only)",
            "unsupported-version",
        )
    try:
        text = data[HEADER_BYTES:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(f"the body is not UTF-8 ({e.reason} at byte {e.start})", "bad-encoding") from None
    try:
        body = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise _bad("the body nests too deeply", "bad-json") from None
    except ValueError as e:  # json.JSONDecodeError is a ValueError, and so are the hooks' errors
        raise _bad(f"the body is not valid JSON ({e})", "bad-json") from None
    if not isinstance(body, dict):
        raise _bad("the body is not a JSON object")
    node_id = _field(body, "node_id", str, "the announcement")
    name = _field(body, "name", str, "the announcement")
    sequence = _field(body, "sequence", int, "the announcement")
    raw_connectors = _field(body, "connectors", list, "the announcement")
    if len(raw_connectors) > MAX_CONNECTORS:
        raise _bad(f"{len(raw_connectors)} connectors, more than the limit of {MAX_CONNECTORS}")
    connectors = tuple(_decode_connector(i, c) for i, c in enumerate(raw_connectors))
    try:
        return Announcement(node_id, name, sequence, connectors)
    except (TypeError, ValueError) as e:
        raise _bad(str(e)) from None
