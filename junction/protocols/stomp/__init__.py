"""STOMP 1.0/1.1/1.2: a sans-IO codec and its events.

``StompCodec`` turns bytes into ``Frame``/``HeartBeat`` events and back, with
per-version header escaping and the named limits of ``StompLimits``; it does
no I/O and keeps no clock.  Which commands are allowed when is not the
codec's business but the connection's: :mod:`.connection` (the state table,
version and heart-beat negotiation), with the server's frames (and the
client's CONNECT and DISCONNECT) in :mod:`.builders` and the gateway's
opening reader in :mod:`.opening`.
"""

from junction.protocols.stomp.codec import StompCodec, StompLimits
from junction.protocols.stomp.frames import (
    CLIENT_COMMANDS,
    HEARTBEAT,
    SERVER_COMMANDS,
    STOMP_VERSIONS,
    UNESCAPED_COMMANDS,
    Event,
    Frame,
    HeartBeat,
    escape_header,
    escapes_headers,
    unescape_header,
)

__all__ = [
    "CLIENT_COMMANDS",
    "Event",
    "Frame",
    "HEARTBEAT",
    "HeartBeat",
    "SERVER_COMMANDS",
    "STOMP_VERSIONS",
    "StompCodec",
    "StompLimits",
    "UNESCAPED_COMMANDS",
    "escape_header",
    "escapes_headers",
    "unescape_header",
]
