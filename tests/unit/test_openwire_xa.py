"""XA over OpenWire commands against a node with a real journal (no JVM): each refusal is an
ExceptionResponse with the XAException class and code the Classic client reads back, a
prepared branch survives a crash to be recovered and committed, the timeout rolls back a
branch never prepared.  The real clients' view: tests/integration/test_openwire_xa.py."""

from __future__ import annotations

import itertools
import struct
from dataclasses import replace

import pytest
from twisted.internet.testing import StringTransport

from junction.brokercore.journal import FaultyFiles
from junction.brokercore.openwire_server import OpenWireProtocol
from junction.brokercore.xa import DEFAULT_TIMEOUT_S
from junction.protocols.openwire.codec import decode_frame, encode_frame
from junction.protocols.openwire.commands import (
    ConnectionError,
    ConnectionInfo,
    DataArrayResponse,
    ExceptionResponse,
    IntegerResponse,
    ProducerInfo,
    Response,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from junction.protocols.openwire.messages import ActiveMQTextMessage
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ConnectionId,
    MessageId,
    ProducerId,
    SessionId,
    XATransactionId,
)
from junction.protocols.openwire.wireformat import WireFormat
from tests.unit.core_fixtures import JournalNode

#: loose, no cache, no inactivity monitoring (the timeout test runs the clock for minutes)
LOOSE = WireFormat(tight_encoding=False, max_inactivity=0)
CID = ConnectionId("ID:test-1")
XID = XATransactionId(format_id=7, global_transaction_id=b"global", branch_qualifier=b"branch")
XA_EXCEPTION = "javax.transaction.xa.XAException"
T = TransactionType


class OwClient:
    """One OpenWire connection to ``node``, driven by hand (loose encoding, no cache)."""

    def __init__(self, node: JournalNode, client_id: str = "c1"):
        self.node = node
        self.protocol = OpenWireProtocol(node.server, reactor=node.clock, security=node.security)
        self.transport = StringTransport()
        self.protocol.makeConnection(self.transport)
        self.ids = itertools.count(1)
        self.send(LOOSE.info())  # the negotiation: the server's WireFormatInfo and BrokerInfo
        (answer,) = self.send(ConnectionInfo(connection_id=CID, client_id=client_id), rr=True)
        assert isinstance(answer, Response)
        self.send(SessionInfo(session_id=SessionId(CID.value, 1)))
        self.producer = ProducerId(CID.value, 1, 1)
        self.send(ProducerInfo(producer_id=self.producer), rr=True)
        self.sequence = itertools.count(1)

    def send(self, command, *, rr: bool = False) -> list:
        """Feed ``command``; the frames the server wrote back (WireFormatInfo and BrokerInfo left out)."""
        if hasattr(command, "command_id"):
            command = replace(command, command_id=next(self.ids), response_required=rr)
        self.protocol.dataReceived(encode_frame(command, LOOSE))
        self.node.run()
        data, out = self.transport.value(), []
        self.transport.clear()
        while data:
            (size,) = struct.unpack_from(">I", data)
            frame, data = data[: size + 4], data[size + 4 :]
            decoded = decode_frame(frame, LOOSE)
            if type(decoded).__name__ not in ("WireFormatInfo", "BrokerInfo"):
                out.append(decoded)
        return out

    def xa(self, kind: int, txid=XID) -> object:
        """One XA call, answer required: its one answer."""
        (answer,) = self.send(TransactionInfo(connection_id=CID, transaction_id=txid, type=kind), rr=True)
        return answer

    def text(self, body: str, txid=XID) -> list:
        seq = next(self.sequence)
        message = ActiveMQTextMessage(
            producer_id=self.producer, destination=ActiveMQQueue("q"), transaction_id=txid,
            message_id=MessageId(None, self.producer, seq), persistent=True,
            content=struct.pack(">I", len(body)) + body.encode(),
        )  # fmt: skip
        return self.send(message)


def xa_code(answer) -> int:
    """The errorCode the client reads from an ExceptionResponse (Classic's ``xaErrorCode:`` marker)."""
    assert isinstance(answer, ExceptionResponse), answer
    assert answer.exception.class_name == XA_EXCEPTION
    return int(answer.exception.message.rsplit("xaErrorCode:", 1)[1])


@pytest.fixture
def node(tmp_path):
    return JournalNode(tmp_path)


@pytest.mark.parametrize(
    ("kind", "code"),
    [(T.END, -4), (T.PREPARE, -4), (T.COMMIT_ONE_PHASE, -4), (T.COMMIT_TWO_PHASE, -4), (T.ROLLBACK, -4),
     (T.FORGET, -4)],
)  # fmt: skip
def test_calls_naming_an_unknown_xid_are_xaer_nota(node, kind, code):
    client = OwClient(node)
    assert xa_code(client.xa(kind)) == code


def test_wrong_phase_calls_are_xaer_proto_and_change_nothing(node):
    client = OwClient(node)
    assert client.send(TransactionInfo(connection_id=CID, transaction_id=XID, type=T.BEGIN)) == []
    client.text("in branch")
    assert isinstance(client.xa(T.END), Response)
    assert xa_code(client.xa(T.COMMIT_TWO_PHASE)) == -6  # never prepared
    prepared = client.xa(T.PREPARE)
    assert isinstance(prepared, IntegerResponse) and prepared.result == 0  # XA_OK
    assert xa_code(client.xa(T.COMMIT_ONE_PHASE)) == -6  # prepared
    assert xa_code(client.xa(T.END)) == -6  # prepared: not ended again
    (refused,) = client.send(TransactionInfo(connection_id=CID, transaction_id=XID, type=T.BEGIN))
    assert isinstance(refused, ConnectionError) and refused.exception.message.endswith("xaErrorCode:-8")
    (refused,) = client.text("into a prepared branch")
    assert isinstance(refused, ConnectionError) and refused.exception.message.endswith("xaErrorCode:-6")
    recovered = client.xa(T.RECOVER, txid=None)
    assert isinstance(recovered, DataArrayResponse) and recovered.data == (XID,)
    assert isinstance(client.xa(T.COMMIT_TWO_PHASE), Response)
    assert node.server.find_queue("q").message_count == 1


def test_prepared_branch_survives_a_crash_and_commits_on_a_new_node(tmp_path):
    fs = FaultyFiles()
    node = JournalNode(tmp_path, fs)
    client = OwClient(node)
    client.send(TransactionInfo(connection_id=CID, transaction_id=XID, type=T.BEGIN))
    client.text("one")
    client.text("two")
    client.xa(T.END)
    assert isinstance(client.xa(T.PREPARE), IntegerResponse)
    assert node.server.find_queue("q") is None or node.server.find_queue("q").message_count == 0

    node2 = JournalNode(tmp_path, fs.crash())
    client2 = OwClient(node2, client_id="c2")
    recovered = client2.xa(T.RECOVER, txid=None)
    assert recovered.data == (XID,)
    assert isinstance(client2.xa(T.COMMIT_TWO_PHASE), Response)
    assert client2.xa(T.RECOVER, txid=None).data == ()
    assert node2.server.find_queue("q").message_count == 2
    assert xa_code(client2.xa(T.ROLLBACK)) == -4  # finished


def test_a_branch_never_prepared_rolls_back_after_the_timeout(node):
    client = OwClient(node)
    client.send(TransactionInfo(connection_id=CID, transaction_id=XID, type=T.BEGIN))
    client.text("late")
    node.run(DEFAULT_TIMEOUT_S + 1)
    assert xa_code(client.xa(T.END)) == -4
    assert node.server.find_queue("q") is None or node.server.find_queue("q").message_count == 0


def test_unprepared_branches_roll_back_with_their_connection_prepared_ones_stay(node):
    client = OwClient(node)
    other = XATransactionId(format_id=7, global_transaction_id=b"other", branch_qualifier=b"branch")
    for txid in (XID, other):
        client.send(TransactionInfo(connection_id=CID, transaction_id=txid, type=T.BEGIN))
        client.text(f"in {txid.global_transaction_id!r}", txid=txid)
        client.xa(T.END, txid=txid)
    client.xa(T.PREPARE)
    client.protocol.connectionLost(None)
    client2 = OwClient(node, client_id="c2")
    assert client2.xa(T.RECOVER, txid=None).data == (XID,)
    assert xa_code(client2.xa(T.ROLLBACK, txid=other)) == -4
