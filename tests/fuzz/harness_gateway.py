"""The gateway's opening readers, as wired in its listener (junction/gateway/listener.py).

A :class:`~junction.gateway.listener.GatewayProtocol` on an in-memory
transport (the unit tests' ``Gateway``: a real router from broker.xml, real
security, no ready target) is fed what a client sends: the sniffing
(:func:`junction.protocols.detect.detect`), then the STOMP codec until the
CONNECT frame (``_feed``) or the AMQP opening (SASL and the Open).  Contract:

* ``dataReceived`` never raises;
* a connection the gateway closed got its protocol's answer: a STOMP ERROR
  frame last, or well-formed AMQP ending in our protocol header, a
  sasl-outcome or a Close (an unrecognised protocol, or one the acceptor
  does not serve, gets nothing);
* a connection still open holds what the limits allow (fewer than
  ``MAX_SNIFF_BYTES`` while sniffing, ``routingMaxBytes`` while opening);
* the outcome (state, what kind of answer) does not depend on how the stream
  was cut into reads;
* closing it leaves no timer and no entry behind;
* :func:`detect` never changes its verdict as more bytes arrive.
"""

from __future__ import annotations

import logging

from twisted.internet.error import ConnectionDone
from twisted.python.failure import Failure

from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, detect
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.stomp import Frame, StompCodec
from tests.fuzz.common import Input, amqp_output, cuts, same
from tests.unit.test_gateway_listener import Client, Gateway

logging.disable(logging.CRITICAL)  # every refusal logs a line

_gateway = None


def gateway():
    global _gateway
    if _gateway is None:
        _gateway = Gateway("first", protocols=frozenset({"STOMP", "AMQP"}))
    return _gateway


def check_detect(stream: bytes) -> None:
    verdict = None
    for k in range(1, min(len(stream), MAX_SNIFF_BYTES) + 1):
        answer = detect(stream[:k])
        if verdict is not None:
            assert answer == verdict, (stream[:k], verdict, answer)
        elif answer != NEED_MORE:
            verdict = answer


def _answer_shape(protocol_name, written: bytes):
    if protocol_name == "STOMP":
        try:
            frames = StompCodec(server=False).receive_data(written)
        except RemoteProtocolError as exc:
            raise AssertionError(f"the gateway wrote a malformed STOMP frame: {written!r}") from exc
        return tuple(f.command for f in frames if isinstance(f, Frame))
    items = amqp_output(written)
    return tuple(i if isinstance(i, str) else i[:2] for i in items)


def _serve(chunks):
    gw = gateway()
    client = Client(gw)
    protocol = client.protocol
    for chunk in chunks:
        client.transport.protocol.dataReceived(chunk)  # must never raise
    written = client.transport.value()
    name = protocol.protocol_name
    closed = client.transport.disconnecting
    shape = _answer_shape(name, written) if name in ("STOMP", "AMQP") else None
    if closed:
        if name not in ("STOMP", "AMQP"):  # not told apart, or not served here: nothing to say
            assert written == b"", written
        elif name == "STOMP":
            assert shape and shape[-1] == "ERROR", (shape, written)
        else:
            last = shape[-1] if shape else None
            # SASL has no error frame: a malformed SASL frame is answered by closing
            assert last is not None and (isinstance(last, str) or last[1] in (0x18, 0x44, 0x40)), shape
    elif protocol.state == "sniffing":
        assert len(protocol.buffer) < MAX_SNIFF_BYTES
    elif protocol.state == "opening":
        assert protocol.received <= gw.factory.max_buffered
    state = protocol.state
    if not closed:
        client.transport.loseConnection()
    protocol.connectionLost(Failure(ConnectionDone("closed")))
    assert protocol not in gw.factory.connections
    assert protocol.timer is None or not protocol.timer.active()
    return state, name, closed, shape


def fuzz_gateway(data: bytes) -> None:
    inp = Input(data, 1)
    check_detect(inp.stream)
    results = {name: _serve(chunks) for name, chunks in cuts(inp.stream, inp.knobs[0])}
    same(results, "gateway opening")
    gw = gateway()
    assert not gw.factory.connections
    assert gw.reactor.tcpClients == [], "the gateway connected to a target that is not ready"


def seeds() -> list[bytes]:
    from tests.fuzz.harness_sasl import client_opening

    streams = [
        b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\npasscode:secret\nclient-id:app-1\n\n\0",
        b"\r\nSTOMP\r\naccept-version:1.1\r\nlogin:alice\r\npasscode:bad\r\n\r\n\0",
        b"SEND\ndestination:/queue/a\n\nx\0",
        b"CONNECT\ncontent-length:3\n\nabc\0SEND\n\n\0",
        client_opening(response=b"\0alice\0secret"),
        client_opening(response=b"\0alice\0wrong"),
        b"AMQP\x00\x01\x00\x00",
        b"GET / HTTP/1.1\r\n\r\n",
        b"JNCL\x01\x02\x00\x00",
    ]
    return [bytes((i,)) + s for i, s in enumerate(streams)]
