"""Broadcast and discovery groups on real UDP multicast sockets, on the loopback interface.

Multicast works on ``lo`` here: a discovery group joins its group on
interface 127.0.0.1, a broadcast group bound to 127.0.0.1 sends out of
127.0.0.1 with loopback on and TTL 1, so nothing leaves the host.  Every
test takes a group of its own (a random ``239.255.x.y`` and a UDP port that
was free a moment ago), never Artemis's 231.7.7.7:9876, so tests running in
parallel do not hear each other.

The groups are Twisted code; the tests are plain synchronous pytest, as in
``test_gateway_probe.py``: a private reactor (a new ``EPollReactor``, not the
global one) runs in a daemon thread for the whole module and the tests call
into it with ``blockingCallFromThread``.  Nothing waits by sleeping: every
wait polls with a deadline (:func:`tests.harness.wait_for`).
"""

from __future__ import annotations

import itertools
import random
import socket
import sys
import threading
from collections.abc import Iterator

import pytest
from twisted.internet import task
from twisted.internet.threads import blockingCallFromThread

from junction.brokercore.cluster.discovery import BroadcastGroup, DiscoveryGroup
from junction.config.model import BroadcastGroupConfig, Connector, DiscoveryGroupConfig
from junction.protocols.cluster.broadcast import MAX_DATAGRAM_BYTES
from tests.harness import LOOPBACK, wait_for

pytestmark = pytest.mark.timeout(120)

#: seconds any one expected thing may take
TIMEOUT = 10.0
#: ms between two announcements: short, so the tests are quick
PERIOD_MS = 100
#: ms an entry lives without a refresh
REFRESH_MS = 1000

_ids = itertools.count(1)
_used_groups: set[tuple[str, int]] = set()


# --------------------------------------------------------------------------- the reactor thread


class ReactorThread:
    """A private reactor running in a daemon thread, started once and stopped once."""

    def __init__(self) -> None:
        from twisted.internet.epollreactor import EPollReactor

        self.reactor = EPollReactor()
        self.thread = threading.Thread(
            target=self.reactor.run,
            kwargs={"installSignalHandlers": False},
            name="discovery-reactor",
            daemon=True,
        )

    def start(self) -> ReactorThread:
        self.thread.start()
        self.call(lambda: None)  # returns once the reactor runs
        return self

    def call(self, f, *args, **kwargs):
        """Run ``f`` on the reactor thread; its result (a Deferred's too), or its exception raised here."""
        return blockingCallFromThread(self.reactor, f, *args, **kwargs)

    def settle(self) -> None:
        """Let the reactor finish what is already due (a closed port's cleanup, for one)."""
        self.call(task.deferLater, self.reactor, 0.05, lambda: None)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.reactor.callFromThread(self.reactor.stop)
            self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the discovery reactor did not stop"


@pytest.fixture(scope="module")
def rt() -> Iterator[ReactorThread]:
    thread = ReactorThread().start()
    yield thread
    thread.stop()


# --------------------------------------------------------------------------- groups


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def new_group() -> tuple[str, int]:
    """A multicast group and port of this test's own."""
    while True:
        group = (f"239.255.{random.randint(0, 255)}.{random.randint(1, 254)}", free_udp_port())
        if group not in _used_groups:
            _used_groups.add(group)
            return group


@pytest.fixture
def group() -> tuple[str, int]:
    return new_group()


@pytest.fixture
def groups(rt: ReactorThread) -> Iterator[list]:
    """Groups the test started (append them); stopped at teardown, leaving no delayed call behind."""
    started: list = []
    yield started
    for g in reversed(started):
        rt.call(g.stop)
    rt.settle()
    leftover = rt.call(rt.reactor.getDelayedCalls)
    assert leftover == [], f"delayed calls left behind: {leftover}"


def node_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}-{random.getrandbits(32):08x}"


def broadcaster(rt, groups, where, nid, *, port=61616, name=None) -> BroadcastGroup:
    address, group_port = where
    config = BroadcastGroupConfig(
        f"bg-{nid}",
        address,
        group_port,
        local_bind_address=LOOPBACK,
        local_bind_port=-1,
        broadcast_period=PERIOD_MS,
        connector_refs=("netty",),
    )
    connectors = [Connector("netty", "tcp", LOOPBACK, port, {"sslEnabled": "false"})]
    g = BroadcastGroup(config, connectors, nid, name or f"node {nid}", reactor=rt.reactor)
    rt.call(g.start)
    groups.append(g)
    return g


def listener(rt, groups, where, nid="listener", *, initial_ms=500, local_connectors=None) -> DiscoveryGroup:
    address, group_port = where
    config = DiscoveryGroupConfig(
        f"dg-{nid}",
        address,
        group_port,
        local_bind_address=LOOPBACK,
        refresh_timeout=REFRESH_MS,
        initial_wait_timeout=initial_ms,
    )
    g = DiscoveryGroup(config, nid, reactor=rt.reactor, local_connectors=local_connectors)
    rt.call(g.start)
    groups.append(g)
    return g


def entries(rt, g: DiscoveryGroup) -> dict:
    return rt.call(lambda: dict(g.entries))


def recorded(rt, g: DiscoveryGroup) -> list:
    """A list that receives ``(event, node id, entry, reactor time)`` for each of ``g``'s events."""
    events: list = []

    def record(event, entry):
        events.append((event, entry.node_id, entry, rt.reactor.seconds()))

    rt.call(g.add_listener, record)
    return events


def raw_send(where: tuple[str, int], data: bytes) -> None:
    """Send ``data`` to the group out of the loopback interface, from a plain socket."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(LOOPBACK))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        s.sendto(data, where)


# --------------------------------------------------------------------------- tests


def test_two_nodes_are_discovered_and_a_stopped_one_expires(rt, groups, group):
    a, b = node_id("a"), node_id("b")
    bg_a = broadcaster(rt, groups, group, a, port=61001)
    broadcaster(rt, groups, group, b, port=61002)
    dg = listener(rt, groups, group)
    events = recorded(rt, dg)

    found = wait_for(lambda: set(entries(rt, dg)) >= {a, b} and entries(rt, dg), TIMEOUT, what="both nodes")
    assert set(found) == {a, b}
    assert [(c.host, c.port, c.params) for c in found[a].connectors] == [(LOOPBACK, 61001, (("sslEnabled", "false"),))]
    assert found[b].name == f"node {b}"
    assert found[a].source[0] == LOOPBACK
    wait_for(lambda: entries(rt, dg)[a].announcement.sequence >= 3, TIMEOUT, what="a few announcements of a")
    assert rt.call(lambda: bg_a.sent) >= 3

    rt.call(bg_a.stop)
    wait_for(lambda: a not in entries(rt, dg), TIMEOUT, what=f"{a} to expire")
    assert b in entries(rt, dg)  # still announcing
    removed = [(entry, at) for event, nid, entry, at in events if event == "removed"]
    assert [entry.node_id for entry, _ in removed] == [a]
    entry, at = removed[0]
    silent = at - entry.last_seen
    assert REFRESH_MS / 1000 - 0.001 <= silent < REFRESH_MS / 1000 + 2.0, silent
    assert [e for e, nid, *_ in events if nid == a] == ["added", "removed"]
    status = rt.call(dg.status)
    assert [e["node_id"] for e in status["entries"]] == [b]
    assert status["received"] >= 6 and status["malformed"] == 0


def test_two_listeners_on_one_port_both_receive(rt, groups, group):
    n = node_id("n")
    first = listener(rt, groups, group, "first")
    second = listener(rt, groups, group, "second")
    broadcaster(rt, groups, group, n)
    for g in (first, second):
        wait_for(lambda g=g: n in entries(rt, g), TIMEOUT, what=f"{g.name} to hear {n}")
    assert rt.call(lambda: (first.received > 0, second.received > 0)) == (True, True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bound to the group address on Linux only")
def test_a_listener_of_another_group_on_the_same_port_hears_nothing(rt, groups, group):
    address, port = group
    other = new_group()
    other = (other[0], port)
    n = node_id("n")
    ours = listener(rt, groups, group, "ours")
    theirs = listener(rt, groups, other, "theirs")
    broadcaster(rt, groups, group, n)
    wait_for(lambda: rt.call(lambda: ours.received) >= 3, TIMEOUT, what="three datagrams")
    assert rt.call(lambda: (theirs.received, dict(theirs.entries))) == (0, {})


def test_wait_initial_sees_the_first_broadcasts(rt, groups, group):
    a, b = node_id("a"), node_id("b")
    broadcaster(rt, groups, group, a)
    broadcaster(rt, groups, group, b)
    start = rt.call(rt.reactor.seconds)
    dg = listener(rt, groups, group, initial_ms=500)
    found = rt.call(dg.wait_initial)  # blocks until the Deferred fires
    waited = rt.call(rt.reactor.seconds) - start
    assert waited >= 0.5 - 0.01, waited
    assert {e.node_id for e in found} == {a, b}
    # once passed, at once
    assert {e.node_id for e in rt.call(dg.wait_initial)} >= {a, b}


def test_malformed_and_large_datagrams(rt, groups, group):
    dg = listener(rt, groups, group)
    raw_send(group, b"not a broadcast")
    raw_send(group, b"JNCB\x07{}")
    wait_for(lambda: rt.call(lambda: dg.malformed) == 2, TIMEOUT, what="two malformed datagrams")
    # a datagram near the size limit arrives whole (not cut at Twisted's default 8 KiB)
    big = node_id("big")
    broadcaster(rt, groups, group, big, name="x" * (MAX_DATAGRAM_BYTES - 1000))
    found = wait_for(lambda: entries(rt, dg).get(big), TIMEOUT, what="the large announcement")
    assert len(found.name) == MAX_DATAGRAM_BYTES - 1000
    assert rt.call(lambda: dg.malformed) == 2


def test_own_node_id_is_ignored_and_a_copy_is_detected(rt, groups, group):
    me = node_id("me")
    mine = [Connector("netty", "tcp", LOOPBACK, 61616, {})]
    dg = listener(rt, groups, group, me, local_connectors=mine)
    duplicates: list = []
    rt.call(dg.add_duplicate_node_listener, lambda ann, source: duplicates.append((ann, source)))

    broadcaster(rt, groups, group, me, port=61616)  # this node's own broadcast
    wait_for(lambda: rt.call(lambda: dg.own) >= 2, TIMEOUT, what="own announcements")
    assert entries(rt, dg) == {} and duplicates == []

    broadcaster(rt, groups, group, me, port=62222)  # a copy of this node elsewhere
    wait_for(lambda: duplicates, TIMEOUT, what="the duplicate node id")
    ann, source = duplicates[0]
    assert ann.node_id == me and [c.port for c in ann.connectors] == [62222]
    assert source[0] == LOOPBACK
    assert entries(rt, dg) == {}
