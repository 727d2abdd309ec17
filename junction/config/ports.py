"""Moving every port of a node by one offset: ``--port-offset N``.

Artemis's habit for running a second broker beside the first: ``artemis
create --port-offset N`` writes every port N higher, and a colocated backup
shifts the acceptors and connectors it inherits by ``backup-port-offset``.
Junction applies the offset when it starts, to the validated model, so the
files stay as shipped: ``junction up --port-offset 1000`` moves every port
of every node of the appliance, ``junction run --port-offset 1000`` one node's.

What moves: every acceptor, every connector (in an appliance they name the
other nodes, which move with it: the gateway's pool, the cluster
connections' static connectors and their own ``connector-ref``), the
management API, and the broadcast and discovery groups' UDP ports (the
group port, so two appliances on one host never hear each other, and a
broadcast group's ``local-bind-port``).  Port 0 (any free port) and -1 (none)
stay as they are.  A port moved outside 1..65535 is a config error, with the
file and line of the element it came from.
"""

from __future__ import annotations

import dataclasses

from junction.config import model
from junction.config.loader import ConfigError, ConfigErrors

__all__ = ["MAX_PORT", "offset_ports"]

#: the highest TCP/UDP port
MAX_PORT = 65535


def offset_ports(config: model.BrokerConfig, offset: int) -> model.BrokerConfig:
    """*config* with every port it binds or connects to moved by *offset* (see the module docstring).

    Raises :class:`~junction.config.loader.ConfigErrors` naming every port the
    offset would move out of 1..65535 (nothing is returned half-moved).
    """
    if not offset:
        return config
    errors: list[ConfigError] = []

    def moved(port: int, what: str, source) -> int:
        if port is None or port <= 0:
            return port
        new = port + offset
        if not 1 <= new <= MAX_PORT:
            file, line = source if source and source[0] else (config.config_path, 0)
            errors.append(ConfigError(file, line, f"{what}: port {port} moved by --port-offset {offset} "
                                                  f"is {new}, outside 1..{MAX_PORT}"))
            return port
        return new

    def shift(items, kind: str, *fields: str):
        out = []
        for item in items:
            changes = {f: moved(getattr(item, f), f"{kind} {item.name!r}", item.source) for f in fields}
            out.append(dataclasses.replace(item, **changes))
        return tuple(out)

    changed = dataclasses.replace(
        config,
        acceptors=shift(config.acceptors, "acceptor", "port"),
        connectors=shift(config.connectors, "connector", "port"),
        broadcast_groups=shift(config.broadcast_groups, "broadcast-group", "group_port", "local_bind_port"),
        discovery_groups=shift(config.discovery_groups, "discovery-group", "group_port"),
        management_port=moved(config.management_port, "the management API", None),
    )
    if errors:
        raise ConfigErrors(errors)
    return changed
