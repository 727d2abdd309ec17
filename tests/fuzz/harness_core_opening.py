"""``core-opening``: the gateway's reader of a CORE client's opening (junction/protocols/core/opening.py).

Feeds :meth:`CoreOpening.receive_data`.  Knobs: the limits (the defaults, or
a ``max_packet_size`` the fuzzer can reach), ``max_bytes`` (the default, or
300), whether the login is accepted, the last word once the stream is over
(a refusal, a redirect, an error or a timeout), and the cutting seed.
Contract (the module's docstring):

* ``receive_data`` never raises;
* until the CREATESESSION is complete, ``buffered`` never exceeds ``max_bytes``;
* everything written is well-formed CORE (it reads back with a client
  codec): before the outcome only the answers given at once (a topology
  message, CHECK_FOR_FAILOVER_REPLY, REATTACH_SESSION_RESP); a failure ends
  with one EXCEPTION whose message is the failure's reason; the last word
  is an EXCEPTION on channel 1 once the CREATESESSION has arrived (after a
  DISCONNECT on channel 0 for a redirect), on channel 0 before;
* a complete opening's replay is the stream with the packets the gateway
  answered taken out, everything else byte for byte (worked out here
  independently, from the length prefixes);
* the outcome (complete with the same routing inputs and, joined with what
  passed through after it, the same replay; or failed with the same code), and
  what was written (an EXCEPTION's text aside: it may name a codec offset that
  depends on the cut), do not depend on how the stream was cut into reads.
"""

from __future__ import annotations

from junction.protocols.core import CoreCodec, CoreLimits, ExceptionType, encode_packet
from junction.protocols.core import packets as p
from junction.protocols.core.opening import (
    CoreOpening,
    OpeningComplete,
    OpeningFailed,
    OpeningState,
    Passthrough,
)
from tests.fuzz.common import Input, cuts, same

#: small enough that the fuzzer meets the packet limit within a few hundred bytes
SMALL = CoreLimits(max_packet_size=120)
LIMITS = (CoreLimits(), SMALL)
MAX_BYTES = (None, 300)
LAST_WORDS = ("refuse", "redirect", "close_with", "timed_out")
KNOBS = 5

#: packet types the gateway answers itself and leaves out of the replay
_ANSWERED = frozenset({112, 113, -4, 32})
_SESSION = frozenset({30, -18})
_AT_ONCE = (p.ClusterTopology, p.ClusterTopologyV2, p.ClusterTopologyV3, p.ClusterTopologyV4,
            p.CheckFailoverReply, p.ReattachSessionResponse)


def expected_replay(stream: bytes) -> bytes:
    """The stream less the packets the gateway answers, up to and with the first CREATESESSION."""
    pos = 7 if stream[:7] in (b"ARTEMIS", b"HORNETQ") else 0
    out = bytearray(stream[:pos])
    while len(stream) - pos >= 5:
        end = pos + 4 + int.from_bytes(stream[pos:pos + 4], "big")
        kind = int.from_bytes(stream[pos + 4:pos + 5], "big", signed=True)
        if kind in _SESSION:
            return bytes(out + stream[pos:])
        if kind not in _ANSWERED:
            out += stream[pos:end]
        pos = end
    raise AssertionError("a complete opening without a CREATESESSION")


def _shape(packets) -> list:
    return [(type(x), x.code, x.channel_id) if type(x) is p.ExceptionMessage else x for x in packets]


def _stream(chunks, limits, max_bytes, accept, last_word):
    opening = CoreOpening(
        lambda c: ("principal", c.username) if accept else None, limits=limits, max_bytes=max_bytes,
        node_id="gw", unique_event_id=7, remote_address="/10.0.0.1:1",
    )
    outcome = None
    passed = b""
    out = b""
    for chunk in chunks:
        events = opening.receive_data(chunk)  # never raises
        out += opening.data_to_send()
        if opening.state is OpeningState.AWAIT_SESSION:
            assert opening.buffered <= opening.max_bytes, (opening.buffered, opening.max_bytes)
        for event in events:
            if isinstance(event, OpeningComplete):
                assert outcome is None and accept
                assert event.principal == ("principal", event.username)
                outcome = ["complete", event.client_id, event.username, event.version, event.replay]
            elif isinstance(event, Passthrough):
                assert outcome is not None and outcome[0] == "complete"
                passed += event.data
            else:
                assert isinstance(event, OpeningFailed) and outcome is None, event
                assert not (event.login_refused and accept), event
                outcome = ["failed", event.exception_type, event.login_refused, event.user, event.client_id]
                failure = event
    written = CoreCodec(server=False).receive_data(out)
    if outcome is not None and outcome[0] == "failed":
        *before, last = written
        assert type(last) is p.ExceptionMessage and last.message == failure.reason, (written, failure)
        assert last.code == failure.exception_type
    else:
        before = written
    assert all(isinstance(x, _AT_ONCE) for x in before), written
    if outcome is not None and outcome[0] == "complete":
        outcome[-1] += passed  # the replay, however it was handed over
    if opening.state is OpeningState.FAILED:
        return outcome, _shape(written), None
    words = _last_word(opening, last_word)
    assert opening.state is OpeningState.ANSWERED or words == []
    return outcome, _shape(written), _shape(words)


def _last_word(opening: CoreOpening, last_word: str) -> list:
    complete = opening.state is OpeningState.COMPLETE
    if last_word == "refuse":
        data = opening.refuse("r", "REFUSED_UNAVAILABLE")
    elif last_word == "redirect":
        data = opening.redirect("r", "10.0.0.2", 61616)
    elif last_word == "close_with":
        data = opening.close_with("ROUTING_EXCEPTION", "unreachable")
    else:
        data = opening.timed_out(10)
    words = CoreCodec(server=False).receive_data(data)
    if last_word == "timed_out" and complete:
        assert words == []
        return words
    *disconnect, answer = words
    assert type(answer) is p.ExceptionMessage and answer.channel_id == (1 if complete else 0), words
    if last_word == "redirect":
        assert [type(x) for x in disconnect] in ([p.DisconnectV3], [p.DisconnectV2], [p.Disconnect])
        assert answer.code == ExceptionType.ROUTING_EXCEPTION
    else:
        assert disconnect == []
    return words


def fuzz_opening(data: bytes) -> None:
    inp = Input(data, KNOBS)
    limits = inp.knob(0, LIMITS)
    max_bytes = inp.knob(1, MAX_BYTES)
    accept = inp.knob(2, (True, False))
    last_word = inp.knob(3, LAST_WORDS)
    results = {
        name: _stream(chunks, limits, max_bytes, accept, last_word)
        for name, chunks in cuts(inp.stream, inp.knobs[4])
    }
    same(results, "CORE opening outcome")
    outcome = results["whole"][0]
    if outcome is not None and outcome[0] == "complete":
        assert outcome[-1] == expected_replay(inp.stream), "the replay is not the client's packets"


def seeds() -> list[bytes]:
    """The real client's opening, a reconnecting client's, old clients', and refusals."""
    ping = encode_packet(p.Ping(60000))
    subscribe = encode_packet(p.SubscribeTopologyV2(False, 136))

    def session(version=136, client_id="app-1", v2=True, user="guest"):
        fields = ("s-1", 10, version, user, "guest", 102400, False, True, True, -1, False, None)
        return encode_packet(p.CreateSessionV2(*fields, client_id) if v2 else p.CreateSession(*fields))

    streams = [
        b"ARTEMIS" + ping + ping + subscribe + session() + encode_packet(p.SessStart(channel_id=10)),
        b"ARTEMIS" + ping + subscribe + encode_packet(p.CheckFailover("node")) + encode_packet(
            p.ReattachSession("s-1", 3)) + session(client_id=None),
        b"HORNETQ" + ping + encode_packet(p.SubscribeTopology(False)) + session(125, v2=False),
        b"ARTEMIS" + encode_packet(p.SubscribeTopologyV2(False, 122)) + session(137),
        b"ARTEMIS" + ping + encode_packet(p.SessStop(channel_id=10)),
        b"ARTEMIS" + bytes.fromhex("0000000c5b0000000000000003000000"),
    ]
    return [bytes((i % 2, i % 2, i % 3 != 2, i % 4, 7)) + s for i, s in enumerate(streams)]
