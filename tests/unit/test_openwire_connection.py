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
    ConsumerControl,
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
    ShutdownInfo,
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
from junction.protocols.openwire.errors import OpenWireProtocolError
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


# -- every state and input, against rules written out here ------------------------------------------

CI = ConnectionInput
OTHER = "ID:elsewhere-1:1"
_HANDLED = {CI.SESSION_INFO, CI.PRODUCER_INFO, CI.CONSUMER_INFO, CI.MESSAGE, CI.ACK, CI.PULL, CI.CONSUMER_CONTROL,
            CI.TRANSACTION,
            CI.DESTINATION, CI.REMOVE_SUBSCRIPTION, CI.REMOVE}
_ANSWERED_ONLY = {CI.REPEAT, CI.NO_OP}
_KEPT_OPEN = {CI.NO_SUCH_SESSION: NoSuchSession, CI.NO_SUCH_PRODUCER: NoSuchProducer,
              CI.NO_SUCH_CONSUMER: NoSuchConsumer, CI.NOT_REGISTERED: NotRegistered}
_FATAL = {CI.FOREIGN: ForeignId, CI.SERVER_COMMAND: NotAClientCommand, CI.UNSUPPORTED: UnsupportedCommand}
#: inputs that need something registered: no command is one before a connection is
_NEEDS_REGISTRY = {CI.REPEAT, CI.MESSAGE, CI.ACK, CI.PULL, CI.REMOVE}


def expected(state: S, kind: ConnectionInput):
    """("move", next, action) | ("reject", error class, fatal) | ("unreachable",)."""
    if state is S.CLOSED:
        return ("move", S.CLOSED, A.IGNORE)
    if kind is CI.ERROR:
        return ("move", S.CLOSED, A.WRITE)
    if kind is CI.CLOSE:
        return ("move", S.CLOSED, A.CLOSE)
    if state is not S.OPEN and kind in _NEEDS_REGISTRY:
        return ("unreachable",)
    if state is S.NEGOTIATING:
        if kind is CI.WIRE_FORMAT:
            return ("move", S.NEGOTIATED, A.NEGOTIATED)
        return ("reject", NotNegotiated, True)
    if kind in (CI.WIRE_FORMAT, CI.WIRE_FORMAT_AGAIN):
        return ("reject", Renegotiation, True)
    if kind is CI.KEEP_ALIVE:
        return ("move", state, A.ECHO)
    if kind in (CI.KEEP_ALIVE_QUIET, CI.PASSIVE):
        return ("move", state, A.IGNORE)
    if kind is CI.SHUTDOWN:
        return ("move", S.CLOSED, A.CLOSE)
    if kind in _FATAL:
        return ("reject", _FATAL[kind], True)
    if kind is CI.CONNECTION_INFO:
        return ("move", S.OPEN, A.OPEN if state is S.NEGOTIATED else A.ACKNOWLEDGE)
    if state is S.NEGOTIATED:
        return ("reject", NotConnected, True)
    if kind is CI.REMOVE_CONNECTION:
        return ("move", S.NEGOTIATED, A.HANDLE)
    if kind in _HANDLED:
        return ("move", S.OPEN, A.HANDLE)
    if kind in _ANSWERED_ONLY:
        return ("move", S.OPEN, A.ACKNOWLEDGE)
    if kind is CI.STALE_ACK:
        return ("move", S.OPEN, A.IGNORE)
    return ("reject", _KEPT_OPEN[kind], False)


def reach(state: S) -> OpenWireConnection:
    conn = OpenWireConnection()
    if state is S.NEGOTIATING:
        return conn
    conn = negotiated()
    if state is S.NEGOTIATED:
        return conn
    conn.receive(ConnectionInfo(connection_id=ConnectionId(CID)))
    conn.receive(SessionInfo(session_id=SessionId(CID, 1)))
    conn.receive(ProducerInfo(producer_id=ProducerId(CID, 1, 1)))
    conn.receive(ConsumerInfo(consumer_id=ConsumerId(CID, 1, 1)))
    if state is S.CLOSED:
        conn.close()
    assert conn.state is state
    return conn


def command_for(kind: ConnectionInput, state: S):
    """A command that is ``kind`` on a connection in ``state`` (None: told by a method)."""
    wfi = real("WFI")
    if kind is CI.WIRE_FORMAT:
        return OpenWireCodec().receive_data(encode_wfi(wfi))[0]
    cid = ConnectionId(CID)
    return {
        CI.WIRE_FORMAT_AGAIN: wfi,
        CI.CONNECTION_INFO: ConnectionInfo(connection_id=cid),
        CI.FOREIGN: SessionInfo(session_id=SessionId(OTHER, 1) if state is S.OPEN else None),
        CI.REPEAT: SessionInfo(session_id=SessionId(CID, 1)),
        CI.SESSION_INFO: SessionInfo(session_id=SessionId(CID, 2)),
        CI.PRODUCER_INFO: ProducerInfo(producer_id=ProducerId(CID, 2, -1)),  # the default session
        CI.CONSUMER_INFO: ConsumerInfo(consumer_id=ConsumerId(CID, -1, 2)),
        CI.NO_SUCH_SESSION: ProducerInfo(producer_id=ProducerId(CID, 1, 9)),
        CI.MESSAGE: ActiveMQTextMessage(producer_id=ProducerId(CID, 1, 1)),
        CI.NO_SUCH_PRODUCER: ActiveMQTextMessage(producer_id=ProducerId(CID, 5, 1)),
        CI.ACK: MessageAck(consumer_id=ConsumerId(CID, 1, 1)),
        CI.STALE_ACK: MessageAck(consumer_id=ConsumerId(CID, 1, 7)),
        CI.PULL: MessagePull(consumer_id=ConsumerId(CID, 1, 1)),
        CI.NO_SUCH_CONSUMER: MessagePull(consumer_id=ConsumerId(CID, 1, 7)),
        CI.CONSUMER_CONTROL: ConsumerControl(consumer_id=ConsumerId(CID, 1, 1), prefetch=1000),
        CI.TRANSACTION: TransactionInfo(connection_id=cid, transaction_id=LocalTransactionId(1, cid)),
        CI.DESTINATION: DestinationInfo(connection_id=cid, destination=ActiveMQTempQueue("ID:t")),
        CI.REMOVE_SUBSCRIPTION: RemoveSubscriptionInfo(connection_id=cid, subscription_name="s"),
        CI.REMOVE_CONNECTION: RemoveInfo(object_id=cid),
        CI.REMOVE: RemoveInfo(object_id=ProducerId(CID, 1, 1)),
        CI.NOT_REGISTERED: RemoveInfo(object_id=ProducerId(CID, 8, 1)),
        CI.KEEP_ALIVE: KeepAliveInfo(response_required=True),
        CI.KEEP_ALIVE_QUIET: KeepAliveInfo(),
        CI.PASSIVE: Response(correlation_id=1),
        CI.NO_OP: FlushCommand(response_required=True),
        CI.SHUTDOWN: ShutdownInfo(),
        CI.SERVER_COMMAND: MessageDispatch(),
        CI.UNSUPPORTED: ReplayCommand(),
    }.get(kind)


def encode_wfi(info) -> bytes:
    from junction.protocols.openwire.codec import encode_frame

    return encode_frame(info)


def apply(conn: OpenWireConnection, kind: ConnectionInput, state: S):
    command = command_for(kind, state)
    if command is not None:
        return conn.receive(command).action
    if kind is CI.ERROR:
        return conn.error(NotAClientCommand("x", MessageDispatch())).action
    assert kind is CI.CLOSE
    return conn.close().action


CASES = [(state, kind) for state in S for kind in CI]


@pytest.mark.parametrize(("state", "kind"), CASES, ids=[f"{s.name}-{k.name}" for s, k in CASES])
def test_every_state_and_input(state, kind):
    conn = reach(state)
    want = expected(state, kind)
    command = command_for(kind, state)
    if want[0] == "unreachable":
        assert conn.classify(command) is not kind  # no command is this input here
        return
    if command is not None:
        assert conn.classify(command) is kind, "the test's command must be the input it stands for"
    if want[0] == "reject":
        _, error_class, fatal = want
        with pytest.raises(OpenWireProtocolError) as info:
            apply(conn, kind, state)
        assert type(info.value) is error_class and info.value.fatal is fatal
        assert conn.state is state  # the adapter answers next
        return
    _, nxt, action = want
    assert (apply(conn, kind, state), conn.state) == (action, nxt)


def test_the_table_has_no_row_the_rules_call_a_refusal_of_another_kind():
    """Structure only (the behaviour is pinned by test_every_state_and_input, on a real connection):
    a rejection keeps the state, and only ERROR, CLOSE and ShutdownInfo reach CLOSED."""
    for (state, kind), (nxt, action) in TRANSITIONS.items():
        if action in REJECTIONS:
            assert nxt is state, (state, kind)
        if nxt is S.CLOSED and state is not S.CLOSED:
            assert kind in (CI.ERROR, CI.CLOSE, CI.SHUTDOWN), (state, kind)
