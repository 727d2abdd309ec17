"""The node's data directory: locked for this process, and the node's persisted id.

Started first (in the privileged phase, before anything is opened) and
stopped last: the lock is released only once everything else has stopped,
so a second process can never open the journal while this one still writes.
"""

from __future__ import annotations

import fcntl
import os
import uuid

from junction.node.service import NodeService

__all__ = ["LOCK_FILE", "NODE_ID_FILE", "DataDirectoryLocked", "DataDirectoryService"]

NODE_ID_FILE = "node.id"
LOCK_FILE = "junction.lock"


class DataDirectoryLocked(RuntimeError):
    """Another process already uses this node's journal directory."""


class DataDirectoryService(NodeService):
    """Locks the journal directory (``junction.lock``) and reads or makes ``node.id``."""

    name = "data"

    def __init__(self):
        self._lock_fd = None

    def privilegedStartService(self):
        super().privilegedStartService()
        node = self.node
        journal_dir = node.data_dirs["journal"]
        os.makedirs(journal_dir, exist_ok=True)
        self.lock(journal_dir)
        node.node_id = self.node_id(journal_dir)

    def stopService(self):
        super().stopService()
        self.unlock()

    def lock(self, directory: str) -> None:
        path = os.path.join(directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise DataDirectoryLocked(
                f"the journal directory {directory} is in use by another Junction process"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    @staticmethod
    def node_id(directory: str) -> str:
        path = os.path.join(directory, NODE_ID_FILE)
        try:
            with open(path) as fh:
                value = fh.read().strip()
            if value:
                return value
        except FileNotFoundError:
            pass
        value = str(uuid.uuid4())
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(value + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return value
