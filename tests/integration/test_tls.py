"""TLS acceptors (``sslEnabled=true``) with real processes and real clients.

Every test starts its own ``junction run`` process(es) through
:mod:`tests.harness` in its own directory, with certificates made by
``trustme`` (:mod:`tests.tlscerts`) written next to them and named in the
acceptor URLs by absolute path.

* stomp.py and python-qpid-proton talk to a broker core over TLS with the
  server certificate verified against the test CA and the host name checked
  (stomp.py's transport wraps its socket with ``ssl.PROTOCOL_TLS_CLIENT``,
  ``CERT_REQUIRED``, ``server_hostname`` = the host it connects to, which is
  also the SNI name; proton sends ``sni=`` or else the URL host as SNI and
  checks it with ``VERIFY_PEER_NAME``).
* A gateway terminates TLS and routes on the SNI host name (``SNI_HOST``).
* Python's :mod:`ssl` checks the precise things: SNI required / filtered, the
  certificate chosen per SNI name, client certificates, protocol versions.
  A connection counts as *accepted* when a STOMP ``CONNECT`` sent over it gets
  ``CONNECTED`` back; a client certificate refused in TLS 1.3 is only reported
  after the client's side of the handshake has finished, so a refusal is
  "no ``CONNECTED``", whether the handshake or the first read failed.
* Configuration mistakes (missing keystore, wrong PKCS12 password, a JKS
  file) stop ``junction run`` with exit status 2 and a message naming the
  acceptor.

Names under ``example.test`` do not resolve: stomp.py connects by name (its
SNI is the host it connects to), so :func:`example_test_resolves_locally`
maps them to 127.0.0.1 in this process.  Nothing waits by sleeping: every
wait polls, or blocks on a socket, with a deadline.
"""

from __future__ import annotations

import itertools
import os
import socket
import ssl
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from proton import Message, SSLDomain
from proton.utils import BlockingConnection
from stomp.exception import ConnectFailedException

from junction.node import NODE_ID_FILE
from junction.routing.policies import create_policy
from junction.routing.targets import Target
from tests.harness import REPO_ROOT, BrokerProcess, free_port, queue_status, wait_for
from tests.integration.test_gateway_routing import (
    PASSWORDS,
    decisions,
    holder,
    make_core,
    make_gateway,
    router_xml,
    wait_ready,
)
from tests.integration.test_stomp_clients import Client
from tests.tlscerts import (
    EAST,
    P12_PASSWORD,
    WEST,
    client_context,
    make_certs,
    peer_names,
)

pytestmark = pytest.mark.timeout(120)

#: seconds any one expected thing may take
TIMEOUT = 10.0
PREFIXES = "anycastPrefix=/queue/;multicastPrefix=/topic/"

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def certs(tmp_path) -> SimpleNamespace:
    """The test's certificate files (absolute paths), in ``tmp_path/certs``."""
    return make_certs(tmp_path / "certs")


@pytest.fixture(autouse=True)
def no_tracebacks(request):
    """After the test: no node it started logged a traceback (an unhandled error)."""
    yield
    for b in getattr(request.node, "_junction_brokers", ()):
        text = b.log_text()
        assert "Traceback" not in text, f"{b.name} logged a traceback:\n{b.log_tail(60)}"


@pytest.fixture
def example_test_resolves_locally(monkeypatch) -> None:
    """``*.example.test`` resolves to 127.0.0.1 in this process (for stomp.py's SNI)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.lower().endswith(".example.test"):
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def stomp_clients():
    """``make(host, port, ca=..., cert=...)``: a stomp.py 1.2 Client over TLS, closed at teardown."""
    made: list[Client] = []

    def make(host: str, port: int, *, ca: Path | None, cert: Path | None = None) -> Client:
        c = Client(SimpleNamespace(stomp_address=(host, port)), "1.2")
        # PROTOCOL_TLS_CLIENT (stomp.py's default): CERT_REQUIRED and check_hostname on;
        # server_hostname (and so SNI) is ``host``
        c.conn.set_ssl(
            for_hosts=[(host, port)],
            ca_certs=str(ca) if ca is not None else None,
            cert_file=str(cert) if cert is not None else None,
        )
        made.append(c)
        return c

    yield make
    for c in reversed(made):
        c.close_quietly()


def tls_params(keystore: Path, **params: str) -> str:
    """``sslEnabled=true;keyStorePath=...`` plus ``params`` (``;``-separated URL parameters)."""
    out = f"sslEnabled=true;keyStorePath={keystore}"
    for k, v in params.items():
        out += f";{k}={v}"
    return out


def tls_core(broker_factory, name: str = "core", **acceptors: str) -> BrokerProcess:
    """A broker core (security off, not started) with one TLS acceptor per ``acceptors`` entry.

    ``acceptors`` maps acceptor name -> its TLS parameters (see :func:`tls_params`);
    every one serves ``STOMP,AMQP`` with the usual prefixes.  ``core.tls[name]``
    is the acceptor's port.
    """
    ports = {a: free_port() for a in acceptors}
    xml = "".join(
        f'<acceptor name="{a}">tcp://127.0.0.1:{ports[a]}?protocols=STOMP,AMQP;{PREFIXES};'
        f"{params}</acceptor>"
        for a, params in acceptors.items()
    )
    core = broker_factory(
        name,
        stomp_acceptor_params={"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"},
        extra_acceptors_xml=xml,
    )
    core.tls = ports
    return core


# --------------------------------------------------------------------------- raw TLS with Python's ssl

CONNECT_FRAME = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


def read_frame(sock: socket.socket, deadline: float) -> bytes:
    """Bytes up to the first NUL (a STOMP frame), or what came before EOF / the deadline."""
    data = b""
    while b"\x00" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


class Attempt(SimpleNamespace):
    """What one TLS client saw: ``stage`` is ``connected``, ``handshake`` or ``after-handshake``.

    ``error`` is the exception (or the bytes received) for a refusal; ``peer``
    the ``(common name, SANs)`` of the server certificate when the handshake
    finished with verification on.
    """

    @property
    def accepted(self) -> bool:
        return self.stage == "connected"


def attempt(
    port: int,
    ctx: ssl.SSLContext,
    sni: str | None,
    timeout: float = TIMEOUT,
) -> Attempt:
    """Handshake (sending ``sni`` as the SNI name, or none), then STOMP CONNECT."""
    deadline = time.monotonic() + timeout
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        tls = ctx.wrap_socket(raw, server_hostname=sni, do_handshake_on_connect=False)
    except BaseException:
        raw.close()
        raise
    with tls:
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as e:
            return Attempt(stage="handshake", error=e, peer=None, version=None)
        peer = peer_names(tls) if ctx.verify_mode != ssl.CERT_NONE else None
        version = tls.version()
        try:
            tls.sendall(CONNECT_FRAME)
            frame = read_frame(tls, deadline)
        except (ssl.SSLError, OSError) as e:
            return Attempt(stage="after-handshake", error=e, peer=peer, version=version)
        if frame.startswith(b"CONNECTED"):
            return Attempt(stage="connected", error=None, peer=peer, version=version)
        return Attempt(stage="after-handshake", error=frame, peer=peer, version=version)


def closed_within(port: int, seconds: float) -> tuple[bool, float, bytes]:
    """Connect in plain TCP, send nothing: (closed by the server in time, after how long, bytes)."""
    started = time.monotonic()
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as s:
        s.settimeout(seconds)
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return True, time.monotonic() - started, data
                data += chunk
        except ConnectionResetError:
            return True, time.monotonic() - started, data
        except TimeoutError:
            return False, time.monotonic() - started, data


# --------------------------------------------------------------------------- 1. stomp.py over TLS


def test_stomp_py_over_tls_verifies_the_server_and_round_trips(
    broker_factory, certs, stomp_clients, example_test_resolves_locally
):
    core = tls_core(broker_factory, tls=tls_params(certs.server, keyStoreType="PEM")).start()
    port = core.tls["tls"]
    # "localhost" is stomp.py's server_hostname: the SNI name and the name checked
    c = stomp_clients("localhost", port, ca=certs.ca).connect()
    assert c.conn.transport.socket.version() in ("TLSv1.2", "TLSv1.3")
    peer = c.conn.transport.socket.getpeercert()  # non-empty only when the chain was verified
    assert ("DNS", "localhost") in peer["subjectAltName"]
    queue = new_id("x")
    c.subscribe(f"/queue/{queue}", "s1")
    c.send(f"/queue/{queue}", "over tls")
    assert [m.body for m in c.rec.wait_messages(1)] == ["over tls"]
    c.disconnect()

    # verification is really on: a client trusting another CA cannot connect ...
    with pytest.raises(ConnectFailedException):
        stomp_clients("localhost", port, ca=certs.rogue_ca).connect()
    # ... nor one asking for a name the certificate does not have (hostname check)
    with pytest.raises(ConnectFailedException):
        stomp_clients("other.example.test", port, ca=certs.ca).connect()


def test_a_plain_tcp_client_gets_no_stomp_from_a_tls_port(broker_factory, certs):
    core = tls_core(broker_factory, tls=tls_params(certs.server, keyStoreType="PEM")).start()
    with socket.create_connection(("127.0.0.1", core.tls["tls"]), timeout=TIMEOUT) as s:
        s.sendall(CONNECT_FRAME)
        # the server answers a non-TLS opening with (at most) a TLS alert and closes; it
        # must close within the default handshake timeout (10 s), never speak STOMP
        data = read_frame(s, time.monotonic() + 15.0)
    assert b"CONNECTED" not in data and b"ERROR" not in data, data
    # and the STOMP core of that port never saw a STOMP connection
    assert core.status()["connections"] == []


# --------------------------------------------------------------------------- 2. proton over TLS


def amqps(
    port: int,
    ca: Path,
    *,
    sni: str | None = None,
    cert: Path | None = None,
    container_id: str | None = None,
    **kwargs,
) -> BlockingConnection:
    """A BlockingConnection to ``amqps://127.0.0.1:port`` verifying the server and its name.

    proton sends ``sni`` (else the URL host) as the SNI name and, with
    ``VERIFY_PEER_NAME``, checks the certificate against that same name.
    """
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if cert is not None:
        domain.set_credentials(str(cert), str(cert), None)
    if sni is not None:
        kwargs["sni"] = sni
    return BlockingConnection(
        f"amqps://127.0.0.1:{port}",
        timeout=TIMEOUT,
        ssl_domain=domain,
        container_id=container_id or new_id("amqps"),
        **kwargs,
    )


def test_proton_over_tls_round_trips(broker_factory, certs):
    core = tls_core(broker_factory, tls=tls_params(certs.server, keyStoreType="PEM")).start()
    port = core.tls["tls"]
    # proton sends the URL host as SNI and checks it by DNS name only (an IP SAN never
    # matches its VERIFY_PEER_NAME), so every connection names the server explicitly
    for sni in ("localhost", EAST):
        conn = amqps(port, certs.ca, sni=sni)
        try:
            address = new_id("amqps-q")
            receiver = conn.create_receiver(address, credit=1)
            conn.create_sender(address).send(Message(body=f"over tls ({sni})"))
            assert receiver.receive(timeout=TIMEOUT).body == f"over tls ({sni})"
            receiver.accept()
        finally:
            conn.close()
    # verification is really on: the server's name is checked against the SNI name
    with pytest.raises(Exception):  # noqa: B017 -- proton raises ConnectionException subclasses
        amqps(port, certs.ca, sni="other.example.test").close()
    with pytest.raises(Exception):  # noqa: B017
        amqps(port, certs.rogue_ca).close()


def test_pkcs12_keystore_and_detected_types(broker_factory, certs, stomp_clients):
    core = tls_core(
        broker_factory,
        p12=tls_params(certs.server_p12, keyStoreType="PKCS12", keyStorePassword=P12_PASSWORD),
        p12auto=tls_params(certs.server_p12, keyStorePassword=P12_PASSWORD),
        pemauto=tls_params(certs.default),
    ).start()
    ctx = client_context(certs.ca, check_hostname=True)
    for acceptor, cn in (
        ("p12", "junction-all"),
        ("p12auto", "junction-all"),
        ("pemauto", "junction-default"),
    ):
        seen = attempt(core.tls[acceptor], ctx, "localhost")
        assert seen.accepted, (acceptor, seen)
        assert seen.peer[0] == cn, (acceptor, seen.peer)
    # and a real client on the PKCS12 acceptor
    c = stomp_clients("localhost", core.tls["p12"], ca=certs.ca).connect()
    queue = new_id("p12")
    c.subscribe(f"/queue/{queue}", "s1")
    c.send(f"/queue/{queue}", "pkcs12")
    assert [m.body for m in c.rec.wait_messages(1)] == ["pkcs12"]
    c.disconnect()


# --------------------------------------------------------------------------- 3. SNI routing through a gateway


def seed_node_ids(east: BrokerProcess, west: BrokerProcess, keys: tuple[str, str]) -> None:
    """Give the two cores node ids for which CONSISTENT_HASH sends ``keys[0]`` to east, ``keys[1]`` to west.

    A core keeps its node id in ``<journal-directory>/node.id`` (made on first
    start): writing it first makes the rendezvous hash's choice known in
    advance, so the test knows where each SNI name must land.
    """
    policy = create_policy("CONSISTENT_HASH", {})
    for i in range(1000):
        ids = (f"core-east-{i}", f"core-west-{i}")
        targets = [Target(node_id=n, ready=True) for n in ids]
        if [policy.select(targets, k).node_id for k in keys] == list(ids):
            break
    else:  # pragma: no cover - 1000 tries at 1/2 each
        raise AssertionError("no node ids found")
    for core, node_id in zip((east, west), ids, strict=True):
        journal = core.dir / "data" / "journal"
        journal.mkdir(parents=True, exist_ok=True)
        (journal / NODE_ID_FILE).write_text(node_id + "\n")


def amqp_connection_on(node: BrokerProcess, container_id: str):
    for conn in node.status()["connections"]:
        if conn["client_id"] == container_id:
            return conn
    return None


def test_sni_host_routes_through_a_gateway(
    broker_factory, certs, stomp_clients, example_test_resolves_locally
):
    east = make_core(broker_factory, "core-east")
    west = make_core(broker_factory, "core-west")
    seed_node_ids(east, west, ("east", "west"))
    east.start()
    west.start()
    assert east.status()["node_id"].startswith("core-east-")
    pool = [east, west]
    # the key is the SNI name's first label ("east" / "west"); CONSISTENT_HASH over both
    # cores (node ids seeded so that "east" -> core-east, "west" -> core-west)
    router = router_xml(
        "sni", key="SNI_HOST", key_filter="^[a-z]+", policy="CONSISTENT_HASH", pool=pool
    )
    gateway = make_gateway(
        broker_factory,
        "gateway",
        pool,
        {"sni": router},
        protocols={
            "sni": "STOMP,AMQP;routerMode=forward;" + tls_params(certs.server, keyStoreType="PEM")
        },
    ).start()
    wait_ready(gateway, "sni", **{"core-east": True, "core-west": True})
    host, port = gateway.routed["sni"]
    nodes = [gateway, east, west]

    # stomp.py with SNI east.example.test (the host it connects to)
    c = stomp_clients(EAST, port, ca=certs.ca).connect("app", PASSWORDS["app"])
    queue = new_id("east-q")
    c.send(f"/queue/{queue}", "to the east")
    assert holder(nodes, queue) is east
    c.subscribe(f"/queue/{queue}", "s1")
    assert [m.body for m in c.rec.wait_messages(1)] == ["to the east"]
    c.disconnect()
    assert queue_status(west, queue) is None

    # proton with SNI west.example.test
    cid = new_id("west-amqp")
    conn = amqps(
        port,
        certs.ca,
        sni=WEST,
        container_id=cid,
        user="app",
        password=PASSWORDS["app"],
        allowed_mechs="PLAIN",
    )
    try:
        address = new_id("west-q")
        receiver = conn.create_receiver(address, credit=1)
        conn.create_sender(address).send(Message(body="to the west"))
        assert receiver.receive(timeout=TIMEOUT).body == "to the west"
        receiver.accept()
        seen = wait_for(
            lambda: [n for n in nodes if amqp_connection_on(n, cid)],
            TIMEOUT,
            what=f"{cid} on a node",
        )
        assert seen == [west], [n.name for n in seen]
    finally:
        conn.close()

    keys = {(d["proto"], d["key"]) for d in decisions(gateway, "sni")}
    assert ("STOMP", "'east'") in keys and ("AMQP", "'west'") in keys, keys

    # both clients closed (TLS close_notify, then FIN): the gateway lets go of both splices
    def acceptor():
        return next(a for a in gateway.status()["acceptors"] if a["name"] == "in-sni")

    wait_for(
        lambda: acceptor().get("forwarded") == 0 and acceptor().get("opening") == 0,
        TIMEOUT,
        what=f"no connection left on the gateway's TLS acceptor (now {acceptor()})",
    )
    for node in nodes:
        assert "Traceback" not in node.log_text(), f"{node.name}:\n{node.log_tail()}"


# --------------------------------------------------------------------------- 4. SNI required / filtered


def test_sni_required_refuses_a_client_without_sni(broker_factory, certs):
    core = tls_core(
        broker_factory, tls=tls_params(certs.server, keyStoreType="PEM", sniRequired="true")
    ).start()
    port = core.tls["tls"]
    ctx = client_context(certs.ca)  # chain verified, no host name check: SNI is free
    none = attempt(port, ctx, None)
    assert none.stage == "handshake", none
    assert attempt(port, ctx, EAST).accepted
    assert attempt(port, ctx, "localhost").accepted
    assert core.running


def test_sni_host_filter(broker_factory, certs):
    core = tls_core(
        broker_factory,
        tls=tls_params(certs.server, keyStoreType="PEM", sniHost=r"east\.example\.test"),
    ).start()
    port = core.tls["tls"]
    ctx = client_context(certs.ca)
    assert attempt(port, ctx, EAST).accepted
    assert attempt(port, ctx, "EAST.Example.Test").accepted  # case-insensitive
    assert attempt(port, ctx, None).accepted  # no SNI: accepted (Artemis)
    for name in (WEST, "xeast.example.test", "east.example.test.evil"):  # full match only
        seen = attempt(port, ctx, name)
        assert seen.stage == "handshake", (name, seen)


# --------------------------------------------------------------------------- 5. client certificates


def test_need_client_auth(broker_factory, certs):
    core = tls_core(
        broker_factory,
        tls=tls_params(
            certs.server,
            keyStoreType="PEM",
            needClientAuth="true",
            trustStorePath=str(certs.ca),
            trustStoreType="PEM",
        ),
    ).start()
    port = core.tls["tls"]
    trusted = attempt(port, client_context(certs.ca, client_cert=certs.client), "localhost")
    assert trusted.accepted, trusted
    missing = attempt(port, client_context(certs.ca), "localhost")
    assert not missing.accepted, missing
    rogue = attempt(port, client_context(certs.ca, client_cert=certs.rogue_client), "localhost")
    assert not rogue.accepted, rogue
    # the same in TLS 1.2, where the refusal is part of the handshake itself
    tls12 = {"maximum": ssl.TLSVersion.TLSv1_2}
    assert attempt(
        port, client_context(certs.ca, client_cert=certs.client, **tls12), "localhost"
    ).accepted
    for cert in (None, certs.rogue_client):
        seen = attempt(port, client_context(certs.ca, client_cert=cert, **tls12), "localhost")
        assert seen.stage == "handshake", (cert, seen)


def test_want_client_auth(broker_factory, certs):
    core = tls_core(
        broker_factory,
        tls=tls_params(
            certs.server,
            keyStoreType="PEM",
            wantClientAuth="true",
            trustStorePath=str(certs.ca),
        ),
    ).start()
    port = core.tls["tls"]
    assert attempt(port, client_context(certs.ca), "localhost").accepted
    assert attempt(port, client_context(certs.ca, client_cert=certs.client), "localhost").accepted
    # a certificate that is presented is verified all the same (JSSE and OpenSSL agree)
    rogue = attempt(port, client_context(certs.ca, client_cert=certs.rogue_client), "localhost")
    assert not rogue.accepted, rogue


def test_need_client_auth_with_stomp_py_and_proton(broker_factory, certs, stomp_clients):
    core = tls_core(
        broker_factory,
        tls=tls_params(
            certs.server, keyStoreType="PEM", needClientAuth="true", trustStorePath=str(certs.ca)
        ),
    ).start()
    port = core.tls["tls"]
    c = stomp_clients("localhost", port, ca=certs.ca, cert=certs.client).connect()
    queue = new_id("mtls")
    c.subscribe(f"/queue/{queue}", "s1")
    c.send(f"/queue/{queue}", "mutual")
    assert [m.body for m in c.rec.wait_messages(1)] == ["mutual"]
    c.disconnect()
    conn = amqps(port, certs.ca, sni="localhost", cert=certs.client)
    try:
        address = new_id("mtls-amqp")
        receiver = conn.create_receiver(address, credit=1)
        conn.create_sender(address).send(Message(body="mutual amqp"))
        assert receiver.receive(timeout=TIMEOUT).body == "mutual amqp"
        receiver.accept()
    finally:
        conn.close()


# --------------------------------------------------------------------------- 6. a certificate per SNI name


def test_sni_key_store_paths_serve_a_certificate_per_name(broker_factory, certs):
    core = tls_core(
        broker_factory,
        tls=tls_params(
            certs.default,
            keyStoreType="PEM",
            sniKeyStorePaths=f"{EAST}:{certs.east},{WEST}:{certs.west}",
        ),
    ).start()
    port = core.tls["tls"]
    ctx = client_context(certs.ca)  # verified chain; names compared below
    for sni, cn, san in (
        (WEST, "junction-west", [WEST]),
        (EAST, "junction-east", [EAST]),
        (None, "junction-default", ["localhost", "127.0.0.1"]),
        ("localhost", "junction-default", ["localhost", "127.0.0.1"]),
        ("other.example.test", "junction-default", ["localhost", "127.0.0.1"]),
    ):
        seen = attempt(port, ctx, sni)
        assert seen.accepted, (sni, seen)
        assert seen.peer == (cn, san), (sni, seen.peer)
    # with the host name checked, each name verifies against its own certificate
    strict = client_context(certs.ca, check_hostname=True)
    assert attempt(port, strict, WEST).accepted
    assert attempt(port, strict, EAST).accepted


# --------------------------------------------------------------------------- 7. handshake timeout


def test_handshake_timeout_closes_a_silent_client(broker_factory, certs):
    core = tls_core(
        broker_factory,
        tls=tls_params(certs.server, keyStoreType="PEM", **{"handshake-timeout": "1"}),
    ).start()
    port = core.tls["tls"]
    closed, after, data = closed_within(port, 5.0)
    assert closed, f"a silent client was still open after {after:.1f} s"
    assert after >= 0.5, f"closed after {after:.2f} s, before the 1 s handshake timeout"
    assert data == b"", data
    # a real client is unaffected
    assert attempt(port, client_context(certs.ca, check_hostname=True), "localhost").accepted
    assert core.running


def test_default_handshake_timeout_is_longer_than_a_slow_client(broker_factory, certs):
    """Without the parameter (10 s) a client silent for 2 s still completes its handshake."""
    core = tls_core(broker_factory, tls=tls_params(certs.server, keyStoreType="PEM")).start()
    port = core.tls["tls"]
    closed, after, _ = closed_within(port, 2.0)
    assert not closed, f"closed after {after:.2f} s with the default 10 s handshake timeout"


# --------------------------------------------------------------------------- protocol versions


def test_enabled_protocols(broker_factory, certs):
    core = tls_core(
        broker_factory,
        only13=tls_params(certs.server, keyStoreType="PEM", enabledProtocols="TLSv1.3"),
        default=tls_params(certs.server, keyStoreType="PEM"),
    ).start()
    v12 = client_context(certs.ca, maximum=ssl.TLSVersion.TLSv1_2)
    v13 = client_context(certs.ca, minimum=ssl.TLSVersion.TLSv1_3)
    assert attempt(core.tls["only13"], v12, "localhost").stage == "handshake"
    seen = attempt(core.tls["only13"], v13, "localhost")
    assert seen.accepted and seen.version == "TLSv1.3", seen
    for ctx, version in ((v12, "TLSv1.2"), (v13, "TLSv1.3")):
        seen = attempt(core.tls["default"], ctx, "localhost")
        assert seen.accepted and seen.version == version, seen


# --------------------------------------------------------------------------- 8. configuration errors


def run_junction(broker: BrokerProcess) -> subprocess.CompletedProcess:
    return subprocess.run(
        broker.command(),
        cwd=broker.dir,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
    )


@pytest.mark.parametrize("case", ["missing keystore", "wrong PKCS12 password", "JKS keystore"])
def test_a_bad_keystore_is_a_configuration_error(broker_factory, certs, case):
    if case == "missing keystore":
        params = tls_params(certs.dir / "nowhere.pem", keyStoreType="PEM")
        expected = ["nowhere.pem"]
    elif case == "wrong PKCS12 password":
        params = tls_params(certs.server_p12, keyStoreType="PKCS12", keyStorePassword="wrong")
        expected = ["password"]
    else:
        params = tls_params(certs.jks)
        expected = ["JKS"]
    broker = tls_core(broker_factory, secure=params)
    result = run_junction(broker)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "acceptor 'secure'" in result.stderr, result.stderr
    for text in expected:
        assert text.lower() in result.stderr.lower(), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not broker.running
