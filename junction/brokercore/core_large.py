"""Large CORE messages: received in continuations into a file, delivered from it in chunks.

A message above the client's ``minLargeMessageSize`` arrives as
SESS_SEND_LARGE (its headers) and SESS_SEND_CONTINUATION chunks.  Each chunk
goes straight to the message's file in the large-messages directory
(:mod:`junction.brokercore.large_messages`); the last one closes the file and routes a message whose body is empty
and whose ``native`` entry names the file.  A durable message's file is
fsynced first, on the reactor's thread pool: the event loop goes on, and the
session's later sends wait behind it, so their order holds.  Inside a
transaction (local or XA), or while an earlier send waits on a BLOCKed
address, the fsync is inline instead: a commit, prepare or rollback must find
the send where the client put it.  In memory there is one chunk at a
time (the codec's packet bound).

A CORE consumer gets such a message as SESS_RECEIVE_LARGE_MSG (headers and
size) and SESS_RECEIVE_CONTINUATION chunks of the session's
``minLargeMessageSize``, read from the file one at a time and written only
while the transport takes more (the connection's producer is not paused);
the session delivers nothing else until the last chunk is out, so chunks of
two messages never interleave.  The consumer's credits are charged the whole
size, as Artemis does.

A continuation with no SESS_SEND_LARGE before it is a protocol error: an
EXCEPTION (ILLEGAL_STATE) and the end of that connection only.

STOMP and AMQP consumers get large messages streamed from the same file by
their own adapters (:mod:`junction.brokercore.large_bodies`).
"""

from __future__ import annotations

import logging
from collections import deque

from junction.brokercore.core_convert import from_core, to_core
from junction.brokercore.core_errors import CoreRefused
from junction.brokercore.large_messages import NATIVE_KEY, parse_reference, reference
from junction.protocols.core import ExceptionType, encode_packet
from junction.protocols.core import packets as p

__all__ = ["LargeHandlers", "DEFAULT_CHUNK", "deliver_large", "is_large"]

log = logging.getLogger("junction.core")

#: Artemis's property holding a large message's body size (``Message.HDR_LARGE_BODY_SIZE``).
LARGE_SIZE = "_AMQ_LARGE_SIZE"
#: Chunk size when the session gave none: the client's default ``minLargeMessageSize`` (100 KiB).
DEFAULT_CHUNK = 100 * 1024


def is_large(message) -> bool:
    return NATIVE_KEY in message.native


class _Outgoing:
    """One large delivery being written: the remaining chunks of one file."""

    __slots__ = ("chunks", "consumer_id", "channel", "pending")

    def __init__(self, chunks, consumer_id: int, channel: int):
        self.chunks = chunks
        self.consumer_id = consumer_id
        self.channel = channel
        #: the chunk read ahead (so the last one is known to be last)
        self.pending = next(chunks, b"")


def deliver_large(core, consumer, ref) -> int:
    """Start delivering large ``ref`` to ``consumer``; the bytes its credits are charged."""
    message = ref.message
    file_id, size = parse_reference(message.native[NATIVE_KEY])
    _, headers = to_core(message)
    core.protocol.write(
        encode_packet(p.SessReceiveLargeMsg(consumer.id, ref.delivery_count, size, headers, channel_id=core.channel))
    )
    store = core.session.server.large_messages
    core.large_out.append(_Outgoing(store.read_chunks(file_id, core.large_chunk), consumer.id, core.channel))
    core.update_paused()
    return size


class LargeHandlers:
    """The large-message part of :class:`junction.brokercore.core_sessions.CoreSession`."""

    def _large_init(self, request) -> None:
        #: the large message being received: (writer, headers), or None
        self.large_in = None
        #: large deliveries being written, oldest first
        self.large_out: deque = deque()
        chunk = getattr(request, "min_large_message_size", 0) or 0
        self.large_chunk = chunk if chunk > 0 else DEFAULT_CHUNK

    def _large_close(self) -> None:
        if self.large_in is not None:
            self.large_in[0].abort()
            self.large_in = None
        for out in self.large_out:
            out.chunks.close()
        self.large_out.clear()

    def large_pump(self) -> bool:
        """Write large chunks while the transport takes them; whether one is still going."""
        protocol = self.protocol
        out_q = self.large_out
        while out_q and not protocol.paused:
            out = out_q[0]
            chunk = out.pending
            out.pending = next(out.chunks, None)
            last = out.pending is None
            protocol.write(
                encode_packet(p.SessReceiveContinuation(chunk, not last, out.consumer_id, channel_id=out.channel))
            )
            if last:
                out_q.popleft()
        return bool(out_q)

    def _on_send_large(self, packet: p.SessSendLarge) -> None:
        if self.large_in is not None:
            self.large_in[0].abort()
        store = getattr(self.session.server, "large_messages", None)
        if store is None:
            raise CoreRefused(ExceptionType.NOT_IMPLEMENTED_EXCEPTION, "large messages need a large-messages directory, and this broker has none")
        self.large_in = (store.begin(), packet.headers)

    def _on_send_continuation(self, packet: p.SessSendContinuation) -> None:
        if self.large_in is None:
            text = "AMQ229001: a large-message continuation arrived with no large message begun"
            correlation = packet.correlation_id if packet.requires_response else None
            self.protocol.fail(ExceptionType.ILLEGAL_STATE, text, self.channel, correlation)
            return
        writer, headers = self.large_in
        writer.append(packet.body)
        if packet.continues:
            self.confirm(packet, self.null_response(packet) if packet.requires_response else None)
            return
        self.large_in = None
        size = writer.size
        body_size = packet.message_body_size if packet.message_body_size is not None and packet.message_body_size >= 0 else size
        native = {NATIVE_KEY: reference(writer.file_id, size), LARGE_SIZE: body_size}
        synced = None
        transacted = self.tx is not None and not self.auto_commit_sends
        if headers.durable and not transacted and not self.session.sends_blocked:
            synced = writer.finish_synced()  # routed once the file is on disk
        else:
            writer.finish(sync=bool(headers.durable))
        try:
            self._route(packet, headers, b"", native, after=synced)
        except BaseException:
            writer.abort()
            raise

    HANDLERS = {
        p.SessSendLarge: _on_send_large,
        p.SessSendContinuation: _on_send_continuation,
    }


def make_message(body: bytes, headers, name: str, large: dict | None):
    """The broker's message for a CORE send (a large one: empty body, ``native`` naming its file,
    and Artemis's ``_AMQ_LARGE_SIZE`` property: the body's size, which the client reads)."""
    message = from_core(body, headers, name)
    if large:
        message.native[NATIVE_KEY] = large[NATIVE_KEY]
        message.properties[LARGE_SIZE] = large[LARGE_SIZE]
    return message

