"""What travels on a cluster link: the frame types and a frozen dataclass per record and event.

An event is what one frame carries, both ways:
:meth:`~.connection.LinkConnection.send` takes one and ``receive_data``
returns them.  :mod:`.connection` maps each event class to its frame type
and back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "FrameType",
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
    "Event",
]


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
    message; this module never looks inside it.  (1.3: a large message's content may
    be inside it, inline, marked ``core.large.inline`` in its native entries; see
    docs/cluster-protocol.md, MESSAGE.)
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
