"""Exclusive queues, as Artemis makes them, for STOMP clients: differential, against a real
Artemis broker and a real Junction node, both with the address setting
``default-exclusive-queue`` on ``excl.#``.

An exclusive queue hands every message to one consumer -- the first it chooses -- while that
consumer lives; when it leaves, the next takes over.  A queue under another address is shared
round-robin as before.  (OpenWire's exclusive *consumers*, Classic's kind, are
test_openwire_peers.py's ``test_exclusive_consumer``.)
"""

from __future__ import annotations

import itertools
import time

import pytest
import stomp

from tests import harness
from tests.integration import test_artemis_peer as peer
from tests.integration.test_core_cross_protocol import _Collect

pytestmark = pytest.mark.timeout(60)

#: the queues under excl. are exclusive on both brokers
EXCLUSIVE_SETTING = {"excl.#": {"default-exclusive-queue": "true"}}
ARTEMIS_OPTIONS = {"stomp": True, "address_settings": EXCLUSIVE_SETTING}
USERS = {peer.USER["user"]: (peer.USER["password"], ["amq"])}
ANYCAST = {"destination-type": "ANYCAST"}
_names = itertools.count()


class _Stomp:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port


@pytest.fixture(scope="module")
def artemis(artemis_module):
    return _Stomp(harness.LOOPBACK, artemis_module.stomp_port)


@pytest.fixture(scope="module")
def junction(tmp_path_factory):
    settings = "".join(
        f'<address-setting match="{match}">'
        + "".join(f"<{k}>{v}</{k}>" for k, v in values.items())
        + "</address-setting>"
        for match, values in EXCLUSIVE_SETTING.items()
    )
    node = harness.BrokerProcess(
        str(tmp_path_factory.mktemp("exclusive")), name="exclusive", security=True, users=USERS,
        address_settings_xml=settings,
    )  # fmt: skip
    node.start()
    try:
        yield _Stomp(harness.LOOPBACK, node.stomp_port)
    finally:
        code = node.stop()
    assert code == 0, f"the node exited with {code}"


def two_subscribers(target: _Stomp, prefix: str) -> dict:
    """Subscribers ``a`` then ``b`` on one queue; six messages; ``a`` unsubscribes once it has
    what it was given; three more.  Which subscriber got which body."""
    queue = f"{prefix}.{next(_names)}.{int(time.time() * 1000)}"
    listener = _Collect()
    conn = stomp.Connection12([(target.host, target.port)])
    conn.set_listener("t", listener)
    conn.connect(peer.USER["user"], peer.USER["password"], wait=True)
    try:
        conn.subscribe(queue, id="a", headers={"subscription-type": "ANYCAST"})
        conn.subscribe(queue, id="b", headers={"subscription-type": "ANYCAST"})
        for i in range(6):
            conn.send(queue, str(i), headers=ANYCAST)
        harness.wait_for(lambda: len(listener.message_list) >= 6, 10, what="six messages")
        conn.unsubscribe("a")
        for i in range(6, 9):
            conn.send(queue, str(i), headers=ANYCAST)
        harness.wait_for(lambda: len(listener.message_list) >= 9, 10, what="nine messages")
    finally:
        conn.disconnect()
    got: dict = {}
    for headers, body in listener.message_list:
        got.setdefault(headers["subscription"], []).append(body)
    return got


def test_an_exclusive_queue_feeds_one_subscriber_then_the_next(artemis, junction):
    artemis_got, junction_got = two_subscribers(artemis, "excl"), two_subscribers(junction, "excl")
    assert junction_got == artemis_got
    assert artemis_got == {"a": ["0", "1", "2", "3", "4", "5"], "b": ["6", "7", "8"]}


def test_a_queue_that_is_not_exclusive_is_shared(artemis, junction):
    artemis_got, junction_got = two_subscribers(artemis, "shared"), two_subscribers(junction, "shared")
    assert junction_got == artemis_got
    assert artemis_got == {"a": ["0", "2", "4"], "b": ["1", "3", "5", "6", "7", "8"]}
