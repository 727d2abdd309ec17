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
   (:data:`~junction.gateway.router.INTERNAL_CLIENT_ID_PREFIX`), so that if
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
refusing the connection), an Open without the three properties (the peer is
not a Junction broker core), and after ``timeout`` seconds
(:class:`twisted.internet.defer.TimeoutError`, the connection dropped).
Cancelling the Deferred drops the connection at once.

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

On a connector with ``proxyProtocolEnabled=true`` (or ``proxyEnabled=true``)
the probe's connection starts with a PROXY protocol v2 ``LOCAL`` header (the
health-check form: the core keeps the probe's real address), since the
core's acceptor closes any connection without a header.

On a connector with ``sslEnabled=true`` the probe speaks TLS, with the
connector's trust store, client certificate and host name check
(:mod:`junction.tls.client`); on a plain connector the pool credentials go
over plain TCP, as Artemis's pool does.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable

from OpenSSL import SSL
from proton import Collector, Connection, Endpoint, Event, Transport
from twisted.internet import defer, error
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.python.failure import Failure

from junction.gateway.probe import PROBE_TIMEOUT, ProbeResult
from junction.gateway.router import INTERNAL_CLIENT_ID_PREFIX
from junction.protocols.amqp.engine import drain_output
from junction.protocols.proxy import encode_v2_local, proxy_enabled
from junction.tls.client import TLSHostMismatch, wrap_client_factory
from junction.tls.listener import openssl_reason as _describe_tls

__all__ = [
    "ACTIVE_PROPERTY",
    "CONNECTIONS_PROPERTY",
    "NODE_ID_PROPERTY",
    "AmqpTargetProbe",
    "ProbeError",
]

log = logging.getLogger("junction.gateway.probe")

#: the broker core's Open properties the probe reads
NODE_ID_PROPERTY = "junction:node-id"
ACTIVE_PROPERTY = "junction:active"
CONNECTIONS_PROPERTY = "junction:connections"
#: set (true) by a peer whose Open is followed by a refusing Close (AMQP 1.0 2.4.1)
_ESTABLISHMENT_FAILED = "amqp:connection-establishment-failed"

_REMOTE_OPEN = Event.CONNECTION_REMOTE_OPEN
_REMOTE_CLOSE = Event.CONNECTION_REMOTE_CLOSE
_TRANSPORT_ERROR = Event.TRANSPORT_ERROR


class ProbeError(Exception):
    """A check failed for a reason the probe can name (the message says which target and why)."""


def _is_true(value) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


class AmqpTargetProbe:
    """Checks Junction broker cores by opening an AMQP connection to each.

    ``username``/``password``: the pool's credentials (SASL PLAIN), or no
    username for ANONYMOUS.  ``reactor``: where connections and timers go (the
    global reactor when None, imported only then).  ``timeout``: seconds one
    check may take, connect to close.  ``client_id_prefix``: the start of the
    probe connections' container ids.  ``local_status``: answers for the local
    target (see the module docstring).
    """

    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        reactor=None,
        timeout: float = PROBE_TIMEOUT,
        client_id_prefix: str = INTERNAL_CLIENT_ID_PREFIX,
        local_status: Callable[[], ProbeResult] | None = None,
    ):
        if not timeout > 0:
            raise ValueError(f"timeout must be greater than 0 s, got {timeout!r}")
        if password is not None and username is None:
            raise ValueError("a password without a username: give both, or neither for ANONYMOUS")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.username = username
        self._password = password
        self.reactor = reactor
        self.timeout = timeout
        self.client_id_prefix = client_id_prefix
        self.local_status = local_status
        #: target -> its checks in flight (normally at most one)
        self._checks: dict = {}
        self._serial = itertools.count(1)
        self._instance = uuid.uuid4().hex[:12]

    def __repr__(self) -> str:
        who = self.username if self.username is not None else "ANONYMOUS"
        return f"<AmqpTargetProbe {who}>"

    # -- TargetProbe ---------------------------------------------------------------------

    def check(self, target) -> defer.Deferred:
        """A Deferred firing with the target's :class:`ProbeResult` (see the module docstring)."""
        if getattr(target, "local", False):
            return self._check_local(target)
        connector = getattr(target, "connector", None)
        if connector is None:
            return defer.fail(ProbeError(f"{target!r} has no connector to reach it by"))
        params = getattr(connector, "params", None) or {}
        try:
            port = int(connector.port)
        except (TypeError, ValueError):
            return defer.fail(ProbeError(f"{target.name}: no valid port ({connector.port!r})"))
        check = _Check(self, target, connector.host or "localhost", port)
        # a core acceptor with proxyProtocolEnabled=true closes a connection without a
        # PROXY header: the probe speaks for itself, so it sends a v2 LOCAL one
        check.proxy_local = proxy_enabled(params)
        check.tls = getattr(connector, "tls", None)
        self._checks.setdefault(target, set()).add(check)
        try:
            check.start()
        except Exception as e:  # connectTCP refusing its arguments: fail, leave nothing behind
            check.abandon(ProbeError(f"{check.name}: cannot connect: {e}"))
        return check.deferred

    def release(self, target) -> None:
        """Abort the target's checks in flight (each fails); nothing else is held between checks."""
        for check in list(self._checks.get(target, ())):
            check.abandon(ProbeError(f"{target.name}: check abandoned, the target was released"))
        self._checks.pop(target, None)

    # -- introspection --------------------------------------------------------------------

    def outstanding(self, target=None) -> list:
        """The checks in flight (for one target, or all): empty once every check has ended."""
        if target is not None:
            return list(self._checks.get(target, ()))
        return [c for checks in self._checks.values() for c in checks]

    # -- internals ------------------------------------------------------------------------

    def _check_local(self, target) -> defer.Deferred:
        if self.local_status is None:
            return defer.fail(
                ProbeError(
                    "the local target cannot be checked: this probe was given no local_status"
                )
            )
        return defer.maybeDeferred(self.local_status)

    def _container_id(self) -> str:
        return f"{self.client_id_prefix}{self._instance}.{next(self._serial)}"

    def _ended(self, check: _Check) -> None:
        checks = self._checks.get(check.target)
        if checks is not None:
            checks.discard(check)
            if not checks:
                del self._checks[check.target]


class _Check:
    """One check of one target: a connection from connect to close, bounded by the timeout."""

    def __init__(self, probe: AmqpTargetProbe, target, host: str, port: int):
        self.probe = probe
        self.target = target
        self.host = host
        self.port = port
        self.deferred = defer.Deferred(self._cancelled)
        self.connector = None
        self.protocol: _ProbeProtocol | None = None
        self.timer = None
        self.result: ProbeResult | None = None
        self.problem: BaseException | None = None
        self.ended = False
        #: write a PROXY v2 LOCAL header first (the connector has proxyProtocolEnabled=true)
        self.proxy_local = False
        #: the connector's TLS settings (:class:`junction.tls.client.ClientTLS`), or None
        self.tls = None

    def __repr__(self) -> str:
        state = (
            "ended" if self.ended else ("connected" if self.protocol is not None else "connecting")
        )
        return f"<probe check of {self.target.name} at {self.host}:{self.port} {state}>"

    @property
    def name(self) -> str:
        return f"{self.target.name} ({self.host}:{self.port})"

    def start(self) -> None:
        reactor = self.probe.reactor
        self.timer = reactor.callLater(self.probe.timeout, self._timed_out)
        factory = _ProbeFactory(self)
        if self.tls is not None:
            # TLS to the target (its certificate and host name checked); a PROXY
            # LOCAL header goes on the wire before the handshake
            factory = wrap_client_factory(
                factory, self.tls, self.host, reactor=reactor, prefix=encode_v2_local() if self.proxy_local else b""
            )
            self.proxy_local = False
        self.connector = reactor.connectTCP(
            self.host,
            self.port,
            factory,
            timeout=max(1, int(self.probe.timeout + 0.999)),
        )

    # -- what happens to the connection ---------------------------------------------------

    def fail(self, problem: BaseException) -> None:
        """Remember why the check fails (the first reason wins)."""
        if self.problem is None:
            self.problem = problem

    def answered(self, properties) -> None:
        """The peer's Open arrived with these properties."""
        props = {str(k): v for k, v in (properties or {}).items()}
        if _is_true(props.get(_ESTABLISHMENT_FAILED)):
            return  # a refusing Close follows, with the reason
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
            product = props.get("product")
            self.fail(
                ProbeError(
                    f"{self.name} is not a Junction broker core: its open has no valid "
                    f"{', '.join(missing)} (product {product!r})"
                )
            )
            return
        # the core counted this connection too
        self.result = ProbeResult(
            active=bool(active), node_id=str(node_id), connection_count=max(0, int(count) - 1)
        )

    def connection_failed(self, reason: Failure) -> None:
        if self.ended:
            return
        self.fail(_described(reason.value, f"{self.name}: cannot connect"))
        self._end()

    def connection_lost(self, reason: Failure) -> None:
        if self.ended:
            return
        if self.result is None:
            self.fail(_described(reason.value, f"{self.name}: connection lost before the open"))
        self._end()

    # -- ending ---------------------------------------------------------------------------

    def _timed_out(self) -> None:
        self.timer = None
        if self.ended:
            return
        if self.result is None:
            what = "open" if self.protocol is not None else "connection"
            self.fail(defer.TimeoutError(f"{self.name}: no {what} within {self.probe.timeout:g} s"))
        else:  # answered, but the polite close did not finish: drop it, keep the answer
            log.debug("%s: close not finished within %g s, dropping", self.name, self.probe.timeout)
        self._drop()
        self._end()

    def abandon(self, problem: BaseException) -> None:
        """Give up now (release): drop the connection, fail the Deferred."""
        if self.ended:
            return
        self.problem = problem
        self.result = None
        self._drop()
        self._end()

    def _cancelled(self, _d) -> None:
        # Deferred.cancel() fails the Deferred with CancelledError after this.
        if self.ended:
            return
        self.ended = True
        self._stop_timer()
        self._drop()
        self.probe._ended(self)

    def _drop(self) -> None:
        protocol = self.protocol
        if protocol is not None:
            protocol.abort()
        elif self.connector is not None:
            try:
                self.connector.stopConnecting()
            except error.NotConnectingError:
                pass

    def _stop_timer(self) -> None:
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self._stop_timer()
        self.probe._ended(self)
        if self.deferred.called:
            return
        if self.problem is not None:
            log.debug("%s: check failed: %s", self.name, self.problem)
            self.deferred.errback(Failure(self.problem))
        elif self.result is not None:
            self.deferred.callback(self.result)
        else:  # pragma: no cover - every path to here sets one of them
            self.deferred.errback(
                Failure(ProbeError(f"{self.name}: check ended without an answer"))
            )


def _described(exc: BaseException, what: str) -> BaseException:
    """Connection errors keep their type (refused, timed out...) with the target named."""
    if isinstance(exc, error.ConnectError):
        return type(exc)(osError=exc.osError, string=what)
    if isinstance(exc, error.ConnectionDone):
        return ProbeError(f"{what}: closed by the peer")
    return ProbeError(f"{what}: {exc}")


class _ProbeFactory(ClientFactory):
    def __init__(self, check: _Check):
        self.check = check

    def buildProtocol(self, addr):
        protocol = _ProbeProtocol(self.check)
        protocol.factory = self
        return protocol

    def clientConnectionFailed(self, connector, reason):
        self.check.connection_failed(reason)

    def clientConnectionLost(self, connector, reason):
        pass  # the protocol reports it


class _ProbeProtocol(Protocol):
    """The client side of one probe connection: proton's engine fed by Twisted.

    Bytes in go to ``Transport.push``; the collector's events are handled
    (remote open: read the properties and close; remote close and transport
    errors: remember the condition); what the engine produced is written out;
    once the engine's output side is closed the socket is closed.
    """

    def __init__(self, check: _Check):
        self.check = check
        self.pn_transport: Transport | None = None
        self.pn_connection: Connection | None = None
        self.collector: Collector | None = None
        self.closing = False

    def connectionMade(self):
        check = self.check
        if check.ended:  # cancelled while connecting
            self.abort()
            return
        check.protocol = self
        if check.proxy_local:
            self.transport.write(encode_v2_local())
        probe = check.probe
        transport = Transport(Transport.CLIENT)
        sasl = transport.sasl()
        sasl.allow_insecure_mechs = True
        connection = Connection()
        connection.container = probe._container_id()
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

    def dataReceived(self, data: bytes):
        transport = self.pn_transport
        if transport is None or self.closing:
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
                self.check.answered(self.pn_connection.remote_properties)
                self._close_connection()
            elif kind == _REMOTE_CLOSE:
                condition = self.pn_connection.remote_condition
                if condition is not None:
                    self.check.fail(
                        ProbeError(
                            f"{self.check.name} closed the connection: {_condition_text(condition)}"
                        )
                    )
                self._close_connection()
            elif kind == _TRANSPORT_ERROR and self.check.result is None:
                # (after the answer, the peer vanishing before its Close is no failure)
                condition = self.pn_transport.condition
                text = _condition_text(condition) if condition is not None else "transport error"
                self.check.fail(ProbeError(f"{self.check.name}: {text}"))
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
            self.closing = True
            self.transport.loseConnection()

    def _peer_done(self) -> bool:
        """Our Close is out; close the socket once the peer's Close came (or nothing more can)."""
        connection = self.pn_connection
        return (
            connection.state & Endpoint.REMOTE_CLOSED
            or self.pn_transport.capacity() < 0
            or self.check.problem is not None
        )

    def abort(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.abortConnection()

    def connectionLost(self, reason=None):
        self.closing = True
        if reason is not None and reason.check(SSL.Error, TLSHostMismatch):
            # the TLS layer's reason (an untrusted certificate, a host name mismatch)
            # comes first: the engine would only see a connection cut short
            self.check.fail(ProbeError(f"{self.check.name}: TLS: {_describe_tls(reason.value)}"))
        transport = self.pn_transport
        if transport is not None:
            transport.close_tail()
            self._process()  # a SASL outcome or a close that came with the end
            transport.unbind()
        if self.collector is not None:
            self.collector.release()
        self.pn_transport = self.pn_connection = self.collector = None
        self.check.connection_lost(
            reason if reason is not None else Failure(error.ConnectionDone())
        )


def _condition_text(condition) -> str:
    text = str(condition.name)
    if condition.description:
        text += f" ({condition.description})"
    return text
