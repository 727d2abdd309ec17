"""The subscription half of the broker's STOMP adapter: SUBSCRIBE, UNSUBSCRIBE, MESSAGE, ACK, NACK.

:class:`StompSubscriptions` is mixed into
:class:`~junction.brokercore.stomp_server.StompProtocol`, which dispatches
these commands to it (the STOMP connection's table says when) and provides
what they share with the rest of the connection: ``session`` (the
:class:`~junction.brokercore.session.ServerSession`), ``version``,
``codec``, the destination rules (``_destination``), the ordered
confirmations (``_receipt``, ``_confirm_after``, ``_confirm``), ``_fail``,
and ``_out`` / ``_end_batch`` (a delivery pass's MESSAGE bytes, written
together).

Behaviour follows Artemis's STOMP support, with ActiveMQ Classic's meaning of
``activemq.prefetchSize`` (a message count; ``consumer-window-size`` is
Artemis's byte window) and an auto-ack consumer that never stalls.  A
MESSAGE's ``message-id`` is the message's own id and the 1.2 ``ack`` header
Artemis's ``<consumer id>,<message id>``; which delivery an ACK or NACK
names is :mod:`junction.brokercore.stomp_acks`'s business.  The MESSAGE
frames themselves are laid out by :mod:`junction.protocols.stomp.builders`
and written by the codec's one fast encoder.
"""

from __future__ import annotations

from junction.brokercore.core_convert import stomp_view
from junction.brokercore.large_bodies import LargeBody, outgoing
from junction.brokercore.stomp_acks import AckNotFound, find, joined, release
from junction.model.message import RoutingType, Typed, plain
from junction.protocols.stomp import Frame
from junction.protocols.stomp.builders import (
    encode_message,
    header_text,
    message_frame,
    message_head,
    streamed_head,
)
from junction.protocols.stomp.connection import StompError

__all__ = ["MAX_BATCH_BYTES", "StompSubscriptions", "int_header"]

#: MESSAGE bytes a delivery pass gathers before writing them (see StompProtocol._out).
MAX_BATCH_BYTES = 16 * 1024


class _Subscription:
    __slots__ = ("id", "destination", "ack", "consumer", "prefix", "pending", "durable_name")

    def __init__(self, sub_id, destination, ack, prefix, durable_name):
        self.id = sub_id
        self.destination = destination
        self.ack = ack
        self.prefix = prefix
        self.consumer = None
        #: message id (text) -> ref for client / client-individual acks, in delivery order
        self.pending: dict = {}
        self.durable_name = durable_name


def int_header(name: str, value: str, low: int | None, high: int | None) -> int:
    """A header's integer value within ``low``..``high`` (None: unbounded), else StompError."""
    try:
        n = int(value.strip())
    except ValueError:
        raise StompError(f"header {name} must be an integer, not {value!r}") from None
    if (low is not None and n < low) or (high is not None and n > high):
        raise StompError(f"header {name} value {n} is out of range")
    return n


def _header_value(value) -> str:
    """A message property as header text (a typed number as its plain value)."""
    return header_text(plain(value) if isinstance(value, Typed) else value)


class StompSubscriptions:
    """SUBSCRIBE, UNSUBSCRIBE, the MESSAGE deliveries, ACK and NACK (see the module doc)."""

    __slots__ = ()

    # -- SUBSCRIBE / UNSUBSCRIBE ---------------------------------------------------------------------
    def _on_subscribe(self, frame: Frame) -> None:
        address, rtype, prefix = self._destination(frame)
        sub_id = frame.get("id")
        if sub_id is None:
            if self.version == "1.0":
                sub_id = frame.get("destination")
            else:
                raise StompError("SUBSCRIBE needs an id header in STOMP 1.1 and 1.2")
        if sub_id in self.subscriptions:
            raise StompError(f"subscription id {sub_id} is already in use on this connection")
        ack = frame.get("ack", "auto")
        if ack not in ("auto", "client", "client-individual"):
            raise StompError(f"ack mode {ack!r} is not auto, client or client-individual")
        durable_name = (
            frame.get("durable-subscription-name")
            or frame.get("durable-subscriber-name")
            or frame.get("activemq.subscriptionName")
        )
        if durable_name and rtype is None:
            rtype = RoutingType.MULTICAST
        credit_messages = None
        credit_bytes = None
        prefetch = frame.get("activemq.prefetchSize")
        if prefetch is not None:
            n = int_header("activemq.prefetchSize", prefetch, -1, None)
            if n > 0:
                credit_messages = n
        window = frame.get("consumer-window-size") or frame.get("consumerWindowSize")
        if window is not None:
            n = int_header("consumer-window-size", window, -1, None)
            if n == 0:
                credit_messages = 1 if credit_messages is None else min(credit_messages, 1)
            elif n > 0:
                credit_bytes = n
        sub = _Subscription(sub_id, frame.get("destination"), ack, prefix, durable_name)
        self.subscriptions[sub_id] = sub
        try:
            sub.consumer = self.session.create_consumer(
                address,
                self._deliver_callback(sub),
                routing_type=rtype,
                selector=frame.get("selector"),
                subscription_name=durable_name,
                auto_ack=(ack == "auto"),
                credit_messages=credit_messages,
                credit_bytes=credit_bytes,
                on_batch_end=self._end_batch,
            )
        except BaseException:
            del self.subscriptions[sub_id]
            raise
        self._receipt(frame)

    def _on_unsubscribe(self, frame: Frame) -> None:
        sub_id = frame.get("id")
        if sub_id is None and self.version == "1.0":
            sub_id = frame.get("destination")
        if sub_id is None:
            raise StompError("UNSUBSCRIBE needs an id header")
        sub = self.subscriptions.pop(sub_id, None)
        durable_name = frame.get("durable-subscription-name") or frame.get("durable-subscriber-name") or frame.get(
            "activemq.subscriptionName"
        )
        if sub is None and not durable_name:
            raise StompError(f"no subscription with id {sub_id} on this connection")
        if sub is not None:
            for mid in sub.pending:
                release(self._holders, mid, sub)
            sub.pending.clear()
            sub.consumer.close()
        if durable_name:
            self.session.unsubscribe_durable(durable_name)
        self._receipt(frame)

    # -- MESSAGE ---------------------------------------------------------------------------------------
    def _deliver_callback(self, sub: _Subscription):
        """The consumer's delivery callback: each ref becomes a MESSAGE in the pass's batch."""
        client_ack = sub.ack != "auto"
        # What every MESSAGE of this subscription starts with, and whether it
        # carries a 1.2 ack header (see builders.encode_message for the layout).
        head = message_head(sub.id)
        ack_header = self.version == "1.2" and client_ack
        fixed = sub.destination
        if fixed is None or "#" in fixed or "*" in fixed:
            fixed = None  # per message: the prefix and the message's address
        prefix = sub.prefix
        pending = sub.pending
        holders = self._holders
        out = self._out  # written by _end_batch when the delivery pass ends
        header_value = _header_value

        def deliver(server_consumer, ref):
            message = ref.message
            large = None
            if message.native:
                message = outgoing(message, server_consumer.session.server, decode_jms=False)
                if message.__class__ is LargeBody:
                    large, message = message, message.message
                message = stomp_view(message)
            mid = str(message.message_id)
            if client_ack:
                pending[mid] = ref
                held = holders.setdefault(mid, sub)
                if held is not sub:
                    holders[mid] = joined(held, sub)
            # 1.2's ack header, as Artemis writes it: <consumer id>,<message id>
            ack = f"{server_consumer.id},{mid}" if ack_header else None
            data = encode_message(
                head, mid, ack, message.durable, message.priority, message.timestamp,
                message.expiration, ref.delivery_count > 1,
                fixed if fixed is not None else prefix + message.address,
                message.correlation_id, message.reply_to, message.properties, message.body,
                header_value,
            )
            if data is None:  # something needs escaping or checking: the codec's path
                data = self.codec.send(self._message_frame(sub, ref, mid, ack, message))
            if large is not None:  # its body streamed from its file (stomp_large)
                return self._stream_start(server_consumer, ref, streamed_head(data, large.size), large)
            out.append(data)
            self._out_size += len(data)
            if self._out_size >= MAX_BATCH_BYTES:
                self._end_batch()

        return deliver

    def _message_frame(self, sub: _Subscription, ref, mid: str, ack: str | None = None, message=None) -> Frame:
        """The MESSAGE for ``ref`` (its ``message`` as converted for STOMP) as a Frame, without
        the headers this version cannot carry."""
        if message is None:
            message = ref.message
        destination = sub.destination
        if destination is None or "#" in destination or "*" in destination:
            destination = sub.prefix + message.address
        return message_frame(
            self.version, sub.id, mid, ack, message.durable, message.priority, message.timestamp,
            message.expiration, ref.delivery_count > 1, destination, message.correlation_id,
            message.reply_to, message.properties, message.body, _header_value,
        )

    # -- ACK / NACK -----------------------------------------------------------------------------------
    def _ack_target(self, frame: Frame):
        """The refs an ACK or NACK settles (one, or a cumulative run in ``client`` mode)."""
        if self.version == "1.2":
            given = frame.get("id")
            if given is None:
                raise StompError(f"{frame.command} needs an id header (the MESSAGE's ack header) in STOMP 1.2")
        else:
            given = frame.get("message-id")
            if given is None:
                raise StompError(f"{frame.command} needs a message-id header")
        holders = self._holders
        try:
            sub, mid = find(holders, self.subscriptions, given, frame.get("subscription"))
        except AckNotFound as exc:
            raise StompError(f"{frame.command}: {exc}") from None
        pending = sub.pending
        if sub.ack != "client":
            release(holders, mid, sub)
            return [pending.pop(mid)]
        # client: every delivery of this subscription up to this one, in order
        mids = []
        for pending_mid in pending:
            mids.append(pending_mid)
            if pending_mid == mid:
                break
        for m in mids:
            release(holders, m, sub)
        return [pending.pop(m) for m in mids]

    def _on_ack(self, frame: Frame) -> None:
        refs = self._ack_target(frame)
        txid = frame.get("transaction")
        tx = self._transaction(txid) if txid is not None else None
        last = None
        for ref in refs:
            stored = self.session.acknowledge(ref, tx)
            if stored is not None:
                if last is not None:
                    last.addErrback(self._ack_failed)
                last = stored
        receipt = frame.get("receipt")
        if last is None:
            self._receipt(frame)
        elif receipt is None and last.called and not self._confirm:
            last.addErrback(self._ack_failed)  # already written; nothing to order
        else:
            # This RECEIPT, and every later one (a DISCONNECT's too), proves the
            # ack is written: a process crash cannot bring the message back.
            self._confirm_after(last, receipt, what="ACK")

    def _ack_failed(self, failure) -> None:
        """An unreceipted ACK could not be stored: tell the client, close."""
        self._fail(f"ACK failed: {failure.value}")

    def _on_nack(self, frame: Frame) -> None:
        # (NACK is not part of STOMP 1.0: the connection's table refuses it there.)
        refs = self._ack_target(frame)
        # Each cancel puts its ref back at the head of the queue: go backwards
        # so a cumulative NACK redelivers in the original order.
        for ref in reversed(refs):
            self.session.cancel(ref)
        self._receipt(frame)
