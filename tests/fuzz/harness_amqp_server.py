"""The broker core's AMQP adapter around proton's engine (junction/brokercore/amqp_server.py).

A client logs in with SASL ANONYMOUS, opens, begins a session and attaches a
sender (driven by proton's own client engine); then the fuzzer's bytes go
straight into :class:`~junction.brokercore.amqp_server.AmqpProtocol` on its
``StringTransport``, whole or in uneven pieces.  The AMQP frames themselves
are proton's C engine's to parse; what is fuzzed is our code around it.
Contract:

* ``dataReceived`` never raises, and the clock's timers fire without raising;
* what the server writes is well-formed AMQP (but for a client's own
  terminus echoed back: proton copies it without checking its UTF-8), and a
  connection it closes got a Close (with its error condition, when the client
  broke the protocol);
* once the connection is gone no timer of it is left on the clock and no
  broker session of it remains.
"""

from __future__ import annotations

import itertools
import logging

from tests.fuzz.common import CLOSE, Input, amqp_output, close_condition, pieces
from tests.unit import test_amqp_server
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_amqp_server import AmqpClient, performative, protocol_timers

logging.disable(logging.CRITICAL)
# the unit tests' client ports: endless here (a long run makes more than 20,000 clients)
test_amqp_server._ports = itertools.cycle(range(40000, 60000))

#: a fresh broker core after this many inputs, so what fuzzed attaches create does not pile up
BROKER_LIFE = 500

_broker = None
_uses = 0


def broker() -> Broker:
    global _broker, _uses
    _uses += 1
    if _broker is None or _uses > BROKER_LIFE:
        _broker = Broker()
        _uses = 1
    return _broker


def fuzz_amqp_server(data: bytes) -> None:
    inp = Input(data, 1)
    b = broker()
    client = AmqpClient(b, container="fuzz")
    client.sender("fuzz-target", ssn=client.session())  # an attached link on handle 0
    client.transport.clear()
    chunks = [inp.stream] if inp.knobs[0] % 2 == 0 else pieces(inp.stream, inp.knobs[0])
    for chunk in chunks:
        if client.transport.disconnecting:
            break
        client.server_protocol.dataReceived(chunk)  # must never raise
        b.run()
    written = client.transport.value()
    items = amqp_output(written, echoes=True)
    if client.transport.disconnecting:
        closes = [i for i in items if isinstance(i, tuple) and i[1] == CLOSE]
        assert closes, f"closed without a Close: {items}"
        close_condition(closes[-1][2])  # a condition, when there is an error
    b.clock.advance(60)  # idle and connect timers fire without raising
    client.transport.clear()
    client.lose()
    assert protocol_timers(b) == []
    assert not b.server.sessions, b.server.sessions


def seeds() -> list[bytes]:
    from proton import Described, symbol, uint, ulong

    flow = performative(0x13, [uint(0), uint(2048), uint(0), uint(2048), uint(0), uint(0), uint(10)])
    transfer = performative(0x14, [uint(0), uint(0), b"t1", uint(0), True], payload=b"\x00\x53\x77\xa1\x02hi")
    detach = performative(0x16, [uint(0), True, Described(symbol("amqp:error:list"), [symbol("x:y")])])
    end = performative(0x17, [])
    close = performative(0x18, [])
    begin = performative(0x11, [None, uint(0), uint(2048), uint(2048)], channel=1)
    attach = performative(0x12, ["r", uint(1), True, None, None,
                                 Described(ulong(0x28), ["q"]), Described(ulong(0x29), ["q"])], channel=1)
    streams = [transfer, flow + transfer, detach + end + close, begin + attach, b"\x00\x00\x00\x08\x02\x00\x00\x00",
               b"AMQP\x00\x01\x00\x00", performative(0x10, ["second"])]
    return [bytes((i,)) + s for i, s in enumerate(streams)]
