"""JMS message types across protocols: OpenWire to AMQP and CORE, and back, as Artemis converts them.

Differential: every scenario runs against a real Artemis broker (its main acceptor takes CORE
and OPENWIRE, a second one AMQP) and a real Junction node (the same protocols), with the real
ActiveMQ Classic client (the 5.17 and the 6.x, as the ``openwire_client`` fixture gives them),
the real Artemis JMS client (CORE) and python-qpid-proton (AMQP).  The outcomes -- the message
type each consumer sees, its body, its typed properties and its header fields (correlation id,
type, reply-to as a queue and as a topic, priority, expiration, group, message id) -- must be
the same.  Where the two deliberately differ the test says so next to the comparison.

Artemis's mapping (its OpenWireMessageConverter, then its CoreAmqpConverter for AMQP): an
OpenWire message is a CORE message of its JMS type (text, bytes, map, stream, object, or a
plain Message: CORE's DEFAULT), with a fresh UUID as its JMS id (a CORE consumer's
JMSMessageID, an AMQP consumer's ``ID:<uuid>`` message-id), the correlation id and the
reply-to (``queue://``/``topic://``) as a JMS client's properties, the JMS type as
``JMSType``, the group as ``_AMQ_GROUP_ID``/``_AMQ_GROUP_SEQUENCE``, and the connection's
client id in ``__AMQ_CID`` (which neither the CORE client nor the AMQP conversion shows).
Back, any message is given to an OpenWire consumer as its CORE form: the JMS type a CORE
consumer would read (an AMQP map a MapMessage, a list a StreamMessage, a serialized object
an ObjectMessage, ...), ``JMSCorrelationID``/``JMSReplyTo`` as the message's fields, the
broker's own properties (``_AMQ...``, ``__HDR_...``) left out.
"""

from __future__ import annotations

import base64
import itertools
import re

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.artemis.jms import pattern
from tests.classic import OpenWireClient
from tests.integration import test_artemis_peer as peer
from tests.integration import test_core_cross_protocol as cross

pytestmark = pytest.mark.timeout(60)

#: the peer's main acceptor takes every protocol (CORE and OPENWIRE among them); AMQP also
#: has an acceptor of its own
ARTEMIS_OPTIONS = {"amqp": True}
USERS = {peer.USER["user"]: (peer.USER["password"], ["amq"])}
_names = itertools.count()

JMS_BODIES = cross.JMS_BODIES
JMS_PROPERTIES = cross.JMS_PROPERTIES
AMQP_PROPERTIES = cross.AMQP_PROPERTIES
#: the properties as an OpenWire or CORE consumer reads them back (every value tagged)
READ_PROPERTIES = {**JMS_PROPERTIES, "l": {"long": 2**40}}
#: the JMS header fields every OpenWire send sets (the time to live in ms), and its group
OW_HEADERS = {"correlationId": "corr-1", "jmsType": "kind-1", "priority": 7, "ttl": 600_000, "groups": ["g-1"]}
#: a JMS message id made from a UUID (Artemis's of a message sent over OpenWire, as a CORE or
#: AMQP consumer sees it)
UUID_ID = re.compile(r"^ID:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
#: the MessageId Artemis gives an OpenWire consumer of a message sent over another protocol
BROKER_ID = re.compile(r"^ID:[0-9a-f-]{36}:-1:-1:\d+:\d+$")
#: Artemis keeps an OpenWire message's own fields in ``__HDR_`` properties of its CORE message
#: (arrival, broker-in time, command id, droppable, message and producer ids), and its CORE and
#: AMQP consumers see them as application properties.
HDR_PROPERTIES = ("__HDR_ARRIVAL", "__HDR_BROKER_IN_TIME", "__HDR_COMMAND_ID", "__HDR_DROPPABLE",
                  "__HDR_MESSAGE_ID", "__HDR_PRODUCER_ID")  # fmt: skip


class _Target:
    """One broker's ports: CORE (the Artemis JMS client's URL), OpenWire, AMQP and STOMP."""

    def __init__(self, name: str, core: int, openwire: int, amqp: int, stomp_port: int):
        self.name, self.host = name, harness.LOOPBACK
        self.core_port, self.openwire_port, self.amqp_port, self.stomp_port = core, openwire, amqp, stomp_port
        self.url = f"tcp://{harness.LOOPBACK}:{core}"

    def openwire(self, **jms) -> dict:
        """The Classic client's connect command (every package trusted for ObjectMessages)."""
        query = "&".join(f"jms.{k}={v}" for k, v in {"trustAllPackages": "true", **jms}.items())
        return {"op": "connect", "url": f"tcp://{self.host}:{self.openwire_port}?{query}", **peer.USER}


@pytest.fixture(scope="module")
def artemis_target(artemis_module):
    b = artemis_module
    return _Target("artemis", b.core_port, b.core_port, b.amqp_port, b.core_port)


@pytest.fixture(scope="module")
def junction_target(tmp_path_factory):
    core, openwire = harness.free_port(), harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path_factory.mktemp("ow-cross")),
        name="ow-cross",
        security=True,
        users=USERS,
        extra_acceptors_xml=harness.core_acceptor(core)
        + f'<acceptor name="openwire">tcp://{harness.LOOPBACK}:{openwire}?protocols=OPENWIRE</acceptor>',
    )
    node.start()
    try:
        yield _Target("junction", core, openwire, node.amqp_port, node.stomp_port)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def _both(artemis_target, junction_target, scenario, ow: OpenWireClient, jms: JmsClient):
    """The scenario's outcome on each broker: (Artemis's, Junction's)."""
    return scenario(artemis_target, ow, jms), scenario(junction_target, ow, jms)


def _ow_sends(queue: str) -> list:
    """An OpenWire send of each JMS type with every property type and header field; the bytes
    message replies to a topic, the others to a queue."""
    return [
        {"op": "send", "queue": queue, "type": kind, "body": JMS_BODIES[kind],
         "properties": {"k": kind, **JMS_PROPERTIES}, **OW_HEADERS,
         **({"replyToTopic": "replies"} if kind == "bytes" else {"replyToQueue": "replies"})}
        for kind in sorted(JMS_BODIES)
    ]  # fmt: skip


def _jms_outcome(m: dict, queue: str) -> dict:
    """A message an OpenWire or CORE consumer received, without what is each broker's own
    (its id's and times' values: their shapes and the time to live are kept)."""
    m = dict(m)
    if "deliveryCount" in m:  # the Classic client's: the 6.x lists JMSXDeliveryCount among the
        m["properties"].pop("JMSXDeliveryCount", None)  # property names, 5.17 does not
    assert m.pop("destination") == f"queue://{queue}"
    timestamp, expiration = m.pop("timestamp"), m.pop("expiration")
    m["expires"] = expiration > 0
    m["time to live"] = cross._ttl_ok(expiration - timestamp) if timestamp else None
    m["timestamp"] = timestamp > 0
    ident = m.pop("id")
    m["id"] = "uuid" if ident and UUID_ID.match(ident) else "broker" if ident and BROKER_ID.match(ident) else ident
    return m


def openwire_to_amqp(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Classic client sends each JMS type; an AMQP consumer: annotations, body,
    content-type, properties and header fields."""
    queue = f"owx.amqp.{next(_names)}"
    ow.run([target.openwire(), *_ow_sends(queue)])
    conn = cross._amqp(target)
    out = {}
    try:
        receiver = conn.create_receiver(queue)
        for _ in JMS_BODIES:
            m = receiver.receive(timeout=10)
            receiver.accept()
            outcome = cross.amqp_view(m)
            # Deliberate: Artemis's AMQP consumer also gets the __HDR_ properties (the OpenWire
            # message's own bookkeeping, see HDR_PROPERTIES) and a null JMSXDeliveryCount;
            # Junction keeps the first for OpenWire consumers only and writes no null property.
            if target.name == "artemis":
                properties = outcome["properties"]
                assert all(name in properties for name in HDR_PROPERTIES), properties
                for name in (*HDR_PROPERTIES, "JMSXDeliveryCount"):
                    properties.pop(name, None)
            outcome["message-id is a JMS id of a UUID"] = bool(UUID_ID.match(str(m.id)))
            outcome["group"] = (m.group_id, m.group_sequence)
            out[m.properties["k"]] = outcome
    finally:
        conn.close()
    return out


def openwire_to_core(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Classic client sends each JMS type; the Artemis JMS client (CORE) receives them:
    type, body, properties and header fields."""
    queue = f"owx.core.{next(_names)}"
    ow.run([target.openwire(), *_ow_sends(queue)])
    results = jms.run([peer.connect(target), {"op": "receive", "queue": queue, "count": len(JMS_BODIES)}])
    out = {}
    for m in results[1]["messages"]:
        m = _jms_outcome(m, queue)
        if target.name == "artemis":  # Deliberate: see HDR_PROPERTIES and openwire_to_amqp
            assert all(m["properties"].pop(name, None) is not None for name in HDR_PROPERTIES)
        out[m["properties"]["k"]] = m
    return out


def amqp_to_openwire(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """AMQP producers of a string, a data section (of bytes, of text/plain), a serialized
    object, a map, a list, a sequence and no body, each with every property type, header
    field and a group; the Classic client receives them: type, body, properties, fields."""
    queue = f"owx.from.amqp.{next(_names)}"
    ow.run([target.openwire(), {"op": "receive", "queue": queue, "timeout": 0}])  # makes the queue
    conn = cross._amqp(target)
    try:
        sender = conn.create_sender(queue)
        sent = cross.amqp_jms_messages(group_id="g-1")
        for m in sent:
            sender.send(m, timeout=10)
    finally:
        conn.close()
    results = ow.run([target.openwire(), {"op": "receive", "queue": queue, "count": len(sent)}])
    out = {}
    for m in results[1]["messages"]:
        m = _jms_outcome(m, queue)
        properties = m["properties"]
        # Deliberate: Artemis keeps what it does not map of the AMQP message in JMS_AMQP_*
        # properties (test_core_cross_protocol says why Junction does not) and gives a
        # content-type as JMS_AMQP_ContentType, Junction as content-type.
        if "JMS_AMQP_ContentType" in properties:
            properties["content-type"] = properties.pop("JMS_AMQP_ContentType")
        for name in [name for name in properties if name.startswith("JMS_AMQP_")]:
            del properties[name]
        # Deliberate: Artemis gives an AMQP message without a creation-time the JMS timestamp
        # 0 ("not set"); Junction stamps it with its arrival, as it does for every protocol.
        m["timestamp"] = m["time to live"] = None
        out[properties["k"]] = m
    return out


def core_to_openwire(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Artemis JMS client (CORE) sends each JMS type with every property type, header
    field and a group; the Classic client receives them: type, body, properties, fields."""
    queue = f"owx.from.core.{next(_names)}"
    sends = [
        {"op": "send", "queue": queue, "type": kind, "body": JMS_BODIES[kind],
         "properties": {"k": kind, "JMSXGroupID": "g-1", **JMS_PROPERTIES}, **cross.JMS_HEADERS,
         **({"replyTo": "topic://replies"} if kind == "bytes" else {})}
        for kind in sorted(JMS_BODIES)
    ]  # fmt: skip
    jms.run([peer.connect(target), *sends])
    results = ow.run([target.openwire(), {"op": "receive", "queue": queue, "count": len(JMS_BODIES)}])
    out = {}
    for m in results[1]["messages"]:
        m = _jms_outcome(m, queue)
        cid = m["properties"].pop("__AMQ_CID")  # the CORE connection's id: each broker's own
        assert re.fullmatch(r"[0-9a-f-]{36}", cid), cid
        out[m["properties"]["k"]] = m
    return out


def test_openwire_types_to_an_amqp_consumer(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, openwire_to_amqp, openwire_client, jms)
    assert junction == artemis
    assert {k: v["annotations"]["x-opt-jms-msg-type"] for k, v in artemis.items()} == {
        k: ("byte", v) for k, v in cross.JMS_MSG_TYPE.items()
    }
    text, data = artemis["text"], artemis["bytes"]
    assert text["annotations"]["x-opt-jms-dest"] == text["annotations"]["x-opt-jms-reply-to"] == ("byte", 0)
    assert data["annotations"]["x-opt-jms-reply-to"] == ("byte", 1)  # a topic
    assert text["properties"] == {"k": ("str", "text"), **{k: cross._plain(v) for k, v in AMQP_PROPERTIES.items()}}
    assert (text["correlation-id"], text["subject"], text["reply-to"], text["priority"]) == (
        "corr-1", "kind-1", "replies", 7)  # fmt: skip
    assert (text["group"], text["durable"]) == (("g-1", 0), True)
    assert text["message-id is a JMS id of a UUID"] and text["ttl"] and text["absolute-expiry"]
    assert (text["body"], data["body"]) == (("str", "hello ✓"), ("bytes", b"\x00\x01\xff"))
    assert artemis["map"]["body"]["i"] == ("int32", -7)  # an int keeps its width
    assert artemis["stream"]["body"][3] == ("int", 2**40)  # a long: proton reads a plain int
    assert artemis["object"]["content-type"] == cross.SERIALIZED
    assert artemis["object"]["body"] == ("serialized", True)
    assert artemis["message"]["body"] == ("NoneType", None)


def test_openwire_types_to_a_core_consumer(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, openwire_to_core, openwire_client, jms)
    assert junction == artemis
    assert {k: v["type"] for k, v in artemis.items()} == {k: k for k in JMS_BODIES}
    assert {k: v.get("body") for k, v in artemis.items()} == {**JMS_BODIES, "message": None}
    for kind, m in artemis.items():
        assert m["properties"] == {
            "k": kind, **READ_PROPERTIES, "JMSXDeliveryCount": {"int": 1}, "JMSXGroupID": "g-1",
            "JMSXGroupSeq": {"int": 0},
        }, kind  # fmt: skip
        assert (m["correlationId"], m["jmsType"], m["priority"]) == ("corr-1", "kind-1", 7)
        assert m["replyTo"] == ("topic://replies" if kind == "bytes" else "queue://replies")
        assert m["id"] == "uuid" and m["time to live"] and m["persistent"]


def test_amqp_producers_to_an_openwire_consumer(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, amqp_to_openwire, openwire_client, jms)
    assert junction == artemis
    typed = {**READ_PROPERTIES, "y": {"byte": -1}, "h": {"short": 300}, "i": {"int": 3}, "f": {"float": 1.5}}
    string = artemis["string"]
    assert (string["type"], string["body"]) == ("text", "text é")
    assert string["properties"] == {"k": "string", "JMSXGroupID": "g-1", "JMSXGroupSeq": {"int": 0}, **typed}
    assert (string["correlationId"], string["jmsType"], string["replyTo"]) == ("corr-1", "kind-1", "queue://replies")
    assert (string["priority"], string["groupId"], string["expires"], string["id"]) == (7, "g-1", True, "broker")
    cross.assert_jms_reads_amqp_bodies(artemis)


def test_core_types_to_an_openwire_consumer(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, core_to_openwire, openwire_client, jms)
    assert junction == artemis
    assert {k: v["type"] for k, v in artemis.items()} == {k: k for k in JMS_BODIES}
    # the Classic client reads a Message's body as nothing and its map's entries by name
    assert {k: v.get("body") for k, v in artemis.items()} == {**JMS_BODIES, "message": None}
    for kind, m in artemis.items():
        assert m["properties"] == {"k": kind, **READ_PROPERTIES, "JMSXGroupID": "g-1", "JMSXGroupSeq": {"int": 0}}
        assert (m["correlationId"], m["jmsType"], m["priority"], m["groupId"]) == ("corr-1", "kind-1", 7, "g-1")
        assert m["replyTo"] == ("topic://replies" if kind == "bytes" else "queue://replies")
        assert m["id"] == "broker" and m["time to live"] and m["deliveryCount"] == {"int": 1}


def connection_id(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """A Classic client with a client id sends to two queues; another Classic client and an
    AMQP consumer receive: whether each sees ``__AMQ_CID`` (the sender's client id)."""
    to_ow, to_amqp = f"owx.cid.ow.{next(_names)}", f"owx.cid.amqp.{next(_names)}"
    client_id = f"owx-client-{next(_names)}"
    ow.run([target.openwire(clientID=client_id), {"op": "send", "queue": to_ow, "body": "to OpenWire"},
            {"op": "send", "queue": to_amqp, "body": "to AMQP"}])  # fmt: skip
    got = ow.run([target.openwire(), {"op": "receive", "queue": to_ow}])[1]["messages"][0]
    conn = cross._amqp(target)
    try:
        receiver = conn.create_receiver(to_amqp)
        m = receiver.receive(timeout=10)
        receiver.accept()
    finally:
        conn.close()
    return {
        "OpenWire": got["properties"].get("__AMQ_CID") == client_id,
        # the producer set no JMSXUserID: none comes back (not the user the broker validated)
        "JMSXUserID": got["properties"].get("JMSXUserID"),
        "AMQP": "__AMQ_CID" in (m.properties or {}) or "__AMQ_CID" in {str(k) for k in (m.annotations or {})},
    }


def test_the_connection_id_property(artemis_target, junction_target, openwire_client, jms):
    """``__AMQ_CID`` (what ``noLocal`` selects on) is stamped on every message sent over
    OpenWire: an OpenWire consumer sees it as a property, an AMQP consumer does not (nor
    does the CORE client, which hides it among a message's property names)."""
    artemis, junction = _both(artemis_target, junction_target, connection_id, openwire_client, jms)
    assert junction == artemis == {"OpenWire": True, "AMQP": False, "JMSXUserID": None}


def openwire_to_stomp(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Classic client sends each JMS type; a STOMP consumer: the body and headers of
    each, until the last one sent (text), without what is each broker's own (ids, times)."""
    queue = f"owx.stomp.{next(_names)}"
    ow.run([target.openwire(), *_ow_sends(queue)])
    out = {}
    for headers, body in cross.stomp_until_text(target, queue):
        headers = dict(headers)
        assert headers.pop("destination") == queue and headers.pop("subscription") == "1"
        assert int(headers.pop("expires")) - int(headers.pop("timestamp")) == 600_000
        assert headers.pop("message-id") and headers.pop("__AMQ_CID").startswith("ID:")  # the sender's client id
        if target.name == "artemis":
            # Deliberate: see HDR_PROPERTIES; and Junction writes redelivered only when true
            assert all(headers.pop(name, None) is not None for name in HDR_PROPERTIES)
            assert headers.pop("redelivered") == "false"
        out[headers.pop("k")] = {"body": bytes(body), "headers": headers}
    return out


def test_openwire_types_to_a_stomp_consumer(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, openwire_to_stomp, openwire_client, jms)
    # Deliberate (as from the JMS client, see test_core_cross_protocol): Artemis never delivers
    # a StreamMessage to STOMP (reading its body as a string fails); Junction delivers it empty.
    assert "stream" not in artemis
    assert junction.pop("stream")["body"] == b""
    assert junction == artemis
    assert {k: v["body"] for k, v in artemis.items()} == {
        "text": "hello ✓".encode(), "bytes": b"\x00\x01\xff", "map": "\x00\u0200".encode(), "object": b"",
        "message": b"",
    }  # fmt: skip
    headers = artemis["text"]["headers"]
    assert {name: headers[name] for name in JMS_PROPERTIES} == {
        "b": "true", "y": "-1", "h": "300", "i": "3", "l": str(2**40), "f": "1.5", "d": "2.5", "s": "text é",
    }  # fmt: skip
    assert {name: headers[name] for name in ("correlation-id", "type", "reply-to", "priority", "persistent",
                                            "destination-type", "_AMQ_GROUP_ID")} == {
        "correlation-id": "corr-1", "type": "kind-1", "reply-to": "queue://replies", "priority": "7",
        "persistent": "true", "destination-type": "ANYCAST", "_AMQ_GROUP_ID": "g-1",
    }  # fmt: skip
    assert artemis["bytes"]["headers"]["reply-to"] == "topic://replies"


def openwire_through_amqp(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Classic client sends each JMS type; an AMQP client receives each and sends it on
    as it came; the Classic client receives them again: type, body and header fields."""
    first, second = f"owx.via.{next(_names)}", f"owx.back.{next(_names)}"
    # the Classic client's consumer makes the second queue (an AMQP sender makes none on a node)
    ow.run([target.openwire(), {"op": "receive", "queue": second, "timeout": 0}, *_ow_sends(first)])
    conn = cross._amqp(target)
    try:
        receiver = conn.create_receiver(first)
        sender = conn.create_sender(second)
        for _ in JMS_BODIES:
            m = receiver.receive(timeout=10)
            receiver.accept()
            m.address = None
            sender.send(m, timeout=10)
    finally:
        conn.close()
    results = ow.run([target.openwire(), {"op": "receive", "queue": second, "count": len(JMS_BODIES)}])
    return {
        m["properties"]["k"]: (m["type"], m.get("body"), m["correlationId"], m["jmsType"], m["replyTo"], m["groupId"])
        for m in results[1]["messages"]
    }


def test_openwire_types_through_an_amqp_client_and_back(artemis_target, junction_target, openwire_client, jms):
    artemis, junction = _both(artemis_target, junction_target, openwire_through_amqp, openwire_client, jms)
    assert junction == artemis
    for kind in ("text", "bytes", "map", "stream", "object"):
        assert artemis[kind][0] == kind
    assert artemis["object"][1] == JMS_BODIES["object"]  # getObject works after the AMQP hop
    assert artemis["text"][2:] == ("corr-1", "kind-1", "queue://replies", "g-1")
    assert artemis["bytes"][4] == "topic://replies"


#: bodies over the Artemis JMS client's minLargeMessageSize (100 KiB): sent as large messages
LARGE_SIZE = 200_000


def large_core_to_openwire(target: _Target, ow: OpenWireClient, jms: JmsClient) -> dict:
    """The Artemis JMS client sends a BytesMessage and a TextMessage of LARGE_SIZE (large
    messages: continuations into a file); the Classic client receives them: type and body."""
    queue = f"owx.large.{next(_names)}"
    jms.run([peer.connect(target), *({"op": "send", "queue": queue, "type": kind, "size": LARGE_SIZE,
                                      "properties": {"k": kind}} for kind in ("bytes", "text"))])  # fmt: skip
    got = ow.run([target.openwire(), {"op": "receive", "queue": queue, "count": 2}])[1]["messages"]
    out = {}
    for m in got:
        body = base64.b64decode(m["body"]) if m["type"] == "bytes" else m["body"].encode("latin-1")
        out[m["properties"]["k"]] = (m["type"], len(body), body == pattern(LARGE_SIZE))
    return out


def test_large_core_messages_to_an_openwire_consumer(artemis_target, junction_target, openwire_client, jms):
    """A large message has no continuations over OpenWire: the consumer gets it whole."""
    artemis, junction = _both(artemis_target, junction_target, large_core_to_openwire, openwire_client, jms)
    assert junction == artemis == {"bytes": ("bytes", LARGE_SIZE, True), "text": ("text", LARGE_SIZE, True)}
