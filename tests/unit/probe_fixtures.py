"""A stand-in for a broker core's AMQP opening, for the readiness probe's tests.

:class:`CoreOpening` is sans-IO: the server side of SASL (the project's own
:class:`~junction.protocols.amqp.sasl.SaslServer`, PLAIN and ANONYMOUS) in
front of a qpid-proton server ``Transport``, answering the client's Open with
the properties a Junction broker core sends (``junction:node-id``,
``junction:active``, ``junction:connections``) -- or with whatever a test
asks for: other properties, a refusing Close, silence.

The unit tests pump it against the probe's protocol on a ``StringTransport``;
the integration tests serve it over TCP (:class:`CoreOpeningProtocol`) where
no real broker can play the part yet (a passive backup).
"""

from __future__ import annotations

from proton import Collector, Condition, Connection, Endpoint, Event, Transport, symbol
from twisted.internet.protocol import Factory, Protocol

from junction.protocols.amqp.sasl import (
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslFailed,
    SaslRequired,
    SaslServer,
)
from junction.protocols.errors import RemoteProtocolError

#: what the stand-in does when the client's Open arrives
ANSWER = "answer"  # Open with the properties (then Close when the client closes)
REFUSE = "refuse"  # Open then a Close carrying ``close_condition``
SILENT = "silent"  # nothing: the client waits


class CoreOpening:
    """One connection's server side, up to the Open: SASL, then the Open properties.

    ``users`` maps user name to password for PLAIN; ANONYMOUS is accepted
    when ``anonymous``.  ``properties`` replaces the Junction properties
    entirely when given (None: ``node_id``/``active``/``connections``).
    """

    def __init__(
        self,
        *,
        node_id="node-x",
        active=True,
        connections=1,
        users=None,
        anonymous=True,
        properties=None,
        on_open=ANSWER,
        close_condition=("amqp:connection:forced", "go away"),
        reply_to_close=True,
    ):
        self.users = dict(users if users is not None else {"pool": "secret"})
        self.anonymous = anonymous
        mechanisms = ("PLAIN", "ANONYMOUS") if anonymous else ("PLAIN",)
        self.sasl = SaslServer(mechanisms, self._authenticate)
        if properties is None:
            properties = {
                "junction:node-id": node_id,
                "junction:active": active,
                "junction:connections": connections,
            }
        self.properties = {symbol(k): v for k, v in properties.items()}
        self.on_open = on_open
        self.close_condition = close_condition
        self.reply_to_close = reply_to_close
        self.transport: Transport | None = None
        self.connection: Connection | None = None
        self.collector: Collector | None = None
        self.credentials = None
        self.failed = False
        self.remote_container = None
        self.remote_hostname = None
        self.client_closed = False
        self._out = bytearray()

    def _authenticate(self, credentials):
        self.credentials = credentials
        if credentials.mechanism == "PLAIN":
            return (
                credentials.username
                if self.users.get(credentials.username) == credentials.password
                else None
            )
        if credentials.mechanism == "ANONYMOUS" and self.anonymous:
            return "anonymous"
        return None

    @property
    def finished(self) -> bool:
        """Nothing more will be said: close the socket once :meth:`data_to_send` is written."""
        if self.failed:
            return True
        return self.transport is not None and self.transport.pending() < 0

    def receive_data(self, data: bytes) -> None:
        if self.failed:
            return
        if self.transport is not None:
            self._push(data)
            return
        try:
            events = self.sasl.receive_data(data)
        except RemoteProtocolError:
            self.failed = True
            self._out += self.sasl.data_to_send()
            return
        self._out += self.sasl.data_to_send()
        for event in events:
            if isinstance(event, SaslAuthenticated):
                self._start(event.remaining)
            elif isinstance(event, Passthrough):
                self._push(event.data)
            elif isinstance(event, (SaslFailed, SaslRequired, NoSasl)):
                self.failed = True

    def _start(self, remaining: bytes) -> None:
        transport = Transport(Transport.SERVER)
        connection = Connection()
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self.transport, self.connection, self.collector = transport, connection, collector
        if remaining:
            self._push(remaining)

    def _push(self, data: bytes) -> None:
        if data and self.transport.capacity() > 0:
            self.transport.push(data)
        self._process()

    def _process(self) -> None:
        while True:
            event = self.collector.peek()
            if event is None:
                break
            conn = self.connection
            if event.type == Event.CONNECTION_REMOTE_OPEN:
                self.remote_container = conn.remote_container
                self.remote_hostname = conn.remote_hostname
                if self.on_open == ANSWER:
                    conn.container = "stand-in"
                    conn.properties = dict(self.properties)
                    conn.open()
                elif self.on_open == REFUSE:  # AMQP 1.0 2.4.1: an Open, then the Close saying why
                    conn.container = "stand-in"
                    conn.properties = {symbol("amqp:connection-establishment-failed"): True}
                    conn.open()
                    conn.condition = Condition(*self.close_condition)
                    conn.close()
            elif event.type == Event.CONNECTION_REMOTE_CLOSE:
                self.client_closed = True
                if self.reply_to_close and not conn.state & Endpoint.LOCAL_CLOSED:
                    conn.close()
            self.collector.pop()

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        transport = self.transport
        if transport is not None:
            pending = transport.pending()
            while pending > 0:
                out += bytes(transport.peek(pending))
                transport.pop(pending)
                pending = transport.pending()
        return out


class CoreOpeningProtocol(Protocol):
    """:class:`CoreOpening` over TCP: what it writes goes out; when it is finished, the socket closes."""

    def connectionMade(self):
        self.opening = self.factory.make_opening()
        self.factory.connections.add(self)

    def dataReceived(self, data: bytes):
        self.opening.receive_data(data)
        out = self.opening.data_to_send()
        if out:
            self.transport.write(out)
        if self.opening.finished:
            self.transport.loseConnection()

    def connectionLost(self, reason=None):
        self.factory.connections.discard(self)


class CoreOpeningFactory(Factory):
    """Serves a new :class:`CoreOpening` (built by ``make_opening()``) per connection."""

    protocol = CoreOpeningProtocol

    def __init__(self, make_opening):
        self.make_opening = make_opening
        self.connections: set = set()
