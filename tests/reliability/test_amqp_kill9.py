"""Acceptance: AMQP durable sends survive ``kill -9`` once accepted.

    "Unsettled durable sends are accepted only after sync: kill -9 at a
    random moment loses no accepted message."

The AMQP counterpart of ``test_kill9.py``.  A raw proton engine over one
non-blocking socket (exact control over the window, no client threads) sends
durable, unsettled messages, each with a unique sequence number in an
application property, keeping at most :data:`WINDOW` without an outcome, and
records every sequence whose ACCEPTED disposition arrived.  The broker is
SIGKILLed at a seeded random moment of the stream, restarted on the same data
directory, and the queue drained with an AMQP receiver.

What is asserted, and why it is the broker's to give: the AMQP server answers
a durable unsettled transfer with ACCEPTED only once the journal has synced
its record (``Receiver._synced``, junction/brokercore/amqp_links.py), so a
crash cannot undo an accepted message.  Hence: every accepted sequence is
present after the restart, nothing is delivered twice, nothing that was never
sent appears.  A sequence sent but not accepted may or may not be there.

The transactional variant: declare, 50 durable sends in the transaction,
discharge (commit), pipelined, with one transaction left open (never
discharged); kill -9 once a random number of commit outcomes arrived.  A
transaction whose commit outcome arrived is fully present, the open one is
entirely absent, one whose commit was in flight is all or nothing.

Every test prints its seed; ``JUNCTION_KILL9_SEED=<seed>`` replays it (the
kill point and the transaction layout; network timing still varies).  No
sleeps: every wait is a ``select()`` on the socket or
:func:`~tests.harness.wait_for`, each with a deadline.
"""

from __future__ import annotations

import errno
import os
import random
import select
import socket
import time
from dataclasses import dataclass, field

import pytest
from proton import (
    Collector,
    Connection,
    Delivery,
    Described,
    Endpoint,
    Event,
    Message,
    Terminus,
    Transport,
    symbol,
    ulong,
)

from tests.harness import BrokerProcess

pytestmark = pytest.mark.timeout(120)

ADDRESS = "kill9.amqp"
N_MESSAGES = 5_000
#: durable sends without an outcome, at most
WINDOW = 500
TX_SIZE = 50
N_TX = 40
#: discharges without an outcome, at most
TX_WINDOW = 4
PHASE_TIMEOUT = 30.0
DRAIN_TIMEOUT = 30.0
_PAD = "." * 96

_SEED_ENV = "JUNCTION_KILL9_SEED"

DECLARE = ulong(0x31)
DISCHARGE = ulong(0x32)
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34
ACCEPTED = Delivery.ACCEPTED


def _seed(test: str) -> int:
    env = os.environ.get(_SEED_ENV)
    seed = int(env) if env else random.SystemRandom().randrange(2**32)
    print(f"\n[{test}] seed={seed} (replay: {_SEED_ENV}={seed})")
    return seed


# --------------------------------------------------------------------------- raw AMQP client


class RawAmqp:
    """A proton client engine on one non-blocking socket, pumped by hand.

    :meth:`pump` writes what the engine has, waits up to ``timeout`` for
    input, reads it all and hands every engine event to ``on_event``.
    ``closed`` turns true at EOF or a reset (the broker was killed); events
    for bytes that arrived before that are still handed over.
    """

    def __init__(self, broker: BrokerProcess, name: str, on_event=None, timeout: float = 10.0):
        self.name = name
        self.on_event = on_event or (lambda event: None)
        self.sock = socket.create_connection(broker.amqp_address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.transport = Transport()
        sasl = self.transport.sasl()
        sasl.allowed_mechs("ANONYMOUS")
        self.conn = Connection()
        self.conn.container = name
        self.conn.hostname = "localhost"
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport.bind(self.conn)
        self.closed = False
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        self.wait(lambda: self.conn.state & Endpoint.REMOTE_ACTIVE, timeout, "the broker's open")

    def fileno(self) -> int:
        return self.sock.fileno()

    def flush(self) -> None:
        while not self.closed:
            pending = self.transport.pending()
            if pending <= 0:
                return
            try:
                sent = self.sock.send(self.transport.peek(pending))
            except BlockingIOError:
                return
            except OSError:
                self._gone()
                return
            self.transport.pop(sent)

    def read(self) -> None:
        while not self.closed:
            try:
                data = self.sock.recv(1 << 18)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno not in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED):
                    raise
                self._gone()
                break
            if not data:
                self._gone()
                break
            while data:
                capacity = self.transport.capacity()
                if capacity <= 0:
                    break
                self.transport.push(data[:capacity])
                data = data[capacity:]
                self.dispatch()
        self.dispatch()

    def _gone(self) -> None:
        self.closed = True
        self.transport.close_tail()

    def dispatch(self) -> None:
        while True:
            event = self.collector.peek()
            if event is None:
                return
            self.on_event(event)
            self.collector.pop()

    def pump(self, timeout: float) -> None:
        self.flush()
        if self.closed:
            return
        writers = [self] if self.transport.pending() > 0 else []
        select.select([self], writers, [], timeout)
        self.read()
        self.flush()

    def wait(self, predicate, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if self.closed:
                raise ConnectionError(f"{self.name}: connection closed while waiting for {what}")
            condition = self.conn.remote_condition or self.transport.condition
            if condition is not None:
                raise AssertionError(f"{self.name}: {condition} while waiting for {what}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name}: {what} not within {timeout} s")
            self.pump(min(remaining, 0.2))

    def drain_after_kill(self, timeout: float = 10.0) -> None:
        """Read what the broker wrote before it died, up to the EOF."""
        deadline = time.monotonic() + timeout
        while not self.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.name}: still open after the broker was killed")
            select.select([self], [], [], min(remaining, 0.2))
            self.read()
        self.sock.close()

    def close(self, timeout: float = 10.0) -> None:
        """A clean close: the broker's close arrives (so everything before it was processed)."""
        self.conn.close()
        self.wait(lambda: self.conn.state & Endpoint.REMOTE_CLOSED, timeout, "the broker's close")
        self.sock.close()

    def sender(self, name: str, address: str | None):
        snd = self.session.sender(name)
        snd.target.address = address
        snd.open()
        self.wait(lambda: snd.state & Endpoint.REMOTE_ACTIVE, 10, f"attach of {name}")
        return snd

    def coordinator(self):
        snd = self.session.sender("txn-coordinator")
        snd.target.type = Terminus.COORDINATOR
        snd.target.capabilities.put_object(symbol("amqp:local-transactions"))
        snd.open()
        self.wait(lambda: snd.state & Endpoint.REMOTE_ACTIVE and snd.credit > 0, 10, "the coordinator's attach")
        return snd


def durable_message(seq: int, **properties) -> bytes:
    message = Message(body=f"seq={seq:07d} {_PAD}", durable=True, properties={"seq": seq, **properties})
    return message.encode()


def send(snd, tag: str, payload: bytes):
    dlv = snd.delivery(tag.encode())
    snd.send(payload)
    snd.advance()
    return dlv


# --------------------------------------------------------------------------- broker helpers


def queue_status(broker: BrokerProcess, name: str = ADDRESS) -> dict | None:
    for q in broker.status()["queues"]:
        if q["name"] == name:
            return q
    return None


@dataclass
class Drained:
    seqs: list = field(default_factory=list)
    properties: list = field(default_factory=list)
    seconds: float = 0.0


def drain_queue(broker: BrokerProcess, label: str) -> Drained:
    """Receive and accept everything on the queue; done when the broker shows it empty."""
    out = Drained()
    t0 = time.monotonic()
    client: RawAmqp

    def on_event(event) -> None:
        if event.type != Event.DELIVERY:
            return
        dlv = event.delivery
        link = dlv.link
        if not link.is_receiver or dlv.partial or not dlv.readable:
            return
        data = link.recv(dlv.pending)
        link.advance()
        message = Message()
        message.decode(data)
        out.seqs.append(message.properties["seq"])
        out.properties.append(message.properties)
        dlv.update(ACCEPTED)
        dlv.settle()
        if link.credit < 500:
            link.flow(1000 - link.credit)

    client = RawAmqp(broker, f"drain-{label}", on_event)
    rcv = client.session.receiver("drain")
    rcv.source.address = ADDRESS
    rcv.open()
    rcv.flow(1000)
    client.wait(lambda: rcv.state & Endpoint.REMOTE_ACTIVE, 10, "the drain receiver's attach")
    deadline = t0 + DRAIN_TIMEOUT
    next_poll = 0.0
    while True:
        client.pump(0.05)
        if client.closed:
            pytest.fail(f"drain-{label}: the broker closed the connection")
        now = time.monotonic()
        if client.transport.pending() == 0 and now >= next_poll:
            next_poll = now + 0.2
            q = queue_status(broker)
            if q is None or q["message_count"] == 0:
                break
        if now > deadline:
            raise TimeoutError(f"drain-{label}: queue not empty after {DRAIN_TIMEOUT} s: {queue_status(broker)}")
    client.close()
    out.seconds = time.monotonic() - t0
    return out


def duplicates(seqs) -> list:
    seen: set = set()
    return sorted({s for s in seqs if s in seen or seen.add(s)})


def sample(values, n: int = 10) -> list:
    return sorted(values)[:n]


# --------------------------------------------------------------------------- the acceptance test


@dataclass
class Stream:
    sent: set = field(default_factory=set)
    accepted: set = field(default_factory=set)
    refused: dict = field(default_factory=dict)  # seq -> outcome other than accepted
    late: int = 0  # outcomes read after the kill (written before it)


#: ``journal-buffer-timeout`` of the "slow disk" run: at most one sync per
#: 20 ms, which widens the window in which an outcome sent before its sync
#: would be caught (see test_kill9.py).
SLOW_DISK_BUFFER_TIMEOUT_NS = 20_000_000


@pytest.mark.parametrize("journal", ["default", "slow-disk"])
def test_accepted_durable_sends_survive_kill9(broker_factory, journal: str) -> None:
    """5,000 durable unsettled sends, at most 500 without an outcome; kill -9 mid-stream.

    Once a random number of ACCEPTED outcomes (500 to 4,500) arrived, the
    window is filled up again and written, and the broker killed at once or
    at the first outcome that follows: it dies with up to 500 transfers
    received, partly stored, partly answered.
    """
    rng = random.Random(_seed(f"amqp-kill9-{journal}"))
    kill_at = rng.randint(WINDOW, N_MESSAGES - WINDOW)  # accepted outcomes before the kill
    # right after writing a full window, or at the first outcome for it (the
    # broker is then part way through the window: read, stored, answered)
    kill_on = rng.choice(["write", "outcome"])
    xml = ""
    if journal == "slow-disk":
        xml = f"<journal-buffer-timeout>{SLOW_DISK_BUFFER_TIMEOUT_NS}</journal-buffer-timeout>"
    broker = broker_factory("amqpkill9", extra_core_xml=xml).start()
    stream = Stream()
    killed = False

    def on_event(event) -> None:
        if event.type != Event.DELIVERY:
            return
        dlv = event.delivery
        if not dlv.link.is_sender or not dlv.remote_state:
            return
        seq = int(dlv.tag)
        if dlv.remote_state == ACCEPTED:
            stream.accepted.add(seq)
            stream.late += killed
        else:
            stream.refused[seq] = (dlv.remote_state, dlv.remote.condition)
        dlv.settle()

    producer = RawAmqp(broker, "producer", on_event)
    snd = producer.sender("kill9-producer", ADDRESS)
    next_seq = 0

    def fill_window() -> None:
        nonlocal next_seq
        outstanding = len(stream.sent) - len(stream.accepted) - len(stream.refused)
        while next_seq < N_MESSAGES and outstanding < WINDOW and snd.credit > 0:
            send(snd, str(next_seq), durable_message(next_seq))
            stream.sent.add(next_seq)
            next_seq += 1
            outstanding += 1

    t0 = time.monotonic()
    deadline = t0 + PHASE_TIMEOUT
    while len(stream.accepted) < kill_at:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(stream.accepted)} of {kill_at} accepted after {PHASE_TIMEOUT} s")
        fill_window()
        producer.pump(0.05)
        assert not stream.refused, f"sends refused: {list(stream.refused.items())[:3]}"
        if producer.closed:
            pytest.fail("the broker closed the producer's connection before the kill")
    fill_window()
    producer.flush()
    if kill_on == "outcome":
        before = len(stream.accepted)
        producer.wait(lambda: len(stream.accepted) > before, 10, "an outcome for the refilled window")
    seconds = time.monotonic() - t0
    in_flight = len(stream.sent) - len(stream.accepted)

    t_kill = time.monotonic()
    broker.kill9()
    killed = True
    producer.drain_after_kill()
    assert not stream.refused, f"sends refused: {list(stream.refused.items())[:3]}"
    broker.start()
    recover_s = time.monotonic() - t_kill
    q = queue_status(broker)
    assert q is not None, "the durable queue did not survive the crash"
    on_queue = q["message_count"]
    drained = drain_queue(broker, "kill9")

    after = set(drained.seqs)
    lost = stream.accepted - after
    dups = duplicates(drained.seqs)
    unknown = after - stream.sent
    print(
        f"[amqp-kill9-{journal}] kill at the {kill_on} after {kill_at} accepted: sent {len(stream.sent)}, accepted "
        f"{len(stream.accepted)} ({stream.late} read after the kill), {in_flight} without an outcome "
        f"at the kill; {seconds:.2f} s ({len(stream.accepted) / seconds:.0f} accepted msg/s); "
        f"restart {recover_s:.2f} s; {on_queue} on the queue, drained {len(drained.seqs)} in "
        f"{drained.seconds:.2f} s; unaccepted that made it: {len(after - stream.accepted)}"
    )
    assert not lost, f"{len(lost)} accepted messages lost: {sample(lost)}"
    assert not dups, f"{len(dups)} messages delivered twice: {sample(dups)}"
    assert not unknown, f"messages that were never sent: {sample(unknown)}"
    assert on_queue == len(drained.seqs)


# --------------------------------------------------------------------------- transactions


def test_transactions_are_all_or_nothing_across_kill9(broker_factory) -> None:
    rng = random.Random(_seed("amqp-kill9-tx"))
    kill_at = rng.randint(5, N_TX - 5)  # commit outcomes before the kill
    open_at = max(1, kill_at - rng.randint(1, 3))  # declare the never-discharged one here
    open_size = rng.randint(1, TX_SIZE - 1)
    kill_on = rng.choice(["write", "send-outcome", "commit-outcome"])
    open_tx = N_TX
    broker = broker_factory("amqpkill9tx").start()

    declared: dict = {}  # delivery tag -> txid
    committed: set = set()  # commit outcome (accepted) arrived
    discharged: set = set()
    tx_sent: dict = {}  # tx number -> transactional sends the broker answered
    refused: list = []

    def on_event(event) -> None:
        if event.type != Event.DELIVERY:
            return
        dlv = event.delivery
        if not dlv.link.is_sender or not dlv.remote_state:
            return
        tag = dlv.tag.decode() if isinstance(dlv.tag, bytes) else str(dlv.tag)
        kind, _, number = tag.partition("-")
        state = dlv.remote_state
        if kind == "declare" and state == DECLARED:
            declared[int(number)] = bytes(dlv.remote.data[0])
        elif kind == "commit" and state == ACCEPTED:
            committed.add(int(number))
        elif kind == "m" and state == TRANSACTIONAL_STATE:
            k = int(number) // TX_SIZE
            tx_sent[k] = tx_sent.get(k, 0) + 1
        else:
            refused.append((tag, state, dlv.remote.condition))
        dlv.settle()

    client = RawAmqp(broker, "tx-producer", on_event)
    coordinator = client.coordinator()
    snd = client.sender("tx-sender", ADDRESS)

    def declare(k: int) -> bytes:
        send(coordinator, f"declare-{k}", Message(body=Described(DECLARE, [])).encode())
        return client.wait(lambda: declared.get(k), 10, f"the declare of tx {k}")

    def send_tx(k: int, txid: bytes, size: int, commit: bool) -> None:
        for i in range(size):
            seq = k * TX_SIZE + i
            dlv = send(snd, f"m-{seq}", durable_message(seq, tx=k, i=i))
            dlv.local.data = [txid]
            dlv.update(TRANSACTIONAL_STATE)
        if commit:
            send(coordinator, f"commit-{k}", Message(body=Described(DISCHARGE, [txid, False])).encode())
            discharged.add(k)
        client.flush()

    t0 = time.monotonic()
    deadline = t0 + PHASE_TIMEOUT
    next_tx = 0
    open_begun = False
    while not (len(committed) >= kill_at and tx_sent.get(open_tx) == open_size):
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(committed)} of {kill_at} commits after {PHASE_TIMEOUT} s")
        assert not refused, f"refused: {refused[:3]}"
        if not open_begun and len(committed) >= open_at:
            send_tx(open_tx, declare(open_tx), open_size, commit=False)  # never discharged
            open_begun = True
        if next_tx < N_TX and len(discharged) - len(committed) < TX_WINDOW:
            send_tx(next_tx, declare(next_tx), TX_SIZE, commit=True)
            next_tx += 1
        client.pump(0.02)
        if client.closed:
            pytest.fail("the broker closed the producer's connection before the kill")
    # The last burst: two more transactions declared, then their sends and
    # discharges written in one go, and the kill right after writing them,
    # at the broker's first answer to a send in them, or at the next commit
    # outcome: commits in flight at the crash, each at some stage.
    burst = [k for k in (next_tx, next_tx + 1) if k < N_TX]
    txids = {k: declare(k) for k in burst}
    for k in burst:
        send_tx(k, txids[k], TX_SIZE, commit=True)
    if kill_on == "send-outcome":
        client.wait(lambda: tx_sent.get(burst[0]), 10, "an answer to a send of the last burst")
    elif kill_on == "commit-outcome":
        before = len(committed)
        client.wait(lambda: len(committed) > before, 10, "the next commit outcome")
    seconds = time.monotonic() - t0
    broker.kill9()
    client.drain_after_kill()
    assert not refused, f"refused: {refused[:3]}"
    in_flight = discharged - committed
    broker.start()
    drained = drain_queue(broker, "tx")

    by_tx: dict = {}
    for props in drained.properties:
        k, i = props["tx"], props["i"]
        assert props["seq"] == k * TX_SIZE + i, props
        by_tx.setdefault(k, []).append(i)
    present_in_flight = sorted(k for k in in_flight if k in by_tx)
    print(
        f"[amqp-kill9-tx] kill at the {kill_on} after {kill_at} commit outcomes ({len(committed)} with late ones) of "
        f"{len(discharged)} discharged x {TX_SIZE}; open tx of {open_size} sends; {seconds:.2f} s; "
        f"in-flight commits present after restart: {present_in_flight} of {sorted(in_flight)}; "
        f"drained {len(drained.seqs)} in {drained.seconds:.2f} s"
    )
    dups = duplicates(drained.seqs)
    assert not dups, f"delivered twice: {sample(dups)}"
    missing = sorted(k for k in committed if sorted(by_tx.get(k, [])) != list(range(TX_SIZE)))
    assert not missing, f"committed transactions not fully present: {[(k, len(by_tx.get(k, []))) for k in missing]}"
    partial = sorted(k for k, items in by_tx.items() if sorted(items) != list(range(TX_SIZE)) and k != open_tx)
    assert not partial, f"partially present transactions: {[(k, len(by_tx[k])) for k in partial]}"
    assert open_tx not in by_tx, f"the never-discharged transaction left {len(by_tx[open_tx])} messages"
    unexpected = set(by_tx) - committed - in_flight
    assert not unexpected, f"transactions never committed appeared: {sorted(unexpected)}"
