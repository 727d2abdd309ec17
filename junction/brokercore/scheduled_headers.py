"""How STOMP and AMQP clients ask for scheduled delivery, as Artemis reads it.

Every protocol ends in the same place: the message's ``_AMQ_SCHED_DELIVERY``
property (epoch ms), which the queues hold a message for (see
:mod:`junction.brokercore.scheduled`).  What each protocol gives:

STOMP (Artemis's ``StompUtils``): the SEND headers ``AMQ_SCHEDULED_DELAY``
(milliseconds from now) and ``AMQ_SCHEDULED_TIME`` (epoch ms), each used only
when above 0, the time winning over the delay.  Both are consumed: neither
becomes a message property, so a STOMP consumer sees the resulting
``_AMQ_SCHED_DELIVERY`` header instead.  A value that is not a Java ``long``
is an error (Artemis answers ``ERROR`` and closes the connection).

AMQP (Artemis's ``AMQPMessage.getScheduledDeliveryTime``): the message
annotations ``x-opt-delivery-time`` (epoch ms) and ``x-opt-delivery-delay``
(ms from now); a numeric time wins over the delay, whatever its value (a time
of 0 means no hold, even with a delay), and a value that is not a number is
ignored.  The annotations stay as sent, so an AMQP consumer sees them
unchanged.  A message from another protocol reaches an AMQP consumer with its
scheduled time as the ``x-opt-delivery-time`` annotation (Artemis's
``CoreAmqpConverter``), not as an application property.
"""

from __future__ import annotations

import re

from junction.protocols.amqp.types import Scalar, Symbol
from junction.protocols.stomp.connection import StompError

__all__ = [
    "SCHEDULED_DELAY_HEADER",
    "SCHEDULED_TIME_HEADER",
    "DELIVERY_TIME",
    "DELIVERY_DELAY",
    "stomp_delivery_time",
    "amqp_delivery_time",
]

#: STOMP SEND headers (Artemis's ``Stomp.Headers.Send``)
SCHEDULED_DELAY_HEADER = "AMQ_SCHEDULED_DELAY"
SCHEDULED_TIME_HEADER = "AMQ_SCHEDULED_TIME"
#: AMQP message annotations (Artemis's ``AMQPMessageSupport``)
DELIVERY_TIME = Symbol("x-opt-delivery-time")
DELIVERY_DELAY = Symbol("x-opt-delivery-delay")

#: What Java's ``Long.parseLong`` reads.
_LONG = re.compile(r"[+-]?[0-9]+\Z")
_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
#: AMQP scalars that are not a Java Number (a timestamp decodes to a Date)
_NOT_NUMBERS = frozenset({"timestamp", "char"})


def _long_header(name: str, text: str) -> int:
    if _LONG.match(text):
        value = int(text)
        if _LONG_MIN <= value <= _LONG_MAX:
            return value
    raise StompError(f"header {name} must be a long integer (milliseconds), not {text!r}")


def stomp_delivery_time(delay: str | None, time: str | None, now_ms: int) -> int:
    """The scheduled delivery time (epoch ms) a SEND's headers ask for; 0 for none.

    ``delay``/``time``: the ``AMQ_SCHEDULED_DELAY``/``AMQ_SCHEDULED_TIME``
    header values (None when absent).  Raises StompError for a value that is
    not a long.
    """
    at = 0
    if delay is not None:
        ms = _long_header(SCHEDULED_DELAY_HEADER, delay)
        if ms > 0:
            at = min(now_ms + ms, _LONG_MAX)
    if time is not None:
        ms = _long_header(SCHEDULED_TIME_HEADER, time)
        if ms > 0:
            at = ms
    return at


def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return int(value)
    if isinstance(value, Scalar) and value.kind not in _NOT_NUMBERS:
        inner = value.value  # a fixed width: byte, ubyte, ..., ulong, float
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return int(inner)
    return None


def amqp_delivery_time(annotations, now_ms: int) -> int:
    """The scheduled delivery time (epoch ms) a message's annotations ask for; 0 for none."""
    if not annotations:
        return 0
    at = _number(annotations.get(DELIVERY_TIME))
    if at is None:
        delay = _number(annotations.get(DELIVERY_DELAY))
        if delay is None:
            return 0
        at = now_ms + delay
    return at if at > 0 else 0
