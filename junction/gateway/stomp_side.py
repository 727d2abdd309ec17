"""STOMP on a gateway listener: the CONNECT frame is the opening.

The opening reader is :class:`~junction.protocols.stomp.opening.StompOpening`:
the first complete ``CONNECT`` or ``STOMP`` frame, with the sans-IO codec
bounded by the acceptor's frame size (``stompMaxFramePayloadLength``, else
``<limits max-frame-size>``); its ``login``, ``passcode`` and ``client-id``
are the routing inputs.  A bad login gets the broker's own ERROR
(``Security Error occurred: User name [x] or password is invalid``);
refusals are the broker core's ERROR frames.  STOMP has no redirect: a
connection routed to a remote target is forwarded, its CONNECT replayed
unmodified so the target authenticates the client itself.
"""

from __future__ import annotations

from junction.edge.tls import peer_subject
from junction.gateway.side import GatewaySide
from junction.protocols.stomp import StompLimits
from junction.protocols.stomp.opening import StompCredentials, StompOpening

__all__ = ["StompSide"]


class StompSide(GatewaySide):
    awaited = "no CONNECT frame"

    def __init__(self, factory, entry):
        super().__init__(factory, entry)
        limits = factory.limits
        self.limits = StompLimits(
            max_frame_size=self.max_frame,
            max_header_count=limits.max_header_count if limits else 1000,
            max_header_length=limits.max_header_length if limits else 64 * 1024,
        )

    def opening(self, connection) -> StompOpening:
        def authenticate(credentials: StompCredentials):
            """The principal for the CONNECT's login, or None."""
            security = self.factory.security
            if security is not None:
                return security.login(credentials.login, credentials.passcode, peer_subject(connection.transport))
            return self.anonymous(credentials.login or None)

        return StompOpening(authenticate, limits=self.limits, max_bytes=self.factory.max_buffered)
