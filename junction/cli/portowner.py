"""Which process listens on a TCP port of this host: for "8161 in use, by pid 4242 (java)".

A node that cannot bind a port, or a ``junction status`` that reaches a port
some other program answers on, is far easier to sort out when the message
names that program.  Linux tells through ``/proc``: ``/proc/net/tcp`` and
``tcp6`` list the listening sockets with their inodes, and
``/proc/<pid>/fd`` links to ``socket:[<inode>]``.  Best effort: another
user's processes cannot be looked into without privileges, and on other
systems the answer is simply None.
"""

from __future__ import annotations

import os

__all__ = ["LISTEN_STATE", "listener", "describe_listener"]

#: the state column of a listening socket in /proc/net/tcp
LISTEN_STATE = "0A"


def _listening_inodes(port: int, proc: str) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN_STATE:
                continue
            try:
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if local_port == port and fields[9] != "0":
                inodes.add(fields[9])
    return inodes


def listener(port: int, *, proc: str = "/proc") -> tuple[int, str] | None:
    """``(pid, command name)`` of a process listening on TCP *port* here, or None if it cannot be told."""
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    links = {f"socket:[{inode}]" for inode in inodes}
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:  # gone, or not ours to look into
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) not in links:
                    continue
            except OSError:
                continue
            try:
                with open(os.path.join(proc, pid, "comm"), encoding="utf-8", errors="replace") as f:
                    name = f.read().strip()
            except OSError:
                name = "?"
            return int(pid), name
    return None


def describe_listener(port: int, *, proc: str = "/proc") -> str | None:
    """``pid 4242 (java)`` for the process listening on *port*, or None."""
    found = listener(port, proc=proc)
    return None if found is None else f"pid {found[0]} ({found[1]})"
