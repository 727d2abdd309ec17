"""Client-side TLS for a connector: the gateway re-encrypting to a broker core.

A ``<connector>`` with ``sslEnabled=true`` makes the gateway's forwarded
connections and its pool probes speak TLS to that target.  Parameters
(Artemis's, "Configuring Netty SSL"):

``trustStorePath``     CAs the target's certificate must chain to (``PKCS12`` or ``PEM``, with
                       ``trustStorePassword``/``trustStoreType``); without it, the system's CAs
``keyStorePath``       a client certificate to present (2-way TLS), with ``keyStorePassword``/``keyStoreType``
``verifyHost``         check that the certificate is for the host connected to (default true)
``sniHost``            the SNI name to send; the certificate is then checked against it
                       (default: the connector's host, unless it is an IP address)
``trustAll``           accept any certificate (testing only; logged as a warning at start)
``enabledProtocols``   as on acceptors (TLS 1.2 and newer by default)
``enabledCipherSuites`` as on acceptors

Host names are checked with ``service_identity`` (DNS names and IP
addresses in the subject alternative names) once the handshake is done; a
mismatch fails the connection with the reason, which the gateway reports as
the target being unreachable.

:func:`wrap_client_factory` puts a connecting factory behind TLS; bytes that
must precede TLS on the wire (a PROXY protocol header) go first.
"""

from __future__ import annotations

import ipaddress
import weakref
from dataclasses import dataclass

from cryptography import x509
from OpenSSL import SSL
from service_identity import VerificationError
from service_identity.pyopenssl import verify_hostname, verify_ip_address
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from junction.tls.server import (
    _flag,
    _Problems,
    _protocols,
    build_problems,
    new_context,
    parse_ciphers,
    tls_enabled,
    trust_cas,
    use_key_store,
)
from junction.tls.stores import load_key_store, load_trust_store

__all__ = [
    "ClientTLS",
    "TLS_CONNECTOR_PARAMS",
    "TLSHostMismatch",
    "check_client_tls",
    "parse_client_tls",
    "reload_client_context",
    "wrap_client_factory",
]

TLS_CONNECTOR_PARAMS = frozenset(
    {
        "sslEnabled",
        "trustStorePath",
        "trustStorePassword",
        "trustStoreType",
        "keyStorePath",
        "keyStorePassword",
        "keyStoreType",
        "verifyHost",
        "sniHost",
        "trustAll",
        "enabledProtocols",
        "enabledCipherSuites",
    }
)


@dataclass(frozen=True)
class ClientTLS:
    """A connector's TLS settings, paths resolved."""

    trust_store: str | None = None
    trust_store_type: str | None = None
    trust_store_password: str | None = None
    key_store: str | None = None
    key_store_type: str | None = None
    key_store_password: str | None = None
    verify_host: bool = True
    sni_host: str | None = None
    trust_all: bool = False
    protocols: tuple[int, int] = (SSL.TLS1_2_VERSION, 0)
    ciphers: str | None = None

    def context(self) -> SSL.Context:
        """The OpenSSL context; raises :class:`StoreError` or ``SSL.Error``."""
        ctx = new_context(self.protocols, self.ciphers)
        if self.key_store:
            use_key_store(ctx, load_key_store(self.key_store, self.key_store_type, self.key_store_password))
        if self.trust_all:
            ctx.set_verify(SSL.VERIFY_NONE, lambda *a: True)
            return ctx
        if self.trust_store:
            trust_cas(ctx, load_trust_store(self.trust_store, self.trust_store_type, self.trust_store_password))
        else:
            ctx.set_default_verify_paths()
        ctx.set_verify(SSL.VERIFY_PEER, lambda conn, cert, errno, depth, ok: bool(ok))
        return ctx

    def creator(self, host: str) -> "ClientCreator":
        """Connections to *host* (the connector's host) with this connector's checks."""
        sni = self.sni_host or (None if _is_ip(host) else host)
        check = None
        if self.verify_host and not self.trust_all:
            check = self.sni_host or host
        return ClientCreator(cached_context(self), sni, check)


#: one context per connector's settings, built on first use and again on reload
_contexts: dict[ClientTLS, SSL.Context] = {}


def cached_context(tls: ClientTLS) -> SSL.Context:
    ctx = _contexts.get(tls)
    if ctx is None:
        ctx = tls.context()
        ctx.set_info_callback(_check_host)
        _contexts[tls] = ctx
    return ctx


def reload_client_context(tls: ClientTLS) -> str | None:
    """Read *tls*'s stores again for the connections made from now on; the problem, or None."""
    try:
        ctx = tls.context()
    except Exception as exc:  # noqa: BLE001 - StoreError, SSL.Error: the old context stays
        return str(exc) or type(exc).__name__
    ctx.set_info_callback(_check_host)
    _contexts[tls] = ctx
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@implementer(IOpenSSLClientConnectionCreator)
class ClientCreator:
    """Makes each client connection: SNI set, host name checked when the handshake is done."""

    def __init__(self, ctx: SSL.Context, sni: str | None, check: str | None):
        self.ctx = ctx
        self.sni = sni
        self.check = check

    def clientConnectionForTLS(self, protocol) -> SSL.Connection:
        conn = SSL.Connection(self.ctx, None)
        _expected[conn] = (protocol, self.check)
        if self.sni:
            conn.set_tlsext_host_name(self.sni.encode("idna"))
        return conn


#: each client connection's protocol and the name its certificate must be for
_expected: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _check_host(conn: SSL.Connection, where: int, ret: int) -> None:
    """Once a handshake is done, fail the connection if the certificate is not for the expected name.

    Fails closed: a problem in the check itself fails the connection too
    (OpenSSL ignores what a callback raises).
    """
    if not where & SSL.SSL_CB_HANDSHAKE_DONE:
        return
    protocol, check = _expected.get(conn, (None, None))
    if protocol is None or check is None:
        return
    try:
        if _is_ip(check):
            verify_ip_address(conn, check)
        else:
            verify_hostname(conn, check)
        return
    except VerificationError:
        names = certificate_names(conn)
        problem = TLSHostMismatch(
            f"the target's certificate is for {', '.join(names) or 'no host name'}, "
            f"not {check} (verifyHost=true; set sniHost to the name it is for)"
        )
    except Exception as exc:  # noqa: BLE001 - fail closed
        problem = TLSHostMismatch(f"the host name check of {check} failed: {exc!r}")
    protocol.failVerification(Failure(problem))


def certificate_names(conn: SSL.Connection) -> list[str]:
    """The DNS names and IP addresses the peer's certificate is for."""
    cert = conn.get_peer_certificate(as_cryptography=True)
    if cert is None:
        return []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)]
    return list(san.get_values_for_type(x509.DNSName)) + [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]


class TLSHostMismatch(Exception):
    """The target's certificate is not for the host name the connector expects."""


class _PrefixedTLSProtocol(TLSMemoryBIOProtocol):
    """Writes the factory's ``prefix`` (a PROXY header) on the raw connection before TLS starts."""

    def makeConnection(self, transport):
        prefix = self.factory.prefix
        if prefix:
            transport.write(prefix)
        super().makeConnection(transport)


class _ClientTLSFactory(TLSMemoryBIOFactory):
    protocol = _PrefixedTLSProtocol

    def __init__(self, creator, wrapped, prefix: bytes, clock):
        super().__init__(creator, True, wrapped, clock=clock)
        self.prefix = prefix

    # a ClientFactory's connection callbacks go to the wrapped factory
    def clientConnectionFailed(self, connector, reason):
        self.wrappedFactory.clientConnectionFailed(connector, reason)

    def clientConnectionLost(self, connector, reason):
        self.wrappedFactory.clientConnectionLost(connector, reason)


def wrap_client_factory(factory, tls: ClientTLS, host: str, *, reactor, prefix: bytes = b""):
    """*factory* connecting through TLS to *host*, *prefix* written before the handshake."""
    return _ClientTLSFactory(tls.creator(host), factory, prefix, reactor)


def parse_client_tls(params: dict, resolve) -> tuple[ClientTLS | None, list[str]]:
    """A connector's :class:`ClientTLS` (None without ``sslEnabled=true``) and its problems."""
    if not tls_enabled(params):
        return None, []
    problems = _Problems()
    verify = str(params.get("verifyHost", "true")).strip().lower()
    if verify not in ("true", "false"):
        problems.add(f"verifyHost={params.get('verifyHost')!r} must be true or false")
    trust_all = _flag(params, "trustAll", problems)
    protocols = _protocols(str(params.get("enabledProtocols", "")), problems)
    ciphers = parse_ciphers(params, problems)
    if problems.items:
        return None, problems.items
    trust = params.get("trustStorePath")
    key = params.get("keyStorePath")
    return (
        ClientTLS(
            trust_store=resolve(trust) if trust else None,
            trust_store_type=params.get("trustStoreType"),
            trust_store_password=params.get("trustStorePassword"),
            key_store=resolve(key) if key else None,
            key_store_type=params.get("keyStoreType"),
            key_store_password=params.get("keyStorePassword"),
            verify_host=verify != "false",
            sni_host=params.get("sniHost") or None,
            trust_all=trust_all,
            protocols=protocols,
            ciphers=ciphers,
        ),
        [],
    )


def check_client_tls(tls: ClientTLS) -> list[str]:
    """Problems making *tls*'s context (unreadable stores, a cipher list OpenSSL refuses ...)."""
    return build_problems(tls.context, "settings")
