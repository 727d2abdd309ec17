"""Paging: the address-full policy PAGE, between the post office and the page files.

A full address under ``address-full-policy`` PAGE keeps accepting messages:
the post office hands each one here, it goes to the address's page files
(:class:`junction.brokercore.paging.PageStore`), and as the address's queues
are consumed and it has room again, :class:`PagingManager` moves paged
messages back into memory (and the journal), oldest first.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct

from twisted.internet import defer

from junction.brokercore.paging import PagePosition, PageStore, find_paged_addresses
from junction.model.message import Message, RoutingType, decode_message, encode_message

__all__ = ["PagingManager", "DEPAGE_BATCH_RECORDS", "DEPAGE_BATCH_BYTES"]

log = logging.getLogger("junction.broker")

#: Paged messages moved back into memory per depage pass (records / bytes).
DEPAGE_BATCH_RECORDS = 500
DEPAGE_BATCH_BYTES = 1024 * 1024

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class PagingManager:
    """The page files of one node's addresses, and the depaging that empties them."""

    def __init__(self, server, post_office):
        self.server = server
        self.post_office = post_office
        self.storage = server.storage
        self.config = server.config

    @property
    def directory(self) -> str:
        directory = self.config.paging_directory
        if os.path.isabs(directory):
            return directory
        return os.path.normpath(os.path.join(self.config.base_dir or ".", directory))

    def _open_store(self, address, cursor: PagePosition | None = None) -> PageStore:
        settings = self.server.settings_for(address.name)
        store = PageStore(
            self.directory,
            address.name,
            page_size_bytes=settings.page_size_bytes,
            reactor=self.server.reactor,
            sync=self.storage.persistent and self.config.journal_sync_non_transactional,
        )
        store.load(cursor)
        store.start()
        address.page_store = store
        return store

    def page_message(self, address, message: Message, queues: list) -> defer.Deferred:
        """Append a routed message for ``queues`` to the address's page files.

        Fires once it is on disk (synced for a durable message), which is
        when a producer may be told it is safe.
        """
        store = address.page_store
        if store is None:
            store = self._open_store(address)
            log.info("address %s is full: paging to %s", address.name, store.path)
        payload = b"".join(
            [_U32.pack(len(queues))] + [_U64.pack(q.id) for q in queues] + [encode_message(message)]
        )
        sync = message.durable and self.storage.persistent and self.config.journal_sync_non_transactional
        address.paged_total += 1
        return store.append(payload, sync=sync).addCallback(lambda _: None)

    def schedule_depage(self, address) -> None:
        if address.page_store is None or address.depaging or address.depage_scheduled:
            return
        address.depage_scheduled = True
        self.server.call_soon(lambda: self._depage(address))

    def _depage(self, address) -> None:
        """Move paged messages into memory while the address has room.

        The messages' journal records and the new page cursor are written in
        one journal transaction, so after a crash each paged message is
        either still in the page files (cursor before it) or in the journal
        (cursor past it), never both and never neither.
        """
        address.depage_scheduled = False
        store = address.page_store
        server = self.server
        post_office = self.post_office
        if store is None or address.depaging or server.addresses.get(address.name) is not address:
            return
        if not store.paging or store.failed or post_office.address_full(address, 0) is not None:
            return
        settings = server.settings_for(address.name)
        budget = DEPAGE_BATCH_BYTES
        if settings.max_size_bytes >= 0:
            budget = max(1, min(budget, settings.max_size_bytes - address.size))
        records = store.read(DEPAGE_BATCH_RECORDS, budget)
        if not records:
            return
        tx = self.storage.transaction()
        batch = []
        durable_refs = post_office.durable_refs
        for _position, payload in records:
            count = _U32.unpack_from(payload, 0)[0]
            ids = [_U64.unpack_from(payload, 4 + 8 * i)[0] for i in range(count)]
            message = decode_message(payload[4 + 8 * count :])
            queues = [q for q in (server.queue_by_id(i) for i in ids) if q is not None and not q.deleted]
            if not queues:
                post_office._drop_large(message)
                continue
            durable_ids = []
            if message.durable and self.storage.persistent:
                durable_ids = [q.id for q in queues if q.durable and not q.definition.temporary]
            if durable_ids:
                tx.store_message(message, durable_ids)
                durable_refs[message.message_id] = len(durable_ids)
            batch.append((message, queues, bool(durable_ids)))
        last = records[-1][0]
        address.page_cursor_record = tx.set_page_cursor(address.name, last.to_bytes(), address.page_cursor_record)
        address.depaging = True

        def done(_):
            address.depaging = False
            store.consumed(last)
            for message, queues, stored in batch:
                post_office.add_refs(message, queues, stored)
            if store.paging:
                self.schedule_depage(address)

        def failed(failure):
            address.depaging = False
            for message, _queues, _stored in batch:
                durable_refs.pop(message.message_id, None)
            store.rewind()
            log.error("depaging %s failed: %s", address.name, failure.getErrorMessage())

        tx.commit(True).addCallbacks(done, failed)

    def recover(self, cursors: dict) -> None:
        """Open the page files a start finds, at the cursors the journal kept, and depage."""
        directory = self.directory
        if not self.storage.persistent:
            # Without a journal there is no cursor: old page files mean nothing.
            if os.path.isdir(directory):
                shutil.rmtree(directory, ignore_errors=True)
            return
        server = self.server
        for name in find_paged_addresses(directory):
            record_id, position = cursors.get(name, (0, None))
            cursor = PagePosition.from_bytes(position) if position else None
            address = server.addresses.get(name)
            if address is None:
                address = server.create_address(name, {RoutingType.ANYCAST}, auto_created=True)
            store = self._open_store(address, cursor)
            address.page_cursor_record = record_id
            if store.paging:
                log.info("address %s: %d paged messages waiting", name, store.pending_count)
                self.schedule_depage(address)

    def stop(self) -> defer.Deferred:
        """Stop every address's page store (their pending writes finish first)."""
        stores = [a.page_store.stop() for a in self.server.addresses.values() if a.page_store is not None]
        return defer.DeferredList(stores, consumeErrors=True) if stores else defer.succeed(None)
