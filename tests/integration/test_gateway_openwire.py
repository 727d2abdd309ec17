"""OpenWire through the gateway, on the wire: forwarded, redirected, refused.

The targets are real Artemis brokers (their main acceptor speaks OpenWire, and AMQP for the
pool's readiness probe), and Junction nodes (an acceptor taking OPENWIRE and AMQP); the
clients are the real ActiveMQ Classic ones (both, by ``OpenWireScenario``: the
``openwire_client`` fixture) and a raw socket writing OpenWire frames as the real 5.17 client
does (its WireFormatInfo offers tight encoding and the cache; a ``failover:`` URL sends
``ConnectionControl{faultTolerant}`` first and marks its ConnectionInfo ``faultTolerant``),
read with the project's codec as the client would.

* forwarded: the gateway answers the WireFormatInfo itself, so the target's own is dropped:
  the client reads exactly one WireFormatInfo, then the target's Response to its
  ConnectionInfo; the target has the client's ``clientId`` (a second connection to it with
  the same id is refused with Artemis's ``InvalidClientIDException``);
* redirected: a ConnectionControl naming the target (``reconnectTo``, ``connectedBrokers``,
  ``rebalanceConnection``); a client without ``failover:`` gets an IllegalStateException;
* refused: an ExceptionResponse to the ConnectionInfo with Artemis's text (not ready,
  rejected; a bad password: ``java.lang.SecurityException`` with AMQ229031).

With Junction nodes as targets the redirect is proved by where the client ends: a
``CONSISTENT_HASH`` router on the client id names a node for each id (the gateway's
management API answers which), and the real ``failover:`` client's message is in that node's
queue and not in the other's.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import trustme

from junction.protocols.openwire.codec import Negotiated, OpenWireCodec
from junction.protocols.openwire.commands import (
    ConnectionControl,
    ConnectionInfo,
    ExceptionResponse,
    Response,
)
from junction.protocols.openwire.structures import ConnectionId
from junction.protocols.openwire.wireformat import WireFormat
from tests.artemis.broker import router_xml as artemis_router_xml
from tests.harness import BrokerProcess, free_port, queue_status, wait_queue
from tests.integration import test_gateway_routing as routing

pytestmark = pytest.mark.timeout(60)

#: the one user of the Artemis targets, also a user of the gateway (it checks the login first)
USER, PASSWORD = "app", routing.PASSWORDS["app"]
#: seconds any one expected thing may take
TIMEOUT = 15.0
#: what the real 5.17 client offers (tight, the cache on; it settles uncached with Artemis)
CLIENT_OFFER = WireFormat(cache_enabled=True)
_ids = itertools.count(1)


def pool_router(name: str, targets: list, *, local_filter: str | None = None, policy: str | None = "FIRST_ELEMENT") -> str:
    """A CLIENT_ID router over ``targets``, probed with the Artemis targets' own login."""
    parts = ["<key-type>CLIENT_ID</key-type>"]
    if local_filter is not None:
        parts.append(f"<local-target-filter>{local_filter}</local-target-filter>")
    if policy is not None:
        parts.append(f'<policy name="{policy}"/>')
    if targets:
        refs = "".join(f"<connector-ref>{t.name}</connector-ref>" for t in targets)
        parts.append(
            f"<pool><username>{USER}</username><password>{PASSWORD}</password><check-period>200</check-period>"
            f"<quorum-timeout>500</quorum-timeout><static-connectors>{refs}</static-connectors></pool>"
        )
    return f'<connection-router name="{name}">{"".join(parts)}</connection-router>'


@pytest.fixture(scope="module")
def world(tmp_path_factory, artemis_dist) -> Iterator[SimpleNamespace]:
    """Two Artemis targets and a gateway with a routed OpenWire acceptor per router:

    ``rfwd``   CLIENT_ID, FIRST_ELEMENT over a1, a2, ``routerMode=forward``
    ``rredir`` CLIENT_ID, FIRST_ELEMENT over a2, a1, ``routerMode=redirect``
    ``rdown``  CLIENT_ID over a target nothing listens on: not ready
    ``rnone``  CLIENT_ID, local filter ``tenantA``, no policy and no pool: rejected
    ``rlocal`` CLIENT_ID, local filter ``tenantB-.*``: kept local, served by the gateway's own node
    """
    from tests.artemis.broker import ArtemisBroker

    made: list = []
    try:
        artemis = []
        for name in ("a1", "a2"):
            a = ArtemisBroker(artemis_dist, tmp_path_factory.mktemp("ow-targets"), name, user=USER, password=PASSWORD)
            made.append(a)
            artemis.append(a.start())
        targets = [SimpleNamespace(name=a.name, gateway_in_port=a.core_port, artemis=a) for a in artemis]
        down = SimpleNamespace(name="down", gateway_in_port=free_port())  # never listened on
        routers = {
            "rfwd": pool_router("rfwd", targets),
            "rredir": pool_router("rredir", targets[::-1]),
            "rdown": pool_router("rdown", [down]),
            "rnone": pool_router("rnone", [], local_filter="tenantA", policy=None),
            "rlocal": pool_router("rlocal", targets, local_filter="tenantB-.*"),
        }
        protocols = {r: "OPENWIRE;routerMode=redirect" for r in routers}
        protocols["rfwd"] = "OPENWIRE;routerMode=forward"

        def factory(name: str, **kwargs) -> BrokerProcess:
            b = BrokerProcess(tmp_path_factory.mktemp("ow-gateway"), name=name, **kwargs)
            made.append(b)
            return b

        gateway = routing.make_gateway(factory, "gateway", [*targets, down], routers, protocols=protocols).start()
        for r in ("rfwd", "rredir"):
            routing.wait_ready(gateway, r, a1=True, a2=True)
        yield SimpleNamespace(gateway=gateway, a1=targets[0], a2=targets[1], made=made)
    finally:
        for b in reversed(made):
            b.stop()


@pytest.fixture
def w(request, world) -> SimpleNamespace:
    request.node._junction_brokers = list(world.made)  # their log tails go with a failure report
    return world


class RawClient:
    """One OpenWire connection written frame by frame, read with the codec as the client reads."""

    def __init__(self, address) -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT)
        self.codec = OpenWireCodec(CLIENT_OFFER)
        self.commands: list = []
        self.closed = False

    def open(self, client_id: str, *, password: str = PASSWORD, failover: bool = False) -> None:
        """The real client's opening: WireFormatInfo, [ConnectionControl], ConnectionInfo."""
        self.sock.sendall(self.codec.initiate())
        self.read_until(lambda c: isinstance(c, Negotiated))
        out = b""
        if failover:
            out += self.codec.send(ConnectionControl(command_id=0, fault_tolerant=True))
        info = ConnectionInfo(
            command_id=1, response_required=True, connection_id=ConnectionId(f"ID:raw-{next(_ids)}"),
            client_id=client_id, user_name=USER, password=password, fault_tolerant=failover,
        )
        self.sock.sendall(out + self.codec.send(info))

    def read_until(self, done) -> object:
        """Read until a command satisfies ``done``; that command (AssertionError at EOF)."""
        while True:
            for c in self.commands:
                if done(c):
                    return c
            data = self.sock.recv(65536)
            if not data:
                self.closed = True
                raise AssertionError(f"closed; read {self.commands}")
            self.commands += self.codec.receive_data(data)

    def answer(self):
        """The Response (or ExceptionResponse) to the ConnectionInfo."""
        return self.read_until(lambda c: isinstance(c, Response) and c.correlation_id == 1)

    def read_to_eof(self) -> list:
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                self.commands += self.codec.receive_data(data)
        except ConnectionResetError:
            pass
        self.closed = True
        return self.commands

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw() -> Iterator:
    made: list[RawClient] = []

    def make(address) -> RawClient:
        c = RawClient(address)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def wire_format_infos(commands) -> int:
    return sum(isinstance(c, Negotiated) or type(c).__name__ == "WireFormatInfo" for c in commands)


def scenario(url: str, client_id: str, queue: str, *, password: str = PASSWORD, count: int = 3, keep: int = 0) -> list:
    """The real client's run through the gateway: connect (the client id set before the
    connection's first use, so its ConnectionInfo carries it), send ``count`` texts ``m<i>`` to
    ``queue``, receive all but ``keep`` of them back, say where it is connected now."""
    return [
        {"op": "connect", "url": url, "user": USER, "password": password, "clientId": client_id},
        {"op": "send", "queue": queue, "body": "m{i}", "count": count},
        {"op": "receive", "queue": queue, "count": count - keep},
        {"op": "info"},
    ]


@pytest.fixture
def classic(openwire_client):
    """``run(url, client_id, queue, password=, count=, keep=)``: the real client's outcome,
    ``{"ok": True, "remote": <where it ended>, "received": [...]}`` or the failed command's
    error (``{"ok": False, "class", "message", "cause"}``)."""

    def run(url: str, client_id: str, queue: str, **kwargs) -> dict:
        return outcome(openwire_client.run(scenario(url, client_id, queue, **kwargs), check=False))

    return run


def javax(text: str | None) -> str | None:
    """The 6.x client's ``jakarta.jms`` classes named as the 5.17 client's ``javax.jms`` ones."""
    return text.replace("jakarta.jms.", "javax.jms.") if text is not None else None


def outcome(results: list) -> dict:
    """A scenario's results in short: where it ended and what it received, or why it failed."""
    last = results[-1]
    if not last["ok"]:
        error = last["error"]
        return {"ok": False, "class": javax(error["class"]), "message": error["message"], "cause": javax(error.get("cause"))}
    return {"ok": True, "remote": last["remoteAddress"], "received": [m["body"] for m in results[2]["messages"]]}


def address_url(address) -> str:
    host, port = address
    return f"tcp://{host}:{port}"


# --------------------------------------------------------------------------- forwarded


def test_forwarded_the_target_answers_the_connectioninfo_and_has_the_client_id(w, raw):
    client_id = f"fwd-{next(_ids)}"
    c = raw(w.gateway.routed["rfwd"])
    c.open(client_id)
    answer = c.answer()
    assert type(answer) is Response, answer
    # one WireFormatInfo (the gateway's): the target's was dropped, not passed on
    assert wire_format_infos(c.commands) == 1, c.commands
    # the target (FIRST_ELEMENT: a1) holds the client id: a second connection with it is refused there
    again = raw(("127.0.0.1", w.a1.artemis.core_port))
    again.open(client_id)
    refused = again.answer()
    assert isinstance(refused, ExceptionResponse), refused
    assert refused.exception.class_name == "javax.jms.InvalidClientIDException"


def test_kept_local_the_gateways_own_node_answers_and_its_wireformatinfo_is_not_passed_on(w, raw):
    c = raw(w.gateway.routed["rlocal"])
    c.open(f"tenantB-{next(_ids)}")
    answer = c.answer()
    assert type(answer) is Response, answer
    assert wire_format_infos(c.commands) == 1, c.commands


# --------------------------------------------------------------------------- redirected


def test_redirected_a_failover_client_gets_a_connection_control_naming_the_target(w, raw):
    c = raw(w.gateway.routed["rredir"])
    c.open(f"redir-{next(_ids)}", failover=True)
    commands = c.read_to_eof()
    controls = [x for x in commands if isinstance(x, ConnectionControl)]
    target = f"tcp://127.0.0.1:{w.a2.artemis.core_port}"
    assert [(x.reconnect_to, x.connected_brokers, x.rebalance_connection) for x in controls] == [
        (target, target, True)
    ]
    assert not [x for x in commands if isinstance(x, Response)]


def test_redirect_without_failover_is_refused_with_an_illegal_state_exception(w, raw):
    c = raw(w.gateway.routed["rredir"])
    c.open(f"plain-{next(_ids)}")
    answer = c.answer()
    assert isinstance(answer, ExceptionResponse)
    assert answer.exception.class_name == "java.lang.IllegalStateException"
    assert answer.exception.message == "Client not fault tolerant"  # Artemis's words
    c.read_to_eof()
    assert not [x for x in c.commands if isinstance(x, ConnectionControl)]


# --------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("router", "text"),
    [("rdown", "Connection router rdown is not ready"),
     ("rnone", "Connection router rnone rejected this connection")],
)  # fmt: skip
def test_refused_with_artemis_text(w, raw, router, text):
    c = raw(w.gateway.routed[router])
    c.open(f"tenantB-{next(_ids)}", failover=True)
    answer = c.answer()
    assert isinstance(answer, ExceptionResponse), answer
    assert (answer.exception.class_name, answer.exception.message) == ("javax.jms.JMSException", text)
    c.read_to_eof()
    assert c.closed


def test_a_bad_password_gets_artemis_security_exception(w, raw):
    c = raw(w.gateway.routed["rfwd"])
    c.open(f"bad-{next(_ids)}", password="wrong")
    answer = c.answer()
    assert isinstance(answer, ExceptionResponse), answer
    assert answer.exception.class_name == "java.lang.SecurityException"
    assert answer.exception.message.startswith("AMQ229031: Unable to validate user from /127.0.0.1:")
    assert answer.exception.message.endswith(f"Username: {USER}; SSL certificate subject DN: unavailable")


# --------------------------------------------------------------------------- the real client


def test_the_real_client_forwarded_sends_and_receives_through_the_gateway(w, classic):
    result = classic(address_url(w.gateway.routed["rfwd"]), f"jfwd-{next(_ids)}", f"q.jfwd.{next(_ids)}")
    assert result["ok"] is True, result
    assert result["received"] == ["m0", "m1", "m2"]
    assert result["remote"].endswith(f":{w.gateway.routed['rfwd'][1]}")  # it stayed on the gateway


def test_the_real_failover_client_is_redirected_to_the_target_the_router_chose(w, classic):
    url = f"failover:({address_url(w.gateway.routed['rredir'])})?randomize=false&maxReconnectAttempts=5&timeout=10000"
    result = classic(url, f"jredir-{next(_ids)}", f"q.jredir.{next(_ids)}")
    assert result["ok"] is True, result
    assert result["received"] == ["m0", "m1", "m2"]
    assert result["remote"].endswith(f":{w.a2.artemis.core_port}")  # FIRST_ELEMENT of a2, a1


@pytest.mark.parametrize(
    ("router", "text"),
    [("rdown", "Connection router rdown is not ready"),
     ("rnone", "Connection router rnone rejected this connection")],
)  # fmt: skip
def test_the_real_client_refused_gets_the_routers_reason(w, classic, router, text):
    result = classic(address_url(w.gateway.routed[router]), f"tenantB-{next(_ids)}", "q.refused")
    assert result["ok"] is False, result
    assert (result["class"], result["message"]) == ("javax.jms.JMSException", text)


def test_the_real_client_with_a_bad_password_gets_artemis_security_error(w, classic):
    result = classic(address_url(w.gateway.routed["rfwd"]), f"jbad-{next(_ids)}", "q.bad", password="wrong")
    assert result["ok"] is False, result
    assert result["class"] == "javax.jms.JMSSecurityException", result
    assert result["message"].startswith("AMQ229031: Unable to validate user from /127.0.0.1:")


def test_real_artemis_redirects_the_same_client_alike(w, classic, artemis_factory):
    """The reference: Artemis's own CLIENT_ID router on its OpenWire acceptor moves the same
    failover: client to its target, and refuses the same plain tcp: client."""
    b = artemis_factory("b", user=USER, password=PASSWORD).start()
    a = artemis_factory(
        "a", user=USER, password=PASSWORD, router="r",
        extra_core_xml=artemis_router_xml("r", {"b": b.url}, user=USER, password=PASSWORD),
    ).start()  # fmt: skip
    failover = f"failover:({a.url})?randomize=false&maxReconnectAttempts=5&timeout=10000"
    moved = classic(failover, f"jart-{next(_ids)}", f"q.jart.{next(_ids)}")
    assert moved["ok"] is True, moved
    assert moved["received"] == ["m0", "m1", "m2"]
    assert moved["remote"].endswith(f":{b.core_port}")
    plain = classic(a.url, f"jart-{next(_ids)}", "q.jart.plain")
    ours = classic(address_url(w.gateway.routed["rredir"]), f"jplain-{next(_ids)}", "q.jplain")
    assert plain == ours == {
        "ok": False, "class": "javax.jms.JMSException", "message": "Client not fault tolerant",
        "cause": "java.lang.IllegalStateException: Client not fault tolerant",
    }  # fmt: skip


# --------------------------------------------------------------------------- Junction nodes as targets


def make_node(factory, name: str, protocols: str = "AMQP,OPENWIRE") -> BrokerProcess:
    """A Junction broker core (not started) whose ``gateway-in`` acceptor takes OpenWire (and
    AMQP, for the pool's readiness probe), with the gateway's users: a redirected client logs
    in to it directly."""
    port = free_port()
    node = factory(
        name, security=True, users=routing.USERS,
        extra_acceptors_xml=f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols={protocols}</acceptor>',
    )  # fmt: skip
    node.gateway_in_port = port
    return node


@pytest.fixture(scope="module")
def nodes_world(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """Two Junction nodes, j1 and j2, and a gateway with a routed OpenWire acceptor per router:

    ``jfwd``   CLIENT_ID, FIRST_ELEMENT over j1, j2, ``routerMode=forward``
    ``jredir`` CLIENT_ID, CONSISTENT_HASH over j1, j2, ``routerMode=redirect``
    ``jdown``  CLIENT_ID over a node never started: not ready
    ``jnone``  CLIENT_ID, local filter ``tenantA``, no policy and no pool: rejected
    ``jnoow``  CLIENT_ID, forward to j3, whose acceptor takes AMQP and STOMP (not OpenWire)
    """
    made: list = []

    def factory(name: str, **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("ow-nodes"), name=name, **kwargs)
        made.append(b)
        return b

    try:
        j1, j2, down = (make_node(factory, n) for n in ("j1", "j2", "jdown-node"))
        j3 = make_node(factory, "j3", protocols="AMQP,STOMP")
        for node in (j1, j2, j3):
            node.start()
        routers = {
            "jfwd": pool_router("jfwd", [j1, j2]),
            "jredir": pool_router("jredir", [j1, j2], policy="CONSISTENT_HASH"),
            "jdown": pool_router("jdown", [down]),
            "jnone": pool_router("jnone", [], local_filter="tenantA", policy=None),
            "jnoow": pool_router("jnoow", [j3]),
        }
        protocols = {r: "OPENWIRE;routerMode=redirect" for r in routers}
        protocols["jfwd"] = protocols["jnoow"] = "OPENWIRE;routerMode=forward"
        gateway = routing.make_gateway(factory, "gateway", [j1, j2, j3, down], routers, protocols=protocols).start()
        for r in ("jfwd", "jredir"):
            routing.wait_ready(gateway, r, j1=True, j2=True)
        routing.wait_ready(gateway, "jnoow", j3=True)
        yield SimpleNamespace(gateway=gateway, j1=j1, j2=j2, j3=j3, made=[b for b in made if b is not down])
    finally:
        for b in reversed(made):
            b.stop()


@pytest.fixture
def jw(request, nodes_world) -> SimpleNamespace:
    request.node._junction_brokers = list(nodes_world.made)
    return nodes_world


def chosen(jw, router: str, client_id: str) -> BrokerProcess:
    """The node ``router`` picks for ``client_id``, as the gateway's management API answers."""
    target = jw.gateway.get_json(f"/api/routers/{router}/target?key={client_id}")
    return {"j1": jw.j1, "j2": jw.j2}[target["connector"]["name"]]


def test_junction_nodes_forwarded_the_node_answers_and_has_the_client_id(jw, raw):
    client_id = f"jfwd-raw-{next(_ids)}"
    c = raw(jw.gateway.routed["jfwd"])
    c.open(client_id)
    answer = c.answer()
    assert type(answer) is Response, answer
    assert wire_format_infos(c.commands) == 1, c.commands  # the gateway's; the node's dropped
    again = raw(("127.0.0.1", jw.j1.gateway_in_port))  # FIRST_ELEMENT: j1 holds the id
    again.open(client_id)
    refused = again.answer()
    assert isinstance(refused, ExceptionResponse), refused
    assert refused.exception.class_name == "javax.jms.InvalidClientIDException"


def test_junction_nodes_the_real_client_forwarded_works_on_the_first_node(jw, classic):
    queue = f"q.jfwd.{next(_ids)}"
    result = classic(address_url(jw.gateway.routed["jfwd"]), f"jfwd-{next(_ids)}", queue, keep=1)
    assert result["ok"] is True, result
    assert result["received"] == ["m0", "m1"]
    assert result["remote"].endswith(f":{jw.gateway.routed['jfwd'][1]}")  # it stayed on the gateway
    wait_queue(jw.j1, queue, message_count=1)  # the one left is on j1 (FIRST_ELEMENT), not on j2
    assert queue_status(jw.j2, queue) is None


def test_junction_nodes_redirected_a_raw_failover_client_gets_the_chosen_nodes_address(jw, raw):
    client_id = f"jredir-raw-{next(_ids)}"
    node = chosen(jw, "jredir", client_id)
    c = raw(jw.gateway.routed["jredir"])
    c.open(client_id, failover=True)
    controls = [x for x in c.read_to_eof() if isinstance(x, ConnectionControl)]
    target = f"tcp://127.0.0.1:{node.gateway_in_port}"
    assert [(x.reconnect_to, x.connected_brokers, x.rebalance_connection) for x in controls] == [
        (target, target, True)
    ]


def test_junction_nodes_the_real_failover_client_lands_on_the_node_its_client_id_chose(jw, classic):
    """CONSISTENT_HASH of the client id: client ids are tried until both nodes have been chosen
    (each has odds of one half per id), and each client's message is in its chosen node's queue."""
    landed = {}
    for _ in range(30):
        client_id = f"jredir-{next(_ids)}"
        node = chosen(jw, "jredir", client_id)
        if node.name in landed:
            continue
        queue = f"q.jredir.{next(_ids)}"
        url = f"failover:({address_url(jw.gateway.routed['jredir'])})?randomize=false&maxReconnectAttempts=5&timeout=10000"
        result = classic(url, client_id, queue, keep=1)
        assert result["ok"] is True, result
        assert result["received"] == ["m0", "m1"]
        assert result["remote"] == f"tcp://127.0.0.1:{node.gateway_in_port}", (client_id, node.name)
        wait_queue(node, queue, message_count=1)
        other = jw.j2 if node is jw.j1 else jw.j1
        assert queue_status(other, queue) is None
        landed[node.name] = client_id
        if len(landed) == 2:
            break
    assert sorted(landed) == ["j1", "j2"], landed


@pytest.mark.parametrize(
    ("router", "text"),
    [("jdown", "Connection router jdown is not ready"),
     ("jnone", "Connection router jnone rejected this connection")],
)  # fmt: skip
def test_junction_nodes_the_real_client_refused_gets_the_routers_reason(jw, classic, router, text):
    result = classic(address_url(jw.gateway.routed[router]), f"tenantB-{next(_ids)}", "q.refused")
    assert result["ok"] is False, result
    assert (result["class"], result["message"]) == ("javax.jms.JMSException", text)


def test_junction_nodes_a_client_id_in_use_on_the_node_is_refused_by_it_through_the_gateway(jw, classic, raw):
    """The node's own refusal reaches a forwarded client: its client id is in use there."""
    client_id = f"jtaken-{next(_ids)}"
    holder = raw(("127.0.0.1", jw.j1.gateway_in_port))
    holder.open(client_id)
    assert type(holder.answer()) is Response
    result = classic(address_url(jw.gateway.routed["jfwd"]), client_id, "q.taken")
    assert result["ok"] is False, result
    assert result["class"] == "javax.jms.InvalidClientIDException", result
    assert result["message"] == f"AMQ229004: Client ID {client_id} is already in use", result


def test_junction_nodes_a_node_not_taking_openwire_refuses_at_once_and_the_client_is_told(jw, classic):
    """A forward to a node whose acceptor does not serve OpenWire: the node closes the
    connection, and the gateway refuses the client then (not after its 10 s handshake timeout)."""
    result = classic(address_url(jw.gateway.routed["jnoow"]), f"jnoow-{next(_ids)}", "q.noow")
    assert result["ok"] is False, result
    assert (result["class"], result["message"]) == (
        "javax.jms.JMSException",
        f"Connection router jnoow: target j3 (127.0.0.1:{jw.j3.gateway_in_port}) refused the connection: "
        "the target closed the connection during the handshake",
    )


# --------------------------------------------------------------------------- a TLS target


def test_the_real_failover_client_is_redirected_to_a_tls_node_over_ssl(broker_factory, openwire_clients, raw, tmp_path):
    """A target whose connector has ``sslEnabled=true`` is named ``ssl://host:port`` in the
    redirect, and the real 5.17 client, trusting the node's CA through its JVM, follows it
    over TLS to that node (whose acceptor takes TLS only; told ``tcp://``, as Artemis would
    say, the client's plain connections fail there)."""
    ca = trustme.CA()
    key_pem, ca_pem, trust = tmp_path / "node.pem", tmp_path / "ca.pem", tmp_path / "trust.p12"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(key_pem))
    ca.cert_pem.write_to_path(str(ca_pem))
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore",
                    str(trust), "-storetype", "PKCS12", "-storepass", "trust-secret"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    port = free_port()
    node = broker_factory(
        "jtls", security=True, users=routing.USERS,
        extra_acceptors_xml=f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=AMQP,OPENWIRE;'
                            f"sslEnabled=true;keyStorePath={key_pem}</acceptor>",
    ).start()  # fmt: skip
    node.gateway_in_port = port
    gateway = routing.make_gateway(
        broker_factory, "gateway", [node], {"rtls": pool_router("rtls", [node])},
        protocols={"rtls": "OPENWIRE;routerMode=redirect"},
        connector_params={"jtls": f"sslEnabled=true;trustStorePath={ca_pem}"},
    ).start()  # fmt: skip
    routing.wait_ready(gateway, "rtls", jtls=True)
    c = raw(gateway.routed["rtls"])
    c.open(f"jtls-raw-{next(_ids)}", failover=True)
    [control] = [x for x in c.read_to_eof() if isinstance(x, ConnectionControl)]
    assert (control.reconnect_to, control.connected_brokers) == (f"ssl://127.0.0.1:{port}",) * 2
    client = openwire_clients("5.17", tmp_path / "openwire")
    client.jvm_options += (f"-Djavax.net.ssl.trustStore={trust}", "-Djavax.net.ssl.trustStorePassword=trust-secret")
    try:
        url = f"failover:({address_url(gateway.routed['rtls'])})?randomize=false&maxReconnectAttempts=5&timeout=10000"
        queue = f"q.jtls.{next(_ids)}"
        result = outcome(client.run(scenario(url, f"jtls-{next(_ids)}", queue, keep=1), check=False))
    finally:
        client.close()
    assert result["ok"] is True, result
    assert result["received"] == ["m0", "m1"]
    assert result["remote"] == f"tcp://127.0.0.1:{port}"  # (the client's SSL transport says tcp:// too)
    wait_queue(node, queue, message_count=1)
    [acceptor] = [a for a in node.status()["acceptors"] if a["name"] == "gateway-in"]
    assert acceptor["tls"]["handshakes_failed"] == 0


# --------------------------------------------------------------------------- a Classic broker as the target


def test_a_classic_broker_with_the_cache_on_is_a_forwarding_target(tmp_path, classic_factory, classic, openwire_client):
    """ActiveMQ Classic offers the marshalling cache (as a node does); the real client asks for
    it and the gateway does not: the replayed WireFormatInfo offers the target what the client
    settled on, so the Classic broker reads and writes the client's uncached bytes."""
    target = classic_factory("c1", user=USER, password=PASSWORD, transport="auto").start()
    gateway = None
    try:
        pool = SimpleNamespace(name="c1", gateway_in_port=target.openwire_port)
        gateway = routing.make_gateway(
            lambda name, **kw: BrokerProcess(tmp_path, name=name, **kw), "gateway", [pool],
            {"cfwd": pool_router("cfwd", [pool])}, protocols={"cfwd": "OPENWIRE;routerMode=forward"},
            connector_params={"c1": "probeProtocols=STOMP"},
        ).start()
        routing.wait_ready(gateway, "cfwd", c1=True)
        queue = f"q.cfwd.{next(_ids)}"
        result = classic(address_url(gateway.routed["cfwd"]), f"cfwd-{next(_ids)}", queue, keep=1)
        assert result["ok"] is True, result
        assert result["received"] == ["m0", "m1"]
        assert result["remote"].endswith(f":{gateway.routed['cfwd'][1]}")  # through the gateway
        # the one left is on the Classic broker, read there directly
        direct = openwire_client.run(
            [{"op": "connect", "url": target.url, "user": USER, "password": PASSWORD},
             {"op": "receive", "queue": queue, "count": 1}], check=False)
        assert direct[-1]["ok"] is True, direct
        assert [m["body"] for m in direct[-1]["messages"]] == ["m2"]
    finally:
        if gateway is not None:
            gateway.stop()
