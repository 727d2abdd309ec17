"""Large CORE messages on an in-memory broker: continuations in, a file, continuations out."""

from __future__ import annotations

import os

from junction.brokercore.large_messages import LargeMessageStore
from junction.protocols.core import ExceptionType
from junction.protocols.core import packets as p
from tests.unit.core_fixtures import CoreClient, message
from tests.unit.stomp_fixtures import Broker
from tests.unit.test_core_messaging import CH, NULL, consume, create_queue


def _node(tmp_path) -> Broker:
    broker = Broker()
    broker.server.large_messages = LargeMessageStore(str(tmp_path / "large"))
    return broker


def test_a_large_message_goes_to_a_file_and_comes_back_in_chunks_of_the_sessions_size(tmp_path):
    broker = _node(tmp_path)
    client = CoreClient(broker)
    client.open()  # minLargeMessageSize 102400
    create_queue(client)
    _, headers = message(b"", "q", type=4)
    body = bytes(range(256)) * 1000  # 256,000 bytes: three chunks out
    parts = [body[:100_000], body[100_000:200_000], body[200_000:]]
    assert client.send(p.SessSendLarge(headers, channel_id=CH)) == []
    assert client.send(p.SessSendContinuation(parts[0], True, None, False, 0, 1, channel_id=CH)) == []
    assert client.send(p.SessSendContinuation(parts[1], True, None, False, 0, 1, channel_id=CH)) == []
    answer = client.send(p.SessSendContinuation(parts[2], False, len(body), True, 5, 1, channel_id=CH))
    assert answer == [p.NullResponse(5, channel_id=CH)]
    (name,) = os.listdir(tmp_path / "large")
    assert (tmp_path / "large" / name).read_bytes() == body
    got = consume(client)
    large, *chunks = [x for x in got if isinstance(x, (p.SessReceiveLargeMsg, p.SessReceiveContinuation))]
    assert (large.consumer_id, large.large_message_size) == (0, len(body))
    assert large.headers.property("_AMQ_LARGE_SIZE") == len(body)
    assert [len(c.body) for c in chunks] == [102400, 102400, len(body) - 204800]
    assert [c.continues for c in chunks] == [True, True, False]
    assert b"".join(c.body for c in chunks) == body
    assert client.send(p.SessAcknowledge(0, large.headers.message_id, True, channel_id=CH)) == [NULL]


def test_a_continuation_with_no_large_message_begun_ends_the_connection(tmp_path):
    client = CoreClient(_node(tmp_path))
    client.open()
    (e,) = client.send(p.SessSendContinuation(b"x", False, 1, True, 9, 1, channel_id=CH))
    assert (type(e), e.code, e.correlation_id) == (p.ExceptionMessage, ExceptionType.ILLEGAL_STATE, 9)
    assert client.closed


def test_a_half_sent_large_message_is_dropped_when_the_session_closes(tmp_path):
    client = CoreClient(_node(tmp_path))
    client.open()
    _, headers = message(b"", "q", type=4)
    client.send(p.SessSendLarge(headers, channel_id=CH))
    client.send(p.SessSendContinuation(b"half", True, None, False, 0, 1, channel_id=CH))
    assert len(os.listdir(tmp_path / "large")) == 1
    client.send(p.SessClose(channel_id=CH))
    assert os.listdir(tmp_path / "large") == []


def test_sends_behind_a_durable_large_message_wait_for_its_files_sync(tmp_path):
    from twisted.internet import defer

    from tests.unit.test_core_messaging import send

    broker = _node(tmp_path)
    held = []

    def in_thread(fn):  # the fsync's thread, held until the test lets it run
        d = defer.Deferred()
        held.append((fn, d))
        return d

    broker.server.large_messages.in_thread = in_thread
    client = CoreClient(broker)
    client.open()
    create_queue(client)
    _, headers = message(b"", "q", type=4, durable=True)
    client.send(p.SessSendLarge(headers, channel_id=CH))
    answer = client.send(p.SessSendContinuation(b"big" * 1000, False, 3000, True, 5, 1, channel_id=CH))
    assert answer == []  # not confirmed before its file is on disk
    assert send(client, b"after", rr=True, correlation=6) == []  # waits behind it
    queue = broker.server.find_queue("q")
    assert queue.message_count == 0
    ((fn, d),) = held
    d.callback(fn())
    broker.run()
    assert [ref.message.body for ref in queue.waiting()] == [b"", b"after"]
    # and their confirmations come in that order
    assert [x.correlation_id for x in client.take() if isinstance(x, p.NullResponse)] == [5, 6]
