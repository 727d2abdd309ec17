"""TOY's gateway side: the opening reader per connection, the login checked by the node."""

from __future__ import annotations

from junction.gateway.side import GatewaySide
from tests.toyproto.opening import ToyOpening


class ToySide(GatewaySide):
    awaited = "no TOY LOGIN line"

    def opening(self, connection) -> ToyOpening:
        security = self.factory.security

        def authenticate(user, password):
            if security is None:
                return self.anonymous(user)
            return security.authenticate(user, password)

        return ToyOpening(authenticate)
