"""The broker's AMQP adapter writing a large message: one delivery over many transfer frames.

A large CORE message (its body only in the large-messages directory) reaches
an AMQP receiver whole, never whole in memory.  The delivery's sections up to
the body go first (encoded as for a small message), then the start of one
body section of the converted body's length
(:func:`junction.protocols.amqp.message.body_head`: a data section, or an
amqp-value string for a TextMessage), then the body read from the file
:data:`~junction.brokercore.large_bodies.STREAM_CHUNK` bytes at a time.
proton frames the bytes of a delivery not yet advanced as transfers with
``more`` set; the link is advanced after the last chunk, which ends the
delivery.

A chunk is handed to proton only while the connection's transport takes
more (the protocol's producer is not paused) and proton holds less than a
chunk of the delivery unframed (the peer's session window is open): in
memory there are at most about two chunks per delivery being written.  The
link delivers nothing else meanwhile (its consumer's credit is held at 0 and
given back from the link's credit after the last chunk).  A pre-settled
delivery (auto-ack) is acknowledged only once its last byte is written
(:data:`junction.brokercore.session.WRITING`); a link or connection that ends
half way gives the message back to its queue.
"""

from __future__ import annotations

from junction.brokercore import proton_private as pn
from junction.brokercore.amqp_convert import to_amqp
from junction.brokercore.large_bodies import STREAM_CHUNK
from junction.brokercore.session import WRITING
from junction.model.message import BodyType
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.engine import drain_output

__all__ = ["AmqpStream", "pump_streams", "start_stream"]

_EMPTY_TEXT = sections_codec.encode_body_value("")
_EMPTY_DATA = sections_codec.encode_body_data(b"")


class AmqpStream:
    """One delivery whose body is being handed to proton from its file."""

    __slots__ = ("sender", "server_consumer", "ref", "dlv", "chunks")

    def __init__(self, sender, server_consumer, ref, dlv, chunks):
        self.sender = sender
        self.server_consumer = server_consumer
        self.ref = ref
        self.dlv = dlv
        self.chunks = chunks

    def pump(self) -> None:
        """Hand proton chunks while the transport and the peer take them; end the delivery after the last."""
        sender = self.sender
        protocol = sender.protocol
        link = sender.link_impl
        dlv = self.dlv
        while not protocol.paused and not protocol._closing and protocol.pn_transport is not None:
            if pn.delivery_pending(dlv) >= STREAM_CHUNK:
                return  # the peer's window is closed: its next flow or read pumps again
            chunk = next(self.chunks, None)
            if chunk is None:
                self.finish()
                return
            pn.link_send(link, pn.buffer_of(chunk), len(chunk))
            drain_output(protocol.pn_transport, protocol.transport.write)

    def finish(self) -> None:
        sender = self.sender
        self.abort()
        pn.link_advance(sender.link_impl)
        if sender.presettled:
            pn.delivery_settle(self.dlv)
        self.server_consumer.written(self.ref)
        # the link's credit back to its consumer, outside this pump (it may deliver again)
        sender.protocol.reactor.callLater(0, sender.on_flow)

    def abort(self) -> None:
        """Forget this delivery (ended, or its link or connection went): its file is closed."""
        self.sender.stream = None
        self.sender.protocol.streams.discard(self)
        self.chunks.close()


def start_stream(sender, server_consumer, ref, dlv, large, delivery_count: int):
    """Begin delivering ``large`` (a LargeBody) as ``dlv`` on ``sender``; what the delivery callback returns."""
    text = large.message.body_type == BodyType.TEXT
    now_ms = int(sender.protocol.reactor.seconds() * 1000) if large.message.expiration else 0
    data = to_amqp(large.message, delivery_count, now_ms=now_ms)
    empty = _EMPTY_TEXT if text else _EMPTY_DATA
    if not data.endswith(empty):  # pragma: no cover - to_amqp ends a converted message with its body
        raise AssertionError("a converted message that does not end with its body section")
    head = data[: -len(empty)] + sections_codec.body_head(large.size, text=text)
    pn.link_send(sender.link_impl, pn.buffer_of(head), len(head))
    sender.consumer.set_credit(0)  # nothing else on this link until the body is out
    stream = AmqpStream(sender, server_consumer, ref, dlv, large.chunks())
    sender.stream = stream
    sender.protocol.streams.add(stream)
    return WRITING


def pump_streams(protocol) -> None:
    """Hand proton more of every delivery being streamed on ``protocol`` (after a flush)."""
    for stream in list(protocol.streams):
        if protocol.paused:
            return
        stream.pump()
