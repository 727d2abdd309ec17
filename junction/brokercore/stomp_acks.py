"""Which unacknowledged STOMP delivery an ACK or NACK names.

A MESSAGE frame's ``message-id`` is the message's own id (the broker's
``Message.message_id``): the same on every delivery and redelivery, on every
connection and to every subscription, as Artemis wrote it before 2.33.  The
STOMP 1.2 ``ack`` header is Artemis's (2.33 on, ARTEMIS-4649)
``<consumer id>,<message id>``, unique on the connection.

Several subscriptions of one connection can hold the same message unacknowledged
(a topic message, one queue per subscription), so a bare message id may not be
enough.  An ACK or NACK is resolved, in every version, from its id (the
``message-id`` header in 1.0 and 1.1, ``id`` in 1.2) and its ``subscription``
header when it has one:

* ``<consumer id>,<message id>``: that subscription's delivery;
* a bare message id with a subscription: that subscription's delivery;
* a bare message id alone: the one subscription holding it -- or, when several
  do, an error that says so, rather than a guess.

The connection keeps ``holders``: message id (text) -> the subscription holding
it unacknowledged, or a tuple of them when more than one does (bounded, as the
subscriptions' own pending maps are, by what their windows let out).
"""

from __future__ import annotations

__all__ = ["AckNotFound", "joined", "release", "find"]


class AckNotFound(Exception):
    """An ACK or NACK naming nothing this connection holds, or naming it ambiguously."""


def joined(held, sub):
    """``holders[mid]`` once ``sub`` holds ``mid`` too (``held`` is what held it already)."""
    if held.__class__ is tuple:
        return held if sub in held else (*held, sub)
    return held if held is sub else (held, sub)


def release(holders: dict, mid: str, sub) -> None:
    """``sub`` no longer holds ``mid`` (acknowledged, given back, or unsubscribed)."""
    held = holders.get(mid)
    if held is sub:
        del holders[mid]
    elif held.__class__ is tuple:
        rest = tuple(s for s in held if s is not sub)
        holders[mid] = rest[0] if len(rest) == 1 else rest


def find(holders: dict, subscriptions: dict, given: str, subscription: str | None):
    """(subscription, message id) of the delivery ``given`` names; AckNotFound if none or several."""
    mid = given
    consumer_id = None
    if "," in given:
        head, _, mid = given.partition(",")
        try:
            consumer_id = int(head)
        except ValueError:
            raise AckNotFound(f"no unacknowledged message with id {given} on this connection") from None
    held = holders.get(mid)
    candidates = () if held is None else held if held.__class__ is tuple else (held,)
    if consumer_id is not None:
        candidates = tuple(s for s in candidates if s.consumer is not None and s.consumer.id == consumer_id)
    if subscription is not None:
        if subscription not in subscriptions:
            raise AckNotFound(f"no subscription {subscription} on this connection")
        candidates = tuple(s for s in candidates if s.id == subscription)
        if not candidates:
            raise AckNotFound(f"no unacknowledged message with id {given} on subscription {subscription}")
    if not candidates:
        raise AckNotFound(f"no unacknowledged message with id {given} on this connection")
    if len(candidates) > 1:
        names = ", ".join(str(s.id) for s in candidates)
        raise AckNotFound(
            f"message {given} is unacknowledged on subscriptions {names}: "
            "name one with the subscription header (STOMP 1.2: ACK by the MESSAGE's ack header)"
        )
    return candidates[0], mid
