"""Message groups on one queue (protocol-neutral), over the cases of Artemis's own tests
(``GroupingTest``, ``MessageGroupingTest``, ``JMSMessageGroupsTest``, ``BucketMessageGroupsTest``)
that apply to one node; the hash values are the ones computed from Artemis's ``SimpleString``."""

from __future__ import annotations

import pytest

from junction.brokercore.message_groups import (
    BucketTable,
    GroupSettings,
    GroupTable,
    bucket_of,
    group_id_of,
    group_sequence_of,
    simple_string_hash,
)
from junction.brokercore.queue import Consumer
from junction.model.filter.expression import parse_filter
from junction.model.message import Message, Typed
from tests.unit.stomp_fixtures import AddressSettings, Broker

# -- the pure parts ------------------------------------------------------------------------------


def test_simple_string_hash_is_artemis_s_over_utf16le_signed_bytes():
    # computed from SimpleString.hashCode (not Java's String.hashCode)
    assert simple_string_hash("groupA") == -1280684078
    assert simple_string_hash("groupB") == -1280684047
    assert simple_string_hash("groupC") == -1280684016
    assert simple_string_hash("") == 0
    # a char above 0x7F gives a negative (signed) byte: "é" is 0xE9 0x00 -> -23*31 + 0
    assert simple_string_hash("é") == -23 * 31
    # a character outside the BMP is its two UTF-16 surrogates
    assert simple_string_hash("\U0001F600") == _java_hash_of_bytes("\U0001F600".encode("utf-16-le"))


def _java_hash_of_bytes(data: bytes) -> int:
    h = 0
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_buckets_of_the_reference_ids_and_the_int_key_rule():
    assert [bucket_of(g, 2) for g in ("groupA", "groupB", "groupC")] == [0, 1, 0]
    # _AMQ_GROUP_BUCKET_INT_KEY_<int> is bucket <int> % n (Integer.hashCode(i) == i)
    assert bucket_of("_AMQ_GROUP_BUCKET_INT_KEY_7", 5) == 2
    assert bucket_of("_AMQ_GROUP_BUCKET_INT_KEY_-5", 7) == (-5 & 0x7FFFFFFF) % 7
    assert bucket_of("_AMQ_GROUP_BUCKET_INT_KEY_+3", 4) == 3  # Integer.parseInt takes a sign
    # not a Java int: the key hashes as a string
    for odd in ("_AMQ_GROUP_BUCKET_INT_KEY_x", "_AMQ_GROUP_BUCKET_INT_KEY_ 1", "_AMQ_GROUP_BUCKET_INT_KEY_2147483648"):
        assert bucket_of(odd, 1000) == (simple_string_hash(odd) & 0x7FFFFFFF) % 1000


def test_bucket_table_honours_its_count():
    table = BucketTable(3)
    for n in range(100):
        table.put(f"g{n}", object())
    assert len(table) <= 3
    assert set(table.to_map()) <= {f"_AMQ_GROUP_BUCKET_INT_KEY_{b}" for b in range(3)}


@pytest.mark.parametrize("count", [0, -1])
def test_bucket_table_needs_a_positive_count(count):
    with pytest.raises(ValueError):
        BucketTable(count)


def test_bucket_table_put_get_remove_and_remove_consumer():
    table = BucketTable(2)
    c1, c2 = object(), object()
    table.put("groupA", c1)
    assert table.get("groupC") is c1  # same bucket
    assert table.get("groupB") is None
    table.put("groupB", c2)
    assert len(table) == 2
    assert table.to_map() == {"_AMQ_GROUP_BUCKET_INT_KEY_0": c1, "_AMQ_GROUP_BUCKET_INT_KEY_1": c2}
    assert table.remove("groupC") is c1 and table.get("groupA") is None
    table.remove_consumer(c2)
    assert len(table) == 0


def test_group_table_put_get_remove_consumer():
    table = GroupTable()
    c1, c2 = object(), object()
    table.put("a", c1)
    table.put("b", c2)
    table.put("c", c1)
    table.remove_consumer(c1)
    assert table.to_map() == {"b": c2}


def _m(**properties) -> Message:
    return Message(address="q", properties=properties)


def test_group_id_from_each_protocol_s_place():
    assert group_id_of(_m()) is None
    assert group_id_of(_m(_AMQ_GROUP_ID="core")) == "core"  # CORE, STOMP's header, OpenWire
    assert group_id_of(_m(JMSXGroupID="amqp")) == "amqp"  # AMQP group-id, JMSXGroupID property
    assert group_id_of(_m(_AMQ_GROUP_ID="core", JMSXGroupID="amqp")) == "core"


def test_group_sequence_from_each_protocol_s_place():
    assert group_sequence_of(_m()) == 0
    assert group_sequence_of(_m(_AMQ_GROUP_SEQUENCE=Typed("int", -1))) == -1  # CORE, OpenWire
    assert group_sequence_of(_m(_AMQ_GROUP_SEQUENCE="-1")) == -1  # getIntProperty parses a string
    assert group_sequence_of(_m(_AMQ_GROUP_SEQUENCE="x")) == 0
    # AMQP group-sequence is a uint kept as the int JMSXGroupSeq: read as a Java int
    assert group_sequence_of(_m(JMSXGroupSeq=Typed("int", 4294967295))) == -1
    assert group_sequence_of(_m(JMSXGroupSeq=Typed("int", 7))) == 7
    # a STOMP header JMSXGroupSeq is a string property, not a sequence (as in Artemis)
    assert group_sequence_of(_m(JMSXGroupSeq="-1")) == 0


def test_group_settings_record_keeps_only_what_was_given():
    assert GroupSettings().to_record() == {}
    settings = GroupSettings(buckets=4, first_key="First")
    assert settings.to_record() == {"buckets": 4, "first_key": "First"}
    assert GroupSettings.from_record(settings.to_record()) == settings
    assert GroupSettings.from_record(None) is None


# -- on a queue ------------------------------------------------------------------------------------


class Taker:
    """A consumer on the queue that records what it is handed (bodies, and the messages)."""

    def __init__(self, queue, name, credit=None, filter=None):
        self.name = name
        self.refs = []
        self.messages = []
        self.consumer = Consumer(queue, self._deliver, credit_messages=credit, filter=filter)
        queue.add_consumer(self.consumer)

    def _deliver(self, ref):
        self.refs.append(ref)
        self.messages.append(ref.message)

    @property
    def bodies(self):
        return [m.body.decode() for m in self.messages]

    def ack_all(self, queue):
        for ref in list(self.consumer.in_flight.values()):
            queue.acknowledge(ref)
            self.consumer.add_credit(1)


def setup(*names, settings=None, credit=None, **queue_kw):
    broker = Broker(address_settings=[AddressSettings(match="q", **settings)] if settings else ())
    queue = broker.queue("q", **queue_kw)
    takers = [Taker(queue, n, credit=credit) for n in names]
    return broker, broker.session(), queue, takers


def send(broker, session, *items, run=True):
    """items: (body, group) or (body, group, sequence); group None = ungrouped."""
    for item in items:
        body, group, *seq = item
        properties = {}
        if group is not None:
            properties["_AMQ_GROUP_ID"] = group
        if seq:
            properties["_AMQ_GROUP_SEQUENCE"] = Typed("int", seq[0])
        session.submit(Message(address="q", body=body.encode(), properties=properties), None)
    if run:
        broker.run()


def interleaved(groups, count, start=0):
    return [(f"{g}{i}", g) for i in range(start, start + count) for g in groups]


def owners(takers, groups):
    """group -> the one taker that got its messages (fails if two did)."""
    out = {}
    for g in groups:
        got = [t.name for t in takers if any(b.startswith(g) for b in t.bodies)]
        assert len(got) == 1, f"group {g} went to {got}"
        out[g] = got[0]
    return out


def test_each_group_goes_to_one_consumer_in_order_and_new_groups_go_round_robin():
    broker, session, queue, takers = setup("c1", "c2")
    send(broker, session, *interleaved("ABC", 10))
    # GroupingTest: groups A, B, C on two consumers -> c1, c2, c1
    assert owners(takers, "ABC") == {"A": "c1", "B": "c2", "C": "c1"}
    for t in takers:
        for g in "ABC":
            mine = [b for b in t.bodies if b.startswith(g)]
            assert mine == sorted(mine, key=lambda b: int(b[1:]))
    assert len(queue.groups.table) == 3


def test_ungrouped_messages_keep_going_round_robin_among_grouped_ones():
    broker, session, queue, (c1, c2) = setup("c1", "c2")
    send(broker, session, ("A0", "A"), ("x1", None), ("A1", "A"), ("x2", None), ("x3", None))
    # A pins c1 and moves the round robin on to c2 (x1), then back to c1; A1 goes to its
    # owner without moving it, so x2 is c1's turn still
    assert c1.bodies == ["A0", "A1", "x2"] and c2.bodies == ["x1", "x3"]


def test_many_groups_load_balance_over_consumers():
    # MessageGroupingTest.testLoadBalanceGroups: 10 groups x 3, 3 consumers
    broker, session, queue, takers = setup("c1", "c2", "c3")
    groups = [f"g{n}-" for n in range(10)]
    send(broker, session, *[(f"{g}{i}", g) for i in range(3) for g in groups])
    counts = [len(t.bodies) for t in takers]
    assert sum(counts) == 30 and all(0 < c < 30 for c in counts)
    owners(takers, groups)


def test_sequence_minus_one_closes_the_group_after_its_message():
    # JMSMessageGroupsTest.testGroupSeqCloseGroup
    broker, session, queue, (c1, c2, c3) = setup("c1", "c2", "c3")
    send(broker, session, *[(f"a{i}", "G", i) for i in range(1, 11)])
    assert len(c1.bodies) == 10 and len(queue.groups.table) == 1
    send(broker, session, ("close1", "G", -1))
    assert c1.bodies[-1] == "close1" and len(queue.groups.table) == 0
    # the next run of the group picks its owner anew, round robin: c2, then c3
    send(broker, session, *[(f"b{i}", "G", i) for i in range(1, 4)], ("close2", "G", -1))
    send(broker, session, *[(f"c{i}", "G", i) for i in range(1, 4)])
    assert c2.bodies == ["b1", "b2", "b3", "close2"]
    assert c3.bodies == ["c1", "c2", "c3"]
    assert len(queue.groups.table) == 1


def test_sequence_minus_one_without_an_owner_goes_round_robin_and_pins_nothing():
    broker, session, queue, (c1, c2) = setup("c1", "c2")
    send(broker, session, ("only", "G", -1), ("x", None), ("y", None))
    # delivered round robin to c1, which the round robin then stays at (consumers.repeat())
    assert c1.bodies == ["only", "x"] and c2.bodies == ["y"]
    assert len(queue.groups.table) == 0


def test_a_consumer_going_away_frees_its_groups_and_its_deliveries_go_to_the_next_owner():
    # GroupingTest.testGroupingRollbackOnClose: the owner's unacked group messages go to the other
    broker, session, queue, (c1, c2) = setup("c1", "c2")
    send(broker, session, *interleaved("AB", 3))
    assert owners([c1, c2], "AB") == {"A": "c1", "B": "c2"}
    # c1 holds A0..A2 unacknowledged when it goes
    queue.remove_consumer(c1.consumer)
    assert "A" not in queue.groups.table.to_map()
    broker.run()
    assert c2.bodies == ["B0", "B1", "B2", "A0", "A1", "A2"]
    assert [r.delivery_count for r in c2.refs[3:]] == [2, 2, 2]
    send(broker, session, ("A3", "A"))
    assert c2.bodies[-1] == "A3" and queue.groups.owner("A") is c2.consumer


def test_head_of_line_a_busy_owner_stops_the_pass():
    # credit 1 each: A0 pins c1, which then has no credit; A1 and the ungrouped x behind it wait
    broker, session, queue, (c1, c2) = setup("c1", "c2", credit=1)
    send(broker, session, ("A0", "A"), ("A1", "A"), ("x", None))
    assert c1.bodies == ["A0"] and c2.bodies == []
    assert queue.waiting_count == 2
    c1.ack_all(queue)  # c1's credit returns: the pass goes on
    broker.run()
    assert c1.bodies == ["A0", "A1"] and c2.bodies == ["x"]


def test_group_rebalance_spreads_groups_over_a_new_consumer():
    # GroupingTest.testGroupRebalance
    broker, session, queue, takers = setup("c1", "c2", settings={"default_group_rebalance": True})
    send(broker, session, *interleaved("ABC", 1))
    assert owners(takers, "ABC") == {"A": "c1", "B": "c2", "C": "c1"}
    for t in takers:
        t.ack_all(queue)
    c3 = Taker(queue, "c3")
    assert len(queue.groups.table) == 0
    for t in takers:
        t.messages.clear()
    send(broker, session, *interleaved("ABC", 1, start=1))
    got = {t.name: t.bodies for t in [*takers, c3]}
    assert sorted(len(v) for v in got.values()) == [1, 1, 1], got


def test_without_rebalance_a_new_consumer_gets_no_existing_group():
    broker, session, queue, takers = setup("c1", "c2")
    send(broker, session, *interleaved("ABC", 1))
    c3 = Taker(queue, "c3")
    send(broker, session, *interleaved("ABC", 3, start=1))
    assert c3.bodies == []


def test_group_rebalance_pause_dispatch_waits_for_every_delivery_to_settle():
    # GroupingTest.testGroupRebalancePauseDispatch
    broker, session, queue, (c1, c2) = setup(
        "c1", "c2", settings={"default_group_rebalance": True, "default_group_rebalance_pause_dispatch": True}
    )
    send(broker, session, *interleaved("ABC", 1))
    c3 = Taker(queue, "c3")
    send(broker, session, *interleaved("ABC", 1, start=1))
    # c1 and c2 still hold unacknowledged messages: nothing is dispatched, to anyone
    assert [len(t.bodies) for t in (c1, c2, c3)] == [2, 1, 0]
    assert queue.waiting_count == 3
    c1.ack_all(queue)
    broker.run()
    assert queue.waiting_count == 3  # c2 still holds B0
    c2.ack_all(queue)
    broker.run()
    assert queue.waiting_count == 0
    # one group per consumer now
    assert sorted(t.bodies[-1] for t in (c1, c2, c3)) == ["A1", "B1", "C1"]


def test_group_rebalance_without_pause_dispatches_at_once():
    broker, session, queue, (c1, c2) = setup("c1", "c2", settings={"default_group_rebalance": True})
    send(broker, session, *interleaved("ABC", 1))
    Taker(queue, "c3")
    send(broker, session, *interleaved("ABC", 1, start=1))
    assert queue.waiting_count == 0


def test_group_buckets_share_an_owner_per_bucket():
    # GroupingTest.testGroupBuckets: groupA and groupC share consumer1, groupB consumer2
    broker, session, queue, takers = setup("c1", "c2", "c3", settings={"default_group_buckets": 2})
    send(broker, session, *[(f"{g}-{i}", g) for i in range(10) for g in ("groupA", "groupB", "groupC")])
    c1, c2, c3 = takers
    assert {b.split("-")[0] for b in c1.bodies} == {"groupA", "groupC"}
    assert {b.split("-")[0] for b in c2.bodies} == {"groupB"}
    assert c3.bodies == []
    assert set(queue.groups.table.to_map()) == {"_AMQ_GROUP_BUCKET_INT_KEY_0", "_AMQ_GROUP_BUCKET_INT_KEY_1"}


def test_group_buckets_zero_turns_grouping_off():
    # GroupingTest.testGroupDisable: 30 messages of 3 groups, round robin 10/10/10
    broker, session, queue, takers = setup("c1", "c2", "c3", settings={"default_group_buckets": 0})
    assert queue.groups is None
    send(broker, session, *[(f"{i}", "G") for i in range(30)])
    assert [len(t.bodies) for t in takers] == [10, 10, 10]


def test_group_first_key_flags_the_delivery_that_pins_a_group_only():
    # GroupingTest.testGroupFirstKey and JMSMessageGroupsTest.testGroupFirst
    broker, session, queue, (c1, c2) = setup("c1", "c2", settings={"default_group_first_key": "JMSXFirstInGroupID"})
    send(broker, session, *interleaved("AB", 3))
    flagged = {t.name: [m.body.decode() for m in t.messages if m.properties.get("JMSXFirstInGroupID") is True]
               for t in (c1, c2)}
    assert flagged == {"c1": ["A0"], "c2": ["B0"]}
    # the stored message is untouched
    assert all("JMSXFirstInGroupID" not in r.message.properties for t in (c1, c2) for r in t.refs)
    # a new owner after the old one left gets the flag on its first message of the group
    queue.remove_consumer(c1.consumer)
    broker.run()
    first_again = [m for m in c2.messages[3:] if m.properties.get("JMSXFirstInGroupID") is True]
    assert [m.body for m in first_again] == [b"A0"]


def test_a_redelivered_first_message_of_a_group_carries_the_first_key_again():
    # Artemis redelivers its GroupFirstMessageReference itself: the flag stays with the reference
    broker, session, queue, (c1,) = setup("c1", settings={"default_group_first_key": "JMSXFirstInGroupID"})
    send(broker, session, ("A0", "A"), ("A1", "A"))
    first, second = c1.refs
    for ref in (second, first):  # a rollback: back at the head in order, the same owner
        queue.cancel(ref, delay=False)
    broker.run()
    redelivered = [(m.body.decode(), m.properties.get("JMSXFirstInGroupID")) for m in c1.messages[2:]]
    assert redelivered == [("A0", True), ("A1", None)]
    assert "JMSXFirstInGroupID" not in c1.refs[2].message.properties  # the stored message untouched


def test_group_first_key_off_by_default():
    broker, session, queue, (c1,) = setup("c1")
    send(broker, session, ("A0", "A"))
    assert not any(k.startswith("JMSXFirst") for k in c1.messages[0].properties)


def test_the_queue_s_own_attributes_override_the_address_settings():
    broker, session, queue, takers = setup(
        "c1", "c2", "c3", settings={"default_group_buckets": 0}, groups=GroupSettings(buckets=2)
    )
    send(broker, session, *[(f"{g}-{i}", g) for i in range(3) for g in ("groupA", "groupB", "groupC")])
    assert takers[2].bodies == []  # two buckets, not off


def test_groups_hold_with_consumer_selectors():
    broker = Broker()
    queue = broker.queue("q")
    c1 = Taker(queue, "c1", filter=parse_filter("kind = 'x'"))
    c2 = Taker(queue, "c2")
    session = broker.session()
    for i in range(4):
        session.submit(Message(address="q", body=b"A%d" % i, properties={"_AMQ_GROUP_ID": "A", "kind": "x"}), None)
    broker.run()
    assert owners([c1, c2], "A") == {"A": "c1"} and len(c1.bodies) == 4
    # a message of the group that its owner's selector refuses waits; others pass it
    session.submit(Message(address="q", body=b"A9", properties={"_AMQ_GROUP_ID": "A", "kind": "y"}), None)
    session.submit(Message(address="q", body=b"z", properties={"kind": "y"}), None)
    broker.run()
    assert c2.bodies == ["z"] and queue.waiting_count == 1


def test_internal_queues_do_not_group():
    broker = Broker()
    queue = broker.queue("$.junction.sf.c.node")
    assert queue.groups is None


def test_an_exclusive_queue_ignores_group_ids():
    # Artemis: extractGroupID is null on an exclusive queue (its one consumer takes everything)
    broker = Broker()
    assert broker.queue("x", exclusive=True).groups is None


# -- configuration ---------------------------------------------------------------------------------

_GROUPED_XML = """\
<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<address-settings>
   <address-setting match="orders.#">
      <default-group-buckets>8</default-group-buckets>
      <default-group-rebalance>true</default-group-rebalance>
      <default-group-rebalance-pause-dispatch>true</default-group-rebalance-pause-dispatch>
      <default-group-first-key>JMSXFirstInGroupID</default-group-first-key>
   </address-setting>
</address-settings>
<addresses>
   <address name="orders.eu"><anycast>
      <queue name="plain"/>
      <queue name="own" group-buckets="0" group-rebalance="false" group-rebalance-pause-dispatch="false"
             group-first-key="First"/>
   </anycast></address>
</addresses>
</core></configuration>
"""


def test_grouping_settings_are_read_without_warnings_and_applied_to_queues():
    from junction.config.loader import parse_config
    from junction.config.unimplemented import warnings

    config = parse_config(_GROUPED_XML, file="b.xml", env={})
    assert warnings(config) == []
    (setting,) = config.address_settings
    assert (setting.default_group_buckets, setting.default_group_rebalance,
            setting.default_group_rebalance_pause_dispatch, setting.default_group_first_key) == (
        8, True, True, "JMSXFirstInGroupID")
    broker = Broker(address_settings=config.address_settings, addresses=config.addresses)
    plain = broker.server.find_queue("plain").groups
    assert (plain.table.buckets, plain.rebalance, plain.pause_dispatch, plain.first_key) == (
        8, True, True, "JMSXFirstInGroupID")
    assert broker.server.find_queue("own").groups is None  # its own group-buckets 0


@pytest.mark.parametrize(
    "attribute, text",
    [("group-buckets", "-2"), ("group-rebalance", "maybe"), ("group-rebalance-pause-dispatch", "1x")],
)
def test_bad_grouping_attributes_are_refused_up_front(attribute, text):
    from junction.config.loader import ConfigErrors, parse_config

    xml = _GROUPED_XML.replace('<queue name="plain"/>', f'<queue name="plain" {attribute}="{text}"/>')
    with pytest.raises(ConfigErrors) as info:
        parse_config(xml, file="b.xml", env={})
    assert any(attribute in e.message for e in info.value.errors)


# -- CORE's CREATE_QUEUE and QUEUEQUERY --------------------------------------------------------------


def test_core_create_queue_group_attributes_are_applied_and_queried():
    from junction.protocols.core import packets as p
    from tests.unit.core_fixtures import CoreClient

    ch = 10
    broker = Broker(address_settings=[AddressSettings(match="#", default_group_first_key="Dflt")])
    client = CoreClient(broker)
    client.open()
    client.send(p.CreateQueueV2("g", "g", None, True, False, True, False, 1, -1, False,
                                group_buckets=4, group_rebalance=True, group_rebalance_pause_dispatch=True,
                                channel_id=ch))
    groups = broker.server.find_queue("g").groups
    assert (groups.table.buckets, groups.rebalance, groups.pause_dispatch, groups.first_key) == (4, True, True, "Dflt")
    (q,) = client.send(p.SessQueueQuery("g", channel_id=ch))
    assert (q.group_buckets, q.group_rebalance, q.group_rebalance_pause_dispatch, q.group_first_key) == (
        4, True, True, "Dflt")
    client.send(p.CreateSharedQueueV2("s", "s", None, True, 1, True, group_buckets=0, channel_id=ch))
    assert broker.server.find_queue("s").groups is None
    (q,) = client.send(p.SessQueueQuery("s", channel_id=ch))
    assert q.group_buckets == 0
    (q,) = client.send(p.SessQueueQuery("none.yet", channel_id=ch))
    assert (q.exists, q.group_buckets, q.group_first_key) == (False, -1, "Dflt")


def test_a_queue_s_own_group_attributes_are_kept_in_its_journal_record(tmp_path):
    from junction.brokercore.queue import QueueDefinition
    from junction.model.message import RoutingType
    from tests.unit.core_fixtures import JournalNode

    node = JournalNode(tmp_path)
    node.server.create_queue(QueueDefinition("kept", "kept", RoutingType.ANYCAST,
                                             groups=GroupSettings(buckets=3, first_key="First")))
    node.server.create_queue(QueueDefinition("plain", "plain", RoutingType.ANYCAST))
    node.run()
    node.server.stop()
    node.run()
    again = JournalNode(tmp_path, node.fs)
    kept = again.server.find_queue("kept")
    assert kept.definition.groups == GroupSettings(buckets=3, first_key="First")
    assert (kept.groups.table.buckets, kept.groups.first_key) == (3, "First")
    plain = again.server.find_queue("plain")
    assert plain.definition.groups is None and plain.groups.table.__class__ is GroupTable


def test_head_of_line_also_with_consumer_selectors():
    broker = Broker()
    queue = broker.queue("q")
    c1 = Taker(queue, "c1", credit=1, filter=parse_filter("kind = 'x'"))
    c2 = Taker(queue, "c2", credit=5)
    session = broker.session()
    for body, group in (("A0", "A"), ("A1", "A"), ("free", None)):
        properties = {"kind": "x"} if group is None else {"kind": "x", "_AMQ_GROUP_ID": group}
        session.submit(Message(address="q", body=body.encode(), properties=properties), None)
    broker.run()
    # A0 pinned c1 (first in the round robin), which has no credit now: A1 and what is behind wait
    assert c1.bodies == ["A0"] and c2.bodies == []
    c1.ack_all(queue)
    broker.run()
    assert c1.bodies == ["A0", "A1"] and c2.bodies == ["free"]
