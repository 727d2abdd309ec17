"""Misbehaving clients for the edge abuse tests, run as separate processes (bounded in count and time).

    python -m tests.abuse_client slowloris  --port P --source 127.0.0.2 --count 1000 --seconds 8
    python -m tests.abuse_client handshakes --port P --source 127.0.0.3 --workers 4 --seconds 8
    python -m tests.abuse_client flood      --port P --source 127.0.0.4 --rate 2000 --seconds 8

``slowloris`` opens ``count`` connections and sends each one byte of a TLS
ClientHello every ``interval`` seconds, never finishing; ``handshakes`` runs
``workers`` threads each doing full TLS handshakes and closing, back to back
(at most ``rate`` attempts per second in all, when given);
``flood`` opens and closes TCP connections at up to ``rate`` per second.
Each prints one JSON line of what it did (connections attempted, accepted by
the kernel, refused or reset) when its time is up.  The source address is
bound so that the server sees the attacker on an address of its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import ssl
import threading
import time

#: the start of a TLS 1.2 ClientHello record: enough to look like TLS, never complete
CLIENT_HELLO_START = bytes.fromhex("16030100c8010000c40303") + bytes(32)


def _connect(port: int, source: str, timeout: float = 2.0) -> socket.socket:
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def slowloris(args) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.count + 256)), hard))
    conns, failed = [], 0
    for _ in range(args.count):
        try:
            conns.append([_connect(args.port, args.source, 0.5), 0])
        except OSError:
            failed += 1
    deadline = time.monotonic() + args.seconds
    sent = closed = 0
    while time.monotonic() < deadline and conns:
        for entry in list(conns):
            s, i = entry
            try:
                s.send(CLIENT_HELLO_START[i % len(CLIENT_HELLO_START) : i % len(CLIENT_HELLO_START) + 1])
                entry[1] += 1
                sent += 1
            except OSError:
                closed += 1
                conns.remove(entry)
                s.close()
        time.sleep(min(args.interval, max(0.0, deadline - time.monotonic())))
    for s, _ in conns:
        s.close()
    return {"attempted": args.count, "connect_failed": failed, "bytes_sent": sent, "closed_by_server": closed}


def handshakes(args) -> dict:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    counts = {"handshakes": 0, "failed": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + args.seconds

    start = time.monotonic()
    attempts = [0]

    def worker():
        while time.monotonic() < deadline:
            if args.rate:
                with lock:
                    attempts[0] += 1
                    due = start + attempts[0] / args.rate
                ahead = due - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            try:
                with _connect(args.port, args.source) as raw, ctx.wrap_socket(raw, server_hostname="localhost"):
                    key = "handshakes"
            except OSError:
                key = "failed"
                time.sleep(0.001)
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=worker) for _ in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def flood(args) -> dict:
    counts = {"attempted": 0, "connected": 0, "refused": 0}
    deadline = time.monotonic() + args.seconds
    start = time.monotonic()
    while time.monotonic() < deadline:
        due = start + counts["attempted"] / args.rate
        ahead = due - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        counts["attempted"] += 1
        try:
            s = _connect(args.port, args.source, 0.5)
            counts["connected"] += 1
            s.close()
        except OSError:
            counts["refused"] += 1
    return counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=("slowloris", "handshakes", "flood"))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--source", default="127.0.0.2")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rate", type=float, default=2000.0, help="attempts per second (flood, handshakes)")
    args = p.parse_args(argv)
    result = {"slowloris": slowloris, "handshakes": handshakes, "flood": flood}[args.kind](args)
    print(json.dumps({"kind": args.kind, **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
