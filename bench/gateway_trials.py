"""The gateway bench's trials of messages and of routing decisions.

* :func:`message_trial` -- one producer and one consumer on one path,
  through the trial functions of ``bench/stomp_throughput.py`` (stomp.py)
  and ``bench/amqp_throughput.py`` (python-qpid-proton), so msg/s, p50 and
  p99 mean exactly what they mean there; the gateway's CPU beside the core's;
* :func:`stomp_producer_nodelay` -- the stomp.py producer with TCP_NODELAY;
* :func:`routing_figures` -- the routers of ``bench/gateway_routing.py``,
  timed in this process, without any network.
"""

from __future__ import annotations

import socket
import tempfile
from types import SimpleNamespace

try:  # imported as bench.gateway_trials from the repository root
    from . import amqp_client, amqp_throughput, common, gateway_routing, stomp_throughput
    from .gateway_world import LOGIN, PASSCODE, World
except ImportError:  # run from a script in bench/: bench/ (and the checkout, for junction) on sys.path
    import amqp_client
    import amqp_throughput
    import common
    import gateway_routing
    import stomp_throughput
    from gateway_world import LOGIN, PASSCODE, World


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
        target = amqp_client.Target(
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

