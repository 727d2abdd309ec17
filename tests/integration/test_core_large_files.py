"""The files of large CORE messages: gone when their message goes, kept while one needs them.

With the real JMS client against a node: a non-durable large message's file and
one acknowledged inside a local transaction are deleted once consumed (and
committed); a file no message names, planted while the node is down, is gone
after its start, while the files of a durable unconsumed large message and of
one in an address's page files survive the restart and their messages are
delivered whole.
"""

from __future__ import annotations

import pytest

from tests import harness
from tests.artemis import JmsClient
from tests.artemis.jms import pattern, sha256
from tests.integration import test_artemis_peer as peer
from tests.integration.test_core_jms import USERS, _Target
from tests.integration.test_core_large import _files
from tests.integration.test_paging import PAGE_SETTINGS

pytestmark = pytest.mark.timeout(60)

SIZE = 300 * 1024


def _node(tmp_path) -> harness.BrokerProcess:
    port = harness.free_port()
    node = harness.BrokerProcess(
        str(tmp_path), name="core", security=True, users=USERS,
        extra_acceptors_xml=harness.core_acceptor(port), address_settings_xml=PAGE_SETTINGS,
    )
    node.core_port = port
    return node


def _empty(tmp_path) -> None:
    harness.wait_for(lambda: _files(tmp_path) == [], 10, what="the large-messages directory empty")


def _check(messages: list, size: int = SIZE) -> None:
    assert [(m["size"], m["sha256"]) for m in messages] == [(size, sha256(pattern(size)))]


def test_non_durable_large_message_file_goes_when_consumed(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    try:
        target = _Target(node.core_port)
        jms.run([peer.connect(target), {"op": "send", "queue": "nd", "type": "bytes", "size": SIZE, "persistent": False}])
        assert len(_files(tmp_path)) == 1
        results = jms.run([peer.connect(target), {"op": "receive", "queue": "nd", "digest": True}])
        _check(results[1]["messages"])
        _empty(tmp_path)
    finally:
        assert node.stop() == 0


@pytest.mark.parametrize("persistent", [True, False], ids=["durable", "non-durable"])
def test_large_message_acknowledged_in_a_transaction_file_goes_on_commit(tmp_path, jms: JmsClient, persistent):
    node = _node(tmp_path).start()
    try:
        target = _Target(node.core_port)
        send = {"op": "send", "queue": "tx", "type": "bytes", "size": SIZE, "persistent": persistent}
        results = jms.run([
            peer.connect(target), send,
            {"op": "session", "transacted": True},
            {"op": "receive", "queue": "tx", "digest": True},
            {"op": "rollback"},  # given back: the file stays
        ])
        _check(results[3]["messages"])
        assert len(_files(tmp_path)) == 1
        results = jms.run([
            peer.connect(target),
            {"op": "session", "transacted": True},
            {"op": "receive", "queue": "tx", "digest": True},
            {"op": "commit"},
        ])
        _check(results[2]["messages"])
        _empty(tmp_path)
    finally:
        assert node.stop() == 0


def test_orphan_files_go_on_start_and_needed_ones_stay(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    target = _Target(node.core_port)
    # a durable large message left on its queue, and one paged behind 20 KiB of small ones
    jms.run([
        peer.connect(target),
        {"op": "send", "queue": "kept", "type": "bytes", "size": SIZE},
        {"op": "send", "queue": "paged.q", "type": "bytes", "size": 1024, "count": 20},
        {"op": "send", "queue": "paged.q", "type": "bytes", "size": SIZE + 1},
    ])
    assert harness.address_status(node, "paged.q")["paged_messages"] >= 1
    assert node.stop() == 0
    needed = _files(tmp_path)
    assert len(needed) == 2
    orphan = tmp_path / "core" / "data" / "large" / "99999.msg"
    orphan.write_bytes(b"no message names this")
    node.start()
    try:
        harness.wait_for(lambda: not orphan.exists(), 10, what="the orphan file removed")
        assert _files(tmp_path) == needed
        results = jms.run([
            peer.connect(target),
            {"op": "receive", "queue": "kept", "digest": True},
            {"op": "receive", "queue": "paged.q", "count": 21, "digest": True},
        ])
        _check(results[1]["messages"])
        paged = results[2]["messages"]
        assert [m["size"] for m in paged] == [1024] * 20 + [SIZE + 1]
        assert paged[-1]["sha256"] == sha256(pattern(SIZE + 1))
        _empty(tmp_path)
    finally:
        assert node.stop() == 0


def test_a_prepared_xa_branchs_large_send_keeps_its_file_across_a_restart(tmp_path, jms: JmsClient):
    node = _node(tmp_path).start()
    target = _Target(node.core_port)
    x = {"format": 1, "gtrid": "large-xa", "bqual": "b"}
    creds = {"user": peer.USER["user"], "password": peer.USER["password"]}
    results = jms.run([
        {"op": "xa_connect", "url": target.url, **creds},
        {"op": "xa_start", "xid": x},
        {"op": "send", "queue": "xa.sink", "type": "bytes", "size": SIZE},
        {"op": "xa_end", "xid": x},
        {"op": "xa_prepare", "xid": x},
    ])
    assert results[4]["vote"] == 0
    node.kill9()
    (needed,) = _files(tmp_path)
    node.start()
    try:
        # what start removes it removes before it listens: the prepared send's file is there
        assert _files(tmp_path) == [needed]
        jms.run([{"op": "xa_connect", "url": target.url, **creds}, {"op": "xa_commit", "xid": x}])
        results = jms.run([peer.connect(target), {"op": "receive", "queue": "xa.sink", "digest": True}])
        _check(results[1]["messages"])
        _empty(tmp_path)
    finally:
        assert node.stop() == 0


def test_sends_after_a_durable_large_one_keep_their_order_while_its_file_syncs(tmp_path, jms: JmsClient):
    # Unblocked durable sends: the client does not wait for the large message's confirmation
    # (its file is synced off the event loop), and the small sends behind it must not overtake it.
    node = _node(tmp_path).start()
    try:
        target = _Target(node.core_port)
        results = jms.run([
            peer.connect(target, url=target.url + "?blockOnDurableSend=false"),
            {"op": "send", "queue": "order", "body": "before"},
            {"op": "send", "queue": "order", "type": "bytes", "size": SIZE},
            {"op": "send", "queue": "order", "body": "after-{i}", "count": 5},
            {"op": "receive", "queue": "order", "count": 7, "digest": True},
        ])
        got = results[4]["messages"]
        assert [m["sha256"] for m in got] == [
            sha256(b"before"), sha256(pattern(SIZE)), *(sha256(b"after-%d" % i) for i in range(5))
        ]
    finally:
        assert node.stop() == 0
