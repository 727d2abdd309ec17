"""What a node says at start (and a reload says again) about settings it reads but does not act on."""

from __future__ import annotations

from junction.config.unimplemented import warnings as config_warnings
from junction.config.urls import PROTOCOLS
from junction.gateway.listener import ROUTED_PROTOCOLS

__all__ = ["unimplemented_settings"]


def unimplemented_settings(config) -> list[str]:
    """Settings the config gives that this build reads but does not act on.

    The :class:`~junction.config.specs.Warned` rows of
    :data:`junction.config.unimplemented.UNIMPLEMENTED`, then the protocols a
    connection router does not route yet.
    """
    problems = config_warnings(config)
    routed = ",".join(sorted(ROUTED_PROTOCOLS))
    # the client protocols protocols= accepts that the protocol table gives no gateway side
    not_routed = ",".join(sorted(set(PROTOCOLS) - {"CLUSTER"} - ROUTED_PROTOCOLS))
    if not not_routed:  # every client protocol is routed: nothing to say
        return problems
    for router in config.connection_routers:
        file, line = router.source
        problems.append(
            f"{file}:{line}: connection router {router.name!r}: routes {routed} connections; "
            f"{not_routed} connections on its acceptors are not routed by this build yet "
            "and are closed"
        )
    return problems
