"""One CORE session: the packets of its channel, against one :class:`ServerSession`.

A CORE connection (:mod:`junction.brokercore.core_server`) opens one
:class:`CoreSession` per accepted CREATESESSION.  It handles the session's
packets (Artemis's ``ServerSessionPacketHandler``): sends, producer credits
and producers, START/STOP/CLOSE, local transactions (COMMIT, ROLLBACK) and
metadata here; XA in :mod:`junction.brokercore.core_xa_packets`; large messages in
:mod:`junction.brokercore.core_large`; consumers, deliveries and acknowledgements in
:mod:`junction.brokercore.core_consumers`; queues, addresses and the queries
in :mod:`junction.brokercore.core_queues`.

Answers are ordered, as Artemis's ``afterCompleteOperations``: each packet's
answer (NULL_RESPONSE, an EXCEPTION, a query's response) is written only
after everything the session was sent before it is safe, so the NULL_RESPONSE
of a durable send with ``requiresResponse`` follows the journal's sync, and
so does any later answer.  With a confirmation window (the client's
``confirmationWindowSize``, -1 by default: none) every handled packet but
metadata is counted, in that same order, and PACKETS_CONFIRMED carries the
last command id each time the confirmed bytes reach the window; an answer
that is an EXCEPTION confirms nothing, as in Artemis.

A refused request that asks for an answer gets an EXCEPTION (the V2 form,
with the correlation id, when the request carries one) and the connection
stays.  A refused request that asks for none is logged, as Artemis does --
except where staying silent would mislead: a durable send (the client
believes the message sent), any send under a confirmation window (the client
would count it as confirmed), a feature not implemented here (XA failover:
the client would wait forever),
an acknowledgement whose journal write failed.  Those end the connection with
the EXCEPTION (NOT_IMPLEMENTED 213, IO_ERROR 6 ...).
"""

from __future__ import annotations

import logging
import weakref
from collections import deque

from junction.brokercore.core_browsers import CoreBrowser
from junction.brokercore.core_consumers import ConsumerHandlers
from junction.brokercore.core_errors import REFUSALS, CoreRefused, exception_for
from junction.brokercore.core_large import LargeHandlers, make_message
from junction.brokercore.core_queues import QueueHandlers
from junction.brokercore.core_xa_packets import XaHandlers
from junction.brokercore.scheduled import SCHEDULED_DELIVERY  # noqa: F401 (re-exported: a queue holds such sends)
from junction.brokercore.xa import XaSession
from junction.protocols.core import ExceptionType, encode_packet, responses
from junction.protocols.core import packets as p
from junction.protocols.core.connection import ConnectionState

log = logging.getLogger("junction.core")

__all__ = ["CoreSession", "MAX_METADATA", "MAX_PRODUCERS", "SCHEDULED_DELIVERY"]

#: Producers one session may have declared (CREATE_PRODUCER) at once; beyond, the connection ends.
MAX_PRODUCERS = 10_000
#: Metadata entries one session keeps (the JMS client sets two or three).
MAX_METADATA = 100
#: The metadata key under which the JMS client gives its client id (``ClientSession.JMS_SESSION_CLIENT_ID_PROPERTY``).
JMS_CLIENT_ID = "jms-client-id"

_CLOSED = ConnectionState.CLOSED

#: Node-wide unique metadata (SESS_UNIQUE_ADD_METADATA: the JMS client id): server -> {(key, data): session}.
_UNIQUE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Packets answered whatever they say (the rest answer when ``requires_response`` is set).
_ALWAYS_ANSWERED = frozenset(
    {
        p.DeleteQueue,
        p.SessQueueQuery,
        p.SessBindingQuery,
        p.SessCommit,
        p.SessRollback,
        p.SessStop,
        p.SessClose,
        p.SessConsumerClose,
        p.SessAddMetadata,
        p.SessUniqueAddMetadata,
        p.SessXAStart,
        p.SessXAEnd,
        p.SessXACommit,
        p.SessXAPrepare,
        p.SessXARollback,
        p.SessXAJoin,
        p.SessXASuspend,
        p.SessXAResume,
        p.SessXAForget,
        p.SessXAGetInDoubtXids,
        p.SessXASetTimeout,
        p.SessXAGetTimeout,
    }
)
#: Packets the confirmation window does not count (``isRequiresConfirmations`` false).
_NOT_CONFIRMED = frozenset({p.SessAddMetadata, p.SessAddMetadata2, p.SessUniqueAddMetadata, p.PacketsConfirmed})


class _Entry:
    """An answer in the session's ordered queue: written once ``done``."""

    __slots__ = ("done", "data", "confirm", "fatal")

    def __init__(self, done: bool, data: bytes | None, confirm: int):
        self.done = done
        self.data = data
        #: the packet's size, counted in the confirmation window once written (0: not counted)
        self.confirm = confirm
        #: (code, text): the connection ends here instead
        self.fatal = None


class CoreSession(ConsumerHandlers, QueueHandlers, XaHandlers, LargeHandlers):
    """One CORE session on channel ``request.session_channel_id`` (see the module doc)."""

    def __init__(self, protocol, request: p.CreateSession, session):
        self.protocol = protocol
        self.channel = request.session_channel_id
        self.name = request.name
        self.session = session
        #: the connection's version: which form each answer takes
        self.version = protocol.connection.version
        self.window = request.confirmation_window_size
        self.auto_commit_sends = request.auto_commit_sends
        self.auto_commit_acks = request.auto_commit_acks
        self.pre_acknowledge = request.pre_acknowledge
        self.default_address = request.default_address
        self.started = False
        self.closed = False
        #: consumer id -> CoreConsumer
        self.consumers: dict = {}
        #: consumers closed while acknowledgements of theirs wait in the transaction
        self.retired: list = []
        #: producer id -> its address (None: each message names its own)
        self.producers: dict[int, str | None] = {}
        self.metadata: dict[str, str] = {}
        transacted = not (request.auto_commit_sends and request.auto_commit_acks)
        #: an XA session's branches (its current one is ``tx``: None outside a branch)
        self.xa = XaSession(session, changed=self._xa_changed) if request.xa else None
        #: the local transaction of a transacted session (a new one after each COMMIT/ROLLBACK)
        self.tx = session.begin() if transacted and not request.xa else None
        self._queue: deque[_Entry] = deque()
        #: the id of the last command confirmed, and the bytes confirmed since the last PACKETS_CONFIRMED
        self._confirmed = -1
        self._window_bytes = 0
        self._large_init(request)
        session.set_paused(True)  # nothing is delivered before SESS_START

    # -- dispatch ---------------------------------------------------------------------------------
    def handle(self, packet) -> None:
        """A packet of this session's channel (the connection's table said HANDLE)."""
        handler = _HANDLERS.get(packet.__class__)
        if handler is None:
            self._not_implemented(packet)
            return
        try:
            handler(self, packet)
        except REFUSALS as exc:
            self.refused(packet, exc)

    def answers(self, packet) -> bool:
        """Whether ``packet`` asks for an answer."""
        cls = packet.__class__
        if cls in _ALWAYS_ANSWERED:
            return True
        if cls is p.SessAddMetadata2:
            return packet.requires_confirmation
        return bool(getattr(packet, "requires_response", False))

    def refused(self, packet, error: BaseException) -> None:
        """Answer a refused request (or log it, or end the connection: see the module doc)."""
        code, text = exception_for(error)
        if self.answers(packet):
            correlation = getattr(packet, "correlation_id", None)
            self.confirm(packet, encode_packet(responses.exception(code, text, self.channel, correlation)), counted=False)
            return
        if code == ExceptionType.NOT_IMPLEMENTED_EXCEPTION or (
            packet.__class__ is p.SessSend and (self.window >= 0 or packet.headers.durable)
        ):
            # Silence would leave the client waiting, count the send as confirmed, or lose
            # a durable message the client believes sent.
            self.protocol.fail(code, text, self.channel)
            return
        log.info("CORE %s session %s: %s refused: %s", self.protocol.peer, self.name, type(packet).__name__, text)
        self.confirm(packet, None, counted=False)

    def _not_implemented(self, packet) -> None:
        text = f"{type(packet).__name__} is not supported yet"
        if self.answers(packet):
            self.refused(packet, CoreRefused(ExceptionType.NOT_IMPLEMENTED_EXCEPTION, text))
        else:
            self.protocol.fail(ExceptionType.NOT_IMPLEMENTED_EXCEPTION, text, self.channel)

    # -- ordered answers and the confirmation window ----------------------------------------------
    def null_response(self, packet) -> bytes:
        """The NULL_RESPONSE answering ``packet``, encoded."""
        return encode_packet(responses.null_response(self.version, self.channel, getattr(packet, "correlation_id", None)))

    def confirm(self, packet, answer: bytes | None, d=None, *, counted: bool = True) -> None:
        """``packet`` is handled: write ``answer`` (if any) in order, once ``d`` (if any) fires.

        ``counted``: it counts in the confirmation window (not an EXCEPTION).
        """
        size = 0
        if self.window >= 0 and counted and packet.__class__ not in _NOT_CONFIRMED:
            size = len(encode_packet(packet))
        queue = self._queue
        if d is None:
            if not queue:
                if answer is not None or size:
                    self._out(answer, size)
                return
            if answer is None and not size:
                return  # nothing to write in its turn
        entry = _Entry(d is None, answer, size)
        queue.append(entry)
        self.protocol.pending_changed(1)
        if d is not None:
            d.addCallbacks(self._done, self._failed, callbackArgs=(entry,), errbackArgs=(entry, packet))

    def _done(self, _, entry: _Entry) -> None:
        entry.done = True
        self._flush()

    def _failed(self, failure, entry: _Entry, packet) -> None:
        entry.done = True
        entry.confirm = 0
        code, text = exception_for(failure.value)
        if self.answers(packet):
            correlation = getattr(packet, "correlation_id", None)
            entry.data = encode_packet(responses.exception(code, text, self.channel, correlation))
        else:
            entry.data = None
            entry.fatal = (code, f"{type(packet).__name__} failed: {text}")
        self._flush()

    def _flush(self) -> None:
        queue = self._queue
        protocol = self.protocol
        while queue and queue[0].done:
            entry = queue.popleft()
            protocol.pending_changed(-1)
            if entry.fatal is not None:
                protocol.fail(*entry.fatal, self.channel)
                protocol.pending_changed(-len(queue))  # nothing more is written: the connection ends
                queue.clear()
                return
            self._out(entry.data, entry.confirm)

    def _out(self, data: bytes | None, size: int) -> None:
        protocol = self.protocol
        if data is not None:
            protocol.write(data)
        if size:
            self._confirmed += 1
            self._window_bytes += size
            if self._window_bytes >= self.window:
                self._window_bytes = 0
                protocol.write_packet(p.PacketsConfirmed(self._confirmed, channel_id=self.channel))

    # -- start, stop, close ---------------------------------------------------------------------------
    def update_paused(self) -> None:
        """Deliver only while started, open, and the transport takes more."""
        protocol = self.protocol
        stopped = self.closed or protocol.connection.state is _CLOSED
        large_going = not stopped and self.large_out and self.large_pump()
        paused = stopped or not self.started or protocol.paused or bool(large_going)
        self.session.set_paused(paused)
        if not paused:
            self._pump_browsers()

    def _pump_browsers(self) -> None:
        """Browse-only consumers deliver by themselves, not through the queue: started again,
        they go on."""
        for consumer in list(self.consumers.values()):
            if isinstance(consumer, CoreBrowser):
                consumer.pump()

    def _on_start(self, packet) -> None:
        self.started = True
        self.update_paused()
        self.confirm(packet, None)

    def _on_stop(self, packet) -> None:
        self.started = False
        self.update_paused()
        self.confirm(packet, self.null_response(packet))

    def _on_close(self, packet) -> None:
        self.close(failed=False)
        self.confirm(packet, self.null_response(packet))
        self.protocol.session_closed(self)

    def close(self, *, failed: bool) -> None:
        """Close the session: its consumers give back what they hold (counted as delivered only
        when the client ``failed``, as Artemis's ``close(failed)``), its transaction rolls back."""
        if self.closed:
            return
        self.closed = True
        self.session.set_paused(True)
        self._large_close()
        if not failed:
            for consumer in list(self.consumers.values()):
                consumer.give_back()
        self.consumers.clear()
        self.retired.clear()
        self.session.close()
        if self.xa is not None:
            self.xa.close()
        unique = _UNIQUE.get(self.session.server)
        if unique:
            for key, data in list(self.metadata.items()):
                if unique.get((key, data)) is self:
                    del unique[key, data]

    # -- transactions ---------------------------------------------------------------------------------
    def _on_commit(self, packet) -> None:
        tx = self.tx
        if tx is None:
            self.confirm(packet, self.null_response(packet))
            return
        self.tx = self.session.begin()
        d = self.session.commit(tx)
        self._transaction_ended()
        self.confirm(packet, self.null_response(packet), d)

    def _on_rollback(self, packet) -> None:
        # What the consumers hold goes back first (not counted as delivered: the client
        # dropped it unread), then what the transaction acknowledged, ahead of it.
        for consumer in self.consumers.values():
            consumer.give_back()
        if self.xa is not None:
            # In an XA session (the client rolls back its work so after a failover) the current
            # branch rolls back and the session is left without one, as Artemis's rollback does.
            self.xa.roll_back_current()
            self.tx = self.xa.tx
        elif self.tx is not None:
            tx, self.tx = self.tx, self.session.begin()
            self.session.rollback(tx)
        self._transaction_ended()
        self.confirm(packet, self.null_response(packet))

    def _xa_changed(self) -> None:
        self.tx = self.xa.tx

    def _transaction_ended(self) -> None:
        for consumer in self.consumers.values():
            consumer.tx_acked = 0
        retired, self.retired = self.retired, []
        for consumer in retired:
            consumer.tx_acked = 0
            consumer.server_consumer.close()

    # -- producers and sends ------------------------------------------------------------------------
    def _on_send(self, packet: p.SessSend) -> None:
        self._route(packet, packet.headers, packet.body, None)

    def _route(self, packet, headers, body: bytes, native: dict | None, after=None) -> None:
        """Route a sent message (a SESS_SEND, or a large message's last continuation); with
        ``after`` (a Deferred: its file's fsync) once that fires, later sends waiting behind."""
        address = headers.address
        if address is None:
            address = self.producers.get(packet.sender_id) or self.default_address
            if address is None:
                raise CoreRefused(ExceptionType.ILLEGAL_STATE, "a message must name an address (or its producer one)")
        name, prefixed = self.protocol.unprefixed(address)
        message = make_message(body, headers, name, native)
        if prefixed is not None:
            message.routing_type = prefixed
        # the transaction the send belongs to is the one open now, whenever it goes
        tx = self.tx if self.tx is not None and not self.auto_commit_sends else None
        if after is None:
            d = self._send(message, tx)
        else:
            d = after.addCallback(lambda _: self._send(message, tx, heading=True))
            self.session.hold_later_sends(d)  # a commit waits behind it too
        self.confirm(packet, self.null_response(packet) if packet.requires_response else None, d)

    def _send(self, message, tx, *, heading: bool = False):
        """Send ``message`` (into ``tx`` if not None)."""
        if tx is not None:
            self.session.send(message, routing_type=message.routing_type, tx=tx)
            return None
        return self.session.submit(message, message.routing_type, heading=heading)

    def _on_request_credits(self, packet: p.SessProducerRequestCredits) -> None:
        grant = encode_packet(p.SessProducerCredits(packet.credits, packet.address, channel_id=self.channel))
        session = self.session
        if session.sends_blocked:
            # A BLOCKed address holds this session's sends: credit follows the space.
            session.when_unblocked(lambda: None if self.closed else self.protocol.write(grant))
        else:
            self.protocol.write(grant)
        self.confirm(packet, None)

    def _on_create_producer(self, packet: p.CreateProducer) -> None:
        if packet.producer_id not in self.producers and len(self.producers) >= MAX_PRODUCERS:
            self.protocol.fail(
                ExceptionType.ILLEGAL_STATE, f"a session may declare at most {MAX_PRODUCERS} producers", self.channel
            )
            return
        self.producers[packet.producer_id] = packet.address
        self.confirm(packet, None)

    def _on_remove_producer(self, packet: p.RemoveProducer) -> None:
        self.producers.pop(packet.producer_id, None)
        self.confirm(packet, None)

    # -- metadata ------------------------------------------------------------------------------------
    def _set_metadata(self, key: str, data: str) -> None:
        if key not in self.metadata and len(self.metadata) >= MAX_METADATA:
            raise CoreRefused(ExceptionType.ILLEGAL_STATE, f"a session keeps at most {MAX_METADATA} metadata entries")
        self.metadata[key] = data
        if key == JMS_CLIENT_ID:
            self.protocol.client_id_known(data)

    def _on_add_metadata(self, packet) -> None:
        self._set_metadata(packet.key, packet.data)
        answer = self.answers(packet)
        self.confirm(packet, self.null_response(packet) if answer else None)

    def _on_unique_metadata(self, packet: p.SessUniqueAddMetadata) -> None:
        unique = _UNIQUE.setdefault(self.session.server, {})
        holder = unique.get((packet.key, packet.data))
        if holder is not None and holder is not self and not holder.closed:
            raise CoreRefused(
                ExceptionType.DUPLICATE_METADATA, f"AMQ229035: Metadata {packet.key}={packet.data} had been set already"
            )
        self._set_metadata(packet.key, packet.data)
        unique[packet.key, packet.data] = self
        self.confirm(packet, self.null_response(packet))



#: packet class -> handler
_HANDLERS = {
    p.SessSend: CoreSession._on_send,
    p.SessProducerRequestCredits: CoreSession._on_request_credits,
    p.CreateProducer: CoreSession._on_create_producer,
    p.RemoveProducer: CoreSession._on_remove_producer,
    p.SessStart: CoreSession._on_start,
    p.SessStop: CoreSession._on_stop,
    p.SessClose: CoreSession._on_close,
    p.SessCommit: CoreSession._on_commit,
    p.SessRollback: CoreSession._on_rollback,
    p.SessAddMetadata: CoreSession._on_add_metadata,
    p.SessAddMetadata2: CoreSession._on_add_metadata,
    p.SessUniqueAddMetadata: CoreSession._on_unique_metadata,
    **ConsumerHandlers.HANDLERS,
    **QueueHandlers.HANDLERS,
    **XaHandlers.HANDLERS,
    **LargeHandlers.HANDLERS,
}
