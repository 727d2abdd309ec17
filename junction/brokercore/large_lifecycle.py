"""When a large message's file in the large-messages directory goes.

:class:`LargeRefs` counts, per file, the queue references of the messages
that name it (durable or not: a non-durable large message has a file too).
When the last one is settled the file is deleted: at once for a reference the
journal does not hold; once the acknowledgement is written for one it does
(a crash before that brings the message back, with its body); after the
commit for one acknowledged inside a transaction (a rollback keeps it).  A
message routed nowhere and dropped deletes its file at once.

A copy the broker makes of a large message (to a dead-letter or expiry
address) gets a file of its own (:func:`own_file`: a hard link, so no bytes
are copied), so each file has one message and its count is exact, whether
the copy is queued, paged or journalled.

On start, :func:`remove_orphans` deletes the files no message needs: a
file is kept if a message the journal recovered names it, a prepared XA
branch's send names it, or a message in an address's page files names it
(read once through, then the page cursor rewound: a start costs a read of
the paged messages when there are any).
"""

from __future__ import annotations

import logging
import os
import shutil
import struct

from junction.brokercore.large_messages import NATIVE_KEY, parse_reference, reference
from junction.model.message import decode_message

__all__ = ["LargeRefs", "own_file", "remove_orphans"]

log = logging.getLogger("junction.large")

_U32 = struct.Struct(">I")
#: page records read at a time by the start's scan (and their bytes beyond the first)
_SCAN_RECORDS = 1024
_SCAN_BYTES = 4 * 1024 * 1024


def _file_id(message) -> int | None:
    native = message.native
    value = native.get(NATIVE_KEY) if native else None
    return None if value is None else parse_reference(value)[0]


class LargeRefs:
    """Live queue references per large-message file (see the module doc)."""

    __slots__ = ("server", "counts")

    def __init__(self, server):
        self.server = server
        #: file id -> references on queues
        self.counts: dict[int, int] = {}

    def added(self, message, count: int = 1) -> None:
        """``count`` references of ``message`` (a large one) went onto queues."""
        file_id = _file_id(message)
        if file_id is not None:
            self.counts[file_id] = self.counts.get(file_id, 0) + count

    def settled(self, message, tx=None, stored=None) -> None:
        """One reference of ``message`` went (``tx``: in that storage transaction; ``stored``:
        the Deferred of its acknowledgement record); the file goes with the last."""
        file_id = _file_id(message)
        if file_id is None:
            return
        left = self.counts.get(file_id, 0) - 1
        if left > 0:
            self.counts[file_id] = left
            return
        self.counts.pop(file_id, None)
        if tx is not None:
            tx.after_commit.append(lambda: self._delete(file_id))
        elif stored is not None:
            stored.addCallback(self._delete_then_pass, file_id)
        else:
            self._delete(file_id)

    def dropped(self, message) -> None:
        """``message`` was routed nowhere and dropped: its file goes unless a queue holds it."""
        file_id = _file_id(message)
        if file_id is not None and not self.counts.get(file_id):
            self._delete(file_id)

    def _delete_then_pass(self, result, file_id: int):
        self._delete(file_id)
        return result

    def _delete(self, file_id: int) -> None:
        store = getattr(self.server, "large_messages", None)
        if store is not None and not self.counts.get(file_id):
            store.delete(file_id)


def own_file(server, copy) -> None:
    """Give ``copy`` (the broker's copy of a large message) a file of its own (a hard link;
    a copy of the bytes where links are not allowed).  A regular message is left as it is."""
    file_id = _file_id(copy)
    store = getattr(server, "large_messages", None)
    if file_id is None or store is None:
        return
    new_id = store.new_id()
    source, target = store.path(file_id), store.path(new_id)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    _, size = parse_reference(copy.native[NATIVE_KEY])
    copy.native[NATIVE_KEY] = reference(new_id, size)


def _paged_file_ids(server) -> set:
    """The files the messages in every address's page files name (read through, then rewound)."""
    found = set()
    for address in list(server.addresses.values()):
        store = address.page_store
        if store is None or not store.paging:
            continue
        while records := store.read(_SCAN_RECORDS, _SCAN_BYTES):
            for _position, payload in records:
                count = _U32.unpack_from(payload, 0)[0]
                file_id = _file_id(decode_message(payload[4 + 8 * count :]))
                if file_id is not None:
                    found.add(file_id)
        store.rewind()
    return found


def remove_orphans(server, recovered) -> int:
    """On start: delete the files no recovered, prepared or paged message names; how many went."""
    store = getattr(server, "large_messages", None)
    if store is None:
        return 0
    keep = {file_id for item in recovered.messages if (file_id := _file_id(item.message)) is not None}
    from junction.brokercore.xa import ResourceManager

    for branch in ResourceManager.of(server).branches.values():
        for message, _routing_type in branch.tx.sends:
            file_id = _file_id(message)
            if file_id is not None:
                keep.add(file_id)
    keep |= _paged_file_ids(server)
    gone = store.remove_orphans(keep)
    if gone:
        log.info("removed %d large-message file(s) no message refers to", gone)
    return gone
