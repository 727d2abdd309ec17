"""In-process CORE clients for unit tests of the broker's CORE adapter.

:class:`CoreClient` drives one :class:`~junction.brokercore.core_server.CoreProtocol`
over a :class:`~twisted.internet.testing.StringTransport`, writing packets with
the project's own codec and reading what the server wrote with a client-side
:class:`~junction.protocols.core.CoreCodec`.  The broker is a
:class:`tests.unit.stomp_fixtures.Broker` (in memory) or a :class:`JournalNode`
(a real journal on the fault-injecting file layer, its writer inline, so a
sync happens when the clock runs the write): no sockets, no sleeps.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from junction.brokercore.core_server import CoreProtocol
from junction.brokercore.journal import FaultyFiles, Journal
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.config.model import Acceptor, BrokerConfig
from junction.protocols.core import HANDSHAKE, CoreCodec, MessageHeaders, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.versions import CURRENT_VERSION

__all__ = ["ACCEPTOR", "CoreClient", "JournalNode", "create_session", "message"]

ACCEPTOR = Acceptor(name="core", scheme="tcp", host="127.0.0.1", port=0, protocols=frozenset({"CORE"}))
SESSION = 10


def create_session(
    channel: int = SESSION,
    *,
    version: int = CURRENT_VERSION,
    user: str | None = None,
    password: str | None = None,
    name: str | None = None,
    auto_commit_sends: bool = True,
    auto_commit_acks: bool = True,
    window: int = -1,
    pre_ack: bool = False,
    xa: bool = False,
    client_id: str | None = None,
) -> p.CreateSessionV2:
    return p.CreateSessionV2(
        name or f"session-{channel}", channel, version, user, password, 102400, xa,
        auto_commit_sends, auto_commit_acks, window, pre_ack, None, client_id,
    )


def message(body: bytes = b"hello", address: str | None = "q", *, durable: bool = False, properties=None, **fields) -> tuple:
    """``(body, headers)`` of a message to send."""
    return body, MessageHeaders(address=address, durable=durable, timestamp=fields.pop("timestamp", 1_700_000_000_000),
                                properties=properties, **fields)


class JournalNode:
    """A started broker with a real journal (inline writer) on :class:`FaultyFiles`."""

    def __init__(self, tmp_path, fs: FaultyFiles | None = None, *, security=None, config_extra=None):
        self.clock = Clock()
        self.fs = fs if fs is not None else FaultyFiles()
        self.config = BrokerConfig(
            persistence_enabled=True, security_enabled=False, base_dir=str(tmp_path), **(config_extra or {})
        )
        self.journal = Journal(str(tmp_path / "journal"), files=self.fs, writer="inline", reactor=self.clock, preallocate=False)
        self.security = security if security is not None else SecurityManager(None, (), enabled=False)
        self.server = BrokerServer(self.config, reactor=self.clock, security=self.security, journal=self.journal)
        self.server.start()

    def run(self, seconds: float = 0) -> None:
        self.clock.advance(seconds)
        self.clock.advance(0)


class CoreClient:
    """One CORE connection driven by hand against ``node`` (a Broker or a JournalNode)."""

    def __init__(self, node, *, acceptor=ACCEPTOR, limits=None, handshake: bool = True):
        self.node = node
        self.protocol = CoreProtocol(node.server, acceptor=acceptor, limits=limits, reactor=node.clock)
        self.transport = StringTransport()
        self.codec = CoreCodec(server=False)
        self.lost = False
        self.protocol.makeConnection(self.transport)
        if handshake:
            self.protocol.dataReceived(HANDSHAKE)

    # -- writing ------------------------------------------------------------------------------------
    def send(self, *packets, run: bool = True) -> list:
        """Write ``packets`` in one read; what the server wrote after the clock ran (``run``)."""
        return self.send_raw(b"".join(encode_packet(packet) for packet in packets), run=run)

    def send_raw(self, data: bytes, *, run: bool = True) -> list:
        self.protocol.dataReceived(data)
        if run:
            self.node.run()
        return self.take()

    def open(self, channel: int = SESSION, **kwargs) -> p.Packet:
        """PING, SUBSCRIBE_TOPOLOGY_V2, CREATESESSION: the answer to the CREATESESSION."""
        version = kwargs.get("version", CURRENT_VERSION)
        got = self.send(p.Ping(60_000), p.SubscribeTopologyV2(False, version), create_session(channel, **kwargs))
        assert [type(x) for x in got[:2]] == [p.Ping, p.ClusterTopologyV4 if version >= 131 else p.ClusterTopologyV2], got
        return got[-1]

    def session(self, channel: int = SESSION, **kwargs) -> int:
        """Open a session (it must be accepted); its channel."""
        answer = self.send(create_session(channel, **kwargs))
        assert answer == [p.CreateSessionResponse(CURRENT_VERSION)], answer
        return channel

    # -- reading ------------------------------------------------------------------------------------
    def take(self) -> list:
        """The packets the server wrote since the last call."""
        data = self.transport.value()
        self.transport.clear()
        return self.codec.receive_data(data) if data else []

    @property
    def closed(self) -> bool:
        """The server asked the transport to close."""
        return self.transport.disconnecting

    def lose(self) -> None:
        """Deliver connectionLost, as the reactor would after a close."""
        if not self.lost:
            self.lost = True
            self.protocol.connectionLost(Failure(ConnectionError("closed")))
            self.node.run()
