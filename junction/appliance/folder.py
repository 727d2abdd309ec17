"""The appliance folder: a gateway and its broker cores, read and checked together.

Every ``*.xml`` in the appliance folder (``etc/appliance`` by default) is a
node's broker.xml.  :func:`load_appliance` reads them all before anything
starts and reports every problem at once (each file's own errors with file
and line, and clashes between files: two nodes with one name, one port or
one data folder).  A node with ``<connection-routers>`` is a gateway, the
others are broker cores.  :func:`child_specs` makes each a ``junction run``
child process for :class:`~junction.appliance.supervisor.Supervisor`;
:func:`lock_appliance` keeps a second ``junction up`` off the folder.
``port_offset`` moves every port of every node (``junction up
--port-offset``, :mod:`junction.config.ports`).  What ``junction up`` shows
while it runs is :mod:`junction.cli.board`.

Child logs are kept in ``<folder>/data/logs/<node>.log``.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass

from junction.appliance.supervisor import ChildSpec

__all__ = [
    "ApplianceNode",
    "ApplianceErrors",
    "ApplianceRunning",
    "lock_appliance",
    "load_appliance",
    "child_specs",
]


@dataclass(frozen=True)
class ApplianceNode:
    """One node of the appliance: its config file and what the table shows of it."""

    name: str
    role: str  # "gateway" or "core"
    config_path: str
    config: object
    management_url: str | None
    #: "name host:port" of each acceptor, for the table
    listens: tuple[str, ...]


class ApplianceErrors(Exception):
    """Everything wrong with an appliance folder, one problem per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class ApplianceRunning(RuntimeError):
    """Another ``junction up`` runs this appliance folder."""


def lock_appliance(folder: str) -> int:
    """Hold ``<folder>/data/appliance.lock`` for this process; :class:`ApplianceRunning` if taken.

    Without it a second ``junction up`` on the same folder would start nodes
    that cannot lock their journals or bind their ports and restart them
    forever.  The lock is an ``flock`` (released when the process ends, even
    killed); the file holds the owner's pid for the message.  Returns the
    descriptor, to be kept open.
    """
    import fcntl

    data = os.path.join(folder, "data")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "appliance.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise ApplianceRunning(f"the appliance in {folder} is already running (junction up, pid {owner})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def load_appliance(folder: str, *, port_offset: int = 0) -> list[ApplianceNode]:
    """Read and check every node config in *folder*; raise :class:`ApplianceErrors` listing all problems.

    ``port_offset`` moves every port of every node (:func:`junction.config.ports.offset_ports`)
    before the nodes are checked against each other.
    """
    from junction.config.loader import ConfigErrors, load_config, load_user_store
    from junction.config.ports import offset_ports

    problems: list[str] = []
    paths = sorted(glob.glob(os.path.join(folder, "*.xml")))
    if not paths:
        raise ApplianceErrors([f"{folder}: no node configs (*.xml) in this folder"])
    nodes: list[ApplianceNode] = []
    for path in paths:
        try:
            config = offset_ports(load_config(path), port_offset)
        except ConfigErrors as exc:
            problems.extend(str(exc).splitlines())
            continue
        if config.security_enabled or os.path.exists(config.users_file):
            try:
                load_user_store(config)
            except ConfigErrors as exc:
                problems.extend(str(exc).splitlines())
        management = None
        if config.management_port is not None:
            management = f"http://{_url_host(config.management_host)}:{config.management_port}"
        listens = tuple(f"{a.name} {a.host}:{a.port}" for a in config.acceptors)
        role = "gateway" if config.connection_routers else "core"
        nodes.append(ApplianceNode(config.name, role, path, config, management, listens))
    problems.extend(_clashes(nodes))
    if not any(n.role == "gateway" for n in nodes) and not problems:
        problems.append(f"{folder}: no gateway (a node with <connection-routers>) among {len(nodes)} nodes")
    if problems:
        raise ApplianceErrors(problems)
    return nodes


def _url_host(host: str | None) -> str:
    if not host or host in ("0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _clashes(nodes: list[ApplianceNode]) -> list[str]:
    """Two nodes of one appliance may not share a name, a port or a data folder."""
    problems = []
    seen: dict = {}

    def claim(kind: str, value, node: ApplianceNode) -> None:
        other = seen.setdefault((kind, value), node)
        if other is not node:
            problems.append(f"{node.config_path}: {kind} {value} is also used by {other.config_path} ({other.name})")

    for node in nodes:
        c = node.config
        claim("node name", c.name, node)
        for acceptor in c.acceptors:
            if acceptor.port:
                claim("port", acceptor.port, node)
        if c.management_port:
            claim("port", c.management_port, node)
        journal = c.journal_directory
        if not os.path.isabs(journal):
            journal = os.path.normpath(os.path.join(c.base_dir or ".", journal))
        claim("journal directory", journal, node)
    return problems


def child_specs(
    nodes: list[ApplianceNode], folder: str, *, python: str | None = None, log_level: str = "info", port_offset: int = 0
) -> list[ChildSpec]:
    """One ``junction run --supervised`` child per node, logging to ``<folder>/data/logs``.

    Each child is given ``--port-offset`` too: it reads its own file again.
    """
    python = python or sys.executable
    logs = os.path.join(folder, "data", "logs")
    moved = ("--port-offset", str(port_offset)) if port_offset else ()
    return [
        ChildSpec(
            name=node.name,
            role=node.role,
            argv=(python, "-m", "junction", "run", "--config", os.path.abspath(node.config_path),
                  "--log-level", log_level, *moved, "--supervised", str(os.getpid())),
            log_path=os.path.join(logs, f"{node.name}.log"),
        )
        for node in nodes
    ]
