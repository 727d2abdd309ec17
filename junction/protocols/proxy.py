"""The PROXY protocol, versions 1 and 2 (HAProxy's ``proxy-protocol.txt``), sans-IO.

A proxy that accepts a client's TCP connection and opens its own to a
server can say who the client is by sending, before anything else, a
PROXY header: version 1 is one text line
(``PROXY TCP4 192.0.2.1 198.51.100.2 56324 61616\\r\\n``), version 2 a
binary block starting with a 12-byte signature.  Junction's gateway writes a
v2 header toward a broker core (:func:`encode_v2`; its readiness probe
writes :func:`encode_v2_local`), and an acceptor with
``proxyProtocolEnabled=true`` reads one with :class:`ProxyHeaderReader`.

The reader follows the specification's receiver rules: it accepts only a
connection that starts with a valid header and never guesses (bytes that
cannot start a header are an error at once, as is anything malformed); a
v2 ``LOCAL`` command and a v1 ``UNKNOWN`` line carry no usable address, so
the receiver keeps the real socket addresses.  TLVs of a v2 header are
parsed, checked to fit the header exactly, and kept; the client's TLS (SNI
name, version, verified certificate subject) travels in them, written by
:func:`tls_tlvs` and read by :func:`client_tls`.

Named limits (principle 5): :data:`MAX_V1_HEADER` (107 bytes, the
specification's own worst case ``PROXY UNKNOWN`` line with two IPv6
addresses), :data:`MAX_V2_HEADER` (the whole v2 header, signature and TLVs
included; the specification allows up to 16 + 65535 bytes, a gateway never
needs more than a few hundred).

Errors are :class:`junction.protocols.errors.RemoteProtocolError` whose
message says what was wrong; the PROXY protocol has no error reply, so the
adapter logs it and closes the connection.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "MAX_V1_HEADER",
    "MAX_V2_HEADER",
    "PROXY_ENABLED_PARAMS",
    "V2_SIGNATURE",
    "ProxyHeader",
    "ProxyHeaderReader",
    "RemoteProtocolError",
    "encode_v1",
    "encode_v2",
    "encode_v2_local",
    "proxy_enabled",
]

#: the URL parameter turning the PROXY protocol on, on an acceptor (accept a header)
#: or a connector (write one): Artemis's name, and the shorter alias Junction accepts
PROXY_ENABLED_PARAMS = ("proxyProtocolEnabled", "proxyEnabled")


def proxy_enabled(params) -> bool:
    """Whether URL ``params`` turn the PROXY protocol on (either spelling)."""
    params = params or {}
    return any(str(params.get(name, "false")).strip().lower() == "true" for name in PROXY_ENABLED_PARAMS)

#: the longest v1 line the specification allows, ``\r\n`` included
MAX_V1_HEADER = 107
#: the longest v2 header Junction accepts (16-byte fixed part + addresses + TLVs)
MAX_V2_HEADER = 4096
#: the v2 signature: ``\r\n\r\n\0\r\nQUIT\n``
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
_V1_PREFIX = b"PROXY "
_V2_FIXED = 16

# v2 address families (high nibble of byte 14) and their address block sizes
_FAMILIES = {0x0: ("UNSPEC", 0), 0x1: ("TCP4", 12), 0x2: ("TCP6", 36), 0x3: ("UNIX", 216)}
# v2 transport protocols (low nibble of byte 14)
_TRANSPORTS = {0x0: "UNSPEC", 0x1: "STREAM", 0x2: "DGRAM"}
_COMMANDS = {0x0: "LOCAL", 0x1: "PROXY"}


@dataclass(frozen=True)
class ProxyHeader:
    """One PROXY header as read, and the bytes that followed it in the same reads.

    ``version``: 1 or 2.  ``command``: ``"PROXY"`` (the addresses are the
    client's) or ``"LOCAL"`` (v2 only: the proxy speaking for itself, a
    health check; a v1 ``UNKNOWN`` line is reported as ``"LOCAL"`` too,
    since its receiver must likewise keep the real addresses).
    ``family``: ``"TCP4"``, ``"TCP6"``, ``"UNIX"``, ``"UNSPEC"`` (v2) or
    ``"UNKNOWN"`` (v1).  ``transport``: ``"STREAM"``, ``"DGRAM"`` or
    ``"UNSPEC"`` (v1 is always ``"STREAM"``).
    ``source``/``destination``: ``(host, port)`` for TCP4/TCP6, the socket
    path (str) for UNIX, None when the header carries no address (or the
    command is LOCAL, whose addresses the specification says to ignore).
    ``tlvs``: the v2 TLVs as ``(type, value)`` pairs, in order.
    ``length``: the header's size in bytes.  ``remaining``: the bytes after
    the header, for the protocol that follows.
    """

    version: int
    command: str
    family: str
    transport: str
    source: tuple | str | None
    destination: tuple | str | None
    tlvs: tuple = ()
    length: int = 0
    remaining: bytes = b""

    @property
    def has_address(self) -> bool:
        """Whether ``source`` is a TCP ``(host, port)`` a receiver should use as the peer."""
        return self.command == "PROXY" and self.family in ("TCP4", "TCP6") and isinstance(self.source, tuple)

    @property
    def version_name(self) -> str:
        """``"V1"`` or ``"V2"``, as Artemis's management names it."""
        return f"V{self.version}"


class ProxyHeaderReader:
    """Reads one PROXY header from the start of a connection, incrementally.

    :meth:`receive_data` is given each read in turn; it returns None while
    the header is incomplete and the :class:`ProxyHeader` (with the bytes
    after it as ``remaining``) once it is complete; it raises
    :class:`RemoteProtocolError` as soon as the bytes cannot be a valid
    header.  After a result or an error the reader is done: feeding it again
    is a :class:`LocalProtocolError`.
    """

    def __init__(self, *, max_v2_header: int = MAX_V2_HEADER):
        self.max_v2_header = max_v2_header
        self._buffer = bytearray()
        self._done = False

    @property
    def buffered(self) -> bytes:
        """What has been received and not yet consumed (for a log line)."""
        return bytes(self._buffer)

    def receive_data(self, data: bytes) -> ProxyHeader | None:
        if self._done:
            raise LocalProtocolError("the PROXY header was already read")
        self._buffer += data
        try:
            result = self._parse()
        except RemoteProtocolError:
            self._done = True
            raise
        if result is not None:
            self._done = True
            self._buffer = bytearray()
        return result

    # -- parsing ---------------------------------------------------------------------
    def _parse(self) -> ProxyHeader | None:
        buf = self._buffer
        if not buf:
            return None
        if buf[0] == V2_SIGNATURE[0]:
            n = min(len(buf), len(V2_SIGNATURE))
            if buf[:n] != V2_SIGNATURE[:n]:
                raise RemoteProtocolError("not a PROXY protocol header: bad v2 signature")
            if len(buf) < _V2_FIXED:
                return None
            return self._parse_v2()
        n = min(len(buf), len(_V1_PREFIX))
        if buf[:n] != _V1_PREFIX[:n]:
            raise RemoteProtocolError("not a PROXY protocol header: expected 'PROXY ' or the v2 signature")
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) >= MAX_V1_HEADER:
                raise RemoteProtocolError(f"PROXY v1 line longer than {MAX_V1_HEADER} bytes")
            # a bare LF (or CR not followed by LF) can never become a valid line
            if b"\n" in buf or b"\r" in buf[:-1]:
                raise RemoteProtocolError("PROXY v1 line not terminated by CRLF")
            return None
        if end + 2 > MAX_V1_HEADER:
            raise RemoteProtocolError(f"PROXY v1 line longer than {MAX_V1_HEADER} bytes")
        line = bytes(buf[:end])
        if b"\n" in line or b"\r" in line:  # as refused above, had the line come in pieces
            raise RemoteProtocolError("PROXY v1 line not terminated by CRLF")
        return _parse_v1_line(line, bytes(buf[end + 2 :]))

    def _parse_v2(self) -> ProxyHeader | None:
        buf = self._buffer
        ver_cmd, fam, length = buf[12], buf[13], struct.unpack_from("!H", buf, 14)[0]
        if ver_cmd >> 4 != 0x2:
            raise RemoteProtocolError(f"PROXY v2 header with version {ver_cmd >> 4}, expected 2")
        command = _COMMANDS.get(ver_cmd & 0x0F)
        if command is None:
            raise RemoteProtocolError(f"PROXY v2 header with unknown command {ver_cmd & 0x0F:#x}")
        family_info = _FAMILIES.get(fam >> 4)
        transport = _TRANSPORTS.get(fam & 0x0F)
        if family_info is None or transport is None:
            raise RemoteProtocolError(f"PROXY v2 header with unknown address family/protocol {fam:#04x}")
        total = _V2_FIXED + length
        if total > self.max_v2_header:
            raise RemoteProtocolError(
                f"PROXY v2 header of {total} bytes, more than the {self.max_v2_header} allowed"
            )
        if len(buf) < total:
            return None
        family, size = family_info
        body = bytes(buf[_V2_FIXED:total])
        remaining = bytes(buf[total:])
        source = destination = None
        if command == "LOCAL":
            # the specification: skip whatever the length says, ignore any address
            return ProxyHeader(2, "LOCAL", family, transport, None, None, (), total, remaining)
        if len(body) < size:
            raise RemoteProtocolError(
                f"PROXY v2 {family} header of length {length}, too short for its {size}-byte addresses"
            )
        if family == "TCP4":
            src, dst, sport, dport = struct.unpack_from("!4s4sHH", body)
            source = (str(ipaddress.IPv4Address(src)), sport)
            destination = (str(ipaddress.IPv4Address(dst)), dport)
        elif family == "TCP6":
            src, dst, sport, dport = struct.unpack_from("!16s16sHH", body)
            source = (str(ipaddress.IPv6Address(src)), sport)
            destination = (str(ipaddress.IPv6Address(dst)), dport)
        elif family == "UNIX":
            source = _unix_path(body[:108])
            destination = _unix_path(body[108:216])
        tlvs = _parse_tlvs(body[size:])
        return ProxyHeader(2, "PROXY", family, transport, source, destination, tlvs, total, remaining)


def _unix_path(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")


def _parse_tlvs(data: bytes) -> tuple:
    tlvs = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < 3:
            raise RemoteProtocolError("PROXY v2 TLV truncated: fewer than 3 bytes left for type and length")
        kind, size = data[offset], struct.unpack_from("!H", data, offset + 1)[0]
        offset += 3
        if offset + size > len(data):
            raise RemoteProtocolError(f"PROXY v2 TLV {kind:#04x} of length {size} runs past the header")
        tlvs.append((kind, data[offset : offset + size]))
        offset += size
    return tuple(tlvs)


def _parse_port(text: str) -> int:
    if not text.isdigit() or not text.isascii() or len(text) > 5 or (len(text) > 1 and text[0] == "0"):
        raise RemoteProtocolError(f"PROXY v1 line with a bad port {text!r}")
    port = int(text)
    if port > 65535:
        raise RemoteProtocolError(f"PROXY v1 line with a bad port {text!r}")
    return port


def _parse_v1_line(line: bytes, remaining: bytes) -> ProxyHeader:
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise RemoteProtocolError("PROXY v1 line with non-ASCII bytes") from None
    parts = text.split(" ")
    if len(parts) < 2 or parts[0] != "PROXY":
        raise RemoteProtocolError(f"malformed PROXY v1 line {text!r}")
    family = parts[1]
    length = len(line) + 2
    if family == "UNKNOWN":
        # the rest of the line (if any) is to be ignored
        return ProxyHeader(1, "LOCAL", "UNKNOWN", "STREAM", None, None, (), length, remaining)
    if family not in ("TCP4", "TCP6"):
        raise RemoteProtocolError(f"PROXY v1 line with unknown protocol {family!r}")
    if len(parts) != 6:
        raise RemoteProtocolError(f"malformed PROXY v1 line {text!r}: expected 6 fields")
    cls = ipaddress.IPv4Address if family == "TCP4" else ipaddress.IPv6Address
    addrs = []
    for value in parts[2:4]:
        try:
            if "%" in value:
                raise ValueError("scoped address")
            addrs.append(str(cls(value)))
        except ValueError:
            raise RemoteProtocolError(f"PROXY v1 line with a bad {family} address {value!r}") from None
    sport, dport = _parse_port(parts[4]), _parse_port(parts[5])
    return ProxyHeader(1, "PROXY", family, "STREAM", (addrs[0], sport), (addrs[1], dport), (), length, remaining)


# -- encoding -----------------------------------------------------------------------------
def _ip(host: str):
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        raise LocalProtocolError(f"not an IP address: {host!r}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _check_port(port) -> int:
    port = int(port)
    if not 0 <= port <= 65535:
        raise LocalProtocolError(f"not a port number: {port}")
    return port


def encode_v2(source: tuple, destination: tuple, *, tlvs=()) -> bytes:
    """A v2 ``PROXY`` header over TCP: ``source``/``destination`` are ``(host, port)``.

    The family (TCP4 or TCP6) follows the addresses; an IPv4-mapped IPv6
    address counts as IPv4.  If one address is IPv4 and the other IPv6, both
    are sent as IPv6 (IPv4-mapped).  ``tlvs``: ``(type, value)`` pairs.
    """
    src, dst = _ip(source[0]), _ip(destination[0])
    sport, dport = _check_port(source[1]), _check_port(destination[1])
    if src.version == dst.version == 4:
        fam, addresses = 0x11, src.packed + dst.packed
    else:
        def v6(a):
            return a if a.version == 6 else ipaddress.IPv6Address(f"::ffff:{a}")

        fam, addresses = 0x21, v6(src).packed + v6(dst).packed
    body = addresses + struct.pack("!HH", sport, dport) + _encode_tlvs(tlvs)
    if _V2_FIXED + len(body) > MAX_V2_HEADER:
        raise LocalProtocolError(f"PROXY v2 header longer than {MAX_V2_HEADER} bytes")
    return V2_SIGNATURE + bytes((0x21, fam)) + struct.pack("!H", len(body)) + body


def encode_v2_local(*, tlvs=()) -> bytes:
    """A v2 ``LOCAL`` header (the proxy's own connection, e.g. a health check)."""
    body = _encode_tlvs(tlvs)
    return V2_SIGNATURE + bytes((0x20, 0x00)) + struct.pack("!H", len(body)) + body


def _encode_tlvs(tlvs) -> bytes:
    out = bytearray()
    for kind, value in tlvs:
        if not 0 <= int(kind) <= 255 or len(value) > 65535:
            raise LocalProtocolError(f"bad TLV type {kind} or length {len(value)}")
        out += bytes((int(kind),)) + struct.pack("!H", len(value)) + bytes(value)
    return bytes(out)


def encode_v1(source: tuple | None = None, destination: tuple | None = None) -> bytes:
    """A v1 line: ``PROXY TCP4|TCP6 ...`` for two ``(host, port)``, ``PROXY UNKNOWN`` for None."""
    if source is None or destination is None:
        return b"PROXY UNKNOWN\r\n"
    src, dst = _ip(source[0]), _ip(destination[0])
    if src.version != dst.version:
        raise LocalProtocolError("a v1 line needs both addresses of the same family")
    family = "TCP4" if src.version == 4 else "TCP6"
    line = f"PROXY {family} {src} {dst} {_check_port(source[1])} {_check_port(destination[1])}\r\n"
    return line.encode("ascii")


# -- the client's TLS, carried in v2 TLVs (HAProxy's PP2_TYPE_AUTHORITY and PP2_TYPE_SSL) ------------
#: the host name the client asked for (its TLS SNI)
PP2_TYPE_AUTHORITY = 0x02
#: the client's TLS: a client byte, a 32-bit verify result (0: verified), then sub-TLVs
PP2_TYPE_SSL = 0x20
PP2_SUBTYPE_SSL_VERSION = 0x21
PP2_SUBTYPE_SSL_CN = 0x22
#: client flags: the connection used TLS; it presented a certificate on this connection
PP2_CLIENT_SSL = 0x01
PP2_CLIENT_CERT_CONN = 0x02
#: Junction's TLV (the application range 0xE0-0xEF): the verified client certificate's whole
#: subject DN (RFC 4514), UTF-8, which certificate login maps to a user
PP2_TYPE_JUNCTION_SUBJECT = 0xE0


def tls_tlvs(*, sni: str | None, version: str | None, subject: str | None, cn: str | None) -> tuple:
    """The TLVs describing a TLS client: its SNI name, TLS version, and verified certificate."""
    tlvs = []
    if sni:
        tlvs.append((PP2_TYPE_AUTHORITY, sni.encode("idna")))
    flags = PP2_CLIENT_SSL | (PP2_CLIENT_CERT_CONN if subject else 0)
    subs = _encode_tlvs(
        ([(PP2_SUBTYPE_SSL_VERSION, version.encode())] if version else [])
        + ([(PP2_SUBTYPE_SSL_CN, cn.encode())] if cn else [])
    )
    tlvs.append((PP2_TYPE_SSL, bytes((flags,)) + struct.pack("!I", 0) + subs))
    if subject:
        tlvs.append((PP2_TYPE_JUNCTION_SUBJECT, subject.encode()))
    return tuple(tlvs)


@dataclass(frozen=True)
class ClientTLS:
    """What a v2 header says of the client's TLS (:func:`client_tls`)."""

    sni: str | None = None
    version: str | None = None
    #: the verified certificate's subject DN (None: no certificate, or not verified)
    subject: str | None = None


def client_tls(header) -> ClientTLS | None:
    """The client TLS a v2 header's TLVs describe, or None when it says nothing of TLS.

    The subject is given only for a certificate the proxy verified (the SSL
    TLV's client flags say a certificate came on this connection and its
    verify field is 0).
    """
    tlvs = dict(getattr(header, "tlvs", ()) or ())
    ssl = tlvs.get(PP2_TYPE_SSL)
    authority = tlvs.get(PP2_TYPE_AUTHORITY)
    if ssl is None and authority is None:
        return None
    sni = authority.decode("ascii", "replace").lower() if authority else None
    version = subject = None
    if ssl is not None and len(ssl) >= 5:
        flags, verify = ssl[0], struct.unpack("!I", ssl[1:5])[0]
        try:
            subs = dict(_parse_tlvs(ssl[5:]))
        except RemoteProtocolError:
            subs = {}
        if PP2_SUBTYPE_SSL_VERSION in subs:
            version = subs[PP2_SUBTYPE_SSL_VERSION].decode("ascii", "replace")
        raw = tlvs.get(PP2_TYPE_JUNCTION_SUBJECT)
        if raw is not None and flags & PP2_CLIENT_CERT_CONN and verify == 0:
            subject = raw.decode("utf-8", "replace")
    return ClientTLS(sni, version, subject)
