"""Socket options from Artemis URL parameters, shared by acceptors and connectors.

``tcpNoDelay`` (default true, as in Artemis), ``tcpSendBufferSize`` and
``tcpReceiveBufferSize`` apply the same way to a connection a broker core
accepts and to one the gateway opens toward a target, so both use this.
"""

from __future__ import annotations

import logging
import socket

__all__ = ["apply_socket_options"]

log = logging.getLogger("junction.edge.sockets")


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


def replace_receiver(transport, new, old=None) -> None:
    """Make *new* receive what *transport* reads, in place of *old* (default: the innermost protocol).

    Between a socket and the protocol reading it there may be wrappers (TLS,
    the acceptor's admission limits: Twisted ``ProtocolWrapper``s) that must
    stay in the chain -- they decrypt, or count the connection until it ends.
    So the link that points at *old* is changed, not the socket's own
    ``protocol``.  *transport* is what the old protocol was given: the TCP
    transport, a TLS wrapper, or a PROXY-protocol view of either.
    """
    from twisted.protocols.policies import ProtocolWrapper

    if isinstance(transport, ProtocolWrapper):  # the old protocol sits right under a wrapper (TLS)
        holder, attr, current = transport, "wrappedProtocol", transport.wrappedProtocol
    else:
        holder, attr, current = transport, "protocol", getattr(transport, "protocol", None)
    while current is not old and isinstance(current, ProtocolWrapper):
        holder, attr, current = current, "wrappedProtocol", current.wrappedProtocol
    if old is not None and current is not old:
        return  # not in the chain: whoever holds it delegates (see acceptor._HandOver)
    setattr(holder, attr, new)


def socket_transport(transport):
    """*transport* without the pass-through wrappers above it (admission limits), for writing
    straight to the socket and for handing the socket to the relay engine.

    A wrapper marks itself pass-through with a class attribute ``transparent = True``; TLS is
    not one (its bytes must go through it).  The wrappers stay in the receive chain.
    """
    while getattr(type(transport), "transparent", False):
        transport = transport.transport
    return transport
