"""A large message's body for a consumer of another protocol: streamed from its file.

A large CORE message's body is only in its file in the large-messages
directory (:mod:`junction.brokercore.large_messages`).  STOMP and AMQP have
no continuations, but both can write one delivery in pieces (a STOMP MESSAGE
with a ``content-length`` and its body after it; an AMQP delivery over
several transfer frames), so :func:`outgoing` gives their adapters what to
write: a :class:`LargeBody` -- the message as that protocol sees it with an
empty body, the converted body's length, and its bytes read from the file
:data:`STREAM_CHUNK` at a time -- or, where the whole body must be decoded,
a regular message converted in memory.

The body is what a consumer would get from the same message sent small:

* BYTES (and DEFAULT) bodies: the file's bytes.
* TEXT: CORE writes a TextMessage body as one nullable SimpleString (byte 1,
  ``int32`` byte count, the text in UTF-16LE); the consumer gets the text in
  UTF-8, converted chunk by chunk (one pass first to learn the UTF-8 length).
  A body that is not one such string goes as its bytes, as
  :func:`~junction.brokercore.core_convert.from_core` keeps it.
* MAP, STREAM, OBJECT: a STOMP consumer gets their bytes in CORE's layout, as
  it does for a small one.  An AMQP consumer gets them converted to an AMQP
  map, list or serialized object (:mod:`junction.brokercore.jms_bodies`),
  which needs the whole body decoded: read whole up to
  :data:`MAX_CONVERTED_LARGE`; above that they go as a BytesMessage whose
  bytes are CORE's layout (nothing is lost; Artemis reads any large message
  whole into memory to convert it, which Junction does not do).

OpenWire has neither continuations nor a delivery in pieces: an OpenWire
consumer gets a large message read whole into memory (:func:`in_memory`), as
Artemis converts one, up to :data:`MAX_CONVERTED_LARGE`.

Nothing here is protocol-specific: the STOMP, AMQP and OpenWire adapters use
it, and none imports the CORE adapter.
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import os
from dataclasses import dataclass

from junction.brokercore.core_convert import from_core, to_core
from junction.brokercore.large_messages import NATIVE_KEY, parse_reference
from junction.model.message import Message
from junction.protocols.core import MessageType

__all__ = ["LargeBody", "MAX_CONVERTED_LARGE", "STREAM_CHUNK", "in_memory", "outgoing"]

log = logging.getLogger("junction.large")

#: The largest map, stream or object body read whole into memory to convert it for an AMQP
#: consumer; a larger one goes as bytes (see the module doc).
MAX_CONVERTED_LARGE = 16 * 1024 * 1024
#: The bytes read from a large message's file at a time while streaming it to a consumer.
STREAM_CHUNK = 64 * 1024

#: A TextMessage body: byte 1 (not null), then the UTF-16LE byte count.
_TEXT_HEAD = 5
#: The types an AMQP consumer gets decoded (so read whole, up to MAX_CONVERTED_LARGE).
_DECODED = frozenset({MessageType.MAP, MessageType.STREAM, MessageType.OBJECT})


@dataclass(frozen=True, slots=True)
class LargeBody:
    """A large message to stream: ``message`` (converted, its body empty) and the body's
    ``size`` bytes, read from ``path`` by :meth:`chunks` (UTF-16LE text from offset 5
    converted to UTF-8 when ``text``)."""

    message: Message
    size: int
    path: str
    text: bool

    def chunks(self, chunk_size: int = STREAM_CHUNK):
        """The body, ``chunk_size`` bytes of the file at a time (a generator holding the file open)."""
        with open(self.path, "rb") as f:
            if not self.text:
                while chunk := f.read(chunk_size):
                    yield chunk
                return
            f.seek(_TEXT_HEAD)
            decoder = codecs.getincrementaldecoder("utf-16-le")("surrogatepass")
            while chunk := f.read(chunk_size):
                out = decoder.decode(chunk).encode("utf-8", "surrogatepass")
                if out:
                    yield out
            tail = decoder.decode(b"", final=True).encode("utf-8", "surrogatepass")
            if tail:
                yield tail


def _utf8_length(path: str, size: int) -> int | None:
    """The UTF-8 length of the text in a TextMessage file, or None when the file is not one
    nullable SimpleString of ``size`` bytes."""
    with open(path, "rb") as f:
        head = f.read(_TEXT_HEAD)
        if len(head) < _TEXT_HEAD or head[0] != 1:
            return None
        count = int.from_bytes(head[1:], "big", signed=True)
        if count < 0 or count % 2 or count != size - _TEXT_HEAD:
            return None
        decoder = codecs.getincrementaldecoder("utf-16-le")("surrogatepass")
        total = 0
        while chunk := f.read(STREAM_CHUNK):
            total += len(decoder.decode(chunk).encode("utf-8", "surrogatepass"))
        return total + len(decoder.decode(b"", final=True).encode("utf-8", "surrogatepass"))


def _converted(message: Message, body: bytes, kind: int | None = None) -> Message:
    """``message`` as a CORE message with ``body`` (and type ``kind``) would be converted."""
    _, headers = to_core(message)
    if kind is not None:
        headers = dataclasses.replace(headers, type=kind)
    converted = from_core(body, headers, message.address)
    converted.message_id = message.message_id
    converted.routing_type = message.routing_type
    converted.native.pop(NATIVE_KEY, None)
    return converted


def outgoing(message: Message, server, *, decode_jms: bool) -> Message | LargeBody:
    """What to write for ``message`` to a STOMP (``decode_jms`` false) or AMQP consumer.

    A regular message is returned as it is; a large one as a :class:`LargeBody`, or
    (a map, stream or object body for an AMQP consumer, up to :data:`MAX_CONVERTED_LARGE`)
    as a regular message converted whole.  A file that cannot be read (a storage fault)
    leaves the message with an empty body and a warning in the log.
    """
    native = message.native
    if not native or NATIVE_KEY not in native:
        return message
    file_id, size = parse_reference(native[NATIVE_KEY])
    try:
        store = _store_of(server)
        path = store.path(file_id)
        size = os.path.getsize(path)
        _, headers = to_core(message)
        kind = headers.type
        if kind == MessageType.TEXT:
            length = _utf8_length(path, size)
            if length is not None:
                return LargeBody(_converted(message, b"\x01\x00\x00\x00\x00"), length, path, True)
            return LargeBody(_converted(message, b""), size, path, False)
        if decode_jms and kind in _DECODED:
            if size <= MAX_CONVERTED_LARGE:
                return _converted(message, store.read_all(file_id, MAX_CONVERTED_LARGE))
            kind = MessageType.BYTES
        return LargeBody(_converted(message, b"", kind), size, path, False)
    except (OSError, ValueError) as exc:
        return _without_body(message, size, exc)


def in_memory(message: Message, server) -> Message:
    """``message`` with its whole body, for a consumer whose protocol takes a body in one piece
    (OpenWire): a large message's file read into memory and converted as the same message
    sent small, as Artemis converts one; a regular message as it is.  A body over
    :data:`MAX_CONVERTED_LARGE`, or a file that cannot be read, leaves the message with an
    empty body and a warning in the log."""
    native = message.native
    if not native or NATIVE_KEY not in native:
        return message
    file_id, size = parse_reference(native[NATIVE_KEY])
    try:
        return _converted(message, _store_of(server).read_all(file_id, MAX_CONVERTED_LARGE))
    except (OSError, ValueError) as exc:
        return _without_body(message, size, exc)


def _store_of(server):
    """The node's large-message store; OSError when it has none (a storage fault to log)."""
    store = getattr(server, "large_messages", None)
    if store is None:
        raise OSError("no large-messages directory")
    return store


def _without_body(message: Message, size: int, exc: Exception) -> Message:
    """``message`` as it is, with a warning: its file could not be read (a storage fault)."""
    log.warning("large message %s (%d bytes) delivered with no body: %s", message.message_id, size, exc)
    return message
