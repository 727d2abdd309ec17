#!/usr/bin/env python3
"""CPU per message of the whole in-process broker path: no sockets, no client.

A :class:`BrokerServer` on a ``twisted.internet.task.Clock`` with one producer
and one consumer :class:`StompProtocol`, each on a ``StringTransport``:

* the producer is fed pre-encoded STOMP 1.2 SEND frames (256-byte body;
  ``destination``, ``persistent``, ``bench-seq``, ``content-length`` and, when
  persistent, a ``receipt`` on every SEND, as ``bench/stomp_throughput.py``
  sends them) in reads of ``--batch`` (100) frames, as TCP delivers them
  under load;
* the consumer subscribed to the same queue with ``activemq.prefetchSize``
  1000 and ``ack`` auto or client-individual; in client-individual mode the
  ACK frames for each read's MESSAGEs (by their ``ack`` headers, read from the
  consumer's output and encoded outside the timing) are fed back in one read;
* after each read the clock runs every call due (delivery passes, the
  journal's inline flush, confirmations).

Persistent modes use a real :class:`junction.brokercore.journal.Journal` on
files in a temporary directory, ``sync=True`` and ``writer="inline"`` (the
writes and fsyncs the writer thread would do, on this thread, so their CPU
counts).

Per mode it prints:

* **broker us/msg** -- CPU (``time.process_time``: user + system) per message;
* **baseline us/msg** -- the codec alone parsing the same SEND (and ACK) reads
  and serialising the same MESSAGE frames the broker wrote: the floor any
  broker on this codec pays.  Broker and baseline run interleaved, in chunks
  of ``--chunk`` messages, so both see the same machine: CPU speed on a shared
  host drifts by tens of percent between seconds, so the **ratio** is the
  figure to compare between runs;
* **calls/msg** -- Python and C function calls per message on the broker path
  (cProfile's count over ``--count-messages`` more messages): deterministic,
  so it shows a change in the work done even when the CPU figures are noisy.

Outside the timing it checks that every message arrived exactly once and in
order, every receipt came back, and nothing else was written (no ERROR).

With ``--events`` it compares instead, per mode, the path without and with
message events (an :class:`~junction.events.writer.EventLog` of category
``message`` at sample rate 1, its writer process running, and
:class:`~junction.brokercore.events.MessageEvents` on the server): the two
paths run interleaved chunk by chunk; **+us/msg** is what the events add
(the node's shipper thread included: ``process_time`` counts every thread,
and **shipper** is that thread's part), and the calls per message of each.
The writer process's own CPU is not in these figures (``bench/events.py``
measures it).

    python bench/broker_path.py [-n 20000] [--repeat 3] [--mode auto/true] [--profile MODE] [--events]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import sys
import tempfile
import time

try:
    import junction  # noqa: F401
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from junction.brokercore.events import MessageEvents
from junction.brokercore.journal import Journal
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.brokercore.stomp_server import StompProtocol
from junction.config.model import Acceptor, BrokerConfig
from junction.events.writer import EventLog
from junction.protocols.stomp import Frame, StompCodec

try:
    from . import common  # imported as bench.broker_path from the repository root
except ImportError:  # run as ``python bench/broker_path.py``: bench/ is on sys.path
    import common

ACCEPTOR = Acceptor(
    name="stomp", scheme="tcp", host="127.0.0.1", port=0, anycast_prefix="/queue/", multicast_prefix="/topic/"
)
QUEUE = "/queue/bench"
BODY = bytes(range(256))
PREFETCH = 1000
MODES = (("auto", False), ("auto", True), ("client-individual", False), ("client-individual", True))


def _client_codec() -> StompCodec:
    codec = StompCodec(server=False)
    codec.set_version("1.2")
    return codec


def send_reads(first: int, n: int, batch: int, persistent: bool) -> list[bytes]:
    """SEND frames ``first`` .. ``first+n-1``, ``batch`` per read."""
    codec = _client_codec()
    reads = []
    for start in range(first, first + n, batch):
        frames = []
        for i in range(start, min(start + batch, first + n)):
            headers = [("destination", QUEUE), ("persistent", "true" if persistent else "false"), ("bench-seq", str(i))]
            if persistent:
                headers.append(("receipt", f"s-{i}"))
            frames.append(codec.send(Frame("SEND", tuple(headers), BODY), content_length=True))
        reads.append(b"".join(frames))
    return reads


#: the ``ack`` header of a MESSAGE frame the broker wrote (the bench's body holds no LF + "ack:")
_ACK_HEADER = re.compile(rb"\nack:([^\n]*)")


def ack_read(ids: tuple[str, ...]) -> bytes:
    """One read of ACK frames for the MESSAGEs whose ``ack`` headers are ``ids``."""
    codec = _client_codec()
    return b"".join(codec.send(Frame("ACK", (("id", ack),))) for ack in ids)


class Path:
    """A broker node with a connected producer and a subscribed consumer."""

    def __init__(self, ack: str, persistent: bool, directory: str, batch: int, events: bool = False):
        self.persistent = persistent
        self.client_ack = ack != "auto"
        self.batch = batch
        self.clock = Clock()
        config = BrokerConfig(persistence_enabled=persistent, security_enabled=False, base_dir=directory)
        journal = None
        if persistent:
            journal = Journal(os.path.join(directory, "journal"), writer="inline", reactor=self.clock, sync=True)
        self.server = BrokerServer(
            config, reactor=self.clock, security=SecurityManager(None, (), enabled=False), journal=journal
        )
        self.server.start()
        self.event_log = None
        if events:
            self.event_log = EventLog(os.path.join(directory, "events"), "bench", "bench-node", categories=("message",))
            self.event_log.start()
            self.server.message_events = MessageEvents(self.event_log, "bench-node", self.server.storage)
        self.producer, self.producer_out = self._connect()
        self.consumer, self.consumer_out = self._connect()
        sub = (("destination", QUEUE), ("id", "1"), ("ack", ack), ("activemq.prefetchSize", str(PREFETCH)),
               ("receipt", "sub-1"))
        self.consumer.dataReceived(_client_codec().send(Frame("SUBSCRIBE", sub)))
        self.run()
        assert self.consumer_out.value().startswith(b"RECEIPT"), self.consumer_out.value()
        self.consumer_out.clear()
        #: messages sent so far (bench-seq of the next)
        self.sent = 0

    def _connect(self):
        proto = StompProtocol(self.server, acceptor=ACCEPTOR, reactor=self.clock)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0")
        self.run()
        assert transport.value().startswith(b"CONNECTED"), transport.value()
        transport.clear()
        return proto, transport

    def run(self) -> None:
        """Run every call due now, including the ones those calls schedule."""
        clock = self.clock
        calls = clock.calls
        while calls and calls[0].getTime() <= clock.seconds():
            clock.advance(0)

    def prepare(self, n: int):
        """The reads for the next ``n`` messages: (SEND reads, ACK reads to fill, by ack ids)."""
        reads = send_reads(self.sent, n, self.batch, self.persistent)
        # prefetch > batch: every read's messages are delivered before its ACKs,
        # which drive() encodes (untimed) from the ack headers it finds.
        return reads, {} if self.client_ack else None

    def drive(self, reads: list[bytes], acks: dict | None):
        """Feed the reads; (CPU seconds, producer output, consumer output)."""
        producer_data = self.producer.dataReceived
        consumer_data = self.consumer.dataReceived
        producer_out = self.producer_out
        consumer_out = self.consumer_out
        run = self.run
        p_chunks: list[bytes] = []
        c_chunks: list[bytes] = []
        excluded = 0.0
        started = time.process_time()
        for data in reads:
            producer_data(data)
            run()
            out = consumer_out.value()
            consumer_out.clear()
            c_chunks.append(out)
            if acks is not None and out:
                t = time.process_time()  # the client's part: untimed
                ids = tuple(v.decode() for v in _ACK_HEADER.findall(out))
                read = acks[ids] = ack_read(ids)
                excluded += time.process_time() - t
                if read:
                    consumer_data(read)
                    run()
            p_chunks.append(producer_out.value())
            producer_out.clear()
        elapsed = time.process_time() - started - excluded
        c_chunks.append(consumer_out.value())
        consumer_out.clear()
        return elapsed, b"".join(p_chunks), b"".join(c_chunks)

    def check(self, first: int, n: int, producer_out: bytes, consumer_out: bytes) -> list[Frame]:
        """Messages ``first`` .. ``first+n-1`` delivered once, in order, every receipt, no ERROR."""
        produced = [f for f in _client_codec().receive_data(producer_out) if isinstance(f, Frame)]
        others = [f for f in produced if f.command != "RECEIPT"]
        assert not others, others[:3]
        if self.persistent:
            receipts = [f.get("receipt-id") for f in produced]
            wanted = [f"s-{i}" for i in range(first, first + n)]
            assert receipts == wanted, f"{len(receipts)} receipts of {n}, first {receipts[:1]}, last {receipts[-1:]}"
        messages = [f for f in _client_codec().receive_data(consumer_out) if isinstance(f, Frame)]
        others = [f for f in messages if f.command != "MESSAGE"]
        assert not others, others[:3]
        seqs = [f.get("bench-seq") for f in messages]
        assert seqs == [str(i) for i in range(first, first + n)], f"{len(seqs)} messages of {n}: lost or repeated"
        assert all(f.body == BODY for f in messages)
        return messages

    def step(self, n: int):
        """Send, deliver (and ACK) the next ``n`` messages, checked: (CPU s, reads, ACK reads, MESSAGEs)."""
        reads, acks = self.prepare(n)
        first = self.sent
        elapsed, p_out, c_out = self.drive(reads, acks)
        self.sent += n
        messages = self.check(first, n, p_out, c_out)
        return elapsed, reads, list(acks.values()) if acks else [], messages

    def close(self) -> None:
        for proto in (self.producer, self.consumer):
            proto.connectionLost(None)
        self.run()
        self.server.stop()
        self.run()
        if self.event_log is not None:
            self.event_log.stop()
            assert not self.event_log.dropped and not self.event_log.failed, self.event_log.status()


def baseline(reads: list[bytes], ack_reads: list[bytes], messages: list[Frame]) -> float:
    """CPU seconds for the codec alone: parse the reads, serialise the MESSAGEs."""
    receive = StompCodec()
    receive.set_version("1.2")
    receive_data = receive.receive_data
    send = StompCodec()
    send.set_version("1.2")
    serialise = send.send
    started = time.process_time()
    parsed = 0
    for data in reads:
        parsed += len(receive_data(data))
    for frame in messages:
        serialise(frame)
    for data in ack_reads:
        parsed += len(receive_data(data))
    elapsed = time.process_time() - started
    assert parsed == len(messages) * (2 if ack_reads else 1), parsed
    return elapsed


def count_calls(path: Path, n: int) -> float:
    """Python and C function calls per message over ``n`` more messages (0: not counted)."""
    if not n:
        return 0.0
    import cProfile
    import pstats

    reads, acks = path.prepare(n)
    first = path.sent
    profiler = cProfile.Profile()
    profiler.enable()
    _, p_out, c_out = path.drive(reads, acks)
    profiler.disable()
    path.sent += n
    path.check(first, n, p_out, c_out)
    return pstats.Stats(profiler).total_calls / n


def run_mode(ack: str, persistent: bool, args) -> dict:
    """One mode: broker and baseline CPU seconds, calls per message, fsyncs."""
    directory = tempfile.mkdtemp(prefix="junction-bench-")
    try:
        path = Path(ack, persistent, directory, args.batch)
        if args.warmup:
            path.step(args.warmup)  # auto-creates the queue, warms every cache
        broker = base = 0.0
        gc.collect()
        done = 0
        while done < args.messages:
            n = min(args.chunk, args.messages - done)
            elapsed, reads, ack_reads, messages = path.step(n)
            broker += elapsed
            base += baseline(reads, ack_reads, messages)
            done += n
        fsyncs = path.server.storage.stats()["syncs"] if persistent else 0
        calls = count_calls(path, args.count_messages)
        path.close()
        return {"broker": broker, "baseline": base, "calls": calls, "fsyncs": fsyncs}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def events_mode(ack: str, persistent: bool, args) -> dict:
    """One mode without and with message events, the two paths interleaved chunk by chunk:
    CPU seconds of each (the node's event-log thread included) and calls per message."""
    directory = tempfile.mkdtemp(prefix="junction-bench-")
    try:
        paths = {
            on: Path(ack, persistent, os.path.join(directory, str(on)), args.batch, events=on) for on in (False, True)
        }
        for path in paths.values():
            if args.warmup:
                path.step(args.warmup)
        cpu = {False: 0.0, True: 0.0}
        log = paths[True].event_log
        shipped = log.shipper_cpu_s
        gc.collect()
        done = 0
        order = (False, True)
        while done < args.messages:
            n = min(args.chunk, args.messages - done)
            for on in order:
                cpu[on] += paths[on].step(n)[0]
            order = order[::-1]
            done += n
        deadline = time.monotonic() + 10
        while log.queue and time.monotonic() < deadline:
            time.sleep(0.05)  # the shipper's last batch (its CPU is in "on" already: process time)
        shipper = log.shipper_cpu_s - shipped
        calls = {on: count_calls(path, args.count_messages) for on, path in paths.items()}
        for path in paths.values():
            path.close()
        return {"off": cpu[False], "on": cpu[True], "shipper": shipper, "calls_off": calls[False],
                "calls_on": calls[True]}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def profile_mode(ack: str, persistent: bool, args) -> None:
    import cProfile
    import pstats

    directory = tempfile.mkdtemp(prefix="junction-bench-")
    try:
        path = Path(ack, persistent, directory, args.batch, events=args.events)
        if args.warmup:
            path.step(args.warmup)
        reads, acks = path.prepare(args.messages)
        profiler = cProfile.Profile()
        profiler.enable()
        path.drive(reads, acks)
        profiler.disable()
        path.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    stats = pstats.Stats(profiler)
    print(f"{stats.total_calls / args.messages:.1f} calls per message")
    stats.sort_stats("tottime").print_stats(args.profile_lines)
    stats.sort_stats("cumulative").print_stats(args.profile_lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=20_000, help="timed messages per mode (20000)")
    parser.add_argument("--batch", type=int, default=100, help="SEND frames per read (100)")
    parser.add_argument("--chunk", type=int, default=2_000, help="messages per broker/baseline interleave (2000)")
    parser.add_argument("--warmup", type=int, default=1_000, help="untimed messages first (1000)")
    parser.add_argument("--count-messages", type=int, default=1_000, help="messages for calls/msg (1000; 0: skip)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode, the best reported (1)")
    parser.add_argument("--mode", action="append", help="only this mode, e.g. auto/true (repeatable)")
    parser.add_argument("--profile", metavar="MODE", help="print a cProfile of one mode instead, e.g. auto/false")
    parser.add_argument("--profile-lines", type=int, default=40)
    parser.add_argument("--events", action="store_true",
                        help="compare the path without and with message events (junction/brokercore/events.py)")
    args = parser.parse_args()

    if args.profile:
        ack, _, persistent = args.profile.partition("/")
        profile_mode(ack, persistent == "true", args)
        return
    modes = MODES
    if args.mode:
        modes = tuple(m for m in MODES if f"{m[0]}/{str(m[1]).lower()}" in args.mode)
    if args.events:
        print(f"{args.messages} messages of {len(BODY)} B per mode, without and with message events, "
              f"best of {args.repeat}")
        print(f"{'ack':<18} {'persistent':<10} {'off us/msg':>10} {'on us/msg':>9} {'+us/msg':>7} {'on/off':>6} "
              f"{'shipper':>7} {'calls off':>9} {'calls on':>8}")
        for ack, persistent in modes:
            runs = [events_mode(ack, persistent, args) for _ in range(args.repeat)]
            off = min(r["off"] for r in runs) / args.messages * 1e6
            on = min(r["on"] for r in runs) / args.messages * 1e6
            shipper = min(r["shipper"] for r in runs) / args.messages * 1e6
            print(f"{ack:<18} {str(persistent).lower():<10} {off:>10.1f} {on:>9.1f} {on - off:>7.1f} "
                  f"{on / off:>6.3f} {shipper:>7.1f} {runs[0]['calls_off']:>9.1f} {runs[0]['calls_on']:>8.1f}")
        return
    print(
        f"{args.messages} messages of {len(BODY)} B per mode, {args.batch} SEND frames per read, "
        f"prefetch {PREFETCH}, best of {args.repeat}"
    )
    print(f"{'ack':<18} {'persistent':<10} {'broker us/msg':>13} {'baseline us/msg':>15} {'ratio':>6} "
          f"{'calls/msg':>9} {'fsyncs':>6}")
    cpu = time.process_time()
    cal = common.calibration()
    for ack, persistent in modes:
        runs = [run_mode(ack, persistent, args) for _ in range(args.repeat)]
        best = min(runs, key=lambda r: r["broker"] / r["baseline"])
        broker = min(r["broker"] for r in runs) / args.messages * 1e6
        base = min(r["baseline"] for r in runs) / args.messages * 1e6
        fsyncs = str(best["fsyncs"]) if persistent else "-"
        print(
            f"{ack:<18} {str(persistent).lower():<10} {broker:>13.1f} {base:>15.1f} "
            f"{best['broker'] / best['baseline']:>6.2f} {best['calls']:>9.1f} {fsyncs:>6}"
        )
    cal = min(cal, common.calibration())
    print(
        f"calibration: 1M-iteration Python loop {cal * 1e3:.0f} ms CPU; "
        f"total {time.process_time() - cpu:.1f} s CPU"
    )


if __name__ == "__main__":
    main()
