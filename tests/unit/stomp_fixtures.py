"""In-memory broker and STOMP client helpers for unit tests.

Everything runs on a :class:`twisted.internet.task.Clock` and
:class:`twisted.internet.testing.StringTransport`: no sockets, no sleeps.
Deliveries are scheduled with ``callLater(0)``, so call :meth:`Broker.run`
(``clock.advance``) after anything that should deliver.

* :class:`Broker` -- a started :class:`BrokerServer` with persistence off, plus
  ``session()`` for broker-core tests and ``client()`` for STOMP tests.
* :class:`StompClient` -- one STOMP connection: writes client frames and
  parses what the server wrote, both with the project's own codec in client
  mode (``StompCodec(server=False)``).
* :class:`Recorder` -- a delivery callback for ``ServerSession.create_consumer``.
* :class:`FakeUserStore` -- a tiny user store for :class:`SecurityManager`.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from junction.brokercore.queue import QueueDefinition
from junction.brokercore.security import Principal, SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.brokercore.stomp_server import StompProtocol
from junction.config.model import (
    Acceptor,
    AddressConfig,
    AddressSettings,
    BrokerConfig,
    Limits,
    QueueConfig,
    SecuritySetting,
)
from junction.model.message import Message, RoutingType
from junction.protocols.stomp import Frame, HeartBeat, StompCodec

__all__ = [
    "ACCEPTOR",
    "Broker",
    "FakeUserStore",
    "Recorder",
    "StompClient",
    "AddressConfig",
    "AddressSettings",
    "Limits",
    "Message",
    "QueueConfig",
    "QueueDefinition",
    "RoutingType",
    "SecuritySetting",
]

ACCEPTOR = Acceptor(
    name="stomp",
    scheme="tcp",
    host="127.0.0.1",
    port=0,
    anycast_prefix="/queue/",
    multicast_prefix="/topic/",
)


class FakeUserStore:
    """user -> (password, roles); the two methods SecurityManager needs."""

    def __init__(self, users: dict[str, tuple[str, set[str]]]):
        self.users = users

    def authenticate(self, user: str, password: str) -> bool:
        return user in self.users and self.users[user][0] == password

    def roles_of(self, user: str) -> frozenset:
        return frozenset(self.users.get(user, ("", set()))[1])


class Recorder:
    """Delivery callback that remembers every ref handed over."""

    def __init__(self):
        self.refs = []

    def __call__(self, server_consumer, ref):
        self.refs.append(ref)

    @property
    def bodies(self) -> list[bytes]:
        return [ref.message.body for ref in self.refs]

    def clear(self) -> None:
        self.refs.clear()


class Broker:
    """A started in-memory broker node on a Clock."""

    def __init__(
        self,
        *,
        address_settings=(),
        addresses=(),
        users: dict | None = None,
        security_settings=(),
        limits: Limits | None = None,
    ):
        self.clock = Clock()
        self.limits = limits
        self.config = BrokerConfig(
            persistence_enabled=False,
            security_enabled=users is not None,
            address_settings=tuple(address_settings),
            addresses=tuple(addresses),
            security_settings=tuple(security_settings),
        )
        if users is None:
            self.security = SecurityManager(None, (), enabled=False)
        else:
            self.security = SecurityManager(FakeUserStore(users), tuple(security_settings))
        self.server = BrokerServer(self.config, reactor=self.clock, security=self.security)
        self.server.start()

    # -- time -----------------------------------------------------------------
    def run(self, seconds: float = 0) -> None:
        """Advance the clock, running every call due (deliveries use callLater(0))."""
        self.clock.advance(seconds)

    # -- broker core ------------------------------------------------------------
    def session(self, client_id: str | None = None, user: str | None = None) -> ServerSession:
        info = ConnectionInfo("test", "test:0", client_id=client_id)
        return ServerSession(self.server, Principal(user), info)

    def queue(self, name: str, address: str | None = None, routing_type=RoutingType.ANYCAST, **kw):
        """Create a queue (and its address)."""
        return self.server.create_queue(
            QueueDefinition(name=name, address=address or name, routing_type=routing_type, **kw)
        )

    def send(self, session: ServerSession, address: str, body: bytes = b"x", *, routing_type=RoutingType.ANYCAST, **fields):
        """Send one message; returns the session's Deferred."""
        properties = fields.pop("properties", {})
        message = Message(address=address, body=body, properties=dict(properties), **fields)
        return session.send(message, routing_type=routing_type)

    # -- STOMP ------------------------------------------------------------------
    def client(self, limits: Limits | None = None, acceptor: Acceptor = ACCEPTOR) -> "StompClient":
        return StompClient(self, limits=limits if limits is not None else self.limits, acceptor=acceptor)


def _header_name(key: str) -> str:
    """Keyword argument to header name: ``heart_beat`` -> ``heart-beat``.

    Names that start with ``_`` or contain a dot (``_AMQ_DUPL_ID``,
    ``activemq.prefetchSize``; pass them as ``**{...}``) are used as they are.
    """
    if key.startswith("_") or "." in key:
        return key
    return key.replace("_", "-")


class StompClient:
    """One STOMP connection driven by hand.

    Keyword arguments of :meth:`connect`, :meth:`send` and :meth:`subscribe`
    become headers (see :func:`_header_name`).
    """

    def __init__(self, broker: Broker, *, limits=None, acceptor=ACCEPTOR):
        self.broker = broker
        self.protocol = StompProtocol(broker.server, acceptor=acceptor, limits=limits, reactor=broker.clock)
        self.transport = StringTransport()
        self.codec = StompCodec(server=False)
        self.received: list[Frame] = []
        self.heartbeats = 0
        self.lost = False
        self.protocol.makeConnection(self.transport)

    # -- writing ----------------------------------------------------------------
    def send_frame(self, command: str, headers=(), body: bytes = b"", *, content_length: bool = False) -> None:
        frame = Frame(command, headers, body)
        self.send_raw(self.codec.send(frame, content_length=content_length))

    def send_raw(self, data: bytes) -> None:
        self.protocol.dataReceived(data)
        self.broker.run()

    def connect(self, version: str | None = "1.2", *, command: str = "CONNECT", **headers) -> Frame:
        """CONNECT and return the server's answer (CONNECTED or ERROR)."""
        hdrs = []
        if version is not None:
            hdrs.append(("accept-version", version))
        hdrs.append(("host", "localhost"))
        hdrs.extend((_header_name(k), v) for k, v in headers.items())
        self.send_frame(command, hdrs)
        frames = self.frames()
        assert frames, "no answer to CONNECT"
        answer = frames[-1]
        if answer.command == "CONNECTED":
            self.codec.set_version(answer.get("version", "1.0"))
        return answer

    def send(self, destination: str, body: bytes = b"", **headers) -> None:
        hdrs = [("destination", destination)]
        hdrs.extend((_header_name(k), str(v)) for k, v in headers.items())
        self.send_frame("SEND", hdrs, body)

    def subscribe(self, destination: str, sub_id: str = "0", ack: str = "auto", **headers) -> None:
        hdrs = [("destination", destination), ("id", sub_id), ("ack", ack)]
        hdrs.extend((_header_name(k), str(v)) for k, v in headers.items())
        self.send_frame("SUBSCRIBE", hdrs)

    # -- reading ----------------------------------------------------------------
    def _pump(self) -> None:
        data = self.transport.value()
        self.transport.clear()
        if data:
            for event in self.codec.receive_data(data):
                if isinstance(event, HeartBeat):
                    self.heartbeats += 1
                else:
                    self.received.append(event)

    def frames(self, command: str | None = None) -> list[Frame]:
        """Frames written since the last call (optionally only one command)."""
        self.broker.run()
        self._pump()
        frames, self.received = self.received, []
        if command is not None:
            others = [f for f in frames if f.command != command]
            assert not others, f"unexpected frames {others}"
        return frames

    def messages(self) -> list[Frame]:
        return self.frames("MESSAGE")

    def one(self, command: str) -> Frame:
        frames = self.frames()
        assert len(frames) == 1 and frames[0].command == command, frames
        return frames[0]

    @property
    def closed(self) -> bool:
        """The server asked the transport to close."""
        return self.transport.disconnecting

    def lose(self) -> None:
        """Deliver connectionLost, as the reactor would after a close."""
        if not self.lost:
            self.lost = True
            self.protocol.connectionLost(Failure(ConnectionError("closed")))
            self.broker.run()
