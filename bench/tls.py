#!/usr/bin/env python3
"""What TLS costs at the edge: handshakes per second, and TLS-forwarded STOMP against plain forwarding.

One invocation starts, on free ports on 127.0.0.1 (``tests/harness.py``):

* a **core**: a broker core (security on, non-persistent) with a plain
  ``gateway-in`` acceptor (STOMP, AMQP);
* a **gateway** forwarding to it (``FIRST_ELEMENT``, one target) with three
  acceptors on the same router: ``plain`` (TCP), ``ecdsa`` (TLS, an ECDSA
  P-256 certificate) and ``rsa`` (TLS, an RSA 2048 certificate), certificates
  made with trustme.

Figures, each path measured in the same run:

* **handshakes per second**: ``--workers`` client processes (2) each doing
  full TLS 1.3 handshakes (no session resumption) and closing, for
  ``--seconds`` (5), on the ECDSA and the RSA acceptor.  The gateway's CPU per
  handshake is read from ``/proc`` (CLK_TCK resolution).
* **new connections per second**: the same loop with a STOMP login on each
  connection (``CONNECT`` routed and forwarded to the core, ``CONNECTED``
  back), over TLS (ECDSA) and over plain TCP: the ratio is what TLS adds to
  a client's connection setup.
* **STOMP throughput**: ``--count`` (20,000) 256-byte messages, one stomp.py
  producer and one consumer (``ack:auto``, prefetch 1000), through the
  gateway over TLS (ECDSA) and over plain TCP, interleaved over ``--runs`` (2)
  rounds, medians; the ratio TLS / plain and the gateway's CPU per message.

    .venv/bin/python bench/tls.py [--quick] [--json]

Limits: clients and servers share the machine's CPUs, so a handshake figure
is what the gateway does while the clients make their half of each
handshake.  TLS connections stay with the reactor (the relay engine takes
plain TCP only), so the throughput ratio includes that difference too.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import ssl
import statistics
import sys
import tempfile
import time

try:
    from . import common, stomp_throughput
except ImportError:
    import common
    import stomp_throughput

import trustme

USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "pool")}
CONNECT = b"CONNECT\naccept-version:1.2\nhost:127.0.0.1\nlogin:app\npasscode:app-secret\n\n\x00"
NAME = "tls bench"


def make_certs(directory: str) -> dict:
    files = {}
    for kind, key_type in (("ecdsa", trustme.KeyType.ECDSA), ("rsa", trustme.KeyType.RSA)):
        ca = trustme.CA(key_type=key_type)
        cert = ca.issue_cert("localhost", "127.0.0.1", key_type=key_type)
        files[kind] = os.path.join(directory, f"{kind}.pem")
        cert.private_key_and_cert_chain_pem.write_to_path(files[kind])
        files[f"{kind}-ca"] = os.path.join(directory, f"{kind}-ca.pem")
        ca.cert_pem.write_to_path(files[f"{kind}-ca"])
    return files


def start_world(args, deadline, tmp: str) -> dict:
    h = common.harness()
    certs = make_certs(tmp)
    core_port = h.free_port()
    core = h.BrokerProcess(
        tmp, name="core", security=True, users=USERS, persistence=False,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{core_port}?protocols=STOMP,AMQP;'
            "anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>"
        ),
        startup_timeout=deadline.cap(60.0),
    )
    ports = {k: h.free_port() for k in ("plain", "ecdsa", "rsa")}
    common_params = "protocols=STOMP,AMQP;router=r;routerMode=forward;anycastPrefix=/queue/;multicastPrefix=/topic/"
    acceptors = "".join(
        f'<acceptor name="{k}">tcp://127.0.0.1:{port}?{common_params}'
        + (f";sslEnabled=true;keyStorePath={certs[k]}" if k != "plain" else "")
        + "</acceptor>"
        for k, port in ports.items()
    )
    gateway = h.BrokerProcess(
        tmp, name="gateway", security=True, users=USERS, persistence=False,
        extra_core_xml=h.router_xml({"core": f"tcp://127.0.0.1:{core_port}"}, check_period=1000),
        extra_acceptors_xml=acceptors,
        startup_timeout=deadline.cap(60.0),
    )
    common.CLEANUP.push("core", core.stop)
    common.CLEANUP.push("gateway", gateway.stop)
    core.start()
    gateway.start()
    end = common.Deadline(deadline.cap(30.0))
    while not gateway.status()["routers"]["r"]["targets"][0]["ready"]:
        if end.remaining() <= 0:
            raise common.BenchError("the gateway's target did not become ready")
        time.sleep(0.05)
    return {"core": core, "gateway": gateway, "ports": ports, "certs": certs}


# --------------------------------------------------------------------------- handshakes
def _handshake_worker(port: int, ca: str | None, login: bool, seconds: float, out) -> None:
    """Connections back to back for *seconds*: TCP (+ a full TLS 1.3 handshake when *ca*), then
    with *login* a STOMP CONNECT answered by CONNECTED (routed and forwarded to the core), close."""
    ctx = None
    if ca is not None:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    done = failed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            if ctx is not None:
                sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")  # no session reuse: full handshake
            with sock:
                if login:
                    sock.sendall(CONNECT)
                    if not sock.recv(4096).startswith(b"CONNECTED"):
                        raise OSError("no CONNECTED")
            done += 1
        except OSError:
            failed += 1
    out.put((done, failed))


def handshake_rate(world: dict, kind: str, args, login: bool) -> dict:
    port = world["ports"][kind]
    ca = world["certs"].get(f"{kind}-ca")
    gw = world["gateway"].pid
    queue = multiprocessing.Queue()
    workers = [
        multiprocessing.Process(target=_handshake_worker, args=(port, ca, login, args.seconds, queue))
        for _ in range(args.workers)
    ]
    g0 = common.proc_cpu_ticks(gw)
    t0 = time.monotonic()
    for w in workers:
        w.start()
    results = [queue.get(timeout=args.seconds + 30) for _ in workers]
    elapsed = time.monotonic() - t0
    for w in workers:
        w.join(10)
    g1 = common.proc_cpu_ticks(gw)
    done = sum(r[0] for r in results)
    failed = sum(r[1] for r in results)
    return {
        "path": kind,
        "login": login,
        "connections": done,
        "failed": failed,
        "per_s": done / elapsed,
        "gateway_cpu_us_per_conn": (g1 - g0) / common.CLK_TCK * 1e6 / done if done else None,
    }


# --------------------------------------------------------------------------- throughput
def throughput(world: dict, kind: str, args, deadline, tag: str) -> dict:
    port = world["ports"][kind]
    target = stomp_throughput.Target(
        kind, "127.0.0.1", port, world["core"].pid, vhost="127.0.0.1", login="app", passcode="app-secret",
        prefetch_headers={"activemq.prefetchSize": "1000"},
        ssl={"ca_certs": world["certs"][f"{kind}-ca"]} if kind != "plain" else None,
    )
    targs = argparse.Namespace(
        size=256, rate=0, clients="process", receipts="persistent", receipt_window=1000, stomp_version="1.2"
    )
    gw = world["gateway"].pid
    g0 = common.proc_cpu_ticks(gw)
    row = stomp_throughput.run_trial(target, "auto", False, args.count, targs, deadline, tag)
    g1 = common.proc_cpu_ticks(gw)
    return {
        "path": kind,
        "msgs_per_s": row["msgs_per_s"],
        "p50_ms": row["p50_ms"],
        "gateway_cpu_us_per_msg": (g1 - g0) / common.CLK_TCK * 1e6 / args.count,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per handshake trial")
    p.add_argument("--workers", type=int, default=2, help="client processes doing handshakes")
    p.add_argument("--count", "-n", type=int, default=20_000, help="messages per throughput trial")
    p.add_argument("--runs", type=int, default=2, help="throughput trials per path (interleaved)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 s handshake trials, 2,000 messages, 1 run")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.count, args.runs = 1.0, 2000, 1
    deadline = common.Deadline(args.timeout)
    common.start_watchdog(args.timeout, NAME)
    tmp = tempfile.mkdtemp(prefix="junction-bench-tls-")
    try:
        world = start_world(args, deadline, tmp)
        calibration = common.calibration_line()
        shakes = [handshake_rate(world, kind, args, login=False) for kind in ("ecdsa", "rsa")]
        logins = [handshake_rate(world, kind, args, login=True) for kind in ("plain", "ecdsa")]
        rows = {"plain": [], "ecdsa": []}
        throughput(world, "plain", argparse.Namespace(count=2000), deadline, ".warm")
        throughput(world, "ecdsa", argparse.Namespace(count=2000), deadline, ".warm")
        for run in range(args.runs):
            for kind in (("plain", "ecdsa") if run % 2 == 0 else ("ecdsa", "plain")):
                rows[kind].append(throughput(world, kind, args, deadline, f".{run}"))
    finally:
        common.CLEANUP.run("gateway")
        common.CLEANUP.run("core")
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    print(f"{os.cpu_count()} CPUs; {calibration}")
    print(f"\nTLS 1.3 handshakes on a gateway acceptor ({args.workers} client processes, {args.seconds:g} s each)")
    print("key           handshakes/s   gateway us/handshake   failed")
    for r in shakes:
        label = {"ecdsa": "ECDSA P-256", "rsa": "RSA 2048"}[r["path"]]
        print(f"{label:12s} {r['per_s']:14,.0f} {common.fmt(r['gateway_cpu_us_per_conn'], '22.0f')} {r['failed']:8d}")
    print("\nnew STOMP connections through the gateway (connect, [TLS,] CONNECT -> CONNECTED forwarded, close)")
    print("path     conns/s   gateway us/conn   failed")
    for r in logins:
        print(f"{r['path']:6s} {r['per_s']:9,.0f} {common.fmt(r['gateway_cpu_us_per_conn'], '17.0f')} {r['failed']:8d}")
    print(f"  ratio TLS (ECDSA) / plain: {logins[1]['per_s'] / logins[0]['per_s']:.3f}")
    med = {k: statistics.median(r["msgs_per_s"] for r in v) for k, v in rows.items()}
    cpu = {k: statistics.median(r["gateway_cpu_us_per_msg"] for r in v) for k, v in rows.items()}
    print(f"\nSTOMP through the gateway, {args.count:,} x 256 B, {args.runs} run(s) per path, medians")
    print("path     msg/s   gateway us/msg   runs")
    for k in rows:
        runs = " ".join(f"{r['msgs_per_s']:,.0f}" for r in rows[k])
        print(f"{k:6s} {med[k]:8,.0f} {cpu[k]:16.1f}   {runs}")
    print(f"throughput ratio TLS (ECDSA) / plain: {med['ecdsa'] / med['plain']:.3f}")
    if args.json:
        print(json.dumps({"bench": "tls", "handshakes": shakes, "logins": logins, "throughput": rows,
                          "ratio": med["ecdsa"] / med["plain"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
