"""Scheduled delivery and consumer priority for STOMP and AMQP clients, as Artemis gives them.

Differential: every scenario runs against a real Artemis broker and a real Junction node with
the same clients (stomp.py, python-qpid-proton, the real JMS client) and the outcomes must be
the same; where they deliberately differ the test says so next to the comparison.

What a client can ask for (README, "Connect a STOMP client" / "Connect an AMQP 1.0 client"):

* STOMP SEND headers ``AMQ_SCHEDULED_DELAY`` (ms from now) and ``AMQ_SCHEDULED_TIME`` (epoch
  ms), each only when above 0, consumed: a consumer sees ``_AMQ_SCHED_DELIVERY`` instead.  A
  value that is not a number is an ERROR (with the receipt id) and the connection closes.
* AMQP message annotations ``x-opt-delivery-time`` / ``x-opt-delivery-delay``: a numeric time
  wins (a time of 0 means no hold, delay or not); they reach an AMQP consumer unchanged.
* AMQP consumer priority: the source address's ``?consumer-priority=N`` or the link property
  ``priority`` (which wins).  STOMP has none: ``dest?consumer-priority=5`` is another queue.

Holding is proven without sleeping, on the brokers' clock (they run on this host): right after
the scheduled messages the producer sends a plain marker; one consumer receives one queue in
order, so a message that is not held arrives before the marker, and a held one after it and not
before its time -- the ``_AMQ_SCHED_DELIVERY`` the broker computed and shows a STOMP consumer,
or for AMQP the time asked for (a delay counts from a moment after the test's own clock read
before sending).  The test waits for the messages with a deadline.
"""

from __future__ import annotations

import itertools
import time

import pytest
import stomp
from proton import Message, Timeout, int32, symbol
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached

from tests import harness
from tests.artemis import JmsClient
from tests.integration import test_artemis_peer as peer
from tests.integration import test_core_cross_protocol as cross
from tests.integration.test_amqp_interop import Capabilities
from tests.integration.test_core_cross_protocol import _Collect, _Target

# The brokers (module-scoped): Artemis with AMQP and STOMP acceptors, a Junction node with CORE.
artemis_target = cross.artemis_target
junction_target = cross.junction_target

pytestmark = pytest.mark.timeout(60)

ARTEMIS_OPTIONS = {"amqp": True, "stomp": True}
_names = itertools.count()
#: how long a scenario waits for its held messages (they are due within ~1.5 s)
DEADLINE_S = 15
#: the delay the scenarios schedule with (ms): long enough to see, short enough to wait for
DELAY_MS = 1500
QUEUE = Capabilities("queue")
ANYCAST = {"destination-type": "ANYCAST"}


def _name(kind: str) -> str:
    return f"sched.{kind}.{next(_names)}.{int(time.time() * 1000)}"


def _login(target: _Target) -> tuple[str, str, str | None]:
    """(user, password, client id): a target may name its own (a gateway's users, its key)."""
    return (
        getattr(target, "user", peer.USER["user"]),
        getattr(target, "password", peer.USER["password"]),
        getattr(target, "client_id", None),
    )


def _stomp(target: _Target, listener=None) -> stomp.Connection12:
    user, password, client_id = _login(target)
    conn = stomp.Connection12([(target.host, target.stomp_port)])
    conn.set_listener("t", listener or _Collect())
    conn.connect(user, password, wait=True, headers={"client-id": client_id} if client_id else {})
    return conn


def _amqp(target: _Target) -> BlockingConnection:
    user, password, client_id = _login(target)
    extra = {"container_id": client_id} if client_id else {}
    return BlockingConnection(
        f"amqp://{target.host}:{target.amqp_port}",
        user=user, password=password, allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=15, **extra,
    )


class _Timed(stomp.ConnectionListener):
    """(arrival time in epoch ms, headers) of each MESSAGE frame, in arrival order."""

    def __init__(self):
        self.frames: list = []

    def on_message(self, frame):
        self.frames.append((_now_ms(), frame.headers))


def _now_ms() -> int:
    # The brokers under test run on this host: its clock is theirs.
    return int(time.time() * 1000)


def _held(arrivals: list, due: dict) -> dict:
    """For each message but the marker: ``held`` or ``at once``, or what went wrong.

    ``arrivals``: (k, arrival time ms) in arrival order, one of them ``marker``, sent right
    after the others; ``due``: k -> the time it must not arrive before (0: none).  A message
    that is not held arrives before the marker (one queue, one consumer: in order), or at
    least before every held one (Artemis delivers one scheduled in the past, as a negative
    AMQP delay makes it, through its scheduler: at once, but maybe behind the marker); a held
    one after the marker, not before its time (to within the clock's millisecond).
    """
    keys = [k for k, _ in arrivals]
    marker = keys.index("marker")
    first_held = min((i for i, k in enumerate(keys) if due.get(k)), default=len(keys))
    out = {}
    for i, (k, arrived) in enumerate(arrivals):
        if k == "marker":
            continue
        if i < marker or (not due.get(k) and i < first_held):
            out[k] = "at once"
        elif due.get(k) and arrived >= due[k]:
            out[k] = "held"
        else:
            out[k] = f"after the marker but {due.get(k, 0) - arrived} ms early"
    return out


# --------------------------------------------------------------------------- STOMP SEND headers
def stomp_scheduled(target: _Target) -> dict:
    """AMQ_SCHEDULED_DELAY / AMQ_SCHEDULED_TIME on a STOMP SEND; a STOMP consumer."""
    queue = _name("stomp")
    listener = _Timed()
    consumer = _stomp(target, listener)
    producer = _stomp(target)
    try:
        consumer.subscribe(queue, id="1", headers={"subscription-type": "ANYCAST"})
        now = _now_ms()
        sends = {
            "delay": {"AMQ_SCHEDULED_DELAY": str(DELAY_MS)},
            "time": {"AMQ_SCHEDULED_TIME": str(now + DELAY_MS)},
            "time-wins": {"AMQ_SCHEDULED_DELAY": "600000", "AMQ_SCHEDULED_TIME": str(now + DELAY_MS)},
            "zero": {"AMQ_SCHEDULED_DELAY": "0"},
            "negative": {"AMQ_SCHEDULED_DELAY": "-5", "AMQ_SCHEDULED_TIME": "-1"},
            "marker": {},
        }
        for k, headers in sends.items():
            producer.send(queue, k, headers={**ANYCAST, **headers, "k": k})
        harness.wait_for(
            lambda: len(listener.frames) >= len(sends), DEADLINE_S, what=f"the scheduled messages on {queue}"
        )
    finally:
        producer.disconnect()
        consumer.disconnect()
    # the time each must not arrive before: the broker's own, from the header it adds
    due = {h["k"]: int(h.get("_AMQ_SCHED_DELIVERY", 0)) for _, h in listener.frames}
    out = {"order": _held([(h["k"], arrived) for arrived, h in listener.frames], due)}
    for _, h in listener.frames:
        k = h["k"]
        if not due[k]:
            when = None
        elif "AMQ_SCHEDULED_TIME" in sends[k]:
            when = "the time sent" if due[k] == now + DELAY_MS else due[k]
        else:  # a delay counts from the broker's timestamp (the same ms, give or take one)
            when = f"timestamp + {round((due[k] - int(h['timestamp'])) / 10) * 10} ms"
        out[k] = {"headers": sorted(n for n in h if n.startswith(("AMQ_", "_AMQ_"))), "due": when}
    return out


def test_stomp_scheduled_delivery_headers(artemis_target, junction_target):
    artemis, junction = stomp_scheduled(artemis_target), stomp_scheduled(junction_target)
    assert junction == artemis
    assert artemis["order"] == {
        "zero": "at once", "negative": "at once", "time-wins": "held", "time": "held", "delay": "held",
    }
    assert artemis["delay"] == {"headers": ["_AMQ_SCHED_DELIVERY"], "due": f"timestamp + {DELAY_MS} ms"}
    assert artemis["time-wins"] == {"headers": ["_AMQ_SCHED_DELIVERY"], "due": "the time sent"}
    assert artemis["zero"] == artemis["negative"] == {"headers": [], "due": None}


def stomp_bad_scheduled(target: _Target, header: str, value: str) -> dict:
    """A SEND whose scheduling header is not a number: what the client sees, and whether the
    message went anywhere."""
    queue = _name("bad")
    listener = _Collect()
    errors: list = []
    listener.on_error = lambda frame: errors.append(frame.headers)
    conn = _stomp(target, listener)
    conn.send(queue, "bad", headers={**ANYCAST, header: value, "receipt": "r-bad"})
    harness.wait_for(lambda: errors and not conn.is_connected(), 10, what="the ERROR and the close")
    # the queue has no message: a fresh consumer with a probe after it gets only the probe
    check = _Collect()
    reader = _stomp(target, check)
    try:
        reader.subscribe(queue, id="1", headers={"subscription-type": "ANYCAST"})
        reader.send(queue, "probe", headers={**ANYCAST, "k": "probe"})
        harness.wait_for(lambda: check.message_list, 10, what="the probe")
    finally:
        reader.disconnect()
    return {
        "error": True,
        "receipt-id": errors[0].get("receipt-id"),
        "closed": not conn.is_connected(),
        "delivered": [h["k"] for h, _ in check.message_list],
    }


@pytest.mark.parametrize("header,value", [("AMQ_SCHEDULED_DELAY", "abc"), ("AMQ_SCHEDULED_TIME", "1.5")])
def test_stomp_scheduled_header_not_a_number(artemis_target, junction_target, header, value):
    artemis = stomp_bad_scheduled(artemis_target, header, value)
    junction = stomp_bad_scheduled(junction_target, header, value)
    # The ERROR's text differs on purpose: Artemis says "AMQ339031 Error handling send",
    # Junction names the header and the value.
    assert junction == artemis == {"error": True, "receipt-id": "r-bad", "closed": True, "delivered": ["probe"]}


# --------------------------------------------------------------------------- AMQP annotations
def _plain_annotations(annotations) -> dict:
    return {str(k): (type(v).__name__, v) for k, v in (annotations or {}).items() if str(k).startswith("x-opt-delivery")}


def amqp_scheduled(target: _Target) -> dict:
    """x-opt-delivery-time / x-opt-delivery-delay on AMQP messages; an AMQP consumer."""
    queue = _name("amqp")
    conn = _amqp(target)
    arrivals: list = []
    annotations: dict = {}
    try:
        receiver = conn.create_receiver(queue, name="r", credit=100, options=[QUEUE])
        sender = conn.create_sender(queue, name="s", options=[QUEUE])
        now = _now_ms()
        sends = {
            "delay": {symbol("x-opt-delivery-delay"): DELAY_MS},
            "int32-delay": {symbol("x-opt-delivery-delay"): int32(DELAY_MS)},
            "time": {symbol("x-opt-delivery-time"): now + DELAY_MS},
            "time-wins": {symbol("x-opt-delivery-delay"): 600000, symbol("x-opt-delivery-time"): now + DELAY_MS},
            "zero-time": {symbol("x-opt-delivery-time"): 0, symbol("x-opt-delivery-delay"): 600000},
            "negative": {symbol("x-opt-delivery-delay"): -5},
            "text": {symbol("x-opt-delivery-delay"): "600000"},
            "app-property": {},  # _AMQ_SCHED_DELIVERY as an application property: not a request
            "marker": {},
        }
        for k, sent_annotations in sends.items():
            properties = {"k": k, **({"_AMQ_SCHED_DELIVERY": now + DELAY_MS} if k == "app-property" else {})}
            sender.send(Message(body=k, properties=properties, annotations=sent_annotations), timeout=10)

        def done():
            # the client's own loop reads the socket: a message's time is when it is read
            try:
                m = receiver.receive(timeout=0.01)
            except Timeout:
                return False
            receiver.accept()
            k = str(m.properties["k"])
            arrivals.append((k, _now_ms()))
            annotations[k] = _plain_annotations(m.annotations)
            return len(arrivals) >= len(sends)

        harness.wait_for(done, DEADLINE_S, interval=0.001, what=f"the scheduled messages on {queue}")
    finally:
        conn.close()
    # a delay counts from when the broker took the message, after ``now``
    due = {"delay": now + DELAY_MS, "int32-delay": now + DELAY_MS, "time": now + DELAY_MS, "time-wins": now + DELAY_MS}
    annotations.pop("marker")
    for seen in annotations.values():  # the time asked for, whenever the test ran
        for name, (kind, value) in seen.items():
            if value == now + DELAY_MS:
                seen[name] = (kind, "the time sent")
    return {"held": _held(arrivals, due), "annotations": annotations}


def test_amqp_delivery_annotations(artemis_target, junction_target):
    artemis, junction = amqp_scheduled(artemis_target), amqp_scheduled(junction_target)
    assert junction == artemis
    assert artemis["held"] == {
        "zero-time": "at once", "negative": "at once", "text": "at once", "app-property": "at once",
        "time": "held", "time-wins": "held", "delay": "held", "int32-delay": "held",
    }
    # the annotations reach the AMQP consumer as sent
    assert artemis["annotations"]["int32-delay"] == {"x-opt-delivery-delay": ("int32", DELAY_MS)}
    assert artemis["annotations"]["zero-time"] == {
        "x-opt-delivery-time": ("int", 0), "x-opt-delivery-delay": ("int", 600000),
    }


# --------------------------------------------------------------------------- consumer priority
class LinkPriority(LinkOption):
    """The attach's link property ``priority`` (Artemis's receiver priority)."""

    def __init__(self, value):
        self.value = value

    def apply(self, link) -> None:
        link.properties = {symbol("priority"): self.value}


#: high receiver: (address suffix, link priority or None)
PRIORITY_CASES = {
    "none": ("", None),
    "address": ("?consumer-priority=5", None),
    "link-int": ("", int32(5)),
    "link-long": ("", 5),
    "link-wins": ("?consumer-priority=-5", int32(5)),
    "negative": ("?consumer-priority=-5", None),
    "other-parameter": ("?foo=bar", None),
}


def amqp_priority(target: _Target, case: str) -> dict:
    """Two receivers on one queue: ``low`` (no priority, credit 100) and ``high`` (the case's
    priority, credit 3); ten messages: who gets which."""
    suffix, link_priority = PRIORITY_CASES[case]
    queue = _name("prio")
    conn = _amqp(target)
    try:
        low = conn.create_receiver(queue, name="low", credit=0, options=[QUEUE])
        options = [QUEUE] if link_priority is None else [QUEUE, LinkPriority(link_priority)]
        high = conn.create_receiver(queue + suffix, name="high", credit=0, options=options)
        source = high.link.remote_source.address
        low.link.flow(100)
        high.link.flow(3)
        sender = conn.create_sender(queue, name="s", options=[QUEUE])
        for i in range(10):
            sender.send(Message(body=i), timeout=10)
        conn.wait(lambda: len(low.fetcher.incoming) + len(high.fetcher.incoming) >= 10, timeout=10)
        return {
            "source": source.replace(queue, "<queue>"),
            "low": [m.body for m, _ in low.fetcher.incoming],
            "high": [m.body for m, _ in high.fetcher.incoming],
        }
    finally:
        conn.close()


@pytest.mark.parametrize("case", sorted(PRIORITY_CASES))
def test_amqp_consumer_priority(artemis_target, junction_target, case):
    artemis, junction = amqp_priority(artemis_target, case), amqp_priority(junction_target, case)
    assert junction == artemis
    suffix, link_priority = PRIORITY_CASES[case]
    assert artemis["source"] == "<queue>" + suffix  # the address is echoed with its parameters
    if case in ("address", "link-int", "link-long", "link-wins"):
        # the higher one gets every message while it has credit, the rest go to the lower
        assert artemis == {**artemis, "high": [0, 1, 2], "low": [3, 4, 5, 6, 7, 8, 9]}
    elif case == "negative":
        assert artemis["high"] == [] and artemis["low"] == list(range(10))
    else:  # equal priorities: round robin while both have credit
        assert artemis["high"] == [1, 3, 5]


def amqp_bad_priority(target: _Target) -> dict:
    conn = _amqp(target)
    try:
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver(_name("prio") + "?consumer-priority=abc", name="bad", options=[QUEUE])
        # the connection stays usable
        queue = _name("prio")
        sender = conn.create_sender(queue, name="s", options=[QUEUE])
        receiver = conn.create_receiver(queue, name="r", options=[QUEUE])
        sender.send(Message(body="after"), timeout=10)
        body = receiver.receive(timeout=10).body
        receiver.accept()
    finally:
        conn.close()
    return {"refused": True, "condition": refused.value.condition, "description": str(refused.value), "after": body}


def test_amqp_consumer_priority_not_a_number(artemis_target, junction_target):
    artemis, junction = amqp_bad_priority(artemis_target), amqp_bad_priority(junction_target)
    # Both refuse the link and keep the connection.  The condition differs on purpose:
    # Artemis fails creating the consumer (amqp:internal-error, 'AMQ119005 ... For input
    # string: "abc"'); Junction names the bad field.
    assert artemis["condition"] == "amqp:internal-error" and "abc" in artemis["description"]
    assert junction["condition"] == "amqp:invalid-field" and "abc" in junction["description"]
    assert {k: v for k, v in junction.items() if k not in ("condition", "description")} == {
        k: v for k, v in artemis.items() if k not in ("condition", "description")
    } == {"refused": True, "after": "after"}


def stomp_priority(target: _Target) -> dict:
    """STOMP subscribers on ``q`` and ``q?consumer-priority=5``: sends to ``q`` and to the
    parameterised name."""
    queue = _name("sprio")
    listener = _Collect()
    conn = _stomp(target, listener)
    try:
        conn.subscribe(queue, id="low", headers={"subscription-type": "ANYCAST"})
        conn.subscribe(queue + "?consumer-priority=5", id="high", headers={"subscription-type": "ANYCAST"})
        for i in range(4):
            conn.send(queue, str(i), headers=ANYCAST)
        conn.send(queue + "?consumer-priority=5", "direct", headers=ANYCAST)
        harness.wait_for(lambda: len(listener.message_list) >= 5, 10, what="five messages")
    finally:
        conn.disconnect()
    got: dict = {}
    for headers, body in listener.message_list:
        got.setdefault(headers["subscription"], []).append(body)
    return got


def test_stomp_has_no_consumer_priority(artemis_target, junction_target):
    artemis, junction = stomp_priority(artemis_target), stomp_priority(junction_target)
    assert junction == artemis
    # Artemis's STOMP consumers all have the default priority: the parameter is part of a name
    assert artemis == {"low": ["0", "1", "2", "3"], "high": ["direct"]}


# --------------------------------------------------------------------------- across protocols
def cross_scheduled(target: _Target, jms: JmsClient) -> dict:
    """A STOMP-scheduled and an AMQP-scheduled message to a JMS consumer, the STOMP one to an
    AMQP consumer too, and a JMS deliveryDelay message to a STOMP and an AMQP consumer: how
    each shows the scheduled time."""
    to_jms, to_amqp = _name("x-jms"), _name("x-amqp")
    amqp_to_jms, from_jms = _name("x-amqp-jms"), _name("x-from-jms")
    at = _now_ms() + 500
    stomp_conn = _stomp(target)
    try:
        for queue in (to_jms, to_amqp):
            stomp_conn.send(queue, "s", headers={**ANYCAST, "AMQ_SCHEDULED_TIME": str(at), "k": "stomp"})
    finally:
        stomp_conn.disconnect()
    conn = _amqp(target)
    try:
        # a receiver first: Artemis creates the queue for it (a sender alone makes no queue)
        conn.create_receiver(amqp_to_jms, name="made", credit=0, options=[QUEUE]).close()
        sender = conn.create_sender(amqp_to_jms, name="s", options=[QUEUE])
        sender.send(Message(body="a", annotations={symbol("x-opt-delivery-time"): at}), timeout=10)
    finally:
        conn.close()
    results = jms.run(
        [
            peer.connect(target),
            {"op": "receive", "queue": to_jms, "count": 1, "timeout": 10000},
            {"op": "receive", "queue": amqp_to_jms, "count": 1, "timeout": 10000},
            {"op": "send", "queue": from_jms, "type": "text", "body": "j", "delay": 500, "count": 2},
        ]
    )
    out = {}
    for key, result in (("jms-from-stomp", results[1]), ("jms-from-amqp", results[2])):
        view = result["messages"][0]["properties"].get("_AMQ_SCHED_DELIVERY")
        out[key] = {"_AMQ_SCHED_DELIVERY": view and (next(iter(view)), next(iter(view.values())) == at)}
    conn = _amqp(target)
    try:
        for queue, key in ((to_amqp, "amqp-from-stomp"), (from_jms, "amqp-from-jms")):
            receiver = conn.create_receiver(queue, name=key, options=[QUEUE])
            m = receiver.receive(timeout=10)
            receiver.accept()
            annotations = _plain_annotations(m.annotations)
            time_value = annotations.get("x-opt-delivery-time", (None, 0))[1]
            out[key] = {
                "annotations": {k: t for k, (t, _) in annotations.items()},
                # the STOMP one's time is the one asked for; the JMS one's is in the future
                "time": time_value == at if key == "amqp-from-stomp" else time_value > at,
                "application-properties": sorted(k for k in (m.properties or {}) if "SCHED" in k),
            }
    finally:
        conn.close()
    listener = _Collect()
    reader = _stomp(target, listener)
    try:
        reader.subscribe(from_jms, id="1", headers={"subscription-type": "ANYCAST"})
        harness.wait_for(lambda: listener.message_list, 10, what="the JMS message over STOMP")
    finally:
        reader.disconnect()
    headers = listener.message_list[0][0]
    out["stomp-from-jms"] = sorted(n for n in headers if "SCHED" in n)
    return out


def test_scheduled_time_across_protocols(artemis_target, junction_target, jms: JmsClient):
    artemis, junction = cross_scheduled(artemis_target, jms), cross_scheduled(junction_target, jms)
    assert junction == artemis
    # A JMS consumer sees the time as the long property _AMQ_SCHED_DELIVERY.  (Of an AMQP
    # message Artemis also shows each annotation as a JMS_AMQP_MA_* property; Junction does
    # not convert message annotations to properties at all, see docs/amqp.md.)
    assert artemis["jms-from-stomp"] == artemis["jms-from-amqp"] == {"_AMQ_SCHED_DELIVERY": ("long", True)}
    assert artemis["amqp-from-stomp"]["annotations"] == {"x-opt-delivery-time": "int"}
    assert artemis["amqp-from-stomp"]["application-properties"] == []
    assert artemis["stomp-from-jms"] == ["_AMQ_SCHED_DELIVERY"]


# --------------------------------------------------------------------------- restart (Junction)
def test_stomp_and_amqp_scheduled_messages_survive_a_restart(broker_factory):
    """The time a STOMP header or an AMQP annotation asked for is kept with the message (its
    ``_AMQ_SCHED_DELIVERY`` property, in the journal): after a graceful restart each is still
    held until then -- behind a marker sent after the restart -- and then delivered."""
    node = broker_factory("sched-restart", security=True, users=cross.USERS).start()
    target = _Target("junction", 0, node.amqp_port, node.stomp_port)
    stomp_queue, amqp_queue = _name("restart-stomp"), _name("restart-amqp")
    delay_ms = 5000
    due = _now_ms() + delay_ms  # the STOMP time; the AMQP delay counts from a moment after this
    producer = _stomp(target)
    try:
        producer.send(
            stomp_queue, "held",
            headers={**ANYCAST, "persistent": "true", "AMQ_SCHEDULED_TIME": str(due), "k": "held"},
            receipt="r-held",
        )
    finally:
        producer.disconnect()  # after the RECEIPT: the message is on disk
    conn = _amqp(target)
    try:
        sender = conn.create_sender(amqp_queue, name="s", options=[QUEUE])
        held = Message(body="held", durable=True, properties={"k": "held"},
                       annotations={symbol("x-opt-delivery-delay"): delay_ms})
        sender.send(held, timeout=10)  # settled: accepted, and on disk
    finally:
        conn.close()
    assert node.stop() == 0
    node.start()

    listener = _Timed()
    consumer = _stomp(target, listener)
    conn = _amqp(target)
    arrivals: list = []
    try:
        consumer.subscribe(stomp_queue, id="1", headers={"subscription-type": "ANYCAST"})
        receiver = conn.create_receiver(amqp_queue, name="r", credit=10, options=[QUEUE])
        consumer.send(stomp_queue, "marker", headers={**ANYCAST, "k": "marker"})
        conn.create_sender(amqp_queue, name="m", options=[QUEUE]).send(
            Message(body="marker", properties={"k": "marker"}), timeout=10
        )

        def amqp_done():
            try:
                m = receiver.receive(timeout=0.01)
            except Timeout:
                return False
            receiver.accept()
            arrivals.append((str(m.properties["k"]), _now_ms()))
            return len(arrivals) >= 2

        harness.wait_for(amqp_done, DEADLINE_S, interval=0.001, what="the AMQP messages after the restart")
        harness.wait_for(lambda: len(listener.frames) >= 2, DEADLINE_S, what="the STOMP messages after the restart")
    finally:
        consumer.disconnect()
        conn.close()
    stomp_arrivals = [(h["k"], arrived) for arrived, h in listener.frames]
    assert [k for k, _ in stomp_arrivals] == [k for k, _ in arrivals] == ["marker", "held"]
    assert _held(stomp_arrivals, {"held": due}) == {"held": "held"}
    assert _held(arrivals, {"held": due}) == {"held": "held"}
    assert int(listener.frames[1][1]["_AMQ_SCHED_DELIVERY"]) == due
