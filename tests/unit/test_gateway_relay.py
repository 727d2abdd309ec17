"""The relay engine on real sockets and its real thread.

Each test builds two TCP connections on loopback (the client's and the target's
connections as the gateway holds them), wraps the gateway's ends in
Twisted ``tcp.Server`` transports on a memory reactor, as the listener and
the forwarder hold them, and hands them to a :class:`RelayEngine`.  The
far ends play the client and the broker core.  The engine reports a
finished pair through ``reactor.callFromThread``; the stub reactor queues
those calls and the test runs them on its own thread, as the reactor would.
"""

from __future__ import annotations

import queue
import socket
import time

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from junction.gateway.relay import RELAY_READ_SIZE, RelayEngine, relayable

TIMEOUT = 10.0


class ThreadReactor:
    """What the engine needs of a reactor: callFromThread, queued for the test to run."""

    def __init__(self):
        self.calls: queue.Queue = queue.Queue()

    def callFromThread(self, f, *args):
        self.calls.put((f, args))

    def run_one(self, timeout: float = TIMEOUT):
        f, args = self.calls.get(timeout=timeout)
        f(*args)


class _Port:
    _realPortNumber = 1


class Splice:
    """Records what the engine reports, as forward.Splice does."""

    def __init__(self):
        self.finished = None

    def _relay_finished(self, from_client, from_target, reason):
        self.finished = (from_client, from_target, reason)


def twisted_end(sock: socket.socket, memory_reactor) -> tcp.Server:
    sock.setblocking(False)
    return tcp.Server(sock, Protocol(), ("127.0.0.1", 5000), _Port(), 1, memory_reactor)


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of one TCP connection on loopback (resets need TCP, not a Unix socketpair)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        far = socket.create_connection(listener.getsockname())
        near, _ = listener.accept()
    return far, near


@pytest.fixture
def world():
    reactor = ThreadReactor()
    engine = RelayEngine(reactor)
    memory = MemoryReactorClock()
    client_far, client_near = tcp_pair()
    target_far, target_near = tcp_pair()
    for far in (client_far, target_far):
        far.settimeout(TIMEOUT)
    transports = (twisted_end(client_near, memory), twisted_end(target_near, memory))
    splice = Splice()
    yield engine, reactor, splice, transports, client_far, target_far
    engine.stop()
    for s in (client_far, target_far):
        s.close()


def adopt(world, to_target=b"", to_client=b""):
    engine, reactor, splice, (client_t, target_t), client, target = world
    assert engine.adopt(splice, client_t, target_t, to_target=to_target, to_client=to_client)
    for t in (client_t, target_t):  # what the reactor does next: Twisted closes its own descriptor
        why = t.doWrite()
        t.connectionLost(Failure(why))
        assert not t.connected
    return engine, reactor, splice, client, target


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_bytes_flow_both_ways_after_the_replayed_opening(world):
    engine, reactor, splice, client, target = adopt(world, to_target=b"CONNECT\n\n\0", to_client=b"hi")
    assert recv_exactly(client, 2) == b"hi"
    assert recv_exactly(target, 10) == b"CONNECT\n\n\0"
    client.sendall(b"SEND")
    assert recv_exactly(target, 4) == b"SEND"
    target.sendall(b"MESSAGE")
    assert recv_exactly(client, 7) == b"MESSAGE"
    client.shutdown(socket.SHUT_WR)
    assert target.recv(10) == b""  # the half-close reached the target
    target.sendall(b"late")  # and the other direction still works
    assert recv_exactly(client, 4) == b"late"
    target.shutdown(socket.SHUT_WR)
    assert client.recv(10) == b""
    reactor.run_one()
    assert splice.finished == (4, 7 + 4, None)  # counted from the sockets (the replay is the caller's)
    assert engine.pairs == 0


def test_a_reset_on_one_side_resets_the_other(world):
    engine, reactor, splice, client, target = adopt(world)
    client.sendall(b"x")
    assert recv_exactly(target, 1) == b"x"
    target.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    target.close()
    reactor.run_one()
    assert splice.finished[2] == "connection reset"
    with pytest.raises(ConnectionResetError):
        while client.recv(10):
            pass


def test_a_reader_that_does_not_read_stops_the_writer_with_bounded_memory(world):
    engine, reactor, splice, client, target = adopt(world)
    client.setblocking(False)
    chunk = bytes(range(256)) * 256  # 64 KiB
    sent = 0
    stalled_since = None
    while True:  # write until the kernel and the relay take nothing more for a while
        try:
            sent += client.send(chunk[sent % 256 :])  # the stream stays 0..255 repeated
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 0.5:
                break
            time.sleep(0.01)
        assert sent < 64 * 1024 * 1024, "the relay kept accepting: no backpressure"
    # what was accepted is the socket buffers plus at most one read waiting in the relay
    buffers = sum(
        s.getsockopt(socket.SOL_SOCKET, opt)
        for s in (client, target)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF)
    )
    assert sent <= 2 * buffers + RELAY_READ_SIZE
    client.setblocking(True)
    got = recv_exactly(target, sent)
    assert got == (bytes(range(256)) * (sent // 256 + 1))[:sent]  # everything, in order


def test_close_ends_cleanly_and_stop_resets(world):
    engine, reactor, splice, client, target = adopt(world)
    engine.close(splice)
    reactor.run_one()
    assert splice.finished == (0, 0, None)
    assert client.recv(10) == b"" and target.recv(10) == b""


def test_stop_resets_open_pairs(world):
    engine, reactor, splice, client, target = adopt(world)
    client.sendall(b"x")
    assert recv_exactly(target, 1) == b"x"
    engine.stop()
    with pytest.raises(ConnectionResetError):
        client.recv(10)


def test_only_plain_idle_tcp_transports_are_taken(world):
    engine, reactor, splice, (client_t, target_t), client, target = world
    assert not relayable(StringTransport())
    assert relayable(client_t)
    target_t.write(b"queued")  # Twisted holds bytes for it: the reactor keeps relaying
    assert not relayable(target_t)
    assert not engine.adopt(splice, client_t, target_t)
    assert client_t.connected and target_t.connected  # nothing was taken


def test_a_failure_in_the_relay_thread_resets_its_pairs_and_the_next_pair_gets_a_new_thread(world, monkeypatch):
    engine, reactor, splice, client, target = adopt(world)

    def broken(pair, fd):
        raise RuntimeError("a bug")

    monkeypatch.setattr(engine, "_relay_one", broken)
    client.sendall(b"x")
    reactor.run_one()
    assert splice.finished[2] == "relay failure"
    with pytest.raises(ConnectionResetError):
        target.recv(10)
    monkeypatch.undo()
    client2, client2_near = tcp_pair()
    target2, target2_near = tcp_pair()
    memory = MemoryReactorClock()
    second = Splice()
    assert engine.adopt(second, twisted_end(client2_near, memory), twisted_end(target2_near, memory))
    client2.sendall(b"again")
    target2.settimeout(TIMEOUT)
    assert recv_exactly(target2, 5) == b"again"
    engine.close(second)
    reactor.run_one()
    assert second.finished == (5, 0, None)
    for s in (client2, target2):
        s.close()


def test_after_stop_nothing_more_is_taken_or_sent(world):
    engine, reactor, splice, (client_t, target_t), client, target = world
    engine.stop()
    assert not engine.adopt(splice, client_t, target_t)
    engine.close(splice)  # no thread, no pipe: ignored, not an error
