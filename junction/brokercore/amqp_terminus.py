"""AMQP termini as the broker reads them, and the error conditions it answers with.

What an attach's source or target asks for -- its capabilities
(``queue``/``topic``, ``shared``/``global``, ``temporary-*``), its filters (the
``apache.org:selector-filter:string`` selector) -- and how Artemis names the
queue of a topic subscription for AMQP; and :func:`condition_for`, the AMQP
error condition for each broker error.  Shared by the link contexts
(:mod:`junction.brokercore.amqp_links`) and the connection
(:mod:`junction.brokercore.amqp_server`).
"""

from __future__ import annotations

from proton import Described, symbol

from junction.brokercore.amqp_convert import ConversionError
from junction.brokercore.security import SecurityError
from junction.model import errors

__all__ = [
    "LinkRefused",
    "condition_for",
    "capabilities_of",
    "filters_of",
    "selector_of",
    "subscription_queue_name",
]

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


class LinkRefused(Exception):
    """An attach the broker refuses: the link is closed with this condition."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


def condition_for(exc: BaseException) -> tuple[str, str]:
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


def capabilities_of(terminus) -> set:
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


def filters_of(terminus) -> dict:
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


def selector_of(filters: dict) -> tuple[str | None, object | None]:
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
