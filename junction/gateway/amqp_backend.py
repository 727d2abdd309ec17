"""AMQP on a gateway listener: SASL and the Open are the opening; the login is redone at the backend.

The opening reader is :class:`~junction.protocols.amqp.opening.AmqpOpening`
(whose answers are written after every read): the gateway runs SASL with the
client itself -- PLAIN against the security manager, EXTERNAL where the
acceptor logs in by certificate, ANONYMOUS (and no SASL) only where the node
allows anonymous logins -- then reads the client's Open; its container-id is
the client id, the SASL principal the user and roles.  Each protocol header
is answered as soon as it is read, as a broker does (the SASL header with ours
and the mechanisms, the AMQP header with ours, before the Open), so clients
that wait for the server's header before sending more are not left hanging.
Whoever then serves the connection sends its own AMQP header too: that one is
consumed by the gateway (the
:class:`~junction.protocols.amqp.sasl_client.SaslClient` that redoes the
login), so the client sees exactly one.

* redirect: :meth:`AmqpOpening.redirect` to the target connector's host and
  port (Artemis's Open + Close ``amqp:connection:redirect``), then close;
* forward: a handshake (:class:`_AmqpLogin`) that writes a SaslClient's
  sasl-init followed by the client's bytes after SASL (its header and Open),
  feeds the target's answer to the SaslClient until its outcome and its AMQP
  header (consumed), passes what follows (its Open ...) to the client and
  splices.  A refused login, a target answering with another protocol
  header, or a target closing or silent during the handshake ends the
  client's connection with :meth:`AmqpOpening.close_with`
  (``amqp:unauthorized-access`` / ``amqp:connection:forced``, the reason in
  the description) and does not mark the target down;
* local: the broker core is given the sasl-init and then the client's bytes;
  its transport is wrapped (:class:`_SaslFilteredTransport`) so its SASL
  answers and its AMQP header go through a SaslClient rather than to the
  client, and is swapped back for the real one once they are past;
* refuse: :meth:`AmqpOpening.refuse` (``amqp:connection:forced``, Artemis's
  texts).
"""

from __future__ import annotations

import logging

from junction.edge.tls import certificate_login, peer_subject
from junction.gateway.forward import ForwardHandshakeError
from junction.gateway.side import ANSWERED, FilteredTransport, GatewaySide
from junction.protocols.amqp.opening import (
    DEFAULT_CONTAINER_ID,
    FORCED,
    AmqpOpening,
    OpeningComplete,
)
from junction.protocols.amqp.sasl import SaslCode
from junction.protocols.amqp.sasl_client import SaslClient, SaslClientDone, SaslClientFailed
from junction.protocols.errors import RemoteProtocolError

__all__ = ["AmqpSide"]

log = logging.getLogger("junction.gateway")

_UNAUTHORIZED = "amqp:unauthorized-access"


class AmqpSide(GatewaySide):
    client_id_label = "container-id"
    awaited = "no complete opening (SASL and open)"
    error_condition = FORCED

    def opening(self, connection) -> AmqpOpening:
        factory = self.factory

        def authenticate(credentials):
            """The principal for the client's SASL login, or None."""
            if credentials.mechanism == "PLAIN":
                user, password = credentials.username, credentials.password
                if not user:
                    return None
            elif credentials.mechanism == "ANONYMOUS" and factory.anonymous_allowed:
                user = password = None
            elif credentials.mechanism == "EXTERNAL" and factory.security is not None:
                return factory.security.authenticate_certificate(peer_subject(connection.transport))
            else:
                return None
            security = factory.security
            if security is None:
                return self.anonymous(user)
            return security.authenticate(user, password)

        return AmqpOpening(
            authenticate,
            mechanisms=(("EXTERNAL",) if certificate_login(factory.acceptor, factory.security) else ())
            + (("PLAIN", "ANONYMOUS") if factory.anonymous_allowed else ("PLAIN",)),
            allow_no_sasl=factory.anonymous_allowed,
            container_id=factory.container_id or DEFAULT_CONTAINER_ID,
        )

    def opening_failed(self, connection, event) -> None:
        factory = self.factory
        log.info(
            "router %s: AMQP connection from %s on acceptor %s: opening failed: %s (%s)",
            factory.router.name,
            connection.peer,
            factory.acceptor_name,
            event.reason,
            event.condition,
        )
        factory.count("unauthenticated" if event.login_refused else "bad-opening")

    def login(self, connection, event: OpeningComplete):
        """The principal of a complete AMQP opening; the login to redo at the backend goes to
        ``connection.backend_login`` (a SaslClient).  ANSWERED when the connection was answered."""
        principal = event.principal
        if principal is None:  # no SASL, as the node allows: the anonymous login
            security = self.factory.security
            principal = security.authenticate(None, None) if security is not None else self.anonymous(None)
            if principal is None:  # pragma: no cover - no SASL is allowed only for anonymous
                connection._answer("Security Error occurred: anonymous login refused", condition=_UNAUTHORIZED)
                return ANSWERED
        try:
            connection.backend_login = SaslClient(
                event.mechanism,
                username=event.username,
                password=event.password,
                authzid=event.authzid,
                hostname=event.sasl_hostname,
            )
        except ValueError as exc:  # credentials the backend login cannot carry
            connection._answer(
                f"cannot log in to the target on the client's behalf: {exc}", condition=_UNAUTHORIZED
            )
            return ANSWERED
        return principal

    def forward_handshake(self, connection):
        sasl_client, connection.backend_login = connection.backend_login, None
        return _AmqpLogin(sasl_client) if sasl_client is not None else None

    def local_hand_off(self, connection, transport, buffered: bytes):
        """The broker core runs SASL again: give it the login first and keep its SASL answers
        from the client, which is past SASL already."""
        sasl_client, connection.backend_login = connection.backend_login, None
        if sasl_client is None:
            return transport, buffered
        return _SaslFilteredTransport(transport, sasl_client, connection), sasl_client.initial_bytes() + buffered


class _AmqpLogin:
    """The forward handshake of an AMQP connection: SASL redone at the target.

    :func:`~junction.gateway.forward.connect_and_forward` writes
    :meth:`start` (the SASL header and sasl-init) followed by the client's
    bytes after its SASL exchange, then feeds what the target sends here
    until the target's sasl-outcome and AMQP header, which are consumed (the
    client has the gateway's header already); what came after them (the
    target's Open ...) goes to the client.
    """

    __slots__ = ("client",)

    def __init__(self, client: SaslClient):
        self.client = client

    def start(self) -> bytes:
        return self.client.initial_bytes()

    def feed(self, data: bytes) -> bytes | None:
        try:
            events = self.client.receive_data(data)
        except RemoteProtocolError as exc:
            raise ForwardHandshakeError("?", f"protocol error from the target: {exc}", FORCED) from None
        for event in events:
            if isinstance(event, SaslClientDone):
                return event.remaining
            if isinstance(event, SaslClientFailed):
                condition = _UNAUTHORIZED if event.code in (SaslCode.AUTH, None) else FORCED
                raise ForwardHandshakeError("?", event.reason, condition)
        return None


class _SaslFilteredTransport(FilteredTransport):
    """The transport a locally served AMQP connection's broker core writes to.

    The core is given the client's login again (``sasl_client``'s initial
    bytes); its SASL answers and its AMQP header go through ``sasl_client``
    and are not written to the client, which is past SASL and has the
    gateway's header already.  Once they are past, what follows (the core's
    Open ...) is written as is, and the core is given the real transport.
    A refused login ends the client's connection with
    ``amqp:unauthorized-access``, a protocol error from the core with
    ``amqp:connection:forced``.  Everything else is the real transport's.
    """

    def __init__(self, transport, sasl_client: SaslClient, owner):
        super().__init__(transport)
        object.__setattr__(self, "_sasl_client", sasl_client)
        object.__setattr__(self, "_owner", owner)

    def write(self, data: bytes) -> None:
        sasl_client = self._sasl_client
        transport = self._transport
        if sasl_client is None:
            transport.write(data)
            return
        reason = None
        condition = _UNAUTHORIZED
        try:
            events = sasl_client.receive_data(bytes(data))
        except RemoteProtocolError as exc:
            events, reason, condition = [], f"protocol error from the broker core: {exc}", FORCED
        for event in events:
            if isinstance(event, SaslClientDone):
                object.__setattr__(self, "_sasl_client", None)
                protocol = getattr(transport, "protocol", None)
                if getattr(protocol, "transport", None) is self:
                    protocol.transport = transport
                if event.remaining:
                    transport.write(event.remaining)
                return
            if isinstance(event, SaslClientFailed):
                reason = event.reason
        if reason is not None:
            object.__setattr__(self, "_sasl_client", _DROP)
            owner = self._owner
            log.info(
                "router %s: AMQP connection from %s served locally: the broker core refused the "
                "connection: %s",
                owner.gateway.router.name,
                owner.peer,
                reason,
            )
            opening = owner.opening
            if opening is not None:
                transport.write(opening.close_with(condition, reason))
            transport.loseConnection()


class _Drop:
    """Stands for the SASL client of a filtered transport whose login failed: writes are dropped."""

    def receive_data(self, data):
        return []


_DROP = _Drop()
