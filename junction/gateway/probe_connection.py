"""One connection per check: what the AMQP and STOMP readiness probes share.

A :class:`ConnectionProbe` is a :class:`~junction.gateway.probe.TargetProbe`
that answers each ``check(target)`` by opening a new connection to the
target's connector, saying the protocol's hello, reading the answer and
closing politely.  What is said and read is the subclass's
:class:`ProbeProtocol`; everything else is here, the same for every protocol:

* the connection: TCP to the connector's ``host``/``port``; TLS with the
  connector's settings when ``sslEnabled=true`` (:mod:`junction.tls.client`);
  a PROXY protocol v2 ``LOCAL`` header first when the connector has
  ``proxyProtocolEnabled=true`` (the health-check form: the target's acceptor,
  which closes a connection without a header, accepts it);
* the bounds: ``timeout`` seconds from connect to close
  (:class:`twisted.internet.defer.TimeoutError` without an answer; with one,
  a close that does not finish is dropped and the answer stands), and, when
  the caller asks for it, ``silence`` seconds for the peer's first byte (a
  multi-protocol probe's way of telling a peer that waits for something else);
* the ending: the Deferred fires once the connection is gone, so two checks
  of one target never overlap; cancelling it or ``release(target)`` drops
  the connection at once; ``outstanding()`` lists what is still in flight;
* the failures, each a :class:`~junction.gateway.probe.ProbeError` whose
  ``reason`` is what the pool's status shows: a refused or failed connection
  (the Twisted ``ConnectError`` kept, with a ``reason``), a TLS failure, a
  connection lost before the answer, and :class:`~junction.gateway.probe.NotThisProtocol`
  when the peer closed without a word, said another protocol's bytes, or
  stayed silent past ``silence``;
* the **local target** (``target.local``: the broker core embedded in the
  gateway's process) is answered without the network by ``local_status()``,
  a callable given at construction returning a ``ProbeResult`` (or a
  Deferred of one); without it a local target's check fails.

Client identifiers the probes present (an AMQP container id, a STOMP
``client-id``) start with the routers' internal client prefix
(:data:`~junction.routing.keys.INTERNAL_CLIENT_ID_PREFIX`): a probe that
reaches a gateway instead of a core is routed local rather than around the
pool, and a Junction core knows the connection is a probe.

Nothing is held between checks: see :mod:`junction.gateway.amqp_probe` for why.
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable

from OpenSSL import SSL
from twisted.internet import defer, error
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.python.failure import Failure

from junction.edge.tls import openssl_reason as _describe_tls
from junction.gateway.probe import (
    PROBE_TIMEOUT,
    NotThisProtocol,
    ProbeError,
    ProbeResult,
    answer_locally,
)
from junction.protocols.proxy import encode_v2_local, proxy_enabled
from junction.routing.keys import INTERNAL_CLIENT_ID_PREFIX
from junction.tls.client import TLSHostMismatch, wrap_client_factory

__all__ = ["CLOSE_LINGER", "ConnectionProbe", "FIRST_BYTES", "ProbeCheck", "ProbeProtocol", "preview"]

log = logging.getLogger("junction.gateway.probe")

#: How many of the peer's first bytes a check keeps, to say what the peer
#: answered when it is not the probe's protocol.
FIRST_BYTES = 16
#: Seconds a check waits, once it has its answer, for the polite close to
#: finish (the peer's Close, a STOMP RECEIPT) before dropping the connection
#: and answering anyway: a peer slow to close must not hold the answer until
#: the pool's own timeout takes it for a failure.
CLOSE_LINGER = 1.0


class ConnectionProbe:
    """A probe that opens one connection per check (subclasses say which protocol).

    ``username``/``password``: the pool's credentials, or no username for an
    anonymous login.  ``reactor``: where connections and timers go (the global
    reactor when None, imported only then).  ``timeout``: seconds one check
    may take, connect to close.  ``client_id_prefix``: the start of the client
    identifiers the probe presents.  ``local_status``: answers for the local
    target (see the module docstring).
    """

    #: the protocol spoken, as ``probeProtocols=`` names it
    protocol = "?"
    #: what the probe says first, and what the peer's answer is called (messages)
    hello = "hello"
    answer = "answer"

    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        reactor=None,
        timeout: float = PROBE_TIMEOUT,
        client_id_prefix: str = INTERNAL_CLIENT_ID_PREFIX,
        local_status: Callable[[], ProbeResult] | None = None,
    ):
        if not timeout > 0:
            raise ValueError(f"timeout must be greater than 0 s, got {timeout!r}")
        if password is not None and username is None:
            raise ValueError("a password without a username: give both, or neither for ANONYMOUS")
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.username = username
        self._password = password
        self.reactor = reactor
        self.timeout = timeout
        self.client_id_prefix = client_id_prefix
        self.local_status = local_status
        #: target -> its checks in flight (normally at most one)
        self._checks: dict = {}
        self._serial = itertools.count(1)
        self._instance = uuid.uuid4().hex[:12]

    def __repr__(self) -> str:
        who = self.username if self.username is not None else "ANONYMOUS"
        return f"<{type(self).__name__} {who}>"

    # -- what a subclass provides ---------------------------------------------------------

    def build_protocol(self, check: ProbeCheck) -> ProbeProtocol:
        """The protocol instance that speaks for ``check`` on its connection."""
        raise NotImplementedError

    # -- TargetProbe ---------------------------------------------------------------------

    def check(self, target, *, timeout: float | None = None, silence: float | None = None) -> defer.Deferred:
        """A Deferred firing with the target's :class:`ProbeResult` (see the module docstring).

        ``timeout`` overrides the probe's own for this check; ``silence``, when
        given, fails the check with :class:`NotThisProtocol` if the peer has
        not said a byte that long after the connection was made.
        """
        if getattr(target, "local", False):
            return answer_locally(self.local_status)
        connector = getattr(target, "connector", None)
        if connector is None:
            return defer.fail(ProbeError(f"{target!r} has no connector to reach it by"))
        params = getattr(connector, "params", None) or {}
        try:
            port = int(connector.port)
        except (TypeError, ValueError):
            reason = f"no valid port ({connector.port!r})"
            return defer.fail(ProbeError(f"{target.name}: {reason}", reason=reason))
        check = ProbeCheck(self, target, connector.host or "localhost", port)
        check.timeout = timeout if timeout is not None and timeout > 0 else self.timeout
        check.silence = silence if silence is not None and silence > 0 else None
        # an acceptor with proxyProtocolEnabled=true closes a connection without a
        # PROXY header: the probe speaks for itself, so it sends a v2 LOCAL one
        check.proxy_local = proxy_enabled(params)
        check.tls = getattr(connector, "tls", None)
        self._checks.setdefault(target, set()).add(check)
        try:
            check.start()
        except Exception as e:  # connectTCP refusing its arguments: fail, leave nothing behind
            check.abandon(check.error(f"cannot connect: {e}"))
        return check.deferred

    def release(self, target) -> None:
        """Abort the target's checks in flight (each fails); nothing else is held between checks."""
        for check in list(self._checks.get(target, ())):
            check.abandon(check.error("check abandoned, the target was released"))
        self._checks.pop(target, None)

    # -- introspection --------------------------------------------------------------------

    def outstanding(self, target=None) -> list:
        """The checks in flight (for one target, or all): empty once every check has ended."""
        if target is not None:
            return list(self._checks.get(target, ()))
        return [c for checks in self._checks.values() for c in checks]

    # -- internals ------------------------------------------------------------------------

    def client_id(self) -> str:
        """A new client identifier: the internal prefix, this probe's instance, a serial."""
        return f"{self.client_id_prefix}{self._instance}.{next(self._serial)}"

    def _ended(self, check: ProbeCheck) -> None:
        checks = self._checks.get(check.target)
        if checks is not None:
            checks.discard(check)
            if not checks:
                del self._checks[check.target]


class ProbeCheck:
    """One check of one target: a connection from connect to close, bounded by the timeout."""

    def __init__(self, probe: ConnectionProbe, target, host: str, port: int):
        self.probe = probe
        self.target = target
        self.host = host
        self.port = port
        self.deferred = defer.Deferred(self._cancelled)
        self.connector = None
        self.protocol: ProbeProtocol | None = None
        self.timer = None
        self.silence_timer = None
        self.timeout = probe.timeout
        #: seconds the peer may stay silent after the connect (None: no limit of its own)
        self.silence: float | None = None
        self.result: ProbeResult | None = None
        self.problem: BaseException | None = None
        self.ended = False
        #: the peer's first bytes (up to FIRST_BYTES), to say what it answered
        self.first = b""
        self.heard = False
        #: write a PROXY v2 LOCAL header first (the connector has proxyProtocolEnabled=true)
        self.proxy_local = False
        #: the connector's TLS settings (:class:`junction.tls.client.ClientTLS`), or None
        self.tls = None

    def __repr__(self) -> str:
        state = (
            "ended" if self.ended else ("connected" if self.protocol is not None else "connecting")
        )
        return (
            f"<{self.probe.protocol} probe check of {self.target.name} at {self.host}:{self.port} {state}>"
        )

    @property
    def name(self) -> str:
        return f"{self.target.name} ({self.address})"

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def error(self, reason: str, kind: type[ProbeError] = ProbeError) -> ProbeError:
        """A failure naming the target (message) and saying why (``reason``)."""
        return kind(f"{self.name}: {reason}", reason=reason)

    def start(self) -> None:
        reactor = self.probe.reactor
        self.timer = reactor.callLater(self.timeout, self._timed_out)
        factory = _ProbeFactory(self)
        if self.tls is not None:
            # TLS to the target (its certificate and host name checked); a PROXY
            # LOCAL header goes on the wire before the handshake
            factory = wrap_client_factory(
                factory, self.tls, self.host, reactor=reactor, prefix=encode_v2_local() if self.proxy_local else b""
            )
            self.proxy_local = False
        self.connector = reactor.connectTCP(
            self.host,
            self.port,
            factory,
            timeout=max(1, int(self.timeout + 0.999)),
        )

    # -- what happens to the connection ---------------------------------------------------

    def connected(self, protocol: ProbeProtocol) -> None:
        self.protocol = protocol
        if self.silence is not None:
            self.silence_timer = self.probe.reactor.callLater(self.silence, self._silent)

    def heard_from(self, data: bytes) -> None:
        """The peer said something: remember how it started; it is not silent."""
        if not self.heard:
            self.heard = True
            self._stop_silence_timer()
        if len(self.first) < FIRST_BYTES:
            self.first += data[: FIRST_BYTES - len(self.first)]

    def fail(self, problem: BaseException) -> None:
        """Remember why the check fails (the first reason wins)."""
        if self.problem is None:
            self.problem = problem

    def answered(self, result: ProbeResult) -> None:
        """The peer's answer (the protocol closes the connection politely next, within CLOSE_LINGER)."""
        self.result = result
        timer = self.timer
        if timer is not None and timer.active():
            if timer.getTime() - self.probe.reactor.seconds() > CLOSE_LINGER:
                timer.reset(CLOSE_LINGER)

    def connection_failed(self, reason: Failure) -> None:
        if self.ended:
            return
        self.fail(self._connect_error(reason.value))
        self._end()

    def connection_lost(self, reason: Failure) -> None:
        if self.ended:
            return
        if self.result is None and self.problem is None:
            protocol = self.probe.protocol
            if not self.heard:
                self.fail(
                    self.error(
                        f"closed the connection without answering the {protocol} {self.probe.hello}",
                        NotThisProtocol,
                    )
                )
            else:
                what = "closed by the peer" if reason.check(error.ConnectionDone) else str(reason.value)
                self.fail(self.error(f"connection lost before the {self.probe.answer}: {what}"))
        self._end()

    def _connect_error(self, exc: BaseException) -> BaseException:
        """Connection errors keep their type (refused, timed out...), the target named, a short reason."""
        if isinstance(exc, error.ConnectError):
            described = type(exc)(osError=exc.osError, string=f"{self.name}: cannot connect")
            if isinstance(exc, error.ConnectionRefusedError):
                described.reason = f"connection refused by {self.address}"
            elif isinstance(exc, error.DNSLookupError):
                described.reason = f"cannot resolve {self.host}"
            else:
                why = exc.osError or (exc.__doc__ or type(exc).__name__).strip().splitlines()[0]
                described.reason = f"cannot connect to {self.address}: {why}"
            return described
        return self.error(f"cannot connect to {self.address}: {exc}")

    # -- ending ---------------------------------------------------------------------------

    def _silent(self) -> None:
        self.silence_timer = None
        if self.ended or self.heard:
            return
        self.fail(
            self.error(
                f"no answer to the {self.probe.protocol} {self.probe.hello} within {self.silence:g} s",
                NotThisProtocol,
            )
        )
        self._drop()
        self._end()

    def _timed_out(self) -> None:
        self.timer = None
        if self.ended:
            return
        if self.result is None:
            what = self.probe.answer if self.protocol is not None else "connection"
            if self.protocol is None:
                reason = f"no connection to {self.address} within {self.timeout:g} s"
            else:
                reason = f"no {what} within {self.timeout:g} s ({self.probe.protocol})"
            problem = defer.TimeoutError(f"{self.name}: no {what} within {self.timeout:g} s")
            problem.reason = reason
            self.fail(problem)
        else:  # answered, but the polite close did not finish: drop it, keep the answer
            log.debug("%s: close not finished within %g s, dropping", self.name, self.timeout)
        self._drop()
        self._end()

    def abandon(self, problem: BaseException) -> None:
        """Give up now (release): drop the connection, fail the Deferred."""
        if self.ended:
            return
        self.problem = problem
        self.result = None
        self._drop()
        self._end()

    def _cancelled(self, _d) -> None:
        # Deferred.cancel() fails the Deferred with CancelledError after this.
        if self.ended:
            return
        self.ended = True
        self._stop_timers()
        self._drop()
        self.probe._ended(self)

    def _drop(self) -> None:
        protocol = self.protocol
        if protocol is not None:
            protocol.abort()
        elif self.connector is not None:
            try:
                self.connector.stopConnecting()
            except error.NotConnectingError:
                pass

    def _stop_silence_timer(self) -> None:
        if self.silence_timer is not None and self.silence_timer.active():
            self.silence_timer.cancel()
        self.silence_timer = None

    def _stop_timers(self) -> None:
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        self._stop_silence_timer()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self._stop_timers()
        self.probe._ended(self)
        if self.deferred.called:
            return
        if self.problem is not None:
            log.debug("%s: check failed: %s", self.name, self.problem)
            self.deferred.errback(Failure(self.problem))
        elif self.result is not None:
            self.deferred.callback(self.result)
        else:  # pragma: no cover - every path to here sets one of them
            self.deferred.errback(Failure(self.error("check ended without an answer")))


class _ProbeFactory(ClientFactory):
    def __init__(self, check: ProbeCheck):
        self.check = check

    def buildProtocol(self, addr):
        protocol = self.check.probe.build_protocol(self.check)
        protocol.factory = self
        return protocol

    def clientConnectionFailed(self, connector, reason):
        self.check.connection_failed(reason)

    def clientConnectionLost(self, connector, reason):
        pass  # the protocol reports it


class ProbeProtocol(Protocol):
    """The client side of one probe connection; subclasses speak the protocol.

    Subclasses implement :meth:`opened` (say the hello), :meth:`received`
    (bytes from the peer, after :meth:`ProbeCheck.heard_from` has seen them)
    and may extend :meth:`finish` (the connection is gone: last words).  They
    report through ``self.check`` (``answered``, ``fail``) and close with
    :meth:`close` (politely: what was written goes out first) or
    :meth:`abort`.
    """

    def __init__(self, check: ProbeCheck):
        self.check = check
        self.closing = False

    def connectionMade(self):
        check = self.check
        if check.ended:  # cancelled while connecting
            self.abort()
            return
        check.connected(self)
        if check.proxy_local:
            self.transport.write(encode_v2_local())
        self.opened()

    def dataReceived(self, data: bytes):
        if self.closing or not data:
            return
        self.check.heard_from(data)
        self.received(data)

    def opened(self) -> None:
        raise NotImplementedError

    def received(self, data: bytes) -> None:
        raise NotImplementedError

    def finish(self, reason: Failure) -> None:
        """The connection is gone (before the check hears of it)."""

    def not_this_protocol(self, what: str) -> None:
        """The peer speaks something else: fail with :class:`NotThisProtocol` and drop the connection."""
        self.check.fail(self.check.error(what, NotThisProtocol))
        self.abort()

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.loseConnection()

    def abort(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.abortConnection()

    def connectionLost(self, reason=None):
        self.closing = True
        if reason is not None and reason.check(SSL.Error, TLSHostMismatch):
            # the TLS layer's reason (an untrusted certificate, a host name mismatch)
            # comes first: the protocol would only see a connection cut short
            self.check.fail(self.check.error(f"TLS: {_describe_tls(reason.value)}"))
        reason = reason if reason is not None else Failure(error.ConnectionDone())
        self.finish(reason)
        self.check.connection_lost(reason)


def preview(data: bytes) -> str:
    """The peer's first bytes as a short, printable text for a message."""
    text = data.decode("latin-1")
    shown = "".join(ch if 32 <= ord(ch) < 127 else f"\\x{ord(ch):02x}" for ch in text)
    return repr(shown)
