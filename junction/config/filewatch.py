"""Has a file changed since it was read?  Cheap answers for configuration reloads.

A node re-reads its ``broker.xml`` and its users and roles files when they
change (Artemis's ``configuration-file-refresh-period`` and the ``reload``
option of its properties login module).  Reading and parsing on every check
would cost too much -- the users file is checked on every login -- so
:class:`FileWatch` keeps a *stamp* of each file as it was read (modification
time in nanoseconds, size, inode and device) and compares it with a fresh
``stat``.  A different stamp means "read it again"; the same stamp means the
file is unchanged, with one exception:

* **A racy stamp.**  File systems update the modification time from a coarse
  clock (a few milliseconds on Linux), so two writes of the same size in place
  within one tick leave the same stamp.  A file whose modification time was no
  older than :data:`RACY_WINDOW_NS` when it was read may still change without
  its stamp changing, so it counts as changed at every check until its stamp is
  older than that (git's "racily clean" index entries).  Writers that replace a
  file by renaming a new one over it (``junction user`` does) always change the
  inode, so for them this never matters.

The stamp is taken *before* the file is read (:meth:`FileWatch.stamps`), so a
write that lands between the stamp and the read is seen again at the next
check, never missed.  No Twisted and no clock: callers decide when to check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

__all__ = ["RACY_WINDOW_NS", "FileStamp", "FileWatch", "stamp"]

#: How recent a file's modification time may be, when it is read, for a later
#: same-stamp write to go unseen: a generous bound on a file system's timestamp
#: granularity (Artemis adds a second to its modification times for the same reason).
RACY_WINDOW_NS = 1_000_000_000


class FileStamp(NamedTuple):
    """What ``stat`` says of a file that matters for "has it changed"."""

    mtime_ns: int
    size: int
    inode: int
    device: int


def stamp(path: str) -> FileStamp | None:
    """The file's stamp, or None when it does not exist (or cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


class FileWatch:
    """The stamps of a few files as last read, to tell whether any changed since.

    Use: ``taken = watch.stamps()``, read the files, then ``watch.read(taken)``;
    later, ``watch.changed()`` is True when any file's stamp differs (a file
    appearing or disappearing included) or a stamp was racy.  Before the
    first :meth:`read` every check says "changed".  ``wall_ns`` is the wall
    clock that file modification times are compared with (injected for tests).
    """

    def __init__(self, paths: Iterable[str], *, wall_ns: Callable[[], int] = time.time_ns):
        self.paths = tuple(paths)
        self._wall_ns = wall_ns
        self._read: tuple[FileStamp | None, ...] | None = None
        self._racy = False

    def stamps(self) -> tuple[FileStamp | None, ...]:
        """Every file's stamp now (None for a missing file), in ``paths`` order."""
        return tuple(stamp(path) for path in self.paths)

    def read(self, taken: tuple[FileStamp | None, ...]) -> None:
        """The files were read just after ``taken`` was: remember it as the current state."""
        self._read = taken
        recent = self._wall_ns() - RACY_WINDOW_NS
        self._racy = any(s is not None and s.mtime_ns >= recent for s in taken)

    def changed(self) -> bool:
        """Whether the files may differ from what was last read (one ``stat`` per file)."""
        if self._read is None or self._racy:
            return True
        return self.stamps() != self._read
