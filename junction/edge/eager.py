"""Writes that leave at once while a connection is quiet.

Twisted's TCP transport buffers every ``write`` and sends on the reactor's
next turn: it registers the socket for writing (``epoll_ctl``), waits for the
poll to report it writable, sends, and unregisters it (``epoll_ctl`` again).
For a connection that writes one frame now and then -- the Response a
synchronous producer waits for, the one dispatch to a consumer that keeps up
-- that costs more than the send itself and holds the frame back by a turn.
:class:`EagerWriter` sends such a frame at once, with one ``send``.

A burst is still left to the transport, so that the frames written in one
turn go out in one ``send``: a write is eager only when the transport holds
nothing unsent (order is kept) and the connection's previous write, eager or
not, is at least :data:`EAGER_QUIET_S` old.  A fast consumer's dispatches,
written closer together, are all buffered as before.  What the kernel does not take at
once (a full socket buffer), and any socket error, goes to the transport's
own write path, which sends the rest when the socket is writable and reports
the error as it always does.

Only a plain ``twisted.internet.tcp`` connection with the buffer attributes
this relies on gets eager writes; anything else (TLS, a test transport, a
Twisted whose internals differ) writes through ``transport.write`` only.
The bench that measured this: ``bench/openwire_throughput.py``
(docs/performance.md, "The synchronous-send path").
"""

from __future__ import annotations

import time

from twisted.internet import tcp

__all__ = ["EAGER_QUIET_S", "EagerWriter"]

#: A write is sent at once only if the connection's previous write is at least
#: this old (seconds); closer writes are a burst, buffered by the transport.
EAGER_QUIET_S = 0.0002

#: What a transport must have for eager writes (Twisted's FileDescriptor buffer).
_BUFFER_ATTRIBUTES = ("dataBuffer", "offset", "_tempDataBuffer", "connected", "disconnecting")


class EagerWriter:
    """``write(data)`` for one connection's transport (see the module documentation)."""

    __slots__ = ("transport", "_socket", "_clock", "_last", "eager_sends")

    def __init__(self, transport, clock=time.monotonic):
        self.transport = transport
        plain = isinstance(transport, tcp.Connection) and all(
            hasattr(transport, name) for name in _BUFFER_ATTRIBUTES
        )
        self._socket = getattr(transport, "socket", None) if plain else None
        self._clock = clock
        self._last = float("-inf")
        #: frames sent at once (statistics, and for tests)
        self.eager_sends = 0

    def write(self, data: bytes) -> None:
        transport = self.transport
        sock = self._socket
        if sock is None:
            transport.write(data)
            return
        now = self._clock()
        last, self._last = self._last, now
        if (
            now - last >= EAGER_QUIET_S
            and not transport._tempDataBuffer
            and len(transport.dataBuffer) == transport.offset
            and transport.connected
            and not transport.disconnecting
        ):
            try:
                sent = sock.send(data)
            except OSError:
                sent = 0  # EAGAIN, or an error the transport's own path will report
            self.eager_sends += 1
            if sent == len(data):
                return
            data = data[sent:]
        transport.write(data)
