"""The cluster link's numbers and names: magic and version, frame limits, error codes.

Every limit a frame is held to is named here (see the package doc's
"Limits"); the private names are the ``code`` each
:class:`~junction.protocols.errors.RemoteProtocolError` or
:class:`~junction.protocols.errors.LocalProtocolError` carries.
"""

from __future__ import annotations

__all__ = [
    "MAGIC",
    "VERSION",
    "PREAMBLE",
    "PREAMBLE_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_CONTROL_BYTES",
    "MAX_MESSAGE_HEADER_BYTES",
    "MAX_ACK_SEQS",
    "MAX_COUNT",
    "MAX_SEQ",
    "MAX_ABORT_REASON_CHARS",
    "ROUTING_TYPES",
    "BINDING_KINDS",
    "REFUSED_CODES",
    "CHANGE_OPS",
]

_MiB = 1024 * 1024

#: The first four bytes of every cluster link (``junction.protocols.detect`` knows them).
MAGIC = b"JNCL"
#: (major, minor) this module speaks (1.3: MESSAGE bodies may carry a large message's content).
VERSION = (1, 3)
#: What a client sends first: magic, major, minor, two reserved zero bytes.
PREAMBLE = MAGIC + bytes((VERSION[0], VERSION[1], 0, 0))
PREAMBLE_BYTES = len(PREAMBLE)

#: Largest length field (type byte + payload) of a MESSAGE frame.
MAX_FRAME_BYTES = 64 * _MiB
#: Largest length field of every other frame.
MAX_CONTROL_BYTES = 1 * _MiB
#: Largest routing header (JSON) inside a MESSAGE payload.
MAX_MESSAGE_HEADER_BYTES = MAX_CONTROL_BYTES
#: Most sequence numbers one ACK can carry within MAX_CONTROL_BYTES (type, count, seqs).
MAX_ACK_SEQS = (MAX_CONTROL_BYTES - 1 - 4) // 8
#: Largest count, hop count or max-hops value (a Java int, as Artemis has them).
MAX_COUNT = 2**31 - 1
#: Largest sequence number (u64).
MAX_SEQ = 2**64 - 1
#: :meth:`LinkConnection.abort` cuts the error text it sends to this many characters.
MAX_ABORT_REASON_CHARS = 500

#: The routing types a :class:`Binding` may have.
ROUTING_TYPES = ("ANYCAST", "MULTICAST")
#: (1.1) how a queue came to be (Binding.kind); "" or anything else means unknown
BINDING_KINDS = ("", "admin", "auto", "temporary", "subscription")
#: Codes this node may send in :class:`Refused`; any non-empty code is accepted on receipt.
REFUSED_CODES = frozenset(
    {"auth", "duplicate-node-id", "version", "cluster", "shutting-down", "protocol"}
)

#: what a CHANGE or RECORD entry does to its entity
CHANGE_OPS = ("create", "delete")

# Error codes (RemoteProtocolError / LocalProtocolError ``code``).
_NOT_A_LINK = "not-a-cluster-link"
_VERSION = "version"
_UNKNOWN_FRAME = "unknown-frame"
_TOO_LARGE = "frame-too-large"
_UNEXPECTED = "unexpected-frame"
_MALFORMED = "malformed"
_INVALID = "invalid-event"
_NOT_ALLOWED = "not-allowed"
_CLOSED = "closed"
