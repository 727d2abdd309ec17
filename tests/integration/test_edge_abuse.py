"""Abuse at the TLS edge leaves a well-behaved client alone.

A gateway with a TLS acceptor and Junction's edge limits
(``connectionsAllowedPerAddress``, ``connectionRatePerAddress``,
``handshakesAllowed``, ``handshake-timeout``, ``routingTimeout``) forwards to
a broker core.  A well-behaved STOMP client on 127.0.0.1 measures its
round trip (SEND with a receipt) while each attack runs in a process of its
own from an address of its own (``tests/abuse_client.py``), and while it is
frozen:

* slowloris: a thousand connections trickling a byte of a ClientHello every
  two seconds;
* a handshake flood: full TLS handshakes attempted 300 times a second;
* a connection flood: TCP connections opened and closed 1,000 times a second.

Each attack must be seen to hit a limit, and the client's median round trip
while the attack runs must stay within twice its median while the attacker
is frozen, the two measured in alternating windows (:func:`compare`): the
machine's own latency drifts by more than an attack's effect within seconds
(other processes come and go), so only figures taken side by side are
compared.  The attacker runs at normal priority and shares the two CPUs (a
real attacker's CPU is elsewhere): at the lowest priority a busy machine
starved it until it did not attack at all, so each flood must also be seen
to reach half its rate.  Counts and durations are bounded.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest
import trustme

from tests.harness import free_port, router_xml, wait_for

TIMEOUT = 20.0
USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "app")}
#: round trips in one window; windows alternate between the attack frozen and running
WINDOW = 100
#: pairs of windows per attack: the figure is the median of their ratios (odd: one middle value)
ROUNDS = 9
#: round trips after each switch left out of the figures: the gateway finishing what was under way
SETTLE = 5
#: the share of its nominal rate an attacker must reach while running, or it did not attack
MIN_RATE_SHARE = 0.5
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMITS = (
    "handshake-timeout=2;handshakesAllowed=32;connectionsAllowedPerAddress=64;"
    "connectionRatePerAddress=20;routingTimeout=3000"
)


class GoodClient:
    """A raw STOMP 1.2 client over TLS: CONNECT once, then SEND+receipt round trips."""

    def __init__(self, port: int, ca: str):
        ctx = ssl.create_default_context(cafile=ca)
        raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(raw, server_hostname="localhost")
        self.buffer = b""
        self.n = 0
        self.sock.sendall(
            b"CONNECT\naccept-version:1.2\nhost:localhost\nlogin:app\npasscode:app-secret\n\n\x00"
        )
        assert self._frame().startswith(b"CONNECTED")

    def _frame(self) -> bytes:
        while b"\x00" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the gateway")
            self.buffer += chunk
        frame, _, self.buffer = self.buffer.partition(b"\x00")
        return frame.lstrip(b"\r\n")

    def round_trips(self, count: int) -> list[float]:
        """Seconds of each of ``count`` SEND-with-receipt round trips."""
        times = []
        for _ in range(count):
            self.n += 1
            t0 = time.perf_counter()
            self.sock.sendall(
                f"SEND\ndestination:/queue/latency\nreceipt:{self.n}\n\nping\x00".encode()
            )
            frame = self._frame()
            times.append(time.perf_counter() - t0)
            assert frame.startswith(b"RECEIPT"), frame[:80]
        return times

    def close(self) -> None:
        self.sock.close()


def core_and_gateway(broker_factory, edge_params: str):
    """A broker core and a gateway forwarding to it; the gateway's acceptor ``edge`` has *edge_params*."""
    core_port = free_port()
    broker_factory(
        "core",
        security=True,
        users=USERS,
        persistence=False,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{core_port}?protocols=STOMP,AMQP;anycastPrefix=/queue/</acceptor>'
        ),
    ).start()
    port = free_port()
    gateway = broker_factory(
        "gateway",
        security=True,
        users=USERS,
        persistence=False,
        extra_core_xml=router_xml({"core": f"tcp://127.0.0.1:{core_port}"}, check_period=1000),
        extra_acceptors_xml=(
            f'<acceptor name="edge">tcp://127.0.0.1:{port}?router=r;routerMode=forward;{edge_params}</acceptor>'
        ),
    ).start()
    wait_for(
        lambda: gateway.status()["routers"]["r"]["targets"][0]["ready"],
        TIMEOUT,
        interval=0.05,
        what="target ready",
    )
    gateway.edge_port = port
    return gateway


@pytest.fixture
def edge(broker_factory, tmp_path):
    ca = trustme.CA()
    server = str(tmp_path / "server.pem")
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(server)
    ca_pem = str(tmp_path / "ca.pem")
    ca.cert_pem.write_to_path(ca_pem)
    gateway = core_and_gateway(
        broker_factory, f"protocols=STOMP,AMQP;sslEnabled=true;keyStorePath={server};{LIMITS}"
    )
    gateway.ca = ca_pem
    return gateway


def edge_status(gateway) -> dict:
    return next(a for a in gateway.status()["acceptors"] if a["name"] == "edge")


def attack(kind: str, port: int, source: str, *extra: str) -> subprocess.Popen:
    """Attack *kind* in a process of its own; it runs until its stdin closes (or its ``--seconds``).

    It runs in a session of its own, as any other process on the machine: a
    scheduler that groups processes by session (autogroup) then does not
    share the test client's group with it.
    """
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.abuse_client",
            kind,
            "--port",
            str(port),
            "--source",
            source,
            *extra,
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, *, stop: bool = True) -> dict:
    """The attacker's report, once it ended: told to stop now (*stop*), or when its own time is up."""
    proc.send_signal(signal.SIGCONT)  # a frozen process cannot end
    if stop:
        proc.stdin.close()
    try:
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.stdout.read()
        for pipe in (proc.stdin, proc.stdout):
            pipe.close()
    return json.loads(out.strip().splitlines()[-1])


@dataclass
class Figures:
    """A good client's round trips with an attacker frozen and running, in interleaved windows."""

    frozen: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    #: each round's median running round trip over its median frozen one
    ratios: list[float] = field(default_factory=list)
    #: seconds the attacker spent frozen
    frozen_s: float = 0.0

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def __str__(self) -> str:
        return (
            f"{statistics.median(self.frozen) * 1000:.2f} -> {statistics.median(self.running) * 1000:.2f} ms, "
            f"x{self.ratio:.2f} (rounds {', '.join(f'{r:.2f}' for r in sorted(self.ratios))})"
        )


def compare(client: GoodClient, proc: subprocess.Popen) -> Figures:
    """The client's round trips with the attacker frozen, then running, :data:`ROUNDS` times over.

    Frozen (SIGSTOP), the attacker sends nothing while the gateway keeps what
    it already holds (connections it admitted, within its limits); running
    (SIGCONT), it attacks at its rate.  Each window starts after
    :data:`SETTLE` round trips, so that what the switch left under way is not
    counted on the wrong side.  A window pair takes a fraction of a second:
    whatever else the machine runs is the same for both of them, and a burst
    of it that spoils one pair does not move the median of the pairs.
    """
    figures = Figures()
    for _ in range(ROUNDS):
        t0 = time.monotonic()
        proc.send_signal(signal.SIGSTOP)
        client.round_trips(SETTLE)
        frozen = client.round_trips(WINDOW)
        proc.send_signal(signal.SIGCONT)
        figures.frozen_s += time.monotonic() - t0
        client.round_trips(SETTLE)
        running = client.round_trips(WINDOW)
        figures.frozen += frozen
        figures.running += running
        figures.ratios.append(statistics.median(running) / statistics.median(frozen))
    return figures


def refused(gateway, limit: str) -> int:
    status = edge_status(gateway)
    if limit == "handshakesAllowed":
        return status["tls"]["refused_busy"]
    return status.get("admission", {}).get("refused", {}).get(limit, 0)


def test_slowloris_and_floods_leave_a_good_client_within_twice_its_latency(edge):
    client = GoodClient(edge.edge_port, edge.ca)
    figures: dict[str, Figures] = {}
    rates: dict[str, str] = {}

    def measure(
        kind: str, limits: tuple[str, ...], source: str, *argv: str, rate: float = 0.0
    ) -> dict:
        """The client's figures with attack *kind* frozen and running (:func:`compare`); its report.

        A flood (*rate*: its attempts per second) is stopped once measured, and
        must have reached :data:`MIN_RATE_SHARE` of its rate while it ran;
        slowloris runs its own time.
        """
        before = sum(refused(edge, limit) for limit in limits)
        proc = attack(kind, edge.edge_port, source, *argv)
        try:
            wait_for(
                lambda: sum(refused(edge, limit) for limit in limits) > before,
                TIMEOUT,
                interval=0.05,
                what=f"{kind} refused by {' or '.join(limits)}",
            )
            figures[kind] = compare(client, proc)
        finally:
            result = finish(proc, stop=bool(rate))
        if rate:
            attempts = result.get(
                "attempted", result.get("handshakes", 0) + result.get("failed", 0)
            )
            achieved = attempts / max(0.001, result["seconds"] - figures[kind].frozen_s)
            rates[kind] = f"{achieved:.0f}/s of {rate:g}/s"
            assert achieved >= MIN_RATE_SHARE * rate, (
                f"{kind} did not attack: {rates[kind]} while running"
            )
        return result

    try:
        client.round_trips(30)  # warm up
        # slowloris: 1,000 connections, a byte every 2 s each.  It opens connections faster than
        # connectionRatePerAddress and, admitted, holds more than connectionsAllowedPerAddress
        # would allow: one limit or the other refuses it.  It runs its 6 s at most: long enough
        # for the gateway's handshake-timeout (2 s) to close what it holds, and for it to notice
        slow = measure(
            "slowloris",
            ("connectionsAllowedPerAddress", "connectionRatePerAddress"),
            "127.0.0.2",
            *("--count", "1000", "--seconds", "6"),
        )
        # the server closed the trickling connections at its handshake-timeout
        assert slow["closed_by_server"] > 0 and edge_status(edge)["tls"]["handshakes_timed_out"] > 0
        # a handshake flood: 300 attempts/s, 15 times connectionRatePerAddress
        shakes = measure(
            "handshakes",
            ("connectionRatePerAddress",),
            "127.0.0.3",
            *("--workers", "4", "--rate", "300"),
            rate=300,
        )
        assert shakes["handshakes"] > 0 and shakes["failed"] > 0
        # a connection flood
        measure("flood", ("connectionRatePerAddress",), "127.0.0.4", "--rate", "1000", rate=1000)
    finally:
        client.close()

    report = {kind: str(f) for kind, f in figures.items()}
    print(
        "median round trips, attack frozen -> running:",
        report,
        "attack rates:",
        rates,
        slow,
        shakes,
    )
    for kind, f in figures.items():
        assert f.ratio <= 2, f"{kind}: {report}"
    # the log names each offender once per limit, not once per refused connection
    log = (edge.dir / "stderr.log").read_text()
    assert log.count("connection from 127.0.0.4 refused: more than connectionRatePerAddress") == 1
    # and every refusal, whichever layer made it, was a clean close
    assert "Traceback" not in log and "Unhandled Error" not in log


def test_forwarded_connections_count_per_address_until_they_end(broker_factory):
    """Relayed connections (plain TCP, the relay engine) still count against their source."""
    gateway = core_and_gateway(broker_factory, "protocols=STOMP;connectionsAllowedPerAddress=3")
    port = gateway.edge_port

    def stomp_connect() -> socket.socket | None:
        s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        s.sendall(b"CONNECT\naccept-version:1.2\nhost:x\nlogin:app\npasscode:app-secret\n\n\x00")
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
        if not answer.startswith(b"CONNECTED"):
            s.close()
            return None
        return s

    held = [stomp_connect() for _ in range(3)]
    assert all(held)
    wait_for(
        lambda: edge_status(gateway)["relayed"] == 3, TIMEOUT, interval=0.05, what="three relayed"
    )
    assert stomp_connect() is None
    assert edge_status(gateway)["admission"]["refused"] == {"connectionsAllowedPerAddress": 1}
    held.pop().close()
    wait_for(
        lambda: edge_status(gateway)["relayed"] == 2, TIMEOUT, interval=0.05, what="one relay ended"
    )
    again = wait_for(stomp_connect, TIMEOUT, interval=0.05, what="a new connection admitted")
    again.close()
    for s in held:
        s.close()


def test_routing_timeout_and_routing_max_bytes_close_only_the_offender(broker_factory):
    gateway = core_and_gateway(
        broker_factory, "protocols=STOMP;routingTimeout=800;routingMaxBytes=2048"
    )
    port = gateway.edge_port

    # a client that starts its CONNECT and stalls is closed with an ERROR after routingTimeout
    stalled = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    stalled.sendall(b"CONNECT\naccept-version:1.2\nlogin:app\n")
    t0 = time.monotonic()
    answer = b""
    while True:
        chunk = stalled.recv(4096)
        if not chunk:
            break
        answer += chunk
    waited = time.monotonic() - t0
    assert answer.startswith(b"ERROR") and b"no CONNECT frame within 0.8 s" in answer
    assert 0.5 < waited < 5.0

    # one that sends more than routingMaxBytes without completing its CONNECT is refused at once
    big = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    big.sendall(b"CONNECT\naccept-version:1.2\nx-padding:" + b"a" * 4096)
    answer = big.recv(4096)
    assert answer.startswith(b"ERROR") and b"more than 2048 bytes" in answer

    # meanwhile a well-behaved client logs in
    good = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    good.sendall(b"CONNECT\naccept-version:1.2\nhost:x\nlogin:app\npasscode:app-secret\n\n\x00")
    assert good.recv(4096).startswith(b"CONNECTED")
    for s in (stalled, big, good):
        s.close()
    decisions = edge_status(gateway)["decisions"]
    assert decisions.get("timed-out") == 1 and decisions.get("too-large") == 1
