"""The journal's file layer: the real one over ``os`` and a fault-injecting model.

The journal touches the file system only through this small interface, so
tests can swap in :class:`FaultyFiles`, an in-memory file system that models
what survives a power cut and injects the failures real disks produce.

Interface (``OSFiles`` and ``FaultyFiles`` both provide it; names are plain
file names inside the journal directory)::

    files.list() -> list[str]                  sorted names in the directory
    files.open(name, create=False) -> handle   read-write; create=True makes a
                                               new file and fails if it exists
    files.read(name, offset=0, size=None) -> bytes
    files.size(name) -> int
    files.truncate(name, size)
    files.remove(name)
    files.rename(old, new)                     atomic replace, as os.replace
    files.sync_directory()                     make creates/renames/removes durable

    handle.write(data, offset) -> int          may write fewer bytes (short write)
    handle.fsync()                             data durable (fdatasync)
    handle.truncate(size)
    handle.size() -> int
    handle.close()

Durability model (POSIX, and what :class:`FaultyFiles` enforces): file data is
durable after ``handle.fsync()``; a create, rename or remove is durable only
after ``sync_directory()``.  Everything else may be lost, or partly kept, by
a crash.
"""

from __future__ import annotations

import errno
import os
import threading

__all__ = ["OSFiles", "FaultyFiles", "SimulatedCrash", "truncate_durably"]

_fdatasync = getattr(os, "fdatasync", os.fsync)


def truncate_durably(files, name: str, size: int) -> None:
    """Cut file ``name`` of file layer ``files`` to ``size`` bytes and sync it
    (recovery dropping a torn tail)."""
    handle = files.open(name)
    try:
        handle.truncate(size)
        handle.fsync()
    finally:
        handle.close()


class _OSHandle:
    __slots__ = ("fd", "name")

    def __init__(self, fd: int, name: str):
        self.fd = fd
        self.name = name

    def write(self, data, offset: int) -> int:
        return os.pwrite(self.fd, data, offset)

    def fsync(self) -> None:
        _fdatasync(self.fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


class OSFiles:
    """The real file layer: one directory, ``os`` calls, ``fdatasync``."""

    def __init__(self, directory: str):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)

    def _path(self, name: str) -> str:
        if os.sep in name or name in ("", ".", ".."):
            raise ValueError(f"bad journal file name {name!r}")
        return os.path.join(self.directory, name)

    def list(self) -> list[str]:
        return sorted(os.listdir(self.directory))

    def open(self, name: str, create: bool = False) -> _OSHandle:
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        return _OSHandle(os.open(self._path(name), flags, 0o644), name)

    def read(self, name: str, offset: int = 0, size: int | None = None) -> bytes:
        with open(self._path(name), "rb") as f:
            if offset:
                f.seek(offset)
            return f.read() if size is None else f.read(size)

    def size(self, name: str) -> int:
        return os.stat(self._path(name)).st_size

    def truncate(self, name: str, size: int) -> None:
        os.truncate(self._path(name), size)

    def remove(self, name: str) -> None:
        os.remove(self._path(name))

    def rename(self, old: str, new: str) -> None:
        os.replace(self._path(old), self._path(new))

    def sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class SimulatedCrash(Exception):
    """The modelled machine lost power here; call :meth:`FaultyFiles.crash`."""


class _Inode:
    __slots__ = ("data", "synced")

    def __init__(self, data: bytes = b""):
        self.data = bytearray(data)
        self.synced = bytes(data)


class _FaultyHandle:
    __slots__ = ("fs", "inode", "name", "closed")

    def __init__(self, fs: "FaultyFiles", inode: _Inode, name: str):
        self.fs = fs
        self.inode = inode
        self.name = name
        self.closed = False

    def write(self, data, offset: int) -> int:
        return self.fs._write(self, bytes(data), offset)

    def fsync(self) -> None:
        self.fs._fsync(self)

    def truncate(self, size: int) -> None:
        with self.fs._lock:
            self.fs._tick("truncate", self.name)
            _resize(self.inode, size)

    def size(self) -> int:
        with self.fs._lock:
            return len(self.inode.data)

    def close(self) -> None:
        self.closed = True


def _resize(inode: _Inode, size: int) -> None:
    if size < len(inode.data):
        del inode.data[size:]
    else:
        inode.data.extend(bytes(size - len(inode.data)))


def _oserror(code: int, name: str) -> OSError:
    return OSError(code, os.strerror(code), name)


class FaultyFiles:
    """An in-memory file system with a power-loss model and fault injection.

    It keeps, per file, the bytes a reader sees now and the bytes that were
    durable at its last ``fsync``; and the directory as seen now and as of the
    last ``sync_directory``.  :meth:`crash` returns the file system a reboot
    would find.  It is thread-safe, so the journal's writer thread can use it.

    Faults (set the attributes; all default off):

    ``crash_at_op``
        The n-th operation (1-based, counted in :attr:`ops` over every call
        that changes state: open/create, write, fsync, truncate, remove,
        rename, sync_directory) raises :class:`SimulatedCrash` instead of
        running, and so does every operation after it.  Stepping n over a
        workload crashes it at every point.
    ``torn_write``
        ``(n, keep)``: the n-th write puts only its first ``keep`` bytes into
        the file, then raises :class:`SimulatedCrash` (a batch torn by a
        power cut).  Combine with ``crash(keep_unsynced=True)``.
    ``max_write``
        Every write stores at most this many bytes and returns the short
        count, as ``write(2)`` may.
    ``space``
        Bytes the device may still take; a write past it stores what fits
        and raises ``OSError(ENOSPC)``.
    ``fail_fsync``
        An errno (e.g. ``errno.EIO``): every ``fsync`` from the
        ``fail_fsync_after``-th on (0 = the first) raises it and makes
        nothing durable, as a failing disk does.
    ``fail_open``
        An errno: creating a file raises it.

    ``log`` records every operation as a string, for assertions and for
    debugging a failing crash point.
    """

    def __init__(self):
        self._lock = threading.RLock()
        self._names: dict[str, _Inode] = {}
        self._durable_names: dict[str, _Inode] = {}
        self.ops = 0
        self.crashed = False
        self.crash_at_op: int | None = None
        self.torn_write: tuple[int, int] | None = None
        self.max_write: int | None = None
        self.space: int | None = None
        self.fail_fsync: int | None = None
        self.fail_fsync_after = 0
        self.fail_open: int | None = None
        self.writes = 0
        self.fsyncs = 0
        self.dir_syncs = 0
        self.log: list[str] = []

    # -- fault plumbing ---------------------------------------------------
    def _tick(self, op: str, name: str = "") -> None:
        if self.crashed:
            raise SimulatedCrash(f"{op} {name} after the simulated crash")
        self.ops += 1
        self.log.append(f"{self.ops} {op} {name}".rstrip())
        if self.crash_at_op is not None and self.ops >= self.crash_at_op:
            self.crashed = True
            raise SimulatedCrash(f"simulated power loss at operation {self.ops} ({op} {name})")

    # -- interface --------------------------------------------------------
    def list(self) -> list[str]:
        with self._lock:
            return sorted(self._names)

    def open(self, name: str, create: bool = False) -> _FaultyHandle:
        with self._lock:
            if create:
                self._tick("create", name)
                if self.fail_open is not None:
                    raise _oserror(self.fail_open, name)
                if name in self._names:
                    raise _oserror(errno.EEXIST, name)
                self._names[name] = _Inode()
            elif name not in self._names:
                raise _oserror(errno.ENOENT, name)
            return _FaultyHandle(self, self._names[name], name)

    def read(self, name: str, offset: int = 0, size: int | None = None) -> bytes:
        with self._lock:
            inode = self._inode(name)
            end = len(inode.data) if size is None else offset + size
            return bytes(inode.data[offset:end])

    def size(self, name: str) -> int:
        with self._lock:
            return len(self._inode(name).data)

    def truncate(self, name: str, size: int) -> None:
        with self._lock:
            self._tick("truncate", name)
            _resize(self._inode(name), size)

    def remove(self, name: str) -> None:
        with self._lock:
            self._tick("remove", name)
            self._inode(name)
            del self._names[name]

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            self._tick("rename", f"{old} -> {new}")
            self._names[new] = self._inode(old)
            del self._names[old]

    def sync_directory(self) -> None:
        with self._lock:
            self._tick("sync_directory")
            self.dir_syncs += 1
            self._durable_names = dict(self._names)

    def _inode(self, name: str) -> _Inode:
        try:
            return self._names[name]
        except KeyError:
            raise _oserror(errno.ENOENT, name) from None

    def _write(self, handle: _FaultyHandle, data: bytes, offset: int) -> int:
        with self._lock:
            self._tick("write", f"{handle.name}@{offset}+{len(data)}")
            self.writes += 1
            inode = handle.inode
            n = len(data)
            if self.max_write is not None:
                n = min(n, self.max_write)
            torn = self.torn_write is not None and self.writes == self.torn_write[0]
            if torn:
                n = min(n, self.torn_write[1])
            enospc = False
            if self.space is not None:
                grow = max(0, offset + n - len(inode.data))
                if grow > self.space:
                    n = max(0, n - (grow - self.space))
                    enospc = True
                self.space -= max(0, offset + n - len(inode.data))
            if offset > len(inode.data):
                _resize(inode, offset)
            inode.data[offset : offset + n] = data[:n]
            if torn:
                self.crashed = True
                raise SimulatedCrash(f"torn write: {n} of {len(data)} bytes reached {handle.name}")
            if enospc:
                raise _oserror(errno.ENOSPC, handle.name)
            return n

    def _fsync(self, handle: _FaultyHandle) -> None:
        with self._lock:
            self._tick("fsync", handle.name)
            if self.fail_fsync is not None and self.fsyncs >= self.fail_fsync_after:
                self.fsyncs += 1
                raise _oserror(self.fail_fsync, handle.name)
            self.fsyncs += 1
            handle.inode.synced = bytes(handle.inode.data)

    # -- power loss -------------------------------------------------------
    def crash(self, keep_unsynced: bool = False) -> "FaultyFiles":
        """The file system a reboot finds after a power cut now.

        By default only durable state survives: the directory as of the last
        ``sync_directory`` and each file's bytes as of its last ``fsync``.
        With ``keep_unsynced=True`` everything written survives (the OS had
        flushed it; with ``torn_write`` this leaves exactly the torn prefix).
        The result has no faults set and may be crashed again.
        """
        with self._lock:
            fresh = FaultyFiles()
            names = self._names if keep_unsynced else self._durable_names
            copies: dict[int, _Inode] = {}
            for name, inode in names.items():
                if id(inode) not in copies:
                    copies[id(inode)] = _Inode(bytes(inode.data) if keep_unsynced else inode.synced)
                fresh._names[name] = copies[id(inode)]
            fresh._durable_names = dict(fresh._names)
            return fresh

    def snapshot(self) -> "FaultyFiles":
        """A copy of the current state (everything treated as durable)."""
        return self.crash(keep_unsynced=True)

    def set_bytes(self, name: str, data: bytes) -> None:
        """Test helper: replace a file's content, durably (e.g. to flip bits)."""
        with self._lock:
            inode = self._names.setdefault(name, _Inode())
            inode.data = bytearray(data)
            inode.synced = bytes(data)
            self._durable_names = dict(self._names)
