"""Misbehaving clients for the edge abuse tests, run as separate processes (bounded in count and time).

    python -m tests.abuse_client slowloris  --port P --source 127.0.0.2 --count 1000 --seconds 8
    python -m tests.abuse_client handshakes --port P --source 127.0.0.3 --workers 4 --rate 300
    python -m tests.abuse_client flood      --port P --source 127.0.0.4 --rate 1000

``slowloris`` opens ``count`` connections and sends each one byte of a TLS
ClientHello every ``interval`` seconds, never finishing; ``handshakes`` runs
``workers`` threads each doing full TLS handshakes and closing, back to back
(at most ``rate`` attempts per second in all, when given);
``flood`` opens and closes TCP connections at up to ``rate`` per second.
Each runs until its standard input is closed (the test's way of ending it)
or for ``seconds`` at most, then prints one JSON line of what it did
(connections attempted, accepted by the kernel, refused or reset, and the
seconds it ran).  The source address is bound so that the server sees the
attacker on an address of its own.

A test may freeze an attacker (SIGSTOP) and resume it (SIGCONT) to compare
a client's figures with and without the attack in the same minute: the
paced attacks then go on at their rate, they do not burst to catch up on
the attempts they missed (:class:`Pacer`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import ssl
import sys
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


class Pacer:
    """At most ``rate`` attempts a second, shared by threads, never a burst to catch up.

    A schedule fixed at the start (attempt *n* due at ``start + n / rate``)
    would, after the process was frozen or starved for a while, fire every
    missed attempt at once.  Here a slot more than one interval in the past
    is not used: a thread that finds its slot gone (it slept through it,
    frozen) takes the next one, and the schedule never starts more than one
    interval behind now.
    """

    def __init__(self, rate: float, stop: threading.Event):
        self.interval = 1.0 / rate if rate else 0.0
        self.stop = stop
        self.lock = threading.Lock()
        self.due = time.monotonic()

    def wait(self) -> bool:
        """Wait for the next attempt's turn; False when the attacker is to stop instead."""
        if not self.interval:
            return not self.stop.is_set()
        while not self.stop.is_set():
            with self.lock:
                self.due = max(self.due, time.monotonic() - self.interval)
                due, self.due = self.due, self.due + self.interval
            ahead = due - time.monotonic()
            if ahead > 0 and self.stop.wait(ahead):
                return False
            if time.monotonic() - due <= self.interval:
                return True
        return False


def slowloris(args, stop: threading.Event) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, args.count + 256)), hard))
    conns, failed = [], 0
    for _ in range(args.count):
        if stop.is_set():
            break
        try:
            conns.append([_connect(args.port, args.source, 0.5), 0])
        except OSError:
            failed += 1
    sent = closed = 0
    while conns and not stop.is_set():
        for entry in list(conns):
            s, i = entry
            try:
                s.send(
                    CLIENT_HELLO_START[
                        i % len(CLIENT_HELLO_START) : i % len(CLIENT_HELLO_START) + 1
                    ]
                )
                entry[1] += 1
                sent += 1
            except OSError:
                closed += 1
                conns.remove(entry)
                s.close()
        stop.wait(args.interval)
    for s, _ in conns:
        s.close()
    return {
        "attempted": args.count,
        "connect_failed": failed,
        "bytes_sent": sent,
        "closed_by_server": closed,
    }


def handshakes(args, stop: threading.Event) -> dict:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    counts = {"handshakes": 0, "failed": 0}
    lock = threading.Lock()
    pacer = Pacer(args.rate, stop)

    def worker():
        while pacer.wait():
            try:
                with (
                    _connect(args.port, args.source) as raw,
                    ctx.wrap_socket(raw, server_hostname="localhost"),
                ):
                    key = "handshakes"
            except OSError:
                key = "failed"
                if not args.rate:
                    stop.wait(0.001)  # unpaced: no spinning on a refusal
            with lock:
                counts[key] += 1

    threads = [threading.Thread(target=worker) for _ in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def flood(args, stop: threading.Event) -> dict:
    counts = {"attempted": 0, "connected": 0, "refused": 0}
    pacer = Pacer(args.rate, stop)
    while pacer.wait():
        counts["attempted"] += 1
        try:
            s = _connect(args.port, args.source, 0.5)
            counts["connected"] += 1
            s.close()
        except OSError:
            counts["refused"] += 1
    return counts


def _stop_on_eof_or_after(seconds: float) -> threading.Event:
    """An event set when standard input is closed, or after ``seconds``, whichever comes first."""
    stop = threading.Event()

    def watch_stdin():
        try:
            while os.read(sys.stdin.fileno(), 4096):  # the descriptor: no reader lock held at exit
                pass
        finally:
            stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    timer = threading.Timer(seconds, stop.set)
    timer.daemon = True
    timer.start()
    return stop


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kind", choices=("slowloris", "handshakes", "flood"))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--source", default="127.0.0.2")
    p.add_argument("--seconds", type=float, default=30.0, help="the longest it runs")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--rate", type=float, default=2000.0, help="attempts per second (flood, handshakes)"
    )
    args = p.parse_args(argv)
    stop = _stop_on_eof_or_after(args.seconds)
    started = time.monotonic()
    result = {"slowloris": slowloris, "handshakes": handshakes, "flood": flood}[args.kind](
        args, stop
    )
    result["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps({"kind": args.kind, **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
