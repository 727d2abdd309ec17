"""Forwarding: splice a client's connection to a target broker core.

Once the listener has read a client's opening and the router has chosen a
remote target, :func:`connect_and_forward` connects to the target, writes the
bytes the client has sent so far (its opening, unmodified: the broker core
authenticates the client itself and sees the same client id), and then relays
both directions without parsing anything (``DESIGN.md``, "Gateway flow").

The splice follows twisted's ``protocols/portforward.py``, with what that
example leaves out:

* **Backpressure both ways** (principle 7).  Each side is registered as a
  streaming producer (``IPushProducer``) of the *other* side's transport.
  When a transport holds more than :data:`FORWARD_BUFFER_SIZE` bytes not yet
  written, it pauses its producer, and that side stops reading from its own
  socket; it reads again once the buffer has drained.  A slow reader
  therefore slows the writer down through TCP flow control instead of growing
  the gateway's memory.
* **Bounded buffers.**  Per direction the gateway holds at most
  :data:`FORWARD_BUFFER_SIZE` bytes waiting to be written plus one read (a
  read is at most the transport's ``bufferSize``, which the splice sets to
  the same value), so a forwarded connection costs at most about
  ``4 * FORWARD_BUFFER_SIZE`` bytes of buffers (256 KiB), plus the
  kernel's socket buffers.  While the target connection is being made, the
  client is not read at all: what the listener buffered (its opening,
  bounded by the listener's own limits) is all that is held.
* **Half-close propagated.**  Both sides are ``IHalfCloseableProtocol``: a
  FIN from one peer becomes a write shutdown (after the pending bytes) toward
  the other, and a side is closed for good once both of its directions are.
* **Abort propagated.**  A side lost with an error (a reset, an abort) aborts
  the other at once (``abortConnection``: pending bytes are dropped, the peer
  sees a reset, as it would have on a direct connection); a side closed
  cleanly closes the other cleanly (after its pending bytes).
* **Connect failures reported.**  The Deferred of :func:`connect_and_forward`
  fails with :class:`ForwardConnectError` naming the target, so the listener
  can refuse the client with its protocol's own error.  The client's transport
  is left alone then (still paused, still the listener's).

No parsing happens after the opening: a read is written to the other side
as it is, with one byte counter per direction for the logs.

**PROXY protocol.**  On a connector with ``proxyProtocolEnabled=true`` (or
its alias ``proxyEnabled=true``; Junction's connector parameter) the first
bytes written to the target are a PROXY protocol v2 header
(:func:`junction.protocols.proxy.encode_v2`) naming the client's address as
the source and the address the client connected to on the gateway as the
destination, so a broker core acceptor with ``proxyProtocolEnabled=true``
sees the real client.  It goes before anything else, the AMQP SASL
handshake included.

The client transport is handed over by making the splice's client side the
transport's protocol (``transport.protocol``, or ``wrappedProtocol`` for a
protocol wrapper such as TLS), as :mod:`junction.edge.acceptor` hands a
sniffed connection to its protocol.
"""

from __future__ import annotations

import logging

from cryptography import x509
from OpenSSL import SSL
from twisted.internet import defer, error, tcp
from twisted.internet.interfaces import IHalfCloseableProtocol, IHandshakeListener, IPushProducer
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from junction.edge.sockets import apply_socket_options, replace_receiver
from junction.edge.tls import openssl_reason, tls_handle
from junction.protocols.errors import ProtocolError
from junction.protocols.proxy import encode_v2, proxy_enabled, tls_tlvs
from junction.tls.client import wrap_client_factory
from junction.tls.server import sni_host

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "FORWARD_BUFFER_SIZE",
    "ForwardConnectError",
    "ForwardHandshakeError",
    "Splice",
    "apply_socket_options",
    "connect_and_forward",
    "proxy_header_for",
    "idle_tcp",
    "rebind",
    "write_through",
    "target_address",
]

log = logging.getLogger("junction.gateway.forward")

#: Bytes a forwarded connection lets wait to be written toward one peer
#: before it stops reading from the other peer (the transports' write-buffer
#: high-water mark, and their read size).
FORWARD_BUFFER_SIZE = 64 * 1024

#: Seconds allowed to connect to a target, unless the caller or the
#: connector's ``connect-timeout-millis`` says otherwise.
DEFAULT_CONNECT_TIMEOUT = 10.0


class ForwardConnectError(Exception):
    """The gateway could not connect to the target it was to forward to.

    ``target`` names it (connector name and ``host:port``); ``reason`` says
    why, as a short text (connection refused, timed out ...).
    """

    def __init__(self, target: str, reason: str):
        super().__init__(f"could not connect to target {target}: {reason}")
        self.target = target
        self.reason = reason


class ForwardHandshakeError(ForwardConnectError):
    """The target was reached, but the handshake run with it on the client's behalf failed.

    ``condition`` is the protocol's error condition for the client (for
    AMQP: ``amqp:unauthorized-access`` when the target refused the login).
    The target is reachable: it is not marked not ready for this.
    """

    def __init__(self, target: str, reason: str, condition: str | None = None):
        super().__init__(target, reason)
        self.condition = condition


def target_address(connector) -> str:
    """``name (host:port)`` for a connector, for log lines and errors."""
    host = getattr(connector, "host", "?")
    shown = f"[{host}]" if ":" in str(host) else host
    return f"{getattr(connector, 'name', '?')} ({shown}:{getattr(connector, 'port', '?')})"


def proxy_header_for(client_transport) -> bytes:
    """The PROXY v2 header for a forwarded client: its peer as source, the gateway's address as destination.

    Raises :class:`~junction.protocols.errors.ProtocolError` when the
    transport's addresses are not IP addresses (a header cannot carry them).
    """
    peer, host = client_transport.getPeer(), client_transport.getHost()
    tlvs = ()
    conn = tls_handle(client_transport)
    if conn is not None:  # the client's TLS, for the core's logs and certificate login
        cert = conn.get_peer_certificate(as_cryptography=True)
        cn = None
        if cert is not None:
            names = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
            cn = str(names[0].value) if names else None
        tlvs = tls_tlvs(
            sni=sni_host(conn),
            version=conn.get_protocol_version_name(),
            subject=cert.subject.rfc4514_string() if cert is not None else None,
            cn=cn,
        )
    try:
        return encode_v2((peer.host, peer.port), (host.host, host.port), tlvs=tlvs)
    except AttributeError:
        raise ProtocolError(f"no IP addresses to put in a PROXY header ({peer!r}, {host!r})") from None


def idle_tcp(transport) -> bool:
    """Whether *transport* is a plain, open TCP connection with nothing queued to write.

    Reads Twisted's write-buffer fields (``dataBuffer``/``offset``,
    ``_tempDataLen``) and half-close flags; anything else -- a wrapper, a
    test transport, a connection closing -- is not idle, and its own
    ``write`` is used.
    """
    return (
        (type(transport) is tcp.Server or type(transport) is tcp.Client)
        and bool(transport.connected)
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not getattr(transport, "_writeDisconnecting", True)
        and getattr(transport, "_tempDataLen", 1) == 0
        and transport.offset == len(transport.dataBuffer)
    )


def write_through(transport, data: bytes) -> None:
    """Write *data* to *transport*, sending it at once when nothing is queued there.

    Twisted's ``transport.write`` only queues: the bytes leave on the next
    reactor pass, after an ``epoll_ctl`` to watch for writability and before
    another to stop.  Relaying a chunk that way costs a loop pass and two
    system calls on top of the read and the send, which is most of what a
    forwarded message costs the gateway when messages come one at a time.
    So when the peer is a plain TCP connection with an empty buffer, the
    chunk goes straight to its socket; whatever the kernel does not take (a
    full socket buffer) is queued with ``transport.write`` as before, so
    ordering, backpressure (the producer is paused by the queued bytes) and
    error handling stay Twisted's.  Anything else (TLS, a wrapper, a
    connection closing) takes ``transport.write``.
    """
    if not idle_tcp(transport):
        transport.write(data)
        return
    try:
        sent = transport.socket.send(data)
    except (BlockingIOError, InterruptedError):
        sent = 0
    except OSError:
        transport.write(data)  # Twisted finds the error on its next write and closes cleanly
        return
    if sent < len(data):
        transport.write(data[sent:])


def rebind(transport, protocol) -> None:
    """Make ``protocol`` receive what ``transport`` reads from now on (TLS and admission wrappers kept)."""
    replace_receiver(transport, protocol)


def _describe(reason: Failure) -> str:
    value = reason.value
    if isinstance(value, error.ConnectionRefusedError):
        return "connection refused"
    if isinstance(value, error.TimeoutError):
        return "timed out"
    if isinstance(value, SSL.Error):
        return openssl_reason(value)
    text = str(value).strip()
    return text or type(value).__name__


@implementer(IPushProducer, IHalfCloseableProtocol, IHandshakeListener)
class _Side(Protocol):
    """One end of a splice: what its transport reads is written to the peer's.

    It is also the streaming producer registered with the *peer's*
    transport: ``pauseProducing`` (the peer's write buffer is full) stops
    reading this side's socket, ``resumeProducing`` reads again.
    """

    def __init__(self, splice: Splice, name: str):
        self.splice = splice
        self.name = name
        self.peer: _Side | None = None
        #: bytes read from this side (and written to the peer)
        self.received = 0
        #: the peer's transport asked us to stop reading (its buffer is full)
        self.paused_by_peer = False
        #: not read until the splice is complete (the client while connecting)
        self.held = False
        self.read_closed = False
        self.write_closed = False
        self.lost = False
        self.lost_reason: Failure | None = None
        #: called by connectionMade (the target side: start the splice)
        self.on_connected = None
        #: while set (the target side during a handshake), what this side reads
        #: goes to it instead of the peer, and it is told when the connection is lost
        self.intercept = None
        #: called when this side's TLS handshake is done (a target over TLS)
        self.on_tls_done = None

    def connectionMade(self) -> None:
        callback, self.on_connected = self.on_connected, None
        if callback is not None:
            callback()

    def handshakeCompleted(self) -> None:
        callback, self.on_tls_done = self.on_tls_done, None
        if callback is not None:
            callback()

    # -- data -------------------------------------------------------------------
    def dataReceived(self, data: bytes) -> None:
        intercept = self.intercept
        if intercept is not None:
            intercept.data_received(data)
            return
        self.received += len(data)
        write_through(self.peer.transport, data)

    # -- IHalfCloseableProtocol -------------------------------------------------
    def readConnectionLost(self) -> None:
        """The peer of this side sent FIN: pass the half-close on.

        During a handshake (the target side, ``intercept`` set) there is no one to pass it to:
        the target closed before answering, so the handshake fails now (not at its timeout)."""
        if self.read_closed:
            return
        self.read_closed = True
        intercept, self.intercept = self.intercept, None
        if intercept is not None:
            intercept.connection_lost(None)
            self.transport.loseConnection()
            return
        self.splice._read_closed(self)

    def writeConnectionLost(self) -> None:
        """Our write shutdown toward this side is done."""
        self.write_closed = True
        if self.read_closed and not self.lost:
            self.transport.loseConnection()

    def connectionLost(self, reason=None) -> None:
        if self.lost:
            return
        self.lost = True
        self.lost_reason = reason
        if self.splice.relayed:
            return  # the transport let go of a connection the relay engine now carries
        intercept, self.intercept = self.intercept, None
        if intercept is not None:
            intercept.connection_lost(reason)
            return
        self.splice._lost(self, reason)

    # -- IPushProducer (registered with the peer's transport) --------------------
    def pauseProducing(self) -> None:
        self.paused_by_peer = True
        self._update_reading()

    def resumeProducing(self) -> None:
        self.paused_by_peer = False
        self._update_reading()

    def stopProducing(self) -> None:
        # The peer's transport is gone; its side's connectionLost handles it.
        pass

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.lost or self.read_closed or getattr(transport, "disconnecting", False):
            # resuming a transport whose read side saw EOF would read EOF again;
            # one on its way out is not read any more anyway
            return
        if self.paused_by_peer or self.held:
            transport.pauseProducing()
        else:
            transport.resumeProducing()

    @property
    def paused(self) -> bool:
        """Whether this side's socket is not being read."""
        return self.paused_by_peer or self.held


class Splice:
    """A client connection spliced to a target connection.

    ``client`` and ``target`` are the two :class:`_Side` protocols;
    ``client.received`` counts bytes from the client (forwarded to the
    target), ``target.received`` bytes from the target.  ``closed`` is a
    Deferred firing (with the splice) once both connections are gone.
    ``target_name`` is the target's ``name (host:port)``.
    """

    def __init__(self, target_name: str = "?", relay=None):
        self.target_name = target_name
        #: a :class:`~junction.gateway.relay.RelayEngine` to hand plain TCP splices to
        self.relay = relay
        #: True once the engine carries the connections (the sides are then idle)
        self.relayed = False
        #: why a relayed splice ended abnormally (None: cleanly)
        self.relay_reason: str | None = None
        self.client = _Side(self, "client")
        self.target = _Side(self, "target")
        self.client.peer = self.target
        self.target.peer = self.client
        self.closed: defer.Deferred = defer.Deferred()
        self.started = False

    @property
    def bytes_from_client(self) -> int:
        return self.client.received

    @property
    def bytes_from_target(self) -> int:
        return self.target.received

    def start(self, client_transport, buffered: bytes) -> None:
        """Splice ``client_transport`` to the connected target side, replaying ``buffered``."""
        client, target = self.client, self.target
        client.held = True
        rebind(client_transport, client)
        client.makeConnection(client_transport)
        if self.relay is not None and self.relay.adopt(self, client_transport, target.transport, to_target=buffered):
            self.relayed = self.started = True
            client.received += len(buffered)
            return
        for transport in (client_transport, target.transport):
            if hasattr(transport, "bufferSize"):
                transport.bufferSize = FORWARD_BUFFER_SIZE
        # each side produces what the other's transport writes
        target.transport.registerProducer(client, True)
        client_transport.registerProducer(target, True)
        self.started = True
        if buffered:
            client.received += len(buffered)
            target.transport.write(buffered)
        client.held = False
        client._update_reading()

    def abort(self) -> None:
        """Abort both connections (pending bytes dropped)."""
        if self.relayed:
            self.relay.close(self, abort=True)
            return
        for side in (self.client, self.target):
            if side.transport is not None and not side.lost:
                _abort(side.transport)

    def close(self) -> None:
        """Close both connections cleanly (pending bytes are written first)."""
        if self.relayed:
            self.relay.close(self)
            return
        for side in (self.client, self.target):
            if side.transport is not None and not side.lost:
                side.transport.loseConnection()

    def _relay_finished(self, from_client: int, from_target: int, reason: str | None) -> None:
        """The relay engine is done with this splice's connections (on the reactor thread)."""
        self.client.received += from_client
        self.target.received += from_target
        self.relay_reason = reason
        if not self.closed.called:
            self.closed.callback(self)

    # -- called by the sides --------------------------------------------------------
    def _read_closed(self, side: _Side) -> None:
        other = side.peer
        if not other.lost and other.transport is not None:
            # TLS cannot pass a half-close on (Twisted's TLS would hand loseWriteConnection
            # to the TCP connection below it, sending a FIN without close_notify): such a
            # transport is closed once its pending bytes are sent, as one that cannot half-close
            lose_write = None
            if not isinstance(other.transport, TLSMemoryBIOProtocol):
                lose_write = getattr(other.transport, "loseWriteConnection", None)
            if lose_write is not None:
                lose_write()
            else:
                other.transport.loseConnection()
        if side.write_closed and not side.lost:
            side.transport.loseConnection()

    def _lost(self, side: _Side, reason) -> None:
        other = side.peer
        if not other.lost and other.transport is not None:
            if reason is None or reason.check(error.ConnectionDone):
                other.transport.loseConnection()
            else:
                _abort(other.transport)
        if self.client.lost and (self.target.lost or self.target.transport is None):
            if not self.closed.called:
                self.closed.callback(self)

    def __repr__(self) -> str:
        return (
            f"<Splice to {self.target_name}: {self.client.received} bytes in, "
            f"{self.target.received} bytes out>"
        )


def _abort(transport) -> None:
    abort = getattr(transport, "abortConnection", None)
    if abort is not None:
        abort()
    else:  # pragma: no cover - every Twisted TCP transport can abort
        transport.loseConnection()


class _TargetFactory(ClientFactory):
    """Connects one target side and starts the splice once connected.

    With a ``handshake`` (see :func:`connect_and_forward`) the splice starts
    only once the handshake with the target is over.
    """

    noisy = False

    def __init__(
        self, splice: Splice, client_transport, buffered: bytes, params, deferred,
        handshake=None, reactor=None, timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ):
        self.splice = splice
        self.client_transport = client_transport
        self.buffered = buffered
        self.params = params
        self.deferred = deferred
        self.handshake = handshake
        self.reactor = reactor
        self.timeout = timeout
        self.timer = None
        #: how much of ``buffered`` went out with the handshake's first bytes
        self.written = 0
        #: a PROXY protocol header to write before anything else, or b""
        self.proxy_header = b""
        #: the target speaks TLS (the factory is wrapped): connected once the handshake is done
        self.tls = False

    def buildProtocol(self, addr):
        side = self.splice.target
        side.factory = self
        side.on_connected = self._tls_started if self.tls else self._connected
        return side

    def _tls_started(self) -> None:
        """TCP is up to a TLS target: connected only once its handshake (and host check) is done."""
        target = self.splice.target
        waiter = _TLSWait(self)
        target.intercept = waiter
        target.on_tls_done = waiter.done
        if self.reactor is not None:
            waiter.timer = self.reactor.callLater(self.timeout, waiter.timed_out)

    def _connected(self) -> None:
        splice = self.splice
        target = splice.target
        if self.deferred.called:
            # cancelled while connecting: nobody wants this connection
            _abort(target.transport)
            return
        apply_socket_options(target.transport, self.params)
        if getattr(self.client_transport, "disconnected", False):
            target.transport.loseConnection()
            self.deferred.errback(
                ForwardConnectError(splice.target_name, "the client went away while connecting")
            )
            return
        if self.proxy_header:
            write_through(target.transport, self.proxy_header)
        if self.handshake is not None:
            self._start_handshake()
            return
        self._start_splice(bytes(self.buffered))

    def _start_splice(self, buffered: bytes, to_client: bytes = b"") -> None:
        splice = self.splice
        target = splice.target
        try:
            if to_client:
                target.received += len(to_client)
                write_through(self.client_transport, to_client)
            # read now, not when connecting began: a bytearray the caller kept
            # appending to meanwhile is replayed whole
            splice.start(self.client_transport, buffered)
        except Exception:
            _abort(target.transport)
            self.deferred.errback()
            return
        self.buffered = b""
        self.deferred.callback(splice)

    # -- the handshake with the target, before the splice ---------------------------
    def _start_handshake(self) -> None:
        target = self.splice.target
        try:
            first = self.handshake.start()
        except Exception as exc:  # noqa: BLE001 - e.g. credentials the handshake cannot carry
            _abort(target.transport)
            self._handshake_failed(str(exc) or type(exc).__name__, None)
            return
        buffered = bytes(self.buffered)
        self.written = len(buffered)
        target.intercept = self
        if self.reactor is not None:
            self.timer = self.reactor.callLater(self.timeout, self._handshake_timed_out)
        write_through(target.transport, first + buffered)

    def data_received(self, data: bytes) -> None:
        """Bytes from the target during the handshake."""
        target = self.splice.target
        try:
            to_client = self.handshake.feed(data)
        except ForwardHandshakeError as exc:
            target.intercept = None
            self._stop_timer()
            target.transport.loseConnection()
            self._handshake_failed(exc.reason, exc.condition)
            return
        if to_client is None:
            return
        target.intercept = None
        self._stop_timer()
        if self.deferred.called:  # cancelled meanwhile
            _abort(target.transport)
            return
        if getattr(self.client_transport, "disconnected", False):
            target.transport.loseConnection()
            self.deferred.errback(
                ForwardConnectError(self.splice.target_name, "the client went away during the handshake")
            )
            return
        self._start_splice(bytes(self.buffered[self.written :]), to_client)

    def connection_lost(self, reason) -> None:
        """The target closed the connection during the handshake."""
        self._stop_timer()
        why = "the target closed the connection during the handshake"
        if reason is not None and not reason.check(error.ConnectionDone):
            why += f" ({_describe(reason)})"
        self._handshake_failed(why, None)

    def _handshake_timed_out(self) -> None:
        self.timer = None
        target = self.splice.target
        target.intercept = None
        if target.transport is not None:
            _abort(target.transport)
        self._handshake_failed(f"no handshake answer within {self.timeout:g} s", None)

    def _handshake_failed(self, reason: str, condition: str | None) -> None:
        self._stop_timer()
        if not self.deferred.called:
            self.deferred.errback(ForwardHandshakeError(self.splice.target_name, reason, condition))

    def _stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def clientConnectionFailed(self, connector, reason) -> None:
        if not self.deferred.called:
            self.deferred.errback(ForwardConnectError(self.splice.target_name, _describe(reason)))


class _TLSWait:
    """Intercepts a TLS target side until its handshake is done (see ``_TargetFactory._tls_started``)."""

    def __init__(self, factory: _TargetFactory):
        self.factory = factory
        self.timer = None

    def _stop(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def done(self) -> None:
        self._stop()
        target = self.factory.splice.target
        if target.intercept is self:
            target.intercept = None
        self.factory._connected()

    def data_received(self, data: bytes) -> None:  # pragma: no cover - Twisted delivers data after the handshake
        pass

    def connection_lost(self, reason) -> None:
        self._stop()
        factory = self.factory
        if not factory.deferred.called:
            factory.deferred.errback(ForwardConnectError(factory.splice.target_name, f"TLS: {_describe(reason)}"))

    def timed_out(self) -> None:
        self.timer = None
        factory = self.factory
        target = factory.splice.target
        target.intercept = None
        target.on_tls_done = None
        if target.transport is not None:
            _abort(target.transport)
        if not factory.deferred.called:
            factory.deferred.errback(
                ForwardConnectError(factory.splice.target_name, f"TLS handshake not done within {factory.timeout:g} s")
            )


def connect_and_forward(
    client_transport,
    buffered: bytes,
    target_connector,
    reactor,
    *,
    timeout: float | None = None,
    handshake=None,
    relay=None,
) -> defer.Deferred:
    """Connect to ``target_connector`` and splice ``client_transport`` to it.

    ``target_connector`` is a :class:`junction.config.model.Connector` (its
    ``host``, ``port`` and URL ``params``: ``connect-timeout-millis``,
    ``localAddress``/``localPort``, ``tcpNoDelay``, socket buffer sizes).
    ``buffered`` -- every byte the client sent so far -- is written to the
    target first, unmodified; it is read once connected, so bytes the caller
    appends to a ``bytearray`` while connecting are included.  The client transport stops being read at once
    and is read again only once spliced.

    Returns a Deferred firing with the :class:`Splice` once connected, or
    failing with :class:`ForwardConnectError` (the client transport is then
    untouched and still the caller's, for its protocol's refusal).
    Cancelling it while connecting stops the attempt.  ``timeout``: seconds to
    connect (the connector's ``connect-timeout-millis`` wins, then this, then
    :data:`DEFAULT_CONNECT_TIMEOUT`).

    A connector with ``proxyProtocolEnabled=true`` (or ``proxyEnabled=true``)
    gets a PROXY protocol v2 header first (:func:`proxy_header_for`); a
    client transport whose addresses cannot go in one fails the Deferred
    with :class:`ForwardConnectError` before connecting.

    ``handshake`` (optional) is run with the target before the splice, for a
    protocol whose opening the gateway must redo on the client's behalf
    (AMQP's SASL): once connected, ``handshake.start()`` followed by
    ``buffered`` is written to the target, then what the target sends goes
    to ``handshake.feed(data)``, which returns None while it needs more,
    the bytes to pass to the client (possibly empty) once the handshake is
    over -- then the splice starts, with any bytes appended to ``buffered``
    meanwhile -- or raises :class:`ForwardHandshakeError`.  What the
    handshake consumed never reaches the client: for AMQP that is the
    target's SASL exchange and its AMQP header (the gateway answered the
    client's header itself), however the target's bytes were cut into
    reads; the target's Open, in the same read or later, goes on.  A failed
    handshake (or the target closing, or no answer within the same timeout)
    fails the Deferred with :class:`ForwardHandshakeError`; the client
    transport is then still the caller's.

    ``relay`` (optional) is a :class:`~junction.gateway.relay.RelayEngine`:
    when both connections are plain TCP with nothing queued, the spliced
    bytes are then copied on its thread instead of by the reactor.
    """
    params = dict(getattr(target_connector, "params", None) or {})
    name = target_address(target_connector)
    seconds = timeout if timeout is not None else DEFAULT_CONNECT_TIMEOUT
    if "connect-timeout-millis" in params:
        try:
            millis = int(params["connect-timeout-millis"])
            if millis > 0:
                seconds = millis / 1000.0
        except ValueError:
            pass
    bind = None
    if params.get("localAddress"):
        bind = (params["localAddress"], int(params.get("localPort", 0) or 0))
    proxy_header = b""
    if proxy_enabled(params):
        try:
            proxy_header = proxy_header_for(client_transport)
        except ProtocolError as exc:
            return defer.fail(ForwardConnectError(name, f"cannot write a PROXY header: {exc}"))
    splice = Splice(name, relay=relay)
    connector_box: list = []

    def cancel(_d) -> None:
        if connector_box:
            try:
                connector_box[0].stopConnecting()
            except error.NotConnectingError:
                pass
        factory._stop_timer()
        splice.target.intercept = None
        if splice.target.transport is not None and not splice.target.lost:
            _abort(splice.target.transport)

    deferred = defer.Deferred(cancel)
    client_transport.pauseProducing()
    factory = _TargetFactory(
        splice, client_transport, buffered, params, deferred,
        handshake=handshake, reactor=reactor, timeout=seconds,
    )
    connecting = factory
    tls = getattr(target_connector, "tls", None)
    if tls is not None:
        # the PROXY header goes on the wire before the TLS handshake, as HAProxy sends it
        try:
            connecting = wrap_client_factory(
                factory, tls, target_connector.host, reactor=reactor, prefix=proxy_header
            )
            factory.tls = True
        except Exception as exc:  # the stores became unreadable since the config was checked
            return defer.fail(ForwardConnectError(name, f"TLS: {exc}"))
    else:
        factory.proxy_header = proxy_header
    try:
        connector = reactor.connectTCP(
            target_connector.host, int(target_connector.port), connecting, timeout=seconds, bindAddress=bind
        )
    except Exception as exc:  # a bad host string, no route ...
        return defer.fail(ForwardConnectError(name, str(exc) or type(exc).__name__))
    connector_box.append(connector)
    return deferred
