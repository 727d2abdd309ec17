"""``junction status``: the "Cluster" section printed from the ``cluster`` key of ``/api/status``."""

from __future__ import annotations

import copy
import json

import pytest

from junction import cli
from junction.cli.cluster_table import WIDTH, format_cluster, node_names, short_id
from junction.cli.status_table import format_status
from junction.cli.tables import ELLIPSIS

A = "6f1c1e2a-0000-4000-8000-00000000000a"
B = "7b2d3f4e-0000-4000-8000-00000000000b"
C = "8c3e4a5f-0000-4000-8000-00000000000c"
D = "9d4f5b6a-0000-4000-8000-00000000000d"
E = "ae5a6c7b-0000-4000-8000-00000000000e"
F = "bf6b7d8c-0000-4000-8000-00000000000f"

REFUSED = (
    f"the peer at 10.0.0.5:61616 has this node's own id {A}: one of the two data directories is a copy; "
    "give each node its own (delete the copy's journal directory)"
)
RETRYING = "Connection was refused by other side: 111: Connection refused."

#: A node's status without a ``cluster`` key (what a node without cluster config answers).
BASE = {
    "node_id": A,
    "name": "node-a",
    "version": "0.1.0",
    "pid": 4242,
    "uptime_s": 3725.5,
    "persistence_enabled": False,
    "journal": None,
    "journal_failed": None,
    "sessions": 1,
    "messages_routed": 130,
    "messages_duplicate": 0,
    "messages_dead_lettered": 0,
    "messages_expired": 0,
    "messages_dropped": 0,
    "acceptors": [
        {
            "name": "artemis",
            "protocols": ["CORE", "STOMP"],
            "host": "0.0.0.0",
            "port": 61616,
            "listening": True,
            "connections": 1,
        },
    ],
    "connections": [
        {"id": "c1", "protocol": "STOMP", "remote": "127.0.0.1:50001", "acceptor": "artemis"}
    ],
    "addresses": [
        {
            "name": "orders",
            "routing_types": ["ANYCAST"],
            "queues": ["orders"],
            "size_bytes": 0,
            "message_count": 0,
            "blocked_producers": 0,
            "routed_total": 130,
        },
    ],
    "queues": [
        {
            "name": "orders",
            "address": "orders",
            "routing_type": "ANYCAST",
            "message_count": 0,
            "consumer_count": 1,
            "delivering_count": 0,
            "messages_added": 10,
            "messages_acknowledged": 10,
        },
    ],
    "config": "/etc/junction/broker.xml",
}

#: What ``format_status(BASE)`` printed before the Cluster section existed (byte for byte).
BASE_TEXT = """\
Node         node-a (6f1c1e2a-0000-4000-8000-00000000000a)
             version 0.1.0, pid 4242
Uptime       01:02:05
Config       /etc/junction/broker.xml
Persistence  disabled (persistence-enabled=false)
Clients      1 connections, 1 sessions
Messages     routed 130, duplicate 0, dead-lettered 0, expired 0, dropped 0

Acceptors (1)
  NAME     PROTOCOLS   LISTEN         CONNECTIONS  ROUTER
  artemis  CORE,STOMP  0.0.0.0:61616            1

Addresses (1)
  NAME    ROUTING  QUEUES  MESSAGES  SIZE  BLOCKED  ROUTED
  orders  ANYCAST       1         0   0 B        0     130

Queues (1)
  NAME    ADDRESS  TYPE     MESSAGES  CONSUMERS  DELIVERING  ADDED  ACKED
  orders  orders   ANYCAST         0          1           0     10     10"""


def _bridge(
    target,
    node_id,
    name,
    state,
    *,
    problem=None,
    found_by="static",
    sent=0,
    acked=0,
    unacked=0,
    waiting=0,
):
    return {
        "target": target,
        "node_id": node_id,
        "name": name,
        "state": state,
        "problem": problem,
        "found_by": found_by,
        "messages_sent": sent,
        "messages_acknowledged": acked,
        "unacknowledged": unacked,
        "waiting": waiting,
    }


def _binding(
    address,
    queue,
    node_id,
    via,
    *,
    routing_type="ANYCAST",
    consumers=1,
    hops=1,
    connected=True,
    flt=None,
):
    return {
        "address": address,
        "queue": queue,
        "node_id": node_id,
        "via": via,
        "routing_type": routing_type,
        "filter": flt,
        "consumers": consumers,
        "hops": hops,
        "connected": connected,
    }


def _connector(name, host, port):
    return {"name": name, "host": host, "port": port, "params": {}}


#: ``Node.status()["cluster"]`` of node-a: linked to b, c reached through b, d unreachable,
#: e a copy of a's data directory, one bridge found twice.
CLUSTER = {
    "node_id": A,
    "name": "node-a",
    "connections": [
        {
            "name": "my-cluster",
            "address": "",
            "message_load_balancing": "ON_DEMAND",
            "max_hops": 2,
            "discovery_group": "dg-group1",
            "static_connectors": [],
            "bridges": [
                _bridge(
                    "10.0.0.2:61616",
                    B,
                    "node-b",
                    "open",
                    found_by="discovery",
                    sent=120,
                    acked=118,
                    unacked=2,
                    waiting=3,
                ),
                _bridge("10.0.0.3:61616", C, None, "duplicate", problem=None, found_by="topology"),
                _bridge(
                    "10.0.0.4:61616", F, None, "retrying", problem=RETRYING, found_by="discovery"
                ),
                _bridge(
                    "10.0.0.5:61616", E, "node-e", "refused", problem=REFUSED, found_by="discovery"
                ),
                _bridge(
                    "10.0.0.6:61616",
                    D,
                    None,
                    "failed",
                    problem="connection lost",
                    found_by="announced",
                    sent=4,
                    acked=4,
                ),
            ],
        }
    ],
    "incoming_links": [
        {"node_id": B, "name": "node-b", "remote": "10.0.0.2:50412"},
        {"node_id": C, "name": "node-c", "remote": "10.0.0.3:50999"},
    ],
    "remote_bindings": [
        _binding(
            "events",
            "events.audit",
            C,
            B,
            routing_type="MULTICAST",
            consumers=0,
            hops=2,
            flt="severity = 'high'",
        ),
        _binding("orders", "orders", B, B, consumers=2),
        _binding("orders", "orders", D, D, consumers=0, connected=False),
    ],
    "messages_forwarded": 120,
    "messages_received": 80,
    "messages_redistributed": 3,
    "redistributing": [{"queue": "orders", "moved": 3}],
    "duplicates_dropped": 1,
    "broadcast_groups": [
        {
            "name": "bg-group1",
            "group": "231.7.7.7",
            "port": 9876,
            "local_bind_address": None,
            "local_bind_port": 40411,
            "broadcast_period": 2000,
            "running": True,
            "node_id": A,
            "node_name": "node-a",
            "connectors": [_connector("artemis", "10.0.0.1", 61616)],
            "sequence": 42,
            "sent": 42,
            "send_errors": 0,
        }
    ],
    "discovery_groups": [
        {
            "name": "dg-group1",
            "group": "231.7.7.7",
            "port": 9876,
            "local_bind_address": None,
            "refresh_timeout": 30000,
            "initial_wait_timeout": 10000,
            "running": True,
            "node_id": A,
            "entries": [
                {
                    "node_id": B,
                    "name": "node-b",
                    "connectors": [_connector("artemis", "10.0.0.2", 61616)],
                    "sequence": 40,
                    "source": "10.0.0.2:40001",
                    "age_ms": 1234,
                },
                {
                    "node_id": C,
                    "name": "node-c",
                    "connectors": [
                        _connector("artemis", "10.0.0.3", 61616),
                        _connector("ipv6", "fd00::3", 61616),
                    ],
                    "sequence": 38,
                    "source": "10.0.0.3:40001",
                    "age_ms": 12400,
                },
            ],
            "received": 130,
            "malformed": 0,
            "own": 42,
            "duplicates": 1,
            "duplicate_node": {
                "source": "10.0.0.5:40001",
                "connectors": [_connector("artemis", "10.0.0.5", 61616)],
            },
            "dropped": 0,
        }
    ],
}


def status_with(cluster) -> dict:
    status = copy.deepcopy(BASE)
    status["cluster"] = copy.deepcopy(cluster)
    return status


def section(lines: list[str], title: str) -> list[str]:
    """The lines of the section headed *title*, up to the next blank line."""
    start = lines.index(title) + 1
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


def row(table: list[str], first: str) -> str:
    return next(line for line in table if line.split() and line.split()[0] == first)


@pytest.fixture
def lines():
    return format_status(status_with(CLUSTER)).splitlines()


# -- without a cluster: unchanged -------------------------------------------------------
def test_without_cluster_the_output_is_what_it_was():
    assert format_status(copy.deepcopy(BASE)) == BASE_TEXT
    assert "Cluster" not in format_status(copy.deepcopy(BASE))


def test_the_cluster_section_comes_after_the_existing_output():
    text = format_status(status_with(CLUSTER))
    assert text.startswith(BASE_TEXT + "\n\nCluster\n")


# -- the summary ------------------------------------------------------------------------
def test_summary_counts_and_counters(lines):
    summary = section(lines, "Cluster")
    assert summary == [
        "  1/5 bridges open, 2 incoming links, 3 remote bindings (1 disconnected)",
        "  messages forwarded 120, received 80, redistributed 3, duplicates dropped 1",
        "  redistributing orders (3 moved)",
        "  connection my-cluster: all addresses, ON_DEMAND, max-hops 2, discovery group dg-group1",
    ]


def test_summary_of_a_node_with_only_groups():
    cluster = {
        "node_id": A,
        "broadcast_groups": CLUSTER["broadcast_groups"],
        "discovery_groups": [],
    }
    lines = format_status(status_with(cluster)).splitlines()
    assert section(lines, "Cluster") == [
        "  no cluster connection (discovery and broadcast groups only)"
    ]
    assert "Broadcast groups (1)" in lines
    for title in (
        "Cluster bridges",
        "Incoming cluster links",
        "Remote bindings",
        "Discovery groups",
    ):
        assert not any(line.startswith(title) for line in lines), title


def test_a_cluster_manager_without_peers_prints_the_summary_and_no_empty_tables():
    cluster = {
        "node_id": A,
        "name": "node-a",
        "connections": [
            {
                "name": "c",
                "address": "orders",
                "message_load_balancing": "STRICT",
                "max_hops": 1,
                "discovery_group": None,
                "static_connectors": [],
                "bridges": [],
            }
        ],
        "incoming_links": [],
        "remote_bindings": [],
        "messages_forwarded": 0,
        "messages_received": 0,
        "messages_redistributed": 0,
        "redistributing": [],
        "duplicates_dropped": 0,
        "broadcast_groups": [],
        "discovery_groups": [],
    }
    text = format_status(status_with(cluster))
    assert text.endswith(
        "\n\nCluster\n"
        "  0/0 bridges open, 0 incoming links, 0 remote bindings\n"
        "  messages forwarded 0, received 0, redistributed 0, duplicates dropped 0\n"
        "  connection c: address orders, STRICT, max-hops 1"
    )
    assert "(none)" not in text.split("\nCluster\n")[1]


# -- the tables -------------------------------------------------------------------------
def test_bridges_table(lines):
    table = section(lines, "Cluster bridges of my-cluster (5)")
    assert table[0].split() == [
        "PEER",
        "TARGET",
        "STATE",
        "FOUND",
        "BY",
        "SENT/ACKED",
        "WAITING",
        "PROBLEM",
    ]
    open_row = next(line for line in table if "10.0.0.2:61616" in line)
    assert open_row.split() == ["node-b", "10.0.0.2:61616", "open", "discovery", "120/118", "3"]
    # no name yet: the name the incoming link gave, else the id's first 8 characters, else -
    duplicate = next(line for line in table if "10.0.0.3:61616" in line)
    assert duplicate.split() == ["node-c", "10.0.0.3:61616", "duplicate", "topology", "0/0", "0"]
    failed = next(line for line in table if "10.0.0.6:61616" in line)
    assert failed.split() == [
        short_id(D),
        "10.0.0.6:61616",
        "failed",
        "announced",
        "4/4",
        "0",
        "connection",
        "lost",
    ]
    retrying = next(line for line in table if "10.0.0.4:61616" in line)
    assert retrying.split()[:5] == [short_id(F), "10.0.0.4:61616", "retrying", "discovery", "0/0"]
    # long problems are cut to what the width leaves (never under 24 characters), with an ellipsis
    for target, problem in (("10.0.0.4:61616", RETRYING), ("10.0.0.5:61616", REFUSED)):
        line = next(line for line in table if target in line)
        shown = line[table[0].index("PROBLEM") :]
        assert shown.endswith(ELLIPSIS) and problem.startswith(shown[:-1]) and len(shown) >= 24
        assert len(line) == WIDTH
    assert all(len(line) <= WIDTH for line in table)


def test_one_bridges_table_per_cluster_connection():
    cluster = copy.deepcopy(CLUSTER)
    second = copy.deepcopy(cluster["connections"][0])
    second.update(name="orders-only", address="orders", bridges=second["bridges"][:1])
    connectors = [f"connector-{n}" for n in "bcdefgh"]
    empty = dict(
        second, name="no-peers", discovery_group=None, static_connectors=connectors, bridges=[]
    )
    cluster["connections"] += [second, empty]
    lines = format_status(status_with(cluster)).splitlines()
    assert row(section(lines, "Cluster bridges of orders-only (1)"), "node-b").split()[:3] == [
        "node-b",
        "10.0.0.2:61616",
        "open",
    ]
    assert len(section(lines, "Cluster bridges of my-cluster (5)")) == 6
    assert not any("no-peers (" in line for line in lines)  # no bridges: no table
    # a long line is wrapped at the width, the continuation indented
    start = lines.index(
        "  connection no-peers: address orders, ON_DEMAND, max-hops 2, static connectors connector-b,"
    )
    assert (
        lines[start + 1]
        == "    connector-c, connector-d, connector-e, connector-f, connector-g, connector-h"
    )
    assert section(lines, "Cluster")[0].startswith("  2/6 bridges open, ")


def test_bridge_columns_align(lines):
    table = section(lines, "Cluster bridges of my-cluster (5)")
    header = table[0]
    state, waiting_end = header.index("STATE"), header.index("WAITING") + len("WAITING")
    for line in table[1:]:
        assert line[state - 1] == " " and line[state] != " "
        assert line[waiting_end - 1].isdigit()  # numbers right-aligned


def test_no_problem_column_when_every_bridge_is_fine():
    cluster = copy.deepcopy(CLUSTER)
    bridges = cluster["connections"][0]["bridges"]
    bridges[:] = [b for b in bridges if b["state"] == "open"]
    table = section(
        format_status(status_with(cluster)).splitlines(), "Cluster bridges of my-cluster (1)"
    )
    assert "PROBLEM" not in table[0] and table[0].endswith("WAITING")


def test_incoming_links_table(lines):
    table = section(lines, "Incoming cluster links (2)")
    assert table[0].split() == ["PEER", "NODE", "ID", "REMOTE"]
    assert row(table, "node-b").split() == ["node-b", B, "10.0.0.2:50412"]
    assert row(table, "node-c").split() == ["node-c", C, "10.0.0.3:50999"]


def test_remote_bindings_table(lines):
    table = section(lines, "Remote bindings (3)")
    assert table[0].split() == [
        "ADDRESS",
        "QUEUE",
        "NODE",
        "TYPE",
        "CONSUMERS",
        "HOPS",
        "CONNECTED",
        "FILTER",
    ]
    # node names from bridges and incoming links; two hops away: "via" the neighbour
    assert row(table, "events").split() == [
        "events",
        "events.audit",
        "node-c",
        "via",
        "node-b",
        "MULTICAST",
        "0",
        "2",
        "yes",
        "severity",
        "=",
        "'high'",
    ]
    orders = [line.split() for line in table if line.split()[0] == "orders"]
    assert ["orders", "orders", "node-b", "ANYCAST", "2", "1", "yes"] in orders
    # a node known by id only (no name from bridges or links): the first 8 characters
    assert ["orders", "orders", D[:8], "ANYCAST", "0", "1", "no"] in orders


def test_no_filter_column_without_filters():
    cluster = copy.deepcopy(CLUSTER)
    for binding in cluster["remote_bindings"]:
        binding["filter"] = None
    table = section(format_status(status_with(cluster)).splitlines(), "Remote bindings (3)")
    assert table[0].split() == [
        "ADDRESS",
        "QUEUE",
        "NODE",
        "TYPE",
        "CONSUMERS",
        "HOPS",
        "CONNECTED",
    ]


def test_discovery_groups_with_their_entries(lines):
    block = section(lines, "Discovery groups (1)")
    assert block[0] == "  dg-group1  231.7.7.7:9876  2 nodes, received 130"
    assert block[1] == "    THIS NODE'S ID announced from 10.0.0.5:40001: a copied data directory"
    assert block[2].split() == ["NODE", "CONNECTORS", "AGE"]
    assert row(block, "node-b").split() == ["node-b", "10.0.0.2:61616", "1.2s"]
    assert row(block, "node-c").split() == [
        "node-c",
        "10.0.0.3:61616,",
        "[fd00::3]:61616",
        "12s",
    ]
    assert all(line.startswith("    ") for line in block[1:])


def test_broadcast_groups(lines):
    table = section(lines, "Broadcast groups (1)")
    assert table[0].split() == ["NAME", "GROUP", "ANNOUNCES", "SENT", "ERRORS"]
    assert table[1].split() == ["bg-group1", "231.7.7.7:9876", "10.0.0.1:61616", "42", "0"]


def test_a_stopped_group_is_marked():
    cluster = copy.deepcopy(CLUSTER)
    cluster["broadcast_groups"][0]["running"] = False
    cluster["discovery_groups"][0]["running"] = False
    text = format_status(status_with(cluster))
    assert "bg-group1  231.7.7.7:9876 (not running)" in text
    assert "dg-group1  231.7.7.7:9876 (not running)" in text


# -- layout -----------------------------------------------------------------------------
def test_every_cluster_line_fits_and_has_no_trailing_blank(lines):
    cluster_lines = lines[lines.index("Cluster") :]
    assert all(len(line) <= WIDTH for line in cluster_lines), max(cluster_lines, key=len)
    assert all(line == line.rstrip() for line in cluster_lines)


def test_long_names_are_cut_to_fit():
    cluster = copy.deepcopy(CLUSTER)
    cluster["connections"][0]["name"] = "a-cluster-connection-with-a-very-long-name-indeed"
    cluster["connections"][0]["bridges"][0]["name"] = "node-b-in-the-eu-west-datacentre-rack-12"
    cluster["remote_bindings"][0]["queue"] = "tmp.reply." + "x" * 60
    lines = format_status(status_with(cluster)).splitlines()
    cluster_lines = lines[lines.index("Cluster") :]
    assert all(len(line) <= WIDTH for line in cluster_lines)
    # a name in a title is cut as names in tables are (40 characters)
    title = "Cluster bridges of a-cluster-connection-with-a-very-long-n" + ELLIPSIS + " (5)"
    bridges = section(lines, title)
    assert any(ELLIPSIS in line.split()[0] for line in bridges[1:])
    assert any(
        "tmp.reply." in line and ELLIPSIS in line for line in section(lines, "Remote bindings (3)")
    )


def test_missing_keys_and_odd_values_do_not_fail():
    assert format_cluster(None) == []
    text = format_status(
        status_with(
            {
                "connections": [{"bridges": [{}]}],
                "remote_bindings": [{}, "junk"],
                "incoming_links": None,
                "discovery_groups": [{"entries": [{}]}],
            }
        )
    )
    assert (
        "Cluster bridges of - (1)" in text
        and "Remote bindings (1)" in text
        and "Discovery groups (1)" in text
    )
    # a bridge with neither name nor node id (a static connector not answered yet): -
    assert section(text.splitlines(), "Cluster bridges of - (1)")[1].split()[0] == "-"


def test_node_names_prefer_what_the_peer_said():
    names = node_names(CLUSTER)
    assert (
        names[B] == "node-b"
        and names[C] == "node-c"
        and names[E] == "node-e"
        and names[A] == "node-a"
    )
    assert D not in names


# -- the command ------------------------------------------------------------------------
def test_junction_status_prints_the_cluster_and_json_is_untouched(monkeypatch, capsys):
    status = status_with(CLUSTER)
    monkeypatch.setattr(
        "junction.cli.status_table.fetch_status", lambda url: copy.deepcopy(status)
    )
    assert cli.main(["status", "--url", "http://127.0.0.1:8161"]) == 0
    out = capsys.readouterr().out
    assert out == format_status(status) + "\n"
    assert "\nCluster bridges of my-cluster (5)\n" in out
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == status


def test_junction_status_without_cluster_prints_what_it_did(monkeypatch, capsys):
    monkeypatch.setattr(
        "junction.cli.status_table.fetch_status", lambda url: copy.deepcopy(BASE)
    )
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out == BASE_TEXT + "\n"


@pytest.mark.parametrize(
    "master, expected",
    [
        ({"master_broker": "10.0.0.1:61616", "is_master": True, "available": True, "record_entries": 4,
          "pending_changes": 0}, "  this node is the master broker (4 recorded entities)"),
        ({"master_broker": "10.0.0.1:61616", "is_master": False, "available": True, "record_entries": None,
          "pending_changes": 0}, "  master broker 10.0.0.1:61616: reachable"),
        ({"master_broker": "10.0.0.1:61616", "is_master": False, "available": False, "record_entries": None,
          "pending_changes": 2},
         "  master broker 10.0.0.1:61616: UNREACHABLE, changes refused, 2 waiting to be recorded"),
    ],
)
def test_the_master_broker_line(master, expected):
    cluster = copy.deepcopy(CLUSTER)
    cluster["master"] = master
    summary = section(format_status(status_with(cluster)).splitlines(), "Cluster")
    assert summary[2] == expected
