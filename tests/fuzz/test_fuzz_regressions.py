"""What the fuzzers found, each kept as an explicit example (docs/fuzzing.md, "Found").

Every test here failed before its fix; the inputs are the fuzzers' own
(knob bytes included where a harness runs them).
"""

from __future__ import annotations

import pytest

from junction.protocols.amqp.message import decode_message
from junction.protocols.amqp.types import DecodeError, decode
from junction.protocols.detect import MAX_SNIFF_BYTES, NEED_MORE, UNKNOWN, detect
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.stomp import Frame, StompCodec
from tests.fuzz.harness_amqp import fuzz_message, fuzz_types
from tests.fuzz.harness_stomp import fuzz_stomp
from tests.fuzz.harness_stomp_session import fuzz_connection

# -- STOMP: a CR LF frame followed, in the same read, by bytes that are not UTF-8 ------------

STOMP_CRLF_THEN_GARBAGE = (
    b"\x03\x00\x00\x01CONNECT\r\nlogin:x\r\n\r\n\x00'\xff\xff\xff\xff\xff\xff\xff[END\r\n"
    b"destin0,1.1,1.2\n\nx\x00\r\n"
)


def test_a_crlf_frame_is_read_whatever_follows_it_in_the_same_read():
    # The header block was decoded up to the first LF LF, past this frame's own
    # CR LF end: the valid CONNECT was refused as "not valid UTF-8" when the
    # garbage came in the same read, and read when it came in a later one.
    stream = STOMP_CRLF_THEN_GARBAGE[4:]
    codec = StompCodec()
    codec.set_version("1.2")
    with pytest.raises(RemoteProtocolError) as raised:
        codec.receive_data(stream)
    assert raised.value.events == [Frame("CONNECT", (("login", "x"),))]
    assert "expected a frame command" in str(raised.value)
    fuzz_stomp(STOMP_CRLF_THEN_GARBAGE)


def test_a_crlf_frame_then_an_lf_frame_in_one_read():
    codec = StompCodec()
    events = codec.receive_data(b"SEND\r\na:1\r\n\r\nx\0SEND\nb:\xc3\xa9\n\ny\0")
    assert events == [Frame("SEND", (("a", "1"),), b"x"), Frame("SEND", (("b", "é"),), b"y")]


# -- STOMP: frames behind the CONNECT in the same read, parsed before the version ------------

STOMP_PIPELINED_BEHIND_CONNECT = (
    b'\x00\x00\x00\x07CONNECT\naccept-version:/1.0,1.1,1.2\nhost:/\nl'
    b'ogin:a\npasscode:b\nheart-beat:100,200\n\n\x00SEND\ndest'
    b'ination:/queue/a\nreceipt:r1\n\nhello\x00SUBSCRIBE\nid:'
    b'1\ndestination:/\\ueue/a\nack:client\n\n\x00\nACK\nid:1\n\n\x00'
    b'NACK\nid:2\n\n\x00BEGIN\ntransaction:t\n\n\x00COMMIT\ntransac'
    b'tion:t\xae\xae\xae\xae\n-beat:100,200\n\n\x00SE\n\x00FROB\n\n\x00'
)

PIPELINED = (
    b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
    b"SEND\ndestination:/queue/q\nkey:a\\cb\\\\\nreceipt:r-1\n\nm\0"
)


@pytest.mark.parametrize("cut", [None, PIPELINED.index(b"SEND")])
def test_frames_behind_the_connect_mean_the_same_however_the_reads_were_cut(cut):
    # Read with the CONNECT, a SEND's headers were not unescaped (the version was
    # not negotiated when the read was parsed): "a\\cb" arrived as it was sent,
    # where a SEND in a later read gave "a:b".  And an escape 1.2 does not define
    # passed behind a CONNECT but closed the connection in a later read.
    from tests.unit.stomp_fixtures import Broker

    broker = Broker()
    consumer = broker.client()
    consumer.connect("1.2")
    consumer.subscribe("/queue/q")
    producer = broker.client()
    reads = [PIPELINED] if cut is None else [PIPELINED[:cut], PIPELINED[cut:]]
    for data in reads:
        producer.send_raw(data)
    assert [f.command for f in producer.frames()] == ["CONNECTED", "RECEIPT"]
    (message,) = consumer.messages()
    assert message.get("key") == "a:b\\"


@pytest.mark.parametrize("whole", [True, False])
def test_an_undefined_escape_behind_the_connect_is_malformed_in_one_read_too(whole):
    from tests.unit.stomp_fixtures import Broker

    data = b"CONNECT\naccept-version:1.2\n\n\0SEND\ndestination:/queue/q\nbad:\\t\n\nm\0"
    client = Broker().client()
    if whole:
        client.send_raw(data)
    else:
        client.send_raw(data[:data.index(b"SEND")])
        client.send_raw(data[data.index(b"SEND"):])
    connected, error = client.frames()
    assert connected.command == "CONNECTED" and error.command == "ERROR"
    assert error.body.startswith(b"malformed frame: STOMP 1.2 header '\\\\t' contains undefined escape")
    assert client.closed


def test_the_stomp_connection_harness_on_its_find():
    fuzz_connection(STOMP_PIPELINED_BEHIND_CONNECT)


# The same, for a frame whose headers came with the CONNECT and whose body came later.

STOMP_HEADERS_BEHIND_CONNECT_BODY_LATER = (
    b'\x00\x00\x00\x07CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\nlo'
    b'gi:100,200\n\n\x00SEND\ndestination:/queue/a\n/\\xxxxx~x'
    b'xxxxon:/queue/a\n/\\xxxxx~xxxxxxxxxeipxxxxeipt:r1\n'
    b'\nhello\x00SUBSCRIBE\nid:1\ndestination:\nid:\x1b\x1b\x1bnsa\n\x00FR'
    b'OB\x8a\n\x00'
)


def test_headers_read_with_the_connect_body_in_a_later_read():
    from tests.unit.stomp_fixtures import Broker

    broker = Broker()
    consumer = broker.client()
    consumer.connect("1.2")
    consumer.subscribe("/queue/q")
    producer = broker.client()
    body_at = PIPELINED.index(b"\n\nm\0") + 2
    producer.send_raw(PIPELINED[:body_at])  # the SEND's headers, before the version
    producer.send_raw(PIPELINED[body_at:])
    assert [f.command for f in producer.frames()] == ["CONNECTED", "RECEIPT"]
    (message,) = consumer.messages()
    assert message.get("key") == "a:b\\"


def test_headers_read_before_the_version_are_checked_when_it_is_set():
    codec = StompCodec()
    events = codec.receive_data(b"CONNECT\n\n\0SEND\nbad:\\t\ncontent-length:3\n\nab")
    assert [e.command for e in events] == ["CONNECT"]
    codec.set_version("1.2")
    with pytest.raises(RemoteProtocolError, match="undefined escape sequence") as raised:
        codec.receive_data(b"c\0")
    assert raised.value.events == []
    fuzz_connection(STOMP_HEADERS_BEHIND_CONNECT_BODY_LATER)


# -- AMQP types: a described value whose descriptor is a negative long ----------------------

TYPES_NEGATIVE_LONG_DESCRIPTOR = (
    b"\x00\x00\x00\x00\x00\x81\xff\xff\xff\x00\x00\x00\x00\x00\x80\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x82?\xf8\x00\x00\x00\x00\x00\x00\xa1\x04text\xa1\x00\xa1\x05\xc3\xbcn\xc3\xaf\xa0\x04SSSSSSS"
    b"\xe0\x04:\x01b\x00\x00"
)


@pytest.mark.parametrize(
    "data",
    [
        TYPES_NEGATIVE_LONG_DESCRIPTOR,
        b"\x00\x55\xff\x40",  # smalllong -1 describing null
        b"\xe0\x05\x02\x00\x55\xfe\x40",  # an array whose element constructor is described by -2
    ],
)
def test_a_negative_long_descriptor_is_a_decode_error(data):
    # decode() gave Described(-1099511627776, ...), which encode() (a plain int
    # descriptor is a ulong) could not write back: ValueError from re-encoding.
    with pytest.raises(DecodeError) as raised:
        decode(data)
    assert raised.value.code == "amqp:decode-error"
    fuzz_types(data)


def test_a_positive_long_descriptor_still_decodes():
    value, _ = decode(b"\x00\x55\x10\x45")
    assert value.descriptor == 0x10 and value.value == []


# -- AMQP message: an annotation key that is neither a symbol nor a ulong -------------------

MESSAGE_TIMESTAMP_ANNOTATION_KEY = (
    b"\x00Sp\xc0\x0c\x05AP\x07p\x00\x00\x13\x88AR\x02\x00Sq\xc1\t\x02\xa3\x04x-daU\x01\x00Sr\xc1\r"
    b"\x02\x83\x07x-opt-a\xa1\x01\x00"
)


def test_an_annotation_key_of_another_type_is_a_decode_error():
    # It was kept, and encode_annotations (what the broker runs when it adds
    # annotations of its own before delivering) raised TypeError on it.
    with pytest.raises(DecodeError, match="neither a symbol nor a ulong"):
        decode_message(MESSAGE_TIMESTAMP_ANNOTATION_KEY)
    fuzz_message(MESSAGE_TIMESTAMP_ANNOTATION_KEY)


def test_string_and_ulong_annotation_keys_are_still_read():
    sections = decode_message(b"\x00\x53\x72\xc1\x08\x04\xa1\x01s\x41\x53\x07\x42")
    assert sections.message_annotations == {"s": True, 7: False}


# -- detect: the verdict on a would-be OpenWire size prefix --------------------------------

DETECT_OPENWIRE_PREFIX = b"J\x08JN\x01LC\x02\x00\x00N\x01LC\x02\x00\x00"


def test_detect_never_changes_its_verdict_as_bytes_arrive():
    # b"J\x08" was UNKNOWN but b"J\x08JN\x01" NEED_MORE (type 1 at offset 4 looked
    # like a WireFormatInfo): a gateway reading it whole waited, one reading it
    # byte by byte closed.
    verdicts = [detect(DETECT_OPENWIRE_PREFIX[:k]) for k in range(1, len(DETECT_OPENWIRE_PREFIX) + 1)]
    assert verdicts[0] == NEED_MORE
    assert set(verdicts[1:]) == {UNKNOWN}
    assert len(DETECT_OPENWIRE_PREFIX) < MAX_SNIFF_BYTES


def test_openwire_is_still_detected_byte_by_byte():
    wire_format_info = b"\x00\x00\x01\x00\x01\x00\x08ActiveMQ" + bytes(40)
    verdicts = [detect(wire_format_info[:k]) for k in range(1, len(wire_format_info) + 1)]
    first = next(i for i, v in enumerate(verdicts) if v != NEED_MORE)
    assert set(verdicts[first:]) == {"OPENWIRE"}


# -- the broker core's AMQP adapter: every closed connection with a session stayed in memory --


def test_a_closed_amqp_connection_leaves_nothing_alive():
    # The amqp-server target's peak RSS grew with every input: proton keeps an
    # endpoint's Python attributes with its C object, and the session and link
    # contexts kept that object alive (a cycle through C that gc cannot see), so
    # each connection that had begun a session stayed in memory after it closed.
    import gc
    import weakref

    from tests.unit.stomp_fixtures import Broker
    from tests.unit.test_amqp_server import AmqpClient

    broker = Broker()
    protocols = []
    for i in range(3):
        client = AmqpClient(broker, container=f"c{i}")
        client.receiver("q", ssn=client.session())
        client.sender("q", ssn=client.session(), name="s")
        protocols.append(weakref.ref(client.protocol))
        client.lose()
        broker.run()
    del client
    gc.collect()
    assert [p for p in protocols if p() is not None] == []


# -- PROXY v1: a bare CR or LF before the line's CR LF ----------------------------------------

PROXY_BARE_CR = b"\x00\x05PROXY UNKNOWN UNKNOWN\r\x01\r\n"


@pytest.mark.parametrize("line", [PROXY_BARE_CR[2:], b"PROXY UNKNOWN\nx\r\n", b"PROXY TCP4\r1.2.3.4\r\n"])
def test_a_v1_line_with_a_bare_cr_or_lf_is_refused_however_it_arrives(line):
    # Read whole, the line up to the first CR LF was parsed (an UNKNOWN line's
    # rest is ignored: accepted); read byte by byte, the bare CR was refused.
    from junction.protocols.proxy import ProxyHeaderReader

    with pytest.raises(RemoteProtocolError, match="not terminated by CRLF"):
        ProxyHeaderReader().receive_data(line)
    reader = ProxyHeaderReader()
    with pytest.raises(RemoteProtocolError, match="not terminated by CRLF"):
        for i in range(len(line)):
            reader.receive_data(line[i:i + 1])
    from tests.fuzz.harness_proxy import fuzz_proxy

    fuzz_proxy(b"\x00\x05" + line)
