"""Sans-IO codec and state machine for Junction's cluster link (bytes in, events out).

What: one cluster link is one TCP (possibly TLS) connection from a node's
cluster-connection bridge (role CLIENT) to a peer node's acceptor (role
SERVER).  The client forwards messages over it; the server tells the client
about its queues and consumers (bindings) and the cluster topology, and
acknowledges each forwarded message once it is stored.  The operator and
implementer reference, with byte layouts, is ``docs/cluster-protocol.md``.

Why sans-IO (h11's design): no sockets, no Twisted, no clock, no broker core.
The adapter writes what :meth:`LinkConnection.send` returns, feeds whatever it
reads to :meth:`LinkConnection.receive_data`, and acts on the returned events,
so every rule below is tested without a network.

Wire format (integers big-endian)::

    preamble  = "JNCL" u8 major u8 minor u16 reserved(0)   ; client -> server, once
    frame     = u32 length  u8 type  payload               ; length = 1 + len(payload)

Control frames carry a UTF-8 JSON object whose keys are the event's field
names (nested :class:`Binding` / :class:`Member` objects likewise; tuples are
arrays).  MESSAGE, ACK, NACK, PING and PONG have binary payloads (see their
events).  Unknown JSON keys are ignored, so a later minor version may add
keys; every key this version defines is required (nullable ones as ``null``).

Versioning: a server refuses a preamble with another major version
(:class:`RemoteProtocolError` code ``"version"``; the adapter then sends
``Refused("version", ...)``) and accepts any minor version.  The reserved
bytes are sent as zero and ignored on receipt.

State: one combined :class:`LinkState` per connection (the handshake is
strictly sequential, so separate own/peer states would add nothing)::

    CLIENT  IDLE --send Hello (preamble first)--> AWAITING_WELCOME
            AWAITING_WELCOME --recv Welcome--> OPEN, --recv Refused--> CLOSED
    SERVER  AWAITING_PREAMBLE --8 preamble bytes--> AWAITING_HELLO
            AWAITING_HELLO --recv Hello--> HELLO_RECEIVED
            HELLO_RECEIVED --send Welcome--> OPEN, --send Refused--> CLOSED
    both    OPEN --send or recv Goodbye--> CLOSED

:data:`SEND_TRANSITIONS` and :data:`RECEIVE_TRANSITIONS` are the complete
tables.  Two additions to the outline above: a server may send ``Refused``
from every state before OPEN (a bad preamble or Hello is answered with one),
and a client still awaiting WELCOME may send ``Goodbye`` (it is stopping), so
a server in HELLO_RECEIVED may receive one.

Errors (``code`` attribute, see ``junction/protocols/errors.py``):

* :class:`RemoteProtocolError` -- ``"not-a-cluster-link"`` (wrong magic),
  ``"version"`` (another major version), ``"unknown-frame"``,
  ``"frame-too-large"``, ``"unexpected-frame"`` (not allowed in this state),
  ``"malformed"`` (bad payload: JSON, UTF-8, key, type, layout).  Events the
  same call completed before the error ride on it as ``events``.  The
  connection is then *broken*: ``receive_data`` raises the same error again,
  and only the closing frame the tables allow may be sent (``Refused`` or
  ``Goodbye``); :meth:`LinkConnection.abort` picks and encodes it.
* :class:`LocalProtocolError` -- ``"invalid-event"`` (a field of the wrong
  type, an unknown Refused code), ``"frame-too-large"``, ``"not-allowed"``
  (this role may not send it in this state, or the connection is broken),
  ``"closed"``.

Limits (named constants, in :mod:`.constants`): a frame's length field may not exceed
:data:`MAX_FRAME_BYTES` for MESSAGE and :data:`MAX_CONTROL_BYTES` for every
other frame.  It is checked as soon as the 5-byte frame header has arrived
(a length beyond :data:`MAX_FRAME_BYTES` already at 4 bytes), before any of the
body is held, so a connection's buffer never exceeds one allowed frame.  The
frame's type and its legality in the current state are checked at the same
point.

Modules: :mod:`.constants` (magic, version, limits, error codes),
:mod:`.events` (the frame types and the frozen dataclasses of every record
and event), :mod:`.states` (the role, the state and the two transition
tables), :mod:`.fields` (one table of what every field may hold, checked on
both sides, and the JSON of control frames), :mod:`.connection` (the frame
codec, events to frames and back, and :class:`LinkConnection`, which moves
along the tables).  The names below are the package's
public face.
"""

from __future__ import annotations

from junction.protocols.cluster.link.connection import EVENT_TYPES, LinkConnection, encode_frame
from junction.protocols.cluster.link.constants import (
    BINDING_KINDS,
    CHANGE_OPS,
    MAGIC,
    MAX_ABORT_REASON_CHARS,
    MAX_ACK_SEQS,
    MAX_CONTROL_BYTES,
    MAX_COUNT,
    MAX_FRAME_BYTES,
    MAX_MESSAGE_HEADER_BYTES,
    MAX_SEQ,
    PREAMBLE,
    PREAMBLE_BYTES,
    REFUSED_CODES,
    ROUTING_TYPES,
    VERSION,
)
from junction.protocols.cluster.link.events import (
    Ack,
    Binding,
    BindingAdded,
    BindingRemoved,
    Bindings,
    Change,
    ChangeResult,
    Consumers,
    Event,
    FrameType,
    Goodbye,
    Hello,
    Member,
    MessageFrame,
    Nack,
    Ping,
    Pong,
    Record,
    RecordEntry,
    Refused,
    Topology,
    Welcome,
)
from junction.protocols.cluster.link.fields import decode_binding, encode_binding
from junction.protocols.cluster.link.states import (
    INITIAL_STATES,
    RECEIVE_TRANSITIONS,
    SEND_TRANSITIONS,
    LinkState,
    Role,
)

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
    "FrameType",
    "Role",
    "LinkState",
    "Binding",
    "Member",
    "Hello",
    "Welcome",
    "Refused",
    "Bindings",
    "BindingAdded",
    "BindingRemoved",
    "Consumers",
    "Topology",
    "MessageFrame",
    "Ack",
    "Nack",
    "Ping",
    "Pong",
    "Goodbye",
    "Change",
    "ChangeResult",
    "RecordEntry",
    "Record",
    "CHANGE_OPS",
    "Event",
    "EVENT_TYPES",
    "SEND_TRANSITIONS",
    "RECEIVE_TRANSITIONS",
    "INITIAL_STATES",
    "LinkConnection",
    "encode_frame",
    "encode_binding",
    "decode_binding",
]
