"""The gateway's OpenWire opening reader, on the real client's frames (openwire_frames.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.protocols.errors import LocalProtocolError
from junction.protocols.opening import Passthrough
from junction.protocols.openwire.codec import Negotiated, OpenWireCodec, decode_frame, encode_frame
from junction.protocols.openwire.commands import (
    ConnectionControl,
    ConnectionError,
    ConnectionInfo,
    ExceptionResponse,
    KeepAliveInfo,
)
from junction.protocols.openwire.opening import (
    OPENING_MAX_BYTES,
    OpeningComplete,
    OpeningFailed,
    OpeningState,
    OpenWireCredentials,
    OpenWireOpening,
    first_frame_size,
    replayed_offer,
)
from junction.protocols.openwire.structures import ConnectionId
from junction.protocols.openwire.wireformat import WireFormat, negotiate
from junction.protocols.registry import MATCH
from junction.protocols.signatures import openwire as sniff
from tests.unit.openwire_frames import REAL_FRAMES

TIGHT = WireFormat(tight_encoding=True)


def real(name: str, mode: str = "tight-nocache") -> bytes:
    if name == "WFI":
        mode = "loose-nocache"
    return next(bytes.fromhex(h) for m, n, h in REAL_FRAMES if (m, n) == (mode, name))


OPENING = real("WFI") + real("ConnectionInfo")


class Logins:
    def __init__(self, accept: bool = True):
        self.accept = accept
        self.seen: list[OpenWireCredentials] = []

    def __call__(self, credentials):
        self.seen.append(credentials)
        return f"principal:{credentials.username}" if self.accept else None


def client_reads(data: bytes) -> list:
    """What the real client makes of the gateway's bytes (its codec, offering the cache as it does)."""
    return OpenWireCodec(WireFormat(cache_enabled=True)).receive_data(data)


def test_the_real_opening_one_byte_at_a_time():
    logins = Logins()
    opening = OpenWireOpening(logins, remote_address="127.0.0.1:5000")
    events = []
    for i in range(len(OPENING)):
        events += opening.receive_data(OPENING[i:i + 1])
        assert opening.buffered <= OPENING_MAX_BYTES
    [done] = events
    assert isinstance(done, OpeningComplete)
    assert (done.client_id, done.username, done.principal, done.fault_tolerant) == (
        "cid1", "user", "principal:user", True)
    assert done.wire_format.tight_encoding
    assert replay_after_the_offer(done.replay) == OPENING[first_frame_size(OPENING):]
    assert logins.seen == [OpenWireCredentials("user", "secret", "cid1")]
    assert "secret" not in repr(logins.seen[0]) and "secret" not in repr(done)
    [negotiated] = client_reads(opening.data_to_send())  # our WireFormatInfo, nothing else
    assert isinstance(negotiated, Negotiated) and negotiated.settled.tight_encoding
    assert opening.state is OpeningState.COMPLETE
    assert opening.receive_data(b"more") == [Passthrough(b"more")]


def test_the_gateway_answers_the_wireformatinfo_before_the_connectioninfo_arrives():
    opening = OpenWireOpening(Logins())
    assert opening.receive_data(real("WFI")) == []
    assert isinstance(client_reads(opening.data_to_send())[0], Negotiated)


def test_the_offer_goes_out_with_its_own_frame_limit_not_the_openings():
    """The client keeps to the settled MaxFrameSize for the whole connection: the backend's
    limit, not the 64 KiB the opening reads before the login."""
    offer = WireFormat(max_frame_size=10 * 1024 * 1024)
    opening = OpenWireOpening(Logins(), offer=offer)
    opening.receive_data(real("WFI"))
    [negotiated] = client_reads(opening.data_to_send())
    assert negotiated.peer.max_frame_size == 10 * 1024 * 1024
    assert negotiated.settled.max_frame_size == 10 * 1024 * 1024


def test_keep_alives_and_the_failover_connection_control_are_kept_for_the_replay():
    stream = (real("WFI") + encode_frame(ConnectionControl(fault_tolerant=True), TIGHT)
              + encode_frame(KeepAliveInfo(), TIGHT) + real("ConnectionInfo"))
    [done] = OpenWireOpening(Logins()).receive_data(stream)
    assert replay_after_the_offer(done.replay) == stream[first_frame_size(stream):]


def replay_after_the_offer(replay: bytes) -> bytes:
    """What a replay holds after its WireFormatInfo (the client's, as the gateway settled it)."""
    return replay[first_frame_size(replay):]


def replayed_format(replay: bytes) -> WireFormat:
    backend = OpenWireCodec(WireFormat(cache_enabled=True))
    [negotiated] = [e for e in backend.receive_data(replay[:first_frame_size(replay)]) if isinstance(e, Negotiated)]
    return negotiated.peer


def test_the_replayed_wireformatinfo_offers_the_backend_what_the_gateway_settled():
    """The real client offers the marshalling cache; a gateway that does not take it replays an
    offer without it, so a backend whose own offer has the cache (Junction's node, ActiveMQ
    Classic) settles without it too, as the client did; the client's other options travel."""
    opening = OpenWireOpening(Logins(), offer=WireFormat(max_frame_size=1 << 20))
    [done] = opening.receive_data(OPENING)
    client = WireFormat.from_info(decode_frame(OPENING[:first_frame_size(OPENING)]))
    assert client.cache_enabled and client.max_frame_size > 1 << 20
    offered = replayed_format(done.replay)
    assert offered == replayed_offer(client, negotiate(WireFormat(max_frame_size=1 << 20), client))
    assert (offered.cache_enabled, offered.tight_encoding, offered.max_frame_size) == (False, True, 1 << 20)
    assert (offered.max_inactivity, offered.extra) == (client.max_inactivity, client.extra)
    backend = negotiate(WireFormat(cache_enabled=True), offered)
    assert backend.cache_slots == done.wire_format.cache_slots
    assert backend.tight_encoding == done.wire_format.tight_encoding


def test_a_refused_login_gets_a_security_exception_to_its_connectioninfo():
    opening = OpenWireOpening(Logins(accept=False), remote_address="/127.0.0.1:5000")
    [failed] = opening.receive_data(OPENING)
    assert isinstance(failed, OpeningFailed) and failed.login_refused
    assert (failed.user, failed.client_id, failed.condition) == ("user", "cid1", "java.lang.SecurityException")
    _, answer = client_reads(opening.data_to_send())
    assert isinstance(answer, ExceptionResponse) and answer.correlation_id == 1
    assert answer.exception.class_name == "java.lang.SecurityException"
    assert answer.exception.message == ("AMQ229031: Unable to validate user from /127.0.0.1:5000. Username: user; "
                                        "SSL certificate subject DN: unavailable")
    assert opening.receive_data(b"late") == []


def test_another_command_before_the_connectioninfo_is_refused():
    opening = OpenWireOpening(Logins())
    [failed] = opening.receive_data(real("WFI") + real("SessionInfo"))
    assert failed.condition == "java.lang.IllegalStateException" and "SessionInfo before the ConnectionInfo" in failed.reason
    _, answer = client_reads(opening.data_to_send())
    assert isinstance(answer, ConnectionError)  # the SessionInfo asked for no response


def test_a_command_before_the_wireformatinfo_is_refused_without_an_answer():
    opening = OpenWireOpening(Logins())
    [failed] = opening.receive_data(encode_frame(ConnectionInfo(connection_id=ConnectionId("c"))))
    assert "before the WireFormatInfo" in failed.reason and opening.data_to_send() == b""


@pytest.mark.parametrize("garbage", [b"\x00\x00\x00\x01\x4d", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00"])
def test_bad_bytes_fail_the_opening(garbage):
    opening = OpenWireOpening(Logins())
    events = opening.receive_data(real("WFI") + garbage)
    assert isinstance(events[-1], OpeningFailed)
    assert isinstance(client_reads(opening.data_to_send())[-1], ConnectionError)


def test_too_many_bytes_before_the_connectioninfo():
    opening = OpenWireOpening(Logins(), max_bytes=400)
    keep_alives = b"".join(encode_frame(KeepAliveInfo(), TIGHT) for _ in range(10))
    events = opening.receive_data(real("WFI") + keep_alives)
    assert isinstance(events[-1], OpeningFailed) and "more than 400 bytes" in events[-1].reason


def test_redirect_a_failover_client():
    opening = OpenWireOpening(Logins())
    opening.receive_data(OPENING)
    out = opening.redirect("r1", "127.0.0.1", 61617)
    _, control = client_reads(out)
    assert control == ConnectionControl(connected_brokers="tcp://127.0.0.1:61617",
                                        reconnect_to="tcp://127.0.0.1:61617", rebalance_connection=True)
    with pytest.raises(LocalProtocolError):
        opening.refuse("r1", "REFUSED_UNAVAILABLE")


@pytest.mark.parametrize(("scheme", "host", "uri"), [
    ("ssl", "gw.example", "ssl://gw.example:61617"),  # a target whose connector has TLS
    ("tcp", "::1", "tcp://[::1]:61617"),  # an IPv6 host in brackets, as the client parses a URI
])  # fmt: skip
def test_redirect_names_the_targets_transport(scheme, host, uri):
    asked = []
    opening = OpenWireOpening(Logins(), redirect_scheme=lambda h, p: asked.append((h, p)) or scheme)
    opening.receive_data(OPENING)
    _, control = client_reads(opening.redirect("r1", host, 61617))
    assert (control.reconnect_to, control.connected_brokers) == (uri, uri)
    assert asked == [(host, 61617)]


def test_a_plain_tcp_client_is_not_redirected():
    info = ConnectionInfo(command_id=1, response_required=True, connection_id=ConnectionId("c"), client_id="x")
    opening = OpenWireOpening(Logins())
    opening.receive_data(real("WFI") + encode_frame(info, TIGHT))
    _, answer = client_reads(opening.redirect("r1", "h", 1))
    assert answer.exception.class_name == "java.lang.IllegalStateException"
    assert answer.exception.message == "Client not fault tolerant"  # Artemis's words


@pytest.mark.parametrize("status, text", [("REFUSED_UNAVAILABLE", "Connection router r1 is not ready"),
                                          ("REFUSED_USE_ANOTHER", "Connection router r1 rejected this connection")])
def test_refusals_carry_the_routers_text(status, text):
    opening = OpenWireOpening(Logins())
    opening.receive_data(OPENING)
    _, answer = client_reads(opening.refuse("r1", status))
    assert isinstance(answer, ExceptionResponse) and answer.correlation_id == 1
    assert answer.exception.message == text


def test_the_sniffer_and_the_first_frame():
    assert sniff(OPENING[:30]) is MATCH
    assert first_frame_size(OPENING) == len(real("WFI")) and first_frame_size(b"\x00") is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)), max_size=3),
       st.integers(1, 50))
def test_the_reader_never_raises_for_what_the_client_sent(garbage, mutations, cut):
    stream = bytearray(OPENING + garbage)
    for pos, value in mutations:
        stream[pos % len(stream)] = value
    opening = OpenWireOpening(Logins())
    events = []
    for i in range(0, len(stream), cut):
        events += opening.receive_data(bytes(stream[i:i + cut]))
    assert opening.buffered <= OPENING_MAX_BYTES
    assert all(isinstance(e, (OpeningComplete, OpeningFailed, Passthrough)) for e in events)
    opening.data_to_send()


def test_where_the_opening_fails_does_not_depend_on_the_cut():
    """Found by the fuzzer: an oversized frame's prefix before max_bytes is the failure, read whole
    or byte by byte (the codec reads no byte past max_bytes)."""
    stream = real("WFI") + b"\x00\x01\x00\x01" + bytes(100)  # 65,537: one over the frame limit
    outcomes = []
    for chunks in ([stream], [stream[i:i + 1] for i in range(len(stream))]):
        opening = OpenWireOpening(Logins(), max_bytes=400)
        events = [e for c in chunks for e in opening.receive_data(c)]
        outcomes.append([(type(e).__name__, e.condition) for e in events])
    assert outcomes[0] == outcomes[1] == [("OpeningFailed", "org.apache.activemq.MaxFrameSizeExceededException")]
