"""EagerWriter (junction/edge/eager.py): a quiet connection's frame leaves at
once; a burst, a partly sent frame and anything but plain TCP go through
Twisted's buffered write, in order.  Real sockets (a connected pair), Twisted's
real ``tcp.Connection``, a MemoryReactor to see what registers for writing."""

from __future__ import annotations

import socket

from twisted.internet import tcp
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactor, StringTransport

from junction.edge.eager import EAGER_QUIET_S, EagerWriter


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _connection():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    reactor = MemoryReactor()
    connection = tcp.Connection(ours, Protocol(), reactor)
    connection.connected = True
    return connection, theirs, reactor


def _read_all(sock) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_a_quiet_connection_sends_at_once_without_registering_for_writing():
    connection, peer, reactor = _connection()
    writer = EagerWriter(connection, clock=_Clock())
    writer.write(b"response-1")
    assert _read_all(peer) == b"response-1"
    assert writer.eager_sends == 1
    assert connection not in reactor.getWriters()


def test_a_burst_is_buffered_by_the_transport_and_sent_in_order():
    connection, peer, reactor = _connection()
    clock = _Clock()
    writer = EagerWriter(connection, clock=clock)
    writer.write(b"a")
    clock.now += EAGER_QUIET_S / 2  # the next frame is close behind: a burst
    writer.write(b"b")
    writer.write(b"c")
    assert _read_all(peer) == b"a"
    assert connection in reactor.getWriters()
    clock.now += EAGER_QUIET_S * 2  # quiet again, but b and c are unsent: buffered behind them
    writer.write(b"d")
    assert writer.eager_sends == 1
    connection.doWrite()
    assert _read_all(peer) == b"bcd"


def test_what_the_kernel_does_not_take_is_left_to_the_transport():
    connection, peer, reactor = _connection()
    connection.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    writer = EagerWriter(connection, clock=_Clock())
    frame = bytes(range(256)) * 4096  # 1 MiB: more than the socket takes at once
    writer.write(frame)
    assert connection in reactor.getWriters()
    received = _read_all(peer)
    assert 0 < len(received) < len(frame)
    while len(received) < len(frame):
        connection.doWrite()
        received += _read_all(peer)
    assert received == frame


def test_a_closed_peer_is_reported_by_the_transport_not_raised():
    connection, peer, reactor = _connection()
    peer.close()
    writer = EagerWriter(connection, clock=_Clock())
    for _ in range(3):  # the first send may succeed into the buffer; a later one fails
        writer.write(b"x" * 1000)
    # nothing raised; what failed is buffered for the transport, whose write path
    # meets the error and ends the connection
    assert connection in reactor.getWriters()


def test_a_transport_that_is_not_plain_tcp_is_written_through():
    transport = StringTransport()
    writer = EagerWriter(transport, clock=_Clock())
    writer.write(b"frame")
    assert transport.value() == b"frame"
    assert writer.eager_sends == 0


def test_a_closing_connection_is_written_through():
    connection, peer, reactor = _connection()
    connection.disconnecting = True
    writer = EagerWriter(connection, clock=_Clock())
    writer.write(b"late")
    assert writer.eager_sends == 0
    assert _read_all(peer) == b""


def test_a_busy_connection_stays_buffered_even_when_its_buffer_has_drained():
    connection, peer, reactor = _connection()
    clock = _Clock()
    writer = EagerWriter(connection, clock=clock)
    writer.write(b"1")  # quiet: at once
    for frame in (b"2", b"3", b"4"):  # every write close behind the previous one
        clock.now += EAGER_QUIET_S / 2
        connection.doWrite()  # the reactor drained the buffer in between
        writer.write(frame)
    assert writer.eager_sends == 1
    connection.doWrite()
    assert _read_all(peer) == b"1234"
    clock.now += EAGER_QUIET_S  # quiet again
    writer.write(b"5")
    assert writer.eager_sends == 2
    assert _read_all(peer) == b"5"
