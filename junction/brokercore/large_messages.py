"""The large-messages directory: one file per large message, never whole in memory.

A CORE client sends a body above its ``minLargeMessageSize`` in chunks
(SESS_SEND_CONTINUATION); each chunk is appended to the message's file here
as it arrives, and the file is fsynced before the message is routed, so a
durable send confirmed to the client survives kill -9.  The broker's message
then carries only a reference (:data:`NATIVE_KEY` in ``Message.native``: the
file's name and the body's size), which the journal keeps with the message.

A file is named by a number unique in this directory (:meth:`new_id`).  When
a file goes -- with the last reference to its message, or on start when no
message needs it -- is :mod:`junction.brokercore.large_lifecycle`'s business.
"""

from __future__ import annotations

import os

from twisted.internet import defer, threads

__all__ = ["LargeMessageStore", "LargeWriter", "NATIVE_KEY", "SUFFIX", "reference", "parse_reference"]

#: ``Message.native`` key of a large message's reference: ``b"<file id>:<body size>"``.
NATIVE_KEY = "core.large"
#: The files' suffix (Artemis's ``.msg``).
SUFFIX = ".msg"


def reference(file_id: int, size: int) -> bytes:
    """The ``Message.native`` value naming file ``file_id`` of ``size`` bytes."""
    return b"%d:%d" % (file_id, size)


def parse_reference(value: bytes) -> tuple[int, int]:
    """``(file id, size)`` from a :func:`reference` value."""
    file_id, size = bytes(value).split(b":")
    return int(file_id), int(size)


class LargeWriter:
    """One large message's file being written, chunk by chunk."""

    __slots__ = ("store", "file_id", "path", "_file", "size")

    def __init__(self, store: "LargeMessageStore", file_id: int):
        self.store = store
        self.file_id = file_id
        self.path = store.path(file_id)
        self._file = open(self.path, "xb")  # noqa: SIM115 - closed by finish/abort
        self.size = 0

    def append(self, chunk: bytes) -> None:
        self._file.write(chunk)
        self.size += len(chunk)

    def finish(self, *, sync: bool) -> int:
        """Close the file (fsynced when ``sync``); the body's size."""
        f = self._file
        f.flush()
        if sync:
            os.fsync(f.fileno())
        f.close()
        return self.size

    def finish_synced(self) -> defer.Deferred:
        """Close the file once it is fsynced; a Deferred firing with the body's size.

        The fsync runs on the reactor's thread pool when the store has a reactor (a
        large file's fsync can take as long as writing it: the event loop goes on
        meanwhile), inline otherwise.  On failure the file is deleted and the
        Deferred fails with the OSError.
        """
        f = self._file
        f.flush()

        def sync_and_close() -> int:
            try:
                os.fsync(f.fileno())
            finally:
                f.close()
            return self.size

        d = self.store.in_thread(sync_and_close)
        d.addErrback(self._failed)
        return d

    def _failed(self, failure):
        self.store.delete(self.file_id)
        return failure

    def abort(self) -> None:
        """Drop a half-written message (its sender went away)."""
        if not self._file.closed:
            self._file.close()
        self.store.delete(self.file_id)


class LargeMessageStore:
    """The large-messages directory (``large-messages-directory``, Artemis's default ``data/largemessages``)."""

    def __init__(self, directory: str, *, reactor=None):
        self.directory = directory
        #: whose thread pool fsyncs a durable message's file (None: fsync inline)
        self.reactor = reactor
        os.makedirs(directory, exist_ok=True)
        self._next = 1 + max(self._ids(), default=0)

    def _ids(self):
        for name in os.listdir(self.directory):
            stem, dot, ext = name.partition(".")
            if dot and "." + ext == SUFFIX and stem.isdigit():
                yield int(stem)

    def in_thread(self, fn) -> defer.Deferred:
        """``fn()`` on the reactor's thread pool (inline without a reactor); its result's Deferred."""
        reactor = self.reactor
        if reactor is None:
            return defer.maybeDeferred(fn)
        return threads.deferToThreadPool(reactor, reactor.getThreadPool(), fn)

    def path(self, file_id: int) -> str:
        return os.path.join(self.directory, f"{file_id}{SUFFIX}")

    def new_id(self) -> int:
        file_id = self._next
        self._next += 1
        return file_id

    def begin(self) -> LargeWriter:
        """A new file for a large message about to arrive."""
        return LargeWriter(self, self.new_id())

    def read_chunks(self, file_id: int, chunk_size: int):
        """The body of ``file_id`` in chunks of at most ``chunk_size`` bytes (an open file per call)."""
        with open(self.path(file_id), "rb") as f:
            while True:
                chunk = f.read(chunk_size)
                if not chunk:
                    return
                yield chunk

    def read_all(self, file_id: int, limit: int) -> bytes:
        """The whole body, for a client that cannot take continuations; ValueError above ``limit``."""
        path = self.path(file_id)
        if os.path.getsize(path) > limit:
            raise ValueError(f"a large message over {limit} bytes cannot be converted to a regular message")
        with open(path, "rb") as f:
            return f.read()

    def delete(self, file_id: int) -> None:
        try:
            os.unlink(self.path(file_id))
        except FileNotFoundError:
            pass

    def remove_orphans(self, keep) -> int:
        """Delete the files no recovered message names (``keep``: their ids); how many went."""
        keep = set(keep)
        gone = 0
        for file_id in list(self._ids()):
            if file_id not in keep:
                self.delete(file_id)
                gone += 1
        return gone
