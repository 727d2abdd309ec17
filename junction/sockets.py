"""Socket options from Artemis URL parameters, shared by acceptors and connectors.

``tcpNoDelay`` (default true, as in Artemis), ``tcpSendBufferSize`` and
``tcpReceiveBufferSize`` apply the same way to a connection a broker core
accepts and to one the gateway opens toward a target, so both use this.
"""

from __future__ import annotations

import logging
import socket

__all__ = ["apply_socket_options"]

log = logging.getLogger("junction.sockets")


def apply_socket_options(transport, params) -> None:
    """Apply URL ``params``' socket options to ``transport``'s socket.

    A transport without a socket (a test transport, TLS over a wrapper) is
    left alone; a value the kernel refuses is logged, not raised.
    """
    sock = getattr(transport, "socket", None)
    if sock is None:
        return
    params = params or {}
    try:
        if str(params.get("tcpNoDelay", "true")).lower() == "true":
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for key, option in (("tcpSendBufferSize", socket.SO_SNDBUF), ("tcpReceiveBufferSize", socket.SO_RCVBUF)):
            if key in params and int(params[key]) > 0:
                sock.setsockopt(socket.SOL_SOCKET, option, int(params[key]))
    except (OSError, ValueError) as exc:
        log.warning("could not apply socket options %s: %s", params, exc)
