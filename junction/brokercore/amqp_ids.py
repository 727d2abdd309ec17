"""AMQP message and correlation ids as text, the way Artemis writes them for JMS and STOMP.

An AMQP ``message-id`` or ``correlation-id`` is a string, a ulong, a uuid or
binary.  Artemis's AMQP-to-core conversion (``AMQPMessageIdHelper``) turns it
into the JMS string form, marking the type so the value can be rebuilt when the
message goes back out over AMQP:

==================  ===========================  ===========================
AMQP value          message-id text              correlation-id text
==================  ===========================  ===========================
``"ID:abc"``        ``ID:abc``                   ``ID:abc``
``"abc"``           ``ID:AMQP_NO_PREFIX:abc``    ``abc``
``"ID:AMQP_..."``   ``ID:AMQP_STRING:ID:AMQP_...`` (either)
ulong ``42``        ``ID:AMQP_ULONG:42``         ``ID:AMQP_ULONG:42``
uuid                ``ID:AMQP_UUID:<uuid>``      ``ID:AMQP_UUID:<uuid>``
binary              ``ID:AMQP_BINARY:<HEX>``     ``ID:AMQP_BINARY:<HEX>``
==================  ===========================  ===========================

The message-id text is the message's ``NATIVE_MESSAGE_ID`` property (what a
STOMP consumer sees as a header of that name); the correlation-id text is its
correlation id (the STOMP ``correlation-id`` header).  Artemis hands a binary
correlation id to core as bytes, which a STOMP consumer then sees as a Java
array's name; Junction writes it as the message-id form, which reads back.
:func:`id_object` is the way back (Artemis's ``toIdObject``).
"""

from __future__ import annotations

import uuid

__all__ = ["NATIVE_MESSAGE_ID", "message_id_text", "correlation_id_text", "id_object"]

#: The property holding an AMQP message's own message-id as text (Artemis's name).
NATIVE_MESSAGE_ID = "NATIVE_MESSAGE_ID"

_ID = "ID:"
_NO_PREFIX = "AMQP_NO_PREFIX:"
_STRING = "AMQP_STRING:"
_ULONG = "AMQP_ULONG:"
_UUID = "AMQP_UUID:"
_BINARY = "AMQP_BINARY:"
_TYPE_PREFIXES = (_NO_PREFIX, _STRING, _ULONG, _UUID, _BINARY)
_HEX = frozenset("0123456789abcdefABCDEF")


def _typed_text(value) -> str:
    if isinstance(value, uuid.UUID):
        return f"{_ID}{_UUID}{value}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"{_ID}{_BINARY}{bytes(value).hex().upper()}"
    if isinstance(value, int):
        return f"{_ID}{_ULONG}{value}"
    raise TypeError(f"an AMQP id is a string, ulong, uuid or binary, not {type(value).__name__}")


def _escaped(text: str) -> bool:
    """``ID:`` followed by one of the type prefixes: the text must be escaped to read back."""
    return text.startswith(_TYPE_PREFIXES, len(_ID))


def message_id_text(value) -> str | None:
    """An AMQP message-id as the text Artemis gives JMS and STOMP (``NATIVE_MESSAGE_ID``)."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.startswith(_ID):
            return f"{_ID}{_NO_PREFIX}{value}"
        return f"{_ID}{_STRING}{value}" if _escaped(value) else value
    return _typed_text(value)


def correlation_id_text(value) -> str | None:
    """An AMQP correlation-id as text: a string as it is (escaped as above), the rest typed."""
    if value is None:
        return None
    if isinstance(value, str):
        return f"{_ID}{_STRING}{value}" if value.startswith(_ID) and _escaped(value) else value
    return _typed_text(value)


def id_object(text: str):
    """The AMQP id a text written by the functions above stands for (the text itself otherwise)."""
    if not text.startswith(_ID):
        return text
    rest = text[len(_ID):]
    try:
        if rest.startswith(_NO_PREFIX):
            return rest[len(_NO_PREFIX):]
        if rest.startswith(_STRING):
            return rest[len(_STRING):]
        if rest.startswith(_ULONG):
            number = int(rest[len(_ULONG):])
            return number if 0 <= number < 1 << 64 else text
        if rest.startswith(_UUID):
            return uuid.UUID(rest[len(_UUID):])
        if rest.startswith(_BINARY):
            digits = rest[len(_BINARY):]
            if len(digits) % 2 == 0 and all(c in _HEX for c in digits):
                return bytes.fromhex(digits)
    except ValueError:
        pass  # not a valid typed id: carried as the string it is (Artemis does the same)
    return text
