"""The Twisted side of a TLS acceptor: a wrapping factory with a handshake deadline.

:func:`wrap_tls` puts an acceptor's factory (a protocol, the multi-protocol
switch, or a gateway listener) behind Twisted's memory-BIO TLS, with the
contexts of :mod:`junction.tls.server`; what is behind it sees only
decrypted bytes, so protocol sniffing works after the handshake as on plain
TCP.  A handshake not finished within ``handshake-timeout`` is aborted, and
a failed handshake is logged once with its reason (the SNI refusal, or
OpenSSL's error).
"""

from __future__ import annotations

import logging

from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from zope.interface import implementer

from junction.edge.admission import OffenderLog
from junction.protocols.proxy import ClientTLS as ClientTLSInfo
from junction.protocols.proxy import client_tls, proxy_enabled
from junction.tls.server import ServerContexts, refusal, sni_host

__all__ = ["TLSAcceptorFactory", "certificate_login", "openssl_reason", "peer_subject", "tls_handle", "tls_sni_host", "wrap_tls"]

log = logging.getLogger("junction.tls")


@implementer(IOpenSSLServerConnectionCreator)
class _Creator:
    def __init__(self, contexts: ServerContexts):
        self.contexts = contexts

    def serverConnectionForTLS(self, protocol) -> SSL.Connection:
        return self.contexts.connection()


class TLSServerProtocol(BufferingTLSTransport):
    """One TLS connection on an acceptor: handshake deadline and a log line when it fails."""

    _deadline = None

    _in_handshake = False

    def makeConnection(self, transport):
        self._in_handshake = True
        self.factory.in_handshake += 1
        if self.factory.handshake_timeout > 0:
            self._deadline = self.factory.reactor.callLater(
                self.factory.handshake_timeout, self._handshake_timed_out
            )
        super().makeConnection(transport)

    def _checkHandshakeStatus(self):
        super()._checkHandshakeStatus()
        if self._handshakeDone:
            self._cancel_deadline()

    def _handshake_timed_out(self) -> None:
        self._deadline = None
        if not self._handshakeDone:
            self.factory.timed_out += 1
            self._report(
                "handshake-timeout",
                "acceptor %s: TLS handshake with %s not finished in %gs (handshake-timeout); closed",
                self.factory.handshake_timeout,
            )
            self.abortConnection()

    def _tlsShutdownFinished(self, reason):
        if reason is not None and not self._handshakeDone and not self._aborted:
            why = refusal(self._tlsConnection)
            if why is not None:
                self.factory.refused += 1
                self._report("refused", "acceptor %s: TLS client %s refused: %s", why)
            else:
                self.factory.failed += 1
                self._report(
                    "failed", "acceptor %s: TLS handshake with %s failed: %s", openssl_reason(reason.value)
                )
        super()._tlsShutdownFinished(reason)

    def _report(self, kind: str, message: str, detail) -> None:
        """Log a failed handshake at most once per source and kind every LOG_INTERVAL seconds."""
        peer = _peer(self)
        self.factory.offenders.refused(
            log, f"tls-{kind}", peer.rpartition(":")[0], message, self.factory.acceptor_name, peer, detail
        )

    def connectionLost(self, reason):
        self._cancel_deadline()
        super().connectionLost(reason)

    def _handshake_over(self) -> None:
        if self._in_handshake:
            self._in_handshake = False
            self.factory.in_handshake -= 1

    def _cancel_deadline(self) -> None:
        self._handshake_over()
        if self._deadline is not None:
            if self._deadline.active():
                self._deadline.cancel()
            self._deadline = None


class TLSAcceptorFactory(TLSMemoryBIOFactory):
    """An acceptor's factory behind TLS (see the module docstring)."""

    protocol = TLSServerProtocol

    def __init__(
        self, contexts: ServerContexts, wrapped, *, reactor, acceptor_name: str = "?", handshakes_allowed: int = -1
    ):
        creator = _Creator(contexts)
        super().__init__(creator, False, wrapped, clock=reactor)
        self._creator = creator
        self.contexts = contexts
        self.reactor = reactor
        self.acceptor_name = acceptor_name
        self.handshake_timeout = contexts.tls.handshake_timeout
        #: handshakes refused by the SNI checks, failed otherwise, and timed out
        self.refused = 0
        self.failed = 0
        self.timed_out = 0
        #: certificate reloads done, and when the contexts in use were built
        self.reloads = 0
        #: connections whose handshake is not over; at most handshakesAllowed (-1: no limit)
        self.in_handshake = 0
        self.handshakes_allowed = handshakes_allowed
        self.offenders = OffenderLog(reactor)
        self.refused_busy = 0

    def buildProtocol(self, addr):
        if 0 <= self.handshakes_allowed <= self.in_handshake:
            self.refused_busy += 1
            source = str(getattr(addr, "host", addr))
            self.offenders.refused(
                log,
                "handshakesAllowed",
                source,
                "acceptor %s: connection from %s refused: handshakesAllowed=%d TLS handshakes already in progress",
                self.acceptor_name,
                source,
                self.handshakes_allowed,
            )
            return None
        # the protocol factory beneath may refuse too (connectionsAllowed): nothing to wrap then
        inner = self.wrappedFactory.buildProtocol(addr)
        if inner is None:
            return None
        return self.protocol(self, inner)

    def reload(self, tls) -> str | None:
        """Build new contexts from *tls*'s files; new connections use them.  The problem, or None."""
        try:
            contexts = tls.build()
        except Exception as exc:  # noqa: BLE001 - StoreError, SSL.Error: the old contexts stay
            return str(exc) or type(exc).__name__
        self.contexts = contexts
        self._creator.contexts = contexts
        self.handshake_timeout = contexts.tls.handshake_timeout
        self.reloads += 1
        return None

    def status(self) -> dict:
        """What ``/api/status`` shows of this acceptor's TLS."""
        return {
            "certificates": self.contexts.describe(),
            "handshakes_refused": self.refused,
            "handshakes_failed": self.failed,
            "handshakes_timed_out": self.timed_out,
            "handshakes_in_progress": self.in_handshake,
            "handshakes_allowed": self.handshakes_allowed,
            "refused_busy": self.refused_busy,
            "reloads": self.reloads,
        }


def wrap_tls(factory, contexts: ServerContexts | None, *, reactor, acceptor_name: str, handshakes_allowed: int = -1):
    """*factory* behind TLS when the acceptor has *contexts*, else itself."""
    if contexts is None:
        return factory
    return TLSAcceptorFactory(
        contexts, factory, reactor=reactor, acceptor_name=acceptor_name, handshakes_allowed=handshakes_allowed
    )


def tls_handle(transport) -> SSL.Connection | None:
    """The OpenSSL connection under *transport* (through wrappers), or None for plain TCP."""
    for _ in range(4):
        if transport is None:
            return None
        conn = getattr(transport, "_tlsConnection", None)
        if isinstance(conn, SSL.Connection):
            return conn
        transport = getattr(transport, "transport", None) or getattr(transport, "_transport", None)
    return None


def tls_sni_host(transport) -> str | None:
    """The SNI host name the client behind *transport* sent (None: plain TCP, or no name)."""
    conn = tls_handle(transport)
    return sni_host(conn) if conn is not None else _proxied(transport).sni


def peer_subject(transport) -> str | None:
    """The subject DN (RFC 4514, most specific first) of the verified certificate the client behind
    *transport* presented; None over plain TCP or without a certificate."""
    conn = tls_handle(transport)
    if conn is None:
        return _proxied(transport).subject
    cert = conn.get_peer_certificate(as_cryptography=True)
    return cert.subject.rfc4514_string() if cert is not None else None


_NO_TLS = ClientTLSInfo()


def _proxied(transport) -> ClientTLSInfo:
    """What a PROXY v2 header from a trusted source (``proxyTrustedSources``) says of the client's TLS.

    A gateway (or HAProxy) that terminated the client's TLS passes its SNI
    name and verified certificate on this way; a header from anywhere else
    is not believed.
    """
    header = getattr(transport, "proxy_header", None)
    if header is None or not getattr(transport, "proxy_trusted", False):
        return _NO_TLS
    return client_tls(header) or _NO_TLS


def certificate_login(acceptor, security) -> bool:
    """Whether clients of *acceptor* can log in by certificate: a certificate users file, and
    TLS asking for a client certificate (``needClientAuth``/``wantClientAuth``) or PROXY
    headers from trusted sources (``proxyTrustedSources``), which carry the certificate a
    gateway verified."""
    if getattr(security, "certificate_users", None) is None:
        return False
    tls = getattr(acceptor, "tls", None)
    if tls is not None and (tls.need_client_auth or tls.want_client_auth):
        return True
    # behind trusted proxies (a gateway), certificates verified there arrive in the PROXY header
    params = getattr(acceptor, "params", None) or {}
    return proxy_enabled(params) and bool(params.get("proxyTrustedSources"))


def _peer(protocol) -> str:
    try:
        peer = protocol.transport.getPeer()
        return f"{peer.host}:{peer.port}"
    except Exception:  # noqa: BLE001 - a log line must not fail
        return "?"


def openssl_reason(exc) -> str:
    """A readable reason for a TLS failure (OpenSSL's error list, or what the socket did)."""
    if isinstance(exc, SSL.SysCallError):
        if exc.args and exc.args[0] == -1:
            return "the peer closed the connection during the handshake"
        return f"socket error during the handshake: {exc.args[-1] if exc.args else exc}"
    if isinstance(exc, SSL.Error) and exc.args and isinstance(exc.args[0], list):
        parts = [str(e[2]) for e in exc.args[0] if len(e) > 2]
        if parts:
            return "; ".join(parts)
    return str(exc) or type(exc).__name__
