"""The sections of an AMQP 1.0 message (spec part 3 section 3.2): their codes and dataclasses.

What :mod:`.decoder` produces and :mod:`.encoder` consumes: the section
descriptor codes, the header's and properties' field counts and defaults,
:class:`Header`, :class:`Properties` and :class:`MessageSections`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from junction.protocols.amqp.types.values import Symbol

__all__ = [
    "AMQP_SEQUENCE",
    "AMQP_VALUE",
    "APPLICATION_PROPERTIES",
    "DATA",
    "DEFAULT_PRIORITY",
    "DELIVERY_ANNOTATIONS",
    "FOOTER",
    "HEADER",
    "HEADER_FIELDS",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "PROPERTIES_FIELDS",
    "Header",
    "MessageSections",
    "Properties",
]

# Section descriptor codes (domain 0x00000000, the AMQP domain).
HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

DEFAULT_PRIORITY = 4
"""The header's priority when absent (spec part 3 section 3.2.1)."""

HEADER_FIELDS = 5
"""Fields of the header list; a longer list is refused."""

PROPERTIES_FIELDS = 13
"""Fields of the properties list; a longer list is refused."""


@dataclass(slots=True)
class Header:
    """The header section: transport-level delivery annotations (spec 3.2.1).

    ``ttl`` is in milliseconds (``None``: no expiry); the others take the
    spec's defaults when absent from the wire.
    """

    durable: bool = False
    priority: int = DEFAULT_PRIORITY
    ttl: int | None = None
    first_acquirer: bool = False
    delivery_count: int = 0


@dataclass(slots=True)
class Properties:
    """The properties section: the bare message's immutable properties (spec 3.2.4).

    ``message_id``/``correlation_id`` are an ``int`` (ulong), ``uuid.UUID``,
    ``bytes`` or ``str``; the two times are ``int`` milliseconds since the
    epoch; ``group_sequence`` an ``int`` (uint).
    """

    message_id: int | uuid.UUID | bytes | str | None = None
    user_id: bytes | None = None
    to: str | None = None
    subject: str | None = None
    reply_to: str | None = None
    correlation_id: int | uuid.UUID | bytes | str | None = None
    content_type: Symbol | None = None
    content_encoding: Symbol | None = None
    absolute_expiry_time: int | None = None
    creation_time: int | None = None
    group_id: str | None = None
    group_sequence: int | None = None
    reply_to_group_id: str | None = None


@dataclass(slots=True)
class MessageSections:
    """A message split into its sections (see the module doc).

    ``body`` is a list of ``(kind, value)``: ``("data", bytes)`` per data
    section, ``("amqp-sequence", list)`` per sequence section, or one
    ``("amqp-value", value)``.  ``annotated`` and ``bare`` are the raw spans
    :func:`decode_message` found, at ``annotated_offset`` and ``bare_offset``
    of its input (empty, at the input's end, when the message has no such
    section); :func:`encode_message` ignores all four.
    """

    header: Header | None = None
    delivery_annotations: dict | None = None
    message_annotations: dict | None = None
    properties: Properties | None = None
    application_properties: dict | None = None
    body: list = field(default_factory=list)
    footer: dict | None = None
    annotated: bytes = b""
    bare: bytes = b""
    annotated_offset: int = 0
    bare_offset: int = 0
