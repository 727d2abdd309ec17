"""The OpenWire gateway side: the backend's first frame (its WireFormatInfo) is dropped; a
redirect names the routed target's transport (``ssl://`` for a connector with TLS)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from junction.gateway.forward import ForwardHandshakeError
from junction.gateway.openwire_side import OpenWireSide, _DropWireFormatInfo, _FirstFrameDropped
from junction.protocols.openwire.codec import encode_frame
from junction.protocols.openwire.commands import ConnectionControl, Response
from junction.protocols.openwire.opening import OPENING_MAX_FRAME_SIZE
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT, WireFormat
from junction.protocols.registry import OPENWIRE
from tests.unit.test_openwire_opening import OPENING, client_reads

WFI = encode_frame(SERVER_WIRE_FORMAT.info())
AFTER = encode_frame(Response(correlation_id=1), WireFormat())


class Transport:
    def __init__(self):
        self.written = bytearray()
        self.aborted = False
        self.protocol = None

    def write(self, data):
        self.written += data

    def abortConnection(self):
        self.aborted = True


@pytest.mark.parametrize("cut", [1, 3, 4, 5, len(WFI) - 1, len(WFI), len(WFI) + 2])
def test_forwarding_drops_the_targets_wireformatinfo_however_it_is_cut(cut):
    handshake = _DropWireFormatInfo()
    assert handshake.start() == b""
    stream = WFI + AFTER
    first = handshake.feed(stream[:cut])
    if cut < len(WFI):
        assert first is None
        assert handshake.feed(stream[cut:]) == AFTER
    else:
        assert first == stream[len(WFI):cut]


def test_forwarding_refuses_a_first_frame_larger_than_a_wireformatinfo_can_be():
    with pytest.raises(ForwardHandshakeError, match="not a WireFormatInfo"):
        _DropWireFormatInfo().feed((OPENING_MAX_FRAME_SIZE + 1).to_bytes(4, "big") + b"\x01Active")


def test_the_local_core_s_wireformatinfo_is_not_written_to_the_client():
    real = Transport()
    seen = _FirstFrameDropped(real)
    stream = WFI + AFTER
    cut = len(WFI) - 5
    for i in range(0, cut, 7):  # the core's writes, cut anywhere
        seen.write(stream[i:min(i + 7, cut)])
    seen.writeSequence([stream[cut:cut + 8], stream[cut + 8:]])  # across the end of its first frame
    assert bytes(real.written) == AFTER
    seen.write(b"later")
    assert bytes(real.written) == AFTER + b"later"
    seen.protocol = "core"  # a hand-over sets the real transport's protocol
    assert real.protocol == "core"


def test_a_local_core_whose_first_frame_is_too_large_is_cut_off():
    real = Transport()
    _FirstFrameDropped(real).write((OPENING_MAX_FRAME_SIZE + 1).to_bytes(4, "big") + b"\x01")
    assert real.aborted and real.written == b""


def redirected_to(connector) -> str:
    """What a failover: client routed to ``connector`` is told to reconnect to."""
    side = OpenWireSide(SimpleNamespace(params={}, default_max_frame=1 << 20, security=None, max_buffered=1 << 20), OPENWIRE)
    decision = SimpleNamespace(result=SimpleNamespace(target=SimpleNamespace(connector=connector)))
    opening = side.opening(SimpleNamespace(transport=Transport(), peer="127.0.0.1:5000", decision=decision))
    opening.receive_data(OPENING)  # the real failover: client's WireFormatInfo and ConnectionInfo
    [control] = [c for c in client_reads(opening.redirect("r", connector.host, connector.port))
                 if isinstance(c, ConnectionControl)]
    assert control.connected_brokers == control.reconnect_to
    return control.reconnect_to


def test_a_redirect_to_a_tls_target_says_ssl_and_to_a_plain_one_tcp():
    tls = SimpleNamespace(host="core1.example", port=61617, tls=object())  # sslEnabled=true
    plain = SimpleNamespace(host="core2.example", port=61618, tls=None)
    assert redirected_to(tls) == "ssl://core1.example:61617"
    assert redirected_to(plain) == "tcp://core2.example:61618"


@pytest.mark.parametrize(
    "answer, shown",
    [
        (b"AMQP\x00\x01\x00\x00", "'AMQP"),  # an AMQP-only acceptor's header
        (b"ERROR\ncontent-type:text/plain\n", "'ERROR"),  # STOMP's refusal
        (b"\x00\x00\x00\x20\x02", None),  # a frame of another type: not a WireFormatInfo
        (b"\x00\x00\x01\x3c\x01ActiveMX", None),  # the type, and a magic that is not ActiveMQ
    ],
)
def test_a_target_that_does_not_speak_openwire_is_refused_with_what_it_answered(answer, shown):
    handshake = _DropWireFormatInfo()
    with pytest.raises(ForwardHandshakeError, match="does not speak OpenWire") as refused:
        for i in range(len(answer)):  # however the answer is cut
            handshake.feed(answer[i : i + 1])
    assert "does its acceptor take OPENWIRE?" in str(refused.value)
    if shown is not None:
        assert shown in str(refused.value)
