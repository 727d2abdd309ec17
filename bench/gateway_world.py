"""The gateway bench's world: a broker core and a gateway in front of it, started and stopped.

``bench/gateway.py`` measures every figure on two paths into one core:
``direct`` (the core's ``gateway-in`` acceptor, ``protocols=STOMP,AMQP``) and
``gateway`` (the gateway's routed acceptor, ``routerMode=forward``, whose
router ``r`` has that very acceptor as its one target).  :func:`world` starts
both ``junction run`` processes (``tests/harness.py``) of one build in a
temporary directory, waits until the gateway's pool says the core is ready,
and stops both on any exit; :func:`isolate` pins the gateway to a CPU of
its own (``--isolate-gateway``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

try:
    from . import common  # imported as bench.gateway_world from the repository root
except ImportError:  # run from a script in bench/: bench/ is on sys.path
    import common

#: both nodes' users (name -> password, role): the clients' and the gateway pool's
USERS = {"app": ("app-secret", "app"), "pool": ("pool-secret", "pool")}
#: what the clients log in with
LOGIN, PASSCODE = "app", "app-secret"
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
#: the two ways into the core, and the two protocols measured on each
PATHS = ("direct", "gateway")
PROTOCOLS = ("STOMP", "AMQP")
#: the bench's name in its messages
NAME = "gateway bench"


@dataclass
class World:
    """One build's core and gateway, and the port of each path into the core."""

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

