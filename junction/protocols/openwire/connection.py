"""Sans-IO: the server side of one OpenWire connection, as a state table.

The codec (:mod:`.codec`) turns bytes into commands; this module says what a
server does with each command in each state, given the ids the client
registered.  No Twisted, no sockets, no clock (the inactivity monitor is
:mod:`.inactivity`)::

    NEGOTIATING --Negotiated--> NEGOTIATED --ConnectionInfo--> OPEN
    OPEN --RemoveInfo(ConnectionId)--> NEGOTIATED
    any --ShutdownInfo / error() / close()--> CLOSED

:data:`TRANSITIONS` is the whole table: ``(state, input) -> (next state,
action)``.  :meth:`OpenWireConnection.classify` says what a command is
(:class:`ConnectionInput`), given the registered connection, sessions,
producers and consumers; :meth:`OpenWireConnection.receive` looks the pair
up, keeps the registry, and returns a :class:`Step`.  The actions
(:class:`Action`):

* ``IGNORE`` -- nothing (a client's Response, ConnectionControl,
  KeepAliveInfo that asks for no answer, what arrives after CLOSED);
* ``ECHO`` -- write the KeepAliveInfo back with ``response_required`` false;
* ``NEGOTIATED`` -- the wire format is settled: start the inactivity monitor,
  write a BrokerInfo (the real client takes it as the broker's greeting);
* ``OPEN`` -- authenticate the ConnectionInfo; answer :meth:`~OpenWireConnection.response`
  or refuse with :meth:`~OpenWireConnection.refuse` (then close);
* ``ACKNOWLEDGE`` -- a replayed registration (failover: the same id again)
  or a FlushCommand/ControlCommand: answer :meth:`~OpenWireConnection.response` only;
* ``HANDLE`` -- the adapter acts on it (a new session, producer, consumer, a
  message, an ack, a pull, a ConsumerControl, a transaction, a temporary destination, a
  subscription removed, a RemoveInfo) and answers when it asked (``response_required``);
* ``CLOSE`` -- the connection is over (ShutdownInfo, close());
* ``WRITE`` -- :meth:`~OpenWireConnection.error` returned what to write, then close;
* the rejections (:data:`REJECTIONS`): :meth:`~OpenWireConnection.receive`
  raises the error; the adapter writes :meth:`~OpenWireConnection.error_reply`
  (an ExceptionResponse to a command that asked for a response, else a
  ConnectionError, as Artemis does) and closes when the error is ``fatal``.

What is refused, and why (Classic's ``TransportConnection`` and Artemis's
``OpenWireConnection`` throw the same ``IllegalStateException``):

* before the negotiation, anything but the client's WireFormatInfo
  (``NOT_NEGOTIATED``, fatal); a second WireFormatInfo (``RENEGOTIATION``, fatal);
* before the ConnectionInfo, anything but KeepAliveInfo, ShutdownInfo,
  ConnectionControl, a Response (``NOT_CONNECTED``, fatal); a ConnectionInfo
  naming another connection while one is open (``FOREIGN``, fatal);
* an id naming another connection (``FOREIGN``, fatal);
* a producer or consumer of a session that is not open (``NO_SUCH_SESSION``),
  a message from a producer that is not registered (``NO_SUCH_PRODUCER``), a
  pull for a consumer that is not (``NO_SUCH_CONSUMER``), a RemoveInfo naming
  nothing registered (``NOT_REGISTERED``): answered, the connection stays;
* a command only a broker sends (``SERVER_COMMAND``) or one of the
  broker-to-broker commands (network bridges, the journal, partial commands,
  a bare data structure: ``UNSUPPORTED``): fatal.

Session ``-1`` is every connection's default session, open without a
SessionInfo: the client's advisory consumer lives there.  An ack for a
consumer that is not registered is ignored, as Classic ignores it (a consumer
closed while its acks were on the way).  A ConsumerControl, which a broker
usually sends, is handled from the client too: the failover transport sends
one to restore a consumer's prefetch after a reconnect (the adapter ignores
one for a consumer it does not have).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from junction.protocols.openwire.codec import Negotiated
from junction.protocols.openwire.commands import (
    BrokerInfo,
    BrokerSubscriptionInfo,
    ConnectionControl,
    ConnectionError,
    ConnectionInfo,
    ConsumerControl,
    ConsumerInfo,
    ControlCommand,
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
from junction.protocols.openwire.errors import OpenWireProtocolError
from junction.protocols.openwire.marshal import STRUCTURES, Command, JavaThrowable
from junction.protocols.openwire.messages import (
    Message,
    MessageAck,
    MessageDispatch,
    MessageDispatchNotification,
    MessagePull,
    ProducerAck,
)
from junction.protocols.openwire.structures import ConnectionId, ConsumerId, ProducerId, SessionId
from junction.protocols.openwire.wireformat import WireFormat, WireFormatInfo
from junction.protocols.states import TableEnum

__all__ = [
    "DEFAULT_SESSION",
    "REJECTIONS",
    "TRANSITIONS",
    "Action",
    "ConnectionInput",
    "ConnectionState",
    "ForeignId",
    "NoSuchConsumer",
    "NoSuchProducer",
    "NoSuchSession",
    "NotAClientCommand",
    "NotConnected",
    "NotNegotiated",
    "NotRegistered",
    "OpenWireConnection",
    "Renegotiation",
    "Step",
    "UnsupportedCommand",
]

#: The session every connection has without a SessionInfo (Classic's ``ConnectionState``).
DEFAULT_SESSION = -1

_ILLEGAL_STATE = "java.lang.IllegalStateException"


# -- what the client got wrong ---------------------------------------------------------------


class NotNegotiated(OpenWireProtocolError):
    """A command before the client's WireFormatInfo."""


class Renegotiation(OpenWireProtocolError):
    """A second WireFormatInfo: the wire format is settled once."""


class NotConnected(OpenWireProtocolError):
    """A command that needs a connection before its ConnectionInfo."""

    java_class = _ILLEGAL_STATE


class ForeignId(OpenWireProtocolError):
    """An id (or a second ConnectionInfo) naming another connection than this one's."""

    java_class = _ILLEGAL_STATE


class NoSuchSession(OpenWireProtocolError):
    """A producer or consumer of a session that is not open."""

    java_class = _ILLEGAL_STATE
    fatal = False


class NoSuchProducer(OpenWireProtocolError):
    """A message from a producer that is not registered."""

    java_class = _ILLEGAL_STATE
    fatal = False


class NoSuchConsumer(OpenWireProtocolError):
    """A MessagePull for a consumer that is not registered."""

    java_class = _ILLEGAL_STATE
    fatal = False


class NotRegistered(OpenWireProtocolError):
    """A RemoveInfo naming nothing registered on this connection."""

    java_class = _ILLEGAL_STATE
    fatal = False


class NotAClientCommand(OpenWireProtocolError):
    """A command only a broker sends (a dispatch, a ProducerAck, a BrokerInfo, ...)."""


class UnsupportedCommand(OpenWireProtocolError):
    """A broker-to-broker command or a bare data structure: not served here."""


# -- the table -------------------------------------------------------------------------------


class ConnectionState(TableEnum):
    """Where one OpenWire connection stands (server side)."""

    NEGOTIATING = "NEGOTIATING"  # before the client's WireFormatInfo
    NEGOTIATED = "NEGOTIATED"  # wire format settled; no connection registered
    OPEN = "OPEN"  # a ConnectionInfo accepted
    CLOSED = "CLOSED"


class ConnectionInput(TableEnum):
    """What a command is, given the registry, or what the adapter tells."""

    WIRE_FORMAT = "WIRE_FORMAT"  # the codec's Negotiated
    WIRE_FORMAT_AGAIN = "WIRE_FORMAT_AGAIN"
    CONNECTION_INFO = "CONNECTION_INFO"  # no connection yet, or this one's id again
    FOREIGN = "FOREIGN"  # an id of another connection
    REPEAT = "REPEAT"  # a registration already made (failover replay)
    SESSION_INFO = "SESSION_INFO"
    PRODUCER_INFO = "PRODUCER_INFO"
    CONSUMER_INFO = "CONSUMER_INFO"
    NO_SUCH_SESSION = "NO_SUCH_SESSION"
    MESSAGE = "MESSAGE"
    NO_SUCH_PRODUCER = "NO_SUCH_PRODUCER"
    ACK = "ACK"
    STALE_ACK = "STALE_ACK"  # for a consumer not (or no longer) registered
    PULL = "PULL"
    CONSUMER_CONTROL = "CONSUMER_CONTROL"  # the client restores a prefetch (failover)
    NO_SUCH_CONSUMER = "NO_SUCH_CONSUMER"
    TRANSACTION = "TRANSACTION"
    DESTINATION = "DESTINATION"
    REMOVE_SUBSCRIPTION = "REMOVE_SUBSCRIPTION"
    REMOVE_CONNECTION = "REMOVE_CONNECTION"
    REMOVE = "REMOVE"  # a session, producer or consumer
    NOT_REGISTERED = "NOT_REGISTERED"
    KEEP_ALIVE = "KEEP_ALIVE"  # asking for an answer
    KEEP_ALIVE_QUIET = "KEEP_ALIVE_QUIET"
    PASSIVE = "PASSIVE"  # a Response, a ConnectionControl: nothing to do
    NO_OP = "NO_OP"  # FlushCommand, ControlCommand: answered, nothing done
    SHUTDOWN = "SHUTDOWN"
    SERVER_COMMAND = "SERVER_COMMAND"
    UNSUPPORTED = "UNSUPPORTED"
    ERROR = "ERROR"  # error(): the answer to a fatal error, then close
    CLOSE = "CLOSE"  # close(): the transport is gone


class Action(TableEnum):
    """What the adapter does for an input (see the module doc)."""

    IGNORE = "IGNORE"
    ECHO = "ECHO"
    NEGOTIATED = "NEGOTIATED"
    OPEN = "OPEN"
    ACKNOWLEDGE = "ACKNOWLEDGE"
    HANDLE = "HANDLE"
    CLOSE = "CLOSE"
    WRITE = "WRITE"
    REFUSE_NOT_NEGOTIATED = "REFUSE_NOT_NEGOTIATED"
    REFUSE_RENEGOTIATION = "REFUSE_RENEGOTIATION"
    REFUSE_NOT_CONNECTED = "REFUSE_NOT_CONNECTED"
    REFUSE_FOREIGN = "REFUSE_FOREIGN"
    REFUSE_NO_SUCH_SESSION = "REFUSE_NO_SUCH_SESSION"
    REFUSE_NO_SUCH_PRODUCER = "REFUSE_NO_SUCH_PRODUCER"
    REFUSE_NO_SUCH_CONSUMER = "REFUSE_NO_SUCH_CONSUMER"
    REFUSE_NOT_REGISTERED = "REFUSE_NOT_REGISTERED"
    REFUSE_SERVER_COMMAND = "REFUSE_SERVER_COMMAND"
    REFUSE_UNSUPPORTED = "REFUSE_UNSUPPORTED"


#: The rejections: the error each raises.
REJECTIONS: Mapping[Action, type[OpenWireProtocolError]] = MappingProxyType({
    Action.REFUSE_NOT_NEGOTIATED: NotNegotiated,
    Action.REFUSE_RENEGOTIATION: Renegotiation,
    Action.REFUSE_NOT_CONNECTED: NotConnected,
    Action.REFUSE_FOREIGN: ForeignId,
    Action.REFUSE_NO_SUCH_SESSION: NoSuchSession,
    Action.REFUSE_NO_SUCH_PRODUCER: NoSuchProducer,
    Action.REFUSE_NO_SUCH_CONSUMER: NoSuchConsumer,
    Action.REFUSE_NOT_REGISTERED: NotRegistered,
    Action.REFUSE_SERVER_COMMAND: NotAClientCommand,
    Action.REFUSE_UNSUPPORTED: UnsupportedCommand,
})

_S = ConnectionState
_I = ConnectionInput
_A = Action

#: Inputs that need an open connection, and what each does there.
_CONNECTED_INPUTS = {
    _I.REPEAT: _A.ACKNOWLEDGE,
    _I.SESSION_INFO: _A.HANDLE,
    _I.PRODUCER_INFO: _A.HANDLE,
    _I.CONSUMER_INFO: _A.HANDLE,
    _I.NO_SUCH_SESSION: _A.REFUSE_NO_SUCH_SESSION,
    _I.MESSAGE: _A.HANDLE,
    _I.NO_SUCH_PRODUCER: _A.REFUSE_NO_SUCH_PRODUCER,
    _I.ACK: _A.HANDLE,
    _I.STALE_ACK: _A.IGNORE,
    _I.PULL: _A.HANDLE,
    _I.CONSUMER_CONTROL: _A.HANDLE,
    _I.NO_SUCH_CONSUMER: _A.REFUSE_NO_SUCH_CONSUMER,
    _I.TRANSACTION: _A.HANDLE,
    _I.DESTINATION: _A.HANDLE,
    _I.REMOVE_SUBSCRIPTION: _A.HANDLE,
    _I.REMOVE: _A.HANDLE,
    _I.NOT_REGISTERED: _A.REFUSE_NOT_REGISTERED,
    _I.NO_OP: _A.ACKNOWLEDGE,
}


def _table() -> dict:
    rows: dict = {}
    for state in (_S.NEGOTIATING, _S.NEGOTIATED, _S.OPEN):
        for inp in _I:
            rows[state, inp] = (state, _A.REFUSE_NOT_NEGOTIATED)
        rows[state, _I.ERROR] = (_S.CLOSED, _A.WRITE)
        rows[state, _I.CLOSE] = (_S.CLOSED, _A.CLOSE)
    rows[_S.NEGOTIATING, _I.WIRE_FORMAT] = (_S.NEGOTIATED, _A.NEGOTIATED)
    for state in (_S.NEGOTIATED, _S.OPEN):
        rows[state, _I.WIRE_FORMAT] = (state, _A.REFUSE_RENEGOTIATION)
        rows[state, _I.WIRE_FORMAT_AGAIN] = (state, _A.REFUSE_RENEGOTIATION)
        rows[state, _I.KEEP_ALIVE] = (state, _A.ECHO)
        rows[state, _I.KEEP_ALIVE_QUIET] = (state, _A.IGNORE)
        rows[state, _I.PASSIVE] = (state, _A.IGNORE)
        rows[state, _I.SHUTDOWN] = (_S.CLOSED, _A.CLOSE)
        rows[state, _I.FOREIGN] = (state, _A.REFUSE_FOREIGN)
        rows[state, _I.SERVER_COMMAND] = (state, _A.REFUSE_SERVER_COMMAND)
        rows[state, _I.UNSUPPORTED] = (state, _A.REFUSE_UNSUPPORTED)
        rows[state, _I.REMOVE_CONNECTION] = (_S.NEGOTIATED, _A.HANDLE)
        for inp, action in _CONNECTED_INPUTS.items():
            rows[state, inp] = (state, action) if state is _S.OPEN else (state, _A.REFUSE_NOT_CONNECTED)
    rows[_S.NEGOTIATED, _I.CONNECTION_INFO] = (_S.OPEN, _A.OPEN)
    rows[_S.NEGOTIATED, _I.REMOVE_CONNECTION] = (_S.NEGOTIATED, _A.REFUSE_NOT_CONNECTED)
    rows[_S.OPEN, _I.CONNECTION_INFO] = (_S.OPEN, _A.ACKNOWLEDGE)  # the same id again
    # Closed: whatever still arrives, or is told, is ignored.
    for inp in _I:
        rows[_S.CLOSED, inp] = (_S.CLOSED, _A.IGNORE)
    return rows


#: ``(state, input) -> (next state, action)`` for every pair.
TRANSITIONS: Mapping = MappingProxyType(_table())

#: Commands only a broker sends.
_SERVER_COMMANDS = (MessageDispatch, ProducerAck, ConnectionError, ExceptionResponse,
                    BrokerInfo, MessageDispatchNotification)
#: Commands between brokers (network connectors, replication), not served.
_BROKER_COMMANDS = (BrokerSubscriptionInfo, ReplayCommand)
#: The message classes, classified first (the hot path: a message and its ack per message).
_MESSAGE_CLASSES = frozenset(cls for cls in STRUCTURES.values() if issubclass(cls, Message))


@dataclass(frozen=True, slots=True)
class Step:
    """What :meth:`OpenWireConnection.receive` decided: the action, for which command."""

    action: Action
    input: ConnectionInput
    command: object
    state: ConnectionState


class OpenWireConnection:
    """The registry and state of one OpenWire connection (server side)."""

    __slots__ = ("_state", "wire_format", "connection_info", "sessions", "producers", "consumers",
                 "fault_tolerant")

    def __init__(self) -> None:
        self._state = _S.NEGOTIATING
        self.wire_format: WireFormat | None = None
        self.connection_info: ConnectionInfo | None = None
        self.sessions: set[SessionId] = set()
        self.producers: dict[ProducerId, ProducerInfo] = {}
        self.consumers: dict[ConsumerId, ConsumerInfo] = {}
        self.fault_tolerant = False  # the client said ConnectionControl{faultTolerant} (a failover: URL)

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def connection_id(self) -> ConnectionId | None:
        info = self.connection_info
        return info.connection_id if info is not None else None

    # -- classification ----------------------------------------------------------------------

    def _ours(self, connection_id: str | None) -> bool:
        cid = self.connection_id
        return cid is None or connection_id == cid.value

    def classify(self, command: object) -> ConnectionInput:
        """What ``command`` is for this connection now (see :class:`ConnectionInput`)."""
        kind = type(command)
        # the commands of every message first (none is a subclass of what is tested before them below)
        if kind in _MESSAGE_CLASSES:
            pid = command.producer_id
            if pid is None or not self._ours(pid.connection_id):
                return _I.FOREIGN
            return _I.MESSAGE if pid in self.producers else _I.NO_SUCH_PRODUCER
        if kind is MessageAck:
            return _I.ACK if command.consumer_id in self.consumers else _I.STALE_ACK
        if isinstance(command, Negotiated):
            return _I.WIRE_FORMAT
        if isinstance(command, WireFormatInfo):
            return _I.WIRE_FORMAT_AGAIN
        if isinstance(command, KeepAliveInfo):
            return _I.KEEP_ALIVE if command.response_required else _I.KEEP_ALIVE_QUIET
        if isinstance(command, ShutdownInfo):
            return _I.SHUTDOWN
        if isinstance(command, (Response, ConnectionControl)) and not isinstance(command, ExceptionResponse):
            return _I.PASSIVE
        if isinstance(command, _SERVER_COMMANDS):
            return _I.SERVER_COMMAND
        if not isinstance(command, Command) or isinstance(command, _BROKER_COMMANDS):
            return _I.UNSUPPORTED
        if isinstance(command, (FlushCommand, ControlCommand)):
            return _I.NO_OP
        if isinstance(command, ConnectionInfo):
            return self._classify_connection(command)
        if isinstance(command, SessionInfo):
            sid = command.session_id
            if sid is None or not self._ours(sid.connection_id):
                return _I.FOREIGN
            return _I.REPEAT if sid in self.sessions else _I.SESSION_INFO
        if isinstance(command, ProducerInfo):
            return self._classify_child(command.producer_id, self.producers, _I.PRODUCER_INFO)
        if isinstance(command, ConsumerInfo):
            return self._classify_child(command.consumer_id, self.consumers, _I.CONSUMER_INFO)
        if isinstance(command, Message):
            pid = command.producer_id
            if pid is None or not self._ours(pid.connection_id):
                return _I.FOREIGN
            return _I.MESSAGE if pid in self.producers else _I.NO_SUCH_PRODUCER
        if isinstance(command, MessageAck):
            return _I.ACK if command.consumer_id in self.consumers else _I.STALE_ACK
        if isinstance(command, ConsumerControl):
            return _I.CONSUMER_CONTROL
        if isinstance(command, MessagePull):
            return _I.PULL if command.consumer_id in self.consumers else _I.NO_SUCH_CONSUMER
        if isinstance(command, (TransactionInfo, DestinationInfo, RemoveSubscriptionInfo)):
            cid = command.connection_id
            if cid is None or not self._ours(cid.value):
                return _I.FOREIGN
            return {TransactionInfo: _I.TRANSACTION, DestinationInfo: _I.DESTINATION,
                    RemoveSubscriptionInfo: _I.REMOVE_SUBSCRIPTION}[type(command)]
        if isinstance(command, RemoveInfo):
            return self._classify_remove(command.object_id)
        return _I.UNSUPPORTED  # pragma: no cover - every client command is classified above

    def _classify_connection(self, info: ConnectionInfo) -> ConnectionInput:
        if info.connection_id is None:
            return _I.FOREIGN
        cid = self.connection_id
        if cid is None:
            return _I.CONNECTION_INFO
        return _I.CONNECTION_INFO if info.connection_id == cid else _I.FOREIGN

    def _classify_child(self, child_id, registry: dict, new: ConnectionInput) -> ConnectionInput:
        if child_id is None or not self._ours(child_id.connection_id):
            return _I.FOREIGN
        if child_id in registry:
            return _I.REPEAT
        session = child_id.session()
        if session.value == DEFAULT_SESSION or session in self.sessions:
            return new
        return _I.NO_SUCH_SESSION

    def _classify_remove(self, object_id) -> ConnectionInput:
        if isinstance(object_id, ConnectionId):
            if self.connection_id is None:
                return _I.REMOVE_CONNECTION
            return _I.REMOVE_CONNECTION if object_id == self.connection_id else _I.FOREIGN
        if isinstance(object_id, (SessionId, ConsumerId, ProducerId)):
            if not self._ours(object_id.connection_id):
                return _I.FOREIGN
            known = (object_id in self.sessions or object_id in self.consumers or object_id in self.producers)
            return _I.REMOVE if known else _I.NOT_REGISTERED
        return _I.UNSUPPORTED

    # -- the table -------------------------------------------------------------------------------

    def receive(self, command: object) -> Step:
        """Classify ``command``, take its row, keep the registry; raise the row's rejection."""
        inp = self.classify(command)
        state, action = TRANSITIONS[self._state, inp]
        error = REJECTIONS.get(action)
        if error is not None:
            raise error(self._reason(action, command), command)
        self._state = state
        self._register(inp, command)
        return Step(action, inp, command, state)

    def _register(self, inp: ConnectionInput, command) -> None:
        if inp is _I.WIRE_FORMAT:
            self.wire_format = command.settled
        elif inp is _I.CONNECTION_INFO and self.connection_info is None:
            self.connection_info = command
        elif inp is _I.SESSION_INFO:
            self.sessions.add(command.session_id)
        elif inp is _I.PRODUCER_INFO:
            self.producers[command.producer_id] = command
        elif inp is _I.CONSUMER_INFO:
            self.consumers[command.consumer_id] = command
        elif inp is _I.REMOVE:
            self.discard(command.object_id)
        elif inp is _I.REMOVE_CONNECTION and self._state is _S.NEGOTIATED:
            self.connection_info = None
            self.sessions.clear()
            self.producers.clear()
            self.consumers.clear()
        elif inp is _I.PASSIVE and isinstance(command, ConnectionControl) and command.fault_tolerant:
            self.fault_tolerant = True

    def discard(self, object_id) -> None:
        """Forget a session (with its producers and consumers), a producer or a consumer.

        The adapter calls it too, for a registration it refused (a producer on
        a destination the user may not send to, ...).
        """
        if isinstance(object_id, SessionId):
            self.sessions.discard(object_id)
            for registry in (self.producers, self.consumers):
                for child in [c for c in registry if c.session() == object_id]:
                    del registry[child]
        elif isinstance(object_id, ProducerId):
            self.producers.pop(object_id, None)
        elif isinstance(object_id, ConsumerId):
            self.consumers.pop(object_id, None)

    def _reason(self, action: Action, command) -> str:
        name = type(command).__name__
        if action is _A.REFUSE_NOT_NEGOTIATED:
            return f"{name} before the WireFormatInfo: the wire format is not settled"
        if action is _A.REFUSE_RENEGOTIATION:
            return "a second WireFormatInfo: the wire format is settled once per connection"
        if action is _A.REFUSE_NOT_CONNECTED:
            return f"Cannot handle a {name} before the ConnectionInfo: no connection is registered"
        if action is _A.REFUSE_FOREIGN:
            return f"{name} names another connection than {self.connection_id.value if self.connection_id else None}"
        if action is _A.REFUSE_NO_SUCH_SESSION:
            child = command.producer_id if isinstance(command, ProducerInfo) else command.consumer_id
            kind = "producer" if isinstance(command, ProducerInfo) else "consumer"
            return f"Cannot add a {kind} to a session that had not been registered: {_id_text(child.session())}"
        if action is _A.REFUSE_NO_SUCH_PRODUCER:
            return f"Cannot send from a producer that had not been registered: {_id_text(command.producer_id)}"
        if action is _A.REFUSE_NO_SUCH_CONSUMER:
            return f"Cannot pull for a consumer that had not been registered: {_id_text(command.consumer_id)}"
        if action is _A.REFUSE_NOT_REGISTERED:
            kind = {SessionId: "session", ProducerId: "producer", ConsumerId: "consumer"}[type(command.object_id)]
            return f"Cannot remove a {kind} that had not been registered: {_id_text(command.object_id)}"
        if action is _A.REFUSE_SERVER_COMMAND:
            return f"{name} is a command only a broker sends"
        return f"{name} is not served here (network of brokers, replication and bare data structures are not)"

    # -- answers -----------------------------------------------------------------------------------

    def response(self, command) -> Response | None:
        """The plain Response ``command`` waits for, or None when it asked for none."""
        if isinstance(command, Command) and command.response_required:
            return Response(correlation_id=command.command_id)
        return None

    def error_reply(self, error: OpenWireProtocolError) -> Command:
        """What answers ``error``: an ExceptionResponse to a command that asked, else a ConnectionError."""
        exception = JavaThrowable(error.java_class, str(error))
        command = error.command
        if isinstance(command, Command) and command.response_required:
            return ExceptionResponse(correlation_id=command.command_id, exception=exception)
        return ConnectionError(exception=exception, connection_id=self.connection_id)

    def refuse(self, command, java_class: str, message: str) -> Command:
        """Refuse ``command`` (a failed login, a duplicate client id): the answer to write, then close."""
        self._state = _S.CLOSED
        exception = JavaThrowable(java_class, message)
        if isinstance(command, Command) and command.response_required:
            return ExceptionResponse(correlation_id=command.command_id, exception=exception)
        return ConnectionError(exception=exception, connection_id=self.connection_id)

    def error(self, error: OpenWireProtocolError) -> Step:
        """A fatal error: the connection closes after the answer (``WRITE`` the reply, then close)."""
        state, action = TRANSITIONS[self._state, _I.ERROR]
        self._state = state
        return Step(action, _I.ERROR, self.error_reply(error), state)

    def close(self) -> Step:
        """The transport is gone."""
        state, action = TRANSITIONS[self._state, _I.CLOSE]
        self._state = state
        return Step(action, _I.CLOSE, None, state)

    def keep_alive_echo(self) -> KeepAliveInfo:
        """The answer to a KeepAliveInfo that asked for one (``ECHO``)."""
        return KeepAliveInfo(response_required=False)


def _id_text(obj) -> str:
    """An id as Classic's ``toString`` writes it (``connectionId:session[:value]``)."""
    if isinstance(obj, SessionId):
        return f"{obj.connection_id}:{obj.value}"
    if isinstance(obj, ConsumerId):
        return f"{obj.connection_id}:{obj.session_id}:{obj.value}"
    if isinstance(obj, ProducerId):
        return f"{obj.connection_id}:{obj.session_id}:{obj.value}"
    return repr(obj)
