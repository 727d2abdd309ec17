"""The AMQP benches' proton clients: a producer and a consumer on the Container event API.

``bench/amqp_throughput.py`` (and through it ``bench/gateway.py``) runs one
trial as one :class:`ProducerHandler` in the bench's process and one
:class:`ConsumerHandler` in another (:func:`consumer_main`, started by
``common.ConsumerSide``), each on its own connection to a :class:`Target`:

* both share :class:`ClientHandler`: a 50 ms timer (:data:`TICK`) that checks
  the run's deadline and the other side, every error of the connection,
  session or link captured as the trial's error, and a close that cannot
  hang the run;
* the producer sends unsettled messages carrying ``bench-seq`` and
  ``bench-ts`` (monotonic ns) while link credit, the window of unsettled
  sends and (paced) the clock allow, and counts each disposition once;
* the consumer grants ``prefetch`` credit, accepts every message and records
  the latency of each distinct one.

Nothing here measures or prints; the trial's figures are
``amqp_throughput.run_trial``'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from proton import Delivery, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption

try:
    from . import common  # imported as bench.amqp_client from the repository root
except ImportError:  # run from a script in bench/: bench/ is on sys.path
    import common

TICK = 0.05  # seconds between deadline / peer checks inside a Container
GRACE = 10.0  # seconds to wait for the last dispositions once all is received


@dataclass
class Target:
    """Where to connect and how a proton client should address the broker."""

    name: str
    host: str
    port: int
    pid: int | None
    #: address template; ``{name}`` becomes the trial's queue name
    address: str
    user: str | None = None
    password: str | None = None
    #: attach both links with terminus durability unsettled-state
    durable_terminus: bool = False

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def address_for(self, name: str) -> str:
        return self.address.replace("{name}", name)


class DurableTerminus(LinkOption):
    """Terminus durability unsettled-state on the link's own end (source or target).

    RabbitMQ 3.10 declares a ``/queue/NAME`` queue durable only when the
    attaching terminus is durable.
    """

    def apply(self, link) -> None:
        terminus = link.source if link.is_receiver else link.target
        terminus.durability = Terminus.DELIVERIES
        terminus.expiry_policy = Terminus.EXPIRE_NEVER


class Ticker:
    """A handler for ``Container.schedule`` that calls ``fn()`` on each timer task."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def on_timer_task(self, event) -> None:
        self.fn()


def connect(container: Container, target: Target):
    """A connection with reconnect off (a failure must surface, not be retried)."""
    kwargs: dict = {"reconnect": False}
    if target.user is not None:
        kwargs.update(user=target.user, password=target.password or "", allowed_mechs="PLAIN")
    else:
        kwargs.update(allowed_mechs="ANONYMOUS")
    return container.connect(target.url, **kwargs)


def _condition(endpoint) -> str:
    cond = getattr(endpoint, "remote_condition", None) or getattr(endpoint, "condition", None)
    if cond is None:
        return "no condition"
    return f"{cond.name}: {cond.description}"


class ClientHandler(MessagingHandler):
    """What producer and consumer share: a timer, error capture, bounded stop."""

    role = "client"

    def __init__(self, target: Target, deadline: common.Deadline, **kw) -> None:
        super().__init__(**kw)
        self.target = target
        self.deadline = deadline
        self.container: Container | None = None
        self.conn = None
        self.error: str | None = None
        self.closing = False
        self.closing_since: float | None = None
        self.task = None

    # -- lifecycle
    def on_start(self, event) -> None:
        self.container = event.container
        self.conn = connect(event.container, self.target)
        self.task = event.container.schedule(TICK, Ticker(self._tick))
        self.open_links(event.container)

    def open_links(self, container: Container) -> None:
        raise NotImplementedError

    def _tick(self) -> None:
        self.task = None
        if self.closing:
            # a close handshake the broker never answers must not hang the run
            if time.monotonic() - (self.closing_since or 0) > 5.0:
                self.container.stop()
                return
        elif self.deadline.remaining() <= 0:
            self.fail("run deadline reached")
            return
        else:
            self.tick()
        if self.container is not None:
            self.task = self.container.schedule(TICK, Ticker(self._tick))

    def tick(self) -> None:
        """Periodic check while running (deadline is already handled)."""

    def close(self) -> None:
        """Close the connection gracefully; the Container then ends by itself."""
        if self.closing:
            return
        self.closing = True
        self.closing_since = time.monotonic()
        if self.conn is not None:
            self.conn.close()

    def fail(self, text: str) -> None:
        if self.error is None:
            self.error = f"{self.role}: {text}"
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self.closing = True
        if self.container is not None:
            self.container.stop()

    # -- errors
    def on_transport_error(self, event) -> None:
        self.fail(f"transport error: {_condition(event.transport)}")

    def on_connection_error(self, event) -> None:
        self.fail(f"connection closed by the broker: {_condition(event.connection)}")

    def on_session_error(self, event) -> None:
        self.fail(f"session ended by the broker: {_condition(event.session)}")

    def on_link_error(self, event) -> None:
        self.fail(f"link detached by the broker: {_condition(event.link)}")

    def on_connection_closing(self, event) -> None:
        if not self.closing:
            self.fail("connection closed by the broker (no error condition)")

    def on_session_closing(self, event) -> None:
        if not self.closing:
            self.fail("session ended by the broker (no error condition)")

    def on_link_closing(self, event) -> None:
        if not self.closing:
            self.fail("link detached by the broker (no error condition)")

    def on_connection_closed(self, event) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

    def on_transport_closed(self, event) -> None:
        if self.closing and self.task is not None:
            self.task.cancel()
            self.task = None

    def on_disconnected(self, event) -> None:
        if not self.closing:
            cond = event.transport.condition if event.transport is not None else None
            self.fail("connection lost" + (f" ({cond.name}: {cond.description})" if cond else ""))
        elif self.task is not None:
            self.task.cancel()
            self.task = None


class ConsumerHandler(ClientHandler):
    """Receives, accepts (proton auto-accept), records latency per distinct message."""

    role = "consumer"

    def __init__(self, target, address, n, prefetch, deadline, chan, clock) -> None:
        super().__init__(target, deadline, prefetch=prefetch, auto_accept=True, auto_settle=True)
        self.address = address
        self.chan = chan
        self.clock = clock
        self.receiver = None
        self.ready = False
        self.received = common.Received(n)
        self.cpu0: float | None = None

    def open_links(self, container) -> None:
        opts = DurableTerminus() if self.target.durable_terminus else None
        self.receiver = container.create_receiver(self.conn, self.address, options=opts)

    def on_link_opened(self, event) -> None:
        if not event.link.is_receiver or self.ready:  # (wrappers are not identical)
            return
        # a broker refusing the address attaches with a null source, then detaches
        if event.link.remote_source.type == Terminus.UNSPECIFIED:
            return
        self.ready = True
        self.cpu0 = self.clock()
        self.chan.send(("ready",))

    def tick(self) -> None:
        if self.chan.poll() and self.chan.recv()[0] == "abort":
            self.fail("aborted by the producer side")

    def on_message(self, event) -> None:
        now = time.monotonic_ns()
        try:
            props = event.message.properties
            seq = int(props["bench-seq"])
            ts = int(props["bench-ts"])
        except (KeyError, TypeError, ValueError):
            self.fail(f"message without bench properties: {event.message.properties!r}")
            return
        if self.received.add(seq, ts, now):
            # the accept of this message goes out before the close frame
            self.close()


def consumer_main(
    target: Target,
    address: str,
    n: int,
    prefetch: int,
    seconds: float,
    thread: bool,
    chan,
) -> None:
    """The consumer side of a trial; runs in a child process (or a thread).

    Talks to the producer side over ``chan`` (a ``multiprocessing`` pipe end):
    sends ``("ready",)`` once its link is attached, then either
    ``("done", t_last_ns, latencies_bytes, duplicates, cpu_s)`` or
    ``("error", text)``; gives up on ``("abort",)`` or after ``seconds``.
    Its CPU time is the process's, or in a thread (``thread``) the thread's.
    """
    deadline = common.Deadline(seconds)
    clock = time.thread_time if thread else time.process_time
    h = ConsumerHandler(target, address, n, prefetch, deadline, chan, clock)
    try:
        Container(h).run()
        if h.error is None and h.received.t_last is None:
            h.error = "consumer: connection ended early"
        if h.error is not None:
            chan.send(("error", f"{h.error}; {h.received.progress()}"))
        else:
            cpu = clock() - (h.cpu0 or 0.0)
            chan.send(h.received.done(cpu))
    except Exception as e:  # report anything, never leave the parent waiting
        try:
            chan.send(("error", f"consumer crashed: {e!r}; {h.received.progress()}"))
        except OSError:
            pass


class ProducerHandler(ClientHandler):
    """Sends N messages unsettled, as fast as credit (and the window) allow.

    Every disposition is counted once per delivery: ACCEPTED, REJECTED,
    RELEASED/MODIFIED, or settled without an outcome; the delivery is then
    settled locally, which frees its window slot.
    """

    role = "producer"

    def __init__(self, target, address, n, durable, windowed, args, consumer, deadline) -> None:
        # prefetch=0: no receiver here, so no flow controller either
        super().__init__(target, deadline, prefetch=0, auto_accept=False, auto_settle=False)
        self.address = address
        self.n = n
        self.durable = durable
        self.window = args.window if windowed else 0
        self.interval_ns = int(1e9 / args.rate) if args.rate > 0 else 0
        self.body = b"x" * args.size
        self.consumer = consumer
        self.sender = None
        self.sent = 0
        self.outstanding: set = set()
        self.outcomes = {"accepted": 0, "rejected": 0, "released": 0, "settled": 0}
        self.t0: int | None = None
        self.t_sent: int | None = None
        self.cpu0: int | None = None
        self.host0: int | None = None
        self.client0: float | None = None
        self.consumer_done_at: float | None = None
        self.pace_task = None
        self.note: str | None = None

    def open_links(self, container) -> None:
        opts = DurableTerminus() if self.target.durable_terminus else None
        self.sender = container.create_sender(self.conn, self.address, options=opts)

    def on_sendable(self, event) -> None:
        self.pump()

    def _paced(self) -> None:
        self.pace_task = None
        self.pump()

    def pump(self) -> None:
        """Send while there is credit, window room and (paced) a message due."""
        if self.closing or self.sender is None:
            return
        s = self.sender
        n = self.n
        window = self.window
        body = self.body
        durable = self.durable
        outstanding = self.outstanding
        while self.sent < n and s.credit > 0:
            if window and len(outstanding) >= window:
                break
            if self.t0 is None:
                self.host0 = common.host_busy_ticks()
                self.cpu0 = common.proc_cpu_ticks(self.target.pid)
                self.client0 = time.process_time()
                self.t0 = time.monotonic_ns()
            if self.interval_ns:
                # paced run: latency without queueing behind a flooding producer
                ahead = self.t0 + self.sent * self.interval_ns - time.monotonic_ns()
                if ahead > 0:
                    if self.pace_task is None:
                        self.pace_task = self.container.schedule(ahead / 1e9, Ticker(self._paced))
                    break
            i = self.sent
            msg = Message(
                body=body,
                inferred=True,  # bytes as one data section, as byte-oriented clients send
                durable=durable,
                properties={"bench-seq": i, "bench-ts": time.monotonic_ns()},
            )
            outstanding.add(s.send(msg).tag)
            self.sent = i + 1
        if self.sent >= n and self.t_sent is None:
            self.t_sent = time.monotonic_ns()
        self.maybe_finish()

    def maybe_finish(self) -> None:
        if self.sent >= self.n and not self.outstanding:
            self.close()

    def _outcome(self, dlv, kind: str) -> None:
        tag = dlv.tag
        if tag not in self.outstanding:
            return
        self.outstanding.discard(tag)
        self.outcomes[kind] += 1
        dlv.settle()
        if self.sent < self.n:
            self.pump()
        else:
            self.maybe_finish()

    def on_accepted(self, event) -> None:
        self._outcome(event.delivery, "accepted")

    def on_rejected(self, event) -> None:
        self._outcome(event.delivery, "rejected")

    def on_released(self, event) -> None:
        self._outcome(event.delivery, "released")

    def on_settled(self, event) -> None:
        # settled by the broker without (or before) a terminal outcome
        if event.delivery.remote_state not in (
            Delivery.ACCEPTED,
            Delivery.REJECTED,
            Delivery.RELEASED,
            Delivery.MODIFIED,
        ):
            self._outcome(event.delivery, "settled")

    def tick(self) -> None:
        msg = self.consumer.peek()
        if msg is not None and msg[0] == "error":
            self.fail(f"the consumer failed: {msg[1]}")
            return
        if msg is None and self.consumer.dead():
            self.fail("the consumer exited")
            return
        if msg is not None and msg[0] == "done" and self.sent >= self.n:
            # all received; the last dispositions get a bounded grace period
            if self.consumer_done_at is None:
                self.consumer_done_at = time.monotonic()
            elif time.monotonic() - self.consumer_done_at > GRACE:
                self.note = f"{len(self.outstanding)} dispositions still missing after {GRACE:g} s"
                self.close()

