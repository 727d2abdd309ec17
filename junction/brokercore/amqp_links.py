"""AMQP sessions and links: what each endpoint of a connection does with its broker session.

:class:`SessionContext` is one AMQP session, with one
:class:`junction.brokercore.session.ServerSession` (transactions are per
session).  Its links:

* :class:`Receiver`: a client's sender -- messages into the broker, credit
  granted in ``amqpCredits`` batches and withheld while an address is full
  under BLOCK; durable sends are accepted only once synced;
* :class:`Sender`: a client's receiver -- a broker consumer whose credit is
  the link credit; drain, pre-settled or unsettled deliveries and the four
  outcomes;
* the coordinator (:mod:`junction.brokercore.amqp_transactions`).

Links talk to the broker through their :class:`ServerSession` only.  Their hot
paths call the engine's C functions on raw pointers
(:mod:`junction.brokercore.proton_private`): proton's Python wrappers cost more
than the whole broker path per message.
"""

from __future__ import annotations

import itertools
import logging
import uuid

from proton import Condition, Delivery, Described, Link, Terminus, ulong

from junction.brokercore import proton_private as pn
from junction.brokercore.amqp_convert import to_amqp, to_core
from junction.brokercore.amqp_large import start_stream
from junction.brokercore.amqp_terminus import (
    CAP_GLOBAL,
    CAP_QUEUE,
    CAP_SHARED,
    CAP_TEMP_QUEUE,
    CAP_TEMP_TOPIC,
    CAP_TOPIC,
    LinkRefused,
    capabilities_of,
    condition_for,
    filters_of,
    selector_of,
    subscription_queue_name,
)
from junction.brokercore.amqp_transactions import ACCEPTED_CODE, TRANSACTIONAL_STATE, txid_of
from junction.brokercore.consumer_priority import receiver_priority, split_parameters
from junction.brokercore.large_bodies import LargeBody, outgoing
from junction.brokercore.proton_private import link_pointer, wrap_delivery
from junction.brokercore.security import SecurityError
from junction.brokercore.session import ServerSession
from junction.model import errors
from junction.model.message import RoutingType

__all__ = ["SessionContext", "LinkContext", "Receiver", "Sender"]

log = logging.getLogger("junction.amqp")

_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST

# The engine's C functions on the hot paths, as module globals.
_PN_ACCEPTED = pn.PN_ACCEPTED
_delivery_aborted = pn.delivery_aborted
_partial = pn.delivery_partial
_readable = pn.delivery_readable
_pending = pn.delivery_pending
_remote_settled = pn.delivery_remote_settled
_remote_state = pn.delivery_remote_state
_settle = pn.delivery_settle
_update = pn.delivery_update
_recv = pn.link_recv
_send = pn.link_send
_from_buffer = pn.buffer_of
_advance = pn.link_advance
_credit = pn.link_credit
_flow = pn.link_flow
_get_drain = pn.link_get_drain
_drained = pn.link_drained
_new_delivery = pn.new_delivery
_tag = pn.delivery_tag


class LinkContext:
    """What every link context has: its connection, session, link, and a dynamic node if any."""

    closed = False

    def __init__(self, protocol, sctx: SessionContext, link):
        self.protocol = protocol
        self.sctx = sctx
        self.session = sctx.session
        self.link = link
        #: the temporary queue of a dynamic source or target, gone with the link
        self.temporary = None
        self.routing_type = None

    def _create_temporary(self, capabilities) -> str:
        """A dynamic node: a temporary queue named by the broker, gone with its link or session."""
        name = str(uuid.uuid4())
        rtype = _MULTICAST if str(CAP_TEMP_TOPIC) in capabilities else _ANYCAST
        self.session.create_temporary_queue(name, rtype)
        self.temporary, self.routing_type = name, rtype
        return name

    def _drop_temporary(self) -> None:
        if self.temporary is not None:
            self.session.delete_temporary_queue(self.temporary)

    def close(self, remote_close: bool) -> None:  # pragma: no cover - overridden
        self.closed = True

    def on_delivery(self, delivery) -> None:  # pragma: no cover - overridden
        pass

    def on_flow(self) -> None:
        pass

    def _forget(self) -> None:
        """This link is gone: its session and connection stop dispatching to it."""
        self.sctx.links.discard(self)
        self.protocol.links.pop(self.link_impl, None)


class SessionContext:
    """One AMQP session: one broker :class:`ServerSession` and its transactions."""

    def __init__(self, protocol, pn_session):
        self.protocol = protocol
        self.pn_session = pn_session
        self.session = ServerSession(protocol.server, protocol.principal, protocol.info)
        self.session.set_paused(protocol.paused)
        self.links: set = set()
        self.transactions: dict[bytes, object] = {}
        self._txids = itertools.count(1)

    def new_txid(self) -> bytes:
        return b"%d" % next(self._txids)

    def resolve(self, address: str, capabilities) -> tuple[str, RoutingType | None]:
        """(address, routing type) from an address, its prefix and the terminus capabilities."""
        protocol = self.protocol
        for prefix in protocol.anycast_prefixes:
            if address.startswith(prefix):
                return address[len(prefix):], _ANYCAST
        for prefix in protocol.multicast_prefixes:
            if address.startswith(prefix):
                return address[len(prefix):], _MULTICAST
        if str(CAP_QUEUE) in capabilities or str(CAP_TEMP_QUEUE) in capabilities:
            return address, _ANYCAST
        if str(CAP_TOPIC) in capabilities or str(CAP_TEMP_TOPIC) in capabilities:
            return address, _MULTICAST
        if "::" in address:
            return address, None
        # No prefix, no capability: an existing address keeps its routing
        # type (ANYCAST when it has both); a new one is ANYCAST, as Artemis
        # creates it for AMQP links (ARTEMIS-4132), so a proton client that
        # sends to "orders" before anyone consumes finds a queue, not a void.
        existing = self.session.address_query(address)
        if existing is not None and len(existing.routing_types) == 1:
            return address, next(iter(existing.routing_types))
        return address, _ANYCAST

    def close(self) -> None:
        for ctx in list(self.links):
            ctx.close(False)
        self.links.clear()
        self.transactions.clear()
        self.session.close()


class Receiver(LinkContext):
    """A client's sending link: messages into the broker."""

    def __init__(self, protocol, sctx: SessionContext, link):
        super().__init__(protocol, sctx, link)
        target = link.remote_target
        capabilities = capabilities_of(target)
        address = target.address
        if target.dynamic:
            address = self._create_temporary(capabilities)
        elif address is not None:
            address, self.routing_type = sctx.resolve(address, capabilities)
            self.session.check_producer(address)
        #: None: the anonymous relay, each message's ``to`` names its address
        self.address = address
        link.target.copy(target)
        if target.dynamic:
            link.target.address = address
        link.source.copy(link.remote_source)
        link.snd_settle_mode = link.remote_snd_settle_mode
        # Artemis answers rcv-settle-mode first whatever the client asked, and
        # settles each outcome at once: a client that asked for second settles
        # on seeing it (AMQP 1.0 2.7.3 lets the receiver pick its own mode).
        link.rcv_settle_mode = Link.RCV_FIRST
        link.max_message_size = protocol.max_message_size
        self.link_impl = link_pointer(link)
        link.context = self
        sctx.links.add(self)
        protocol.links[self.link_impl] = self
        link.open()
        self.waiting_for_space = False
        #: the injected clock (message timestamps and TTLs), read per message
        self._seconds = protocol.reactor.seconds
        link.flow(protocol.credits)

    def on_delivery(self, dlv) -> None:
        """A transfer from the client; ``dlv`` is the engine's raw ``pn_delivery_t *``.

        The hot path talks to the engine through its C functions: proton's
        Python wrappers cost more than the whole broker path per message.
        """
        if _delivery_aborted(dlv):
            _settle(dlv)
            return
        if _partial(dlv):
            if _pending(dlv) > self.protocol.max_message_size:
                self.protocol.close_link(
                    self.link,
                    "amqp:link:message-size-exceeded",
                    f"message larger than amqpMaxMessageSize {self.protocol.max_message_size}",
                )
            return
        if not _readable(dlv):
            return
        link = self.link_impl
        _, data = _recv(link, _pending(dlv))
        _advance(link)
        remote_settled = _remote_settled(dlv)
        state = _remote_state(dlv)
        tx = None
        if state == TRANSACTIONAL_STATE:
            wrapped = wrap_delivery(dlv)
            txid = txid_of(wrapped.remote.data)
            tx = self.sctx.transactions.get(txid)
            if tx is None:
                self._reject(dlv, "amqp:transaction:unknown-id", f"unknown transaction id {txid!r}")
                self._top_up()
                return
        try:
            message = to_core(bytes(data), self.address, now_ms=int(self._seconds() * 1000))
            rtype = self.routing_type
            if self.address is None:
                message.address, rtype = self.sctx.resolve(message.address, ())
            if tx is not None:
                self.session.send(message, routing_type=rtype, tx=tx)
                wrapped.local.data = [txid, Described(ulong(ACCEPTED_CODE), [])]
                wrapped.update(TRANSACTIONAL_STATE)
                wrapped.settle()
                self._top_up()
                return
            d = self.session.submit(message, rtype)
        except Exception as exc:  # noqa: BLE001 - answered with a condition
            name, text = condition_for(exc)
            if name == "amqp:internal-error":
                log.exception("AMQP send from %s failed", self.protocol.peer)
            if remote_settled:
                _settle(dlv)
            else:
                self._reject(dlv, name, text)
            self._top_up()
            return
        if remote_settled:
            _settle(dlv)
            if d is not None:
                d.addErrback(self._failed_late)
        elif d is None:
            self._accept(dlv)
        else:
            d.addCallbacks(self._synced, self._sync_failed, callbackArgs=(dlv,), errbackArgs=(dlv,))
        self._top_up()

    def _accept(self, dlv) -> None:
        _update(dlv, _PN_ACCEPTED)
        _settle(dlv)

    def _reject(self, dlv, name: str, text: str) -> None:
        wrapped = wrap_delivery(dlv)
        wrapped.local.condition = Condition(name, text)
        wrapped.update(Delivery.REJECTED)
        wrapped.settle()

    def _synced(self, _, dlv) -> None:
        if self.closed:
            return
        self._accept(dlv)
        self.protocol.flush_soon()

    def _sync_failed(self, failure, dlv) -> None:
        if self.closed:
            return None
        name, text = condition_for(failure.value)
        log.warning("AMQP send from %s not stored: %s", self.protocol.peer, text)
        self._reject(dlv, name, text)
        self.protocol.flush_soon()
        return None

    def _failed_late(self, failure) -> None:
        log.warning("pre-settled AMQP send from %s failed: %s", self.protocol.peer, failure.getErrorMessage())

    def _top_up(self) -> None:
        """Grant credit again once it runs low, unless the address is full (BLOCK)."""
        link = self.link_impl
        if self.closed:
            return
        credit = _credit(link)
        if credit > self.protocol.low_credits:
            return
        session = self.session
        if session.sends_blocked:
            # An earlier send waits for space: no more credit until it went.
            if not self.waiting_for_space:
                self.waiting_for_space = True
                session.when_unblocked(self._space)
            return
        _flow(link, self.protocol.credits - credit)

    def _space(self) -> None:
        self.waiting_for_space = False
        if not self.closed:
            self._top_up()
            self.protocol.flush_soon()

    def close(self, remote_close: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self._forget()
        if remote_close:
            self._drop_temporary()


class Sender(LinkContext):
    """A client's receiving link: a broker consumer whose credit is the link credit."""

    def __init__(self, protocol, sctx: SessionContext, link):
        super().__init__(protocol, sctx, link)
        self.consumer = None
        #: the large delivery being written (junction.brokercore.amqp_large), or None
        self.stream = None
        self.unsettled: dict = {}
        self._tags = itertools.count(1)
        self.durable_queue = None
        source = link.remote_source
        capabilities = capabilities_of(source)
        filters = filters_of(source)
        selector, selector_entry = selector_of(filters)
        presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        self.presettled = presettled
        address = source.address
        link.source.copy(source)
        link.target.copy(link.remote_target)
        # ?consumer-priority=N on the address, or the link property (see consumer_priority)
        parameters = {}
        if address is not None and "?" in address:
            address, parameters = split_parameters(address)
        try:
            kwargs = {"priority": receiver_priority(parameters, link.remote_properties)}
        except ValueError as exc:
            raise LinkRefused("amqp:invalid-field", str(exc)) from None
        if source.dynamic:
            address = self._create_temporary(capabilities)
            link.source.address = address
            destination, rtype = address, self.routing_type
        elif address is None:
            destination, rtype = self._existing_subscription(link, capabilities)
        else:
            destination, rtype = sctx.resolve(address, capabilities)
            if rtype == _MULTICAST:
                kwargs.update(self._subscription(link, source, capabilities, destination))
        self.routing_type = rtype
        link.source.filter.clear()
        if selector_entry is not None:
            link.source.filter.put_dict({selector_entry[0]: selector_entry[1]})
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST  # as Artemis: second is not offered
        self.consumer = self.session.create_consumer(
            destination,
            self._deliver,
            routing_type=rtype,
            selector=selector,
            auto_ack=presettled,
            credit_messages=0,
            ack_returns_credit=False,
            on_batch_end=protocol.flush,
            **kwargs,
        )
        if kwargs.get("durable_subscription", True) and kwargs.get("subscription_queue"):
            self.durable_queue = kwargs["subscription_queue"]
        self.link_impl = link_pointer(link)
        link.context = self
        sctx.links.add(self)
        protocol.links[self.link_impl] = self
        link.open()

    # -- attach -------------------------------------------------------------------
    def _subscription(self, link, source, capabilities, address) -> dict:
        """Consumer arguments for a topic (MULTICAST) receiver, Artemis's naming."""
        durable = source.durability != Terminus.NONDURABLE or source.expiry_policy == Terminus.EXPIRE_NEVER
        shared = str(CAP_SHARED) in capabilities
        global_ = str(CAP_GLOBAL) in capabilities
        if not durable and not shared:
            return {}  # a plain subscriber: a temporary queue of its own
        queue = subscription_queue_name(self.protocol.info.client_id, link.name, shared, global_, not durable)
        if durable:
            link.source.expiry_policy = Terminus.EXPIRE_NEVER
            link.source.durability = source.durability if source.durability != Terminus.NONDURABLE else Terminus.DELIVERIES
        return {"subscription_queue": queue, "durable_subscription": durable, "shared_subscription": shared}

    def _existing_subscription(self, link, capabilities):
        """A receiver with no source address: look up its durable subscription (JMS recovery)."""
        shared = str(CAP_SHARED) in capabilities
        global_ = str(CAP_GLOBAL) in capabilities
        queue_name = subscription_queue_name(self.protocol.info.client_id, link.name, shared, global_, False)
        queue = self.session.queue_query(queue_name)
        if queue is None:
            raise LinkRefused("amqp:not-found", f"no subscription {queue_name} to resume")
        source = link.source
        source.address = queue.address
        source.durability = Terminus.DELIVERIES
        source.expiry_policy = Terminus.EXPIRE_NEVER
        return f"{queue.address}::{queue_name}", _MULTICAST

    # -- delivery -------------------------------------------------------------------
    def _deliver(self, server_consumer, ref) -> None:
        link = self.link_impl
        dlv = _new_delivery(link, _tag(b"%d" % next(self._tags)))
        message = ref.message
        if message.native:
            message = outgoing(message, server_consumer.session.server, decode_jms=True)
        if message.__class__ is LargeBody:  # its body streamed from its file (amqp_large)
            if not self.presettled:
                self.unsettled[dlv] = ref
            return start_stream(self, server_consumer, ref, dlv, message, ref.delivery_count - 1)
        now_ms = int(self.protocol.reactor.seconds() * 1000) if message.expiration else 0
        data = to_amqp(message, ref.delivery_count - 1, now_ms=now_ms)
        _send(link, _from_buffer(data), len(data))
        _advance(link)
        if self.presettled:
            _settle(dlv)
        else:
            self.unsettled[dlv] = ref

    def on_flow(self) -> None:
        consumer = self.consumer
        if consumer is None or self.closed:
            return
        if self.stream is not None:  # the credit is given back once the large body is out
            self.protocol.flush()
            return
        link = self.link_impl
        credit = _credit(link)
        was = consumer.set_credit(credit)
        if credit > 0:
            drain = _get_drain(link)
            if was is not None and was <= 0 or drain:
                consumer.deliver_now()
            if drain and _credit(link) > 0:
                _drained(link)
                consumer.set_credit(0)
        self.protocol.flush()

    def on_delivery(self, dlv) -> None:
        """The client's disposition of something we sent (``dlv`` is the raw delivery)."""
        ref = self.unsettled.get(dlv)
        if ref is None:
            if _remote_settled(dlv):
                _settle(dlv)
            return
        state = _remote_state(dlv)
        session = self.session
        if state == _PN_ACCEPTED:
            del self.unsettled[dlv]
            session.acknowledge(ref)
            _settle(dlv)
            return
        tag = dlv
        if state == TRANSACTIONAL_STATE:
            data = wrap_delivery(dlv).remote.data or []
            txid = txid_of(data)
            tx = self.sctx.transactions.get(txid)
            outcome = data[1] if len(data) > 1 else None
            code = getattr(outcome, "descriptor", None)
            if tx is None:
                # Discharged (or never declared): refused as a send naming it
                # is, with the link closed so the message goes back to its
                # queue rather than sit unsettled on the link.
                text = f"unknown transaction id {txid!r}: discharged or never declared"
                log.info("AMQP %s: disposition on %s refused: %s", self.protocol.peer, self.link.name, text)
                self.protocol.close_link(self.link, "amqp:transaction:unknown-id", text)
                return
            del self.unsettled[tag]
            if code == ACCEPTED_CODE:
                session.acknowledge(ref, tx=tx)
            else:
                session.cancel(ref, redelivered=False)
            _settle(dlv)
            return
        if not state and _remote_settled(dlv):
            del self.unsettled[tag]
            session.acknowledge(ref)
        elif state == Delivery.REJECTED:
            del self.unsettled[tag]
            if self.protocol.reject_as_modified:
                session.cancel(ref, redelivered=True)
            else:
                session.reject(ref)
        elif state == Delivery.RELEASED:
            del self.unsettled[tag]
            session.cancel(ref, redelivered=False)
        elif state == Delivery.MODIFIED:
            del self.unsettled[tag]
            remote = wrap_delivery(dlv).remote
            if remote.undeliverable:
                self.consumer.avoid(ref)
            session.cancel(ref, redelivered=bool(remote.failed))
        else:
            return  # received (non-terminal): nothing to do yet
        _settle(dlv)

    def close(self, remote_close: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self._forget()
        if self.stream is not None:
            self.stream.abort()
        self.unsettled.clear()
        if self.consumer is not None:
            self.consumer.close()
        if remote_close and self.durable_queue is not None:
            # Artemis: closing (not detaching) a durable subscriber unsubscribes.
            try:
                self.session.delete_unused_subscription(self.durable_queue)
            except (SecurityError, errors.ClusterConfigurationUnavailableError) as exc:
                log.warning("%s: subscription %s not removed: %s", self.protocol.peer, self.durable_queue, exc)
        if remote_close:
            self._drop_temporary()
