"""Connection routing through a real gateway: key types, quorum, persisted cache, consistent hash.

The same kind of world as :mod:`tests.integration.test_gateway_stomp` (broker
cores with a ``gateway-in`` acceptor, ``protocols=STOMP,AMQP``, that the
gateway's connectors point at; a gateway node whose routed acceptors clients
connect to; every one a ``junction run`` process), with knobs that module's
``make_gateway`` lacks: several routers per gateway (one routed acceptor
each), ``key-filter``, ``local-target-filter``, policy properties, pool
quorum, cache, and more users with roles.

Where a client landed is read from the processes: it sends to a queue named
for it, and exactly one of the gateway (its own broker core serves the
*local* decisions) and the cores then has that queue.  The key the router
resolved is read from the gateway's decision log line (``router R: STOMP
connection from ... key 'K' -> ...``).  Artemis's semantics are those of
``reference/artemis-routing.md``, sections 1 (keys, filters, NULL), 3
(quorum) and 4 (cache).

The two cores and the key-types gateway are shared by the module (started
once); the other tests start their own gateways (and a third core) in front
of the same two cores.  Nothing waits by sleeping: waits poll with deadlines.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import stomp
from stomp.exception import ConnectFailedException

from junction.routing.policies import create_policy
from junction.routing.targets import Target
from tests.harness import BrokerProcess, free_port, queue_status, wait_for
from tests.integration import test_gateway_amqp as amqp
from tests.integration.test_stomp_clients import Client

pytestmark = pytest.mark.timeout(120)

#: user -> (password, roles); the same files on every node (cores authenticate forwarded clients)
USERS = {
    "app": ("app-secret", "app"),
    "pool": ("pool-secret", "pool"),
    "alice": ("alice-secret", "staff,tenant-gold"),
    "bob": ("bob-secret", "staff"),
}
PASSWORDS = {user: pw for user, (pw, _roles) in USERS.items()}
PREFIXES = {"anycastPrefix": "/queue/", "multicastPrefix": "/topic/"}
ROUTED_PARAMS = "anycastPrefix=/queue/;multicastPrefix=/topic/"
#: seconds any one expected thing may take
TIMEOUT = 15.0
#: pool check period (ms) of the module's gateway: several pools probe the same two cores
CHECK_PERIOD = 300

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


# --------------------------------------------------------------------------- building nodes


def make_core(factory: Callable[..., BrokerProcess], name: str) -> BrokerProcess:
    """A broker core (not started) with a ``gateway-in`` STOMP+AMQP acceptor."""
    port = free_port()
    core = factory(
        name,
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_acceptors_xml=(
            f'<acceptor name="gateway-in">tcp://127.0.0.1:{port}?protocols=STOMP,AMQP;'
            f"{ROUTED_PARAMS}</acceptor>"
        ),
    )
    core.gateway_in_port = port
    return core


def router_xml(
    name: str,
    *,
    key: str,
    key_filter: str | None = None,
    local_filter: str | None = None,
    policy: str | None = "FIRST_ELEMENT",
    properties: dict[str, str] | None = None,
    pool: list[BrokerProcess] | None = None,
    quorum_size: int | None = None,
    quorum_timeout: int = 500,
    check_period: int = 200,
    cache: tuple[bool, int] | None = None,
) -> str:
    """One ``<connection-router>``; ``cache`` is ``(persisted, timeout ms)``."""
    parts = [f"<key-type>{key}</key-type>"]
    if key_filter is not None:
        parts.append(f"<key-filter>{key_filter}</key-filter>")
    if local_filter is not None:
        parts.append(f"<local-target-filter>{local_filter}</local-target-filter>")
    if cache is not None:
        persisted, timeout = cache
        parts.append(
            f"<cache><persisted>{str(persisted).lower()}</persisted><timeout>{timeout}</timeout></cache>"
        )
    if policy is not None:
        props = "".join(f'<property key="{k}" value="{v}"/>' for k, v in (properties or {}).items())
        parts.append(f'<policy name="{policy}">{props}</policy>')
    if pool is not None:
        refs = "".join(f"<connector-ref>{c.name}</connector-ref>" for c in pool)
        quorum = f"<quorum-size>{quorum_size}</quorum-size>" if quorum_size is not None else ""
        parts.append(
            "<pool><username>pool</username><password>pool-secret</password>"
            f"<check-period>{check_period}</check-period>{quorum}"
            f"<quorum-timeout>{quorum_timeout}</quorum-timeout>"
            f"<static-connectors>{refs}</static-connectors></pool>"
        )
    return f'<connection-router name="{name}">{"".join(parts)}</connection-router>'


def make_gateway(
    factory: Callable[..., BrokerProcess],
    name: str,
    cores: list[BrokerProcess],
    routers: dict[str, str],
    *,
    protocols: dict[str, str] | None = None,
    connector_params: dict[str, str] | None = None,
) -> BrokerProcess:
    """A gateway node (not started): ``routers`` maps router name -> :func:`router_xml`.

    Each router gets its own routed acceptor (``protocols`` maps a router to
    its acceptor's ``protocols=...;params``, default ``STOMP``);
    ``gateway.routed[router]`` is its ``(host, port)``.  ``connector_params``
    maps a core's name to its connector's URL parameters (``sslEnabled=true;...``).
    """
    params = connector_params or {}
    connectors = "".join(
        f'<connector name="{c.name}">tcp://127.0.0.1:{c.gateway_in_port}'
        f"{'?' + params[c.name] if c.name in params else ''}</connector>"
        for c in cores
    )
    core_xml = (
        f"<connectors>{connectors}</connectors>"
        f"<connection-routers>{''.join(routers.values())}</connection-routers>"
    )
    routed = {r: ("127.0.0.1", free_port()) for r in routers}
    acceptors = "".join(
        f'<acceptor name="in-{r}">tcp://{host}:{port}?protocols={(protocols or {}).get(r, "STOMP")};'
        f"router={r};{ROUTED_PARAMS}</acceptor>"
        for r, (host, port) in routed.items()
    )
    gateway = factory(
        name,
        security=True,
        users=USERS,
        stomp_acceptor_params=PREFIXES,
        extra_core_xml=core_xml,
        extra_acceptors_xml=acceptors,
    )
    gateway.routed = routed
    return gateway


def router_targets(gateway: BrokerProcess, router: str) -> dict:
    return {t["name"]: t for t in gateway.status()["routers"][router]["targets"]}


def wait_ready(gateway: BrokerProcess, router: str, **expected: bool) -> dict:
    """Wait until ``router``'s pool says each named target is (not) ready; its targets."""

    def check():
        targets = router_targets(gateway, router)
        return all(targets[n]["ready"] is want for n, want in expected.items()) and targets

    return wait_for(check, TIMEOUT, interval=0.05, what=f"router {router} targets {expected}")


# --------------------------------------------------------------------------- clients and placement


class Clients:
    """Makes stomp.py 1.2 clients (optionally bound to a source address); closes them at the end."""

    def __init__(self) -> None:
        self.made: list[Client] = []

    def __call__(self, address, *, source: str | None = None) -> Client:
        c = Client(SimpleNamespace(stomp_address=address), "1.2")
        if source is not None:  # connect from another loopback address (127.0.0.2 ...)
            c.conn = stomp.Connection12(
                [address], reconnect_attempts_max=1, heartbeats=(0, 0), bind_host_port=(source, 0)
            )
            c.conn.set_listener("recorder", c.rec)
        self.made.append(c)
        return c

    def close(self) -> None:
        for c in reversed(self.made):
            c.close_quietly()


@pytest.fixture
def clients() -> Iterator[Clients]:
    made = Clients()
    yield made
    made.close()


def holder(nodes: list[BrokerProcess], queue: str) -> BrokerProcess:
    """The one node that has ``queue`` (waits for it to appear somewhere)."""

    def find():
        return [n for n in nodes if queue_status(n, queue) is not None] or None

    found = wait_for(find, TIMEOUT, what=f"queue {queue} on a node")
    assert len(found) == 1, f"queue {queue} on {[n.name for n in found]}"
    return found[0]


def place(
    clients: Clients,
    address,
    nodes: list[BrokerProcess],
    *,
    user: str = "app",
    client_id: str | None = None,
    source: str | None = None,
) -> BrokerProcess:
    """Connect (as ``user``, with ``client_id`` if any), send to a fresh queue: the node holding it."""
    headers = {"client-id": client_id} if client_id is not None else {}
    c = clients(address, source=source).connect(user, PASSWORDS[user], **headers)
    queue = new_id("q")
    c.send(f"/queue/{queue}", "here")
    where = holder(nodes, queue)
    c.disconnect()
    return where


def refused(
    clients: Clients, address, *, user: str = "app", client_id: str | None = None, password=None
) -> str:
    """Connect and expect an ERROR instead of CONNECTED: its ``message``."""
    headers = {"client-id": client_id} if client_id is not None else {}
    c = clients(address)
    with pytest.raises(ConnectFailedException):
        c.connect(user, password if password is not None else PASSWORDS[user], **headers)
    return c.rec.wait_error().headers["message"]


_DECISION = re.compile(
    r"router (?P<router>\S+): (?P<proto>STOMP|AMQP) connection from (?P<peer>\S+) "
    r"\((?:client-id|container-id) (?P<client>.*?), user (?P<user>.*?)\) on acceptor \S+: "
    r"key (?P<key>.*?) -> "
)


def decisions(gateway: BrokerProcess, router: str) -> list[dict]:
    """The gateway's logged routing decisions of ``router``, oldest first."""
    return [
        m.groupdict() for m in _DECISION.finditer(gateway.log_text()) if m.group("router") == router
    ]


def decided_key(
    gateway: BrokerProcess, router: str, client: str | None, proto: str = "STOMP"
) -> str:
    """The key (repr'd) of the last decision of ``router`` for this client id and protocol."""

    def find():
        hits = [
            d
            for d in decisions(gateway, router)
            if d["client"] == repr(client) and d["proto"] == proto
        ]
        return hits[-1]["key"] if hits else None

    return wait_for(
        find, TIMEOUT, what=f"a {proto} decision of router {router} for {client!r} in the log"
    )


def last_decision(gateway: BrokerProcess, router: str) -> tuple[str, str, str]:
    """(client, peer host, key) of the last logged decision of ``router``."""
    d = wait_for(
        lambda: decisions(gateway, router), TIMEOUT, what=f"a decision of router {router}"
    )[-1]
    return d["client"], d["peer"].rsplit(":", 1)[0], d["key"]


# --------------------------------------------------------------------------- the module's world


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> Iterator[SimpleNamespace]:
    """Two broker cores shared by every test of the module (no test stops them)."""
    made: list[BrokerProcess] = []

    def factory(name: str, **kwargs) -> BrokerProcess:
        b = BrokerProcess(tmp_path_factory.mktemp("routing-world"), name=name, **kwargs)
        made.append(b)
        return b

    try:
        core1 = make_core(factory, "core1").start()
        core2 = make_core(factory, "core2").start()
        yield SimpleNamespace(core1=core1, core2=core2, factory=factory, made=made)
    finally:
        for b in reversed(made):
            b.stop()


@pytest.fixture(scope="module")
def keys_gateway(cores) -> BrokerProcess:
    """One gateway with a router (and a routed acceptor) per key-type case.

    ``rcid``  CLIENT_ID, key filter ``^[^.]+`` (the tenant), local filter ``tenantA``,
              FIRST_ELEMENT over core1, core2; STOMP and AMQP (``routerMode=forward``)
    ``rshard`` CLIENT_ID, CONSISTENT_HASH_MODULO MODULO=5, local filter ``NULL|0``, no pool
    ``rip``   SOURCE_IP, local filter ``127\\.0\\.0\\.1``, FIRST_ELEMENT over core1, core2
    ``ripf``  SOURCE_IP, key filter ``^[^.]+`` (the first octet), local filter ``127``, no pool
    ``ruser`` USER_NAME, local filter ``alice``, FIRST_ELEMENT over core1, core2
    ``rrole`` ROLE_NAME, key filter ``(?<=^tenant-).*``, local filter ``gold``, no pool
    ``rrole1`` ROLE_NAME, no key filter (the first role), local filter ``staff``, no pool
    """
    pool = [cores.core1, cores.core2]
    fe = {"pool": pool, "check_period": CHECK_PERIOD}
    routers = {
        "rcid": router_xml(
            "rcid", key="CLIENT_ID", key_filter="^[^.]+", local_filter="tenantA", **fe
        ),
        "rshard": router_xml(
            "rshard",
            key="CLIENT_ID",
            local_filter="NULL|0",
            policy="CONSISTENT_HASH_MODULO",
            properties={"MODULO": "5"},
        ),
        "rip": router_xml("rip", key="SOURCE_IP", local_filter=r"127\.0\.0\.1", **fe),
        "ripf": router_xml(
            "ripf", key="SOURCE_IP", key_filter="^[^.]+", local_filter="127", policy=None
        ),
        "ruser": router_xml("ruser", key="USER_NAME", local_filter="alice", **fe),
        "rrole": router_xml(
            "rrole",
            key="ROLE_NAME",
            key_filter="(?&lt;=^tenant-).*",
            local_filter="gold",
            policy=None,
        ),
        "rrole1": router_xml("rrole1", key="ROLE_NAME", local_filter="staff", policy=None),
    }
    gateway = make_gateway(
        cores.factory,
        "keys-gateway",
        pool,
        routers,
        protocols={"rcid": "STOMP,AMQP;routerMode=forward"},
    ).start()
    for r in ("rcid", "rip", "ruser"):
        wait_ready(gateway, r, core1=True, core2=True)
    return gateway


@pytest.fixture
def keys(request, cores, keys_gateway) -> SimpleNamespace:
    # the module's processes' log tails go with a failure report (tests/conftest.py)
    request.node._junction_brokers = list(cores.made)
    g = keys_gateway
    return SimpleNamespace(
        gateway=g, core1=cores.core1, core2=cores.core2, nodes=[g, cores.core1, cores.core2]
    )


# --------------------------------------------------------------------------- 1. key types


def test_client_id_key_filter_and_local_target_filter(keys, clients):
    g, core1 = keys.gateway, keys.core1
    address = g.routed["rcid"]
    # the key is the key filter's whole match: both apps of tenantA share the key "tenantA",
    # which the local-target filter matches: served by the gateway's own broker core
    for client_id in ("tenantA.app1", "tenantA.app2"):
        assert place(clients, address, keys.nodes, client_id=client_id) is g, client_id
        assert decided_key(g, "rcid", client=client_id) == "'tenantA'"
    # another tenant's key is not matched: the policy's target (FIRST_ELEMENT: core1)
    assert place(clients, address, keys.nodes, client_id="tenantB.app1") is core1
    assert decided_key(g, "rcid", client="tenantB.app1") == "'tenantB'"
    # the local-target filter must match the whole key (Matcher.matches())
    assert place(clients, address, keys.nodes, client_id="tenantAX.app1") is core1
    assert decided_key(g, "rcid", client="tenantAX.app1") == "'tenantAX'"


def test_client_id_null_key(keys, clients):
    g, core1 = keys.gateway, keys.core1
    # no client-id, or one the key filter does not find: the key "NULL", routed by the policy
    assert place(clients, g.routed["rcid"], keys.nodes) is core1
    assert decided_key(g, "rcid", None) == "'NULL'"
    assert place(clients, g.routed["rcid"], keys.nodes, client_id=".hidden") is core1
    assert decided_key(g, "rcid", client=".hidden") == "'NULL'"
    # AutoClientIDShardClusterTest: CONSISTENT_HASH_MODULO turns a key into its shard, but
    # never "NULL" (which would be shard 1 of 5), so a local filter "NULL|0" keeps the
    # clients without a client id and shard 0; the other shards are for another node
    shard = create_policy("CONSISTENT_HASH_MODULO", {"MODULO": "5"})
    assert (
        shard.transform_key("NULL"),
        shard.transform_key("BBB"),
        shard.transform_key("AAA"),
    ) == ("1", "0", "2")
    address = g.routed["rshard"]
    assert place(clients, address, keys.nodes) is g
    assert decided_key(g, "rshard", None) == "'NULL'"
    assert place(clients, address, keys.nodes, client_id="BBB") is g
    assert decided_key(g, "rshard", client="BBB") == "'0'"
    assert (
        refused(clients, address, client_id="AAA")
        == "Connection router rshard rejected this connection"
    )
    assert decided_key(g, "rshard", client="AAA") == "'2'"


def test_source_ip(keys, clients):
    g, core1 = keys.gateway, keys.core1
    # the key is the client's address without the port
    assert place(clients, g.routed["rip"], keys.nodes) is g
    assert last_decision(g, "rip")[1:] == ("127.0.0.1", "'127.0.0.1'")
    # another source address is not matched by the local-target filter: forwarded
    assert place(clients, g.routed["rip"], keys.nodes, source="127.0.0.2") is core1
    assert last_decision(g, "rip")[1:] == ("127.0.0.2", "'127.0.0.2'")
    # with the key filter ^[^.]+ both addresses have the key "127", which is local here
    for source in ("127.0.0.1", "127.0.0.2"):
        assert place(clients, g.routed["ripf"], keys.nodes, source=source) is g, source
        assert last_decision(g, "ripf")[1:] == (source, "'127'")


def test_user_name(keys, clients):
    g, core1 = keys.gateway, keys.core1
    address = g.routed["ruser"]
    assert place(clients, address, keys.nodes, user="alice", client_id="u-alice") is g
    assert decided_key(g, "ruser", client="u-alice") == "'alice'"
    assert place(clients, address, keys.nodes, user="app", client_id="u-app") is core1
    assert decided_key(g, "ruser", client="u-app") == "'app'"
    # the key is the authenticated user: a wrong password is refused before routing
    message = refused(clients, address, user="alice", client_id="u-bad", password="wrong")
    assert message == "Security Error occurred: User name [alice] or password is invalid"
    # (the refusal is logged before the ERROR is written: a decision would be in the log by now)
    assert "(client-id 'u-bad'): login 'alice' refused: authentication failed" in g.log_text()
    assert not [d for d in decisions(g, "ruser") if d["client"] == "'u-bad'"]


def test_role_name(keys, clients):
    g = keys.gateway
    address = g.routed["rrole"]
    # alice's roles are staff and tenant-gold: the key is the filter's match in the first
    # role it is found in, "gold" (the prefix stripped by the look-behind): local
    assert place(clients, address, keys.nodes, user="alice", client_id="r-alice") is g
    assert decided_key(g, "rrole", client="r-alice") == "'gold'"
    # bob's only role, staff, does not match: the key is "NULL"; no policy and no pool,
    # so Artemis refuses it as for another node (AmqpRedirectTest, MQTTRedirectTest)
    message = refused(clients, address, user="bob", client_id="r-bob")
    assert message == "Connection router rrole rejected this connection"
    assert decided_key(g, "rrole", client="r-bob") == "'NULL'"
    # without a key filter the key is the first role: alice's is staff, app's is app
    address = g.routed["rrole1"]
    assert place(clients, address, keys.nodes, user="alice", client_id="r1-alice") is g
    assert decided_key(g, "rrole1", client="r1-alice") == "'staff'"
    message = refused(clients, address, user="app", client_id="r1-app")
    assert message == "Connection router rrole1 rejected this connection"
    assert decided_key(g, "rrole1", client="r1-app") == "'app'"


def amqp_connection_on(node: BrokerProcess, container_id: str):
    for conn in node.status()["connections"]:
        if conn["client_id"] == container_id:
            return conn
    return None


def test_amqp_container_id_is_the_client_id(keys):
    g, core1 = keys.gateway, keys.core1
    for container_id, expected in (("tenantA.amqp", g), ("tenantB.amqp", core1)):
        conn = amqp.connect(g.routed["rcid"], container_id)
        try:
            sender = conn.create_sender(
                new_id("amqp-q")
            )  # a session: the node lists the connection
            seen = wait_for(
                lambda cid=container_id: [n for n in keys.nodes if amqp_connection_on(n, cid)],
                TIMEOUT,
                what=f"{container_id} on a node",
            )
            assert seen == [expected], (container_id, [n.name for n in seen])
            assert amqp_connection_on(expected, container_id)["user"] == "app"
            sender.close()
        finally:
            conn.close()
    assert decided_key(g, "rcid", proto="AMQP", client="tenantA.amqp") == "'tenantA'"
    assert decided_key(g, "rcid", proto="AMQP", client="tenantB.amqp") == "'tenantB'"


# --------------------------------------------------------------------------- 2. quorum


def test_quorum_unmet_is_refused_as_not_ready_until_the_second_core_starts(
    cores, broker_factory, clients
):
    core1 = cores.core1
    core3 = make_core(broker_factory, "core3")  # not started yet
    router = router_xml(
        "rq",
        key="CLIENT_ID",
        pool=[core1, core3],
        quorum_size=2,
        quorum_timeout=500,
        cache=(False, 0),
    )
    gateway = make_gateway(broker_factory, "quorum-gateway", [core1, core3], {"rq": router}).start()
    address = gateway.routed["rq"]
    nodes = [gateway, core1, core3]
    wait_ready(gateway, "rq", core1=True, core3=False)
    # core1 alone is ready, and FIRST_ELEMENT would pick it: the quorum of 2 refuses
    started = time.monotonic()
    assert refused(clients, address, client_id=new_id("q")) == "Connection router rq is not ready"
    assert time.monotonic() - started >= 0.4  # the pool waited out its quorum-timeout first
    assert gateway.status()["routers"]["rq"]["quorum_size"] == 2

    core3.start()
    wait_ready(gateway, "rq", core1=True, core3=True)
    kept = new_id("kept")
    assert place(clients, address, nodes, client_id=kept) is core1
    assert place(clients, address, nodes, client_id=new_id("q")) is core1

    # below quorum again: a cached key still reaches its ready target (getReadyTarget does
    # not enforce the quorum), a new key is refused
    core3.stop()
    wait_ready(gateway, "rq", core1=True, core3=False)
    assert place(clients, address, [gateway, core1], client_id=kept) is core1
    assert refused(clients, address, client_id=new_id("q")) == "Connection router rq is not ready"


# --------------------------------------------------------------------------- 3. persisted cache


def cache_records(path: Path) -> list[dict]:
    """The records of a persisted router cache file (see junction.gateway.cache.FileCacheStore)."""
    if not path.exists():
        return []
    return [json.loads(line[9:]) for line in path.read_text().splitlines() if line]


def live_entries(path: Path) -> dict[str, str]:
    live: dict[str, str] = {}
    for record in cache_records(path):
        if "v" in record:
            live[record["k"]] = record["v"]
        else:
            live.pop(record["k"], None)
    return live


def test_persisted_cache_keeps_a_client_on_its_core_across_a_gateway_restart(
    cores, broker_factory, clients
):
    core1, core2 = cores.core1, cores.core2
    pool = [core1, core2]
    routers = {
        "rr": router_xml(
            "rr", key="CLIENT_ID", policy="ROUND_ROBIN", pool=pool, cache=(True, 600_000)
        ),
        "rshort": router_xml(
            "rshort", key="CLIENT_ID", policy="ROUND_ROBIN", pool=pool, cache=(True, 1000)
        ),
    }
    gateway = make_gateway(broker_factory, "cache-gateway", pool, routers).start()
    nodes = [gateway, core1, core2]
    node_ids = {c.status()["node_id"]: c for c in pool}
    wait_ready(gateway, "rr", core1=True, core2=True)
    wait_ready(gateway, "rshort", core1=True, core2=True)
    # persisted caches live in <journal-directory>/../routers/<router>.cache (Node.routers_dir)
    routers_dir = Path(gateway.status()["data_dirs"]["journal"]).parent / "routers"

    x = new_id("sticky")
    home = place(clients, gateway.routed["rr"], nodes, client_id=x)
    assert home in pool
    # the entry is on disk before the client was answered
    assert node_ids[live_entries(routers_dir / "rr.cache")[x]] is home

    gateway.stop()
    gateway.start()
    wait_ready(gateway, "rr", core1=True, core2=True)
    # fresh keys until one lands on x's core: round robin's next choice is then the other one
    for _ in range(2):
        if place(clients, gateway.routed["rr"], nodes, client_id=new_id("fresh")) is home:
            break
    else:
        pytest.fail(f"two fresh keys in a row missed {home.name}: not round robin")
    # x comes back to its core from the reloaded cache, where the policy would have said the other
    assert place(clients, gateway.routed["rr"], nodes, client_id=x) is home
    other = core2 if home is core1 else core1
    assert place(clients, gateway.routed["rr"], nodes, client_id=new_id("fresh")) is other
    assert decisions(gateway, "rr")[-2]["client"] == repr(x)
    assert "cache hit" in [line for line in gateway.log_text().splitlines() if f"'{x}'" in line][-1]

    # an idle entry expires after the timeout, and its stored record is deleted
    path = routers_dir / "rshort.cache"
    k = new_id("short")
    place(clients, gateway.routed["rshort"], nodes, client_id=k)
    assert k in live_entries(path)
    wait_for(lambda: k not in live_entries(path), TIMEOUT, what=f"{k}'s record deleted from {path}")
    assert {"k": k} in cache_records(path)  # a delete record, not a rewrite that lost it


# --------------------------------------------------------------------------- 4. consistent hash


def test_consistent_hash_gives_the_same_core_from_two_gateways(cores, broker_factory, clients):
    core1, core2 = cores.core1, cores.core2
    by_node = {c.status()["node_id"]: c for c in (core1, core2)}
    schemes = {"rh": {}, "rf": {"HASH": "FNV1A"}}  # Junction's rendezvous hash, Artemis's ring

    def gateway(name: str, order: list[BrokerProcess]) -> BrokerProcess:
        routers = {
            r: router_xml(r, key="CLIENT_ID", policy="CONSISTENT_HASH", properties=p, pool=order)
            for r, p in schemes.items()
        }
        return make_gateway(broker_factory, name, order, routers)

    # the same connectors, listed in opposite orders
    gw1 = gateway("hash-gateway-1", [core1, core2]).start()
    gw2 = gateway("hash-gateway-2", [core2, core1]).start()
    for g in (gw1, gw2):
        for r in schemes:
            wait_ready(g, r, core1=True, core2=True)
    nodes = [gw1, gw2, core1, core2]
    client_ids = [new_id("hash") for _ in range(12)]
    for r, props in schemes.items():
        policy = create_policy("CONSISTENT_HASH", props)
        targets = [Target(node_id=n, ready=True) for n in by_node]
        expected = {cid: by_node[policy.select(targets, cid).node_id] for cid in client_ids}
        for g in (gw1, gw2):
            placed = {cid: place(clients, g.routed[r], nodes, client_id=cid) for cid in client_ids}
            assert {c: n.name for c, n in placed.items()} == {
                c: n.name for c, n in expected.items()
            }, (g.name, r)
