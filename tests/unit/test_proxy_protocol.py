"""The PROXY protocol codec (junction/protocols/proxy.py) and the acceptor that reads it.

Codec: every v1 and v2 form the specification defines (TCP4, TCP6, UNIX,
UNSPEC, LOCAL, UNKNOWN), fed whole and one byte at a time, the leftover
bytes, the named limits, round trips and random garbage (Hypothesis).
Acceptor: :class:`junction.edge.acceptor.ProxyProtocolFactory` on a
``StringTransport`` and a ``task.Clock``, in front of the real STOMP server
and the multi-protocol switch.
"""

from __future__ import annotations

import ipaddress
import logging
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.errors import LocalProtocolError, RemoteProtocolError
from junction.protocols.proxy import (
    MAX_V1_HEADER,
    MAX_V2_HEADER,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderReader,
    encode_v1,
    encode_v2,
    encode_v2_local,
)


def read_all(data: bytes, *, one_at_a_time: bool = False) -> ProxyHeader | None:
    reader = ProxyHeaderReader()
    if not one_at_a_time:
        return reader.receive_data(data)
    for i in range(len(data)):
        result = reader.receive_data(data[i : i + 1])
        if result is not None:
            # complete exactly at its own last byte, neither before nor after
            assert result.length == i + 1
            return result
    return None


def v2(ver_cmd: int, fam: int, body: bytes) -> bytes:
    return V2_SIGNATURE + bytes((ver_cmd, fam)) + struct.pack("!H", len(body)) + body


# -- v1 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bytewise", [False, True])
def test_v1_tcp4(bytewise):
    data = b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 61616\r\nCONNECT\n"
    header = read_all(data, one_at_a_time=bytewise)
    if bytewise:
        # fed byte by byte, the header completes at its own last byte: nothing after it yet
        assert header.remaining == b""
    else:
        assert header.remaining == b"CONNECT\n"
    assert (header.version, header.command, header.family, header.transport) == (1, "PROXY", "TCP4", "STREAM")
    assert header.source == ("192.0.2.1", 56324)
    assert header.destination == ("198.51.100.2", 61616)
    assert header.has_address and header.version_name == "V1"
    assert header.length == data.index(b"\r\n") + 2


def test_v1_tcp6():
    header = read_all(b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n")
    assert header.family == "TCP6"
    assert header.source == ("2001:db8::1", 1)
    assert header.destination == ("::1", 65535)


@pytest.mark.parametrize("line", [b"PROXY UNKNOWN\r\n", b"PROXY UNKNOWN ffff:: ffff:: 65535 65535\r\n"])
def test_v1_unknown_keeps_real_addresses(line):
    header = read_all(line + b"x")
    assert (header.command, header.family, header.source, header.destination) == ("LOCAL", "UNKNOWN", None, None)
    assert not header.has_address
    assert header.remaining == b"x"


def test_v1_longest_line_accepted_and_one_more_refused():
    longest = b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n"
    longest = b"PROXY UNKNOWN " + b"f" * (MAX_V1_HEADER - len(b"PROXY UNKNOWN ") - 2) + b"\r\n"
    assert len(longest) == MAX_V1_HEADER
    assert read_all(longest).family == "UNKNOWN"
    too_long = b"PROXY UNKNOWN " + b"f" * (MAX_V1_HEADER - len(b"PROXY UNKNOWN ") - 1) + b"\r\n"
    with pytest.raises(RemoteProtocolError, match="longer than 107"):
        read_all(too_long)
    # without its CRLF, the error comes as soon as 107 bytes have arrived
    reader = ProxyHeaderReader()
    assert reader.receive_data(b"PROXY TCP4 " + b"1" * 95) is None
    with pytest.raises(RemoteProtocolError, match="longer than"):
        reader.receive_data(b"1")


@pytest.mark.parametrize(
    "line, problem",
    [
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n", "6 fields"),
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 61616 x\r\n", "6 fields"),
        (b"PROXY TCP5 192.0.2.1 198.51.100.2 1 2\r\n", "unknown protocol"),
        (b"PROXY TCP4 192.0.2.256 198.51.100.2 1 2\r\n", "bad TCP4 address"),
        (b"PROXY TCP4 ::1 ::1 1 2\r\n", "bad TCP4 address"),
        (b"PROXY TCP6 192.0.2.1 ::1 1 2\r\n", "bad TCP6 address"),
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 65536 2\r\n", "bad port"),
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 01 2\r\n", "bad port"),
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 -1 2\r\n", "bad port"),
        (b"PROXY TCP4  192.0.2.1 198.51.100.2 1 2\r\n", "6 fields"),
        (b"PROXY TCP4 192.0.2.1 198.51.100.2 1 2\n", "CRLF"),
        (b"PROXY \xff\r\n", "non-ASCII"),
        (b"PROXY\r\n", "expected 'PROXY '"),
        (b"proxy TCP4 1.2.3.4 1.2.3.4 1 2\r\n", "expected 'PROXY '"),
        (b"CONNECT\naccept-version:1.2\n\n\x00", "expected 'PROXY '"),
        (b"AMQP\x00\x01\x00\x00", "expected 'PROXY '"),
    ],
)
def test_v1_malformed(line, problem):
    with pytest.raises(RemoteProtocolError, match=problem):
        read_all(line)
    with pytest.raises(RemoteProtocolError, match=problem):
        read_all(line, one_at_a_time=True)


def test_no_header_is_refused_at_the_first_byte():
    """Never guess: a first byte that cannot start a header is an error at once."""
    with pytest.raises(RemoteProtocolError):
        ProxyHeaderReader().receive_data(b"C")


def test_reader_is_done_after_a_result():
    reader = ProxyHeaderReader()
    reader.receive_data(encode_v2_local())
    with pytest.raises(LocalProtocolError):
        reader.receive_data(b"more")


# -- v2 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bytewise", [False, True])
def test_v2_tcp4_with_tlvs(bytewise):
    body = bytes([192, 0, 2, 1, 198, 51, 100, 2]) + struct.pack("!HH", 56324, 61616)
    body += b"\x02" + struct.pack("!H", 5) + b"hello" + b"\x04" + struct.pack("!H", 0)
    data = v2(0x21, 0x11, body) + b"AMQP\x00\x01\x00\x00"
    header = read_all(data, one_at_a_time=bytewise)
    assert (header.version, header.command, header.family, header.transport) == (2, "PROXY", "TCP4", "STREAM")
    assert header.source == ("192.0.2.1", 56324)
    assert header.destination == ("198.51.100.2", 61616)
    assert header.tlvs == ((0x02, b"hello"), (0x04, b""))
    assert header.length == 16 + len(body)
    assert header.remaining == (b"" if bytewise else b"AMQP\x00\x01\x00\x00")
    assert header.version_name == "V2"


def test_v2_tcp6():
    src, dst = ipaddress.IPv6Address("2001:db8::7"), ipaddress.IPv6Address("::1")
    header = read_all(v2(0x21, 0x21, src.packed + dst.packed + struct.pack("!HH", 1, 2)))
    assert header.family == "TCP6" and header.source == ("2001:db8::7", 1) and header.destination == ("::1", 2)


def test_v2_unix():
    body = b"/run/client.sock".ljust(108, b"\x00") + b"/run/server.sock".ljust(108, b"\x00")
    header = read_all(v2(0x21, 0x31, body))
    assert header.family == "UNIX"
    assert header.source == "/run/client.sock" and header.destination == "/run/server.sock"
    assert not header.has_address  # no host:port to use as the peer


def test_v2_unspec_proxy_and_dgram():
    header = read_all(v2(0x21, 0x00, b""))
    assert (header.family, header.transport, header.source) == ("UNSPEC", "UNSPEC", None)
    assert not header.has_address
    header = read_all(v2(0x21, 0x12, bytes(12)))
    assert header.transport == "DGRAM"


def test_v2_local_skips_any_address_block():
    """LOCAL: the receiver must skip ``len`` bytes and ignore the addresses."""
    header = read_all(v2(0x20, 0x11, bytes(12) + b"\x01\x00\x01z") + b"rest")
    assert (header.command, header.source, header.destination, header.tlvs) == ("LOCAL", None, None, ())
    assert header.remaining == b"rest"
    assert read_all(encode_v2_local()).command == "LOCAL"


@pytest.mark.parametrize(
    "data, problem",
    [
        (V2_SIGNATURE[:5] + b"X", "bad v2 signature"),
        (v2(0x11, 0x11, bytes(12)), "version 1"),
        (v2(0x31, 0x11, bytes(12)), "version 3"),
        (v2(0x22, 0x11, bytes(12)), "unknown command"),
        (v2(0x21, 0x41, bytes(12)), "unknown address family"),
        (v2(0x21, 0x13, bytes(12)), "unknown address family"),
        (v2(0x21, 0x11, bytes(11)), "too short"),
        (v2(0x21, 0x21, bytes(35)), "too short"),
        (v2(0x21, 0x31, bytes(215)), "too short"),
        (v2(0x21, 0x11, bytes(12) + b"\x01\x00"), "TLV truncated"),
        (v2(0x21, 0x11, bytes(12) + b"\x01\x00\x05abc"), "runs past"),
    ],
)
def test_v2_malformed(data, problem):
    with pytest.raises(RemoteProtocolError, match=problem):
        read_all(data)
    with pytest.raises(RemoteProtocolError, match=problem):
        read_all(data, one_at_a_time=True)


def test_v2_size_limit_is_checked_from_the_fixed_part():
    """A too-long header is refused as soon as its length field arrives, before its body."""
    reader = ProxyHeaderReader()
    fixed = V2_SIGNATURE + b"\x21\x11" + struct.pack("!H", MAX_V2_HEADER - 16 + 1)
    with pytest.raises(RemoteProtocolError, match=f"more than the {MAX_V2_HEADER}"):
        reader.receive_data(fixed)
    # exactly the limit is fine
    tlv = b"\x05" + struct.pack("!H", MAX_V2_HEADER - 16 - 12 - 3) + bytes(MAX_V2_HEADER - 16 - 12 - 3)
    header = read_all(v2(0x21, 0x11, bytes(12) + tlv))
    assert header.length == MAX_V2_HEADER


# -- encoding ---------------------------------------------------------------------------------
def test_encode_v2_wire_format():
    data = encode_v2(("192.0.2.1", 56324), ("198.51.100.2", 61616))
    assert data == (
        V2_SIGNATURE + b"\x21\x11\x00\x0c" + bytes([192, 0, 2, 1, 198, 51, 100, 2]) + struct.pack("!HH", 56324, 61616)
    )
    assert encode_v2_local() == V2_SIGNATURE + b"\x20\x00\x00\x00"


def test_encode_v2_mixed_and_mapped_families():
    header = read_all(encode_v2(("::ffff:10.0.0.1", 1), ("10.0.0.2", 2)))
    assert header.family == "TCP4" and header.source == ("10.0.0.1", 1)
    header = read_all(encode_v2(("10.0.0.1", 1), ("::1", 2)))
    assert header.family == "TCP6" and header.source == ("::ffff:a00:1", 1)


def test_encode_refuses_what_it_cannot_carry():
    with pytest.raises(LocalProtocolError):
        encode_v2(("localhost", 1), ("::1", 2))
    with pytest.raises(LocalProtocolError):
        encode_v2(("::1", 70000), ("::1", 2))
    with pytest.raises(LocalProtocolError):
        encode_v1(("::1", 1), ("10.0.0.1", 2))


ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).filter(lambda a: a.ipv4_mapped is None).map(str)
ports = st.integers(0, 65535)
tlvs = st.lists(st.tuples(st.integers(0, 255), st.binary(max_size=40)), max_size=5)


@given(family=st.sampled_from([ipv4, ipv6]), data=st.data(), extra=st.binary(max_size=30), cut=st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_round_trip_v1_and_v2(family, data, extra, cut):
    src = (data.draw(family), data.draw(ports))
    dst = (data.draw(family), data.draw(ports))
    kinds = data.draw(tlvs)
    for encoded, expected_tlvs in ((encode_v2(src, dst, tlvs=kinds), tuple((k, bytes(v)) for k, v in kinds)), (encode_v1(src, dst), ())):
        wire = encoded + extra
        reader = ProxyHeaderReader()
        result = None
        chunks = [wire[i : i + cut] for i in range(0, len(wire), cut)]
        got_at = None
        for index, chunk in enumerate(chunks):
            result = reader.receive_data(chunk)
            if result is not None:
                got_at = index
                break
        assert result is not None
        assert result.source == src and result.destination == dst
        assert result.tlvs == expected_tlvs
        assert result.length == len(encoded)
        # what followed the header in its read, plus the reads not fed, is the rest exactly
        assert result.remaining + b"".join(chunks[got_at + 1 :]) == extra


@given(st.binary(max_size=300), st.integers(1, 16))
@settings(max_examples=500, deadline=None)
def test_garbage_never_raises_anything_but_the_protocol_error(data, cut):
    for prefix in (b"", b"PROXY ", V2_SIGNATURE, V2_SIGNATURE + b"\x21"):
        reader = ProxyHeaderReader()
        wire = prefix + data
        try:
            for i in range(0, len(wire), cut):
                if reader.receive_data(wire[i : i + cut]) is not None:
                    break
        except RemoteProtocolError:
            pass


# -- the acceptor: ProxyProtocolFactory on StringTransport + Clock -----------------------------
from twisted.internet.address import IPv4Address, IPv6Address  # noqa: E402
from twisted.internet.testing import MemoryReactorClock, StringTransport  # noqa: E402

from junction.brokercore.amqp_server import AmqpFactory  # noqa: E402
from junction.brokercore.stomp_server import StompFactory, StompProtocol  # noqa: E402
from junction.config.model import Acceptor, Connector  # noqa: E402
from junction.edge.acceptor import (  # noqa: E402
    MultiProtocolFactory,
    ProxyHeaderProtocol,
    ProxyProtocolFactory,
    parse_trusted_sources,
    wrap_proxy_protocol,
)
from tests.unit.stomp_fixtures import ACCEPTOR, Broker  # noqa: E402

STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"
GATEWAY = ("127.0.0.1", 45000)  # the proxy as the core sees it
CLIENT = ("192.0.2.10", 51234)  # the client the header names
PROXY_ACCEPTOR = Acceptor(
    name="proxied",
    scheme="tcp",
    host="127.0.0.1",
    port=0,
    params={"proxyProtocolEnabled": "true"},
    anycast_prefix="/queue/",
    multicast_prefix="/topic/",
)


def proxied_factory(b: Broker, *, multi=False, trusted=(), timeout=10.0):
    if multi:
        inner = MultiProtocolFactory(
            {
                "STOMP": StompFactory(b.server, acceptor=PROXY_ACCEPTOR, reactor=b.clock),
                "AMQP": AmqpFactory(b.server, acceptor=PROXY_ACCEPTOR, reactor=b.clock),
            },
            reactor=b.clock,
            acceptor_name="proxied",
        )
    else:
        inner = StompFactory(b.server, acceptor=PROXY_ACCEPTOR, reactor=b.clock)
    return ProxyProtocolFactory(inner, reactor=b.clock, acceptor_name="proxied", timeout=timeout, trusted=trusted)


def accept(factory, peer=GATEWAY):
    """What the reactor does on an accepted connection; returns (protocol, transport) or (None, None)."""
    address = (IPv6Address if ":" in peer[0] else IPv4Address)("TCP", *peer)
    protocol = factory.buildProtocol(address)
    if protocol is None:
        return None, None
    transport = StringTransport(peerAddress=address, hostAddress=IPv4Address("TCP", "127.0.0.1", 61617))
    transport.protocol = protocol
    protocol.makeConnection(transport)
    return protocol, transport


def deliver(b: Broker, transport, data: bytes) -> None:
    """What the reactor does with a read: give it to the transport's current protocol."""
    transport.protocol.dataReceived(data)
    b.run()


def only_connection(b: Broker):
    (session,) = b.server.sessions
    return session.connection


@pytest.mark.parametrize("multi", [False, True], ids=["stomp-only", "sniffing"])
def test_v2_header_and_stomp_connect_in_one_read(multi):
    b = Broker()
    factory = proxied_factory(b, multi=multi)
    _protocol, transport = accept(factory)
    deliver(b, transport, encode_v2(CLIENT, ("198.51.100.1", 61617)) + STOMP_CONNECT)
    assert isinstance(transport.protocol, StompProtocol)
    assert transport.value().startswith(b"CONNECTED\n")
    info = only_connection(b)
    assert info.remote == "192.0.2.10:51234"
    assert (info.proxy_address, info.proxy_version) == ("127.0.0.1:45000", "V2")
    assert transport.protocol.transport.getHost() == IPv4Address("TCP", "198.51.100.1", 61617)
    assert transport.protocol in factory.connections
    assert [c for c in b.clock.getDelayedCalls() if isinstance(c.func.__self__, ProxyHeaderProtocol)] == []


@pytest.mark.parametrize("multi", [False, True], ids=["stomp-only", "sniffing"])
def test_v1_header_fed_one_byte_at_a_time(multi):
    b = Broker()
    _protocol, transport = accept(proxied_factory(b, multi=multi))
    data = encode_v1(("2001:db8::5", 4000), ("2001:db8::1", 61617)) + STOMP_CONNECT
    for i in range(len(data)):
        deliver(b, transport, data[i : i + 1])
    assert transport.value().startswith(b"CONNECTED\n")
    info = only_connection(b)
    assert info.remote == "2001:db8::5:4000"
    assert info.proxy_version == "V1"


@pytest.mark.parametrize("header", [encode_v2_local(), b"PROXY UNKNOWN\r\n"], ids=["v2-local", "v1-unknown"])
def test_local_and_unknown_keep_the_real_address(header):
    b = Broker()
    _protocol, transport = accept(proxied_factory(b))
    deliver(b, transport, header)
    deliver(b, transport, STOMP_CONNECT)
    assert transport.value().startswith(b"CONNECTED\n")
    info = only_connection(b)
    assert info.remote == "127.0.0.1:45000"
    assert info.proxy_address == "127.0.0.1:45000"


def test_a_connection_without_a_header_is_closed_and_logged(caplog):
    b = Broker()
    _protocol, transport = accept(proxied_factory(b, multi=True))
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        deliver(b, transport, STOMP_CONNECT)
    assert transport.disconnecting
    assert transport.value() == b""
    assert not b.server.sessions
    (record,) = [r for r in caplog.records if "PROXY" in r.getMessage()]
    message = record.getMessage()
    assert "proxied" in message and "127.0.0.1:45000" in message and "CONNECT" in message


def test_a_bad_header_is_closed_even_with_valid_bytes_after_it(caplog):
    b = Broker()
    _protocol, transport = accept(proxied_factory(b))
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        deliver(b, transport, b"PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n" + STOMP_CONNECT)
    assert transport.disconnecting and not b.server.sessions
    assert any("bad port" in r.getMessage() for r in caplog.records)


def test_untrusted_sources_are_closed_before_anything_is_read(caplog):
    b = Broker()
    factory = proxied_factory(b, trusted=parse_trusted_sources("10.0.0.0/8, 127.0.0.1, fd00::/8"))
    with caplog.at_level(logging.WARNING, logger="junction.acceptor"):
        assert accept(factory, ("192.0.2.99", 4000)) == (None, None)
        assert accept(factory, ("2001:db8::1", 4000)) == (None, None)
    assert sum("proxyTrustedSources" in r.getMessage() for r in caplog.records) == 2
    for trusted in (("127.0.0.1", 1), ("10.9.8.7", 2), ("fd00::17", 3), ("::ffff:10.1.1.1", 4)):
        protocol, _transport = accept(factory, trusted)
        assert isinstance(protocol, ProxyHeaderProtocol), trusted


def test_no_complete_header_within_the_timeout_closes(caplog):
    b = Broker()
    _protocol, transport = accept(proxied_factory(b, timeout=5.0))
    deliver(b, transport, b"PROXY TCP4 192.0")
    b.run(4.9)
    assert not transport.disconnecting
    with caplog.at_level(logging.INFO, logger="junction.acceptor"):
        b.run(0.2)
    assert transport.disconnecting
    assert any("within 5 s" in r.getMessage() and "PROXY TCP4" in r.getMessage() for r in caplog.records)
    assert [c for c in b.clock.getDelayedCalls() if isinstance(c.func.__self__, ProxyHeaderProtocol)] == []


def test_the_wrapped_factory_refusing_closes(caplog):
    """connectionsAllowed is applied behind the header, to the proxied client."""
    b = Broker()
    acceptor = Acceptor(name="p", scheme="tcp", host="h", port=0, params={"proxyProtocolEnabled": "true", "connectionsAllowed": "0"})
    factory = ProxyProtocolFactory(StompFactory(b.server, acceptor=acceptor, reactor=b.clock), reactor=b.clock)
    _protocol, transport = accept(factory)
    deliver(b, transport, encode_v2_local())
    assert transport.disconnecting


def test_wrap_proxy_protocol_follows_the_acceptor_params():
    b = Broker()
    inner = StompFactory(b.server, acceptor=ACCEPTOR, reactor=b.clock)
    assert wrap_proxy_protocol(inner, ACCEPTOR, reactor=b.clock, timeout=3) is inner
    for params in ({"proxyProtocolEnabled": "true"}, {"proxyEnabled": "TRUE", "proxyTrustedSources": "10.0.0.0/8"}):
        acceptor = Acceptor(name="a", scheme="tcp", host="h", port=0, params=params)
        wrapped = wrap_proxy_protocol(inner, acceptor, reactor=b.clock, timeout=3)
        assert isinstance(wrapped, ProxyProtocolFactory) and wrapped.wrapped is inner and wrapped.timeout == 3
    assert [str(n) for n in wrapped.trusted] == ["10.0.0.0/8"]
    with pytest.raises(ValueError):
        parse_trusted_sources("10.0.0.0/8,nonsense")


# -- the gateway's side: forward and probe -------------------------------------------------------
def test_forward_writes_a_v2_header_before_the_opening():
    from tests.unit.gateway_fixtures import Wire
    from tests.unit.test_gateway_forward import client_wire, connect_target, outcome

    reactor = MemoryReactorClock()
    connector = Connector(name="core", scheme="tcp", host="127.0.0.1", port=61001, params={"proxyProtocolEnabled": "true"})
    client = client_wire()  # peer 10.0.0.5:40000
    client.hostAddr = IPv4Address("TCP", "10.0.0.1", 61616)
    opening = b"CONNECT\n\n\x00"
    d = connect_and_forward_(client, opening, connector, reactor)
    _side, target = connect_target(reactor)
    outcome(d)
    header = ProxyHeaderReader().receive_data(target.value())
    assert (header.version, header.command) == (2, "PROXY")
    assert header.source == ("10.0.0.5", 40000) and header.destination == ("10.0.0.1", 61616)
    assert header.remaining == opening
    # without the parameter, nothing but the opening
    plain = Connector(name="core", scheme="tcp", host="127.0.0.1", port=61001)
    d = connect_and_forward_(client_wire(), opening, plain, reactor)
    _side, target = connect_target(reactor)
    outcome(d)
    assert target.value() == opening
    assert isinstance(client, Wire)


def connect_and_forward_(*args):
    from junction.gateway.forward import connect_and_forward

    return connect_and_forward(*args)


def test_forward_header_goes_before_the_amqp_handshake():
    from tests.unit.test_gateway_forward import client_wire, connect_target

    class Handshake:
        def start(self):
            return b"AMQP\x03\x01\x00\x00"

        def feed(self, data):
            return None

    reactor = MemoryReactorClock()
    connector = Connector(name="core", scheme="tcp", host="127.0.0.1", port=61001, params={"proxyEnabled": "true"})
    connect_and_forward_with_handshake = __import__("junction.gateway.forward", fromlist=["x"]).connect_and_forward
    connect_and_forward_with_handshake(client_wire(), b"rest", connector, reactor, handshake=Handshake())
    _side, target = connect_target(reactor)
    header = ProxyHeaderReader().receive_data(target.value())
    assert header.source == ("10.0.0.5", 40000)
    assert header.remaining == b"AMQP\x03\x01\x00\x00rest"
    for call in reactor.getDelayedCalls():
        call.cancel()


def test_the_probe_sends_a_v2_local_header_on_proxy_connectors():
    from junction.gateway.amqp_probe import AmqpTargetProbe
    from junction.routing.targets import Target

    params = {"proxyProtocolEnabled": "true"}
    for with_proxy in (True, False):
        reactor = MemoryReactorClock()
        probe = AmqpTargetProbe(reactor=reactor)
        connector = Connector(name="core", scheme="tcp", host="127.0.0.1", port=61001, params=params if with_proxy else {})
        target = Target(connector=connector)
        d = probe.check(target)
        d.addErrback(lambda _f: None)
        _host, _port, factory, _t, _b = reactor.tcpClients[0]
        protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 61001))
        transport = StringTransport()
        protocol.makeConnection(transport)
        sent = transport.value()
        if with_proxy:
            header = ProxyHeaderReader().receive_data(sent)
            assert header.command == "LOCAL" and header.remaining.startswith(b"AMQP")
        else:
            assert sent.startswith(b"AMQP")
        d.cancel()
        probe.release(target)


# -- configuration ---------------------------------------------------------------------------------
def _config(body: str):
    from junction.config.loader import parse_config

    text = '<configuration xmlns="urn:activemq">\n<core xmlns="urn:activemq:core">\n' + body + "\n</core>\n</configuration>\n"
    return parse_config(text, file="b.xml", env={})


def _errors(body: str) -> list:
    from junction.config.loader import ConfigErrors

    with pytest.raises(ConfigErrors) as info:
        _config(body)
    return [(e.file, e.line, e.message) for e in info.value.errors]


def test_config_accepts_the_proxy_parameters():
    cfg = _config(
        "<acceptors>\n"
        '<acceptor name="in">tcp://0.0.0.0:61617?protocols=STOMP,AMQP;proxyProtocolEnabled=true;'
        "proxyTrustedSources=127.0.0.1,10.0.0.0/8,::1,fd00::/8</acceptor>\n"
        '<acceptor name="alias">tcp://0.0.0.0:61618?proxyEnabled=true</acceptor>\n'
        "</acceptors>\n<connectors>\n"
        '<connector name="c">tcp://127.0.0.1:61617?proxyProtocolEnabled=true</connector>\n'
        '<connector name="d">tcp://127.0.0.1:61617?proxyEnabled=false</connector>\n'
        "</connectors>"
    )
    assert cfg.acceptors[0].params["proxyTrustedSources"] == "127.0.0.1,10.0.0.0/8,::1,fd00::/8"
    assert cfg.connectors[0].params["proxyProtocolEnabled"] == "true"


@pytest.mark.parametrize(
    "body, line, words",
    [
        ('<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyProtocolEnabled=yes</acceptor>\n</acceptors>', 4, "true or false"),
        ('<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyEnabled=1</acceptor>\n</acceptors>', 4, "true or false"),
        (
            '<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyProtocolEnabled=true;proxyTrustedSources=10.0.0.0/33</acceptor>\n</acceptors>',
            4,
            "not an IP address or CIDR",
        ),
        (
            '<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyProtocolEnabled=true;proxyTrustedSources=,</acceptor>\n</acceptors>',
            4,
            "got nothing",
        ),
        ('<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyTrustedSources=10.0.0.1</acceptor>\n</acceptors>', 4, "without proxyProtocolEnabled"),
        (
            '<acceptors>\n<acceptor name="a">tcp://0.0.0.0:1?proxyProtocolEnabled=true;proxyEnabled=true</acceptor>\n</acceptors>',
            4,
            "not both",
        ),
        ('<connectors>\n<connector name="c">tcp://h:1?proxyEnabled=maybe</connector>\n</connectors>', 4, "true or false"),
        ('<connectors>\n<connector name="c">tcp://h:1?proxyTrustedSources=10.0.0.1</connector>\n</connectors>', 4, "unknown connector parameter"),
    ],
)
def test_config_errors_name_file_and_line(body, line, words):
    errors = _errors(body)
    assert any(f == "b.xml" and n == line and words in m for f, n, m in errors), errors


# -- a gateway listener behind an HAProxy: SOURCE_IP is the proxied client -----------------------
def test_source_ip_key_behind_a_proxy_is_the_proxied_client():
    from tests.unit.gateway_fixtures import Wire
    from tests.unit.test_gateway_listener import CONNECT, Gateway

    g = Gateway("by-ip", params={"proxyProtocolEnabled": "true"})
    try:
        factory = wrap_proxy_protocol(g.factory, g.acceptor, reactor=g.reactor, timeout=10.0)
        assert isinstance(factory, ProxyProtocolFactory)

        def via_haproxy(client_host: str):
            # every connection comes from the HAProxy at 10.0.0.100
            protocol = factory.buildProtocol(IPv4Address("TCP", "10.0.0.100", 7000))
            wire = Wire("10.0.0.100", 7000)
            wire.protocol = protocol
            protocol.makeConnection(wire)
            wire.protocol.dataReceived(encode_v2((client_host, 5555), ("10.0.0.1", 61616)) + CONNECT)
            return wire

        via_haproxy("10.0.0.7")  # the by-ip router keeps 10.0.0.7 local
        assert len(g.local.built) == 1
        local = g.local.built[0]
        assert local.transport.getPeer() == IPv4Address("TCP", "10.0.0.7", 5555)
        assert local.transport.proxy_address == "10.0.0.100:7000"
        assert local.data == CONNECT
        elsewhere = via_haproxy("10.0.0.8")
        assert b"Connection router by-ip rejected this connection" in elsewhere.value()
        assert len(g.local.built) == 1
    finally:
        g.factory.close_all()
        g.stop()
