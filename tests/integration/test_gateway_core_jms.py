"""The real Artemis JMS client through the gateway: CORE forwarded, redirected, routed, refused.

Two broker cores (``gateway-in``: CORE and AMQP, the pool's readiness probe speaking AMQP)
behind one gateway with a routed acceptor per router (:func:`world`); the client connects to
a routed acceptor only.  Where its connection was served is read from the nodes themselves:
it sends to a queue named for the run, and exactly one node (a core, or the gateway's own
broker core for a *local* decision) then has that queue.

Redirected: DISCONNECT_V3 names the target's connector; the client adopts it, reconnects
there (``reconnectAttempts`` set, as Artemis's own redirect tests set it: a client without
reconnection gives up with AMQ219010 "Connection is destroyed", against the real broker as
here), asks the target CHECK_FOR_FAILOVER for the node that redirected it (a node without a
scale-down policy says yes) and creates its session there.  The real Artemis broker
redirecting the same client is the reference (:func:`test_real_artemis_redirects_the_same_client_alike`):
the same outcome, and the same packets from the redirecting node, byte for byte where they do
not name ports and node ids.

The JMS client id is a routing key only when it is in the connection factory's URL
(``clientID=``): ``Connection.setClientID`` comes after the connection's first CREATESESSION,
which is what is routed (Artemis's router reads the same packet).
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from junction.protocols.core.codec import CoreCodec
from junction.protocols.core.opening import NETTY_CONNECTOR_FACTORY
from junction.protocols.core.packet_types import PacketType
from junction.protocols.core.packets import DisconnectReason
from junction.protocols.core.texts import connector_text
from tests.artemis.broker import router_xml as artemis_router_xml
from tests.harness import BrokerProcess, free_port, wait_for
from tests.integration import test_gateway_routing as routing

pytestmark = pytest.mark.timeout(60)

#: user -> (password, roles): alice's roles route her on ROLE_NAME, bob's do not
USERS = routing.USERS
#: seconds any one expected thing may take
TIMEOUT = 15.0
#: octets a :class:`Tap` keeps of each direction of a connection
TAP_MAX_BYTES = 64 * 1024
#: what a redirected client needs (Artemis's RedirectTest: reconnectAttempts and a short retry)
RECONNECT = "reconnectAttempts=3&retryInterval=100"
_ids = itertools.count(1)


def new_name(prefix: str) -> str:
    return f"{prefix}.{next(_ids)}"


def make_core(factory, name: str, port: int | None = None) -> BrokerProcess:
    port = port if port is not None else free_port()
    core = factory(
        name,
        security=True,
        users=USERS,
        extra_acceptors_xml=f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=CORE,AMQP</acceptor>',
    )
    core.gateway_in_port = port
    return core


def url(address, *, client_id: str | None = None, params: str = RECONNECT) -> str:
    host, port = address
    query = "&".join(p for p in (params, f"clientID={client_id}" if client_id else "") if p)
    return f"tcp://{host}:{port}" + (f"?{query}" if query else "")


def scenario(target_url: str, queue: str, *, user: str = "app", password: str | None = None) -> list:
    """Connect, send three messages to ``queue`` and receive two: one is left where it landed."""
    return [
        {"op": "connect", "url": target_url, "user": user,
         "password": password if password is not None else USERS[user][0]},
        {"op": "send", "queue": queue, "body": "through the gateway {i}", "count": 3},
        {"op": "receive", "queue": queue, "count": 2},
    ]  # fmt: skip


def bodies(results) -> list:
    return [m["body"] for m in results[2]["messages"]]


def land(jms, w, router: str, *, user: str = "app", client_id: str | None = None) -> BrokerProcess:
    """Run the scenario through ``router``'s acceptor: the node that holds its queue."""
    queue = new_name(f"q.{router}")
    results = jms.run(scenario(url(w.gateway.routed[router], client_id=client_id), queue, user=user))
    assert bodies(results) == ["through the gateway 0", "through the gateway 1"]
    return routing.holder(w.nodes, queue)


def decision(gateway: BrokerProcess, router: str, client_id: str | None, user: str) -> str:
    """The outcome of the gateway's last logged decision of ``router`` for this client."""
    head = f"router {router}: CORE connection from "
    tail = f"(client-id {client_id!r}, user {user!r}) on acceptor in-{router}: key "

    def find():
        lines = [ln for ln in gateway.log_text().splitlines() if head in ln and tail in ln]
        return lines[-1].split(tail, 1)[1] if lines else None

    return wait_for(find, TIMEOUT, what=f"a decision of router {router} for {client_id!r} in the log")


def refusal(jms, address, *, user: str = "app", password: str | None = None, client_id=None) -> dict:
    """The error the real client's connect ends with."""
    commands = scenario(url(address, client_id=client_id), new_name("q.refused"), user=user, password=password)
    results = jms.run(commands, check=False)
    assert results[0]["ok"] is False, results
    return results[0]["error"]


class Tap:
    """A TCP relay to ``127.0.0.1:<port>`` that keeps, per connection, what the server wrote
    (``received``, its first :data:`TAP_MAX_BYTES` octets) and which side closed first."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[SimpleNamespace] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            conn = SimpleNamespace(received=bytearray(), closed_first=None, ended=0, sockets=(client, server))
            self.connections.append(conn)
            for src, dst, side in ((client, server, "client"), (server, client, "server")):
                threading.Thread(target=self._pump, args=(conn, src, dst, side), daemon=True).start()

    def _pump(self, conn, src, dst, side: str) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    break
                if side == "server":
                    conn.received += data[: TAP_MAX_BYTES - len(conn.received)]
                dst.sendall(data)
            except OSError:
                break
        with self._lock:
            conn.closed_first = conn.closed_first or side
            conn.ended += 1
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def first_connection(self) -> SimpleNamespace:
        """The first connection relayed, once both sides ended it."""
        return wait_for(
            lambda: self.connections and self.connections[0].ended == 2 and self.connections[0],
            TIMEOUT,
            what=f"the first connection through the relay to port {self.target} to end",
        )

    def close(self) -> None:
        self.listener.close()
        for conn in self.connections:
            for sock in conn.sockets:
                sock.close()


@pytest.fixture
def taps() -> Iterator:
    made: list[Tap] = []

    def make(port: int) -> Tap:
        made.append(Tap(port))
        return made[-1]

    yield make
    for tap in made:
        tap.close()


# --------------------------------------------------------------------------- the module's world


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """Two cores and one gateway, a routed acceptor per router (``gateway.routed[r]``):

    ``rfwd``    CLIENT_ID, FIRST_ELEMENT over core1, core2, ``routerMode=forward``
    ``rredir``  the same, ``routerMode=redirect``
    ``rcid``    CLIENT_ID, key filter ``^[^.]+`` (the tenant), local filter ``tenantA``,
                FIRST_ELEMENT over core2, core1; redirect
    ``ruser``   USER_NAME, local filter ``alice``, FIRST_ELEMENT over core2, core1; redirect
    ``rrole``   ROLE_NAME, key filter ``(?<=^tenant-).*``, local filter ``gold``,
                FIRST_ELEMENT over core2, core1; redirect
    ``rdown``   CLIENT_ID, FIRST_ELEMENT over a target nothing listens on: not ready
    ``rnone``   CLIENT_ID, local filter ``tenantA``, no policy and no pool: rejected
    """
    made: list[BrokerProcess] = []

    def factory(name: str, **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("core-routing"), name=name, **kwargs)
        made.append(b)
        return b

    try:
        core1 = make_core(factory, "core1").start()
        core2 = make_core(factory, "core2").start()
        down = SimpleNamespace(name="down", gateway_in_port=free_port())  # never listened on
        fe = {"check_period": 200}
        routers = {
            "rfwd": routing.router_xml("rfwd", key="CLIENT_ID", pool=[core1, core2], **fe),
            "rredir": routing.router_xml("rredir", key="CLIENT_ID", pool=[core1, core2], **fe),
            "rcid": routing.router_xml(
                "rcid", key="CLIENT_ID", key_filter="^[^.]+", local_filter="tenantA", pool=[core2, core1], **fe
            ),
            "ruser": routing.router_xml("ruser", key="USER_NAME", local_filter="alice", pool=[core2, core1], **fe),
            "rrole": routing.router_xml(
                "rrole", key="ROLE_NAME", key_filter="(?&lt;=^tenant-).*", local_filter="gold",
                pool=[core2, core1], **fe,
            ),
            "rdown": routing.router_xml("rdown", key="CLIENT_ID", pool=[down], **fe),
            "rnone": routing.router_xml("rnone", key="CLIENT_ID", local_filter="tenantA", policy=None),
        }  # fmt: skip
        protocols = {r: "CORE;routerMode=redirect" for r in routers}
        protocols["rfwd"] = "CORE;routerMode=forward"
        gateway = routing.make_gateway(
            factory, "gateway", [core1, core2, down], routers, protocols=protocols
        ).start()
        for r in ("rfwd", "rredir", "rcid", "ruser", "rrole"):
            routing.wait_ready(gateway, r, core1=True, core2=True)
        yield SimpleNamespace(
            gateway=gateway, core1=core1, core2=core2, nodes=[gateway, core1, core2], made=made,
            factory=factory, down=down,
        )
    finally:
        for b in reversed(made):
            b.stop()


@pytest.fixture
def w(request, world) -> SimpleNamespace:
    # the module's processes' log tails go with a failure report (tests/conftest.py)
    request.node._junction_brokers = list(world.made)
    return world


# --------------------------------------------------------------------------- forwarded, redirected


def test_the_real_client_is_forwarded_to_the_routers_target(w, jms):
    client_id = new_name("fwd")
    # FIRST_ELEMENT: core1 got the connection, and holds the message left unconsumed
    assert land(jms, w, "rfwd", client_id=client_id) is w.core1
    assert decision(w.gateway, "rfwd", client_id, "app").startswith(f"{client_id!r} -> forward to target ")


def test_the_real_client_is_redirected_to_the_routers_target(w, jms):
    client_id = new_name("redir")
    queue = new_name("q.redirected")
    results = jms.run(scenario(url(w.gateway.routed["rredir"], client_id=client_id), queue))
    assert bodies(results) == ["through the gateway 0", "through the gateway 1"]
    assert decision(w.gateway, "rredir", client_id, "app").startswith(f"{client_id!r} -> redirect to target ")
    # redirected, not forwarded: the client itself is connected to core1 now -- the message
    # left there is received by a client that connects to core1 directly
    assert routing.holder(w.nodes, queue) is w.core1
    direct = jms.run([
        {"op": "connect", "url": url(("127.0.0.1", w.core1.gateway_in_port), params=""), "user": "app",
         "password": USERS["app"][0]},
        {"op": "receive", "queue": queue, "count": 2, "timeout": 2000},
    ])  # fmt: skip
    assert [m["body"] for m in direct[1]["messages"]] == ["through the gateway 2"]


def test_an_xa_branch_through_the_gateway_is_prepared_recovered_and_committed_on_the_target(w, jms):
    """XA through the gateway (forwarded): a branch prepared over one connection is listed by
    ``recover`` and committed over another, both routed by the client id to the same core."""
    client_id = new_name("xafwd")
    queue = new_name("q.xa")
    x = {"format": 131077, "gtrid": f"gtrid-{client_id}", "bqual": "bq"}
    through = url(w.gateway.routed["rfwd"], client_id=client_id)
    login = {"user": "app", "password": USERS["app"][0]}
    prepared = jms.run([
        {"op": "xa_connect", "url": through, **login},
        {"op": "xa_start", "xid": x},
        {"op": "send", "queue": queue, "body": "in-branch {i}", "count": 2},
        {"op": "xa_end", "xid": x},
        {"op": "xa_prepare", "xid": x},
    ])  # fmt: skip
    assert prepared[4]["vote"] == 0
    committed = jms.run([
        {"op": "xa_connect", "url": through, **login},
        {"op": "xa_recover"},
        {"op": "xa_commit", "xid": x},
        {"op": "xa_recover"},
        {"op": "connect", "url": through, **login},
        {"op": "receive", "queue": queue, "count": 1},
    ])  # fmt: skip
    assert x in committed[1]["xids"] and x not in committed[3]["xids"]
    assert [m["body"] for m in committed[5]["messages"]] == ["in-branch 0"]
    # the branch's work is on core1 only (the one left there keeps the queue)
    assert routing.holder(w.nodes, queue) is w.core1


def test_real_artemis_redirects_the_same_client_alike(w, jms, artemis_factory, taps):
    """Differential: the real broker's router (CLIENT_ID, FIRST_ELEMENT over one target) and
    the gateway's ``rredir`` redirect the same client; each redirecting node is behind a relay
    that keeps what it wrote.  The same outcome (the messages, and the one left on the target
    that a client connecting to the target directly receives); the same packets but the PINGs
    (Artemis echoes the client's two PINGs; the gateway leaves them to whoever serves the
    connection, and the redirected client waits for no echo): the topology, DISCONNECT_V3 with
    reason REDIRECT, the redirecting node's id, the target's id and connector (the Netty
    factory, ``host`` and ``port`` as strings), then EXCEPTION 222 with Artemis's text for
    that connector (which the real broker's client at times closes the connection before
    reading: the client follows the DISCONNECT_V3 alone).  One difference is left: Artemis keeps the socket open until the client,
    connected to the target, closes it; the gateway closes it after the EXCEPTION (the client
    reconnects all the same)."""
    b = artemis_factory("b").start()
    a = artemis_factory("a", router="r", extra_core_xml=artemis_router_xml("r", {"b": b.url})).start()
    core1 = w.core1
    cases = {
        "artemis": (taps(a.core_port), "r", "admin", "admin", b.url, b.node_id, b.core_port),
        "junction": (
            taps(w.gateway.routed["rredir"][1]), "rredir", "app", USERS["app"][0],
            url(("127.0.0.1", core1.gateway_in_port), params=""), core1.status()["node_id"], core1.gateway_in_port,
        ),
    }  # fmt: skip
    seen = {}
    for name, (tap, router, user, password, direct_url, target_node_id, target_port) in cases.items():
        queue = new_name(f"q.{name}")
        results = jms.run(
            scenario(url(("127.0.0.1", tap.port), client_id=new_name(name)), queue, user=user, password=password)
        )
        left = jms.run([
            {"op": "connect", "url": direct_url, "user": user, "password": password},
            {"op": "receive", "queue": queue, "count": 2, "timeout": 2000},
        ])  # fmt: skip
        written = CoreCodec(server=False).receive_data(bytes(tap.first_connection().received))
        packets = [p for p in written if p.TYPE != PacketType.PING]
        if name == "junction":
            # a first topology message that names the server version and releases nothing
            # (CoreOpening's module doc: the client's race); Artemis sends only the second
            first = packets.pop(0)
            assert (first.TYPE, first.last, first.server_version) == (
                PacketType.CLUSTER_TOPOLOGY_V4, False, packets[0].server_version
            ), packets  # fmt: skip
        # Artemis writes its EXCEPTION without a flush after the flushed DISCONNECT_V3: the
        # client, reconnecting already, at times closes the connection before it arrives
        expected = [PacketType.CLUSTER_TOPOLOGY_V4, PacketType.DISCONNECT_V3, PacketType.EXCEPTION]
        if name == "artemis" and len(packets) == 2:
            expected.pop()
        assert [p.TYPE for p in packets] == expected, (name, packets)
        topology, disconnect = packets[:2]
        connector = disconnect.target_connector
        assert (disconnect.channel_id, disconnect.node_id, disconnect.reason) == (
            0, topology.node_id, DisconnectReason.REDIRECT,
        ), (name, disconnect)  # fmt: skip
        assert disconnect.target_node_id == target_node_id, (name, disconnect)
        assert connector.factory_class_name == NETTY_CONNECTOR_FACTORY, (name, connector)
        assert dict(connector.params) == {"host": "127.0.0.1", "port": str(target_port)}, (name, connector)
        for refused in packets[2:]:
            assert (refused.channel_id, refused.code, refused.message) == (
                1, 222, f"AMQ229237: Connection router {router} redirected the connection to {connector_text(connector)}"
            ), (name, refused)  # fmt: skip
        # a client without reconnectAttempts does not follow a redirect, from either
        unfollowed = jms.run(
            scenario(url(("127.0.0.1", tap.port), client_id=new_name(name), params=""), queue, user=user,
                     password=password),
            check=False,
        )[0]  # fmt: skip
        seen[name] = (
            bodies(results), [m["body"] for m in left[1]["messages"]], unfollowed["ok"],
            unfollowed.get("error", {}).get("message"),
        )  # fmt: skip
    assert seen["artemis"] == seen["junction"] == (
        ["through the gateway 0", "through the gateway 1"], ["through the gateway 2"],
        False, "AMQ219010: Connection is destroyed",
    )  # fmt: skip


# --------------------------------------------------------------------------- the keys


def test_client_id_routes_each_client_to_the_core_its_key_selects(w, jms):
    # the key is the key filter's whole match (the tenant): tenantA's is the local-target
    # filter's, so the gateway's own broker core serves it; tenantB's goes to the policy's
    # target, FIRST_ELEMENT of core2, core1: redirected to core2
    assert land(jms, w, "rcid", client_id="tenantA.app1") is w.gateway
    assert decision(w.gateway, "rcid", "tenantA.app1", "app").startswith("'tenantA' -> local")
    assert land(jms, w, "rcid", client_id="tenantB.app1") is w.core2
    assert decision(w.gateway, "rcid", "tenantB.app1", "app").startswith("'tenantB' -> redirect to target core2")


def test_user_name_routes_on_the_authenticated_user(w, jms):
    assert land(jms, w, "ruser", user="alice") is w.gateway
    assert decision(w.gateway, "ruser", None, "alice").startswith("'alice' -> local")
    assert land(jms, w, "ruser", user="bob") is w.core2
    assert decision(w.gateway, "ruser", None, "bob").startswith("'bob' -> redirect to target core2")


def test_role_name_routes_on_the_users_roles(w, jms):
    # alice's roles are staff and tenant-gold: the key is the filter's match, "gold": local
    assert land(jms, w, "rrole", user="alice") is w.gateway
    assert decision(w.gateway, "rrole", None, "alice").startswith("'gold' -> local")
    # bob's only role, staff, does not match: the key NULL, routed by the policy to core2
    assert land(jms, w, "rrole", user="bob") is w.core2
    assert decision(w.gateway, "rrole", None, "bob").startswith("'NULL' -> redirect to target core2")


# --------------------------------------------------------------------------- refusals


def refusals(gateway: BrokerProcess, router: str, client_id: str) -> int:
    """How many times the gateway refused this client as not ready."""
    head = f"router {router}: CORE connection from "
    tail = f"(client-id {client_id!r}, user 'app') on acceptor in-{router}: key "
    return sum(
        1 for ln in gateway.log_text().splitlines()
        if head in ln and tail in ln and "refused: not ready (REFUSED_UNAVAILABLE)" in ln
    )  # fmt: skip


def test_no_target_ready_the_client_retries_until_one_is(w, jms):
    """REFUSED_UNAVAILABLE is EXCEPTION 222 (AMQ229238), a ROUTING_EXCEPTION, which the client's
    session creation retries rather than report: against the real broker its connect waits
    (a new CREATESESSION on the same connection after each refusal, one per quorum timeout)
    until a target is ready.  The gateway closes the connection after its refusal, so here the
    client reconnects (``reconnectAttempts``) and asks again; either way its connect completes,
    on the target, once one is ready."""
    client_id = new_name("down")
    queue = new_name("q.down")
    run = jms.start(scenario(url(w.gateway.routed["rdown"], client_id=client_id), queue))
    wait_for(lambda: refusals(w.gateway, "rdown", client_id) >= 2, TIMEOUT, what="two refusals")
    assert run.results == [] or run.results[0]["ok"], run.results
    core3 = make_core(w.factory, "core3", w.down.gateway_in_port).start()
    results = run.wait()
    assert bodies(results) == ["through the gateway 0", "through the gateway 1"]
    assert routing.holder([*w.nodes, core3], queue) is core3


def test_a_rejected_connection_gives_the_client_artemis_rejection(w, jms):
    # no policy and no pool: REFUSED_USE_ANOTHER, EXCEPTION 119, which the client does not retry
    error = refusal(jms, w.gateway.routed["rnone"], client_id="tenantB.x")
    text = "AMQ229240: Connection router rnone rejected the connection"
    assert (error["class"], error["message"], error["cause"]) == (
        "javax.jms.JMSException", text, f"org.apache.activemq.artemis.api.core.ActiveMQRemoteDisconnectException: {text}"
    ), error


def test_a_bad_password_gives_the_client_artemis_security_error(w, jms):
    # checked by the gateway before routing (EXCEPTION 105), as the real broker does: the
    # JMS client's JMSSecurityException (test_artemis_peer.test_errors_are_results)
    error = refusal(jms, w.gateway.routed["rredir"], password="wrong", client_id=new_name("bad"))
    assert error["class"] == "javax.jms.JMSSecurityException", error
    assert error["message"].startswith("AMQ229031: Unable to validate user from /127.0.0.1:"), error
    assert error["message"].endswith(". Username: app; SSL certificate subject DN: unavailable"), error
    assert "ActiveMQSecurityException" in error["cause"], error
