"""The broker's STOMP adapter writing a large message: one MESSAGE, its body streamed from the file.

A large CORE message (its body only in the large-messages directory) reaches
a STOMP subscriber whole, never whole in memory: the MESSAGE's headers (with
the body's ``content-length``), then the body
(:class:`~junction.brokercore.large_bodies.LargeBody`) read from the file
:data:`~junction.brokercore.large_bodies.STREAM_CHUNK` bytes at a time and
written only while the transport takes more (the connection's producer is
not paused), then the NUL.

While a body is going out nothing else can be written on the connection (it
would land inside the body): the session's deliveries are paused, and any
other frame (a RECEIPT, the reply to a frame read meanwhile) is held and
written after the NUL -- at most ``max_pending`` of them
(``StompLimits.max_pending_frames``); beyond that reading from the client
stops until the body is out.  Heart-beats are not sent meanwhile (the body is
traffic).  An auto-ack subscription acknowledges the message only once its
last byte is written (:data:`junction.brokercore.session.WRITING`), so a
connection lost half way gives the message back to its queue.  A DISCONNECT
read meanwhile is answered after the body; a protocol error meanwhile cannot
be told in an ERROR frame (it would land inside the body): the connection is
closed with the body cut short, and the message, not acknowledged, goes back.
"""

from __future__ import annotations

from junction.brokercore.session import WRITING
from junction.protocols.stomp.connection import ConnectionState

_ENDING = (ConnectionState.CLOSED, ConnectionState.DISCONNECTING)

__all__ = ["StompStreaming"]


class _Stream:
    """One MESSAGE body being written from its file."""

    __slots__ = ("chunks", "server_consumer", "ref", "held", "close_after", "reading_held")

    def __init__(self, chunks, server_consumer, ref):
        self.chunks = chunks
        self.server_consumer = server_consumer
        self.ref = ref
        #: the wire bytes of frames written while the body is going out, in order
        self.held: list[bytes] = []
        #: the connection ends once the body is out (a DISCONNECT came meanwhile)
        self.close_after = False
        #: reading from the client stopped because ``held`` reached its bound
        self.reading_held = False


class StompStreaming:
    """Mixed into :class:`~junction.brokercore.stomp_server.StompProtocol` (see the module doc).

    Uses ``transport``, ``session``, ``max_pending``, ``_end_batch`` and
    ``_transport_paused`` of the protocol; ``_stream`` is the body going out, or None.
    """

    __slots__ = ()

    def _stream_start(self, server_consumer, ref, head: bytes, body) -> object:
        """Write ``head`` and start ``body`` (a LargeBody); what the delivery callback returns."""
        self._end_batch()  # the pass's MESSAGEs before this one
        self.session.set_paused(True)
        self.transport.write(head)
        self._last_write = self.reactor.seconds()
        self._stream = _Stream(body.chunks(), server_consumer, ref)
        self._stream_pump()
        return WRITING

    def _stream_pump(self) -> None:
        """Write chunks while the transport takes them; at the end, the NUL and what was held."""
        stream = self._stream
        transport = self.transport
        while stream is not None and not self._transport_paused and transport is not None:
            chunk = next(stream.chunks, None)
            if chunk is None:
                self._stream_end(stream)
                return
            transport.write(chunk)
            self._last_write = self.reactor.seconds()

    def _stream_end(self, stream: _Stream) -> None:
        self._stream = None
        transport = self.transport
        transport.write(b"\0" + b"".join(stream.held) if stream.held else b"\0")
        stream.server_consumer.written(stream.ref)
        if stream.close_after:
            transport.loseConnection()
            return
        if stream.reading_held and not self._reading_paused:
            transport.resumeProducing()
        if not self._transport_paused and self.session is not None and self.connection.state not in _ENDING:
            self.session.set_paused(False)

    def _stream_hold(self, data: bytes) -> None:
        """A frame written while the body is going out: kept for after its NUL (bounded)."""
        stream = self._stream
        stream.held.append(data)
        if len(stream.held) >= self.max_pending and not stream.reading_held:
            stream.reading_held = True
            self.transport.pauseProducing()

    def _stream_abort(self) -> None:
        """The connection ends with the body unfinished: its file is closed, nothing acknowledged."""
        stream = self._stream
        if stream is not None:
            self._stream = None
            stream.chunks.close()

