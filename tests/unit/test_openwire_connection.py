"""The OpenWire connection's state table and the inactivity monitor.

The conversation is the real 5.17.2 client's (openwire.md section 6), decoded
from the frames its own marshaller wrote where they exist.
"""

from __future__ import annotations

import pytest

from junction.protocols.openwire.codec import OpenWireCodec, decode_frame
from junction.protocols.openwire.commands import (
    BrokerInfo,
    ConnectionControl,
    ConnectionError,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    ExceptionResponse,
    FlushCommand,
    KeepAliveInfo,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    ReplayCommand,
    Response,
    SessionInfo,
    TransactionInfo,
)
from junction.protocols.openwire.connection import (
    REJECTIONS,
    TRANSITIONS,
    Action,
    ConnectionInput,
    ConnectionState,
    ForeignId,
    NoSuchConsumer,
    NoSuchProducer,
    NoSuchSession,
    NotAClientCommand,
    NotConnected,
    NotNegotiated,
    NotRegistered,
    OpenWireConnection,
    Renegotiation,
    UnsupportedCommand,
)
from junction.protocols.openwire.inactivity import (
    InactivityMonitor,
    InactivityTimeout,
    SendKeepAlive,
)
from junction.protocols.openwire.marshal import JavaThrowable
from junction.protocols.openwire.messages import (
    ActiveMQTextMessage,
    MessageAck,
    MessageDispatch,
    MessagePull,
)
from junction.protocols.openwire.structures import (
    ActiveMQQueue,
    ActiveMQTempQueue,
    ConnectionId,
    ConsumerId,
    LocalTransactionId,
    ProducerId,
    SessionId,
)
from tests.unit.openwire_frames import REAL_FRAMES

CID = "ID:host-40000-1700000000000-1:1"
S = ConnectionState
A = Action


def real(name: str, mode: str = "loose-nocache"):
    for m, n, hx in REAL_FRAMES:
        if (m, n) == (mode, name):
            return decode_frame(bytes.fromhex(hx))
    raise KeyError(name)


def negotiated() -> OpenWireConnection:
    conn = OpenWireConnection()
    [event] = OpenWireCodec().receive_data(bytes.fromhex(next(h for m, n, h in REAL_FRAMES if n == "WFI")))
    step = conn.receive(event)
    assert (step.action, step.state) == (A.NEGOTIATED, S.NEGOTIATED)
    assert conn.wire_format.version == 12
    return conn


def opened() -> OpenWireConnection:
    conn = negotiated()
    step = conn.receive(real("ConnectionInfo"))
    assert (step.action, step.state) == (A.OPEN, S.OPEN)
    return conn


# -- the table ---------------------------------------------------------------------------------------


def test_every_state_and_input_has_a_row():
    for state in ConnectionState:
        for inp in ConnectionInput:
            assert (state, inp) in TRANSITIONS, (state, inp)


def test_closed_ignores_everything():
    assert {TRANSITIONS[S.CLOSED, i] for i in ConnectionInput} == {(S.CLOSED, A.IGNORE)}


def test_rejections_keep_the_state():
    for (state, inp), (nxt, action) in TRANSITIONS.items():
        if action in REJECTIONS:
            assert nxt is state, (state, inp)


# -- the real client's conversation -------------------------------------------------------------------


def test_the_real_clients_conversation():
    conn = opened()
    assert conn.connection_id == ConnectionId(CID)
    assert conn.response(real("ConnectionInfo")) == Response(correlation_id=1)
    advisory = real("ConsumerInfo")  # session -1: the default session, no SessionInfo
    assert conn.receive(advisory).action is A.HANDLE
    assert conn.response(advisory) == Response(correlation_id=2)
    session = real("SessionInfo")
    assert conn.receive(session).action is A.HANDLE and conn.response(session) is None  # rr=0
    assert conn.receive(real("ProducerInfo")).action is A.HANDLE
    msg = real("TextMessage")
    assert conn.receive(msg).action is A.HANDLE and conn.response(msg) == Response(correlation_id=5)
    consumer = ConsumerInfo(command_id=6, response_required=True, consumer_id=ConsumerId(CID, 1, 1),
                            destination=ActiveMQQueue("q1"), prefetch_size=1000)
    assert conn.receive(consumer).action is A.HANDLE
    assert conn.receive(real("MessageAck")).action is A.HANDLE
    assert conn.receive(real("TransactionInfo")).action is A.HANDLE
    assert conn.receive(RemoveInfo(command_id=8, object_id=ConsumerId(CID, 1, 1))).action is A.HANDLE
    assert ConsumerId(CID, 1, 1) not in conn.consumers
    assert conn.receive(real("RemoveInfo")).action is A.HANDLE  # the advisory consumer
    step = conn.receive(RemoveInfo(command_id=10, response_required=True, object_id=ConnectionId(CID)))
    assert (step.action, step.state) == (A.HANDLE, S.NEGOTIATED)
    assert conn.connection_id is None and not conn.sessions and not conn.producers
    assert conn.receive(real("ShutdownInfo")).action is A.CLOSE
    assert conn.state is S.CLOSED
    assert conn.receive(real("TextMessage")).action is A.IGNORE


def test_keep_alives_and_passive_commands():
    conn = negotiated()
    assert conn.receive(KeepAliveInfo(response_required=True)).action is A.ECHO
    assert conn.keep_alive_echo() == KeepAliveInfo(response_required=False)
    assert conn.receive(KeepAliveInfo()).action is A.IGNORE
    assert conn.receive(ConnectionControl(fault_tolerant=True)).action is A.IGNORE
    assert conn.fault_tolerant
    assert conn.receive(Response(correlation_id=3)).action is A.IGNORE


def test_failover_replay_is_acknowledged_not_handled_twice():
    conn = opened()
    conn.receive(real("SessionInfo"))
    conn.receive(real("ProducerInfo"))
    replay = ConnectionInfo(command_id=1, response_required=True, connection_id=ConnectionId(CID),
                            failover_reconnect=True)
    assert conn.receive(replay).action is A.ACKNOWLEDGE
    assert conn.receive(real("SessionInfo")).action is A.ACKNOWLEDGE
    assert conn.receive(real("ProducerInfo")).action is A.ACKNOWLEDGE
    assert conn.receive(FlushCommand(command_id=9, response_required=True)).action is A.ACKNOWLEDGE


def test_removing_a_session_forgets_its_producers_and_consumers():
    conn = opened()
    conn.receive(real("SessionInfo"))
    conn.receive(real("ProducerInfo"))
    conn.receive(ConsumerInfo(consumer_id=ConsumerId(CID, 1, 4), destination=ActiveMQQueue("q")))
    conn.receive(real("ConsumerInfo"))  # session -1 stays
    conn.receive(RemoveInfo(object_id=SessionId(CID, 1)))
    assert not conn.producers and list(conn.consumers) == [ConsumerId(CID, -1, 1)]


def test_stale_acks_are_ignored():
    conn = opened()
    assert conn.receive(real("MessageAck")).action is A.IGNORE


# -- refusals -----------------------------------------------------------------------------------------


def refused(conn, command, error):
    with pytest.raises(error) as info:
        conn.receive(command)
    assert info.value.command is command
    return info.value


def test_nothing_before_the_wireformatinfo():
    err = refused(OpenWireConnection(), real("ConnectionInfo"), NotNegotiated)
    assert err.fatal and "before the WireFormatInfo" in str(err)


def test_a_second_wireformatinfo_is_refused():
    conn = negotiated()
    err = refused(conn, real("WFI"), Renegotiation)
    assert err.fatal


@pytest.mark.parametrize("name", ["SessionInfo", "ProducerInfo", "ConsumerInfo", "TextMessage", "MessageAck",
                                  "TransactionInfo", "RemoveInfo"])
def test_nothing_before_the_connection_info(name):
    conn = negotiated()
    err = refused(conn, real(name), NotConnected)
    assert err.fatal and err.java_class == "java.lang.IllegalStateException"
    assert conn.state is S.NEGOTIATED


def test_out_of_order_registrations_are_answered_and_the_connection_stays():
    conn = opened()
    err = refused(conn, real("ProducerInfo"), NoSuchSession)
    assert not err.fatal and f"session that had not been registered: {CID}:1" in str(err)
    reply = conn.error_reply(err)
    assert reply == ExceptionResponse(correlation_id=4, exception=JavaThrowable(
        "java.lang.IllegalStateException", str(err)))
    err = refused(conn, real("TextMessage"), NoSuchProducer)
    assert "producer that had not been registered" in str(err)
    err = refused(conn, MessagePull(consumer_id=ConsumerId(CID, 1, 9)), NoSuchConsumer)
    assert isinstance(conn.error_reply(err), ConnectionError)  # rr=0: a ConnectionError
    err = refused(conn, RemoveInfo(object_id=ProducerId(CID, 7, 1)), NotRegistered)
    assert "Cannot remove a producer" in str(err)
    assert conn.state is S.OPEN


def test_ids_of_another_connection_are_refused():
    conn = opened()
    other = "ID:elsewhere-1:1"
    for command in (SessionInfo(session_id=SessionId(other, 1)),
                    ProducerInfo(producer_id=ProducerId(other, 1, 1)),
                    ConnectionInfo(connection_id=ConnectionId(other)),
                    TransactionInfo(connection_id=ConnectionId(other), transaction_id=LocalTransactionId(1)),
                    DestinationInfo(connection_id=ConnectionId(other), destination=ActiveMQTempQueue("ID:x")),
                    RemoveSubscriptionInfo(connection_id=ConnectionId(other)),
                    RemoveInfo(object_id=ConnectionId(other))):
        err = refused(conn, command, ForeignId)
        assert err.fatal, command


@pytest.mark.parametrize("command", [MessageDispatch(), BrokerInfo(), ExceptionResponse(), ConnectionError()])
def test_broker_commands_are_refused(command):
    assert refused(opened(), command, NotAClientCommand).fatal


@pytest.mark.parametrize("command", [ReplayCommand(), ConnectionId(CID), ActiveMQQueue("q"),
                                     RemoveInfo(object_id=ActiveMQQueue("q"))])
def test_broker_to_broker_commands_and_bare_structures_are_refused(command):
    assert refused(opened(), command, UnsupportedCommand).fatal


def test_error_closes_with_the_reply_to_write():
    conn = opened()
    err = NotAClientCommand("x", MessageDispatch(command_id=4, response_required=True))
    step = conn.error(err)
    assert (step.action, step.state) == (A.WRITE, S.CLOSED)
    assert step.command == ExceptionResponse(correlation_id=4, exception=JavaThrowable("java.io.IOException", "x"))


def test_refuse_a_login():
    conn = negotiated()
    info = real("ConnectionInfo")
    conn.receive(info)
    reply = conn.refuse(info, "java.lang.SecurityException", "User name [user] or password is invalid.")
    assert reply.correlation_id == 1 and reply.exception.class_name == "java.lang.SecurityException"
    assert conn.state is S.CLOSED


def test_messages_in_a_transaction_still_need_their_producer():
    conn = opened()
    conn.receive(real("SessionInfo"))
    msg = ActiveMQTextMessage(producer_id=ProducerId(CID, 1, 1), transaction_id=LocalTransactionId(1))
    refused(conn, msg, NoSuchProducer)
    conn.receive(real("ProducerInfo"))
    assert conn.receive(msg).action is A.HANDLE
    assert conn.receive(MessageAck(consumer_id=ConsumerId(CID, 1, 1))).action is A.IGNORE


# -- the inactivity monitor ---------------------------------------------------------------------------


def test_keep_alive_after_half_the_duration_of_silence():
    mon = InactivityMonitor(30_000, 10_000, now=100.0)
    assert mon.next_deadline() == 115.0
    assert mon.poll(114.9) == []
    assert mon.poll(115.0) == [SendKeepAlive(15.0)]
    assert mon.poll(115.1) == []  # once per silence
    mon.sent(120.0)
    assert mon.next_deadline() == 135.0


def test_read_check_starts_after_the_initial_delay():
    mon2 = InactivityMonitor(30_000, 10_000, now=0.0)
    for t in (14.0, 28.0):
        mon2.sent(t)
    mon2.received(5.0)  # before the delay ends: the check counts from 10 s
    assert [e for e in mon2.poll(39.9) if isinstance(e, InactivityTimeout)] == []
    [timeout] = [e for e in mon2.poll(40.0) if isinstance(e, InactivityTimeout)]
    assert timeout.limit == 30.0 and timeout.message() == "Channel was inactive for too (>30000) long"
    assert mon2.poll(50.0) == [] and mon2.next_deadline() is None


def test_anything_received_resets_the_read_check():
    mon = InactivityMonitor(30_000, 0, now=0.0)
    for t in range(0, 200, 20):
        mon.received(float(t))
        mon.sent(float(t))
        assert mon.poll(float(t) + 10) == []
    assert isinstance(mon.poll(210.0)[0], InactivityTimeout)


def test_zero_duration_disables_monitoring():
    mon = InactivityMonitor(0, 10_000, now=0.0)
    assert not mon.enabled and mon.next_deadline() is None and mon.poll(1e9) == []
