"""Broadcast and discovery groups on a ``Clock`` with a fake multicast port (no sockets).

The fake reactor is a :class:`~twisted.internet.task.Clock` with a
``listenMulticast`` that hands out :class:`FakePort` s recording the socket
options set, the groups joined and every ``write``.  Datagrams reach a
discovery group through ``datagram_received`` (what its protocol's
``datagramReceived`` calls), optionally piped from a broadcast group's port.
"""

from __future__ import annotations

import logging

import pytest
from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.error import MulticastJoinError
from twisted.internet.task import Clock

from junction.brokercore.cluster import discovery
from junction.brokercore.cluster.discovery import (
    LOG_INTERVAL,
    MAX_ENTRIES,
    MULTICAST_TTL,
    RECEIVE_BUFFER_BYTES,
    BroadcastGroup,
    DiscoveryGroup,
    Entry,
    announced_connector,
)
from junction.config.model import BroadcastGroupConfig, Connector, DiscoveryGroupConfig
from junction.protocols.cluster.broadcast import (
    MAX_DATAGRAM_BYTES,
    AnnouncedConnector,
    Announcement,
    decode_announcement,
    encode_announcement,
)

GROUP, GROUP_PORT = "239.255.10.20", 19876
LOGGER = "junction.cluster.discovery"


# --------------------------------------------------------------------------- fakes


class FakePort:
    """A multicast port that records instead of touching a socket."""

    def __init__(self, reactor, port, protocol, interface, max_packet_size, listen_multiple):
        self.reactor = reactor
        self.port = port
        self.protocol = protocol
        self.interface = interface
        self.max_packet_size = max_packet_size
        self.listen_multiple = listen_multiple
        self.ttl = None
        self.loopback = None
        self.outgoing_interface = None
        self.joined: list[tuple[str, str]] = []
        self.left: list[tuple[str, str]] = []
        self.written: list[tuple[bytes, tuple[str, int]]] = []
        self.closed = False
        self.write_error: Exception | None = None
        self.interface_error: Exception | None = None
        self.join_error: Exception | None = None
        self.on_write = None
        protocol.makeConnection(self)

    def setTTL(self, ttl):  # noqa: N802
        self.ttl = ttl

    def setLoopbackMode(self, mode):  # noqa: N802
        self.loopback = mode

    def setOutgoingInterface(self, addr):  # noqa: N802
        if self.interface_error is not None:
            return defer.fail(self.interface_error)
        self.outgoing_interface = addr
        return defer.succeed(1)

    def joinGroup(self, addr, interface=""):  # noqa: N802
        if self.join_error is not None:
            return defer.fail(self.join_error)
        self.joined.append((addr, interface))
        return defer.succeed(None)

    def leaveGroup(self, addr, interface=""):  # noqa: N802
        self.left.append((addr, interface))
        return defer.succeed(None)

    def write(self, datagram, addr):
        assert not self.closed, "write on a closed port"
        if self.write_error is not None:
            raise self.write_error
        self.written.append((datagram, addr))
        if self.on_write is not None:
            self.on_write(datagram, (self.interface or "10.1.1.1", self.port or 40000))

    def getHost(self):  # noqa: N802
        return IPv4Address("UDP", self.interface or "0.0.0.0", self.port or 40000)

    def stopListening(self):  # noqa: N802
        self.closed = True
        self.protocol.doStop()
        return defer.succeed(None)


class FakeReactor(Clock):
    def __init__(self):
        super().__init__()
        self.ports: list[FakePort] = []
        self.next_join_error: Exception | None = None
        self.next_interface_error: Exception | None = None

    def listenMulticast(self, port, protocol, interface="", maxPacketSize=8192, listenMultiple=False):  # noqa: N802
        p = FakePort(self, port, protocol, interface, maxPacketSize, listenMultiple)
        p.join_error, self.next_join_error = self.next_join_error, None
        p.interface_error, self.next_interface_error = self.next_interface_error, None
        self.ports.append(p)
        return p


@pytest.fixture
def clock() -> FakeReactor:
    return FakeReactor()


def bconfig(**kw) -> BroadcastGroupConfig:
    fields = {"name": "bg", "group_address": GROUP, "group_port": GROUP_PORT, "broadcast_period": 2000}
    fields.update(kw)
    return BroadcastGroupConfig(**fields)


def dconfig(**kw) -> DiscoveryGroupConfig:
    fields = {
        "name": "dg",
        "group_address": GROUP,
        "group_port": GROUP_PORT,
        "refresh_timeout": 10_000,
        "initial_wait_timeout": 5_000,
    }
    fields.update(kw)
    return DiscoveryGroupConfig(**fields)


CONNECTORS = [
    Connector("netty", "tcp", "10.0.0.1", 61616, {"sslEnabled": "true", "trustStorePassword": "secret"}),
    Connector("amqp", "tcp", "10.0.0.1", 5672, {}),
    Connector("other", "tcp", "10.0.0.9", 61617, {}),
]


def ann(node_id="peer-1", name="broker-p", sequence=1, connectors=None) -> Announcement:
    if connectors is None:
        connectors = (AnnouncedConnector("netty", "10.0.0.2", 61616),)
    return Announcement(node_id, name, sequence, tuple(connectors))


def dgram(**kw) -> bytes:
    return encode_announcement(ann(**kw))


def started_discovery(clock, node_id="me", **kw) -> DiscoveryGroup:
    local = kw.pop("local_connectors", None)
    group = DiscoveryGroup(dconfig(**kw), node_id, reactor=clock, local_connectors=local)
    group.start()
    return group


def recorder(group: DiscoveryGroup) -> list:
    events: list = []
    group.add_listener(lambda event, entry: events.append((event, entry)))
    return events


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# --------------------------------------------------------------------------- broadcast group


def test_broadcast_opens_the_socket_as_configured(clock):
    group = BroadcastGroup(
        bconfig(local_bind_address="127.0.0.1", local_bind_port=-1), CONNECTORS, "n1", "node1", reactor=clock
    )
    group.start()
    (port,) = clock.ports
    assert (port.interface, port.port) == ("127.0.0.1", 0)  # -1: anonymous
    assert port.ttl == MULTICAST_TTL == 1
    assert port.loopback == 1
    assert port.outgoing_interface == "127.0.0.1"
    group.stop()


def test_broadcast_without_bind_address_uses_every_interface(clock):
    group = BroadcastGroup(bconfig(local_bind_port=5432), CONNECTORS, "n1", "node1", reactor=clock)
    group.start()
    (port,) = clock.ports
    assert (port.interface, port.port) == ("", 5432)
    assert port.outgoing_interface is None
    group.stop()


def test_broadcast_sends_at_once_then_every_period_with_increasing_sequence(clock):
    group = BroadcastGroup(bconfig(broadcast_period=2000), CONNECTORS, "n1", "node1", reactor=clock)
    d = group.start()
    assert d.called
    port = clock.ports[0]
    assert len(port.written) == 1 and group.sent == 1
    clock.advance(1.999)
    assert len(port.written) == 1
    clock.advance(0.001)
    assert len(port.written) == 2
    clock.pump([2.0] * 3)
    assert group.sent == len(port.written) == 5
    decoded = [decode_announcement(data) for data, _ in port.written]
    assert [a.sequence for a in decoded] == [1, 2, 3, 4, 5]
    assert group.sequence == 5
    assert {addr for _, addr in port.written} == {(GROUP, GROUP_PORT)}
    assert {(a.node_id, a.name) for a in decoded} == {("n1", "node1")}
    # one timer, whatever the number of sends
    assert len(clock.getDelayedCalls()) == 1
    group.stop()


def test_broadcast_announces_the_referenced_connectors_in_order_without_passwords(clock):
    group = BroadcastGroup(
        bconfig(connector_refs=("amqp", "netty")), CONNECTORS, "n1", "node1", reactor=clock
    )
    group.start()
    a = decode_announcement(clock.ports[0].written[0][0])
    assert a.connectors == (
        AnnouncedConnector("amqp", "10.0.0.1", 5672),
        AnnouncedConnector("netty", "10.0.0.1", 61616, {"sslEnabled": "true"}),
    )
    group.stop()


def test_broadcast_without_refs_announces_every_connector_given(clock):
    group = BroadcastGroup(bconfig(), CONNECTORS[1:], "n1", "node1", reactor=clock)
    assert [c.name for c in group.connectors] == ["amqp", "other"]


def test_announced_connector_stringifies_and_drops_secrets():
    c = announced_connector(
        Connector("c", "tcp", "h", 1, {"keyStorePassword": "x", "SSLPASSWORD": "y", "n": 5, "b": True})
    )
    assert c.params_dict() == {"n": "5", "b": "true"}
    assert announced_connector(c) is c


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"connector_refs": ("missing",)}, "missing"),
        ({"broadcast_period": 0}, "broadcast-period"),
        ({"broadcast_period": -5}, "broadcast-period"),
        ({"group_address": "10.0.0.1"}, "multicast"),
        ({"group_address": "224.0.0.0"}, "multicast"),
        ({"group_address": "ff02::1"}, "IPv4"),
        ({"group_address": "not-an-address"}, "not an IP"),
        ({"group_port": 0}, "group-port"),
        ({"group_port": 70000}, "group-port"),
        ({"local_bind_port": -2}, "local-bind-port"),
    ],
)
def test_broadcast_config_errors(clock, kw, match):
    with pytest.raises(ValueError, match=match):
        BroadcastGroup(bconfig(**kw), CONNECTORS, "n1", "node1", reactor=clock)


def test_broadcast_too_large_is_refused_at_construction(clock):
    with pytest.raises(ValueError, match=str(MAX_DATAGRAM_BYTES)):
        BroadcastGroup(bconfig(), CONNECTORS, "n1", "x" * MAX_DATAGRAM_BYTES, reactor=clock)


def test_broadcast_send_errors_are_counted_logged_once_a_minute_and_the_loop_goes_on(clock, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    group = BroadcastGroup(bconfig(broadcast_period=1000), CONNECTORS, "n1", "node1", reactor=clock)
    group.start()
    port = clock.ports[0]
    port.write_error = OSError(101, "Network is unreachable")
    clock.pump([1.0] * 60)  # failed sends at t = 1 .. 60
    assert group.send_errors == 60 and group.sent == 1
    assert len(messages(caplog)) == 1
    assert "Network is unreachable" in messages(caplog)[0]
    clock.advance(1.0)  # t = 61, a minute after the first report: one more, with the count
    assert len(messages(caplog)) == 2
    assert "59 more like this" in messages(caplog)[1]
    port.write_error = None
    clock.advance(1.0)
    assert group.sent == 2 and group.send_errors == 61
    assert [decode_announcement(d).sequence for d, _ in port.written] == [1, 63]
    group.stop()


def test_broadcast_stop_leaves_no_delayed_call_and_closes_the_socket(clock):
    group = BroadcastGroup(bconfig(), CONNECTORS, "n1", "node1", reactor=clock)
    assert group.stop() is None  # never started
    group.start()
    clock.advance(2.0)
    d = group.stop()
    assert d is None or isinstance(d, defer.Deferred)
    assert clock.getDelayedCalls() == []
    assert clock.ports[0].closed and not group.running
    clock.advance(10.0)
    assert len(clock.ports[0].written) == 2
    assert group.stop() is None  # twice is fine


def test_broadcast_restart_starts_a_new_socket(clock):
    group = BroadcastGroup(bconfig(), CONNECTORS, "n1", "node1", reactor=clock)
    group.start()
    with pytest.raises(RuntimeError):
        group.start()
    group.stop()
    group.start()
    assert len(clock.ports) == 2 and len(clock.ports[1].written) == 1
    group.stop()
    assert clock.getDelayedCalls() == []


def test_broadcast_interface_failure_fails_start_and_stops(clock, caplog):
    clock.next_interface_error = OSError("no such interface")
    group = BroadcastGroup(bconfig(local_bind_address="192.0.2.1"), CONNECTORS, "n1", "node1", reactor=clock)
    d = group.start()
    failures = []
    d.addErrback(failures.append)
    assert failures and failures[0].check(OSError)
    assert not group.running and clock.ports[0].closed
    assert clock.ports[0].written == []
    assert clock.getDelayedCalls() == []


def test_broadcast_status(clock):
    group = BroadcastGroup(bconfig(connector_refs=("amqp",)), CONNECTORS, "n1", "node1", reactor=clock)
    group.start()
    clock.advance(2.0)
    status = group.status()
    assert status["name"] == "bg" and status["group"] == GROUP and status["port"] == GROUP_PORT
    assert status["sent"] == 2 and status["sequence"] == 2 and status["send_errors"] == 0
    assert status["connectors"] == [{"name": "amqp", "host": "10.0.0.1", "port": 5672, "params": {}}]
    assert status["node_id"] == "n1" and status["node_name"] == "node1" and status["running"]
    group.stop()


# --------------------------------------------------------------------------- discovery group: socket


def test_discovery_listens_on_the_group_port_reusing_it_and_joins(clock):
    group = started_discovery(clock, local_bind_address="127.0.0.1")
    (port,) = clock.ports
    assert port.port == GROUP_PORT
    assert port.listen_multiple is True
    assert port.max_packet_size == RECEIVE_BUFFER_BYTES >= MAX_DATAGRAM_BYTES
    assert port.interface in (GROUP, "")  # the group's address on Linux
    assert port.interface == group.bind_address
    assert port.joined == [(GROUP, "127.0.0.1")]
    group.stop()
    assert port.left == [(GROUP, "127.0.0.1")] and port.closed


def test_discovery_joins_on_any_interface_without_bind_address(clock):
    group = started_discovery(clock)
    assert clock.ports[0].joined == [(GROUP, "0.0.0.0")]
    group.stop()


def test_discovery_join_failure_fails_start_and_stops(clock):
    clock.next_join_error = MulticastJoinError(GROUP, "192.0.2.1")
    group = DiscoveryGroup(dconfig(local_bind_address="192.0.2.1"), "me", reactor=clock)
    failures = []
    group.start().addErrback(failures.append)
    assert failures and failures[0].check(MulticastJoinError)
    assert not group.running and clock.ports[0].closed
    assert clock.getDelayedCalls() == []


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"refresh_timeout": 0}, "refresh-timeout"),
        ({"initial_wait_timeout": -1}, "initial-wait-timeout"),
        ({"group_address": "192.168.1.1"}, "multicast"),
    ],
)
def test_discovery_config_errors(clock, kw, match):
    with pytest.raises(ValueError, match=match):
        DiscoveryGroup(dconfig(**kw), "me", reactor=clock)


def test_datagrams_reach_the_group_through_the_protocol(clock):
    group = started_discovery(clock)
    clock.ports[0].protocol.datagramReceived(dgram(), ("10.0.0.2", 40000))
    assert list(group.entries) == ["peer-1"]
    group.stop()


# --------------------------------------------------------------------------- discovery group: entries


def test_added_then_refresh_without_event_then_updated(clock):
    group = started_discovery(clock)
    events = recorder(group)
    group.datagram_received(dgram(sequence=1), ("10.0.0.2", 40000))
    assert [e for e, _ in events] == ["added"]
    entry = group.entries["peer-1"]
    assert isinstance(entry, Entry)
    assert (entry.node_id, entry.name, entry.source, entry.last_seen) == (
        "peer-1",
        "broker-p",
        ("10.0.0.2", 40000),
        0.0,
    )
    assert events[0][1] is entry

    clock.advance(2.0)
    group.datagram_received(dgram(sequence=2), ("10.0.0.2", 40000))
    assert [e for e, _ in events] == ["added"]  # same connectors: a refresh, no event
    assert group.entries["peer-1"].last_seen == 2.0
    assert group.entries["peer-1"].announcement.sequence == 2

    moved = (AnnouncedConnector("netty", "10.0.0.3", 61616),)
    group.datagram_received(dgram(sequence=3, connectors=moved), ("10.0.0.3", 40000))
    assert [e for e, _ in events] == ["added", "updated"]
    assert events[1][1].connectors == moved and events[1][1].source == ("10.0.0.3", 40000)

    group.datagram_received(dgram(sequence=4, connectors=moved, name="renamed"), ("10.0.0.3", 40000))
    assert [e for e, _ in events] == ["added", "updated", "updated"]

    group.datagram_received(dgram(node_id="peer-2"), ("10.0.0.4", 40000))
    assert [e for e, _ in events] == ["added", "updated", "updated", "added"]
    assert set(group.entries) == {"peer-1", "peer-2"}
    group.stop()


def test_connector_params_change_is_an_update(clock):
    group = started_discovery(clock)
    events = recorder(group)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    changed = (AnnouncedConnector("netty", "10.0.0.2", 61616, {"sslEnabled": "true"}),)
    group.datagram_received(dgram(connectors=changed), ("10.0.0.2", 1))
    assert [e for e, _ in events] == ["added", "updated"]
    group.stop()


def test_entry_expires_exactly_after_refresh_timeout(clock):
    group = started_discovery(clock, refresh_timeout=10_000)
    events = recorder(group)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    clock.advance(9.999)
    assert "peer-1" in group.entries
    clock.advance(0.001)
    assert "peer-1" not in group.entries
    assert [(e, en.node_id) for e, en in events] == [("added", "peer-1"), ("removed", "peer-1")]
    group.stop()


def test_refreshed_entry_stays_and_expires_from_its_last_refresh(clock):
    group = started_discovery(clock, refresh_timeout=10_000)
    events = recorder(group)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    for _ in range(10):  # refreshed every 2 s for 20 s
        clock.advance(2.0)
        group.datagram_received(dgram(), ("10.0.0.2", 1))
    assert [e for e, _ in events] == ["added"]
    clock.advance(9.99)
    assert "peer-1" in group.entries
    clock.advance(0.01)
    assert "peer-1" not in group.entries
    assert [e for e, _ in events] == ["added", "removed"]
    group.stop()


def test_entries_expire_each_at_its_own_deadline(clock):
    group = started_discovery(clock, refresh_timeout=1000)
    events = recorder(group)
    group.datagram_received(dgram(node_id="a"), ("10.0.0.2", 1))
    clock.advance(0.3)
    group.datagram_received(dgram(node_id="b"), ("10.0.0.3", 1))
    clock.advance(0.5)
    group.datagram_received(dgram(node_id="c"), ("10.0.0.4", 1))
    clock.advance(0.2)  # t = 1.0
    assert set(group.entries) == {"b", "c"}
    clock.advance(0.3)  # t = 1.3
    assert set(group.entries) == {"c"}
    clock.advance(0.5)  # t = 1.8
    assert group.entries == {}
    assert [(e, en.node_id) for e, en in events if e == "removed"] == [("removed", "a"), ("removed", "b"), ("removed", "c")]
    # nothing left to expire: no expiry timer
    assert all(c.func != group._expire for c in clock.getDelayedCalls())
    group.stop()


def test_no_timer_per_datagram(clock):
    group = started_discovery(clock)
    for i in range(200):
        group.datagram_received(dgram(node_id=f"n{i % 20}", sequence=i), ("10.0.0.2", 1))
        clock.advance(0.01)
    # the initial wait and one expiry timer
    assert len(clock.getDelayedCalls()) == 2
    group.stop()


def test_own_node_id_is_ignored(clock):
    group = started_discovery(clock, node_id="me")
    events = recorder(group)
    duplicates = []
    group.add_duplicate_node_listener(lambda a, s: duplicates.append((a, s)))
    group.datagram_received(dgram(node_id="me"), ("10.0.0.1", 1))
    assert group.entries == {} and events == [] and duplicates == []
    assert group.own == 1 and group.duplicates == 0 and group.duplicate_node is None
    group.stop()


def test_duplicate_node_id_from_a_foreign_connector(clock, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    group = started_discovery(clock, node_id="me", local_connectors=CONNECTORS[:2])
    events = recorder(group)
    duplicates = []
    group.add_duplicate_node_listener(lambda a, s: duplicates.append((a, s)))

    # our own broadcast, looped back: any subset of our connectors
    ours = tuple(announced_connector(c) for c in CONNECTORS[:1])
    group.datagram_received(dgram(node_id="me", connectors=ours), ("10.0.0.1", 1))
    assert group.own == 1 and duplicates == [] and group.duplicate_node is None

    foreign = (AnnouncedConnector("netty", "10.0.0.99", 61616),)
    for _ in range(3):
        group.datagram_received(dgram(node_id="me", connectors=foreign), ("10.0.0.99", 5))
    assert group.duplicates == 3 and len(duplicates) == 3
    announcement, source = duplicates[0]
    assert announcement.node_id == "me" and announcement.connectors == foreign
    assert source == ("10.0.0.99", 5)
    assert group.duplicate_node == (announcement, source)
    assert group.entries == {} and events == []  # never an entry
    warnings = messages(caplog)
    assert len(warnings) == 1 and "10.0.0.99" in warnings[0] and "'me'" in warnings[0]

    clock.advance(LOG_INTERVAL)
    group.datagram_received(dgram(node_id="me", connectors=foreign), ("10.0.0.99", 5))
    assert len(messages(caplog)) == 2 and "2 more like this" in messages(caplog)[1]
    assert group.status()["duplicate_node"]["source"] == "10.0.0.99:5"
    group.stop()


def test_duplicate_detection_can_be_wired_after_construction(clock):
    group = started_discovery(clock, node_id="me")
    foreign = (AnnouncedConnector("netty", "10.0.0.99", 61616),)
    group.datagram_received(dgram(node_id="me", connectors=foreign), ("10.0.0.99", 5))
    assert group.duplicates == 0  # own connectors unknown: cannot tell
    group.set_local_connectors(CONNECTORS)
    group.datagram_received(dgram(node_id="me", connectors=foreign), ("10.0.0.99", 5))
    assert group.duplicates == 1
    group.stop()


def test_malformed_datagrams_are_counted_and_logged_once_a_minute_per_source(clock, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    group = started_discovery(clock)
    events = recorder(group)
    for data in (b"", b"garbage", b"JNCB\x02{}", b"JNCB\x01{", b"JNCB\x01[]"):
        group.datagram_received(data, ("10.0.0.66", 1))
    assert group.malformed == 5 and group.received == 5
    assert group.entries == {} and events == []
    assert len(messages(caplog)) == 1 and "10.0.0.66" in messages(caplog)[0]

    group.datagram_received(b"junk", ("10.0.0.67", 1))  # another source: its own line
    assert len(messages(caplog)) == 2 and "10.0.0.67" in messages(caplog)[1]

    clock.advance(LOG_INTERVAL - 0.001)
    group.datagram_received(b"junk", ("10.0.0.66", 1))
    assert len(messages(caplog)) == 2
    clock.advance(0.001)
    group.datagram_received(b"junk", ("10.0.0.66", 1))
    assert len(messages(caplog)) == 3 and "5 more like this" in messages(caplog)[2]

    group.datagram_received(dgram(), ("10.0.0.66", 1))  # a good one still counts
    assert list(group.entries) == ["peer-1"] and group.malformed == 8
    group.stop()


def test_entries_are_bounded(clock, caplog):
    caplog.set_level(logging.WARNING, LOGGER)
    group = started_discovery(clock, refresh_timeout=10_000)
    events = recorder(group)
    for i in range(MAX_ENTRIES):
        group.datagram_received(dgram(node_id=f"n{i}"), ("10.0.0.2", 1))
    assert len(group.entries) == MAX_ENTRIES
    clock.advance(1.0)
    group.datagram_received(dgram(node_id="late-1"), ("10.0.0.3", 1))
    group.datagram_received(dgram(node_id="late-2"), ("10.0.0.3", 1))
    assert len(group.entries) == MAX_ENTRIES and "late-1" not in group.entries
    assert group.dropped == 2
    assert len(messages(caplog)) == 1 and str(MAX_ENTRIES) in messages(caplog)[0]
    # known nodes are still refreshed and updated
    group.datagram_received(dgram(node_id="n0", name="renamed"), ("10.0.0.2", 1))
    assert events[-1][0] == "updated"
    # once some expire there is room again
    clock.advance(9.0)  # t = 10: all but n0 expire
    assert set(group.entries) == {"n0"}
    group.datagram_received(dgram(node_id="late-1"), ("10.0.0.3", 1))
    assert "late-1" in group.entries
    group.stop()


def test_listener_errors_do_not_stop_the_others(clock, caplog):
    group = started_discovery(clock)

    def broken(event, entry):
        raise RuntimeError("listener bug")

    group.add_listener(broken)
    events = recorder(group)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    assert [e for e, _ in events] == ["added"]
    assert any("listener failed" in m for m in messages(caplog))
    group.remove_listener(broken)
    group.stop()


def test_remove_listener(clock):
    group = started_discovery(clock)
    events = []

    def fn(event, entry):
        events.append(event)

    group.add_listener(fn)
    group.remove_listener(fn)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    assert events == []
    group.stop()


# --------------------------------------------------------------------------- initial wait


def test_wait_initial_fires_after_initial_wait_timeout_with_the_entries(clock):
    group = started_discovery(clock, initial_wait_timeout=5_000)
    results = []
    group.wait_initial().addCallback(results.append)
    clock.advance(1.0)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    clock.advance(3.999)
    assert results == []
    clock.advance(0.001)
    assert len(results) == 1 and [e.node_id for e in results[0]] == ["peer-1"]
    # once it has passed: at once
    later = []
    group.wait_initial().addCallback(later.append)
    assert len(later) == 1
    group.stop()


def test_wait_initial_zero_timeout_fires_on_start(clock):
    group = DiscoveryGroup(dconfig(initial_wait_timeout=0), "me", reactor=clock)
    results = []
    group.wait_initial().addCallback(results.append)  # before start: waits for it
    clock.advance(100)
    assert results == []
    group.start()
    clock.advance(0)
    assert results == [[]]
    group.stop()


def test_wait_initial_before_start_counts_from_start(clock):
    group = DiscoveryGroup(dconfig(initial_wait_timeout=2_000), "me", reactor=clock)
    results = []
    group.wait_initial().addCallback(results.append)
    clock.advance(10.0)
    group.start()
    clock.advance(1.999)
    assert results == []
    clock.advance(0.001)
    assert results == [[]]
    group.stop()


def test_wait_initial_can_be_cancelled(clock):
    group = started_discovery(clock)
    d = group.wait_initial()
    d.cancel()
    failures = []
    d.addErrback(failures.append)
    assert failures and failures[0].check(defer.CancelledError)
    clock.advance(10.0)  # nothing fires twice
    group.stop()


def test_stop_releases_initial_waiters(clock):
    group = started_discovery(clock, initial_wait_timeout=5_000)
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    results = []
    group.wait_initial().addCallback(results.append)
    group.stop()
    assert len(results) == 1 and [e.node_id for e in results[0]] == ["peer-1"]


# --------------------------------------------------------------------------- stop, status


def test_discovery_stop_leaves_no_delayed_call(clock):
    group = started_discovery(clock)
    group.wait_initial()
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    assert len(clock.getDelayedCalls()) == 2
    d = group.stop()
    assert isinstance(d, defer.Deferred) and d.called
    assert clock.getDelayedCalls() == []
    assert group.entries == {} and not group.running
    group.datagram_received(dgram(), ("10.0.0.2", 1))  # a late datagram: ignored
    assert group.entries == {} and clock.getDelayedCalls() == []
    assert group.stop() is None


def test_discovery_restart(clock):
    group = started_discovery(clock)
    with pytest.raises(RuntimeError):
        group.start()
    group.stop()
    group.start()
    group.datagram_received(dgram(), ("10.0.0.2", 1))
    assert list(group.entries) == ["peer-1"]
    group.stop()
    assert clock.getDelayedCalls() == []


def test_discovery_status(clock):
    group = started_discovery(clock, local_bind_address="127.0.0.1")
    group.datagram_received(dgram(sequence=7), ("10.0.0.2", 40000))
    group.datagram_received(b"bad", ("10.0.0.3", 1))
    group.datagram_received(dgram(node_id="me"), ("10.0.0.1", 1))
    clock.advance(1.5)
    status = group.status()
    assert status["name"] == "dg" and status["group"] == GROUP and status["port"] == GROUP_PORT
    assert status["received"] == 3 and status["malformed"] == 1 and status["own"] == 1
    assert status["duplicates"] == 0 and status["dropped"] == 0 and status["duplicate_node"] is None
    assert status["entries"] == [
        {
            "node_id": "peer-1",
            "name": "broker-p",
            "connectors": [{"name": "netty", "host": "10.0.0.2", "port": 61616, "params": {}}],
            "sequence": 7,
            "source": "10.0.0.2:40000",
            "age_ms": 1500,
        }
    ]
    group.stop()


# --------------------------------------------------------------------------- together


def test_broadcast_to_discovery_through_fake_ports(clock):
    disco = started_discovery(clock, node_id="n1", refresh_timeout=5_000, local_connectors=CONNECTORS)
    events = recorder(disco)
    b2 = BroadcastGroup(bconfig(broadcast_period=1000), CONNECTORS[2:], "n2", "node2", reactor=clock)
    b1 = BroadcastGroup(bconfig(broadcast_period=1000), CONNECTORS, "n1", "node1", reactor=clock)
    b2.start()
    b1.start()
    for port in clock.ports[1:]:
        port.on_write = lambda data, addr: disco.datagram_received(data, addr)
    clock.pump([1.0] * 5)
    assert list(disco.entries) == ["n2"]  # its own node is not an entry
    assert disco.own == 5 and disco.duplicates == 0
    assert disco.entries["n2"].announcement.sequence == 6
    b2.stop()
    clock.pump([1.0] * 5)
    assert disco.entries == {}
    assert [(e, en.node_id) for e, en in events] == [("added", "n2"), ("removed", "n2")]
    b1.stop()
    disco.stop()
    assert clock.getDelayedCalls() == []


def test_no_module_level_reactor_import():
    import inspect

    source = inspect.getsource(discovery)
    assert "from twisted.internet import reactor\n" not in source
