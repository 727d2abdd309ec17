"""The forwarding splice on in-memory transports and a MemoryReactorClock.

The target connection is made by hand from what ``connect_and_forward``
asked the fake reactor for (``reactor.tcpClients``).  Both connections are
:class:`tests.unit.gateway_fixtures.Wire`: a ``StringTransport`` that behaves
like Twisted's TCP transport where the splice depends on it (half-close, a
write buffer that pauses its streaming producer beyond ``bufferSize``).
"""

from __future__ import annotations

import pytest
from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from junction.config.model import Connector
from junction.gateway.forward import (
    DEFAULT_CONNECT_TIMEOUT,
    FORWARD_BUFFER_SIZE,
    ForwardConnectError,
    ForwardHandshakeError,
    Splice,
    connect_and_forward,
)
from tests.unit.gateway_fixtures import Wire

TARGET = Connector(name="core1", scheme="tcp", host="127.0.0.1", port=61001)


class Owner(Protocol):
    """Stands for the listener's protocol, which owns the client transport before the splice."""

    def __init__(self):
        self.received = []

    def dataReceived(self, data):
        self.received.append(data)


def client_wire() -> Wire:
    wire = Wire()
    owner = Owner()
    wire.protocol = owner
    owner.makeConnection(wire)
    return wire


def connect_target(reactor: MemoryReactorClock, index: int = -1):
    """Complete a connection ``connect_and_forward`` asked for (the last by default).

    Returns the target's (protocol, wire).
    """
    _host, _port, factory, _timeout, _bind = reactor.tcpClients[index]
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 61001))
    wire = Wire("127.0.0.1", 61001)
    wire.protocol = protocol
    protocol.makeConnection(wire)
    return protocol, wire


def outcome(d: defer.Deferred):
    box = []
    d.addBoth(box.append)
    assert box, "the Deferred has not fired"
    return box[0]


@pytest.fixture
def reactor():
    return MemoryReactorClock()


def spliced(reactor, opening=b"CONNECT\nlogin:a\n\n\0"):
    client = client_wire()
    d = connect_and_forward(client, opening, TARGET, reactor)
    _side, target = connect_target(reactor)
    splice = outcome(d)
    assert isinstance(splice, Splice)
    return splice, client, target


# -- connecting --------------------------------------------------------------------------


def test_connects_to_the_connector_and_stops_reading_the_client_meanwhile(reactor):
    client = client_wire()
    d = connect_and_forward(client, b"CONNECT\n\n\0", TARGET, reactor)
    (host, port, _factory, timeout, bind) = reactor.tcpClients[0]
    assert (host, port, timeout, bind) == ("127.0.0.1", 61001, DEFAULT_CONNECT_TIMEOUT, None)
    assert client.producerState == "paused"
    assert not d.called


def test_connector_parameters_set_timeout_and_local_address(reactor):
    connector = Connector(
        name="c",
        scheme="tcp",
        host="10.1.1.1",
        port=5000,
        params={"connect-timeout-millis": "2500", "localAddress": "10.0.0.9", "localPort": "0"},
    )
    connect_and_forward(client_wire(), b"", connector, reactor, timeout=7)
    (_h, _p, _f, timeout, bind) = reactor.tcpClients[0]
    assert timeout == 2.5
    assert bind == ("10.0.0.9", 0)
    connect_and_forward(client_wire(), b"", TARGET, reactor, timeout=7)
    assert reactor.tcpClients[1][3] == 7


def test_the_opening_is_replayed_first_unmodified_then_the_client_is_read_again(reactor):
    opening = b"\nCONNECT\nlogin:alice\npasscode:secret\nclient-id:c1\n\n\0SEND\ndestination:q\n\nx\0"
    splice, client, target = spliced(reactor, opening)
    assert target.value() == opening
    assert client.producerState == "producing"
    assert splice.bytes_from_client == len(opening)


def test_bytes_added_to_the_buffer_while_connecting_are_replayed_too(reactor):
    client = client_wire()
    buffered = bytearray(b"CONNECT\n\n\0")
    d = connect_and_forward(client, buffered, TARGET, reactor)
    buffered += b"SEND\ndestination:q\n\n\0"  # a read that was already under way
    _side, target = connect_target(reactor)
    outcome(d)
    assert target.value() == b"CONNECT\n\n\0SEND\ndestination:q\n\n\0"


def test_the_client_transport_is_handed_to_the_splice(reactor):
    splice, client, target = spliced(reactor)
    assert client.protocol is splice.client
    assert target.protocol is splice.target
    # each side produces what the other's transport writes
    assert target.producer is splice.client and target.streaming
    assert client.producer is splice.target and client.streaming
    assert client.bufferSize == target.bufferSize == FORWARD_BUFFER_SIZE


def test_connect_failure_is_reported_naming_the_target_and_leaves_the_client_alone(reactor):
    client = client_wire()
    owner = client.protocol
    d = connect_and_forward(client, b"CONNECT\n\n\0", TARGET, reactor)
    _host, _port, factory, _t, _b = reactor.tcpClients[0]
    factory.clientConnectionFailed(reactor.connectors[0], Failure(error.ConnectionRefusedError()))
    failure = outcome(d)
    assert isinstance(failure, Failure) and failure.check(ForwardConnectError)
    exc = failure.value
    assert exc.target == "core1 (127.0.0.1:61001)"
    assert exc.reason == "connection refused"
    assert str(exc) == "could not connect to target core1 (127.0.0.1:61001): connection refused"
    assert client.protocol is owner and not client.disconnecting
    assert client.producerState == "paused"


def test_connect_timeout_is_reported(reactor):
    d = connect_and_forward(client_wire(), b"", TARGET, reactor)
    reactor.tcpClients[0][2].clientConnectionFailed(reactor.connectors[0], Failure(error.TimeoutError()))
    assert outcome(d).value.reason == "timed out"


def test_cancelling_while_connecting_stops_the_attempt(reactor):
    client = client_wire()
    d = connect_and_forward(client, b"CONNECT\n\n\0", TARGET, reactor)
    d.cancel()
    assert reactor.connectors[0].stoppedConnecting
    assert outcome(d).check(defer.CancelledError)
    # the connection completing anyway (a race) is aborted, the client untouched
    owner = client.protocol
    _side, target = connect_target(reactor)
    assert target.disconnected
    assert client.protocol is owner


# -- relaying ----------------------------------------------------------------------------


def test_bytes_flow_both_ways_unparsed(reactor):
    splice, client, target = spliced(reactor)
    target.clear()
    splice.client.dataReceived(b"\x00\xffnot STOMP at all")
    assert target.value() == b"\x00\xffnot STOMP at all"
    splice.target.dataReceived(b"CONNECTED\nversion:1.2\n\n\0")
    assert client.value() == b"CONNECTED\nversion:1.2\n\n\0"
    assert splice.bytes_from_target == len(b"CONNECTED\nversion:1.2\n\n\0")


def test_a_full_target_buffer_pauses_reading_the_client_until_it_drains(reactor):
    splice, client, target = spliced(reactor)
    target.drain()
    chunk = b"x" * 16384
    reads = 0
    while client.producerState == "producing":
        splice.client.dataReceived(chunk)
        reads += 1
        assert reads < 100, "the client was never paused"
    # paused as soon as more than the limit waits: at most one read beyond it
    assert FORWARD_BUFFER_SIZE < target.pending <= FORWARD_BUFFER_SIZE + len(chunk)
    assert splice.client.paused and client.producerState == "paused"
    assert target.drain() == chunk * reads
    assert client.producerState == "producing"


def test_a_full_client_buffer_pauses_reading_the_target(reactor):
    splice, client, target = spliced(reactor)
    splice.target.dataReceived(b"m" * (FORWARD_BUFFER_SIZE + 1))
    assert target.producerState == "paused"
    assert client.producerState == "producing"  # the other direction is unaffected
    client.drain()
    assert target.producerState == "producing"


def test_a_replay_that_fills_the_target_buffer_keeps_the_client_paused(reactor):
    client = client_wire()
    d = connect_and_forward(client, b"y" * (FORWARD_BUFFER_SIZE + 10), TARGET, reactor)
    _side, target = connect_target(reactor)
    outcome(d)
    assert client.producerState == "paused"
    target.drain()
    assert client.producerState == "producing"


# -- closing -----------------------------------------------------------------------------


def test_half_close_is_passed_on_and_both_close_once_both_directions_are_done(reactor):
    splice, client, target = spliced(reactor)
    closed = []
    splice.closed.addCallback(closed.append)
    # the client sends FIN: the target's write side is shut after its pending bytes
    splice.client.readConnectionLost()
    assert target.write_shut and not target.disconnecting
    # the target still talks to the client
    splice.target.dataReceived(b"RECEIPT\nreceipt-id:1\n\n\0")
    assert client.value().endswith(b"RECEIPT\nreceipt-id:1\n\n\0")
    splice.target.writeConnectionLost()  # our shutdown toward the target is done
    assert not target.disconnecting  # it may still send
    # now the target sends FIN too
    splice.target.readConnectionLost()
    assert client.write_shut
    assert target.disconnecting  # read and write both closed: closed for good
    splice.client.writeConnectionLost()
    assert client.disconnecting
    splice.client.connectionLost(Failure(error.ConnectionDone()))
    splice.target.connectionLost(Failure(error.ConnectionDone()))
    assert closed == [splice]


def test_a_client_reset_aborts_the_target(reactor):
    splice, client, target = spliced(reactor)
    splice.client.connectionLost(Failure(error.ConnectionLost()))
    assert target.disconnected  # StringTransport.abortConnection
    splice.target.connectionLost(Failure(error.ConnectionAborted()))
    assert outcome(splice.closed) is splice


def test_a_target_abort_aborts_the_client(reactor):
    splice, client, target = spliced(reactor)
    splice.target.connectionLost(Failure(error.ConnectionAborted()))
    assert client.disconnected


def test_a_clean_close_closes_the_other_side_cleanly(reactor):
    splice, client, target = spliced(reactor)
    splice.target.connectionLost(Failure(error.ConnectionDone()))
    assert client.disconnecting and not client.disconnected


def test_abort_and_close(reactor):
    splice, client, target = spliced(reactor)
    splice.abort()
    assert client.disconnected and target.disconnected
    splice2, client2, target2 = spliced(reactor)
    splice2.close()
    assert client2.disconnecting and target2.disconnecting
    assert not client2.disconnected and not target2.disconnected


def test_no_reading_is_resumed_after_eof(reactor):
    splice, client, target = spliced(reactor)
    splice.client.readConnectionLost()
    client.producerState = "paused"
    splice.client.resumeProducing()  # the target's buffer drained
    assert client.producerState == "paused"  # resuming would read EOF again


# -- write_through: a relayed chunk leaves at once when nothing is queued ----------------------
class _Port:
    _realPortNumber = 1


def _tcp_server_on_socketpair():
    """A real twisted tcp.Server over one end of a socketpair (the reactor is a memory one)."""
    import socket as socket_module

    from twisted.internet import tcp
    from twisted.internet.protocol import Protocol

    a, b = socket_module.socketpair()
    a.setblocking(False)
    a.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_SNDBUF, 4096)
    b.setsockopt(socket_module.SOL_SOCKET, socket_module.SO_RCVBUF, 4096)
    reactor = MemoryReactorClock()
    server = tcp.Server(a, Protocol(), ("127.0.0.1", 5000), _Port(), 1, reactor)
    return server, b, reactor


def _drain(server, peer, want: int) -> bytes:
    """Read what the server's socket sends, letting it write what it queued, until ``want`` bytes."""
    peer.setblocking(False)
    got = b""
    for _ in range(100000):
        if len(got) >= want:
            break
        if server in server.reactor.getWriters():
            server.doWrite()
        try:
            got += peer.recv(65536)
        except BlockingIOError:
            pass
    return got


def test_write_through_sends_at_once_and_queues_only_what_the_kernel_refuses():
    from junction.gateway.forward import write_through

    server, peer, reactor = _tcp_server_on_socketpair()
    try:
        write_through(server, b"first")
        assert peer.recv(100) == b"first"  # sent now, not on a later reactor pass
        assert server not in reactor.getWriters()
        big = bytes(range(256)) * 4096  # 1 MiB: more than the socket buffers hold
        write_through(server, big)
        assert server in reactor.getWriters() and server._tempDataLen > 0  # the rest is queued
        write_through(server, b"tail")  # must queue behind it, not jump ahead
        assert _drain(server, peer, len(big) + 4) == big + b"tail"
        server.doWrite()
        assert server not in reactor.getWriters()
    finally:
        server.socket.close()
        peer.close()


def test_write_through_leaves_other_transports_to_their_write():
    from junction.gateway.forward import write_through

    transport = StringTransport()
    write_through(transport, b"abc")
    assert transport.value() == b"abc"
    server, peer, reactor = _tcp_server_on_socketpair()
    try:
        server.loseWriteConnection()  # a half-close under way: Twisted's write queues it
        write_through(server, b"late")
        assert server._tempDataLen == 4
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):
            peer.recv(10)
    finally:
        server.socket.close()
        peer.close()


# -- a handshake with the target ----------------------------------------------------------


class Waiting:
    """A handshake that writes nothing and waits for an answer that never comes."""

    def start(self) -> bytes:
        return b""

    def feed(self, data: bytes):
        return None


def test_a_target_half_closing_during_the_handshake_fails_it_at_once(reactor):
    """A target that sends FIN before answering (a node whose acceptor does not serve the
    client's protocol closes so) fails the handshake then, not at the timeout; the gateway
    closes its side of the target connection too."""
    client = client_wire()
    d = connect_and_forward(client, b"opening", TARGET, reactor, handshake=Waiting(), timeout=10)
    side, target = connect_target(reactor)
    assert target.value() == b"opening" and not d.called
    side.readConnectionLost()
    failure = outcome(d)
    assert failure.check(ForwardHandshakeError), failure
    assert failure.value.reason == "the target closed the connection during the handshake"
    assert target.disconnecting
    assert not reactor.getDelayedCalls()  # the handshake timer is cancelled
