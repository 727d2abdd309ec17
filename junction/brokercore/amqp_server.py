"""The AMQP 1.0 server: the qpid-proton engine adapted to broker sessions.

:class:`AmqpProtocol` is a thin Twisted protocol.  Bytes first go through
:class:`junction.protocols.amqp.sasl.SaslServer` (PLAIN, ANONYMOUS; proton's
wheel has no server-side PLAIN), then into a ``proton.Transport`` in server
mode bound to a ``Connection`` and a ``Collector`` -- proton's engine is the
sans-IO codec here; proton's reactor is never used.  Engine events are
dispatched to small per-endpoint contexts that call the
:class:`junction.brokercore.session.ServerSession` API:

* one :class:`ServerSession` per AMQP session (transactions are per session);
* :class:`_Receiver`: a client's sender -- messages into the broker, credit
  granted in ``amqpCredits`` batches and withheld while an address is full
  under BLOCK; durable sends are accepted only once synced;
* :class:`_Sender`: a client's receiver -- a broker consumer whose credit is
  the link credit; drain, pre-settled or unsettled deliveries and the four
  outcomes;
* :class:`_Coordinator`: local transactions (declare / discharge).

Behaviour follows Artemis's AMQP protocol manager: container-id is the client
id; capabilities ``queue``/``topic``, ``shared``/``global`` and the acceptor's
prefixes pick the routing type; durable subscriptions are queues named
``<container-id>.<link-name>``; the anonymous relay routes by ``to``;
selectors arrive as the ``apache.org:selector-filter:string`` source filter.
"""

from __future__ import annotations

import itertools
import logging
import uuid

import cproton
from cproton_ffi import ffi, lib
from proton import (
    Collector,
    Condition,
    Connection,
    Delivery,
    Described,
    Endpoint,
    Event,
    Link,
    Terminus,
    Transport,
    symbol,
    ulong,
)
from twisted.internet import interfaces
from twisted.internet.protocol import Protocol
from zope.interface import implementer

from junction import __version__
from junction.brokercore.amqp_convert import ConversionError, to_amqp, to_core
from junction.brokercore.queue import QueueDefinition
from junction.brokercore.security import SecurityError
from junction.brokercore.session import ConnectionInfo, ServerSession
from junction.edge.acceptor import (
    AcceptorFactory,
    apply_socket_options,
    prefixes,
    proxy_details,
)
from junction.edge.tls import certificate_login, peer_subject
from junction.events.node import close_reason
from junction.model import errors
from junction.model.message import RoutingType
from junction.protocols.amqp import message as sections_codec
from junction.protocols.amqp.engine import drain_output
from junction.protocols.amqp.sasl import (
    SUPPORTED_MECHANISMS,
    NoSasl,
    Passthrough,
    SaslAuthenticated,
    SaslFailed,
    SaslRequired,
    SaslServer,
)
from junction.protocols.amqp.types import Described as AmqpDescribed
from junction.protocols.amqp.types import Scalar
from junction.protocols.errors import RemoteProtocolError

log = logging.getLogger("junction.amqp")

_ANYCAST = RoutingType.ANYCAST
_MULTICAST = RoutingType.MULTICAST

#: Artemis defaults for the acceptor parameters of the same names.
DEFAULT_CREDITS = 1000
DEFAULT_LOW_CREDITS = 300
DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_MAX_FRAME_SIZE = 128 * 1024
#: the highest channel number a client may use (channel-max)
DEFAULT_CHANNEL_MAX = 65_535
#: bytes of one message (all its transfers) a client may send; beyond it the
#: link is closed with amqp:link:message-size-exceeded
DEFAULT_MAX_MESSAGE_SIZE = 10 * 1024 * 1024

SELECTOR_FILTER = symbol("apache.org:selector-filter:string")
SELECTOR_FILTER_CODE = 0x0000468C00000004
NO_LOCAL_FILTER = symbol("apache.org:no-local-filter:list")
CAP_QUEUE = symbol("queue")
CAP_TOPIC = symbol("topic")
CAP_SHARED = symbol("shared")
CAP_GLOBAL = symbol("global")
CAP_TEMP_QUEUE = symbol("temporary-queue")
CAP_TEMP_TOPIC = symbol("temporary-topic")
ANONYMOUS_RELAY = symbol("ANONYMOUS-RELAY")
SHARED_SUBS = symbol("SHARED-SUBS")
SOLE_CONNECTION = symbol("sole-connection-for-container")
LOCAL_TRANSACTIONS = symbol("amqp:local-transactions")

#: transactional-state, declared, declare and discharge descriptors
TRANSACTIONAL_STATE = 0x34
DECLARED = 0x33
DECLARE = 0x31
DISCHARGE = 0x32
ACCEPTED_CODE = 0x24

#: Acceptor URL parameters the AMQP acceptor acts on; node.py warns about the rest.
AMQP_ACCEPTOR_PARAMS = frozenset(
    {
        "protocols",
        "protocol",
        "anycastPrefix",
        "multicastPrefix",
        "maxFrameSize",
        "amqpCredits",
        "amqpLowCredits",
        "amqpIdleTimeout",
        "amqpChannelMax",
        "amqpMaxMessageSize",
        "saslMechanisms",
        "amqpTreatRejectAsUnmodifiedDeliveryFailed",
        "connectionsAllowed",
        "tcpNoDelay",
        "tcpSendBufferSize",
        "tcpReceiveBufferSize",
        "sslEnabled",
        "useEpoll",
    }
)

# The engine's C functions used on the hot path (see _Receiver.on_delivery).
_NULL = ffi.NULL
_PN_DELIVERY = lib.PN_DELIVERY
_PN_LINK_FLOW = lib.PN_LINK_FLOW
_PN_ACCEPTED = lib.PN_ACCEPTED
_peek = lib.pn_collector_peek
_pop = lib.pn_collector_pop
_event_type = lib.pn_event_type
_event_delivery = lib.pn_event_delivery
_event_link = lib.pn_event_link
_delivery_link = lib.pn_delivery_link
_delivery_aborted = lib.pn_delivery_aborted
_partial = lib.pn_delivery_partial
_readable = lib.pn_delivery_readable
_pending = lib.pn_delivery_pending
_remote_settled = lib.pn_delivery_settled
_remote_state = lib.pn_delivery_remote_state
_settle = lib.pn_delivery_settle
_update = lib.pn_delivery_update
_recv = cproton.pn_link_recv
_send = lib.pn_link_send
_from_buffer = ffi.from_buffer
_advance = lib.pn_link_advance
_credit = lib.pn_link_credit
_flow = lib.pn_link_flow
_get_drain = lib.pn_link_get_drain
_drained = lib.pn_link_drained
_new_delivery = lib.pn_delivery
_tag = cproton.py2bytes



class LinkRefused(Exception):
    """An attach the broker refuses: the link is closed with this condition."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


def _condition_for(exc: BaseException) -> tuple[str, str]:
    """The AMQP error condition for a broker error."""
    if isinstance(exc, LinkRefused):
        return exc.condition, exc.description
    if isinstance(exc, SecurityError):
        return "amqp:unauthorized-access", str(exc)
    if isinstance(exc, errors.AddressFullError):
        return "amqp:resource-limit-exceeded", str(exc)
    if isinstance(exc, (errors.NonExistentAddressError, errors.NonExistentQueueError)):
        return "amqp:not-found", str(exc)
    if isinstance(exc, errors.MaxConsumersReachedError):
        return "amqp:resource-locked", str(exc)
    if isinstance(exc, errors.InvalidFilterError):
        return "amqp:invalid-field", str(exc)
    if isinstance(exc, (ConversionError, ValueError)):
        return "amqp:decode-error", str(exc)
    if isinstance(exc, errors.BrokerError):
        return "amqp:internal-error", str(exc)
    return "amqp:internal-error", f"{type(exc).__name__}: {exc}"


def _capabilities(terminus) -> set:
    data = terminus.capabilities
    if data is None:
        return set()
    try:
        # A terminus's Data starts before its first node: position on it
        # first, or get_object() reads nothing.
        data.rewind()
        data.next()
        value = data.get_object()
    except Exception:  # noqa: BLE001 - a malformed capabilities field
        return set()
    if value is None:
        return set()
    if isinstance(value, (list, tuple)):
        return {str(v) for v in value}
    if hasattr(value, "elements"):  # proton Array
        return {str(v) for v in value.elements}
    return {str(value)}


def _filters(terminus) -> dict:
    data = terminus.filter
    if data is None:
        return {}
    try:
        data.rewind()
        data.next()
        value = data.get_object()
    except Exception:  # noqa: BLE001
        return {}
    return value if isinstance(value, dict) else {}


def _selector(filters: dict) -> tuple[str | None, object | None]:
    """(selector text, the filter entry to echo) from a source's filter set."""
    for key, value in filters.items():
        if isinstance(value, Described) and (
            value.descriptor == SELECTOR_FILTER or value.descriptor == SELECTOR_FILTER_CODE
        ):
            return str(value.value), (key, value)
    return None, None


def subscription_queue_name(client_id: str | None, link_name: str, shared: bool, global_: bool, volatile: bool) -> str:
    """The queue of a topic subscription, named as Artemis names it for AMQP.

    ``<container-id>.<link-name>``; the link name alone when the
    subscription is ``global`` or the connection has no container id.  A
    shared subscription drops the ``|suffix`` clients add to tell their links
    apart, and is marked ``:shared-volatile`` when not durable and
    ``:global`` when global.
    """
    queue = link_name if (global_ or not client_id) else f"{client_id}.{link_name}"
    if shared:
        queue = queue.split("|", 1)[0]
        if volatile:
            queue += ":shared-volatile"
        if global_:
            queue += ":global"
    return queue


def _temporary_node(session, capabilities) -> tuple[str, RoutingType]:
    """A dynamic node: a temporary queue named by the broker, gone with its link or session."""
    name = str(uuid.uuid4())
    rtype = _MULTICAST if str(CAP_TEMP_TOPIC) in capabilities else _ANYCAST
    session.check("createNonDurableQueue", name, name)
    session.server.create_queue(
        QueueDefinition(name=name, address=name, routing_type=rtype, durable=False, temporary=True)
    )
    session.temporary_queues.add(name)
    return name, rtype


class _Context:
    """What every link context has: its connection, session, link, and a dynamic node if any."""

    closed = False

    def __init__(self, protocol: AmqpProtocol, sctx: _SessionContext, link):
        self.protocol = protocol
        self.sctx = sctx
        self.session = sctx.session
        self.link = link
        #: the temporary queue of a dynamic source or target, gone with the link
        self.temporary = None
        self.routing_type = None

    def _create_temporary(self, capabilities) -> str:
        self.temporary, self.routing_type = _temporary_node(self.session, capabilities)
        return self.temporary

    def _drop_temporary(self) -> None:
        if self.temporary is not None:
            self.session.temporary_queues.discard(self.temporary)
            self.session.server.destroy_queue(self.temporary)

    def close(self, remote_close: bool) -> None:  # pragma: no cover - overridden
        self.closed = True

    def on_delivery(self, delivery) -> None:  # pragma: no cover - overridden
        pass

    def on_flow(self) -> None:
        pass


class _SessionContext:
    """One AMQP session: one broker :class:`ServerSession` and its transactions."""

    def __init__(self, protocol: AmqpProtocol, pn_session):
        self.protocol = protocol
        self.pn_session = pn_session
        self.session = ServerSession(protocol.server, protocol.principal, protocol.info)
        self.session.set_paused(protocol.paused)
        self.links: set = set()
        self.transactions: dict[bytes, object] = {}
        self._txids = itertools.count(1)

    def new_txid(self) -> bytes:
        return b"%d" % next(self._txids)

    def close(self) -> None:
        for ctx in list(self.links):
            ctx.close(False)
        self.links.clear()
        self.transactions.clear()
        self.session.close()


class _Receiver(_Context):
    """A client's sending link: messages into the broker."""

    def __init__(self, protocol: AmqpProtocol, sctx: _SessionContext, link):
        super().__init__(protocol, sctx, link)
        target = link.remote_target
        capabilities = _capabilities(target)
        address = target.address
        if target.dynamic:
            address = self._create_temporary(capabilities)
        elif address is not None:
            address, self.routing_type = protocol.resolve(address, capabilities)
            self._check_target(address)
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
        self.link_impl = link._impl
        link.context = self
        sctx.links.add(self)
        protocol.links[self.link_impl] = self
        link.open()
        self.waiting_for_space = False
        link.flow(protocol.credits)

    def _check_target(self, address: str) -> None:
        session = self.session
        session.check("send", address)
        server = session.server
        if address not in server.addresses and "::" not in address:
            settings = server.settings.resolve(address)
            if not settings.auto_create_addresses:
                raise LinkRefused("amqp:not-found", f"address {address} does not exist and auto-create-addresses is false")
            session.check("createAddress", address)

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
            wrapped = Delivery.wrap(dlv)
            txid = _txid(wrapped.remote.data)
            tx = self.sctx.transactions.get(txid)
            if tx is None:
                self._reject(dlv, "amqp:transaction:unknown-id", f"unknown transaction id {txid!r}")
                self._top_up()
                return
        try:
            message = to_core(bytes(data), self.address)
            rtype = self.routing_type
            if self.address is None:
                message.address, rtype = self.protocol.resolve(message.address, ())
            if tx is not None:
                self.session.send(message, routing_type=rtype, tx=tx)
                wrapped.local.data = [txid, Described(ulong(ACCEPTED_CODE), [])]
                wrapped.update(TRANSACTIONAL_STATE)
                wrapped.settle()
                self._top_up()
                return
            d = self.session.submit(message, rtype)
        except Exception as exc:  # noqa: BLE001 - answered with a condition
            name, text = _condition_for(exc)
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
        wrapped = Delivery.wrap(dlv)
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
        name, text = _condition_for(failure.value)
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
        chain = self.session._send_chain
        if chain is not None:
            # An earlier send waits for space: no more credit until it went.
            if not self.waiting_for_space:
                self.waiting_for_space = True
                chain.addBoth(self._space)
            return
        _flow(link, self.protocol.credits - credit)

    def _space(self, value):
        self.waiting_for_space = False
        if not self.closed:
            self._top_up()
            self.protocol.flush_soon()
        return value

    def close(self, remote_close: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.sctx.links.discard(self)
        self.protocol.links.pop(self.link_impl, None)
        if remote_close:
            self._drop_temporary()


class _Sender(_Context):
    """A client's receiving link: a broker consumer whose credit is the link credit."""

    def __init__(self, protocol: AmqpProtocol, sctx: _SessionContext, link):
        super().__init__(protocol, sctx, link)
        self.consumer = None
        self.unsettled: dict = {}
        self._tags = itertools.count(1)
        self.durable_queue = None
        source = link.remote_source
        capabilities = _capabilities(source)
        filters = _filters(source)
        selector, selector_entry = _selector(filters)
        presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        self.presettled = presettled
        address = source.address
        link.source.copy(source)
        link.target.copy(link.remote_target)
        kwargs = {}
        if source.dynamic:
            address = self._create_temporary(capabilities)
            link.source.address = address
            destination, rtype = address, self.routing_type
        elif address is None:
            destination, rtype = self._existing_subscription(link, capabilities)
        else:
            destination, rtype = protocol.resolve(address, capabilities)
            if rtype == _MULTICAST:
                kwargs = self._subscription(link, source, capabilities, destination)
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
        self.link_impl = link._impl
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
        queue = self.session.server.find_queue(queue_name)
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
        data = to_amqp(ref.message, ref.delivery_count - 1)
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
        link = self.link_impl
        inner = consumer.consumer
        credit = _credit(link)
        was = inner.credit_messages
        inner.credit_messages = credit
        if credit > 0:
            drain = _get_drain(link)
            if was is not None and was <= 0 or drain:
                inner.queue.deliver_now()
            if drain and _credit(link) > 0:
                _drained(link)
                inner.credit_messages = 0
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
            data = Delivery.wrap(dlv).remote.data or []
            txid = _txid(data)
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
            remote = Delivery.wrap(dlv).remote
            if remote.undeliverable:
                ref.queue.avoid(ref, self.consumer.consumer)
            session.cancel(ref, redelivered=bool(remote.failed))
        else:
            return  # received (non-terminal): nothing to do yet
        _settle(dlv)

    def close(self, remote_close: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.sctx.links.discard(self)
        self.protocol.links.pop(self.link_impl, None)
        self.unsettled.clear()
        if self.consumer is not None:
            self.consumer.close()
        server = self.session.server
        if remote_close and self.durable_queue is not None:
            # Artemis: closing (not detaching) a durable subscriber unsubscribes.
            queue = server.find_queue(self.durable_queue)
            if queue is not None and not queue.consumers:
                try:
                    self.session.check("deleteDurableQueue", queue.address, queue.name)
                    server.guard_cluster_change(f"remove durable subscription {queue.name}")
                    server.destroy_queue(queue.name)
                    server.cluster_changed("delete", queue, "subscription")
                except (SecurityError, errors.ClusterConfigurationUnavailableError) as exc:
                    log.warning("%s: subscription %s not removed: %s", self.protocol.peer, queue.name, exc)
        if remote_close:
            self._drop_temporary()


class _Coordinator(_Context):
    """The transaction coordinator link of a session."""

    def __init__(self, protocol: AmqpProtocol, sctx: _SessionContext, link):
        super().__init__(protocol, sctx, link)
        link.source.copy(link.remote_source)
        link.target.type = Terminus.COORDINATOR
        link.target.copy(link.remote_target)
        self.link_impl = link._impl
        link.context = self
        sctx.links.add(self)
        protocol.links[self.link_impl] = self
        link.open()
        link.flow(protocol.credits)

    def on_delivery(self, dlv) -> None:
        dlv = Delivery.wrap(dlv)
        link = self.link
        if dlv.partial or not dlv.readable:
            return
        data = link.recv(dlv.pending)
        link.advance()
        session = self.sctx.session
        try:
            sections = sections_codec.decode_message(data)
            body = sections.body[0][1] if sections.body else None
            if not isinstance(body, AmqpDescribed):
                raise ValueError("a coordinator message must carry a declare or discharge")
            code = _descriptor_code(body.descriptor)
            fields = list(body.value or [])
        except ValueError as exc:
            self._reject(dlv, "amqp:decode-error", str(exc))
            return
        if code == DECLARE:
            tx = session.begin()
            txid = self.sctx.new_txid()
            self.sctx.transactions[txid] = tx
            dlv.local.data = [txid]
            dlv.update(DECLARED)
            dlv.settle()
        elif code == DISCHARGE:
            txid = _txid(fields)
            fail = bool(fields[1]) if len(fields) > 1 else False
            tx = self.sctx.transactions.pop(txid, None)
            if tx is None:
                self._reject(dlv, "amqp:transaction:unknown-id", f"unknown transaction id {txid!r}")
                return
            if fail:
                session.rollback(tx)
                dlv.update(Delivery.ACCEPTED)
                dlv.settle()
                return
            d = session.commit(tx)
            d.addCallbacks(self._committed, self._commit_failed, callbackArgs=(dlv,), errbackArgs=(dlv,))
        else:
            self._reject(dlv, "amqp:not-implemented", f"coordinator message {code!r} is not supported")
        if link.credit <= self.protocol.low_credits:
            link.flow(self.protocol.credits - link.credit)

    def _committed(self, _, dlv) -> None:
        if self.closed:
            return
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        self.protocol.flush_soon()

    def _commit_failed(self, failure, dlv) -> None:
        if self.closed:
            return None
        self._reject(dlv, "amqp:transaction:rollback", f"transaction rolled back: {failure.getErrorMessage()}")
        self.protocol.flush_soon()
        return None

    def _reject(self, dlv, name: str, text: str) -> None:
        dlv.local.condition = Condition(name, text)
        dlv.update(Delivery.REJECTED)
        dlv.settle()

    def close(self, remote_close: bool) -> None:
        self.closed = True
        self.sctx.links.discard(self)
        self.protocol.links.pop(self.link_impl, None)


def _descriptor_code(descriptor):
    if isinstance(descriptor, Scalar):
        return descriptor.value
    if isinstance(descriptor, int):
        return descriptor
    return {"amqp:declare:list": DECLARE, "amqp:discharge:list": DISCHARGE}.get(str(descriptor))


def _txid(data) -> bytes | None:
    if not data:
        return None
    value = data[0]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return None


@implementer(interfaces.IPushProducer)
class AmqpProtocol(Protocol):
    """One AMQP 1.0 connection to a broker node."""

    def __init__(self, server, *, acceptor=None, limits=None, reactor=None, security=None):
        self.server = server
        self.reactor = reactor if reactor is not None else server.reactor
        self.security = security if security is not None else server.security
        self.acceptor = acceptor
        params = acceptor.params if acceptor is not None else {}
        self.credits = int(params.get("amqpCredits", DEFAULT_CREDITS))
        self.low_credits = int(params.get("amqpLowCredits", DEFAULT_LOW_CREDITS))
        self.idle_timeout = int(params.get("amqpIdleTimeout", DEFAULT_IDLE_TIMEOUT_MS)) / 1000.0
        self.max_frame_size = int(params.get("maxFrameSize", DEFAULT_MAX_FRAME_SIZE))
        self.channel_max = int(params.get("amqpChannelMax", DEFAULT_CHANNEL_MAX))
        self.max_message_size = int(
            params.get("amqpMaxMessageSize", limits.max_frame_size if limits else DEFAULT_MAX_MESSAGE_SIZE)
        )
        self.reject_as_modified = str(params.get("amqpTreatRejectAsUnmodifiedDeliveryFailed", "false")).lower() == "true"
        self.connect_timeout = (limits.connect_timeout if limits else 10_000) / 1000.0
        self.anycast_prefixes = prefixes(acceptor.anycast_prefix if acceptor else None)
        self.multicast_prefixes = prefixes(acceptor.multicast_prefix if acceptor else None)
        anonymous = self.security is None or not self.security.enabled or self.security.anonymous_user is not None
        mechanisms = params.get("saslMechanisms")
        if mechanisms:
            offered = tuple(m.strip().upper() for m in mechanisms.split(",") if m.strip())
        else:
            offered = ("PLAIN", "ANONYMOUS") if anonymous else ("PLAIN",)
        offered = tuple(m for m in offered if m in SUPPORTED_MECHANISMS and (anonymous or m != "ANONYMOUS"))
        if not mechanisms and certificate_login(acceptor, self.security):
            offered = ("EXTERNAL", *offered)  # a client certificate logs in, as with Artemis's CertLogin
        if not offered:
            offered = ("PLAIN",)
        self.sasl = SaslServer(offered, self._authenticate, allow_no_sasl=anonymous)
        self.principal = None
        self.info: ConnectionInfo | None = None
        self.pn_transport = None
        self.pn_connection = None
        self.collector = None
        self.sessions: list[_SessionContext] = []
        #: raw pn_link_t * -> link context, for the engine's hot events
        self.links: dict = {}
        #: dispatching engine events: flush() waits for the end of the batch
        self._processing = False
        self.paused = False
        self._closing = False
        self._opened = False
        self._connect_timer = None
        self._tick_timer = None
        self._flush_scheduled = None
        self.peer = "?"
        #: when the event log was told of this connection (None: it was not)
        self._accepted_at = None

    # -- Twisted --------------------------------------------------------------------
    def connectionMade(self):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.add(self)
        peer = self.transport.getPeer()
        self.peer = f"{getattr(peer, 'host', peer)}:{getattr(peer, 'port', '')}"
        apply_socket_options(self.transport, self.acceptor)
        self.transport.registerProducer(self, True)
        self._connect_timer = self.reactor.callLater(self.connect_timeout, self._connect_timed_out)

    def dataReceived(self, data: bytes):
        if self._closing:
            return
        if self.pn_transport is not None:
            storage = self.server.storage
            storage.hold()
            try:
                self._push(data)
                self._process()
            finally:
                storage.release()
            self.flush()
            return
        try:
            events = self.sasl.receive_data(data)
        except RemoteProtocolError as exc:
            out = self.sasl.data_to_send()
            if out:
                self.transport.write(out)
            log.info("AMQP %s: %s", self.peer, exc)
            self._abort()
            return
        out = self.sasl.data_to_send()
        if out:
            self.transport.write(out)
        for event in events:
            if isinstance(event, SaslAuthenticated):
                self.principal = None if event.principal is _NO_SECURITY else event.principal
                self._start_engine(event.remaining)
            elif isinstance(event, NoSasl):
                principal = self.security.authenticate(None, None) if self.security is not None else None
                self.principal = principal
                self._start_engine(event.remaining)
            elif isinstance(event, Passthrough):
                if self.pn_transport is not None:
                    self._push(event.data)
            elif isinstance(event, (SaslFailed, SaslRequired)):
                log.info("AMQP %s: authentication failed (%s)", self.peer, getattr(event, "reason", "SASL required"))
                self._abort()
                return
        if self.pn_transport is not None:
            self._process()
            self.flush()

    def _authenticate(self, credentials):
        mechanism = credentials.mechanism
        if self.security is None:
            return _NO_SECURITY
        if mechanism == "PLAIN":
            return self.security.authenticate(credentials.username, credentials.password)
        if mechanism == "ANONYMOUS":
            return self.security.authenticate(None, None)
        if mechanism == "EXTERNAL":
            return self.security.authenticate_certificate(peer_subject(self.transport))
        return None

    def _start_engine(self, data: bytes) -> None:
        transport = Transport(Transport.SERVER)
        transport.max_frame_size = self.max_frame_size
        transport.channel_max = self.channel_max
        if self.idle_timeout > 0:
            transport.idle_timeout = self.idle_timeout
        connection = Connection()
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self.pn_transport = transport
        self.pn_connection = connection
        self.collector = collector
        if data:
            self._push(data)

    def _push(self, data: bytes) -> None:
        transport = self.pn_transport
        while data:
            capacity = transport.capacity()
            if capacity <= 0:
                if capacity < 0:
                    return  # the tail is closed: the connection is going
                self._process()
                capacity = transport.capacity()
                if capacity <= 0:
                    return
            chunk = data[:capacity]
            transport.push(chunk)
            data = data[len(chunk):]
            if data:
                self._process()

    def _process(self) -> None:
        """Dispatch the engine's events: deliveries and flow on raw pointers, the rest wrapped."""
        collector = self.collector._impl
        handlers = self._handlers
        links = self.links
        # Flushes requested while dispatching wait for the end of the batch.
        outer = self._processing
        self._processing = True
        try:
            self._dispatch(collector, handlers, links)
        finally:
            self._processing = outer

    def _dispatch(self, collector, handlers, links) -> None:
        while True:
            event = _peek(collector)
            if event == _NULL:
                break
            etype = _event_type(event)
            try:
                if etype == _PN_DELIVERY:
                    dlv = _event_delivery(event)
                    ctx = links.get(_delivery_link(dlv))
                    if ctx is not None and not ctx.closed:
                        ctx.on_delivery(dlv)
                elif etype == _PN_LINK_FLOW:
                    ctx = links.get(_event_link(event))
                    if ctx is not None:
                        ctx.on_flow()
                else:
                    handler = handlers.get(etype)
                    if handler is not None:
                        handler(self, Event.wrap(event))
            except Exception:  # noqa: BLE001 - one bad endpoint must not kill the reactor
                name = cproton.pn_event_type_name(etype)
                log.exception("AMQP %s: handling %s failed", self.peer, name)
                self._fail_connection("amqp:internal-error", f"internal error handling {name}")
            _pop(collector)

    def flush(self) -> None:
        """Write what the engine has produced (once, after the events being dispatched)."""
        transport = self.pn_transport
        if transport is None or self._processing:
            return
        # What was just written may have been the last of it (a close
        # frame): then the head is closed (pending < 0) and the socket goes.
        pending = drain_output(transport, self.transport.write)
        if pending < 0 and not self._closing:
            self._closing = True
            self.transport.loseConnection()
        self._schedule_tick()

    def flush_soon(self) -> None:
        """Flush once at the end of this reactor turn (coalesces a journal batch's outcomes)."""
        if self._flush_scheduled is None and not self._closing:
            self._flush_scheduled = self.reactor.callLater(0, self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = None
        if not self._closing and self.pn_transport is not None:
            self._process()
            self.flush()

    # -- timers -----------------------------------------------------------------------
    def _schedule_tick(self) -> None:
        if not self._opened or self._closing:
            return
        transport = self.pn_transport
        now = self.reactor.seconds()
        deadline = transport.tick(now)
        timer = self._tick_timer
        if timer is not None and timer.active():
            if deadline and timer.getTime() <= deadline:
                return  # fires first and re-arms itself at the next deadline
            timer.cancel()
        self._tick_timer = None
        if deadline:
            self._tick_timer = self.reactor.callLater(max(0.0, deadline - now), self._tick)

    def _tick(self) -> None:
        self._tick_timer = None
        if self._closing or self.pn_transport is None:
            return
        self.pn_transport.tick(self.reactor.seconds())
        self._process()
        self.flush()

    def _connect_timed_out(self) -> None:
        self._connect_timer = None
        if not self._opened and not self._closing:
            log.info("AMQP %s: no open within %g s, closing", self.peer, self.connect_timeout)
            if self.pn_connection is not None:
                self._fail_connection("amqp:resource-limit-exceeded", f"no open within {self.connect_timeout:g} s")
            # proton holds back a close until the peer's open has arrived,
            # which it never did: drop the connection rather than wait.
            self._abort()

    # -- endpoint events -------------------------------------------------------------
    def _on_connection_open(self, event) -> None:
        conn = event.connection
        if self.info is not None:
            # proton reports a second open frame as another remote open; it
            # is illegal (AMQP 1.0 2.4.1) and must not re-identify the connection.
            self._fail_connection("amqp:illegal-state", "open received on an open connection")
            return
        if self._connect_timer is not None and self._connect_timer.active():
            self._connect_timer.cancel()
        self._connect_timer = None
        container = conn.remote_container or None
        proxy_address, proxy_version = proxy_details(self.transport)
        self.info = ConnectionInfo(
            "AMQP",
            self.peer,
            client_id=container,
            acceptor=self.acceptor.name if self.acceptor else None,
            proxy_address=proxy_address,
            proxy_version=proxy_version,
        )
        events = self.server.events
        if events is not None:
            self._accepted_at = events.clock()
            events.connection_accepted(
                self.info.id, remote=self.peer, acceptor=self.info.acceptor, protocol="AMQP",
                user=getattr(self.principal, "user", None), client_id=container,
            )
        conn.container = self.server.node_id if getattr(self.server, "node_id", None) else "junction"
        conn.offered_capabilities = [ANONYMOUS_RELAY, SHARED_SUBS]
        # What a gateway pool's readiness probe reads (junction/gateway/amqp_probe.py;
        # Artemis reads broker.NodeID / Active / ConnectionCount over management).
        # Sent only here, after SASL succeeded.  junction:connections counts the
        # node's client connections at this moment, this one included: the
        # distinct connections holding a session (every acceptor, every
        # protocol) plus this acceptor's opened AMQP connections that hold
        # none yet (as this one).  One pass over the sessions, as the
        # management API counts them.
        live = {s.connection.id for s in self.server.sessions}
        live.update(p.info.id for p in _live_connections(self) if p.info is not None)
        live.add(self.info.id)
        conn.properties = {
            symbol("product"): "Junction",
            symbol("version"): __version__,
            symbol("junction:node-id"): str(getattr(self.server, "node_id", None) or "junction"),
            symbol("junction:active"): True,
            symbol("junction:connections"): len(live),
        }
        desired = conn.remote_desired_capabilities
        desired = set(str(c) for c in (desired or ()))
        if str(SOLE_CONNECTION) in desired and container:
            if any(
                other is not self and other.info is not None and other.info.client_id == container
                for other in _live_connections(self)
            ):
                conn.open()
                conn.condition = Condition(
                    "amqp:invalid-field",
                    f"container-id {container} is already connected",
                    {symbol("invalid-field"): symbol("container-id")},
                )
                conn.close()
                return
        self._opened = True
        conn.open()

    def _on_session_open(self, event) -> None:
        ssn = event.session
        ssn.open()
        if self.info is None:
            return
        ctx = _SessionContext(self, ssn)
        ssn.context = ctx
        self.sessions.append(ctx)

    def _on_link_open(self, event) -> None:
        link = event.link
        sctx = getattr(link.session, "context", None)
        if sctx is None:
            return
        try:
            if link.is_sender:
                _Sender(self, sctx, link)
            elif link.remote_target.type == Terminus.COORDINATOR:
                _Coordinator(self, sctx, link)
            else:
                _Receiver(self, sctx, link)
        except Exception as exc:  # noqa: BLE001 - refused with the condition
            name, text = _condition_for(exc)
            if name == "amqp:internal-error":
                log.exception("AMQP %s: attach of %s failed", self.peer, link.name)
            else:
                log.info("AMQP %s: attach of %s refused: %s", self.peer, link.name, text)
            self.close_link(link, name, text, refused=True)

    def close_link(self, link, name: str, text: str, *, refused: bool = False) -> None:
        """Close a link with an error condition (refusing an attach if it never opened)."""
        ctx = getattr(link, "context", None)
        if ctx is not None:
            ctx.close(False)
        if refused and not (link.state & Endpoint.LOCAL_ACTIVE):
            # Refusing an attach: attach with a null terminus, then detach.
            if link.is_sender:
                link.source.address = None
            else:
                link.target.address = None
            link.open()
        link.condition = Condition(name, text)
        link.close()

    def _on_link_close(self, event) -> None:
        self._link_ended(event.link, closed=True)

    def _on_link_detach(self, event) -> None:
        self._link_ended(event.link, closed=False)

    def _link_ended(self, link, *, closed: bool) -> None:
        """The client closed (for good) or detached (to resume later) a link: answer in kind."""
        ctx = getattr(link, "context", None)
        if ctx is not None:
            ctx.close(closed)
        if link.state & Endpoint.LOCAL_ACTIVE:
            if closed:
                link.close()
            else:
                link.detach()

    def _on_session_close(self, event) -> None:
        ssn = event.session
        ctx = getattr(ssn, "context", None)
        if ctx is not None:
            ctx.close()
            if ctx in self.sessions:
                self.sessions.remove(ctx)
        if ssn.state & Endpoint.LOCAL_ACTIVE:
            ssn.close()

    def _on_connection_close(self, event) -> None:
        self._close_sessions()
        conn = event.connection
        if conn.state & Endpoint.LOCAL_ACTIVE:
            conn.close()

    def _on_transport_error(self, event) -> None:
        condition = self.pn_transport.condition
        if condition is not None:
            log.info("AMQP %s: %s: %s", self.peer, condition.name, condition.description)

    def _on_transport_tail_closed(self, event) -> None:
        # proton stops reading, with no condition and no close frame, when a
        # frame's body does not decode ("Error dispatching frame"); a peer's
        # close or a framing error close the tail too, and are handled.
        conn = self.pn_connection
        if self._closing or self.pn_transport.condition is not None:
            return
        if conn is not None and conn.state & Endpoint.REMOTE_CLOSED:
            return
        log.info("AMQP %s: a frame that does not decode, closing", self.peer)
        self._fail_connection("amqp:decode-error", "malformed frame: its body does not decode")
        self._abort()  # proton holds the close back if no open arrived

    def _on_transport_closed(self, event) -> None:
        self.flush()
        if not self._closing:
            self._closing = True
            self.transport.loseConnection()

    _handlers = {
        lib.PN_CONNECTION_REMOTE_OPEN: _on_connection_open,
        lib.PN_SESSION_REMOTE_OPEN: _on_session_open,
        lib.PN_LINK_REMOTE_OPEN: _on_link_open,
        lib.PN_LINK_REMOTE_CLOSE: _on_link_close,
        lib.PN_LINK_REMOTE_DETACH: _on_link_detach,
        lib.PN_SESSION_REMOTE_CLOSE: _on_session_close,
        lib.PN_CONNECTION_REMOTE_CLOSE: _on_connection_close,
        lib.PN_TRANSPORT_ERROR: _on_transport_error,
        lib.PN_TRANSPORT_CLOSED: _on_transport_closed,
        lib.PN_TRANSPORT_TAIL_CLOSED: _on_transport_tail_closed,
    }

    # -- helpers ---------------------------------------------------------------------------
    def resolve(self, address: str, capabilities) -> tuple[str, RoutingType | None]:
        """(address, routing type) from an address, its prefix and the terminus capabilities."""
        for prefix in self.anycast_prefixes:
            if address.startswith(prefix):
                return address[len(prefix):], _ANYCAST
        for prefix in self.multicast_prefixes:
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
        existing = self.server.addresses.get(address)
        if existing is not None and len(existing.routing_types) == 1:
            return address, next(iter(existing.routing_types))
        return address, _ANYCAST

    def _fail_connection(self, name: str, text: str) -> None:
        conn = self.pn_connection
        if conn is None:
            self._abort()
            return
        self._close_sessions()
        if not conn.state & Endpoint.LOCAL_ACTIVE and not conn.state & Endpoint.LOCAL_CLOSED:
            conn.open()
        conn.condition = Condition(name, text)
        if not conn.state & Endpoint.LOCAL_CLOSED:
            conn.close()
        self.flush()

    def _abort(self) -> None:
        if not self._closing:
            self._closing = True
            self.transport.loseConnection()

    def _close_sessions(self) -> None:
        for ctx in self.sessions:
            ctx.close()
        self.sessions.clear()

    def connectionLost(self, reason=None):
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        self._closing = True
        for timer in (self._connect_timer, self._tick_timer, self._flush_scheduled):
            if timer is not None and timer.active():
                timer.cancel()
        self._connect_timer = self._tick_timer = self._flush_scheduled = None
        events = self.server.events
        if events is not None and self._accepted_at is not None:
            events.connection_closed(self.info.id, started=self._accepted_at, reason=close_reason(reason))
            self._accepted_at = None
        self._close_sessions()
        connection = self.pn_connection
        if connection is not None:
            # proton keeps an endpoint's Python attributes with its C object, and
            # our contexts keep that object alive: a cycle Python's collector
            # cannot see, which held every closed connection in memory.
            for endpoint in _endpoints(connection.link_head(0)) + _endpoints(connection.session_head(0)):
                endpoint.context = None
        if self.pn_transport is not None:
            self.pn_transport.unbind()
        if self.collector is not None:
            self.collector.release()
        self.pn_transport = None

    # IPushProducer: the transport's write buffer is full / drained.
    def pauseProducing(self):
        self.paused = True
        for ctx in self.sessions:
            ctx.session.set_paused(True)

    def resumeProducing(self):
        self.paused = False
        if self._closing:
            return
        for ctx in self.sessions:
            ctx.session.set_paused(False)

    def stopProducing(self):
        pass


def _endpoints(first) -> list:
    """A proton connection's links (or sessions), from the first one ``*_head(0)`` gave."""
    found = []
    while first is not None:
        found.append(first)
        first = first.next(0)
    return found


class _NoSecurity:
    """The principal of a connection to a node without a security manager."""

    def __bool__(self):
        return True


_NO_SECURITY = _NoSecurity()


def _live_connections(protocol: AmqpProtocol):
    factory = getattr(protocol, "factory", None)
    return list(factory.connections) if factory is not None else []


class AmqpFactory(AcceptorFactory):
    """Builds an :class:`AmqpProtocol` per connection on one acceptor."""

    protocol_class = AmqpProtocol
