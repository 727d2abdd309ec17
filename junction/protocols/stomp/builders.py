"""The frames a STOMP server writes (CONNECTED, ERROR, RECEIPT, MESSAGE) and the two a
client opening and closing a connection writes (CONNECT, DISCONNECT), sans-IO.

One place for their layout and texts, shared by the broker core's STOMP
adapter and the gateway (which answers a client before any core does, and
probes its targets as a client):

* :func:`connect_frame` / :func:`disconnect_frame` -- the client's CONNECT
  (``accept-version``, ``host``, ``heart-beat``, any extra headers, then
  ``login`` and ``passcode`` when given) and DISCONNECT (with a ``receipt``
  when given), as the gateway's readiness probe writes them.

* :func:`connected_frame` -- ``version``, ``session``, ``server``, any extra
  headers, then the negotiated ``heart-beat`` (1.1 and 1.2).
* :func:`error_frame` -- Artemis-style: ``message`` (one line, at most
  :data:`MAX_ERROR_MESSAGE_CHARS`), ``receipt-id`` when the offending frame
  asked for a receipt, ``content-type:text/plain``, and the details (or the
  message) as the body.  :func:`version_error_frame` is the answer to a
  CONNECT that offers no version we speak; :func:`login_refused` and
  :func:`security_error` are the texts of a refused login and of a refused
  operation, word for word as the broker has always written them.
* :func:`receipt_for` -- a RECEIPT, as bytes when the codec's fast encoder can
  write it (then they do not depend on the version), else as a
  :class:`Frame` for :meth:`StompCodec.send`.
* :func:`encode_message` / :func:`message_frame` -- a MESSAGE delivered to a
  subscription.  This is the broker's hot path: :func:`encode_message` lays
  the header text out in one pass and hands it to the codec's one fast
  encoder (:func:`~junction.protocols.stomp.codec.encode_plain`); only when
  that says the text needs escaping or checking does the caller take
  :func:`message_frame` through :meth:`StompCodec.send`, which writes the
  same frame, leaving out the headers the version cannot carry
  (:func:`carriable`).

Values that are not text (a message property may be a number, a boolean,
bytes ...) are turned into header text by the caller's ``header_value``
(:func:`header_text` for plain Python values), since what a value *is* is
the broker's business, not the protocol's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from junction.protocols.stomp.codec import encode_plain
from junction.protocols.stomp.frames import STOMP_VERSIONS, Frame

__all__ = [
    "MAX_ERROR_MESSAGE_CHARS",
    "carriable",
    "connect_frame",
    "connected_frame",
    "disconnect_frame",
    "encode_message",
    "error_frame",
    "header_text",
    "login_refused",
    "message_frame",
    "message_head",
    "receipt_for",
    "security_error",
    "streamed_head",
    "version_error_frame",
]

log = logging.getLogger("junction.stomp")

#: An ERROR frame's ``message`` header is cut to this many characters (the
#: whole text is in the body).
MAX_ERROR_MESSAGE_CHARS = 1000


# -- CONNECT and DISCONNECT (the client's) -------------------------------------------------


def connect_frame(
    accept_version: str,
    host: str,
    heart_beat: str = "0,0",
    extra: Iterable[tuple[str, str]] = (),
    login: str | None = None,
    passcode: str | None = None,
) -> Frame:
    """A client's CONNECT: accept-version, host, heart-beat, ``extra``, then login, passcode.

    ``login``/``passcode`` are written only when given (not None).  A CONNECT
    is never escaped: the codec refuses a value it could not write as it is.
    """
    headers = [("accept-version", accept_version), ("host", host), ("heart-beat", heart_beat)]
    headers += extra
    if login is not None:
        headers.append(("login", login))
    if passcode is not None:
        headers.append(("passcode", passcode))
    return Frame("CONNECT", tuple(headers))


def disconnect_frame(receipt: str | None = None) -> Frame:
    """A client's DISCONNECT, asking for a RECEIPT to ``receipt`` when given."""
    return Frame("DISCONNECT", () if receipt is None else (("receipt", receipt),))


# -- CONNECTED and ERROR ------------------------------------------------------------------


def connected_frame(
    version: str,
    session: str,
    server: str,
    extra: Iterable[tuple[str, str]] = (),
    heart_beat: str | None = None,
) -> Frame:
    """The CONNECTED frame: version, session, server, ``extra`` headers, then ``heart-beat``."""
    headers = [("version", version), ("session", session), ("server", server)]
    headers += extra
    if heart_beat is not None:
        headers.append(("heart-beat", heart_beat))
    return Frame("CONNECTED", tuple(headers))


def error_frame(message: str, *, detail: str = "", receipt: str | None = None) -> Frame:
    """An ERROR frame naming the problem (see the module doc)."""
    headers = [("message", message.replace("\n", " ")[:MAX_ERROR_MESSAGE_CHARS])]
    if receipt is not None:
        headers.append(("receipt-id", receipt))
    headers.append(("content-type", "text/plain"))
    return Frame("ERROR", tuple(headers), (detail or message).encode("utf-8"))


def version_error_frame(versions: tuple[str, ...] = STOMP_VERSIONS) -> Frame:
    """The ERROR for a CONNECT that offers none of ``versions`` (the spec's ``version`` header)."""
    offered = ",".join(versions)
    text = f"Supported protocol versions are {offered}"
    return Frame(
        "ERROR",
        (("version", offered), ("content-type", "text/plain"), ("message", text)),
        f"{text}\n".encode(),
    )


def login_refused(login: str | None) -> tuple[str, str]:
    """(message, detail) of the ERROR for a refused login, as Artemis words it."""
    return (
        f"Security Error occurred: User name [{login}] or password is invalid",
        "Authentication failed: check login and passcode",
    )


def security_error(error: object) -> str:
    """The ERROR message for an operation the client's roles do not allow."""
    return f"Security Error occurred: {error}"


# -- RECEIPT ---------------------------------------------------------------------------------


def receipt_for(receipt_id: str) -> bytes | Frame:
    """A RECEIPT for ``receipt_id``: its bytes when nothing needs escaping or checking
    (what the codec writes in any version), else the :class:`Frame` for the codec."""
    data = encode_plain("RECEIPT", "receipt-id:" + receipt_id, 1, b"")
    if data is not None:
        return data
    return Frame("RECEIPT", (("receipt-id", receipt_id),))


# -- MESSAGE ---------------------------------------------------------------------------------


def header_text(value: object) -> str:
    """A plain Python value as header text: true/false, "" for None, bytes as UTF-8, else str()."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def carriable(name: str, value: str, version: str | None) -> bool:
    """Whether STOMP ``version`` can write this header (the codec's rules)."""
    if not name or "\0" in name or "\0" in value:
        return False
    if version == "1.2":
        return True
    if version == "1.1":
        return not value.endswith("\r")  # 1.1 escapes LF and colon, not CR
    return not (":" in name or "\n" in name or "\n" in value or value.endswith("\r"))


def message_head(subscription_id: str) -> str:
    """What every MESSAGE of a subscription starts with (see :func:`encode_message`)."""
    return f"subscription:{subscription_id}\nmessage-id:"


def encode_message(
    head: str,
    message_id: str,
    ack: str | None,
    persistent: bool,
    priority: int,
    timestamp: int,
    expires: int,
    redelivered: bool,
    destination: str,
    correlation_id: str | None,
    reply_to: str | None,
    properties: Mapping[str, object],
    body: bytes,
    header_value: Callable[[object], str],
) -> bytes | None:
    """The wire bytes of :func:`message_frame` with the same arguments, or None.

    ``head`` is :func:`message_head` of the subscription.  The headers are
    ``subscription``, ``message-id``, ``ack`` (when given: the 1.2 ack
    header), ``persistent``, ``priority``, ``timestamp``, ``expires``,
    ``redelivered`` (only when true), ``destination``, ``correlation-id`` and
    ``reply-to`` (when set), the properties (``JMSType`` as ``type``; a
    ``content-length`` property is left out: the codec frames the body), and
    ``content-length`` last when the body is not empty -- in the order the
    codec writes :func:`message_frame`.  None when the codec's fast encoder
    will not take the text (something needs escaping or checking): then
    write ``codec.send(message_frame(...))``.
    """
    count = 8
    if ack is not None:
        text = (
            f"{head}{message_id}\nack:{ack}\npersistent:{'true' if persistent else 'false'}"
            f"\npriority:{priority}\ntimestamp:{timestamp}\nexpires:{expires}"
        )
        count = 9
    else:
        text = (
            f"{head}{message_id}\npersistent:{'true' if persistent else 'false'}"
            f"\npriority:{priority}\ntimestamp:{timestamp}\nexpires:{expires}"
        )
    parts = [text]
    if redelivered:
        parts.append("\nredelivered:true")
        count += 1
    parts.append("\ndestination:")
    parts.append(destination)
    if correlation_id is not None:
        parts.append("\ncorrelation-id:")
        parts.append(correlation_id)
        count += 1
    if reply_to is not None:
        parts.append("\nreply-to:")
        parts.append(reply_to)
        count += 1
    for key, value in properties.items():
        if key == "content-length":
            continue
        parts.append("\ntype:" if key == "JMSType" else "\n" + key + ":")
        parts.append(value if value.__class__ is str else header_value(value))
        count += 1
    if body:
        parts.append("\ncontent-length:")
        parts.append(str(len(body)))
    else:
        count -= 1
    return encode_plain("MESSAGE", "".join(parts), count, body)


def streamed_head(frame: bytes, length: int) -> bytes:
    """The head of a MESSAGE whose ``length``-byte body is written after it (then a NUL).

    ``frame`` is the MESSAGE encoded with an empty body (by :func:`encode_message` or the
    codec: no ``content-length`` line, ending in the blank line and the NUL); the head is
    that frame up to its blank line with ``content-length`` as its last header, as the
    codec writes a MESSAGE with a body.  For a body too large to hold in memory.
    """
    if not frame.endswith(b"\n\n\0"):
        raise ValueError("not a frame with an empty body")
    return b"%s\ncontent-length:%d\n\n" % (frame[:-3], length)


def message_frame(
    version: str | None,
    subscription_id: str,
    message_id: str,
    ack: str | None,
    persistent: bool,
    priority: int,
    timestamp: int,
    expires: int,
    redelivered: bool,
    destination: str,
    correlation_id: str | None,
    reply_to: str | None,
    properties: Mapping[str, object],
    body: bytes,
    header_value: Callable[[object], str],
) -> Frame:
    """A MESSAGE as a :class:`Frame` for :meth:`StompCodec.send` (see :func:`encode_message`).

    Headers this connection produced itself (ids it sent, numbers) are always
    writable; the rest came from a producer, maybe a newer-version or
    other-protocol one, and are left out (logged at DEBUG) where ``version``
    cannot write them, rather than failing the delivery.
    """
    headers = [("subscription", subscription_id), ("message-id", message_id)]
    if ack is not None:
        headers.append(("ack", ack))
    headers.append(("persistent", "true" if persistent else "false"))
    headers.append(("priority", str(priority)))
    headers.append(("timestamp", str(timestamp)))
    headers.append(("expires", str(expires)))
    if redelivered:
        headers.append(("redelivered", "true"))
    extra = [("destination", destination)]
    if correlation_id is not None:
        extra.append(("correlation-id", correlation_id))
    if reply_to is not None:
        extra.append(("reply-to", reply_to))
    for key, value in properties.items():
        if key == "JMSType":
            extra.append(("type", header_value(value)))
        elif key != "content-length":
            extra.append((key, header_value(value)))
    for name, value in extra:
        if carriable(name, value, version):
            headers.append((name, value))
        else:
            log.debug("STOMP %s MESSAGE: leaving out header %r", version, name)
    return Frame("MESSAGE", tuple(headers), body)
