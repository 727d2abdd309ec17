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

Limits (named constants below): a frame's length field may not exceed
:data:`MAX_FRAME_BYTES` for MESSAGE and :data:`MAX_CONTROL_BYTES` for every
other frame.  It is checked as soon as the 5-byte frame header has arrived
(a length beyond :data:`MAX_FRAME_BYTES` already at 4 bytes), before any of the
body is held, so a connection's buffer never exceeds one allowed frame.  The
frame's type and its legality in the current state are checked at the same
point.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

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

# -- constants -----------------------------------------------------------------

_MiB = 1024 * 1024

#: The first four bytes of every cluster link (``junction.protocols.detect`` knows them).
MAGIC = b"JNCL"
#: (major, minor) this module speaks.
VERSION = (1, 2)
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

_HEADER = struct.Struct(">IB")  # frame: length, type
_LENGTH = struct.Struct(">I")
_FRAME_HEADER_BYTES = _HEADER.size
_MESSAGE_FIXED = struct.Struct(">QI")  # seq, routing header length
_SEQ = struct.Struct(">Q")

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


class FrameType(enum.IntEnum):
    """The frame type byte."""

    HELLO = 1
    WELCOME = 2
    REFUSED = 3
    BINDINGS = 4
    BINDING_ADDED = 5
    BINDING_REMOVED = 6
    CONSUMERS = 7
    TOPOLOGY = 8
    MESSAGE = 9
    ACK = 10
    NACK = 11
    PING = 12
    PONG = 13
    GOODBYE = 14
    CHANGE = 15
    CHANGE_RESULT = 16
    RECORD = 17


class Role(enum.Enum):
    """Which end of the link: the bridge that connects, or the acceptor."""

    CLIENT = "CLIENT"
    SERVER = "SERVER"


class LinkState(enum.Enum):
    """The combined state of one link connection (see the module docstring)."""

    IDLE = "IDLE"
    AWAITING_WELCOME = "AWAITING_WELCOME"
    AWAITING_PREAMBLE = "AWAITING_PREAMBLE"
    AWAITING_HELLO = "AWAITING_HELLO"
    HELLO_RECEIVED = "HELLO_RECEIVED"
    OPEN = "OPEN"
    CLOSED = "CLOSED"


# -- records and events ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Binding:
    """One queue the server knows of (its own or, ``hops`` links away, a peer's).

    ``id`` is unique per server link and names the binding in later
    BINDING_REMOVED / CONSUMERS frames.  ``origin`` is the node id where the
    queue really is; ``hops`` counts the links between the server and that
    node (0: the server's own queue).  ``consumers`` and ``consumer_filters``
    mean what they mean in :class:`Consumers`.
    """

    id: str
    address: str
    queue: str
    routing_type: str
    filter: str | None
    consumers: int
    consumer_filters: tuple[str, ...] | None
    hops: int
    origin: str
    durable: bool
    #: (1.1) how the queue came to be: "admin" (configured or created by an
    #: administrator), "auto" (auto-created), "temporary", "subscription" (a
    #: durable subscription); "" from a 1.0 peer
    kind: str = ""


@dataclass(frozen=True, slots=True)
class Member:
    """One node of the cluster topology and the connector that reaches it ("" / 0: none)."""

    node_id: str
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Hello:
    """HELLO (client -> server): who connects and with which credentials.

    ``name`` is the node's name, ``cluster`` the cluster-connection name,
    ``host``/``port`` the connector peers should use to reach this node, and
    ``max_hops`` how many links away a queue may be for the server to report
    its binding.  ``host`` ``""`` and ``port`` 0: the node has no connector
    peers can use.  ``password`` never appears in ``repr`` or in errors.
    """

    node_id: str
    name: str
    cluster: str
    user: str
    password: str = field(repr=False)
    max_hops: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Welcome:
    """WELCOME (server -> client): the link is open; the server's node id and name."""

    node_id: str
    name: str
    #: (1.1) the server's scale-down group (``<scale-down><group-name>``); absent in 1.0
    scale_down_group: str | None = None
    #: (1.2) the server's link protocol version, "major.minor"; absent before 1.2 (read "1.0").
    #: A client sends CHANGE only to a server of 1.2 or later.
    version: str = "1.0"


@dataclass(frozen=True, slots=True)
class Refused:
    """REFUSED (server -> client): the link is refused and closes (codes: :data:`REFUSED_CODES`)."""

    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class Bindings:
    """BINDINGS (server -> client): the full set; replaces all the client knew from this server."""

    bindings: tuple[Binding, ...]


@dataclass(frozen=True, slots=True)
class BindingAdded:
    """BINDING_ADDED (server -> client)."""

    binding: Binding


@dataclass(frozen=True, slots=True)
class BindingRemoved:
    """BINDING_REMOVED (server -> client)."""

    id: str


@dataclass(frozen=True, slots=True)
class Consumers:
    """CONSUMERS (server -> client): the consumer count of binding ``id`` changed.

    ``filters`` is None when at least one consumer has no filter (it matches
    everything), else the consumers' filter strings.
    """

    id: str
    count: int
    filters: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class Topology:
    """TOPOLOGY (server -> client): every node the server knows, itself included."""

    nodes: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class MessageFrame:
    """MESSAGE (client -> server): one forwarded message.

    ``route`` names the target queues as (origin node id, queue name) pairs;
    empty, it leaves the choice to the server.  ``duplicate_id`` lets the
    server drop a copy re-sent after a reconnect.  ``body`` is the encoded
    message; this module never looks inside it.
    """

    seq: int
    route: tuple[tuple[str, str], ...]
    duplicate_id: bytes | None
    body: bytes
    #: (1.1) the queue to create on the server if it has none of that name, before
    #: routing to ``route`` (scale-down moves queues with their messages); absent in 1.0
    create: "Binding | None" = None


@dataclass(frozen=True, slots=True)
class Ack:
    """ACK (server -> client): these messages are stored; the client may delete its copies."""

    seqs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Nack:
    """NACK (server -> client): message ``seq`` could not be stored; keep it and retry later."""

    seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ping:
    """PING (either direction): answer with a :class:`Pong`."""


@dataclass(frozen=True, slots=True)
class Pong:
    """PONG (either direction)."""


@dataclass(frozen=True, slots=True)
class Goodbye:
    """GOODBYE (either direction): orderly close; the sender sends nothing more."""

    reason: str


@dataclass(frozen=True, slots=True)
class Change:
    """CHANGE (1.2, client -> the master broker): record a change to the cluster's configuration.

    ``op`` is "create" or "delete"; ``entity`` the administrator's queue or
    durable subscription (a :class:`Binding` whose ``kind`` says which).  The
    server answers with a CHANGE_RESULT of the same ``seq``.
    """

    seq: int
    op: str
    entity: Binding


@dataclass(frozen=True, slots=True)
class ChangeResult:
    """CHANGE_RESULT (1.2, server -> client): the change ``seq`` was recorded (``ok``), or why not."""

    seq: int
    ok: bool
    reason: str


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """One entry of the configuration change record: the last change to one entity."""

    seq: int
    op: str
    entity: Binding


@dataclass(frozen=True, slots=True)
class Record:
    """RECORD (1.2, the master broker -> client): configuration change record entries.

    ``full``: these are every entry (sent when the link opens; the client
    applies what it missed while offline); else they are new changes.
    """

    entries: tuple[RecordEntry, ...]
    full: bool


Event = (
    Hello | Welcome | Refused | Bindings | BindingAdded | BindingRemoved | Consumers
    | Topology | MessageFrame | Ack | Nack | Ping | Pong | Goodbye | Change | ChangeResult | Record
)

_FRAME_OF: dict[type, FrameType] = {
    Hello: FrameType.HELLO,
    Welcome: FrameType.WELCOME,
    Refused: FrameType.REFUSED,
    Bindings: FrameType.BINDINGS,
    BindingAdded: FrameType.BINDING_ADDED,
    BindingRemoved: FrameType.BINDING_REMOVED,
    Consumers: FrameType.CONSUMERS,
    Topology: FrameType.TOPOLOGY,
    MessageFrame: FrameType.MESSAGE,
    Ack: FrameType.ACK,
    Nack: FrameType.NACK,
    Ping: FrameType.PING,
    Pong: FrameType.PONG,
    Goodbye: FrameType.GOODBYE,
    Change: FrameType.CHANGE,
    ChangeResult: FrameType.CHANGE_RESULT,
    Record: FrameType.RECORD,
}
_EVENT_OF: dict[int, type] = {int(t): cls for cls, t in _FRAME_OF.items()}
#: Every event class, in frame type order.
EVENT_TYPES: tuple[type, ...] = tuple(_EVENT_OF[t] for t in FrameType)

# -- the state machine tables ----------------------------------------------------------

_C, _S = Role.CLIENT, Role.SERVER
_IDLE, _AWAIT_WELCOME = LinkState.IDLE, LinkState.AWAITING_WELCOME
_AWAIT_PREAMBLE, _AWAIT_HELLO = LinkState.AWAITING_PREAMBLE, LinkState.AWAITING_HELLO
_HELLO_RECEIVED, _OPEN, _CLOSED_STATE = LinkState.HELLO_RECEIVED, LinkState.OPEN, LinkState.CLOSED


def _stay(*classes: type) -> dict[type, LinkState]:
    return {cls: _OPEN for cls in classes}


_CLIENT_OPEN_SENDS = _stay(MessageFrame, Ping, Pong, Change) | {Goodbye: _CLOSED_STATE}
_SERVER_OPEN_SENDS = _stay(
    Bindings, BindingAdded, BindingRemoved, Consumers, Topology, Ack, Nack, Ping, Pong, ChangeResult, Record
) | {Goodbye: _CLOSED_STATE}


def _frozen(table: dict) -> Mapping:
    return MappingProxyType(
        {role: MappingProxyType({s: MappingProxyType(t) for s, t in by_state.items()})
         for role, by_state in table.items()}
    )


#: role -> state -> event class -> next state, for what we send.  Absent: not allowed.
SEND_TRANSITIONS: Mapping[Role, Mapping[LinkState, Mapping[type, LinkState]]] = _frozen({
    _C: {
        _IDLE: {Hello: _AWAIT_WELCOME},
        _AWAIT_WELCOME: {Goodbye: _CLOSED_STATE},
        _OPEN: _CLIENT_OPEN_SENDS,
    },
    _S: {
        _AWAIT_PREAMBLE: {Refused: _CLOSED_STATE},
        _AWAIT_HELLO: {Refused: _CLOSED_STATE},
        _HELLO_RECEIVED: {Welcome: _OPEN, Refused: _CLOSED_STATE},
        _OPEN: _SERVER_OPEN_SENDS,
    },
})

#: role -> state -> event class -> next state, for what we receive (the peer's sends).
RECEIVE_TRANSITIONS: Mapping[Role, Mapping[LinkState, Mapping[type, LinkState]]] = _frozen({
    _C: {
        _AWAIT_WELCOME: {Welcome: _OPEN, Refused: _CLOSED_STATE},
        _OPEN: _SERVER_OPEN_SENDS,
    },
    _S: {
        _AWAIT_HELLO: {Hello: _HELLO_RECEIVED},
        _HELLO_RECEIVED: {Goodbye: _CLOSED_STATE},
        _OPEN: _CLIENT_OPEN_SENDS,
    },
})

#: The state a new connection starts in.
INITIAL_STATES: Mapping[Role, LinkState] = MappingProxyType({_C: _IDLE, _S: _AWAIT_PREAMBLE})

# -- field kinds: one table says what every field may hold, for both directions -----


class _Invalid(Exception):
    """A field or key at ``path`` is missing or holds the wrong thing."""

    def __init__(self, path: str, problem: str):
        super().__init__(path, problem)
        self.path = path
        self.problem = problem


_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_text(value: Any) -> bool:
    # A lone surrogate cannot be encoded as UTF-8 (JSON can smuggle one in as \\ud800).
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


@dataclass(frozen=True, slots=True)
class _Scalar:
    """A JSON scalar: the same test on both sides."""

    expected: str
    test: Callable[[Any], bool]
    #: never show the value in an error (it would reach logs and the peer)
    secret: bool = False

    def check(self, value: Any, path: str) -> None:
        if not self.test(value):
            shown = "" if self.secret else f", not {_shown(value)}"
            raise _Invalid(path, f"must be {self.expected}{shown}")

    def from_json(self, value: Any, path: str) -> Any:
        self.check(value, path)
        return value


@dataclass(frozen=True, slots=True)
class _Optional:
    inner: Any

    def check(self, value: Any, path: str) -> None:
        if value is not None:
            self.inner.check(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.from_json(value, path)


@dataclass(frozen=True, slots=True)
class _Added:
    """A field added in a minor version: a peer of an older minor version leaves it out."""

    inner: Any
    default: Any = None

    def check(self, value: Any, path: str) -> None:
        self.inner.check(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        return self.inner.from_json(value, path)


@dataclass(frozen=True, slots=True)
class _Tuple:
    """A tuple in Python, an array in JSON; ``unique``: an item attribute that may not repeat."""

    item: Any
    unique: str | None = None

    def check(self, value: Any, path: str) -> None:
        if type(value) is not tuple:
            raise _Invalid(path, f"must be a tuple, not {_shown(value)}")
        for i, item in enumerate(value):
            self.item.check(item, f"{path}[{i}]")
        self._unique(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not list:
            raise _Invalid(path, f"must be an array, not {_shown(value)}")
        result = tuple(self.item.from_json(item, f"{path}[{i}]") for i, item in enumerate(value))
        self._unique(result, path)
        return result

    def _unique(self, items: tuple, path: str) -> None:
        if self.unique is None:
            return
        seen: set[str] = set()
        for i, item in enumerate(items):
            key = getattr(item, self.unique)
            if key in seen:
                raise _Invalid(f"{path}[{i}].{self.unique}", f"repeats {_shown(key)}")
            seen.add(key)


@dataclass(frozen=True, slots=True)
class _Pair:
    """A fixed-length tuple in Python, an array of that length in JSON."""

    items: tuple

    def check(self, value: Any, path: str) -> None:
        if type(value) is not tuple or len(value) != len(self.items):
            raise _Invalid(path, f"must be a tuple of {len(self.items)}, not {_shown(value)}")
        for i, (kind, item) in enumerate(zip(self.items, value, strict=True)):
            kind.check(item, f"{path}[{i}]")

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not list or len(value) != len(self.items):
            raise _Invalid(path, f"must be an array of {len(self.items)}, not {_shown(value)}")
        return tuple(
            kind.from_json(item, f"{path}[{i}]")
            for i, (kind, item) in enumerate(zip(self.items, value, strict=True))
        )


@dataclass(frozen=True, slots=True)
class _Record:
    """A dataclass in Python (fields from :data:`_FIELDS`), an object in JSON."""

    cls: type

    def check(self, value: Any, path: str) -> None:
        if type(value) is not self.cls:
            raise _Invalid(path, f"must be a {self.cls.__name__}, not {_shown(value)}")
        for name, kind in _FIELDS[self.cls]:
            kind.check(getattr(value, name), _join(path, name))

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _Invalid(path, f"must be a JSON object, not {_shown(value)}")
        values = {}
        for name, kind in _FIELDS[self.cls]:
            if name not in value:
                if type(kind) is _Added:
                    values[name] = kind.default
                    continue
                raise _Invalid(_join(path, name), "is missing")
            values[name] = kind.from_json(value[name], _join(path, name))
        return self.cls(**values)


_TEXT = _Scalar("a string", _is_text)
def _is_name(value: Any) -> bool:
    return _is_text(value) and value != ""


_NAME = _Scalar("a non-empty string", _is_name)
_COUNT = _Scalar(f"an integer 0..{MAX_COUNT}", lambda v: type(v) is int and 0 <= v <= MAX_COUNT)
_SEQ_KIND = _Scalar(f"an integer 0..{MAX_SEQ}", lambda v: type(v) is int and 0 <= v <= MAX_SEQ)
_PORT = _Scalar("an integer 0..65535", lambda v: type(v) is int and 0 <= v <= 65535)
_SECRET = _Scalar("a string", _is_text, secret=True)
_BOOL = _Scalar("a boolean", lambda v: type(v) is bool)
_BYTES = _Scalar("bytes", lambda v: type(v) is bytes)
_ROUTING = _Scalar(
    " or ".join(map(repr, ROUTING_TYPES)), lambda v: type(v) is str and v in ROUTING_TYPES
)
_FILTERS = _Optional(_Tuple(_TEXT))
#: what a CHANGE or RECORD entry does to its entity
CHANGE_OPS = ("create", "delete")
_CHANGE_OP = _Scalar(" or ".join(map(repr, CHANGE_OPS)), lambda v: type(v) is str and v in CHANGE_OPS)

# Every record and event: its fields, in dataclass order, and what each may hold.
_FIELDS: dict[type, tuple[tuple[str, Any], ...]] = {
    Binding: (
        ("id", _NAME), ("address", _NAME), ("queue", _NAME), ("routing_type", _ROUTING),
        ("filter", _Optional(_TEXT)), ("consumers", _COUNT), ("consumer_filters", _FILTERS),
        ("hops", _COUNT), ("origin", _NAME), ("durable", _BOOL),
        # (a kind this version does not know, from a newer peer, reads as "")
        ("kind", _Added(_TEXT, "")),
    ),
    Member: (("node_id", _NAME), ("name", _TEXT), ("host", _TEXT), ("port", _PORT)),
    Hello: (
        ("node_id", _NAME), ("name", _TEXT), ("cluster", _NAME), ("user", _TEXT),
        ("password", _SECRET), ("max_hops", _COUNT), ("host", _TEXT), ("port", _PORT),
    ),
    Welcome: (
        ("node_id", _NAME), ("name", _TEXT), ("scale_down_group", _Added(_Optional(_TEXT))),
        ("version", _Added(_TEXT, "1.0")),
    ),
    Refused: (("code", _NAME), ("reason", _TEXT)),
    Bindings: (("bindings", _Tuple(_Record(Binding), unique="id")),),
    BindingAdded: (("binding", _Record(Binding)),),
    BindingRemoved: (("id", _NAME),),
    Consumers: (("id", _NAME), ("count", _COUNT), ("filters", _FILTERS)),
    Topology: (("nodes", _Tuple(_Record(Member), unique="node_id")),),
    MessageFrame: (
        ("seq", _SEQ_KIND), ("route", _Tuple(_Pair((_NAME, _NAME)))),
        ("duplicate_id", _Optional(_BYTES)), ("body", _BYTES),
        ("create", _Added(_Optional(_Record(Binding)))),
    ),
    Ack: (("seqs", _Tuple(_SEQ_KIND)),),
    Nack: (("seq", _SEQ_KIND), ("reason", _TEXT)),
    Ping: (),
    Pong: (),
    Goodbye: (("reason", _TEXT),),
    Change: (("seq", _SEQ_KIND), ("op", _CHANGE_OP), ("entity", _Record(Binding))),
    ChangeResult: (("seq", _SEQ_KIND), ("ok", _BOOL), ("reason", _TEXT)),
    RecordEntry: (("seq", _SEQ_KIND), ("op", _CHANGE_OP), ("entity", _Record(Binding))),
    Record: (("entries", _Tuple(_Record(RecordEntry))), ("full", _BOOL)),
}
_ROUTE = _FIELDS[MessageFrame][1][1]
_DUPLICATE_ID = "dup"
_CREATE = "create"


def _local_invalid(what: str, exc: _Invalid) -> LocalProtocolError:
    return LocalProtocolError(f"{what}: field {exc.path!r} {exc.problem}", code=_INVALID)


def _remote_malformed(frame: str, exc: _Invalid) -> RemoteProtocolError:
    where = f"key {exc.path!r}" if exc.path else "payload"
    return RemoteProtocolError(f"{frame} frame: {where} {exc.problem}", code=_MALFORMED)


def _message_ok(event: MessageFrame) -> bool:
    """The hot path's quick check of a MessageFrame (False: let the generic check say why)."""
    seq, route, dup = event.seq, event.route, event.duplicate_id
    return (
        event.create is None
        and type(seq) is int and 0 <= seq <= MAX_SEQ and type(event.body) is bytes
        and (dup is None or type(dup) is bytes) and type(route) is tuple
        and all(
            type(pair) is tuple and len(pair) == 2 and _is_name(pair[0]) and _is_name(pair[1])
            for pair in route
        )
    )


def _check_event(event: Any) -> None:
    """Raise LocalProtocolError unless every field of ``event`` holds what it may."""
    cls = type(event)
    if cls is MessageFrame and _message_ok(event):
        return
    try:
        _Record(cls).check(event, "")
    except _Invalid as exc:
        raise _local_invalid(f"{cls.__name__} event", exc) from None
    if cls is Refused and event.code not in REFUSED_CODES:
        raise LocalProtocolError(
            f"Refused event: code {event.code!r} is not one of {sorted(REFUSED_CODES)}",
            code=_INVALID,
        )


def _jsonable(value: Any) -> Any:
    """A checked record or event as JSON-ready lists and dicts."""
    if type(value) is tuple:
        return [_jsonable(item) for item in value]
    spec = _FIELDS.get(type(value))
    if spec is not None:
        return {name: _jsonable(getattr(value, name)) for name, _ in spec}
    return value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dump(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode("utf-8")


_JSON_KINDS = {
    list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
    type(None): "null",
}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


# One decoder for every frame (json.loads would build one per call).
_JSON = json.JSONDecoder(parse_constant=_no_constant)


def _load_object(frame: str, raw: bytes, what: str = "payload") -> dict:
    """``raw`` as a JSON object, or RemoteProtocolError naming ``frame`` and ``what``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"{frame} frame: {what} is not valid UTF-8 (byte {exc.start})", code=_MALFORMED
        ) from None
    try:
        obj = _JSON.decode(text)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RemoteProtocolError(
            f"{frame} frame: {what} is not valid JSON ({detail})", code=_MALFORMED
        ) from None
    if type(obj) is not dict:
        raise RemoteProtocolError(
            f"{frame} frame: {what} must be a JSON object, not {_JSON_KINDS[type(obj)]}",
            code=_MALFORMED,
        )
    return obj


def encode_binding(binding: Binding) -> dict:
    """``binding`` as the JSON object BINDINGS and BINDING_ADDED carry.

    Raises LocalProtocolError (code ``invalid-event``) when a field is invalid.
    """
    try:
        _Record(Binding).check(binding, "")
    except _Invalid as exc:
        raise _local_invalid("Binding", exc) from None
    return _jsonable(binding)


def decode_binding(obj: Any) -> Binding:
    """The :class:`Binding` a JSON object describes (RemoteProtocolError if it is not one)."""
    try:
        return _Record(Binding).from_json(obj, "")
    except _Invalid as exc:
        raise _remote_malformed("binding", exc) from None


# -- payloads --------------------------------------------------------------------


def _encode_payload(event: Any) -> bytes | list[bytes]:
    cls = type(event)
    if cls is MessageFrame:
        dup = event.duplicate_id
        fields = {
            "route": [list(pair) for pair in event.route],
            _DUPLICATE_ID: None if dup is None else base64.b64encode(dup).decode("ascii"),
        }
        if event.create is not None:
            fields[_CREATE] = _jsonable(event.create)
        header = _dump(fields)
        if len(header) > MAX_MESSAGE_HEADER_BYTES:
            raise LocalProtocolError(
                f"MessageFrame event: routing header of {len(header)} bytes exceeds "
                f"MAX_MESSAGE_HEADER_BYTES {MAX_MESSAGE_HEADER_BYTES}",
                code=_TOO_LARGE,
            )
        return [_MESSAGE_FIXED.pack(event.seq, len(header)), header, event.body]
    if cls is Ack:
        if len(event.seqs) > MAX_ACK_SEQS:
            raise LocalProtocolError(
                f"Ack event: {len(event.seqs)} sequence numbers exceed MAX_ACK_SEQS "
                f"{MAX_ACK_SEQS}; send several Acks",
                code=_TOO_LARGE,
            )
        return struct.pack(f">I{len(event.seqs)}Q", len(event.seqs), *event.seqs)
    if cls is Nack:
        return _SEQ.pack(event.seq) + event.reason.encode("utf-8")
    if cls is Ping or cls is Pong:
        return b""
    return _dump(_jsonable(event))


def encode_frame(event: Event) -> bytes:
    """One frame carrying ``event``, whatever the state (no preamble).

    Raises LocalProtocolError (code ``invalid-event`` or ``frame-too-large``)
    when the event's fields do not hold what the protocol allows.  Adapters use
    :meth:`LinkConnection.send`, which also enforces the state tables.
    """
    cls = type(event)
    frame_type = _FRAME_OF.get(cls)
    if frame_type is None:
        raise LocalProtocolError(f"{_shown(event)} is not a cluster link event", code=_INVALID)
    _check_event(event)
    payload = _encode_payload(event)
    parts = payload if isinstance(payload, list) else [payload]
    length = 1 + sum(len(part) for part in parts)
    limit = _limit(frame_type)
    if length > limit:
        raise LocalProtocolError(
            f"{cls.__name__} event: frame of {length} bytes exceeds the {frame_type.name} "
            f"limit of {limit}",
            code=_TOO_LARGE,
        )
    return b"".join([_HEADER.pack(length, frame_type), *parts])


def _limit(frame_type: int) -> int:
    return MAX_FRAME_BYTES if frame_type == FrameType.MESSAGE else MAX_CONTROL_BYTES


def _take(buf: bytearray, start: int, end: int) -> bytes:
    """``buf[start:end]`` as bytes, copied once."""
    with memoryview(buf) as view:
        return bytes(view[start:end])


def _decode_json(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Any:
    name = frame_type.name
    obj = _load_object(name, _take(buf, start, end))
    try:
        return _Record(_EVENT_OF[frame_type]).from_json(obj, "")
    except _Invalid as exc:
        raise _remote_malformed(name, exc) from None


def _fast_route(value: Any) -> tuple[tuple[str, str], ...] | None:
    """A well-formed route as tuples, quickly (the hot path), else None."""
    if type(value) is not list:
        return None
    for pair in value:
        if type(pair) is not list or len(pair) != 2:
            return None
        if not (_is_name(pair[0]) and _is_name(pair[1])):
            return None
    return tuple(map(tuple, value))


def _decode_message(frame_type: FrameType, buf: bytearray, start: int, end: int) -> MessageFrame:
    fixed = _MESSAGE_FIXED.size
    if end - start < fixed:
        raise RemoteProtocolError(
            f"MESSAGE frame: payload of {end - start} bytes is shorter than its "
            f"{fixed}-byte fixed part",
            code=_MALFORMED,
        )
    seq, header_length = _MESSAGE_FIXED.unpack_from(buf, start)
    if header_length > MAX_MESSAGE_HEADER_BYTES:
        raise RemoteProtocolError(
            f"MESSAGE frame: routing header of {header_length} bytes exceeds "
            f"MAX_MESSAGE_HEADER_BYTES {MAX_MESSAGE_HEADER_BYTES}",
            code=_TOO_LARGE,
        )
    body_start = start + fixed + header_length
    if body_start > end:
        raise RemoteProtocolError(
            f"MESSAGE frame: routing header of {header_length} bytes overruns the "
            f"{end - start}-byte payload",
            code=_MALFORMED,
        )
    header = _load_object("MESSAGE", _take(buf, start + fixed, body_start), "routing header")
    try:
        if "route" not in header:
            raise _Invalid("route", "is missing")
        if _DUPLICATE_ID not in header:
            raise _Invalid(_DUPLICATE_ID, "is missing")
        route = _fast_route(header["route"])
        if route is None:  # something is wrong: let the generic check say what
            route = _ROUTE.from_json(header["route"], "route")
        dup = _Optional(_TEXT).from_json(header[_DUPLICATE_ID], _DUPLICATE_ID)
        if dup is not None:
            try:
                dup = base64.b64decode(dup, validate=True)
            except (binascii.Error, ValueError):
                raise _Invalid(_DUPLICATE_ID, "must be base64 or null") from None
        create = header.get(_CREATE)
        if create is not None:
            create = _Record(Binding).from_json(create, _CREATE)
    except _Invalid as exc:
        raise _remote_malformed("MESSAGE", exc) from None
    return MessageFrame(seq, route, dup, _take(buf, body_start, end), create)


def _decode_ack(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Ack:
    size = end - start
    count = _LENGTH.unpack_from(buf, start)[0] if size >= 4 else -1
    if count < 0 or size != 4 + 8 * count:
        raise RemoteProtocolError(
            f"ACK frame: payload of {size} bytes is not a count and that many u64 "
            "sequence numbers",
            code=_MALFORMED,
        )
    return Ack(struct.unpack_from(f">{count}Q", buf, start + 4))


def _decode_nack(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Nack:
    if end - start < 8:
        raise RemoteProtocolError(
            f"NACK frame: payload of {end - start} bytes is shorter than its sequence number",
            code=_MALFORMED,
        )
    try:
        reason = _take(buf, start + 8, end).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"NACK frame: reason is not valid UTF-8 (byte {exc.start})", code=_MALFORMED
        ) from None
    return Nack(_SEQ.unpack_from(buf, start)[0], reason)


def _decode_empty(frame_type: FrameType, buf: bytearray, start: int, end: int) -> Ping | Pong:
    if end != start:
        raise RemoteProtocolError(
            f"{frame_type.name} frame: payload must be empty, not {end - start} bytes",
            code=_MALFORMED,
        )
    return _EVENT_OF[frame_type]()


_DECODERS: dict[FrameType, Callable[[FrameType, bytearray, int, int], Any]] = {
    t: _decode_json for t in FrameType
} | {
    FrameType.MESSAGE: _decode_message,
    FrameType.ACK: _decode_ack,
    FrameType.NACK: _decode_nack,
    FrameType.PING: _decode_empty,
    FrameType.PONG: _decode_empty,
}


# -- the connection --------------------------------------------------------------------


class LinkConnection:
    """One end of one cluster link, as a sans-IO state machine.

    ``role`` is :attr:`Role.CLIENT` (the bridge that connects) or
    :attr:`Role.SERVER` (the acceptor's side); the strings ``"CLIENT"`` and
    ``"SERVER"`` work too.
    """

    __slots__ = ("_role", "_state", "_buffer", "_error", "_peer_version")

    def __init__(self, role: Role | str):
        self._role = Role(role)
        self._state = INITIAL_STATES[self._role]
        self._buffer = bytearray()
        self._error: RemoteProtocolError | None = None
        self._peer_version: tuple[int, int] | None = None

    @property
    def role(self) -> Role:
        """Which end of the link this is."""
        return self._role

    @property
    def state(self) -> LinkState:
        """The combined state (see :data:`SEND_TRANSITIONS` / :data:`RECEIVE_TRANSITIONS`)."""
        return self._state

    @property
    def closed(self) -> bool:
        """True once a Refused or Goodbye went either way, or after :meth:`abort`."""
        return self._state is LinkState.CLOSED

    @property
    def error(self) -> RemoteProtocolError | None:
        """The error that broke the connection, if any."""
        return self._error

    @property
    def peer_version(self) -> tuple[int, int] | None:
        """A server's view of the client's (major, minor), once its preamble arrived."""
        return self._peer_version

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete preamble or frame."""
        return len(self._buffer)

    # -- sending ------------------------------------------------------------------

    def send(self, event: Event) -> bytes:
        """The bytes that carry ``event`` (the preamble first with a client's Hello).

        Raises LocalProtocolError when this role may not send it in this state,
        when the connection is closed or broken (then only Refused / Goodbye,
        if the tables allow them), or when the event is invalid; the state is
        unchanged then.
        """
        cls = type(event)
        if cls not in _FRAME_OF:
            raise LocalProtocolError(f"{_shown(event)} is not a cluster link event", code=_INVALID)
        state = self._state
        if state is LinkState.CLOSED:
            raise LocalProtocolError(
                f"cannot send {cls.__name__}: the connection is closed", code=_CLOSED
            )
        allowed = SEND_TRANSITIONS[self._role].get(state, {})
        if cls not in allowed:
            raise LocalProtocolError(
                f"a {self._role.value} may not send {cls.__name__} in state {state.value}",
                code=_NOT_ALLOWED,
            )
        if self._error is not None and cls not in (Refused, Goodbye):
            raise LocalProtocolError(
                f"cannot send {cls.__name__}: the connection is broken ({self._error}); "
                "only Refused or Goodbye may be sent",
                code=_NOT_ALLOWED,
            )
        data = encode_frame(event)
        if state is LinkState.IDLE:
            data = PREAMBLE + data
        self._state = allowed[cls]
        if self._state is LinkState.CLOSED:
            self._buffer = bytearray()
        return data

    def abort(self, error: Exception) -> bytes:
        """Close after ``error``: the bytes of the closing frame this state allows, or b"".

        A server before OPEN sends ``Refused`` (code ``"version"`` for a version
        error, else ``"protocol"``); in OPEN, and for a client awaiting WELCOME,
        it is ``Goodbye``.  The reason is the error's text, cut to
        :data:`MAX_ABORT_REASON_CHARS`.  The connection is CLOSED afterwards.
        """
        if self._state is LinkState.CLOSED:
            return b""
        allowed = SEND_TRANSITIONS[self._role].get(self._state, {})
        reason = str(error)[:MAX_ABORT_REASON_CHARS]
        if Refused in allowed:
            code = "version" if getattr(error, "code", None) == _VERSION else "protocol"
            data = encode_frame(Refused(code, reason))
        elif Goodbye in allowed:
            data = encode_frame(Goodbye(reason))
        else:
            data = b""
        self._state = LinkState.CLOSED
        self._buffer = bytearray()
        return data

    # -- receiving ----------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes from the peer (any slice of the stream); return the events completed.

        On a closed connection the bytes are ignored and the answer is ``[]``.
        Raises RemoteProtocolError when the peer broke the protocol; its
        ``events`` attribute holds the events this call completed before the
        offending bytes.  Later calls raise the same error, ``events`` empty.
        """
        if self._state is LinkState.CLOSED:
            return []
        error = self._error
        if error is not None:
            error.events = []  # type: ignore[attr-defined]
            raise error
        self._buffer += data
        events: list[Event] = []
        try:
            self._parse(events)
        except RemoteProtocolError as exc:
            exc.events = events  # type: ignore[attr-defined]
            self._error = exc
            self._buffer = bytearray()
            raise
        if self._state is LinkState.CLOSED:
            self._buffer = bytearray()
        return events

    def _parse(self, events: list[Event]) -> None:
        buf = self._buffer
        pos = 0
        try:
            if self._state is LinkState.AWAITING_PREAMBLE:
                if not self._read_preamble(buf):
                    return
                pos = PREAMBLE_BYTES
            size = len(buf)
            while self._state is not LinkState.CLOSED and size - pos >= 4:
                length = _LENGTH.unpack_from(buf, pos)[0]
                if length > MAX_FRAME_BYTES:
                    raise RemoteProtocolError(
                        f"frame length {length} exceeds MAX_FRAME_BYTES {MAX_FRAME_BYTES}",
                        code=_TOO_LARGE,
                    )
                if length == 0:
                    raise RemoteProtocolError(
                        "frame length 0 leaves no room for the type byte", code=_MALFORMED
                    )
                if size - pos < _FRAME_HEADER_BYTES:
                    return
                frame_type = self._frame_type(buf[pos + 4], length)
                end = pos + 4 + length
                if end > size:
                    return
                event = _DECODERS[frame_type](frame_type, buf, pos + _FRAME_HEADER_BYTES, end)
                pos = end
                self._state = RECEIVE_TRANSITIONS[self._role][self._state][type(event)]
                events.append(event)
        finally:
            if pos:
                del buf[:pos]

    def _frame_type(self, type_byte: int, length: int) -> FrameType:
        """The frame type of a header, once it is known to be welcome here and small enough."""
        cls = _EVENT_OF.get(type_byte)
        if cls is None:
            raise RemoteProtocolError(f"unknown frame type {type_byte}", code=_UNKNOWN_FRAME)
        frame_type = _FRAME_OF[cls]
        if cls not in RECEIVE_TRANSITIONS[self._role].get(self._state, {}):
            sender = "server" if self._role is Role.CLIENT else "client"
            raise RemoteProtocolError(
                f"{frame_type.name} frame from the {sender} is not allowed in state "
                f"{self._state.value}",
                code=_UNEXPECTED,
            )
        limit = _limit(frame_type)
        if length > limit:
            raise RemoteProtocolError(
                f"{frame_type.name} frame length {length} exceeds its limit {limit}",
                code=_TOO_LARGE,
            )
        return frame_type

    def _read_preamble(self, buf: bytearray) -> bool:
        """Check what has arrived of the preamble; True once all of it has (state moves on)."""
        seen = bytes(buf[:PREAMBLE_BYTES])
        magic = seen[: len(MAGIC)]
        if magic != MAGIC[: len(magic)]:
            raise RemoteProtocolError(
                f"not a cluster link: it starts with {_shown(seen)}, not {MAGIC!r}",
                code=_NOT_A_LINK,
            )
        if len(seen) > len(MAGIC) and seen[len(MAGIC)] != VERSION[0]:
            raise RemoteProtocolError(
                f"cluster link major version {seen[len(MAGIC)]} is not supported "
                f"(this node speaks {VERSION[0]}.{VERSION[1]})",
                code=_VERSION,
            )
        if len(seen) < PREAMBLE_BYTES:
            return False
        self._peer_version = (seen[4], seen[5])
        self._state = LinkState.AWAITING_HELLO
        return True
