"""Every use of qpid-proton's private API, in one place.

The AMQP adapter (:mod:`junction.brokercore.amqp_server`) drives proton's
engine through its public classes (``Transport``, ``Connection``,
``Collector``, ``Link``, ``Delivery``) -- except on the hot path, where
proton's Python wrappers cost more than the whole broker path per message.
There it calls the engine's C functions directly, on raw pointers, through
proton's private bindings (``cproton``, ``cproton_ffi``) and the wrappers'
``_impl`` pointers.  Nothing else in Junction imports them.

Private means unversioned: a new proton may rename or drop any of this.
:data:`WRITTEN_FOR` is the proton release this module was written and tested
against, and ``tests/unit/test_proton_private.py`` asserts the installed
release is that one and exercises every name here, so an upgrade fails there,
loudly, before anything else notices.  To upgrade: read the new release's
``cproton.py`` for each name below, adjust, and move :data:`WRITTEN_FOR`.
"""

from __future__ import annotations

import cproton
from cproton_ffi import ffi, lib
from proton import Delivery, Event

__all__ = [
    "WRITTEN_FOR",
    "NULL",
    "PN_DELIVERY",
    "PN_LINK_FLOW",
    "PN_ACCEPTED",
    "PN_CONNECTION_REMOTE_OPEN",
    "PN_SESSION_REMOTE_OPEN",
    "PN_LINK_REMOTE_OPEN",
    "PN_LINK_REMOTE_CLOSE",
    "PN_LINK_REMOTE_DETACH",
    "PN_SESSION_REMOTE_CLOSE",
    "PN_CONNECTION_REMOTE_CLOSE",
    "PN_TRANSPORT_ERROR",
    "PN_TRANSPORT_CLOSED",
    "PN_TRANSPORT_TAIL_CLOSED",
    "collector_peek",
    "collector_pop",
    "event_type",
    "event_type_name",
    "event_delivery",
    "event_link",
    "delivery_link",
    "delivery_aborted",
    "delivery_partial",
    "delivery_readable",
    "delivery_pending",
    "delivery_remote_settled",
    "delivery_remote_state",
    "delivery_settle",
    "delivery_update",
    "new_delivery",
    "delivery_tag",
    "link_recv",
    "link_send",
    "buffer_of",
    "link_advance",
    "link_credit",
    "link_flow",
    "link_get_drain",
    "link_drained",
    "link_pointer",
    "collector_pointer",
    "wrap_delivery",
    "wrap_event",
]

#: The python-qpid-proton release this module was written for (``proton.VERSION``).
WRITTEN_FOR = (0, 40, 0)

#: A null pointer: what ``collector_peek`` returns when no event is waiting.
NULL = ffi.NULL

# Event types and the delivery state the adapter dispatches on (pn_event_type_t, pn_delivery_state).
PN_DELIVERY = lib.PN_DELIVERY
PN_LINK_FLOW = lib.PN_LINK_FLOW
PN_ACCEPTED = lib.PN_ACCEPTED
PN_CONNECTION_REMOTE_OPEN = lib.PN_CONNECTION_REMOTE_OPEN
PN_SESSION_REMOTE_OPEN = lib.PN_SESSION_REMOTE_OPEN
PN_LINK_REMOTE_OPEN = lib.PN_LINK_REMOTE_OPEN
PN_LINK_REMOTE_CLOSE = lib.PN_LINK_REMOTE_CLOSE
PN_LINK_REMOTE_DETACH = lib.PN_LINK_REMOTE_DETACH
PN_SESSION_REMOTE_CLOSE = lib.PN_SESSION_REMOTE_CLOSE
PN_CONNECTION_REMOTE_CLOSE = lib.PN_CONNECTION_REMOTE_CLOSE
PN_TRANSPORT_ERROR = lib.PN_TRANSPORT_ERROR
PN_TRANSPORT_CLOSED = lib.PN_TRANSPORT_CLOSED
PN_TRANSPORT_TAIL_CLOSED = lib.PN_TRANSPORT_TAIL_CLOSED

# The collector and its events (pn_collector_t *, pn_event_t *).
collector_peek = lib.pn_collector_peek
collector_pop = lib.pn_collector_pop
event_type = lib.pn_event_type
#: pn_event_type_name(type) -> str, for logs
event_type_name = cproton.pn_event_type_name
event_delivery = lib.pn_event_delivery
event_link = lib.pn_event_link

# Deliveries (pn_delivery_t *).
delivery_link = lib.pn_delivery_link
delivery_aborted = lib.pn_delivery_aborted
delivery_partial = lib.pn_delivery_partial
delivery_readable = lib.pn_delivery_readable
delivery_pending = lib.pn_delivery_pending
delivery_remote_settled = lib.pn_delivery_settled
delivery_remote_state = lib.pn_delivery_remote_state
delivery_settle = lib.pn_delivery_settle
delivery_update = lib.pn_delivery_update
#: pn_delivery(link, tag) -> a new outgoing delivery; ``tag`` from :func:`delivery_tag`
new_delivery = lib.pn_delivery
#: bytes -> the (length, buffer) pair ``new_delivery`` takes as its tag
delivery_tag = cproton.py2bytes

# Links (pn_link_t *).
#: pn_link_recv(link, limit) -> (count or error code, bytearray)
link_recv = cproton.pn_link_recv
link_advance = lib.pn_link_advance
link_credit = lib.pn_link_credit
link_flow = lib.pn_link_flow
link_get_drain = lib.pn_link_get_drain
link_drained = lib.pn_link_drained

#: pn_link_send(link, buffer_of(data), len(data)): ``data`` as the current delivery's payload
link_send = lib.pn_link_send
#: bytes -> the C buffer ``link_send`` takes (no copy)
buffer_of = ffi.from_buffer


def link_pointer(link):
    """The ``pn_link_t *`` behind a ``proton.Link``."""
    return link._impl


def collector_pointer(collector):
    """The ``pn_collector_t *`` behind a ``proton.Collector``."""
    return collector._impl


def wrap_delivery(pointer) -> Delivery:
    """A ``proton.Delivery`` for a raw ``pn_delivery_t *`` (for its slower, richer API)."""
    return Delivery.wrap(pointer)


def wrap_event(pointer) -> Event:
    """A ``proton.Event`` for a raw ``pn_event_t *``."""
    return Event.wrap(pointer)
