"""The OpenWire gateway side's filters: the backend's first frame (its WireFormatInfo) is dropped."""

from __future__ import annotations

import pytest

from junction.gateway.forward import ForwardHandshakeError
from junction.gateway.openwire_side import _DropWireFormatInfo, _FirstFrameDropped
from junction.protocols.openwire.codec import encode_frame
from junction.protocols.openwire.commands import Response
from junction.protocols.openwire.opening import OPENING_MAX_FRAME_SIZE
from junction.protocols.openwire.wireformat import SERVER_WIRE_FORMAT, WireFormat

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
        _DropWireFormatInfo().feed((OPENING_MAX_FRAME_SIZE + 1).to_bytes(4, "big") + b"\x01")


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
    _FirstFrameDropped(real).write((OPENING_MAX_FRAME_SIZE + 1).to_bytes(4, "big"))
    assert real.aborted and real.written == b""
