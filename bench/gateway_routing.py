"""Routing decisions per second, in process: the gateway's router without any network.

Builds routers the way the gateway does (``junction.gateway.build`` from a
parsed ``<connection-routers>``; a fake readiness probe marks the pool's
targets ready, on a Clock) and times ``ConnectionRouter.get_target`` for
10,000 distinct client ids, by process CPU time, best of ``--repeat``:

* ``CONSISTENT_HASH`` over 10 targets, default hashing (rendezvous over
  MurmurHash3), first decision per key (cache miss) and again (cache hit);
* the same with ``HASH=FNV1A`` (Artemis's ring) as the baseline ratio;
* ``FIRST_ELEMENT`` over 10 targets, no cache;
* ``CONSISTENT_HASH_MODULO`` with ``local-target-filter`` (the sharding setup:
  no pool, every decision local or refused).

plus a calibration loop to compare machines.  Throughput through the gateway
(forwarding) is measured by the gateway benchmark once forwarding exists.

    python bench/gateway_routing.py [--keys 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from twisted.internet.task import Clock

try:
    from junction.config.loader import parse_config
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from junction.config.loader import parse_config

from junction.gateway.build import build_router
from junction.gateway.pool import ProbeResult
from junction.routing.targets import Target

try:
    from . import common  # imported as bench.gateway_routing from the repository root
except ImportError:  # run as ``python bench/gateway_routing.py``: bench/ is on sys.path
    import common

TARGETS = 10


def config_text() -> str:
    connectors = "".join(
        f'<connector name="c{i}">tcp://127.0.0.1:{61000 + i}</connector>' for i in range(TARGETS)
    )
    refs = "".join(f"<connector-ref>c{i}</connector-ref>" for i in range(TARGETS))
    pool = f"<pool><check-period>1000</check-period><static-connectors>{refs}</static-connectors></pool>"
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<connectors>{connectors}</connectors>
<connection-routers>
  <connection-router name="hash"><key-type>CLIENT_ID</key-type>
    <policy name="CONSISTENT_HASH"/><cache/>{pool}</connection-router>
  <connection-router name="ring"><key-type>CLIENT_ID</key-type>
    <policy name="CONSISTENT_HASH"><property key="HASH" value="FNV1A"/></policy><cache/>{pool}</connection-router>
  <connection-router name="first"><key-type>CLIENT_ID</key-type>
    <policy name="FIRST_ELEMENT"/>{pool}</connection-router>
  <connection-router name="shard"><key-type>CLIENT_ID</key-type>
    <local-target-filter>NULL|0</local-target-filter>
    <policy name="CONSISTENT_HASH_MODULO"><property key="MODULO" value="2"/></policy></connection-router>
</connection-routers></core></configuration>"""


class ReadyProbe:
    """Every target is an active core named after its connector."""

    def check(self, target):
        from twisted.internet import defer

        return defer.succeed(ProbeResult(active=True, node_id=f"node-{target.name}", connection_count=0))

    def release(self, target) -> None:
        pass


def time_decisions(router, keys, repeat: int) -> float:
    """Best CPU microseconds per decision over the keys."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for key in keys:
            router.get_target(client_id=key)
        best = min(best, time.process_time() - started)
    return best / len(keys) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    config = parse_config(config_text(), file="bench.xml", env={})
    connectors = {c.name: c for c in config.connectors}
    keys = [f"client-{i}" for i in range(args.keys)]
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for router_config in config.connection_routers:
            clock = Clock()
            service = build_router(
                router_config,
                connectors=connectors,
                probe=ReadyProbe(),
                clock=clock,
                local_target=Target(local=True, ready=True, node_id="local"),
                cache_directory=cache_dir,
            )
            service.start()
            clock.advance(1.5)  # the monitors' first checks: every target ready
            router = service.router
            if service.cache is not None:
                miss = time_decisions_fresh(service, keys)
                hit = time_decisions(router, keys, args.repeat)
                rows.append((router_config.name, "cache miss", miss))
                rows.append((router_config.name, "cache hit", hit))
            else:
                rows.append((router_config.name, "-", time_decisions(router, keys, args.repeat)))
            service.stop()
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(f"routing decisions, {args.keys:,} client ids, {TARGETS} ready targets, best of {args.repeat}")
    print(f"{'router':8} {'path':11} {'us/decision':>12} {'decisions/s':>12}")
    for name, path, us in rows:
        print(f"{name:8} {path:11} {us:12.2f} {1e6 / us:12,.0f}")
    by = {(n, p): us for n, p, us in rows}
    print(
        "ratio hash/ring (cache miss, lower is faster): "
        f"{by[('hash', 'cache miss')] / by[('ring', 'cache miss')]:.2f}"
    )
    print(common.calibration_line())


def time_decisions_fresh(service, keys) -> float:
    """CPU microseconds per first decision (every key a cache miss)."""
    started = time.process_time()
    for key in keys:
        service.router.get_target(client_id=key)
    return (time.process_time() - started) / len(keys) * 1e6


if __name__ == "__main__":
    main()
