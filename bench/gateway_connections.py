"""The gateway bench's new-connection trials: sequential openings with a minimal raw-socket client.

So that the figure is the server side's cost rather than a client
library's, each loop speaks just enough of the protocol over a blocking
socket: STOMP ``CONNECT`` (login, passcode, a fresh client-id) ->
``CONNECTED``, ``DISCONNECT`` with a receipt -> ``RECEIPT``, close; AMQP SASL
header -> mechanisms, ``sasl-init`` PLAIN -> outcome ok, AMQP header +
``open`` (a fresh container-id) -> header + ``open``, ``close`` -> ``close``,
close.  :func:`connection_trial` times ``count`` such loops on one path.
"""

from __future__ import annotations

import os
import socket
import struct
import time

from proton import Data

try:  # imported as bench.gateway_connections from the repository root
    from . import common
    from .gateway_world import LOGIN, PASSCODE, World
except ImportError:  # run from a script in bench/: bench/ is on sys.path
    import common
    from gateway_world import LOGIN, PASSCODE, World

#: seconds a raw connection loop may wait for any one answer
SOCKET_TIMEOUT = 10.0


class RawConn:
    """A blocking socket with a read buffer: just enough to speak an opening."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise common.BenchError("connection closed by the server")
        self.buf += chunk

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, end: bytes) -> bytes:
        while (i := self.buf.find(end)) < 0:
            self.fill()
        out = bytes(self.buf[:i])
        del self.buf[: i + len(end)]
        return out

    def close(self) -> None:
        self.sock.close()


def stomp_once(port: int, client_id: str) -> None:
    """CONNECT (login, passcode, client-id) -> CONNECTED; DISCONNECT receipt -> RECEIPT; close."""
    c = RawConn(port)
    try:
        c.sock.sendall(
            (
                f"CONNECT\naccept-version:1.2\nhost:127.0.0.1\nlogin:{LOGIN}\npasscode:{PASSCODE}\n"
                f"client-id:{client_id}\nheart-beat:0,0\n\n\x00"
            ).encode()
        )
        frame = c.read_until(b"\x00").lstrip(b"\r\n")
        if not frame.startswith(b"CONNECTED\n"):
            raise common.BenchError(f"STOMP: no CONNECTED: {frame[:200]!r}")
        c.sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
        frame = c.read_until(b"\x00").lstrip(b"\r\n")
        if not frame.startswith(b"RECEIPT\n"):
            raise common.BenchError(f"STOMP: no RECEIPT for DISCONNECT: {frame[:200]!r}")
    finally:
        c.close()


SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def amqp_frame(frame_type: int, code: int, fields) -> bytes:
    """One frame (doff 2, channel 0): the described list ``code`` of ``fields``."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    for put, value in fields:
        getattr(d, put)(value)
    d.exit()
    d.exit()
    body = d.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


SASL_INIT = amqp_frame(
    1, 0x41, [("put_symbol", "PLAIN"), ("put_binary", f"\0{LOGIN}\0{PASSCODE}".encode())]
)
AMQP_CLOSE = amqp_frame(0, 0x18, [])


def read_amqp_frame(c: RawConn) -> tuple[int | None, bytes]:
    """The next non-empty frame: (performative code, body)."""
    while True:
        size, doff, _ftype, _ch = struct.unpack(">IBBH", c.read_exact(8))
        rest = c.read_exact(size - 8)
        body = rest[doff * 4 - 8 :]
        if not body:
            continue  # an empty (heartbeat) frame
        d = Data()
        d.decode(body)
        d.next()
        d.enter()
        d.next()
        code = d.get_ulong()
        return code, body


def sasl_outcome_code(body: bytes) -> int | None:
    d = Data()
    d.decode(body)
    d.next()
    d.enter()
    d.next()  # descriptor
    d.next()  # the list
    d.enter()
    return d.get_ubyte() if d.next() is not None else None


def amqp_once(port: int, client_id: str) -> None:
    """SASL PLAIN, open (fresh container-id) -> open, close -> close; then close the socket."""
    c = RawConn(port)
    try:
        c.sock.sendall(SASL_HEADER)
        if c.read_exact(8) != SASL_HEADER:
            raise common.BenchError("AMQP: no SASL header back")
        code, _ = read_amqp_frame(c)
        if code != 0x40:
            raise common.BenchError(f"AMQP: expected sasl-mechanisms, got {code:#x}")
        c.sock.sendall(SASL_INIT)
        code, body = read_amqp_frame(c)
        if code != 0x44 or sasl_outcome_code(body) != 0:
            raise common.BenchError(f"AMQP: SASL failed ({code:#x})")
        open_frame = amqp_frame(0, 0x10, [("put_string", client_id), ("put_string", "127.0.0.1")])
        c.sock.sendall(AMQP_HEADER + open_frame)
        if c.read_exact(8) != AMQP_HEADER:
            raise common.BenchError("AMQP: no AMQP header back")
        code, _ = read_amqp_frame(c)
        if code != 0x10:
            raise common.BenchError(f"AMQP: expected open, got {code:#x}")
        c.sock.sendall(AMQP_CLOSE)
        code, _ = read_amqp_frame(c)
        if code != 0x18:
            raise common.BenchError(f"AMQP: expected close, got {code:#x}")
    finally:
        c.close()


_conn_ids = iter(range(10**9))


def connection_trial(w: World, proto: str, path: str, count: int, deadline) -> dict:
    """``count`` sequential connect/auth/disconnect loops; rate, loop times, CPU per connection."""
    once = stomp_once if proto == "STOMP" else amqp_once
    port = w.port(path)
    times = []
    c0, g0 = common.proc_cpu_ticks(w.core.pid), common.proc_cpu_ticks(w.gateway.pid)
    t0 = time.monotonic_ns()
    for _ in range(count):
        if deadline.remaining() <= 0:
            raise common.BenchError(f"run deadline reached after {len(times)} connections")
        s = time.monotonic_ns()
        once(port, f"bench-conn-{os.getpid()}-{next(_conn_ids)}")
        times.append(time.monotonic_ns() - s)
    elapsed = (time.monotonic_ns() - t0) / 1e9
    c1, g1 = common.proc_cpu_ticks(w.core.pid), common.proc_cpu_ticks(w.gateway.pid)
    times.sort()

    def per_conn(a, b):
        return (b - a) / common.CLK_TCK * 1e6 / count if a is not None and b is not None else None

    return {
        "protocol": proto,
        "path": path,
        "connections": count,
        "conns_per_s": count / elapsed if elapsed > 0 else None,
        "p50_ms": common.percentile(times, 50) / 1e6,
        "p99_ms": common.percentile(times, 99) / 1e6,
        "core_cpu_us_per_conn": per_conn(c0, c1),
        "gateway_cpu_us_per_conn": per_conn(g0, g1),
    }

