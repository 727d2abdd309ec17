#!/usr/bin/env python3
"""What one relay hop costs on this machine: Junction's splice against no hop and a minimal relay.

``bench/gateway.py`` measures the gateway in the whole pipeline (producer,
consumer, broker core, gateway), where on a small machine the figures mix
the hop with four processes competing for the CPUs.  This script isolates
the hop: a producer writes 256-byte records, each stamped with
``time.monotonic_ns()``, to a sink that measures one-way latency, over

* ``direct``  -- producer -> sink;
* ``reactor`` -- producer -> Junction's forwarding splice with the reactor
  copying the bytes (:func:`junction.gateway.forward.connect_and_forward` in a
  process of its own on the default reactor) -> sink;
* ``engine``  -- the same, with the splice handed to the relay engine
  (:mod:`junction.gateway.relay`), as the gateway does for plain TCP;
* ``thread``  -- producer -> a minimal relay (two blocking threads doing
  ``recv_into`` / ``sendall``, no event loop) -> sink: roughly the least a
  Python relay can cost, the floor the splice is compared with.

Two figures per path, from one invocation: p50/p99 latency with records
paced at ``--rate`` (2,000/s: each record travels alone, so every record
pays a wake-up of every process on the way), and the relay's CPU per
record, paced and flooded (records back to back, so reads carry many).

    .venv/bin/python bench/relay_hop.py [--rate 2000] [--count 6000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECORD = 256
#: seconds any one trial may take before it is abandoned
TRIAL_TIMEOUT = 120.0


# -- the relay processes -------------------------------------------------------------------
def relay_splice(target_port: int, engine: bool = False) -> None:
    """Junction's forwarding: accept one connection, forward it to target_port, exit when done.

    With *engine*, the splice is handed to a RelayEngine (as the gateway does
    for plain TCP); without, the reactor copies the bytes.
    """
    sys.path.insert(0, REPO)
    from twisted.internet import reactor
    from twisted.internet.protocol import Factory, Protocol

    from junction.config.model import Connector
    from junction.gateway.forward import connect_and_forward
    from junction.gateway.relay import RelayEngine

    relay = RelayEngine(reactor) if engine else None

    connector = Connector(name="sink", scheme="tcp", host="127.0.0.1", port=target_port, params={})

    class Accept(Protocol):
        def connectionMade(self):
            self.transport.pauseProducing()
            d = connect_and_forward(self.transport, b"", connector, reactor, relay=relay)
            d.addCallback(lambda splice: splice.closed.addBoth(lambda _: reactor.stop()))
            d.addErrback(lambda f: (print(f, file=sys.stderr), reactor.stop()))

    port = reactor.listenTCP(0, Factory.forProtocol(Accept), interface="127.0.0.1")
    print(port.getHost().port, flush=True)
    start = time.process_time()
    reactor.run()
    if relay is not None:
        relay.stop()
    print(f"{time.process_time() - start:.6f}", flush=True)


def relay_thread(target_port: int) -> None:
    """The floor: two blocking threads copying bytes, no event loop."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print(listener.getsockname()[1], flush=True)
    start = time.process_time()
    client, _ = listener.accept()
    target = socket.create_connection(("127.0.0.1", target_port))
    for s in (client, target):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def pump(src, dst):
        buf = bytearray(65536)
        view = memoryview(buf)
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threads = [threading.Thread(target=pump, args=pair) for pair in ((client, target), (target, client))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{time.process_time() - start:.6f}", flush=True)


# -- one trial -----------------------------------------------------------------------------
def trial(path: str, count: int, rate: float) -> dict:
    """Send ``count`` records over ``path`` at ``rate`` (0: flood); latencies and relay CPU."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sink_port = listener.getsockname()[1]
    latencies: list[int] = []

    def sink():
        conn, _ = listener.accept()
        conn.settimeout(TRIAL_TIMEOUT)
        pending = b""
        while True:
            data = conn.recv(65536)
            if not data:
                break
            now = time.monotonic_ns()
            pending += data
            while len(pending) >= RECORD:
                latencies.append(now - struct.unpack_from("!q", pending)[0])
                pending = pending[RECORD:]
        conn.close()

    reader = threading.Thread(target=sink, daemon=True)
    reader.start()
    relay = None
    port = sink_port
    if path != "direct":
        relay = subprocess.Popen(
            [sys.executable, __file__, "--relay", path, str(sink_port)], stdout=subprocess.PIPE, text=True
        )
        port = int(relay.stdout.readline())
    try:
        producer = socket.create_connection(("127.0.0.1", port))
        producer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        filler = b"x" * (RECORD - 8)
        interval = int(1e9 / rate) if rate else 0
        t0 = time.monotonic_ns()
        for i in range(count):
            if interval:
                ahead = t0 + i * interval - time.monotonic_ns()
                if ahead > 0:
                    time.sleep(ahead / 1e9)
            producer.sendall(struct.pack("!q", time.monotonic_ns()) + filler)
        producer.shutdown(socket.SHUT_WR)
        reader.join(TRIAL_TIMEOUT)
        producer.close()
        relay_cpu = None
        if relay is not None:
            out, _ = relay.communicate(timeout=TRIAL_TIMEOUT)
            relay_cpu = float(out.strip().splitlines()[-1])
    finally:
        if relay is not None and relay.poll() is None:
            relay.kill()
            relay.wait()
        listener.close()
    if len(latencies) != count:
        raise RuntimeError(f"{path}: {len(latencies)} of {count} records arrived")
    latencies.sort()
    return {
        "p50_us": latencies[count // 2] / 1000,
        "p99_us": latencies[min(count - 1, int(count * 0.99))] / 1000,
        "relay_us_per_record": relay_cpu / count * 1e6 if relay_cpu is not None else None,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=2000.0, help="records per second when paced")
    p.add_argument("--count", type=int, default=6000, help="records per paced trial")
    p.add_argument("--flood", type=int, default=100_000, help="records per flooded trial")
    p.add_argument("--runs", type=int, default=3, help="trials per path (interleaved), medians")
    p.add_argument("--relay", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.relay:
        kind, port = args.relay
        if kind == "thread":
            relay_thread(int(port))
        else:
            relay_splice(int(port), engine=kind == "engine")
        return 0
    paths = ("direct", "reactor", "engine", "thread")
    paced: dict[str, list[dict]] = {k: [] for k in paths}
    flood: dict[str, list[dict]] = {k: [] for k in paths[1:]}
    for run in range(args.runs):
        order = paths if run % 2 == 0 else tuple(reversed(paths))
        for path in order:
            paced[path].append(trial(path, args.count, args.rate))
        for path in flood:
            flood[path].append(trial(path, args.flood, 0))

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"{os.cpu_count()} CPUs, {args.runs} runs per path (interleaved), medians; {RECORD}-byte records")
    print(f"\npaced at {args.rate:g}/s, {args.count:,} records")
    print("path     p50 us   p99 us   added p50 us   relay CPU us/record")
    base = med(paced["direct"], "p50_us")
    for path in paths:
        rows = paced[path]
        cpu = "-" if path == "direct" else f"{med(rows, 'relay_us_per_record'):.1f}"
        added = "-" if path == "direct" else f"{med(rows, 'p50_us') - base:+.0f}"
        print(f"{path:7s} {med(rows, 'p50_us'):7.0f} {med(rows, 'p99_us'):8.0f} {added:>14s} {cpu:>21s}")
    print(f"\nflooded, {args.flood:,} records back to back")
    print("path     relay CPU us/record")
    for path, rows in flood.items():
        print(f"{path:7s} {med(rows, 'relay_us_per_record'):19.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
