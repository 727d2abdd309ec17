"""Connection-level packets: PING, DISCONNECT*, EXCEPTION, NULL_RESPONSE, PACKETS_CONFIRMED,
session creation and reattachment, CHECK_FOR_FAILOVER and the cluster topology.

Channel 0 carries PING, the topology packets and DISCONNECT*; channel 1 the
session-creation packets (their ``channel_id`` defaults to 1).  EXCEPTION,
NULL_RESPONSE and PACKETS_CONFIRMED answer on the channel of what they answer.

Versioned families (DISCONNECT V1-V3, CREATESESSION V1-V2, the topology V1-V4)
are subclasses of the first version, as in Artemis, each a packet type of its
own: dispatch on ``TYPE`` (or the exact class), never on ``isinstance``.
"""

from __future__ import annotations

from dataclasses import field

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.errors import ExceptionType
from junction.protocols.core.packet_types import SESSION_CREATION_CHANNEL, PacketType
from junction.protocols.core.packets.base import (
    BOOL,
    BYTE,
    INT,
    LONG,
    NULLABLE_SIMPLE_STRING,
    NULLABLE_STRING,
    STRING,
    Kind,
    Packet,
    packet,
    wire,
)
from junction.protocols.core.values import TransportConfiguration, read_transport, write_transport
from junction.protocols.core.versions import CURRENT_VERSION

__all__ = [
    "CheckFailover",
    "CheckFailoverReply",
    "ClusterTopology",
    "ClusterTopologyV2",
    "ClusterTopologyV3",
    "ClusterTopologyV4",
    "CreateSession",
    "CreateSessionResponse",
    "CreateSessionV2",
    "Disconnect",
    "DisconnectConsumer",
    "DisconnectConsumerKill",
    "DisconnectReason",
    "DisconnectV2",
    "DisconnectV3",
    "ExceptionMessage",
    "NullResponse",
    "PacketsConfirmed",
    "Ping",
    "ReattachSession",
    "ReattachSessionResponse",
    "SubscribeTopology",
    "SubscribeTopologyV2",
]


def _read_opt_transport(r: Reader) -> TransportConfiguration | None:
    return read_transport(r) if r.read_bool() else None


def _write_opt_transport(w: Writer, tc: TransportConfiguration | None) -> None:
    w.write_bool(tc is not None)
    if tc is not None:
        write_transport(w, tc)


#: A bool "has connector" flag, then a TransportConfiguration when true.
OPT_TRANSPORT = Kind(_read_opt_transport, _write_opt_transport, True)


class DisconnectReason:
    """``DisconnectReason``: the reason byte of DISCONNECT_V3 (-1 when Artemis has none)."""

    NONE = -1
    REDIRECT = 0
    REDIRECT_ON_CRITICAL_ERROR = 1
    SCALE_DOWN = 2
    SCALE_DOWN_ON_CRITICAL_ERROR = 3
    SHUT_DOWN = 4
    SHUT_DOWN_ON_CRITICAL_ERROR = 5


@packet(PacketType.PING)
class Ping(Packet):
    """Liveness, both ways: the client's ``connectionTTL``; the server echoes it."""

    connection_ttl: int = wire(LONG)


@packet(PacketType.DISCONNECT, "server")
class Disconnect(Packet):
    """The server closes the connection (clients before version 125)."""

    node_id: str | None = wire(NULLABLE_SIMPLE_STRING)


@packet(PacketType.DISCONNECT_V2, "server")
class DisconnectV2(Disconnect):
    """DISCONNECT plus the node a scaled-down server's clients should go to (125+)."""

    scale_down_node_id: str | None = wire(NULLABLE_SIMPLE_STRING)


@packet(PacketType.DISCONNECT_V3, "server")
class DisconnectV3(Disconnect):
    """DISCONNECT with a reason and a target: a redirect carries the target's connector (131+)."""

    reason: int = wire(BYTE)
    target_node_id: str | None = wire(NULLABLE_SIMPLE_STRING)
    target_connector: TransportConfiguration | None = wire(OPT_TRANSPORT)


@packet(PacketType.DISCONNECT_CONSUMER, "server")
class DisconnectConsumer(Packet):
    """The server closed a consumer (on its session's channel)."""

    consumer_id: int = wire(LONG)


@packet(PacketType.DISCONNECT_CONSUMER_KILL, "server")
class DisconnectConsumerKill(Packet):
    """The server kills the connection's consumers (management ``closeConsumerConnectionsForAddress``)."""

    node_id: str | None = wire(NULLABLE_SIMPLE_STRING)


@packet(PacketType.EXCEPTION)
class ExceptionMessage(Packet):
    """An error answer: an :class:`~junction.protocols.core.errors.ExceptionType` code and its text.

    ``correlation_id`` is the V2 form's (version 130+), answering a request
    that carries one (SESS_SEND_V2+, SESS_COMMIT_V2, SEND_CONTINUATION_V2); None
    writes the plain form.
    """

    code: int = wire(INT)
    message: str | None = wire(NULLABLE_STRING)
    correlation_id: int | None = wire(LONG, tail=True)

    @property
    def exception_type(self) -> ExceptionType | None:
        """``code`` as an :class:`ExceptionType`, None for a code Artemis does not define."""
        try:
            return ExceptionType(self.code)
        except ValueError:
            return None


@packet(PacketType.NULL_RESPONSE, "server")
class NullResponse(Packet):
    """"Done": the answer to a blocking request.  Version 130+ clients get the
    V2 form, the request's correlation id (-1 for requests that carry none)."""

    correlation_id: int | None = wire(LONG, tail=True)


@packet(PacketType.PACKETS_CONFIRMED)
class PacketsConfirmed(Packet):
    """The confirmation window: the id of the last command the sender has handled."""

    command_id: int = wire(INT)


@packet(PacketType.CREATESESSION, "client")
class CreateSession(Packet):
    """Open a session on channel ``session_channel_id`` (clients before version 131)."""

    name: str = wire(STRING)
    session_channel_id: int = wire(LONG)
    version: int = wire(INT)
    username: str | None = wire(NULLABLE_STRING)
    password: str | None = wire(NULLABLE_STRING)
    min_large_message_size: int = wire(INT)
    xa: bool = wire(BOOL)
    auto_commit_sends: bool = wire(BOOL)
    auto_commit_acks: bool = wire(BOOL)
    confirmation_window_size: int = wire(INT)
    pre_acknowledge: bool = wire(BOOL)
    default_address: str | None = wire(NULLABLE_STRING)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.CREATESESSION_V2, "client")
class CreateSessionV2(CreateSession):
    """CREATESESSION with the JMS client id (131+)."""

    client_id: str | None = wire(NULLABLE_STRING)


@packet(PacketType.CREATESESSION_RESP, "server")
class CreateSessionResponse(Packet):
    """The session is open; the server's version, which the client adopts."""

    server_version: int = wire(INT)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.REATTACH_SESSION, "client")
class ReattachSession(Packet):
    """Reattach a session after a reconnect (only with a confirmation window)."""

    name: str = wire(STRING)
    last_confirmed_command_id: int = wire(INT)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.REATTACH_SESSION_RESP, "server")
class ReattachSessionResponse(Packet):
    """``reattached`` false (and -1) when the session is unknown: the client recreates it."""

    last_confirmed_command_id: int = wire(INT)
    reattached: bool = wire(BOOL)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.CHECK_FOR_FAILOVER, "client")
class CheckFailover(Packet):
    """May the client fail over here from node ``node_id``?"""

    node_id: str | None = wire(NULLABLE_STRING)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.CHECK_FOR_FAILOVER_REPLY, "server")
class CheckFailoverReply(Packet):
    ok_to_failover: bool = wire(BOOL)
    channel_id: int = field(default=SESSION_CREATION_CHANNEL, kw_only=True)


@packet(PacketType.SUBSCRIBE_TOPOLOGY, "client")
class SubscribeTopology(Packet):
    """Ask for topology updates (clients before version 122)."""

    cluster_connection: bool = wire(BOOL)


@packet(PacketType.SUBSCRIBE_TOPOLOGY_V2, "client")
class SubscribeTopologyV2(SubscribeTopology):
    """Ask for topology updates, naming the client's version (the server adopts it)."""

    client_version: int = wire(INT)


@packet(PacketType.CLUSTER_TOPOLOGY, "server")
class ClusterTopology(Packet):
    """A topology member came up (``exit`` false: its connector pair) or left (``exit`` true).

    On the wire (every version)::

        bool exit | String nodeID | [V2+: long uniqueEventID]
        | if not exit: bool+connector primary, bool+connector backup, bool last
        | [V2+: nullable String backupGroupName, read only if bytes remain]
        | [V3+: nullable String scaleDownGroupName] | [V4: int serverVersion]

    The fields of later versions are on the subclasses; in this class they
    are absent.  A member with both connectors None tells a client to use
    the connector it is connected through.
    """

    exit: bool
    node_id: str
    primary: TransportConfiguration | None = None
    backup: TransportConfiguration | None = None
    last: bool = False

    # 1 to 4: which version's fields the wire holds.
    _LEVEL = 1

    @classmethod
    def decode(cls, r: Reader, channel_id: int) -> Packet:
        level = cls._LEVEL
        values: dict = {"exit": r.read_bool(), "node_id": r.read_string()}
        if level >= 2:
            values["unique_event_id"] = r.read_long()
        if not values["exit"]:
            values["primary"] = _read_opt_transport(r)
            values["backup"] = _read_opt_transport(r)
            values["last"] = r.read_bool()
        if level >= 2 and r.pos < r.end:
            values["backup_group_name"] = r.read_nullable_string()
        if level >= 3:
            values["scale_down_group_name"] = r.read_nullable_string()
        if level >= 4:
            values["server_version"] = r.read_int()
        return cls(**values, channel_id=channel_id)

    def encode_body(self, w: Writer) -> None:
        level = self._LEVEL
        w.write_bool(self.exit)
        w.write_string(self.node_id)
        if level >= 2:
            w.write_long(self.unique_event_id)
        if not self.exit:
            _write_opt_transport(w, self.primary)
            _write_opt_transport(w, self.backup)
            w.write_bool(self.last)
        if level >= 2:
            w.write_nullable_string(self.backup_group_name)
        if level >= 3:
            w.write_nullable_string(self.scale_down_group_name)
        if level >= 4:
            w.write_int(self.server_version)


@packet(PacketType.CLUSTER_TOPOLOGY_V2, "server")
class ClusterTopologyV2(ClusterTopology):
    """V2 (122+): an event id (a client ignores older events of a node) and the backup group.

    Artemis sends a node's departure as this type even to V4 clients.
    """

    unique_event_id: int = 0
    backup_group_name: str | None = None

    _LEVEL = 2


@packet(PacketType.CLUSTER_TOPOLOGY_V3, "server")
class ClusterTopologyV3(ClusterTopologyV2):
    """V3 (125+): the scale-down group."""

    scale_down_group_name: str | None = None

    _LEVEL = 3


@packet(PacketType.CLUSTER_TOPOLOGY_V4, "server")
class ClusterTopologyV4(ClusterTopologyV3):
    """V4 (131+): the server's version, which the client adopts."""

    server_version: int = CURRENT_VERSION

    _LEVEL = 4
