#!/usr/bin/env python3
"""The gateway's cost: forwarded against direct, on the same broker core, in one run.

One invocation starts two ``junction run`` processes in a temporary
directory, on free ports on 127.0.0.1 (``tests/harness.py``):

* a **core**: a broker core with security on (users ``app`` and ``pool``) and a
  multi-protocol acceptor ``gateway-in`` (``protocols=STOMP,AMQP``, with the
  ``/queue/`` and ``/topic/`` prefixes), non-persistent unless ``--durable``;
* a **gateway**: a node whose ``<connection-routers>`` has one router ``r``
  (``CLIENT_ID`` key, ``FIRST_ELEMENT``, a pool with the core's ``gateway-in``
  as its one static connector, checked every second) and an acceptor
  ``protocols=STOMP,AMQP;router=r;routerMode=forward`` where clients connect.
  Security is on there too, with the same users: the gateway authenticates
  the client, then forwards its opening to the core, which authenticates it
  again, exactly as in ``tests/integration/test_gateway_stomp.py``.

It waits until the gateway's pool says the core is ready
(``/api/status`` ``routers.r.targets[].ready``), then measures each figure
**direct** (clients connect to the core's ``gateway-in``, the very acceptor
the gateway forwards to) and **gateway** (clients connect to the gateway's
routed acceptor), alternating the two paths (ABBA: direct, gateway, gateway,
direct, ... over ``--runs`` rounds, so a load drift on the machine affects
both alike) after a warm-up of each path:

* **throughput** -- ``--count`` messages (20,000 x ``--size`` 256 B), one
  producer + one consumer in another process: STOMP with stomp.py (``ack:auto``,
  ``activemq.prefetchSize:1000``) and AMQP 1.0 with python-qpid-proton
  (prefetch 1000), through the trial functions of ``bench/stomp_throughput.py``
  and ``bench/amqp_throughput.py`` (so msg/s, p50 and p99 mean exactly what they
  mean there; the stomp.py producer gets TCP_NODELAY, as proton sets it, unless
  ``--stomp-nagle``: with Nagle on, a SEND can wait for a delayed ACK, 40 ms
  p99 outliers on both paths that say nothing about the gateway).  Reported per path as the median of the runs, and the ratio
  gateway / direct.  ``core us/msg`` is the core's CPU over the messages'
  window; ``gw us/msg`` the gateway's CPU over the whole trial (its
  connections' setup included, negligible for 20,000 messages).
* **paced latency** -- ``--latency-count`` (4,000) messages sent at ``--rate``
  (2,000 msg/s): p50 and p99 of send-to-receive; reported as the medians of
  the runs and the latency the gateway *adds* (gateway - direct, ms).
* **new connections per second** -- ``--connections`` (1,000) sequential
  connect + authenticate + disconnect loops with a minimal raw-socket client,
  so the figure is the server side's cost rather than a client library's:
  STOMP ``CONNECT`` (login, passcode, a fresh client-id) -> ``CONNECTED``,
  ``DISCONNECT`` with a receipt -> ``RECEIPT``, close; AMQP SASL header ->
  mechanisms, ``sasl-init`` PLAIN -> outcome ok, AMQP header + ``open`` (a fresh
  container-id) -> header + ``open``, ``close`` -> ``close``, close.  One client,
  one connection at a time: connections/s is 1 / (mean time per loop).  CPU
  per connection of the core and the gateway is reported beside it.
* **routing decisions per second** in process, without any network: the
  routers of ``bench/gateway_routing.py`` (CONSISTENT_HASH miss/hit,
  FIRST_ELEMENT, CONSISTENT_HASH_MODULO with a local-target filter).

With ``--baseline REV`` it does all of this for git revision REV of this
repository (exported to a temporary directory) and for this checkout, each
build with its own core and gateway, every measurement in ``--runs``
alternating rounds of both builds, and prints each build's report and then
the ratios current / baseline with their spread (``bench/gateway_baseline.py``,
``bench/baseline.py``; docs/performance.md, "Comparing two builds").

Targets from the gateway issue, printed with whether each was met: throughput
gateway / direct >= 0.95; added p50 <= 0.1 ms at 2,000 msg/s.  They are
checked, not enforced: the exit status is 1 only when a measurement failed.

    .venv/bin/python bench/gateway.py            # the full run (about 2-3 min)
    .venv/bin/python bench/gateway.py --quick    # smoke run, small counts
    .venv/bin/python bench/gateway.py --json     # plus one JSON line at the end

Bounded: ``--timeout`` (600 s) caps the run; a watchdog stops both processes
and exits with status 3 past the cap; every socket wait has a timeout; the
processes are stopped on any exit (``finally``, Ctrl-C, SIGTERM; the harness
also gives them ``PR_SET_PDEATHSIG``).

Limits: on a machine with 2 cores, the clients, the core and the gateway share
the CPUs, so through the gateway one more process competes for them: the
ratios measure that too, as a deployment on the same host would see it.  CPU
is sampled at CLK_TCK resolution (10 ms).  Sequential connection loops measure
latency-bound connection setup, not the most a server could accept in
parallel.  Each connection loop leaves a socket in TIME_WAIT on the client
side: the default counts stay far below the ephemeral port range.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace

try:  # imported as bench.gateway from the repository root
    from . import (
        amqp_throughput,
        baseline,
        common,
        gateway_baseline,
        gateway_routing,
        stomp_throughput,
    )
except ImportError:  # run as ``python bench/gateway.py``: bench/ is on sys.path
    import amqp_throughput
    import baseline
    import common
    import gateway_baseline

    # the routing figures are timed in this process: on this checkout's junction, not on
    # another checkout that the virtualenv may have installed in editable mode
    sys.path.insert(0, str(common.REPO_ROOT))
    import gateway_routing
    import stomp_throughput

from proton import Data

USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "pool")}
LOGIN, PASSCODE = "app", "app-secret"
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
PATHS = ("direct", "gateway")
PROTOCOLS = ("STOMP", "AMQP")
#: the gateway issue's targets
TARGET_THROUGHPUT_RATIO = 0.95
TARGET_ADDED_P50_MS = 0.1
#: seconds a raw connection loop may wait for any one answer
SOCKET_TIMEOUT = 10.0
#: a paced trial that reached less than this share of --rate measured queueing, not latency
PACE_KEPT = 0.95
NAME = "gateway bench"


# --------------------------------------------------------------------------- the world


@dataclass
class World:
    core: object  # tests.harness.BrokerProcess
    gateway: object
    direct_port: int
    gateway_port: int
    #: the ``--baseline`` build this world runs (``baseline`` / ``current``), or None
    build: str | None = None

    def port(self, path: str) -> int:
        return self.direct_port if path == "direct" else self.gateway_port


def wait_pool_ready(gateway, deadline: common.Deadline, seconds: float = 30.0) -> None:
    """Poll the gateway's /api/status until router r says its target is ready."""
    end = common.Deadline(deadline.cap(seconds))
    last = None
    while True:
        if not gateway.running:
            raise common.BenchError(f"the gateway exited\n{gateway.log_tail(30)}")
        try:
            targets = gateway.status(timeout=2.0)["routers"]["r"]["targets"]
            last = targets
            if targets and all(t.get("ready") for t in targets):
                return
        except (OSError, ValueError, KeyError, TypeError) as e:
            last = repr(e)
        if end.remaining() <= 0:
            raise common.BenchError(f"the gateway's pool never said the core is ready: {last}")
        time.sleep(0.05)


@contextmanager
def world(args, deadline: common.Deadline, build=None):
    """Start the core and the gateway in a temp dir, yield a :class:`World`, stop both.

    ``build`` (``--baseline``): both processes run that build's tree; None runs this checkout.
    """
    h = common.harness()
    tmp = tempfile.mkdtemp(prefix="junction-bench-gateway-")
    env = None if build is None else build.env()
    label = "" if build is None else f"{build.name} "
    gw_in = h.free_port()
    core = h.BrokerProcess(
        tmp,
        name="core",
        security=True,
        users=USERS,
        persistence=args.durable,
        env=env,
        stomp_acceptor_params=PREFIXES,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{gw_in}?protocols=STOMP,AMQP;'
            "anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>"
        ),
        startup_timeout=deadline.cap(60.0),
    )
    routed = h.free_port()
    routers = f"""
    <connectors><connector name="core">tcp://127.0.0.1:{gw_in}</connector></connectors>
    <connection-routers>
      <connection-router name="r">
        <key-type>CLIENT_ID</key-type>
        <policy name="FIRST_ELEMENT"/>
        <pool>
          <username>pool</username>
          <password>pool-secret</password>
          <check-period>1000</check-period>
          <static-connectors><connector-ref>core</connector-ref></static-connectors>
        </pool>
      </connection-router>
    </connection-routers>"""
    gateway = h.BrokerProcess(
        tmp,
        name="gateway",
        security=True,
        users=USERS,
        persistence=False,
        env=env,
        stomp_acceptor_params=PREFIXES,
        extra_core_xml=routers,
        extra_acceptors_xml=(
            f'<acceptor name="routed">tcp://127.0.0.1:{routed}?protocols=STOMP,AMQP;router=r;'
            "routerMode=forward;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>"
        ),
        startup_timeout=deadline.cap(60.0),
    )
    common.CLEANUP.push(f"{label}core", core.stop)
    common.CLEANUP.push(f"{label}gateway", gateway.stop)  # stopped first (LIFO)
    ok = False
    try:
        core.start()
        gateway.start()
        for port in (gw_in, routed):
            end = common.Deadline(deadline.cap(10.0))
            while not h.port_open(port):
                if end.remaining() <= 0:
                    raise common.BenchError(f"port {port} did not open")
                time.sleep(0.05)
        wait_pool_ready(gateway, deadline)
        if args.isolate_gateway:
            isolate(gateway.pid, core.pid)
        print(
            f"{label}core: pid {core.pid}, gateway-in 127.0.0.1:{gw_in}; gateway: pid "
            f"{gateway.pid}, routed 127.0.0.1:{routed}; dir {tmp}",
            file=sys.stderr,
        )
        if build is not None:
            build.check_imported()
        yield World(core, gateway, gw_in, routed, None if build is None else build.name)
        ok = True
    finally:
        if not ok:
            for b in (core, gateway):
                if b.proc is not None:
                    print(b.log_tail(20), file=sys.stderr)
        common.CLEANUP.run(f"{label}gateway")
        common.CLEANUP.run(f"{label}core")
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"{NAME}: directory kept at {tmp}", file=sys.stderr)


def _pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of process *pid* to *cpus* (affinity is per thread on Linux)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            pass


def isolate(gateway_pid: int, core_pid: int) -> None:
    """``--isolate-gateway``: the gateway on the last CPU, the core and every client on the others.

    On a machine with few cores the four processes of a trial (producer,
    consumer, core, gateway) compete for CPU, so "through the gateway" also
    measures the gateway's CPU taken away from the clients and the core.
    Pinned, both paths give the clients and the core the same CPUs, and the
    gateway's hop is measured as it is deployed: on a CPU (or host) of its
    own.  The bench process pins itself before any consumer process starts,
    so they inherit it.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise common.BenchError("--isolate-gateway needs at least 2 CPUs")
    gateway_cpu, rest = {cpus[-1]}, set(cpus[:-1])
    _pin(gateway_pid, gateway_cpu)
    _pin(core_pid, rest)
    os.sched_setaffinity(0, rest)
    print(f"gateway pinned to CPU {cpus[-1]}; core and clients to CPU {','.join(map(str, sorted(rest)))}",
          file=sys.stderr)


# --------------------------------------------------------------------------- message trials


def trial_args(args, rate: float) -> SimpleNamespace:
    """The options the two throughput scripts' ``run_trial`` read."""
    return SimpleNamespace(
        size=args.size,
        rate=rate,
        clients="process",
        # STOMP
        receipts="persistent",
        receipt_window=1000,
        stomp_version="1.2",
        # AMQP
        prefetch=args.prefetch,
        window=1000,
        windowed="durable",
    )


def message_trial(
    w: World, proto: str, path: str, n: int, rate: float, args, deadline, tag: str
) -> dict:
    """One producer/consumer trial of ``n`` messages on ``path``; the scripts' row plus ours."""
    port = w.port(path)
    core_pid, gw_pid = w.core.pid, w.gateway.pid
    targs = trial_args(args, rate)
    g0 = common.proc_cpu_ticks(gw_pid)
    if proto == "STOMP":
        target = stomp_throughput.Target(
            path,
            "127.0.0.1",
            port,
            core_pid,
            vhost="127.0.0.1",
            login=LOGIN,
            passcode=PASSCODE,
            prefetch_headers={"activemq.prefetchSize": str(args.prefetch)},
        )
        row = stomp_throughput.run_trial(target, "auto", args.durable, n, targs, deadline, tag)
    else:
        target = amqp_throughput.Target(
            path, "127.0.0.1", port, core_pid, address="{name}", user=LOGIN, password=PASSCODE
        )
        row = amqp_throughput.run_trial(target, args.durable, n, targs, deadline, tag)
    g1 = common.proc_cpu_ticks(gw_pid)
    row["protocol"] = proto
    row["path"] = path
    row["rate"] = rate
    row["core_cpu_us_per_msg"] = row.pop("broker_cpu_us_per_msg")
    row["gateway_cpu_us_per_msg"] = (
        (g1 - g0) / common.CLK_TCK * 1e6 / n if g0 is not None and g1 is not None else None
    )
    return row


def stomp_producer_nodelay() -> None:
    """Make the STOMP producer of :func:`stomp_throughput.run_trial` set TCP_NODELAY.

    stomp.py leaves Nagle's algorithm on; with ``ack:auto`` and no receipts
    the broker never answers the producer, so a SEND can wait for a delayed
    ACK (up to 40 ms on Linux): noise in p99 on both paths that has nothing
    to do with the gateway.  The producer runs in this process, so wrapping
    the script's ``open_connection`` here reaches it (the consumer, in its own
    process, sends nothing but its SUBSCRIBE).
    """
    original = stomp_throughput.open_connection
    if getattr(original, "nodelay", False):
        return

    def open_connection(target, listener, version, deadline):
        conn = original(target, listener, version, deadline)
        sock = getattr(getattr(conn, "transport", None), "socket", None)
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        return conn

    open_connection.nodelay = True
    stomp_throughput.open_connection = open_connection


# --------------------------------------------------------------------------- raw connection loops


class RawConn:
    """A blocking socket with a read buffer: just enough to speak an opening."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise common.BenchError("connection closed by the server")
        self.buf += chunk

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, end: bytes) -> bytes:
        while (i := self.buf.find(end)) < 0:
            self.fill()
        out = bytes(self.buf[:i])
        del self.buf[: i + len(end)]
        return out

    def close(self) -> None:
        self.sock.close()


def stomp_once(port: int, client_id: str) -> None:
    """CONNECT (login, passcode, client-id) -> CONNECTED; DISCONNECT receipt -> RECEIPT; close."""
    c = RawConn(port)
    try:
        c.sock.sendall(
            (
                f"CONNECT\naccept-version:1.2\nhost:127.0.0.1\nlogin:{LOGIN}\npasscode:{PASSCODE}\n"
                f"client-id:{client_id}\nheart-beat:0,0\n\n\x00"
            ).encode()
        )
        frame = c.read_until(b"\x00").lstrip(b"\r\n")
        if not frame.startswith(b"CONNECTED\n"):
            raise common.BenchError(f"STOMP: no CONNECTED: {frame[:200]!r}")
        c.sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
        frame = c.read_until(b"\x00").lstrip(b"\r\n")
        if not frame.startswith(b"RECEIPT\n"):
            raise common.BenchError(f"STOMP: no RECEIPT for DISCONNECT: {frame[:200]!r}")
    finally:
        c.close()


SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def amqp_frame(frame_type: int, code: int, fields) -> bytes:
    """One frame (doff 2, channel 0): the described list ``code`` of ``fields``."""
    d = Data()
    d.put_described()
    d.enter()
    d.put_ulong(code)
    d.put_list()
    d.enter()
    for put, value in fields:
        getattr(d, put)(value)
    d.exit()
    d.exit()
    body = d.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, frame_type, 0) + body


SASL_INIT = amqp_frame(
    1, 0x41, [("put_symbol", "PLAIN"), ("put_binary", f"\0{LOGIN}\0{PASSCODE}".encode())]
)
AMQP_CLOSE = amqp_frame(0, 0x18, [])


def read_amqp_frame(c: RawConn) -> tuple[int | None, bytes]:
    """The next non-empty frame: (performative code, body)."""
    while True:
        size, doff, _ftype, _ch = struct.unpack(">IBBH", c.read_exact(8))
        rest = c.read_exact(size - 8)
        body = rest[doff * 4 - 8 :]
        if not body:
            continue  # an empty (heartbeat) frame
        d = Data()
        d.decode(body)
        d.next()
        d.enter()
        d.next()
        code = d.get_ulong()
        return code, body


def sasl_outcome_code(body: bytes) -> int | None:
    d = Data()
    d.decode(body)
    d.next()
    d.enter()
    d.next()  # descriptor
    d.next()  # the list
    d.enter()
    return d.get_ubyte() if d.next() is not None else None


def amqp_once(port: int, client_id: str) -> None:
    """SASL PLAIN, open (fresh container-id) -> open, close -> close; then close the socket."""
    c = RawConn(port)
    try:
        c.sock.sendall(SASL_HEADER)
        if c.read_exact(8) != SASL_HEADER:
            raise common.BenchError("AMQP: no SASL header back")
        code, _ = read_amqp_frame(c)
        if code != 0x40:
            raise common.BenchError(f"AMQP: expected sasl-mechanisms, got {code:#x}")
        c.sock.sendall(SASL_INIT)
        code, body = read_amqp_frame(c)
        if code != 0x44 or sasl_outcome_code(body) != 0:
            raise common.BenchError(f"AMQP: SASL failed ({code:#x})")
        open_frame = amqp_frame(0, 0x10, [("put_string", client_id), ("put_string", "127.0.0.1")])
        c.sock.sendall(AMQP_HEADER + open_frame)
        if c.read_exact(8) != AMQP_HEADER:
            raise common.BenchError("AMQP: no AMQP header back")
        code, _ = read_amqp_frame(c)
        if code != 0x10:
            raise common.BenchError(f"AMQP: expected open, got {code:#x}")
        c.sock.sendall(AMQP_CLOSE)
        code, _ = read_amqp_frame(c)
        if code != 0x18:
            raise common.BenchError(f"AMQP: expected close, got {code:#x}")
    finally:
        c.close()


_conn_ids = iter(range(10**9))


def connection_trial(w: World, proto: str, path: str, count: int, deadline) -> dict:
    """``count`` sequential connect/auth/disconnect loops; rate, loop times, CPU per connection."""
    once = stomp_once if proto == "STOMP" else amqp_once
    port = w.port(path)
    times = []
    c0, g0 = common.proc_cpu_ticks(w.core.pid), common.proc_cpu_ticks(w.gateway.pid)
    t0 = time.monotonic_ns()
    for _ in range(count):
        if deadline.remaining() <= 0:
            raise common.BenchError(f"run deadline reached after {len(times)} connections")
        s = time.monotonic_ns()
        once(port, f"bench-conn-{os.getpid()}-{next(_conn_ids)}")
        times.append(time.monotonic_ns() - s)
    elapsed = (time.monotonic_ns() - t0) / 1e9
    c1, g1 = common.proc_cpu_ticks(w.core.pid), common.proc_cpu_ticks(w.gateway.pid)
    times.sort()

    def per_conn(a, b):
        return (b - a) / common.CLK_TCK * 1e6 / count if a is not None and b is not None else None

    return {
        "protocol": proto,
        "path": path,
        "connections": count,
        "conns_per_s": count / elapsed if elapsed > 0 else None,
        "p50_ms": common.percentile(times, 50) / 1e6,
        "p99_ms": common.percentile(times, 99) / 1e6,
        "core_cpu_us_per_conn": per_conn(c0, c1),
        "gateway_cpu_us_per_conn": per_conn(g0, g1),
    }


# --------------------------------------------------------------------------- routing in process


def routing_figures(keys: int, repeat: int) -> list[dict]:
    """bench/gateway_routing.py's routers, timed the same way; one row per router and path."""
    config = gateway_routing.parse_config(gateway_routing.config_text(), file="bench.xml", env={})
    connectors = {c.name: c for c in config.connectors}
    key_list = [f"client-{i}" for i in range(keys)]
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for rc in config.connection_routers:
            clock = gateway_routing.Clock()
            service = gateway_routing.build_router(
                rc,
                connectors=connectors,
                probe=gateway_routing.ReadyProbe(),
                clock=clock,
                local_target=gateway_routing.Target(local=True, ready=True, node_id="local"),
                cache_directory=cache_dir,
            )
            service.start()
            try:
                clock.advance(1.5)  # the monitors' first checks: every target ready
                if service.cache is not None:
                    miss = gateway_routing.time_decisions_fresh(service, key_list)
                    hit = gateway_routing.time_decisions(service.router, key_list, repeat)
                    rows.append({"router": rc.name, "path": "cache miss", "us": miss})
                    rows.append({"router": rc.name, "path": "cache hit", "us": hit})
                else:
                    us = gateway_routing.time_decisions(service.router, key_list, repeat)
                    rows.append({"router": rc.name, "path": "-", "us": us})
            finally:
                service.stop()
    for r in rows:
        r["decisions_per_s"] = 1e6 / r["us"] if r["us"] > 0 else None
    return rows


# --------------------------------------------------------------------------- running


def order(run: int) -> tuple[str, ...]:
    """ABBA: direct first in even rounds, gateway first in odd ones."""
    return PATHS if run % 2 == 0 else PATHS[::-1]


def echo(kind: str, row: dict) -> None:
    build = f"{row['build']:8} " if "build" in row else ""
    head = f"  {build}{kind:11} {row['protocol']:5} {row['path']:7}"
    if "error" in row:
        print(f"{head} ERROR: {(row['error'].splitlines() or [''])[0]}", file=sys.stderr)
    elif kind == "connections":
        print(
            f"{head} {row['conns_per_s']:9,.0f} conn/s  p50 {row['p50_ms']:.2f} ms", file=sys.stderr
        )
    else:
        print(
            f"{head} {row['msgs_per_s']:9,.0f} msg/s  p50 {row['p50_ms']:.3f} ms  "
            f"p99 {row['p99_ms']:.3f} ms",
            file=sys.stderr,
        )


def run_all(args, deadline: common.Deadline, builds=None) -> dict:
    """Every measurement, on this checkout or (``--baseline``) on each of ``builds``.

    With builds, each has a world (core and gateway) up for the whole run;
    every round runs both, the first of the two alternating between rounds,
    and each world's paths ABBA as without builds.
    """
    out: dict = {
        "throughput": [],
        "latency": [],
        "connections": [],
        "routing": [],
        "rate": args.rate,
        "loadavg_start": os.getloadavg()[0],
    }
    with ExitStack() as stack:
        worlds = [stack.enter_context(world(args, deadline, b)) for b in builds or [None]]
        watch = None
        if builds:
            watch = baseline.TrialWatch({w.build: [w.core.pid, w.gateway.pid] for w in worlds})

        def trial(w: World, fn, key: dict, *fn_args) -> dict:
            call = partial(fn, w, key["protocol"], key["path"], *fn_args)
            if watch is not None:
                call = partial(watch.run, w.build, call)
            row = common.guarded(call, key, deadline)
            if w.build is not None:
                row["build"] = w.build
            return row

        def measured(kind: str, proto: str, fn, *fn_args) -> None:
            """``--runs`` rounds of ``fn(w, proto, path, *fn_args)`` on both paths, ABBA."""
            for run in range(args.runs):
                for w in baseline.order(worlds, run):
                    for path in order(run):
                        row = trial(w, fn, {"protocol": proto, "path": path, "run": run}, *fn_args)
                        row["run"] = run
                        out[kind].append(row)
                        echo(kind, row)

        def warm_up(proto: str, fn, *fn_args) -> None:
            for w in worlds:
                for path in PATHS:
                    row = trial(w, fn, {"protocol": proto, "path": path}, *fn_args)
                    if "error" in row:
                        echo("warm-up", row)

        for proto in PROTOCOLS:
            # warm-up of both paths: the clients' imports, the cores' first queues
            if args.warmup:
                warm_up(proto, message_trial, args.warmup, 0, args, deadline, ".warm")
            measured("throughput", proto, message_trial, args.count, 0, args, deadline, "")
            measured(
                "latency",
                proto,
                message_trial,
                args.latency_count,
                args.rate,
                args,
                deadline,
                ".lat",
            )
        for proto in PROTOCOLS:
            warm_up(proto, connection_trial, 20, deadline)
            measured("connections", proto, connection_trial, args.connections, deadline)
        for w in worlds:
            for b in (w.core, w.gateway):
                if not b.running:
                    raise common.BenchError(f"{b.name} exited during the run\n{b.log_tail(20)}")
    out["loadavg_end"] = os.getloadavg()[0]
    if builds:  # each build times its routing in its own process: bench/gateway_baseline.py
        out["idle_note"], out["idle_build_cpu"] = watch.note(), watch.share
        out["other_cpu"] = watch.others
    else:
        out["routing"] = routing_figures(args.routing_keys, args.routing_repeat)
    return out


# --------------------------------------------------------------------------- summary


def median_of(rows: list[dict], proto: str, path: str, field: str):
    vals = [
        r[field]
        for r in rows
        if r["protocol"] == proto
        and r["path"] == path
        and "error" not in r
        and r.get(field) is not None
    ]
    return statistics.median(vals) if vals else None


def summarize(out: dict) -> dict:
    """Per protocol: the medians per path, the ratios and the added latencies."""
    s: dict = {}
    for proto in PROTOCOLS:
        d: dict = {}
        for kind, fields in (
            (
                "throughput",
                ("msgs_per_s", "p50_ms", "p99_ms", "core_cpu_us_per_msg", "gateway_cpu_us_per_msg"),
            ),
            ("latency", ("p50_ms", "p99_ms", "core_cpu_us_per_msg", "gateway_cpu_us_per_msg")),
            (
                "connections",
                ("conns_per_s", "p50_ms", "core_cpu_us_per_conn", "gateway_cpu_us_per_conn"),
            ),
        ):
            d[kind] = {
                path: {f: median_of(out[kind], proto, path, f) for f in fields} for path in PATHS
            }
        t = d["throughput"]
        d["throughput_ratio"] = common.ratio(t["gateway"]["msgs_per_s"], t["direct"]["msgs_per_s"])
        lat = d["latency"]
        for q in ("p50", "p99"):
            g, x = lat["gateway"][f"{q}_ms"], lat["direct"][f"{q}_ms"]
            d[f"added_{q}_ms"] = g - x if g is not None and x is not None else None
        c = d["connections"]
        d["connections_ratio"] = common.ratio(
            c["gateway"]["conns_per_s"], c["direct"]["conns_per_s"]
        )
        paced = [
            r["msgs_per_s"]
            for r in out["latency"]
            if r["protocol"] == proto and "error" not in r and r.get("msgs_per_s") is not None
        ]
        d["slowest_paced_msgs_per_s"] = min(paced) if paced else None
        d["pace_kept"] = bool(paced) and min(paced) >= PACE_KEPT * out["rate"]
        d["throughput_met"] = (
            None
            if d["throughput_ratio"] is None
            else d["throughput_ratio"] >= TARGET_THROUGHPUT_RATIO
        )
        d["added_p50_met"] = (
            None
            if d["added_p50_ms"] is None or not d["pace_kept"]
            else d["added_p50_ms"] <= TARGET_ADDED_P50_MS
        )
        s[proto] = d
    return s


command_line = common.command_line


def verdict(met) -> str:
    return "n/a" if met is None else ("met" if met else "NOT met")


def print_report(out: dict, s: dict, args) -> None:
    f = common.fmt
    print(f"\ncommand: {command_line()}")
    print(
        f"gateway (routerMode=forward, FIRST_ELEMENT, one core) vs direct to the same core; "
        f"security on; {'durable' if args.durable else 'non-durable'}; {os.cpu_count()} CPUs; "
        f"{args.runs} run(s) per path, ABBA, medians; warm-up {args.warmup}; "
        f"load average {out['loadavg_start']:.2f} at start, {out['loadavg_end']:.2f} at the end; "
        + ("gateway on a CPU of its own (--isolate-gateway)" if args.isolate_gateway else "no CPU pinning")
    )
    print(
        f"\nthroughput: {args.count:,} x {args.size} B, one producer + one consumer, "
        f"prefetch {args.prefetch}"
    )
    print(
        f"{'proto':5}  {'path':7}  {'msg/s':>9}  {'p50 ms':>7}  {'p99 ms':>7}  "
        f"{'core us/msg':>11}  {'gw us/msg':>9}  runs msg/s"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["throughput"][path]
            runs = [
                "ERR" if "error" in r else f"{r['msgs_per_s']:,.0f}"
                for r in out["throughput"]
                if r["protocol"] == proto and r["path"] == path
            ]
            print(
                f"{proto:5}  {path:7}  {f(m['msgs_per_s'], ',.0f'):>9}  {f(m['p50_ms'], '.2f'):>7}  "
                f"{f(m['p99_ms'], '.2f'):>7}  {f(m['core_cpu_us_per_msg'], '.1f'):>11}  "
                f"{f(m['gateway_cpu_us_per_msg'], '.1f'):>9}  {' '.join(runs)}"
            )
    print(f"\npaced latency: {args.latency_count:,} messages at {args.rate:g} msg/s")
    print(
        f"{'proto':5}  {'path':7}  {'p50 ms':>7}  {'p99 ms':>7}  {'gw us/msg':>9}  "
        f"{'msg/s':>6}  runs p50 ms"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["latency"][path]
            achieved = median_of(out["latency"], proto, path, "msgs_per_s")
            runs = [
                "ERR" if "error" in r else f"{r['p50_ms']:.3f}"
                for r in out["latency"]
                if r["protocol"] == proto and r["path"] == path
            ]
            print(
                f"{proto:5}  {path:7}  {f(m['p50_ms'], '.3f'):>7}  {f(m['p99_ms'], '.3f'):>7}  "
                f"{f(m['gateway_cpu_us_per_msg'], '.1f'):>9}  {f(achieved, ',.0f'):>6}  "
                f"{' '.join(runs)}"
            )
    print(
        f"\nnew connections: {args.connections:,} sequential connect + authenticate + disconnect "
        f"(raw socket client)"
    )
    print(
        f"{'proto':5}  {'path':7}  {'conn/s':>7}  {'p50 ms':>7}  {'core us/conn':>12}  "
        f"{'gw us/conn':>10}"
    )
    for proto in PROTOCOLS:
        for path in PATHS:
            m = s[proto]["connections"][path]
            print(
                f"{proto:5}  {path:7}  {f(m['conns_per_s'], ',.0f'):>7}  {f(m['p50_ms'], '.2f'):>7}  "
                f"{f(m['core_cpu_us_per_conn'], ',.0f'):>12}  "
                f"{f(m['gateway_cpu_us_per_conn'], ',.0f'):>10}"
            )
    print(
        f"\nrouting decisions in process ({args.routing_keys:,} client ids, "
        f"{gateway_routing.TARGETS} ready targets, best of {args.routing_repeat})"
    )
    print(f"{'router':8}  {'path':10}  {'us/decision':>11}  {'decisions/s':>11}")
    for r in out["routing"]:
        print(
            f"{r['router']:8}  {r['path']:10}  {r['us']:11.2f}  {f(r['decisions_per_s'], ',.0f'):>11}"
        )
    print("\ngateway / direct")
    print(f"{'figure':38}  {'STOMP':>8}  {'AMQP':>8}  target")
    rows = [
        (
            "throughput ratio (msg/s)",
            "throughput_ratio",
            ".3f",
            f">= {TARGET_THROUGHPUT_RATIO}",
            "throughput_met",
        ),
        (
            f"added p50 at {args.rate:g} msg/s (ms)",
            "added_p50_ms",
            "+.3f",
            f"<= {TARGET_ADDED_P50_MS} ms",
            "added_p50_met",
        ),
        (f"added p99 at {args.rate:g} msg/s (ms)", "added_p99_ms", "+.3f", "-", None),
        ("new connections ratio (conn/s)", "connections_ratio", ".3f", "-", None),
    ]
    for label, key, spec, target, met in rows:
        cells = [f(s[p][key], spec) for p in PROTOCOLS]
        verdicts = ""
        if met:
            verdicts = "  " + ", ".join(
                f"{p} "
                + (
                    "n/a (pace not kept)"
                    if met == "added_p50_met" and not s[p]["pace_kept"]
                    else verdict(s[p][met])
                )
                for p in PROTOCOLS
            )
        print(f"{label:38}  {cells[0]:>8}  {cells[1]:>8}  {target}{verdicts}")
    for p in PROTOCOLS:
        if not s[p]["pace_kept"] and s[p]["slowest_paced_msgs_per_s"] is not None:
            print(
                f"note: {p} paced trials reached only {s[p]['slowest_paced_msgs_per_s']:,.0f} of "
                f"{args.rate:g} msg/s: their latency is queueing behind busy clients, not the "
                f"gateway's; re-run on a quieter machine or with a lower --rate"
            )
    print(common.calibration_line())
    errors = [r for k in ("throughput", "latency", "connections") for r in out[k] if "error" in r]
    for r in errors:
        print(
            f"error: {r['protocol']} {r['path']} run {r.get('run')}: {r['error'].splitlines()[0]}"
        )


def json_record(out: dict, s, args) -> dict:
    """The ``--json`` line's record: the settings, the summary ``s`` and every row."""
    return {
        "bench": "gateway",
        "command": command_line(),
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "warmup": args.warmup,
        "prefetch": args.prefetch,
        "durable": args.durable,
        "isolate_gateway": args.isolate_gateway,
        "rate": args.rate,
        "latency_count": args.latency_count,
        "connections_per_trial": args.connections,
        "cpus": os.cpu_count(),
        "targets": {
            "throughput_ratio": TARGET_THROUGHPUT_RATIO,
            "added_p50_ms": TARGET_ADDED_P50_MS,
        },
        "summary": s,
        **out,
    }


def print_json(out: dict, s: dict, args) -> None:
    import json

    print(json.dumps(json_record(out, s, args), separators=(",", ":")))


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="STOMP and AMQP through the gateway (forward) against the same core directly.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--count", "-n", type=int, default=20_000, help="messages per throughput trial")
    p.add_argument("--size", type=int, default=256, help="body bytes")
    p.add_argument("--runs", type=int, default=2, help="measured trials per path (interleaved)")
    p.add_argument("--warmup", type=int, default=2000, help="messages per path before measuring")
    p.add_argument("--prefetch", type=int, default=1000, help="consumer prefetch (STOMP and AMQP)")
    p.add_argument("--durable", action="store_true", help="persistence on, durable messages")
    p.add_argument("--rate", type=float, default=2000.0, help="msg/s of the paced latency trials")
    p.add_argument("--latency-count", type=int, default=4000, help="messages per latency trial")
    p.add_argument("--connections", type=int, default=1000, help="connections per trial")
    p.add_argument(
        "--stomp-nagle",
        action="store_true",
        help="leave Nagle on for the stomp.py producer (default: TCP_NODELAY, as proton sets)",
    )
    p.add_argument(
        "--isolate-gateway",
        action="store_true",
        help="pin the gateway to the last CPU and the core and clients to the others (both paths)",
    )
    p.add_argument("--routing-keys", type=int, default=10_000)
    p.add_argument("--routing-repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="smoke run: small counts, one run")
    p.add_argument("--timeout", type=float, default=600.0, help="cap on the whole run, seconds")
    p.add_argument("--json", action="store_true", help="also print one JSON line")
    p.add_argument("--keep", action="store_true", help="keep the brokers' directory")
    baseline.add_options(p, rounds=False)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        args.count, args.runs, args.warmup = 2000, 1, 200
        args.latency_count, args.connections = 400, 50
        args.routing_keys, args.routing_repeat = 1000, 1
    if (
        min(args.count, args.size, args.runs, args.prefetch, args.latency_count, args.connections)
        <= 0
    ):
        print("counts, --size, --runs and --prefetch must be positive", file=sys.stderr)
        return 2
    if args.rate <= 0 or args.warmup < 0:
        print("--rate must be positive and --warmup not negative", file=sys.stderr)
        return 2
    status = baseline.dispatch(
        args, parser, lambda: gateway_baseline.run(args, sys.modules[__name__])
    )
    if status is not None:
        return status
    if not args.stomp_nagle:
        stomp_producer_nodelay()

    def report(out: dict) -> None:
        s = summarize(out)
        print_report(out, s, args)
        if args.json:
            print_json(out, s, args)

    return common.run_guarded(NAME, args, run_all, report, failed)


def failed(out: dict) -> bool:
    """Whether a measurement went wrong (exit status 1)."""
    return any("error" in r for k in ("throughput", "latency", "connections") for r in out[k])


if __name__ == "__main__":
    sys.exit(main())
