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

:class:`StompOpening` is the same for a STOMP CONNECT (a Junction core's
CONNECTED, another broker's, an ERROR, garbage), and :class:`PolyglotOpening`
an acceptor serving both.  :class:`MemoryWorld` serves them to a probe's
connections on a ``MemoryReactorClock``, and :class:`InMemoryContract` runs
``TargetProbeContract`` (``tests/unit/test_gateway_pool.py``) in that world.
"""

from __future__ import annotations

import itertools

from proton import Collector, Condition, Connection, Endpoint, Event, Transport, symbol
from twisted.internet import error
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from junction.config.model import Connector
from junction.gateway.probe import PROBE_TIMEOUT, ProbeResult
from junction.protocols.amqp.sasl import (
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslFailed,
    SaslRequired,
    SaslServer,
)
from junction.protocols.errors import RemoteProtocolError
from junction.routing.targets import Target

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


# -- STOMP -------------------------------------------------------------------------------------

#: what the STOMP stand-in does with a CONNECT (beside ANSWER and SILENT above)
ERROR = "error"  # an ERROR frame, then the end (a refused login)
GARBAGE = "garbage"  # bytes that are no STOMP frame (an HTTP answer), then the end
#: what the STOMP stand-in does when an AMQP header arrives instead of a frame
CLOSE = "close"  # the end, without a byte (CoilMQ, Artemis on a STOMP-only acceptor)
#: the CONNECTED headers of a Junction core, as the probe reads them
JUNCTION = "junction"


class StompOpening:
    """One connection's server side of a STOMP CONNECT, sans-IO, for the STOMP probe's tests.

    ``on_connect``: ANSWER (CONNECTED, with ``headers``), ERROR (an ERROR frame
    with ``error_message``, then the end), SILENT, or GARBAGE.  ``headers``:
    JUNCTION for a Junction core's (``node_id``, ``active``, ``connections``)
    or a list of header pairs (another broker's).  ``on_amqp``: what an AMQP
    header gets -- ERROR (a Junction core's STOMP acceptor: an ERROR frame,
    then the end), CLOSE, or SILENT (a server waiting for a line end).
    ``reply_to_disconnect``: answer DISCONNECT's receipt (then end).
    """

    def __init__(
        self,
        *,
        node_id="node-x",
        active=True,
        connections=1,
        headers=JUNCTION,
        on_connect=ANSWER,
        on_amqp=ERROR,
        error_message="Security Error occurred: User name [pool] or password is invalid",
        users=None,
        reply_to_disconnect=True,
    ):
        from junction.protocols.stomp import StompCodec

        self.codec = StompCodec()
        if headers == JUNCTION:
            headers = [
                ("version", "1.1"),
                ("server", "Junction/test"),
                ("junction-node-id", node_id),
                ("junction-active", "true" if active else "false"),
                ("junction-connections", str(connections)),
            ]
        self.headers = list(headers)
        self.on_connect = on_connect
        self.on_amqp = on_amqp
        self.error_message = error_message
        self.users = dict(users if users is not None else {"pool": "secret"})
        self.reply_to_disconnect = reply_to_disconnect
        self.connect_frame = None
        self.disconnected = False
        self.finished = False
        self._out = bytearray()
        self._seen = b""

    def _error(self, message: str) -> None:
        from junction.protocols.stomp import Frame

        self._out += self.codec.send(Frame("ERROR", (("message", message),), message.encode()))
        self.finished = True

    def receive_data(self, data: bytes) -> None:
        from junction.protocols.stomp import Frame, HeartBeat

        if self.finished:
            return
        self._seen += data
        if self._seen.startswith(b"AMQP"[: len(self._seen)]):
            if len(self._seen) < 4:
                return
            if self.on_amqp == ERROR:
                self._error("Unknown STOMP command AMQP")
            elif self.on_amqp == CLOSE:
                self.finished = True
            return  # SILENT: nothing, ever
        try:
            events = self.codec.receive_data(data)
        except RemoteProtocolError as exc:
            self._error(str(exc))
            return
        for event in events:
            if isinstance(event, HeartBeat):
                continue
            if self.connect_frame is None:
                self.connect_frame = event
                if self.on_connect == ANSWER:
                    login = event.get("login")
                    if login is not None and self.users.get(login) != event.get("passcode"):
                        self._error(f"Security Error occurred: User name [{login}] or password is invalid")
                        return
                    self._out += self.codec.send(Frame("CONNECTED", tuple(self.headers)))
                elif self.on_connect == ERROR:
                    self._error(self.error_message)
                    return
                elif self.on_connect == GARBAGE:
                    self._out += b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
                    self.finished = True
                    return
            elif event.command == "DISCONNECT":
                self.disconnected = True
                if self.reply_to_disconnect:
                    receipt = event.get("receipt")
                    if receipt is not None:
                        self._out += self.codec.send(Frame("RECEIPT", (("receipt-id", receipt),)))
                    self.finished = True
                return

    def data_to_send(self) -> bytes:
        out = bytes(self._out)
        self._out.clear()
        return out


class PolyglotOpening:
    """A Junction core's acceptor serving AMQP and STOMP: the first bytes say which stand-in answers."""

    def __init__(self, *, amqp: CoreOpening, stomp: StompOpening):
        self.amqp, self.stomp = amqp, stomp
        self.chosen = None

    def receive_data(self, data: bytes) -> None:
        if self.chosen is None:
            self.chosen = self.amqp if data.startswith(b"AMQP") else self.stomp
        self.chosen.receive_data(data)

    @property
    def finished(self) -> bool:
        return self.chosen is not None and self.chosen.finished

    def data_to_send(self) -> bytes:
        return self.chosen.data_to_send() if self.chosen is not None else b""


# -- the memory world ---------------------------------------------------------------------------

_ports = itertools.count(20000)

#: what sits behind a port in the memory world
REFUSED = "refused"
HANG = "hang"  # accepts, never says anything (not even the SASL header)
NO_CONNECT = "no-connect"  # the TCP connect itself never completes


def make_target(**params) -> Target:
    port = next(_ports)
    return Target(
        connector=Connector(
            name=f"core{port}", scheme="tcp", host="127.0.0.1", port=port, params=params
        )
    )


class _Link:
    """One probe connection in memory: the probe's protocol, its transport, the core behind it."""

    def __init__(self, protocol, transport, core):
        self.protocol = protocol
        self.transport = transport
        self.core = core
        self.lost = False

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.protocol.connectionLost(Failure(error.ConnectionDone()))


class MemoryWorld:
    """Cores by port; drives the probe's connections until nothing moves."""

    def __init__(self, reactor: MemoryReactorClock, *, byte_at_a_time: bool = False):
        self.reactor = reactor
        self.cores: dict = {}
        self.links: list[_Link] = []
        self.byte_at_a_time = byte_at_a_time
        self._handled = 0

    def put(self, target: Target, core) -> Target:
        """``core``: a CoreOpening factory (called per connection), REFUSED, HANG or NO_CONNECT."""
        self.cores[target.connector.port] = core
        return target

    def accept_new(self) -> bool:
        """Answer the connection attempts made since the last call."""
        moved = False
        while self._handled < len(self.reactor.tcpClients):
            host, port, factory, _timeout, _bind = self.reactor.tcpClients[self._handled]
            connector = self.reactor.connectors[self._handled]
            self._handled += 1
            moved = True
            core = self.cores.get(port, REFUSED)
            if core == NO_CONNECT:
                continue
            if core == REFUSED:
                factory.clientConnectionFailed(connector, Failure(error.ConnectionRefusedError()))
                continue
            protocol = factory.buildProtocol(None)
            transport = StringTransport()
            protocol.makeConnection(transport)
            self.links.append(_Link(protocol, transport, None if core == HANG else core()))
        return moved

    def pump(self) -> None:
        """Move bytes both ways on every live connection until nothing moves."""
        while True:
            moved = self.accept_new()
            for link in self.links:
                if link.lost:
                    continue
                out = link.transport.value()
                if out:
                    link.transport.clear()
                    moved = True
                    if link.core is not None:
                        link.core.receive_data(out)
                if link.core is not None:
                    back = link.core.data_to_send()
                    if back:
                        moved = True
                        if self.byte_at_a_time:
                            for i in range(len(back)):
                                link.protocol.dataReceived(back[i : i + 1])
                        else:
                            link.protocol.dataReceived(back)
                if link.transport.disconnecting or (link.core is not None and link.core.finished):
                    link.lose()
                    moved = True
            if not moved:
                return

    def live_links(self) -> list[_Link]:
        return [link for link in self.links if not link.lost and not link.transport.disconnecting]




class InMemoryContract:
    """``TargetProbeContract``'s world in memory, for a probe on a MemoryReactorClock.

    A subclass gives ``build_probe(reactor, local_status)`` and
    ``opening(node_id=, active=, connections=)`` (a stand-in per connection;
    the count it is given includes the probe's own connection).
    """

    def build_probe(self, reactor, local_status):
        raise NotImplementedError

    def opening(self, *, node_id, active=True, connections=1):
        raise NotImplementedError

    def make_probe(self):
        self.reactor = MemoryReactorClock()
        self.world = MemoryWorld(self.reactor)
        return self.build_probe(
            self.reactor,
            lambda: ProbeResult(active=True, node_id="local-node", connection_count=0),
        )

    def serving_target(self, node_id, connection_count):
        return self.world.put(
            make_target(), lambda: self.opening(node_id=node_id, connections=connection_count + 1)
        )

    def passive_target(self, node_id):
        return self.world.put(
            make_target(), lambda: self.opening(node_id=node_id, active=False, connections=1)
        )

    def unreachable_target(self):
        return self.world.put(make_target(), REFUSED)

    def hanging_target(self):
        return self.world.put(make_target(), HANG)

    def local_target(self, node_id):
        return Target(local=True, node_id=node_id)

    def resolve(self, d):
        return run_until(self.world, self.reactor, d)

    def leftovers(self):
        return (
            self.probe.outstanding()
            + [c for c in self.reactor.getDelayedCalls() if c.active()]
            + self.world.live_links()
        )


def run_until(world: MemoryWorld, reactor, d, *, step: float = 0.1, limit: float = PROBE_TIMEOUT + 1):
    """Pump and advance the clock in ``step`` s until ``d`` fires (or ``limit`` s passed); its outcome."""
    from tests.unit.test_gateway_pool import outcome

    elapsed = 0.0
    world.pump()
    while not d.called and elapsed < limit:
        reactor.advance(step)
        elapsed += step
        world.pump()
    return outcome(d)
