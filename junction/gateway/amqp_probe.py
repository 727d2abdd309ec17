"""The readiness probe a gateway pool runs on each broker core: one AMQP open.

Artemis's pool connects to each target with a core client session and reads
``broker.NodeID``, ``broker.Active`` and ``broker.ConnectionCount`` with
management requests.  A Junction broker core says the same three things in
the properties of its AMQP Open frame, which it sends only to a client that
passed SASL (``junction/brokercore/amqp_server.py``, ``_on_connection_open``):

* ``junction:node-id`` (string): the core's persisted node id;
* ``junction:active`` (boolean): serving clients (a passive backup: false);
* ``junction:connections`` (integer): the core's client connections when it
  sent the Open, *the asking connection included*.  The core counts the
  distinct connections holding a session (any acceptor, any protocol) plus
  the opened AMQP connections of the acceptor the probe came in on; an AMQP
  connection on another acceptor that has opened no session yet, and
  connections still in SASL, are not counted.

:class:`AmqpTargetProbe` is the :class:`~junction.gateway.probe.TargetProbe`
that reads them.  Each ``check(target)``:

1. connects over TCP to the target's connector (``host``, ``port``);
2. speaks AMQP 1.0 as a client through the qpid-proton engine -- a client
   ``Transport`` bound to a ``Connection`` with a ``Collector``, driven from a
   Twisted protocol (never proton's reactor) -- with SASL PLAIN and the pool's
   ``username``/``password``, or ANONYMOUS when there is no username, and a
   container id starting with the routers' internal client prefix
   (:data:`~junction.routing.keys.INTERNAL_CLIENT_ID_PREFIX`), so that if
   the probe ever reaches a gateway instead of a core it is routed local
   rather than around the pool;
3. reads the peer's Open properties into a
   :class:`~junction.gateway.probe.ProbeResult` (``connection_count`` is the
   core's count minus one: the probe's own connection is not a client);
4. closes politely (Close, the peer's Close, then the socket) and fires once
   the connection is gone, so two consecutive checks never overlap and the
   second never counts the first.

It fails (errback) on a refused or lost connection, a SASL failure
(``amqp:unauthorized-access``), a Close carrying an error (a gateway or core
refusing the connection), an Open with the properties present but not valid,
and after ``timeout`` seconds (:class:`twisted.internet.defer.TimeoutError`,
the connection dropped).  Cancelling the Deferred drops the connection at
once.  A peer that is not speaking AMQP -- its first bytes are not an AMQP
header (a STOMP ``ERROR`` frame, say), or it closes without a byte -- fails
with :class:`~junction.gateway.probe.NotThisProtocol`, so a multi-protocol
probe (:mod:`junction.gateway.multi_probe`) can try STOMP next.

**Another broker.**  A peer whose Open has none of the three properties is
an AMQP broker that is not a Junction core (Artemis's AMQP port, say): it
answered, so it is ready, with :func:`~junction.gateway.probe.stand_in_node_id`
for a node id, no connection count (LEAST_CONNECTIONS then prefers the
targets that have one) and a ``note`` naming its ``product`` property.

**One connection per check, none held between checks.**  Artemis keeps its
management session open between checks because it asks fresh questions on
it; the Open properties are said once per connection, so a held connection
could not tell a changed ``active`` or connection count.  A new connection
every check-period (5 s by default) costs one TCP + SASL + Open round trip
per target; holding nothing also means nothing to heartbeat, nothing to
notice dropping, and ``release(target)`` only has to abort a check in
flight.

The **local target** (``target.local``: the broker core embedded in the
gateway's process) is answered without the network by ``local_status()``,
a callable given at construction returning a ``ProbeResult`` (or a
Deferred of one).  Without it a local target's check fails: the pool would
otherwise have no node id or count for it.

The connection itself -- PROXY ``LOCAL`` header, TLS with the connector's
settings, timeout, cancel and release -- is :mod:`junction.gateway.probe_connection`'s,
shared with the STOMP probe.  On a plain connector the pool credentials go
over plain TCP, as Artemis's pool does.
"""

from __future__ import annotations

from proton import Collector, Connection, Endpoint, Event, Transport

from junction.gateway.probe import ProbeError, ProbeResult, another_broker
from junction.gateway.probe_connection import ConnectionProbe, ProbeCheck, ProbeProtocol, preview
from junction.protocols.amqp.engine import drain_output

__all__ = [
    "ACTIVE_PROPERTY",
    "CONNECTIONS_PROPERTY",
    "NODE_ID_PROPERTY",
    "AmqpTargetProbe",
    "ProbeError",
]

#: the broker core's Open properties the probe reads
NODE_ID_PROPERTY = "junction:node-id"
ACTIVE_PROPERTY = "junction:active"
CONNECTIONS_PROPERTY = "junction:connections"
_JUNCTION_PROPERTIES = (NODE_ID_PROPERTY, ACTIVE_PROPERTY, CONNECTIONS_PROPERTY)
#: set (true) by a peer whose Open is followed by a refusing Close (AMQP 1.0 2.4.1)
_ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"
#: how every AMQP protocol header starts (AMQP 1.0 2.2: "AMQP" then id, major, minor, revision)
_AMQP_MAGIC = b"AMQP"

_REMOTE_OPEN = Event.CONNECTION_REMOTE_OPEN
_REMOTE_CLOSE = Event.CONNECTION_REMOTE_CLOSE
_TRANSPORT_ERROR = Event.TRANSPORT_ERROR


def _is_true(value) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


class AmqpTargetProbe(ConnectionProbe):
    """Checks broker cores by opening an AMQP connection to each.

    ``username``/``password``: the pool's credentials (SASL PLAIN), or no
    username for ANONYMOUS; the other arguments are
    :class:`~junction.gateway.probe_connection.ConnectionProbe`'s.
    """

    protocol = "AMQP"
    hello = "header"
    answer = "open"

    def build_protocol(self, check: ProbeCheck) -> _ProbeProtocol:
        return _ProbeProtocol(check)


def read_open(check: ProbeCheck, properties) -> None:
    """The peer's Open arrived with these properties: the check's answer, or why not."""
    props = {str(k): v for k, v in (properties or {}).items()}
    if _is_true(props.get(_ESTABLISHMENT_FAILED)):
        return  # a refusing Close follows, with the reason
    product = props.get("product")
    if not any(name in props for name in _JUNCTION_PROPERTIES):
        # another AMQP broker: it answered, so it serves; its node id stands in
        check.answered(another_broker(check.target.connector, "AMQP", product))
        return
    node_id = props.get(NODE_ID_PROPERTY)
    active = props.get(ACTIVE_PROPERTY)
    count = props.get(CONNECTIONS_PROPERTY)
    missing = [
        name
        for name, ok in (
            (NODE_ID_PROPERTY, isinstance(node_id, str) and node_id != ""),
            (ACTIVE_PROPERTY, isinstance(active, bool)),
            (CONNECTIONS_PROPERTY, isinstance(count, int) and not isinstance(count, bool)),
        )
        if not ok
    ]
    if missing:
        check.fail(
            check.error(
                f"not a valid Junction broker core open: no valid {', '.join(missing)} "
                f"(product {product!r})"
            )
        )
        return
    # the core counted this connection too
    check.answered(
        ProbeResult(
            active=bool(active),
            node_id=str(node_id),
            connection_count=max(0, int(count) - 1),
            protocol="AMQP",
        )
    )


class _ProbeProtocol(ProbeProtocol):
    """The client side of one probe connection: proton's engine fed by Twisted.

    Bytes in go to ``Transport.push``; the collector's events are handled
    (remote open: read the properties and close; remote close and transport
    errors: remember the condition); what the engine produced is written out;
    once the engine's output side is closed the socket is closed.  A peer
    whose first bytes are not an AMQP header is not fed to the engine at all.
    """

    def __init__(self, check: ProbeCheck):
        super().__init__(check)
        self.pn_transport: Transport | None = None
        self.pn_connection: Connection | None = None
        self.collector: Collector | None = None

    def opened(self) -> None:
        check = self.check
        probe = check.probe
        transport = Transport(Transport.CLIENT)
        sasl = transport.sasl()
        sasl.allow_insecure_mechs = True
        connection = Connection()
        connection.container = probe.client_id()
        connection.hostname = check.host
        if probe.username is not None:
            sasl.allowed_mechs("PLAIN")
            connection.user = probe.username
            connection.password = probe._password or ""
        else:
            sasl.allowed_mechs("ANONYMOUS")
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self.pn_transport, self.pn_connection, self.collector = transport, connection, collector
        connection.open()
        self._process()
        self._flush()

    def received(self, data: bytes) -> None:
        transport = self.pn_transport
        if transport is None:
            return
        first = self.check.first
        if first[:4] != _AMQP_MAGIC[: len(first[:4])]:
            if first.startswith(b"ERROR"):
                self.not_this_protocol("answered the AMQP header with a STOMP ERROR frame, not AMQP")
            else:
                self.not_this_protocol(f"answered the AMQP header with {preview(first)}, not AMQP")
            return
        while data:
            capacity = transport.capacity()
            if capacity < 0:
                break  # the input side is closed: nothing more is read
            if capacity == 0:
                self._process()
                capacity = transport.capacity()
                if capacity <= 0:
                    break
            transport.push(data[:capacity])
            data = data[capacity:]
        self._process()
        self._flush()

    def _process(self) -> None:
        collector = self.collector
        while collector is not None:
            event = collector.peek()
            if event is None:
                break
            kind = event.type
            if kind == _REMOTE_OPEN:
                read_open(self.check, self.pn_connection.remote_properties)
                self._close_connection()
            elif kind == _REMOTE_CLOSE:
                condition = self.pn_connection.remote_condition
                if condition is not None:
                    self.check.fail(
                        self.check.error(f"closed the connection: {_condition_text(condition)}")
                    )
                self._close_connection()
            elif kind == _TRANSPORT_ERROR and self.check.result is None:
                # (after the answer, the peer vanishing before its Close is no failure)
                condition = self.pn_transport.condition
                text = _condition_text(condition) if condition is not None else "transport error"
                if condition is not None and str(condition.name) == "amqp:unauthorized-access":
                    self.check.fail(self.check.error(f"AMQP login refused: {text}"))
                else:
                    self.check.fail(self.check.error(f"AMQP: {text}"))
            collector.pop()

    def _close_connection(self) -> None:
        connection = self.pn_connection
        if connection is not None and not connection.state & Endpoint.LOCAL_CLOSED:
            connection.close()

    def _flush(self) -> None:
        transport = self.pn_transport
        if transport is None or self.closing:
            return
        pending = drain_output(transport, self.transport.write)
        if pending < 0 and self._peer_done():
            self.close()

    def _peer_done(self) -> bool:
        """Our Close is out; close the socket once the peer's Close came (or nothing more can)."""
        connection = self.pn_connection
        return (
            connection.state & Endpoint.REMOTE_CLOSED
            or self.pn_transport.capacity() < 0
            or self.check.problem is not None
        )

    def finish(self, reason) -> None:
        transport = self.pn_transport
        if transport is not None:
            if self.check.heard:  # (a peer that said nothing: the check says why, not the engine)
                transport.close_tail()
                self._process()  # a SASL outcome or a close that came with the end
            transport.unbind()
        if self.collector is not None:
            self.collector.release()
        self.pn_transport = self.pn_connection = self.collector = None


def _condition_text(condition) -> str:
    text = str(condition.name)
    if condition.description:
        text += f" ({condition.description})"
    return text
