"""Consumer priority as an AMQP receiver asks for it, Artemis's way.

A queue hands its messages to the highest-priority consumers that have credit
(:meth:`Queue._next_consumer <junction.brokercore.queue.Queue>`); this module
reads the priority an AMQP client gives its receiving link.  Artemis
(``DefaultSenderController``, ``AmqpSupport.getReceiverPriority``) takes it
from two places:

* the source address's parameters, ``orders?consumer-priority=5`` (its
  ``ParameterisedAddress``: the text after the first ``?`` is
  ``key=value`` pairs joined by ``&``; the address is what comes before it);
* the attach's link property ``priority`` (an integer), which wins over the
  address parameter.

No priority means 0, the default.  A ``consumer-priority`` that is not a Java
``int`` refuses the link (Artemis fails creating the consumer); other
parameters are ignored, as Artemis ignores the ones it does not use.  STOMP has
no consumer priority in Artemis: a SUBSCRIBE's ``dest?consumer-priority=5`` is
a destination of that literal name, on Junction as on Artemis.
"""

from __future__ import annotations

import re

__all__ = ["CONSUMER_PRIORITY", "RECEIVER_PRIORITY", "split_parameters", "receiver_priority"]

#: The address parameter (Artemis's ``QueueConfiguration.CONSUMER_PRIORITY``).
CONSUMER_PRIORITY = "consumer-priority"
#: The link property of a receiving link (Artemis's ``AmqpSupport.RECEIVER_PRIORITY``).
RECEIVER_PRIORITY = "priority"
#: Java ``int``: what ``Integer.valueOf`` reads.
_INT = re.compile(r"[+-]?[0-9]+\Z")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def split_parameters(address: str) -> tuple[str, dict[str, str]]:
    """(address, parameters) of ``address?key=value&key=value``.

    An address without ``?`` has no parameters; a pair without ``=`` is a key
    with an empty value.
    """
    head, sep, query = address.partition("?")
    if not sep:
        return address, {}
    parameters: dict[str, str] = {}
    for pair in query.split("&"):
        if pair:
            key, _, value = pair.partition("=")
            parameters[key] = value
    return head, parameters


def _java_int(text: str) -> int:
    if not _INT.match(text):
        raise ValueError(f"{CONSUMER_PRIORITY} must be an integer, not {text!r}")
    value = int(text)
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValueError(f"{CONSUMER_PRIORITY} {value} is out of the int range")
    return value


def receiver_priority(parameters: dict[str, str], link_properties) -> int:
    """The consumer priority of a receiving link (0 when it asks for none).

    ``parameters`` are its source address's (see :func:`split_parameters`),
    ``link_properties`` the attach's properties map (symbol keys) or None.
    Raises ValueError for a priority that is not an integer.
    """
    priority = 0
    text = parameters.get(CONSUMER_PRIORITY)
    if text is not None:
        priority = _java_int(text)
    if link_properties:
        value = link_properties.get(RECEIVER_PRIORITY)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"the link property {RECEIVER_PRIORITY} must be an integer, not {value!r}")
            # Artemis takes Number.intValue(): the low 32 bits, signed.
            value = int(value) & 0xFFFFFFFF
            priority = value - (1 << 32) if value > _INT_MAX else value
    return priority
