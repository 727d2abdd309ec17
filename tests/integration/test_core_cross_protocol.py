"""JMS message types across protocols: CORE to AMQP and STOMP, and back, as Artemis converts them.

Differential: every scenario runs against a real Artemis broker (CORE, AMQP and STOMP
acceptors) and a real Junction node (the same three protocols), and the outcomes -- the
message type each consumer sees, its body and its typed properties -- must be the same.
Where the two deliberately differ the test says so next to the comparison.

Artemis's mapping (its CoreAmqpConverter / AmqpCoreConverter): a JMS message going to an
AMQP consumer carries the ``x-opt-jms-msg-type`` annotation (0 message, 1 object, 2 map,
3 bytes, 4 stream, 5 text); a MapMessage is an amqp-value map, a StreamMessage an
amqp-sequence list, an ObjectMessage a data section with content-type
``application/x-java-serialized-object``, a TextMessage an amqp-value string, a
BytesMessage a data section.  Back, an amqp-value map is a MapMessage, an amqp-value list
or amqp-sequence a StreamMessage, a string a TextMessage, a data section a BytesMessage.
STOMP into JMS: a SEND with content-length is a BytesMessage, one without a TextMessage.

No outcome here differs on purpose: each test asserts Junction's equals Artemis's, and a few
facts of Artemis's own so that a change on both sides shows.  Not covered: JMS map, stream
and object messages to STOMP consumers (Junction passes CORE's bytes, see docs/core.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import stomp
from proton import Message, int32, symbol
from proton.utils import BlockingConnection

from tests import harness
from tests.artemis import JmsClient
from tests.artemis.jms import b64
from tests.integration import test_artemis_peer as peer

pytestmark = pytest.mark.timeout(60)

ARTEMIS_OPTIONS = {"amqp": True, "stomp": True}
USERS = {peer.USER["user"]: (peer.USER["password"], ["amq"])}
_names = itertools.count()

#: values every protocol carries with their type (map and stream entries)
MAP = {"s": "text é", "t": True, "i": {"int": -7}, "l": {"long": 2**40}, "d": {"double": 2.5}}
STREAM = ["text é", True, {"int": -7}, {"long": 2**40}, {"double": 2.5}]
JMS_BODIES = {
    "text": "hello ✓",
    "bytes": b64(b"\x00\x01\xff"),
    "map": MAP,
    "stream": STREAM,
    "object": "a serialized string",
}
#: the x-opt-jms-msg-type annotation Artemis writes for each JMS type
JMS_MSG_TYPE = {"object": 1, "map": 2, "bytes": 3, "stream": 4, "text": 5}


class _Target:
    """One broker's ports: CORE (the JMS client's URL), AMQP and STOMP."""

    def __init__(self, name: str, core: int, amqp: int, stomp_port: int):
        self.name, self.host, self.core_port = name, harness.LOOPBACK, core
        self.amqp_port, self.stomp_port = amqp, stomp_port
        self.url = f"tcp://{harness.LOOPBACK}:{core}"


@pytest.fixture(scope="module")
def artemis_target(artemis_module):
    b = artemis_module
    return _Target("artemis", b.core_port, b.amqp_port, b.stomp_port)


@pytest.fixture(scope="module")
def junction_target(tmp_path_factory):
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path_factory.mktemp("core-cross")),
        name="cross",
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port),
    )
    node.start()
    try:
        yield _Target("junction", port, node.amqp_port, node.stomp_port)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def _both(artemis_target, junction_target, scenario: Callable, jms: JmsClient):
    """The scenario's outcome on each broker: (Artemis's, Junction's)."""
    return scenario(artemis_target, jms), scenario(junction_target, jms)


def _amqp(target: _Target) -> BlockingConnection:
    return BlockingConnection(
        f"amqp://{target.host}:{target.amqp_port}",
        user=peer.USER["user"],
        password=peer.USER["password"],
        allowed_mechs="PLAIN",
        timeout=15,
    )


def _plain(value):
    """An AMQP body value with its type, comparable across brokers."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        value = bytes(value)
    return (type(value).__name__, value)


def jms_to_amqp(target: _Target, jms: JmsClient) -> dict:
    """A JMS producer of each type; an AMQP consumer: annotation, body and content-type."""
    queue = f"cross.amqp.{next(_names)}"
    sends = [
        {"op": "send", "queue": queue, "type": kind, "body": body, "properties": {"k": kind, "n": {"int": 3}}}
        for kind, body in sorted(JMS_BODIES.items())
    ]
    jms.run([peer.connect(target), *sends])
    conn = _amqp(target)
    out = {}
    try:
        receiver = conn.create_receiver(queue)
        for _ in JMS_BODIES:
            m = receiver.receive(timeout=10)
            receiver.accept()
            kind = m.properties["k"]
            body = m.body
            if kind == "object":
                body = ("serialized", isinstance(body, (bytes, memoryview)) and bytes(body)[:2] == b"\xac\xed")
            else:
                body = _plain(body)
            annotation = (m.annotations or {}).get(symbol("x-opt-jms-msg-type"))
            out[kind] = {
                "jms-msg-type": None if annotation is None else int(annotation),
                "content-type": None if m.content_type in (None, "None") else str(m.content_type),
                "body": body,
                "n": _plain(m.properties["n"]),
            }
    finally:
        conn.close()
    return out


class _Collect(stomp.ConnectionListener):
    """The (headers, body) of each MESSAGE frame, in arrival order."""

    def __init__(self):
        self.message_list: list = []

    def on_message(self, frame):
        self.message_list.append((frame.headers, frame.body))


def jms_to_stomp(target: _Target, jms: JmsClient) -> dict:
    """A JMS producer of text and bytes; a STOMP consumer: the body bytes and content-length."""
    queue = f"cross.stomp.{next(_names)}"
    sends = [
        {"op": "send", "queue": queue, "type": kind, "body": JMS_BODIES[kind], "properties": {"k": kind}}
        for kind in ("text", "bytes")
    ]
    jms.run([peer.connect(target), *sends])
    got: list = []
    listener = _Collect()
    conn = stomp.Connection12([(target.host, target.stomp_port)], auto_decode=False)
    conn.set_listener("t", listener)
    conn.connect(peer.USER["user"], peer.USER["password"], wait=True)
    try:
        conn.subscribe(queue, id="1", headers={"subscription-type": "ANYCAST"})
        harness.wait_for(lambda: len(listener.message_list) >= 2, timeout=10)
        for headers, body in listener.message_list:
            got.append((headers["k"], bytes(body), "content-length" in headers))
    finally:
        conn.disconnect()
    return {k: (body, has_length) for k, body, has_length in got}


def amqp_and_stomp_to_jms(target: _Target, jms: JmsClient) -> dict:
    """AMQP producers of a string, a data section, a map, a list and a sequence, and STOMP
    producers with and without content-length; a JMS consumer: type and body of each."""
    queue = f"cross.jms.{next(_names)}"
    # STOMP first: its ANYCAST send makes the queue the AMQP sends then reach
    for with_length in (True, False):
        s = stomp.Connection12([(target.host, target.stomp_port)], auto_content_length=with_length)
        s.connect(peer.USER["user"], peer.USER["password"], wait=True)
        try:
            s.send(queue, "over STOMP", headers={"destination-type": "ANYCAST", "k": f"stomp-{with_length}"})
        finally:
            s.disconnect()
    conn = _amqp(target)
    try:
        sender = conn.create_sender(queue)
        sends = [
            ("string", Message(body="text é")),
            ("data", Message(body=b"\x00\x01", inferred=True)),
            ("map", Message(body={"s": "text é", "i": -7, "t": True})),
            ("list", Message(body=["text é", -7, True])),
            ("sequence", Message(body=["text é", -7, True], inferred=True)),
        ]
        for name, m in sends:
            m.properties = {"k": name, "n": int32(3)}
            sender.send(m, timeout=10)
    finally:
        conn.close()
    results = jms.run([peer.connect(target), {"op": "receive", "queue": queue, "count": 7}])
    return {
        m["properties"]["k"]: (m["type"], m.get("body"), m["properties"].get("n")) for m in results[1]["messages"]
    }


def test_jms_types_to_an_amqp_consumer(artemis_target, junction_target, jms: JmsClient):
    artemis, junction = _both(artemis_target, junction_target, jms_to_amqp, jms)
    assert junction == artemis
    assert {k: v["jms-msg-type"] for k, v in artemis.items()} == JMS_MSG_TYPE
    assert artemis["map"]["body"]["i"] == ("int32", -7)  # an int keeps its width
    assert artemis["stream"]["body"][3] == ("int", 2**40)  # a long: proton reads a plain int
    assert artemis["object"]["content-type"] == "application/x-java-serialized-object"
    assert artemis["object"]["body"] == ("serialized", True)


def test_jms_text_and_bytes_to_a_stomp_consumer(artemis_target, junction_target, jms: JmsClient):
    artemis, junction = _both(artemis_target, junction_target, jms_to_stomp, jms)
    assert junction == artemis
    assert artemis["text"][0] == "hello ✓".encode()
    assert artemis["bytes"] == (b"\x00\x01\xff", True)


def test_amqp_and_stomp_producers_to_a_jms_consumer(artemis_target, junction_target, jms: JmsClient):
    artemis, junction = _both(artemis_target, junction_target, amqp_and_stomp_to_jms, jms)
    assert junction == artemis
    assert artemis["string"] == ("text", "text é", {"int": 3})
    assert artemis["data"] == ("bytes", b64(b"\x00\x01"), {"int": 3})
    assert artemis["map"][:2] == ("map", {"s": "text é", "i": {"long": -7}, "t": True})
    assert artemis["list"][:2] == artemis["sequence"][:2] == ("stream", ["text é", {"long": -7}, True])
    assert artemis["stomp-True"][0] == "bytes" and artemis["stomp-False"][:2] == ("text", "over STOMP")
