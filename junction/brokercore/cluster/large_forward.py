"""A large CORE message across a cluster link: its body goes inline, and a file again on arrival.

On its node a large message's body is only in its file in the
large-messages directory (:mod:`junction.brokercore.large_messages`); the
message carries a reference naming that file, which means nothing on another
node.  So the bridge (every message that crosses -- ON_DEMAND forwarding,
redistribution, scale-down -- crosses through a bridge) sends the file's bytes
as the MESSAGE frame's body:

* to a peer speaking link version 1.3 or later, with the reference replaced by
  :data:`INLINE_KEY`; the peer writes that body into a file of its own in its
  large-messages directory and gives the message its own reference
  (:func:`store_incoming`), so it is a large message there as it was here, with
  the same file lifecycle (:mod:`junction.brokercore.large_lifecycle`);
* to an older peer (which would not know the marker), converted to a regular
  message (the body decoded as it would be from a small send).

The body is read whole into memory, bounded by the link's frame limit: a
large message whose body and headers do not fit in ``MAX_FORWARDED_BYTES`` is
dead-lettered by the bridge with a log naming the limit, as any message too
large to cross is.  The sending node's file goes when its store-and-forward
reference is acknowledged by the peer (the usual lifecycle: the last
reference of the message on this node is settled).
"""

from __future__ import annotations

import os

from junction.brokercore.core_convert import from_core, to_core
from junction.brokercore.large_messages import NATIVE_KEY, parse_reference, reference

#: Artemis's property holding a large message's body size (core_large.LARGE_SIZE)
LARGE_SIZE = "_AMQ_LARGE_SIZE"

__all__ = ["INLINE_KEY", "INLINE_SINCE", "TooLarge", "inline_body", "store_incoming"]

#: ``Message.native`` key, on the link only: the frame's body is a large message's file content.
INLINE_KEY = "core.large.inline"
#: The first link protocol version whose receiver stores an inline large body as a large message.
INLINE_SINCE = (1, 3)


class TooLarge(Exception):
    """The large body does not fit in one MESSAGE frame."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


def inline_body(server, message, out, *, room: int, peer_version) -> None:
    """Put ``message``'s large body into ``out`` (its copy for the link), at most ``room`` bytes.

    Raises :class:`TooLarge` when the body is over ``room``; OSError when the file cannot
    be read.  ``out`` is left alone for a regular message.
    """
    value = out.native.get(NATIVE_KEY)
    if value is None:
        return
    file_id, _ = parse_reference(value)
    store = server.large_messages
    path = store.path(file_id)
    size = os.path.getsize(path)
    if size > room:
        raise TooLarge(size)
    with open(path, "rb") as f:
        data = f.read(room + 1)
    if len(data) > room:
        raise TooLarge(len(data))
    del out.native[NATIVE_KEY]
    if tuple(peer_version) >= INLINE_SINCE:
        out.native[INLINE_KEY] = b"%d" % len(data)
        out.body = data
        return
    # An older peer: the message as it would be from a small send.
    out.properties.pop(LARGE_SIZE, None)
    _, headers = to_core(message)
    converted = from_core(data, headers, message.address)
    out.body = converted.body
    out.body_type = converted.body_type
    out.native.update(converted.native)


def store_incoming(server, message) -> int | None:
    """A forwarded message with an inline large body: write the body into a file of this
    node's large-messages directory and make ``message`` name it (body emptied); the file's
    id, or None when ``message`` had no inline body.  A durable message's file is fsynced.

    A node with no large-messages directory keeps the message regular (its body converted
    as from a small send)."""
    native = message.native
    if not native or INLINE_KEY not in native:
        return None
    del native[INLINE_KEY]
    body = message.body
    store = getattr(server, "large_messages", None)
    if store is None:
        _, headers = to_core(message)
        converted = from_core(bytes(body), headers, message.address)
        message.body = converted.body
        message.body_type = converted.body_type
        native.update(converted.native)
        return None
    writer = store.begin()
    try:
        writer.append(bytes(body))
        size = writer.finish(sync=bool(message.durable))
    except BaseException:
        writer.abort()
        raise
    native[NATIVE_KEY] = reference(writer.file_id, size)
    message.body = b""
    return writer.file_id
