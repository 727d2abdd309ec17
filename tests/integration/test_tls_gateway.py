"""The gateway re-encrypting to broker cores, and certificates reloaded without a restart.

Real processes (``junction run``), real clients (stomp.py, proton, Python's
``ssl``), certificates from trustme.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import urllib.error
import urllib.request

import pytest
import stomp
import trustme
from cryptography import x509
from proton import Message
from proton.utils import BlockingConnection

from tests.harness import free_port, router_xml, wait_for, wait_queue

TIMEOUT = 20.0
USERS = {
    "app": ("app-secret", "app"),
    "pool": ("pool-secret", "app"),
    "admin": ("admin-secret", "admin"),
}


@pytest.fixture
def pki(tmp_path):
    ca = trustme.CA()
    files = {"dir": tmp_path, "ca": ca}
    for name, cert in (("core", ca.issue_cert("localhost")), ("core2", ca.issue_cert("localhost"))):
        path = tmp_path / f"{name}.pem"
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        files[name] = str(path)
    files["ca.pem"] = str(tmp_path / "ca.pem")
    ca.cert_pem.write_to_path(files["ca.pem"])
    return files


def tls_core(broker_factory, pki, name="core"):
    port = free_port()
    core = broker_factory(
        name,
        security=True,
        users=USERS,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;'
            f"anycastPrefix=/queue/;sslEnabled=true;keyStorePath={pki['core']}</acceptor>"
        ),
    )
    core.tls_port = port
    return core.start()


def gateway(broker_factory, core, pki, connector_params: str, name="gateway"):
    port = free_port()
    routers = router_xml(
        {
            "core": f"tcp://127.0.0.1:{core.tls_port}?sslEnabled=true;trustStorePath={pki['ca.pem']}{connector_params}"
        },
        key_type="CLIENT_ID",
        check_period=200,
    )
    gw = broker_factory(
        name,
        security=True,
        users=USERS,
        extra_core_xml=routers,
        extra_acceptors_xml=(
            f'<acceptor name="routed">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;router=r;'
            "routerMode=forward;anycastPrefix=/queue/</acceptor>"
        ),
    )
    gw.routed_port = port
    return gw.start()


class _Errors(stomp.ConnectionListener):
    def __init__(self):
        self.frames = []

    def on_error(self, frame):
        self.frames.append(frame)


def target(gw) -> dict:
    return gw.status()["routers"]["r"]["targets"][0]


def peer_serial(port: int, ca_pem: str, sni: str = "localhost") -> int:
    ctx = ssl.create_default_context(cafile=ca_pem)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=sni) as s,
    ):
        return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number


def test_forwarded_stomp_and_amqp_are_re_encrypted_to_the_core(broker_factory, pki):
    core = tls_core(broker_factory, pki)
    gw = gateway(broker_factory, core, pki, ";sniHost=localhost")
    wait_for(lambda: target(gw)["ready"], TIMEOUT, interval=0.05, what="the TLS target ready")

    conn = stomp.Connection([("127.0.0.1", gw.routed_port)])
    conn.connect("app", "app-secret", wait=True, headers={"client-id": "tls-stomp"})
    conn.send("/queue/tls.q", "over stomp", headers={"persistent": "true"})
    conn.disconnect()

    amqp = BlockingConnection(
        f"amqp://127.0.0.1:{gw.routed_port}",
        user="app",
        password="app-secret",
        allowed_mechs="PLAIN",
        timeout=TIMEOUT,
    )
    try:
        amqp.create_sender("tls.q").send(Message(body="over amqp", durable=True))
    finally:
        amqp.close()
    # both arrived on the core, which only speaks TLS on that acceptor
    wait_queue(core, "tls.q", TIMEOUT, message_count=2)


def test_a_core_certificate_for_another_name_is_refused_clearly(broker_factory, pki):
    core = tls_core(broker_factory, pki)
    # no sniHost: the gateway expects a certificate for 127.0.0.1; the core's is for localhost
    gw = gateway(broker_factory, core, pki, "")

    def problem():
        t = target(gw)
        return (
            (not t["ready"]) and t.get("problem") and "certificate" in t["problem"] and t["problem"]
        )

    text = wait_for(problem, TIMEOUT, interval=0.05, what="the probe's TLS problem")
    assert "certificate is for localhost, not 127.0.0.1" in text
    # and a client is refused with the protocol's own error, not forwarded to an unverified core
    conn = stomp.Connection([("127.0.0.1", gw.routed_port)])
    listener = _Errors()
    conn.set_listener("t", listener)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect("app", "app-secret", wait=True, headers={"client-id": "refused"})
    assert listener.frames and "not ready" in listener.frames[-1].headers.get("message", "")


def test_certificates_reload_on_sighup_and_over_the_management_api(broker_factory, pki):
    core = tls_core(broker_factory, pki)
    first = peer_serial(core.tls_port, pki["ca.pem"])

    # a client connected before the reload keeps its connection
    ctx = ssl.create_default_context(cafile=pki["ca.pem"])
    raw = socket.create_connection(("127.0.0.1", core.tls_port), timeout=5)
    kept = ctx.wrap_socket(raw, server_hostname="localhost")
    kept.sendall(b"CONNECT\naccept-version:1.2\nhost:x\nlogin:app\npasscode:app-secret\n\n\x00")
    assert kept.recv(4096).startswith(b"CONNECTED")

    # swap the key store file in place (a renewal) and send SIGHUP
    with open(pki["core2"], "rb") as src, open(pki["core"] + ".new", "wb") as dst:
        dst.write(src.read())
    os.replace(pki["core"] + ".new", pki["core"])
    second = x509.load_pem_x509_certificates(open(pki["core"], "rb").read())[0].serial_number
    assert second != first
    os.kill(core.pid, signal.SIGHUP)
    wait_for(
        lambda: peer_serial(core.tls_port, pki["ca.pem"]) == second,
        TIMEOUT,
        interval=0.05,
        what="new connections served the new certificate",
    )

    kept.sendall(b"SEND\ndestination:/queue/kept\n\nstill here\x00")
    kept.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
    assert b"RECEIPT" in kept.recv(4096)
    kept.close()
    wait_queue(core, "kept", TIMEOUT, message_count=1)

    # the management call: needs a user with manage (security is on)
    url = core.mgmt_url + "/api/tls/reload"
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(urllib.request.Request(url, method="POST", data=b""), timeout=5)
    assert anonymous.value.code == 401
    request = urllib.request.Request(url, method="POST", data=b"")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"admin:admin-secret").decode())
    with urllib.request.urlopen(request, timeout=5) as answer:
        body = json.loads(answer.read())
    assert "gateway-in" in body["reloaded"] and body["failed"] == {}

    # a broken file is refused and the acceptor keeps serving what it had
    with open(pki["core"], "w") as f:
        f.write("not a key store")
    request = urllib.request.Request(url, method="POST", data=b"")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"admin:admin-secret").decode())
    with pytest.raises(urllib.error.HTTPError) as broken:
        urllib.request.urlopen(request, timeout=5)
    assert broken.value.code == 500
    assert "gateway-in" in json.loads(broken.value.read())["failed"]
    assert peer_serial(core.tls_port, pki["ca.pem"]) == second

    status = core.status()
    tls = next(a for a in status["acceptors"] if a["name"] == "gateway-in")["tls"]
    assert tls["reloads"] == 2 and tls["certificates"][0]["serial"] == format(second, "x")
    with urllib.request.urlopen(core.mgmt_url + "/metrics", timeout=5) as answer:
        metrics = answer.read().decode()
    assert 'junction_tls_reloads_total{acceptor="gateway-in"} 2.0' in metrics
    assert (
        'junction_tls_certificate_expiry_timestamp_seconds{acceptor="gateway-in",sni="*"}'
        in metrics
    )


# --------------------------------------------------------------------------- certificate login


@pytest.fixture
def cert_login(tmp_path):
    """A CA, a server certificate, a mapped client (-> user ``app``) and a trusted but unmapped one."""
    ca = trustme.CA()
    files = {"ca": str(tmp_path / "ca.pem")}
    ca.cert_pem.write_to_path(files["ca"])
    for name, cert in (
        ("server", ca.issue_cert("localhost")),
        ("client", ca.issue_cert("app@example.test", common_name="app-client")),
        ("stranger", ca.issue_cert("other@example.test", common_name="stranger")),
    ):
        files[name] = str(tmp_path / f"{name}.pem")
        cert.private_key_and_cert_chain_pem.write_to_path(files[name])
    subject = x509.load_pem_x509_certificates(open(files["client"], "rb").read())[
        0
    ].subject.rfc4514_string()
    users = tmp_path / "cert-users.properties"
    users.write_text(f"app={subject}\n")
    roles = tmp_path / "cert-roles.properties"
    roles.write_text("app=app\n")
    files["security"] = {"cert-users-file": str(users), "cert-roles-file": str(roles)}
    files["tls"] = (
        f"sslEnabled=true;keyStorePath={files['server']};needClientAuth=true;trustStorePath={files['ca']}"
    )
    return files


def _stomp_tls(port, files, cert):
    conn = stomp.Connection([("localhost", port)])
    conn.set_ssl(for_hosts=[("localhost", port)], ca_certs=files["ca"], cert_file=files[cert])
    return conn


def _amqps_external(port: int, files) -> BlockingConnection:
    """proton over TLS with the mapped client certificate, logging in with SASL EXTERNAL."""
    from proton import SSLDomain

    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(files["ca"])
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    domain.set_credentials(files["client"], files["client"], None)
    return BlockingConnection(
        f"amqps://127.0.0.1:{port}",
        ssl_domain=domain,
        sni="localhost",
        allowed_mechs="EXTERNAL",
        timeout=TIMEOUT,
    )


def _cert_gateway(broker_factory, routers: str, port: int, files, protocols: str):
    """A gateway whose TLS acceptor ``edge`` requires client certificates and logs them in."""
    gw = broker_factory(
        "gateway",
        security=True,
        users=USERS,
        anonymous_user=None,
        extra_core_xml=routers,
        security_attributes=files["security"],
        extra_acceptors_xml=(
            f'<acceptor name="edge">tcp://127.0.0.1:{port}?protocols={protocols};router=r;routerMode=forward;'
            f"{files['tls']}</acceptor>"
        ),
    ).start()
    wait_for(lambda: target(gw)["ready"], TIMEOUT, interval=0.05, what="the target ready")
    return gw


def _on_core(core, client_id: str) -> dict:
    """The core's connection with *client_id*, once it is there."""
    return wait_for(
        lambda: next(
            (c for c in core.status()["connections"] if c["client_id"] == client_id), None
        ),
        TIMEOUT,
        interval=0.05,
        what=f"connection {client_id} on the core",
    )


def test_a_client_certificate_logs_in_to_stomp_and_amqp(broker_factory, cert_login):
    port = free_port()
    core = broker_factory(
        "core",
        security=True,
        users=USERS,
        anonymous_user=None,
        security_attributes=cert_login["security"],
        extra_acceptors_xml=(
            f'<acceptor name="secure">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;anycastPrefix=/queue/;'
            f"{cert_login['tls']}</acceptor>"
        ),
    ).start()

    # STOMP: CONNECT without login, the certificate is the login
    conn = _stomp_tls(port, cert_login, "client")
    conn.connect(wait=True, headers={"client-id": "by-cert"})
    try:
        users = {c["client_id"]: c["user"] for c in core.status()["connections"]}
        assert users.get("by-cert") == "app"
        conn.send("/queue/cert.q", "from a certificate")
    finally:
        conn.disconnect()
    wait_queue(core, "cert.q", TIMEOUT, message_count=1)

    # a trusted certificate that maps to no user is refused (no anonymous user here)
    stranger = _stomp_tls(port, cert_login, "stranger")
    listener = _Errors()
    stranger.set_listener("e", listener)
    with pytest.raises(stomp.exception.ConnectFailedException):
        stranger.connect(wait=True)
    assert listener.frames and "Security Error" in listener.frames[-1].headers.get("message", "")

    # AMQP: SASL EXTERNAL with the same certificate
    amqp = _amqps_external(port, cert_login)
    try:
        amqp.create_sender("cert.q").send(Message(body="by EXTERNAL"))
    finally:
        amqp.close()
    wait_queue(core, "cert.q", TIMEOUT, message_count=2)


def test_the_gateway_keys_on_the_user_a_certificate_maps_to(broker_factory, cert_login):
    core_port = free_port()
    core = broker_factory(
        "core",
        security=True,
        users=USERS,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{core_port}?protocols=STOMP,AMQP;anycastPrefix=/queue/</acceptor>'
        ),
    )
    core.tls_port = core_port  # plain here; the name is what gateway() reads
    core.start()
    port = free_port()
    routers = router_xml(
        {"core": f"tcp://127.0.0.1:{core_port}"}, key_type="USER_NAME", check_period=200
    )
    gw = _cert_gateway(broker_factory, routers, port, cert_login, "STOMP")
    conn = _stomp_tls(port, cert_login, "stranger")
    listener = _Errors()
    conn.set_listener("e", listener)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(wait=True, headers={"client-id": "unmapped"})
    assert listener.frames and "Security Error" in listener.frames[-1].headers.get("message", "")
    # the mapped certificate authenticates at the gateway, which routes on its user name; the
    # core behind sees a CONNECT without login (it cannot see the certificate) and, having an
    # anonymous user, lets it in as that user
    conn = _stomp_tls(port, cert_login, "client")
    conn.connect(wait=True, headers={"client-id": "mapped"})
    try:
        _on_core(core, "mapped")
    finally:
        conn.disconnect()
    log = (gw.dir / "stderr.log").read_text()
    assert "(client-id 'mapped', user 'app')" in log
    assert "key 'app' -> forward to target core" in log


def test_a_certificate_login_is_forwarded_to_the_core_in_the_proxy_header(
    broker_factory, cert_login
):
    """The gateway verified the certificate; the core, trusting the gateway's PROXY headers, logs the
    client in as the same user (STOMP without login, AMQP EXTERNAL) though it never sees the certificate."""
    core_port = free_port()
    core = broker_factory(
        "core",
        security=True,
        users=USERS,
        anonymous_user=None,
        security_attributes=cert_login["security"],
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{core_port}?protocols=STOMP,AMQP;anycastPrefix=/queue/;'
            "proxyProtocolEnabled=true;proxyTrustedSources=127.0.0.1</acceptor>"
        ),
    ).start()
    port = free_port()
    routers = router_xml(
        {"core": f"tcp://127.0.0.1:{core_port}?proxyProtocolEnabled=true"},
        key_type="USER_NAME",
        check_period=200,
    )
    _cert_gateway(broker_factory, routers, port, cert_login, "STOMP,AMQP")

    conn = _stomp_tls(port, cert_login, "client")
    conn.connect(wait=True, headers={"client-id": "via-gateway"})
    try:
        seen = _on_core(core, "via-gateway")
        assert seen["user"] == "app"
        assert seen.get("proxy_version") == "V2"
        conn.send("/queue/fwd.cert", "stomp")
    finally:
        conn.disconnect()

    amqp = _amqps_external(port, cert_login)
    try:
        amqp.create_sender("fwd.cert").send(Message(body="amqp", durable=True))
    finally:
        amqp.close()
    wait_queue(core, "fwd.cert", TIMEOUT, message_count=2)


def test_the_gateway_presents_its_client_certificate_to_a_core_that_requires_one(
    broker_factory, pki, tmp_path
):
    gateway_cert = tmp_path / "gateway-client.pem"
    pki["ca"].issue_cert("gateway.internal").private_key_and_cert_chain_pem.write_to_path(
        str(gateway_cert)
    )
    port = free_port()
    core = broker_factory(
        "core",
        security=True,
        users=USERS,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;anycastPrefix=/queue/;'
            f"sslEnabled=true;keyStorePath={pki['core']};needClientAuth=true;trustStorePath={pki['ca.pem']}</acceptor>"
        ),
    )
    core.tls_port = port
    core.start()
    with_cert = gateway(
        broker_factory, core, pki, f";sniHost=localhost;keyStorePath={gateway_cert}", name="gw-cert"
    )
    without = gateway(broker_factory, core, pki, ";sniHost=localhost", name="gw-none")
    wait_for(
        lambda: target(with_cert)["ready"],
        TIMEOUT,
        interval=0.05,
        what="the target ready with a client cert",
    )
    conn = stomp.Connection([("127.0.0.1", with_cert.routed_port)])
    conn.connect("app", "app-secret", wait=True, headers={"client-id": "mtls"})
    conn.send("/queue/mtls.q", "through mutual TLS")
    conn.disconnect()
    wait_queue(core, "mtls.q", TIMEOUT, message_count=1)
    # without a client certificate the core refuses the gateway: its target is never ready
    problem = wait_for(
        lambda: target(without).get("problem"), TIMEOUT, interval=0.05, what="the probe's problem"
    )
    assert not target(without)["ready"] and "TLS" in problem
