"""Artemis CORE, sans-IO: the protocol of the Artemis JMS and core clients.

Byte-faithful to the real client and broker (checked against traces of the
real pair in ``tests/unit/test_core_traces.py``): what Artemis writes, this
package reads into values and writes back to the same bytes.

Modules, bottom up:

* :mod:`.errors` -- Artemis's exception codes and the errors the codec raises
  (each carrying the code the connection answers with);
* :mod:`.encoding` -- the field encodings: a bounds-checked reader, a writer;
* :mod:`.values` -- message properties and connectors (``TypedProperties``,
  ``TransportConfiguration``);
* :mod:`.message` -- the message inside SESS_SEND and SESS_RECEIVE_MSG;
* :mod:`.packet_types`, :mod:`.versions` -- the type numbers and wire versions;
* :mod:`.packets` -- one frozen dataclass per packet;
* :mod:`.codec` -- framing: :class:`CoreCodec`, :class:`CoreLimits`;
* :mod:`.connection` -- the server side of a connection as a state table:
  channels, the client's version, sessions, the answers given at once;
* :mod:`.responses` -- each answer in the form the client's version reads.

The broker's adapter (``junction/brokercore/core_server.py``) and the gateway
side build on these (docs/adding-a-protocol.md, docs/core.md).
"""

from __future__ import annotations

from junction.protocols.core.codec import (
    HANDSHAKE,
    CoreCodec,
    CoreLimits,
    Event,
    Handshake,
    decode_packet,
    encode_packet,
)
from junction.protocols.core.errors import (
    CoreProtocolError,
    ExceptionType,
    MalformedPacket,
    PacketTooLarge,
    TooManyChannels,
    UnknownPacket,
)
from junction.protocols.core.message import MessageHeaders, MessageType
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.values import Scalar, TransportConfiguration

__all__ = [
    "HANDSHAKE",
    "CoreCodec",
    "CoreLimits",
    "CoreProtocolError",
    "Event",
    "ExceptionType",
    "Handshake",
    "MalformedPacket",
    "MessageHeaders",
    "MessageType",
    "PacketTooLarge",
    "PacketType",
    "Scalar",
    "TooManyChannels",
    "TransportConfiguration",
    "UnknownPacket",
    "decode_packet",
    "encode_packet",
]
