"""AMQP 1.0 message sections (spec part 3 section 3.2), pure Python and sans-IO.

A message on the wire is a run of described sections, in this order::

    header? delivery-annotations? message-annotations?      <- annotations
    properties? application-properties? body* footer?       <- bare message

:func:`decode_message` splits a transfer's payload into :class:`MessageSections`
and checks the order: at most one of each non-body section, body sections all
of one kind (any number of ``data`` sections, any number of ``amqp-sequence``
sections, or exactly one ``amqp-value``).  A message with no body is accepted.

Besides the decoded fields it keeps two raw spans, so that a broker can pass a
message on without re-encoding what it did not change (the spec requires the
bare message to reach the receiver unaltered, byte for byte):

* :attr:`MessageSections.annotated` -- everything after the header and the
  delivery-annotations (which are per-hop), from the message-annotations, or
  the first later section, to the end.  Prefixed with a fresh
  :func:`encode_header` it is the message to forward.
* :attr:`MessageSections.bare` -- the bare message, from properties (or the
  first later section) to the end, footer included.  Prefixed with a header
  and :func:`encode_annotations` of new message-annotations, it is the
  message to forward when the broker adds annotations of its own.

Field types are checked on the wire: each header and properties field must
be null or have the encoding the spec gives it (``priority`` a ubyte, ``ttl``
a uint, ``message-id`` a ulong, uuid, binary or string, ``content-type`` a
symbol, the times timestamps...), and a list with more fields than the spec
defines is refused.  The fields are returned as plain Python values
(``ttl``, ``delivery_count``, ``group_sequence`` and ulong ids as ``int``, the
two timestamps as ``int`` milliseconds since the epoch); absent or null
header fields take the spec's defaults.  Annotation and footer maps keep
their values as :mod:`..types` decodes them, with symbol keys as
:class:`Symbol` and ulong keys as plain ``int`` (a string key is kept as a
string; a key of another type is refused, as the spec allows only those two).  Application-properties
keys must be strings (a symbol key is refused) and their values simple (no
list, map or array; a described value is accepted).  A violation of any of
these rules is a :class:`DecodeError`.

Limits: those of :mod:`..types` (:data:`~..types.MAX_DEPTH`...), plus
:data:`HEADER_FIELDS` and :data:`PROPERTIES_FIELDS` fields per list, and
:data:`HEADER_CACHE_SIZE` cached header encodings.

The ``encode_*`` functions build sections from the dataclasses, always with
the short ``smallulong`` descriptor (``0x00 0x53 code``) and with trailing
default or null list fields omitted.

Modules: :mod:`.sections` (the section codes and the dataclasses),
:mod:`.decoder` (:func:`decode_message` and the raw spans), :mod:`.encoder`
(the ``encode_*`` functions).  The names below are the package's public face.
"""

from __future__ import annotations

from junction.protocols.amqp.message.decoder import SECTION_SYMBOLS, decode_message
from junction.protocols.amqp.message.encoder import (
    HEADER_CACHE_SIZE,
    body_head,
    encode_annotations,
    encode_application_properties,
    encode_body_data,
    encode_body_sequence,
    encode_body_value,
    encode_header,
    encode_message,
    encode_properties,
)
from junction.protocols.amqp.message.sections import (
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    DATA,
    DEFAULT_PRIORITY,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    HEADER_FIELDS,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    PROPERTIES_FIELDS,
    Header,
    MessageSections,
    Properties,
)

__all__ = [
    "AMQP_SEQUENCE",
    "AMQP_VALUE",
    "APPLICATION_PROPERTIES",
    "DATA",
    "DEFAULT_PRIORITY",
    "DELIVERY_ANNOTATIONS",
    "FOOTER",
    "HEADER",
    "HEADER_CACHE_SIZE",
    "HEADER_FIELDS",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "PROPERTIES_FIELDS",
    "SECTION_SYMBOLS",
    "Header",
    "MessageSections",
    "Properties",
    "decode_message",
    "encode_annotations",
    "encode_application_properties",
    "body_head",
    "encode_body_data",
    "encode_body_sequence",
    "encode_body_value",
    "encode_header",
    "encode_message",
    "encode_properties",
]
