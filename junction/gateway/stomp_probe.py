"""The readiness probe over STOMP: one CONNECT, the CONNECTED frame read, a polite DISCONNECT.

For targets that serve STOMP and not AMQP: a Junction core whose acceptor
for the gateway has ``protocols=STOMP``, or another broker's STOMP port.
:class:`StompTargetProbe` is a
:class:`~junction.gateway.probe_connection.ConnectionProbe` (one connection
per check, TLS and PROXY ``LOCAL`` as the connector says, timeout, cancel and
release); each ``check(target)``:

1. sends ``CONNECT`` with ``accept-version:1.0,1.1``, ``host`` (the
   connector's host), ``heart-beat:0,0``, the pool's ``login``/``passcode``
   (none without a username) and a ``client-id`` starting with the routers'
   internal client prefix (:data:`~junction.routing.keys.INTERNAL_CLIENT_ID_PREFIX`):
   a gateway routes it to its local core, a Junction core knows it is a probe;
2. reads the answer:

   * ``CONNECTED`` from a Junction core carries three headers, sent only to a
     connection whose ``client-id`` has the internal prefix
     (``junction/brokercore/stomp_server.py``): :data:`NODE_ID_HEADER`,
     :data:`ACTIVE_HEADER` (``true``/``false``) and
     :data:`CONNECTIONS_HEADER` (the core's client connections, the probe's
     own included: the probe subtracts one);
   * ``CONNECTED`` without any of them is another broker (ActiveMQ Classic,
     Artemis, RabbitMQ, CoilMQ ...): it answered, so it is ready, with
     :func:`~junction.gateway.probe.stand_in_node_id` for a node id, no
     connection count and a ``note`` naming its ``server`` header;
   * ``ERROR`` fails the check with "STOMP CONNECT refused" and the frame's
     ``message`` (a wrong pool password, most often);
   * an AMQP header, bytes that are not a STOMP frame, or a close without a
     byte fail with :class:`~junction.gateway.probe.NotThisProtocol`;

3. sends ``DISCONNECT`` with a ``receipt`` and closes the socket when the
   ``RECEIPT`` comes (or the peer closes); the answer stands even if that
   never comes (:data:`~junction.gateway.probe_connection.CLOSE_LINGER`).

**Versions.**  The probe needs nothing STOMP 1.2 adds (``CONNECT`` and
``CONNECTED`` are never escaped, and heart-beats are off), so it offers 1.0
and 1.1 only: a server that ties 1.2 to a virtual host name in ``host``
(CoilMQ refuses any but its own) still answers.

**Bounds.**  The peer's frames are read by the project's sans-IO codec under
:data:`PROBE_STOMP_LIMITS`: a CONNECTED frame is a few hundred bytes, so a
peer sending more than 64 KiB in a frame is not answering a CONNECT.
"""

from __future__ import annotations

from junction.gateway.probe import ProbeResult, another_broker
from junction.gateway.probe_connection import ConnectionProbe, ProbeCheck, ProbeProtocol, preview
from junction.protocols.errors import RemoteProtocolError
from junction.protocols.stomp import STOMP_VERSIONS, Frame, HeartBeat, StompCodec, StompLimits
from junction.protocols.stomp.builders import connect_frame, disconnect_frame

__all__ = [
    "ACCEPT_VERSION",
    "ACTIVE_HEADER",
    "CONNECTIONS_HEADER",
    "NODE_ID_HEADER",
    "PROBE_STOMP_LIMITS",
    "StompTargetProbe",
]

#: the Junction core's CONNECTED headers the probe reads (sent to probes only)
NODE_ID_HEADER = "junction-node-id"
ACTIVE_HEADER = "junction-active"
CONNECTIONS_HEADER = "junction-connections"
_JUNCTION_HEADERS = (NODE_ID_HEADER, ACTIVE_HEADER, CONNECTIONS_HEADER)
#: the versions the probe offers (see the module docstring)
ACCEPT_VERSION = "1.0,1.1"
#: what the probe reads from the peer: frames of at most 64 KiB, 64 headers of 4 KiB
PROBE_STOMP_LIMITS = StompLimits(
    max_frame_size=64 * 1024, max_header_count=64, max_header_length=4 * 1024
)
#: the receipt id of the probe's DISCONNECT
_RECEIPT = "probe-disconnect"
#: characters of an ERROR frame's message kept for the status
_MESSAGE_CHARS = 200


class StompTargetProbe(ConnectionProbe):
    """Checks targets by opening a STOMP connection to each.

    ``username``/``password``: the pool's credentials (``login``/``passcode``),
    or no username to connect without; the other arguments are
    :class:`~junction.gateway.probe_connection.ConnectionProbe`'s.
    """

    protocol = "STOMP"
    hello = "CONNECT"
    answer = "CONNECTED"

    def build_protocol(self, check: ProbeCheck) -> _StompProbeProtocol:
        return _StompProbeProtocol(check)


def read_connected(check: ProbeCheck, frame: Frame) -> None:
    """The peer's CONNECTED frame: the check's answer, or why not."""
    node_id, active, count = (frame.get(name) for name in _JUNCTION_HEADERS)
    server = frame.get("server")
    if node_id is None and active is None and count is None:
        check.answered(another_broker(check.target.connector, "STOMP", server))
        return
    invalid = [
        name
        for name, ok in (
            (NODE_ID_HEADER, bool(node_id)),
            (ACTIVE_HEADER, active in ("true", "false")),
            (CONNECTIONS_HEADER, count is not None and count.isascii() and count.isdigit()),
        )
        if not ok
    ]
    if invalid:
        check.fail(
            check.error(
                f"not a valid Junction broker core CONNECTED: no valid {', '.join(invalid)} "
                f"(server {server!r})"
            )
        )
        return
    # the core counted this connection too
    check.answered(
        ProbeResult(
            active=active == "true",
            node_id=node_id,
            connection_count=max(0, int(count) - 1),
            protocol="STOMP",
        )
    )


def _error_text(frame: Frame) -> str:
    text = frame.get("message")
    if not text:
        body = frame.body.decode("utf-8", "replace").strip()
        text = body.splitlines()[0] if body else "no message"
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


class _StompProbeProtocol(ProbeProtocol):
    """The client side of one STOMP probe connection: CONNECT, CONNECTED, DISCONNECT, RECEIPT."""

    def __init__(self, check: ProbeCheck):
        super().__init__(check)
        self.codec = StompCodec(PROBE_STOMP_LIMITS, server=False)
        #: "connecting" until CONNECTED, then "disconnecting"
        self.state = "connecting"

    def opened(self) -> None:
        probe = self.check.probe
        frame = connect_frame(
            ACCEPT_VERSION,
            self.check.host,
            heart_beat="0,0",
            extra=(("client-id", probe.client_id()),),
            login=probe.username,
            passcode=None if probe.username is None else probe._password or "",
        )
        self.transport.write(self.codec.send(frame))

    def received(self, data: bytes) -> None:
        first = self.check.first
        if self.state == "connecting" and first.startswith(b"AMQP"):
            self.not_this_protocol("answered the STOMP CONNECT with an AMQP header, not STOMP")
            return
        try:
            events = self.codec.receive_data(data)
        except RemoteProtocolError as exc:
            for event in getattr(exc, "events", None) or ():
                self._event(event)
            if self.closing:
                return
            if self.state == "connecting":
                self.not_this_protocol(
                    f"answered the STOMP CONNECT with {preview(first)}, not STOMP ({exc})"
                )
            else:  # the answer is in: whatever follows does not change it
                self.abort()
            return
        for event in events:
            self._event(event)
            if self.closing:
                return

    def _event(self, event) -> None:
        if isinstance(event, HeartBeat) or self.closing:
            return
        command = event.command
        if self.state == "connecting":
            if command == "CONNECTED":
                read_connected(self.check, event)
                self.state = "disconnecting"
                version = event.get("version") or "1.0"
                if version in STOMP_VERSIONS:  # the RECEIPT's headers follow its escaping
                    self.codec.set_version(version)
                self.transport.write(self.codec.send(disconnect_frame(_RECEIPT)))
            elif command == "ERROR":
                self.check.fail(self.check.error(f"STOMP CONNECT refused: {_error_text(event)}"))
                self.close()
            else:
                self.check.fail(
                    self.check.error(f"answered the STOMP CONNECT with {command}, not CONNECTED")
                )
                self.abort()
        elif command in ("RECEIPT", "ERROR"):
            self.close()
