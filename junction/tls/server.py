"""Server-side TLS for an acceptor: Artemis's URL parameters to OpenSSL contexts.

:func:`parse_server_tls` reads an acceptor's parameters into a
:class:`ServerTLS` (every problem reported, none raised), and
:meth:`ServerTLS.build` loads the stores into a :class:`ServerContexts`: a
default context, one per host name in ``sniKeyStorePaths``, and the choice
between them made in the handshake from the name the client sent (SNI).

Parameters (Artemis's, "Configuring Netty SSL", unless marked Junction):

``sslEnabled``            TLS on this acceptor
``keyStorePath``          the server's key and certificate chain (``PKCS12`` or ``PEM``)
``keyStorePassword``      its password; ``keyStoreType`` its type (detected when absent)
``trustStorePath``        CAs that client certificates must chain to
``trustStorePassword``    ... and ``trustStoreType``
``needClientAuth``        a client certificate is required (it wins over ``wantClientAuth``)
``wantClientAuth``        a client certificate is asked for; without one the client still connects
``enabledProtocols``      e.g. ``TLSv1.2,TLSv1.3``; the default is TLS 1.2 and newer
``enabledCipherSuites``   OpenSSL or IANA names, comma separated (TLS 1.2 suites)
``sniHost``               a regular expression the client's SNI name must match whole, ignoring
                          case; a client that sends no name is accepted (as Artemis)
``sniRequired``           (Junction) a client that sends no SNI name is refused
``sniKeyStorePaths``      (Junction) ``host:file,host2:file2``: the key store served to a client
                          asking for that name (``*.example.com`` matches one label); same type
                          and password as ``keyStorePath``, which serves every other name
``handshake-timeout``     seconds a connection may take to finish its TLS handshake (10; 0: no
                          limit, as Artemis)
``handshakesAllowed``     (Junction) TLS handshakes in progress at once; a connection beyond is
                          closed at accept (-1, the default: no limit)

A refused client (no SNI under ``sniRequired``, a name ``sniHost`` does not
match) is switched to a context with no certificate, so its handshake fails
with an alert rather than completing and being cut; the reason is kept for
the log line (:func:`refusal`).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

from OpenSSL import SSL, crypto

from junction.tls.stores import KeyStore, StoreError, load_key_store, load_trust_store

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "ServerContexts",
    "ServerTLS",
    "parse_server_tls",
    "refusal",
    "tls_enabled",
]

#: seconds a client may take to finish the TLS handshake (Artemis's ``handshake-timeout`` default)
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
#: names in ``sniKeyStorePaths`` at most (each is a context in memory)
MAX_SNI_KEY_STORES = 1000


_PROTOCOLS = {
    "TLSV1": SSL.TLS1_VERSION,
    "TLSV1.1": SSL.TLS1_1_VERSION,
    "TLSV1.2": SSL.TLS1_2_VERSION,
    "TLSV1.3": SSL.TLS1_3_VERSION,
}
_TRUE = ("true", "false")


def tls_enabled(params: dict) -> bool:
    return str(params.get("sslEnabled", "false")).strip().lower() == "true"


@dataclass(frozen=True)
class ServerTLS:
    """An acceptor's TLS settings, paths resolved; :meth:`build` makes the contexts."""

    key_store: str
    key_store_type: str | None = None
    key_store_password: str | None = None
    trust_store: str | None = None
    trust_store_type: str | None = None
    trust_store_password: str | None = None
    need_client_auth: bool = False
    want_client_auth: bool = False
    protocols: tuple[int, int] = (SSL.TLS1_2_VERSION, 0)
    ciphers: str | None = None
    sni_host: str | None = None
    sni_required: bool = False
    sni_key_stores: tuple[tuple[str, str], ...] = ()
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT

    def build(self) -> "ServerContexts":
        """Load the stores and make the contexts; raises :class:`StoreError` or ``SSL.Error``."""
        trust = ()
        if self.trust_store:
            trust = load_trust_store(self.trust_store, self.trust_store_type, self.trust_store_password)
        store = load_key_store(self.key_store, self.key_store_type, self.key_store_password)
        default = self._context(store, trust)
        certificates = {None: store.certificate}
        by_name = {}
        for host, path in self.sni_key_stores:
            store = load_key_store(path, self.key_store_type, self.key_store_password)
            by_name[host.lower()] = self._context(store, trust)
            certificates[host.lower()] = store.certificate
        return ServerContexts(self, default, by_name, certificates)

    def _context(self, store: KeyStore, trust) -> SSL.Context:
        ctx = new_context(self.protocols, self.ciphers, SSL.OP_CIPHER_SERVER_PREFERENCE)
        ctx.set_mode(SSL.MODE_RELEASE_BUFFERS)
        ctx.set_session_cache_mode(SSL.SESS_CACHE_SERVER)
        ctx.set_session_id(b"junction")
        use_key_store(ctx, store)
        if trust:
            trust_cas(ctx, trust)
            with warnings.catch_warnings():
                # the CA names a client is told to choose its certificate by; pyOpenSSL
                # deprecates X509Name without offering another way for in-memory CAs
                warnings.simplefilter("ignore", DeprecationWarning)
                ctx.set_client_ca_list([crypto.X509.from_cryptography(ca).get_subject() for ca in trust])
        if self.need_client_auth:
            ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, _verified)
        elif self.want_client_auth:
            ctx.set_verify(SSL.VERIFY_PEER, _verified)
        return ctx


def _verified(conn, cert, errno, depth, ok) -> bool:
    return bool(ok)


# -- what server and client contexts share ----------------------------------------------------
def new_context(protocols: tuple[int, int], ciphers: str | None, options: int = 0) -> SSL.Context:
    """A context for TLS versions ``protocols`` (lowest, highest or 0) and OpenSSL cipher list *ciphers*."""
    ctx = SSL.Context(SSL.TLS_METHOD)
    low, high = protocols
    ctx.set_min_proto_version(low)
    if high:
        ctx.set_max_proto_version(high)
    ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_NO_RENEGOTIATION | options)
    if ciphers:
        ctx.set_cipher_list(ciphers.encode())
    return ctx


def use_key_store(ctx: SSL.Context, store: KeyStore) -> None:
    """Present *store*'s certificate, its chain and its key on *ctx*."""
    ctx.use_certificate(store.certificate)
    for extra in store.chain:
        ctx.add_extra_chain_cert(crypto.X509.from_cryptography(extra))
    ctx.use_privatekey(store.key)
    ctx.check_privatekey()


def trust_cas(ctx: SSL.Context, cas) -> None:
    """Verify peers against the CA certificates *cas*."""
    cert_store = ctx.get_cert_store()
    for ca in cas:
        cert_store.add_cert(crypto.X509.from_cryptography(ca))


def parse_ciphers(params: dict, problems: _Problems) -> str | None:
    """``enabledCipherSuites`` as an OpenSSL cipher list (IANA names converted), checked by OpenSSL."""
    if not params.get("enabledCipherSuites"):
        return None
    names = [iana_to_openssl(n.strip()) for n in str(params["enabledCipherSuites"]).split(",") if n.strip()]
    ciphers = ":".join(names)
    try:
        SSL.Context(SSL.TLS_METHOD).set_cipher_list(ciphers.encode())
    except SSL.Error:
        problems.add(f"enabledCipherSuites: none of {params['enabledCipherSuites']!r} is a cipher suite OpenSSL knows")
    return ciphers


class ServerContexts:
    """The contexts of one acceptor and the SNI choice between them."""

    def __init__(self, tls: ServerTLS, default: SSL.Context, by_name: dict[str, SSL.Context], certificates=None):
        self.tls = tls
        self.default = default
        self.by_name = by_name
        #: the certificate served per SNI name (None: the default), for status
        self.certificates = certificates or {}
        self._sni = re.compile(tls.sni_host, re.IGNORECASE) if tls.sni_host else None
        #: a context with no certificate: a refused client's handshake fails in it
        self._refuse = SSL.Context(SSL.TLS_METHOD)
        self.default.set_tlsext_servername_callback(self._servername)
        for ctx in by_name.values():
            ctx.set_tlsext_servername_callback(self._servername)

    def describe(self) -> list[dict]:
        """Each certificate served: for which SNI names, what it is for, and until when."""
        out = []
        for sni, cert in self.certificates.items():
            out.append(
                {
                    "sni": sni or "*",
                    "subject": cert.subject.rfc4514_string(),
                    "names": list(KeyStore(None, cert).names),
                    "not_after": cert.not_valid_after_utc.isoformat(),
                    "serial": format(cert.serial_number, "x"),
                }
            )
        return out

    def connection(self) -> SSL.Connection:
        """A server-side connection for one accepted client."""
        return SSL.Connection(self.default, None)

    def context_for(self, name: str | None) -> tuple[SSL.Context, str | None]:
        """The context for SNI *name*, or the refusal context and why."""
        if name is None:
            if self.tls.sni_required:
                return self._refuse, "the client sent no SNI host name (sniRequired=true)"
            return self.default, None
        if self._sni is not None and not self._sni.fullmatch(name):
            return self._refuse, f"SNI host name {name!r} does not match sniHost {self.tls.sni_host!r}"
        lowered = name.lower()
        ctx = self.by_name.get(lowered)
        if ctx is None and "." in lowered:
            ctx = self.by_name.get("*." + lowered.split(".", 1)[1])
        return (ctx or self.default), None

    def _servername(self, conn: SSL.Connection) -> None:
        raw = conn.get_servername()
        name = raw.decode("ascii", "replace") if raw is not None else None
        ctx, why = self.context_for(name)
        if why is not None:
            conn.set_app_data(_Refused(why))
        if ctx is not self.default:
            conn.set_context(ctx)


class _Refused:
    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


def refusal(conn: SSL.Connection) -> str | None:
    """Why the SNI check refused *conn*'s client, if it did."""
    data = conn.get_app_data()
    return data.why if isinstance(data, _Refused) else None


def sni_host(conn: SSL.Connection) -> str | None:
    """The SNI host name *conn*'s client sent, lower-cased (None if it sent none)."""
    raw = conn.get_servername()
    return raw.decode("ascii", "replace").lower() if raw else None


# -- parameters --------------------------------------------------------------------------------
@dataclass
class _Problems:
    items: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.items.append(text)


def _flag(params: dict, name: str, problems: _Problems) -> bool:
    value = str(params.get(name, "false")).strip().lower()
    if value not in _TRUE:
        problems.add(f"{name}={params.get(name)!r} must be true or false")
        return False
    return value == "true"


def _protocols(text: str, problems: _Problems) -> tuple[int, int]:
    chosen = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        version = _PROTOCOLS.get(part.upper())
        if version is None:
            problems.add(f"enabledProtocols: unknown protocol {part!r} (use TLSv1.2, TLSv1.3)")
            continue
        chosen.append(version)
    if not chosen:
        return (SSL.TLS1_2_VERSION, 0)
    return (min(chosen), max(chosen))


def iana_to_openssl(name: str) -> str:
    """An IANA cipher suite name (as Java lists them) in OpenSSL's spelling; others unchanged."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    kx, cipher = name[4:].split("_WITH_", 1)
    kx = {"ECDHE_ECDSA": "ECDHE-ECDSA", "ECDHE_RSA": "ECDHE-RSA", "DHE_RSA": "DHE-RSA", "RSA": ""}.get(kx, kx)
    parts = cipher.split("_")
    out = []
    i = 0
    while i < len(parts):
        if parts[i] in ("AES", "CAMELLIA", "ARIA") and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(parts[i] + parts[i + 1])
            i += 2
            continue
        out.append(parts[i])
        i += 1
    if out[:2] == ["CHACHA20", "POLY1305"]:
        out = ["CHACHA20", "POLY1305"]
    elif out[-1] in ("SHA256", "SHA384") and "GCM" not in out and "CBC" in out:
        out.remove("CBC")
    elif out[-1] == "SHA" and "CBC" in out:
        out.remove("CBC")
    return "-".join(p for p in ([kx] if kx else []) + out)


def parse_server_tls(params: dict, resolve) -> tuple[ServerTLS | None, list[str]]:
    """An acceptor's :class:`ServerTLS` (None when ``sslEnabled`` is not true) and its problems.

    *resolve* maps a path from the URL to an absolute one (relative paths are
    relative to the configuration file).  The stores themselves are read by
    :func:`check_server_tls`.
    """
    problems = _Problems()
    if not tls_enabled(params):
        return None, []
    key_store = params.get("keyStorePath")
    if not key_store:
        problems.add("sslEnabled=true needs keyStorePath (the server's key and certificate)")
    need = _flag(params, "needClientAuth", problems)
    want = _flag(params, "wantClientAuth", problems)
    sni_required = _flag(params, "sniRequired", problems)
    trust = params.get("trustStorePath")
    if (need or want) and not trust:
        problems.add(
            f"{'needClientAuth' if need else 'wantClientAuth'}=true needs trustStorePath "
            "(the CAs client certificates must chain to)"
        )
    protocols = _protocols(str(params.get("enabledProtocols", "")), problems)
    ciphers = parse_ciphers(params, problems)
    sni = params.get("sniHost")
    if sni:
        try:
            re.compile(sni)
        except re.error as exc:
            problems.add(f"sniHost={sni!r} is not a regular expression: {exc}")
            sni = None
    sni_stores = []
    text = str(params.get("sniKeyStorePaths", "")).strip()
    for item in (i.strip() for i in text.split(",") if i.strip()):
        host, sep, path = item.partition(":")
        if not sep or not host.strip() or not path.strip():
            problems.add(f"sniKeyStorePaths: {item!r} is not HOST:FILE")
            continue
        sni_stores.append((host.strip().lower(), resolve(path.strip())))
    if len(sni_stores) > MAX_SNI_KEY_STORES:
        problems.add(f"sniKeyStorePaths: {len(sni_stores)} names, more than {MAX_SNI_KEY_STORES}")
    timeout = DEFAULT_HANDSHAKE_TIMEOUT
    if params.get("handshake-timeout") not in (None, ""):
        try:
            timeout = float(params["handshake-timeout"])
            if timeout < 0:
                raise ValueError
        except ValueError:
            problems.add(f"handshake-timeout={params['handshake-timeout']!r} must be a number of seconds, 0 for none")
            timeout = DEFAULT_HANDSHAKE_TIMEOUT
    if problems.items or not key_store:
        return None, problems.items
    return (
        ServerTLS(
            key_store=resolve(key_store),
            key_store_type=params.get("keyStoreType"),
            key_store_password=params.get("keyStorePassword"),
            trust_store=resolve(trust) if trust else None,
            trust_store_type=params.get("trustStoreType"),
            trust_store_password=params.get("trustStorePassword"),
            need_client_auth=need,
            want_client_auth=want and not need,
            protocols=protocols,
            ciphers=ciphers,
            sni_host=sni,
            sni_required=sni_required,
            sni_key_stores=tuple(sni_stores),
            handshake_timeout=timeout,
        ),
        [],
    )


def build_problems(build, what: str) -> list[str]:
    """What goes wrong calling *build* (reading stores, making contexts), as config errors."""
    try:
        build()
    except StoreError as exc:
        return [str(exc)]
    except SSL.Error as exc:
        return [f"OpenSSL refused the {what}: {exc}"]
    return []


def check_server_tls(tls: ServerTLS) -> list[str]:
    """Problems building *tls*'s contexts (unreadable stores, a key that does not fit ...)."""
    return build_problems(tls.build, "key store")
