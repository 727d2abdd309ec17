"""Tests for the cluster sections of broker.xml: broadcast and discovery groups,
cluster connections, cluster credentials and ``<ha-policy>`` scale-down."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from junction.config import model
from junction.config.loader import (
    ConfigError,
    ConfigErrors,
    load_config,
    parse_config,
)
from junction.config.schema import (
    BROADCAST_GROUP_ELEMENTS,
    CLUSTER_CONNECTION_ELEMENTS,
    DISCOVERY_GROUP_ELEMENTS,
    SCALE_DOWN_ELEMENTS,
)
from junction.config.specs import Value


def write(tmp_path: Path, text: str, name: str = "broker.xml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def core(body: str) -> str:
    """A minimal Artemis-layout document around ``body`` (body starts on line 3)."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        + textwrap.dedent(body).strip("\n")
        + "\n</core>\n</configuration>\n"
    )


def errors_of(text: str, env=None) -> list[ConfigError]:
    with pytest.raises(ConfigErrors) as info:
        parse_config(text, file="b.xml", env=env or {})
    return info.value.errors


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first occurrence of ``needle`` in ``text``."""
    return text[: text.index(needle)].count("\n") + 1


# ---------------------------------------------------------------------------
# A full symmetric cluster: every node has the same file, only NODE_HOST differs

SYMMETRIC = core(
    """
    <connectors>
       <connector name="netty-connector">tcp://${NODE_HOST}:61616</connector>
       <connector name="second-nic">tcp://${NODE_HOST2:10.1.0.1}:61616</connector>
       <connector name="node2">tcp://10.0.0.2:61616</connector>
       <connector name="node3">tcp://10.0.0.3:61616</connector>
    </connectors>
    <cluster-user>${CLUSTER_USER}</cluster-user>
    <cluster-password>${CLUSTER_PASSWORD}</cluster-password>
    <broadcast-groups>
       <broadcast-group name="bg-group1">
          <local-bind-address>${NODE_HOST}</local-bind-address>
          <local-bind-port>5432</local-bind-port>
          <group-address>231.7.7.7</group-address>
          <group-port>9876</group-port>
          <broadcast-period>5000</broadcast-period>
          <connector-ref>netty-connector</connector-ref>
          <connector-ref>second-nic</connector-ref>
       </broadcast-group>
    </broadcast-groups>
    <discovery-groups>
       <discovery-group name="dg-group1">
          <local-bind-address>${NODE_HOST}</local-bind-address>
          <group-address>231.7.7.7</group-address>
          <group-port>9876</group-port>
          <refresh-timeout>20000</refresh-timeout>
          <initial-wait-timeout>0</initial-wait-timeout>
       </discovery-group>
    </discovery-groups>
    <cluster-connections>
       <cluster-connection name="my-cluster">
          <address>orders,!orders.internal</address>
          <connector-ref>netty-connector</connector-ref>
          <check-period>1000</check-period>
          <connection-ttl>5000</connection-ttl>
          <min-large-message-size>50KiB</min-large-message-size>
          <call-timeout>10000</call-timeout>
          <call-failover-timeout>20000</call-failover-timeout>
          <retry-interval>1000</retry-interval>
          <retry-interval-multiplier>1.5</retry-interval-multiplier>
          <max-retry-interval>30000</max-retry-interval>
          <initial-connect-attempts>5</initial-connect-attempts>
          <reconnect-attempts>10</reconnect-attempts>
          <use-duplicate-detection>false</use-duplicate-detection>
          <message-load-balancing>off_with_redistribution</message-load-balancing>
          <max-hops>2</max-hops>
          <confirmation-window-size>32K</confirmation-window-size>
          <producer-window-size>1M</producer-window-size>
          <notification-interval>500</notification-interval>
          <notification-attempts>5</notification-attempts>
          <discovery-group-ref discovery-group-name="dg-group1"/>
       </cluster-connection>
       <cluster-connection name="static-cluster">
          <connector-ref>netty-connector</connector-ref>
          <static-connectors allow-direct-connections-only="true">
             <connector-ref>node2</connector-ref>
             <connector-ref>node3</connector-ref>
          </static-connectors>
       </cluster-connection>
    </cluster-connections>
    <ha-policy>
       <primary-only>
          <scale-down>
             <enabled>true</enabled>
             <group-name>east</group-name>
             <cluster-name>static-cluster</cluster-name>
             <connectors>
                <connector-ref>node2</connector-ref>
                <connector-ref>node3</connector-ref>
             </connectors>
             <commit-interval>100</commit-interval>
          </scale-down>
       </primary-only>
    </ha-policy>
    """
)

ENV = {"NODE_HOST": "10.0.0.1", "CLUSTER_USER": "cluster", "CLUSTER_PASSWORD": "s3cret"}


def test_symmetric_cluster_every_field(tmp_path):
    path = write(tmp_path, SYMMETRIC)
    cfg = load_config(path, env=ENV)
    f = str(path)

    def at(needle):
        return (f, line_of(SYMMETRIC, needle))

    assert cfg.broadcast_groups == (
        model.BroadcastGroupConfig(
            name="bg-group1",
            group_address="231.7.7.7",
            group_port=9876,
            local_bind_address="10.0.0.1",
            local_bind_port=5432,
            broadcast_period=5000,
            connector_refs=("netty-connector", "second-nic"),
            source=at('<broadcast-group name="bg-group1">'),
        ),
    )
    assert cfg.discovery_groups == (
        model.DiscoveryGroupConfig(
            name="dg-group1",
            group_address="231.7.7.7",
            group_port=9876,
            local_bind_address="10.0.0.1",
            refresh_timeout=20000,
            initial_wait_timeout=0,
            source=at('<discovery-group name="dg-group1">'),
        ),
    )
    full, static = cfg.cluster_connections
    assert full == model.ClusterConnectionConfig(
        name="my-cluster",
        connector_ref="netty-connector",
        address="orders,!orders.internal",
        check_period=1000,
        connection_ttl=5000,
        min_large_message_size=50 * 1024,
        call_timeout=10000,
        call_failover_timeout=20000,
        retry_interval=1000,
        retry_interval_multiplier=1.5,
        max_retry_interval=30000,
        initial_connect_attempts=5,
        reconnect_attempts=10,
        use_duplicate_detection=False,
        message_load_balancing="OFF_WITH_REDISTRIBUTION",
        max_hops=2,
        confirmation_window_size=32 * 1024,
        producer_window_size=1024 * 1024,
        notification_interval=500,
        notification_attempts=5,
        discovery_group="dg-group1",
        static_connectors=(),
        allow_direct_connections_only=False,
        source=at('<cluster-connection name="my-cluster">'),
    )
    assert static == model.ClusterConnectionConfig(
        name="static-cluster",
        connector_ref="netty-connector",
        static_connectors=("node2", "node3"),
        allow_direct_connections_only=True,
        source=at('<cluster-connection name="static-cluster">'),
    )
    assert cfg.scale_down == model.ScaleDownConfig(
        enabled=True,
        group_name="east",
        cluster_name="static-cluster",
        discovery_group=None,
        connectors=("node2", "node3"),
        commit_interval=100,
        source=at("<scale-down>"),
    )
    assert (cfg.cluster_user, cfg.cluster_password) == ("cluster", "s3cret")
    assert cfg.cluster_credentials_source == at("<cluster-user>")
    assert cfg.ignored == ()

    # the same file on the second node: only what NODE_HOST feeds changes
    cfg2 = load_config(path, env={**ENV, "NODE_HOST": "10.0.0.2"})
    assert cfg2.connectors[0].host == "10.0.0.2"
    assert cfg2.broadcast_groups[0].local_bind_address == "10.0.0.2"
    assert cfg2.cluster_connections == cfg.cluster_connections
    assert cfg2.scale_down == cfg.scale_down


def test_defaults():
    cfg = parse_config(core(""), file="b.xml", env={})
    assert (cfg.broadcast_groups, cfg.discovery_groups, cfg.cluster_connections) == ((), (), ())
    assert (cfg.cluster_user, cfg.cluster_password) == (
        model.DEFAULT_CLUSTER_USER,
        model.DEFAULT_CLUSTER_PASSWORD,
    )
    assert (cfg.cluster_credentials_source, cfg.scale_down) == (None, None)

    text = core(
        """
        <connectors><connector name="me">tcp://10.0.0.1:61616</connector><connector name="peer">tcp://10.0.0.2:61616</connector></connectors>
        <broadcast-groups><broadcast-group name="bg"><group-address>239.1.2.3</group-address><group-port>9876</group-port><connector-ref>me</connector-ref></broadcast-group></broadcast-groups>
        <discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address><group-port>9876</group-port></discovery-group></discovery-groups>
        <cluster-connections><cluster-connection name="c"><connector-ref>me</connector-ref><static-connectors><connector-ref>peer</connector-ref></static-connectors></cluster-connection></cluster-connections>
        <ha-policy><live-only><scale-down/></live-only></ha-policy>
        """
    )
    cfg = parse_config(text, file="b.xml", env={})
    assert cfg.broadcast_groups == (
        model.BroadcastGroupConfig(
            "bg", "239.1.2.3", 9876, None, -1, 2000, ("me",), source=("b.xml", 4)
        ),
    )
    assert cfg.discovery_groups == (
        model.DiscoveryGroupConfig("dg", "231.7.7.7", 9876, None, 10_000, 10_000, ("b.xml", 5)),
    )
    (cc,) = cfg.cluster_connections
    assert cc == model.ClusterConnectionConfig(
        "c", "me", static_connectors=("peer",), source=("b.xml", 6)
    )
    assert (cc.address, cc.check_period, cc.connection_ttl, cc.min_large_message_size) == (
        "",
        30_000,
        60_000,
        102_400,
    )
    assert (cc.call_timeout, cc.call_failover_timeout, cc.retry_interval) == (30_000, -1, 500)
    assert (cc.retry_interval_multiplier, cc.max_retry_interval) == (1.0, 2000)
    assert (cc.initial_connect_attempts, cc.reconnect_attempts) == (-1, -1)
    assert (cc.use_duplicate_detection, cc.message_load_balancing, cc.max_hops) == (
        True,
        "ON_DEMAND",
        1,
    )
    assert (cc.confirmation_window_size, cc.producer_window_size) == (1_048_576, -1)
    assert (cc.notification_interval, cc.notification_attempts) == (1000, 2)
    assert (cc.discovery_group, cc.allow_direct_connections_only) == (None, False)
    # an empty scale-down takes its peers from the (only) cluster connection
    assert cfg.scale_down == model.ScaleDownConfig(source=("b.xml", 7))
    assert (cfg.scale_down.enabled, cfg.scale_down.commit_interval) == (True, -1)


def test_primary_only_without_scale_down_and_empty_sections():
    cfg = parse_config(
        core(
            "<ha-policy><primary-only/></ha-policy>\n<broadcast-groups/>\n<discovery-groups/>\n"
            "<cluster-connections/>"
        ),
        env={},
    )
    assert cfg.scale_down is None
    assert (cfg.broadcast_groups, cfg.discovery_groups, cfg.cluster_connections) == ((), (), ())
    assert parse_config(core("<ha-policy/>"), env={}).scale_down is None


@pytest.mark.parametrize("policy", ["primary-only", "live-only"])
def test_scale_down_read_under_primary_only_and_live_only(policy):
    text = core(
        f"""
        <discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address><group-port>9876</group-port></discovery-group></discovery-groups>
        <ha-policy>
           <{policy}>
              <scale-down>
                 <enabled>false</enabled>
                 <group-name>g1</group-name>
                 <discovery-group-ref discovery-group-name="dg"/>
                 <commit-interval>-1</commit-interval>
              </scale-down>
           </{policy}>
        </ha-policy>
        """
    )
    cfg = parse_config(text, file="b.xml", env={})
    assert cfg.scale_down == model.ScaleDownConfig(
        enabled=False, group_name="g1", discovery_group="dg", source=("b.xml", 6)
    )


def test_scale_down_disabled_needs_no_peers():
    cfg = parse_config(
        core(
            "<ha-policy><primary-only><scale-down><enabled>false</enabled></scale-down></primary-only></ha-policy>"
        ),
        env={},
    )
    assert cfg.scale_down == model.ScaleDownConfig(enabled=False, source=("<string>", 3))


def test_connectors_may_come_after_the_cluster_sections():
    cfg = parse_config(
        core(
            """
            <cluster-connections><cluster-connection name="c"><connector-ref>me</connector-ref><static-connectors><connector-ref>peer</connector-ref></static-connectors></cluster-connection></cluster-connections>
            <connectors><connector name="me">tcp://10.0.0.1:61616</connector><connector name="peer">tcp://10.0.0.2:61616</connector></connectors>
            """
        ),
        env={},
    )
    assert cfg.cluster_connections[0].static_connectors == ("peer",)


def test_cluster_credentials():
    text = core(
        "<cluster-password>${PW:fallback}</cluster-password>\n<cluster-user>cluster</cluster-user>"
    )
    cfg = parse_config(text, file="b.xml", env={"PW": "from-env"})
    assert (cfg.cluster_user, cfg.cluster_password) == ("cluster", "from-env")
    # the source is the first of the two given, whichever it is
    assert cfg.cluster_credentials_source == ("b.xml", 3)
    cfg = parse_config(text, file="b.xml", env={})
    assert cfg.cluster_password == "fallback"
    cfg = parse_config(core("<cluster-user>u</cluster-user>"), file="b.xml", env={})
    assert (cfg.cluster_user, cfg.cluster_password) == ("u", model.DEFAULT_CLUSTER_PASSWORD)
    assert cfg.cluster_credentials_source == ("b.xml", 3)


@pytest.mark.parametrize(
    "value, expected",
    [("true", "STRICT"), ("false", "ON_DEMAND"), ("TRUE", "STRICT")],
)
def test_forward_when_no_consumers_maps_to_message_load_balancing(value, expected):
    cfg = parse_config(
        cluster_doc(
            cc(
                "<connector-ref>self</connector-ref>"
                f"<forward-when-no-consumers>{value}</forward-when-no-consumers>" + _DG_REF
            )
        ),
        env={},
    )
    assert cfg.cluster_connections[0].message_load_balancing == expected


@pytest.mark.parametrize("value", ["OFF", "strict", "On_Demand", "off_with_redistribution"])
def test_message_load_balancing_any_case_stored_upper(value):
    cfg = parse_config(
        cluster_doc(
            cc(
                "<connector-ref>self</connector-ref>"
                f"<message-load-balancing>{value}</message-load-balancing>" + _DG_REF
            )
        ),
        env={},
    )
    assert cfg.cluster_connections[0].message_load_balancing == value.upper()


def test_java_only_cluster_connection_elements_are_ignored_and_listed():
    text = cluster_doc(
        cc(
            "<connector-ref>self</connector-ref>\n<client-id>cc-1</client-id>\n"
            "<topology-scanner-attempts>30</topology-scanner-attempts>\n"
            "<scale-down-connector>self</scale-down-connector>\n" + _DG_REF
        )
    )
    cfg = parse_config(text, env={})
    assert [(n, ln) for n, ln, _ in cfg.ignored] == [
        ("client-id", 8),
        ("topology-scanner-attempts", 9),
        ("scale-down-connector", 10),
    ]
    assert "in cluster connection 'c'" in cfg.ignored[0][2]
    text = core(
        '<discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address>'
        "<group-port>9876</group-port><local-bind-port>9876</local-bind-port></discovery-group>"
        "</discovery-groups>"
    )
    (ignored,) = parse_config(text, env={}).ignored
    assert ignored[0] == "local-bind-port"
    assert "Artemis does not use local-bind-port for discovery either" in ignored[2]


def test_cluster_tables_cover_the_model():
    def reachable(table):
        return {s.attr for s in table.values() if isinstance(s, Value)}

    assert reachable(BROADCAST_GROUP_ELEMENTS) | {"connector_refs"} == set(
        model.BroadcastGroupConfig.__dataclass_fields__
    ) - {"name", "source"}
    assert reachable(DISCOVERY_GROUP_ELEMENTS) == set(
        model.DiscoveryGroupConfig.__dataclass_fields__
    ) - {"name", "source"}
    assert reachable(CLUSTER_CONNECTION_ELEMENTS) | {
        "connector_ref",
        "discovery_group",
        "static_connectors",
        "allow_direct_connections_only",
        "master_broker",
    } == set(model.ClusterConnectionConfig.__dataclass_fields__) - {"name", "source"}
    assert reachable(SCALE_DOWN_ELEMENTS) | {
        "cluster_name",
        "discovery_group",
        "connectors",
    } == set(model.ScaleDownConfig.__dataclass_fields__) - {"source"}


# ---------------------------------------------------------------------------
# Errors.  cluster_doc() puts connectors "self" and "node2" on line 3 and the
# discovery group "dg" on line 4; its body starts on line 5.

_PREFIX = (
    '<connectors><connector name="self">tcp://10.0.0.1:61616</connector>'
    '<connector name="node2">tcp://10.0.0.2:61616</connector></connectors>\n'
    '<discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address>'
    "<group-port>9876</group-port></discovery-group></discovery-groups>\n"
)


def cluster_doc(body: str) -> str:
    return core(_PREFIX + textwrap.dedent(body).strip("\n"))


def cluster_errors(body: str) -> list[tuple[int, str]]:
    return [(e.line, e.message) for e in errors_of(cluster_doc(body))]


def cc(inner: str, name: str = "c") -> str:
    """A ``<cluster-connections>`` whose ``<cluster-connection>`` is on line 6, children from line 7."""
    return (
        f'<cluster-connections>\n<cluster-connection name="{name}">\n'
        + textwrap.dedent(inner).strip("\n")
        + "\n</cluster-connection>\n</cluster-connections>"
    )


_DG_REF = '<discovery-group-ref discovery-group-name="dg"/>'
_JGROUPS = (
    "JGroups is not supported by Junction; give group-address and group-port (UDP multicast),"
    " or use static-connectors"
)
_MASKED = (
    "<cluster-password>: masked passwords (ENC(...)) are not supported by Junction yet"
    " (Artemis decodes them with its password codec); write the password in clear text or take"
    " it from the environment with ${VAR}"
)


def bg(inner: str) -> str:
    """A ``<broadcast-groups>`` whose group is on line 6, children from line 7."""
    return (
        '<broadcast-groups>\n<broadcast-group name="bg">\n'
        + textwrap.dedent(inner).strip("\n")
        + "\n</broadcast-group>\n</broadcast-groups>"
    )


_BG_OK = (
    "<group-address>231.7.7.7</group-address>\n<group-port>9876</group-port>\n"
    "<connector-ref>self</connector-ref>"
)


@pytest.mark.parametrize(
    "body, expected",
    [
        # -- broadcast groups ------------------------------------------------------------
        (
            bg(
                "<jgroups-file>jgroups.xml</jgroups-file>\n<jgroups-channel>c</jgroups-channel>\n"
                "<connector-ref>self</connector-ref>"
            ),
            [(7, f"<jgroups-file>: {_JGROUPS}"), (8, f"<jgroups-channel>: {_JGROUPS}")],
        ),
        (
            bg(
                "<group-address>231.7.7.7</group-address>\n<group-port>9876</group-port>\n"
                "<jgroups-properties>x</jgroups-properties>\n<connector-ref>self</connector-ref>"
            ),
            [(9, f"<jgroups-properties>: {_JGROUPS}")],
        ),
        (
            bg(
                "<group-address>broker-group.example.com</group-address>\n"
                "<group-port>9876</group-port>\n<connector-ref>self</connector-ref>"
            ),
            [
                (
                    7,
                    "<group-address>: expected a multicast IP address (IPv4 224.0.0.1 to"
                    " 239.255.255.255, or IPv6 ff00::/8) such as 231.7.7.7, got"
                    " 'broker-group.example.com'",
                )
            ],
        ),
        (
            bg(
                "<group-address>10.0.0.7</group-address>\n<group-port>9876</group-port>\n"
                "<connector-ref>self</connector-ref>"
            ),
            [
                (
                    7,
                    "<group-address>: 10.0.0.7 is not a multicast address; use one in 224.0.0.1"
                    " to 239.255.255.255 (IPv4) or ff00::/8 (IPv6), such as 231.7.7.7",
                )
            ],
        ),
        (
            bg(
                "<group-address>224.0.0.0</group-address>\n<group-port>9876</group-port>\n"
                "<connector-ref>self</connector-ref>"
            ),
            [
                (
                    7,
                    "<group-address>: 224.0.0.0 is not a multicast address; use one in 224.0.0.1"
                    " to 239.255.255.255 (IPv4) or ff00::/8 (IPv6), such as 231.7.7.7",
                )
            ],
        ),
        (
            bg(
                "<group-address>fe80::1</group-address>\n<group-port>0</group-port>\n"
                "<local-bind-port>-2</local-bind-port>\n<broadcast-period>0</broadcast-period>\n"
                "<connector-ref>self</connector-ref>"
            ),
            [
                (
                    7,
                    "<group-address>: fe80::1 is not a multicast address; use one in 224.0.0.1"
                    " to 239.255.255.255 (IPv4) or ff00::/8 (IPv6), such as 231.7.7.7",
                ),
                (8, "<group-port>: must be greater than 0, got '0'"),
                (9, "<local-bind-port>: must be -1 or at least 0, got '-2'"),
                (10, "<broadcast-period>: must be greater than 0, got '0'"),
            ],
        ),
        (
            bg("<connector-ref>self</connector-ref>"),
            [
                (
                    6,
                    "broadcast group 'bg' needs a <group-address> (a UDP multicast address such as 231.7.7.7)",
                ),
                (
                    6,
                    "broadcast group 'bg' needs a <group-port> (the UDP port of the multicast group)",
                ),
            ],
        ),
        (
            bg("<group-address>231.7.7.7</group-address>\n<group-port>9876</group-port>"),
            [
                (
                    6,
                    "broadcast group 'bg' names no connectors; add a"
                    " <connector-ref>name</connector-ref> for each connector its peers may use to"
                    " reach this node",
                )
            ],
        ),
        (
            bg(
                _BG_OK
                + "\n<connector-ref>slef</connector-ref>\n<connector-ref>self</connector-ref>"
            ),
            [
                (
                    10,
                    "broadcast group 'bg' names connector 'slef', but no <connectors> defines it;"
                    " did you mean 'self'?",
                ),
                (11, "connector 'self' is listed twice in <broadcast-group> (first at line 9)"),
            ],
        ),
        (
            bg(_BG_OK + "\n<brodcast-period>100</brodcast-period>"),
            [
                (
                    10,
                    "unknown element <brodcast-period> in <broadcast-group>; did you mean"
                    " <broadcast-period>?",
                )
            ],
        ),
        (
            '<broadcast-groups>\n<broadcast-group name="a" id="x">\n'
            + _BG_OK
            + "\n</broadcast-group>\n"
            '<broadcast-group name="a">\n' + _BG_OK + "\n</broadcast-group>\n"
            "<broadcast-group>\n" + _BG_OK + "\n</broadcast-group>\n</broadcast-groups>",
            [
                (6, "<broadcast-group> has no attribute 'id'"),
                (11, "a second broadcast group named 'a' (the first is at line 6)"),
                (16, "<broadcast-group> needs a name attribute"),
            ],
        ),
        (
            '<discovery-groups>\n<discovery-group name="d2">\n'
            "<jgroups-file>jgroups.xml</jgroups-file>\n</discovery-group>\n</discovery-groups>",
            [(5, "<discovery-groups> is given twice in <core> (first at line 4)")],
        ),
        # -- cluster connections -----------------------------------------------------------
        (
            cc("<connector-ref>self</connector-ref>"),
            [
                (
                    6,
                    "cluster connection 'c' has no peers: give <static-connectors> or"
                    ' <discovery-group-ref discovery-group-name="..."/> (artemis-configuration.xsd'
                    " lets both be left out, but Junction needs a cluster connection to say how it"
                    " finds its peers)",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<static-connectors><connector-ref>node2</connector-ref></static-connectors>"
            ),
            [
                (
                    6,
                    "cluster connection 'c' gives both <discovery-group-ref> and"
                    " <static-connectors>: give exactly one (Artemis would use"
                    " <discovery-group-ref> and ignore <static-connectors>)",
                )
            ],
        ),
        (
            cc(_DG_REF),
            [
                (
                    6,
                    "cluster connection 'c' needs a <connector-ref> naming the <connector> its"
                    " peers use to reach this node",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>slef</connector-ref>\n"
                "<static-connectors>\n<connector-ref>node3</connector-ref>\n"
                "<connector-ref>node2</connector-ref>\n<connector-ref>node2</connector-ref>\n"
                "</static-connectors>"
            ),
            [
                (
                    7,
                    "cluster connection 'c' names connector 'slef', but no <connectors> defines"
                    " it; did you mean 'self'?",
                ),
                (
                    9,
                    "cluster connection 'c' names connector 'node3', but no <connectors> defines"
                    " it; did you mean 'node2'?",
                ),
                (11, "connector 'node2' is listed twice in <static-connectors> (first at line 10)"),
            ],
        ),
        (
            cc("<connector-ref>self</connector-ref>\n<static-connectors/>"),
            [
                (
                    8,
                    "<static-connectors> names no connectors; add a"
                    " <connector-ref>name</connector-ref> for each peer",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n"
                '<static-connectors allow-direct-connections-only="yes"'
                ' allow-direct-connection-only="true">'
                "<connector-ref>node2</connector-ref></static-connectors>"
            ),
            [
                (
                    8,
                    "<static-connectors> has no attribute 'allow-direct-connection-only'; did you"
                    " mean 'allow-direct-connections-only'?",
                ),
                (
                    8,
                    "<static-connectors allow-direct-connections-only>: expected true or false,"
                    " got 'yes'",
                ),
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n"
                '<discovery-group-ref discovery-group-name="dg1"/>'
            ),
            [
                (
                    8,
                    "cluster connection 'c' names discovery group 'dg1', but no"
                    " <discovery-groups> defines it; did you mean 'dg'?",
                )
            ],
        ),
        (
            cc("<connector-ref>self</connector-ref>\n<discovery-group-ref/>"),
            [(8, "<discovery-group-ref> needs a discovery-group-name attribute")],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<message-load-balancing>ROUND_ROBIN</message-load-balancing>"
            ),
            [
                (
                    9,
                    "<message-load-balancing>: expected one of OFF, STRICT, ON_DEMAND,"
                    " OFF_WITH_REDISTRIBUTION, got 'ROUND_ROBIN'",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<message-load-balancing>ON-DEMAND</message-load-balancing>"
            ),
            [
                (
                    9,
                    "<message-load-balancing>: expected one of OFF, STRICT, ON_DEMAND,"
                    " OFF_WITH_REDISTRIBUTION, got 'ON-DEMAND'; did you mean 'ON_DEMAND'?",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<message-load-balancing>STRICT</message-load-balancing>\n"
                "<forward-when-no-consumers>true</forward-when-no-consumers>"
            ),
            [
                (
                    10,
                    "cluster connection 'c' gives both <forward-when-no-consumers> (deprecated)"
                    " and <message-load-balancing>: keep <message-load-balancing> only (Artemis"
                    " would use forward-when-no-consumers and ignore message-load-balancing)",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<forward-when-no-consumers>yes</forward-when-no-consumers>"
            ),
            [(9, "<forward-when-no-consumers>: expected true or false, got 'yes'")],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<retry-interval-multiplier>0</retry-interval-multiplier>\n"
                "<reconnect-attempts>-2</reconnect-attempts>\n<max-hops>-1</max-hops>\n"
                "<check-period>0</check-period>\n<call-failover-timeout>0</call-failover-timeout>\n"
                "<confirmation-window-size>0</confirmation-window-size>\n"
                "<producer-window-size>-1</producer-window-size>\n"
                "<min-large-message-size>3GiB</min-large-message-size>\n"
                "<notification-attempts>0</notification-attempts>"
            ),
            [
                (9, "<retry-interval-multiplier>: must be greater than 0, got '0'"),
                (10, "<reconnect-attempts>: must be -1 or at least 0, got '-2'"),
                (11, "<max-hops>: must be at least 0, got '-1'"),
                (12, "<check-period>: must be greater than 0, got '0'"),
                (13, "<call-failover-timeout>: must be -1 or greater than 0, got '0'"),
                (14, "<confirmation-window-size>: must be greater than 0, got '0'"),
                (16, "<min-large-message-size>: must be at most 2147483647, got '3GiB'"),
                (17, "<notification-attempts>: must be greater than 0, got '0'"),
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<retry-intervall>100</retry-intervall>"
            ),
            [
                (
                    9,
                    "unknown element <retry-intervall> in <cluster-connection>; did you mean"
                    " <retry-interval>?",
                )
            ],
        ),
        (
            cc(
                "<connector-ref>self</connector-ref>\n" + _DG_REF + "\n"
                "<max-hops>1</max-hops>\n<max-hops>2</max-hops>"
            ),
            [(10, "<max-hops> is given twice in <cluster-connection> (first at line 9)")],
        ),
        (
            "<cluster-connections>\n"
            '<cluster-connection name="c"><connector-ref>self</connector-ref>'
            + _DG_REF
            + "</cluster-connection>\n"
            '<cluster-connection name="c"><connector-ref>self</connector-ref>'
            + _DG_REF
            + "</cluster-connection>\n"
            '<cluster-connection-uri name="u" address="multicast://dg?messageLoadBalancingType=STRICT"/>\n'
            '<cluster-connection name="v" uri="multicast://dg"><connector-ref>self</connector-ref>'
            + _DG_REF
            + "</cluster-connection>\n"
            "<cluster-conection/>\n</cluster-connections>",
            [
                (7, "a second cluster connection named 'c' (the first is at line 6)"),
                (
                    8,
                    "cluster-connection-uri is not supported by Junction; write a <cluster-connection>",
                ),
                (
                    9,
                    "the uri attribute of <cluster-connection> is not supported by Junction;"
                    " write its settings as child elements",
                ),
                (
                    10,
                    "unknown element <cluster-conection> in <cluster-connections>; did you mean"
                    " <cluster-connection>?",
                ),
            ],
        ),
        # -- cluster credentials ---------------------------------------------------------
        (
            "<cluster-password>ENC(-3fa0b3c7e1)</cluster-password>",
            [(5, _MASKED)],
        ),
        (
            "<cluster-user></cluster-user>\n<cluster-password><x/></cluster-password>",
            [
                (5, "<cluster-user>: must not be empty"),
                (6, "<cluster-password> takes a value, not a child element <x>"),
            ],
        ),
        # -- ha-policy --------------------------------------------------------------------
        (
            "<ha-policy>\n<replication><primary/></replication>\n</ha-policy>",
            [(6, "<ha-policy><replication> is not supported by Junction yet")],
        ),
        (
            "<ha-policy>\n<shared-store/>\n</ha-policy>",
            [(6, "<ha-policy><shared-store> is not supported by Junction yet")],
        ),
        (
            "<ha-policy>\n<primary-only/>\n<live-only/>\n<primary-ony/>\n</ha-policy>",
            [
                (
                    7,
                    "<ha-policy> takes one policy; <live-only> comes after <primary-only> (line 6)",
                ),
                (8, "unknown element <primary-ony> in <ha-policy>; did you mean <primary-only>?"),
            ],
        ),
        (
            "<ha-policy><primary-only>\n<scale-down>\n"
            + _DG_REF
            + "\n<connectors><connector-ref>node2</connector-ref></connectors>\n"
            "<cluster-name>nowhere</cluster-name>\n<commit-interval>0</commit-interval>\n"
            "<group>g</group>\n"
            "</scale-down>\n</primary-only></ha-policy>",
            [
                (
                    6,
                    "<scale-down> gives both <discovery-group-ref> and <connectors>: give one"
                    " (artemis-configuration.xsd allows one or the other)",
                ),
                (
                    9,
                    "scale-down names cluster connection 'nowhere', but no <cluster-connections>"
                    " defines it",
                ),
                (10, "<commit-interval>: must be -1 or greater than 0, got '0'"),
                (11, "unknown element <group> in <scale-down>; did you mean <group-name>?"),
            ],
        ),
        (
            "<ha-policy><primary-only>\n<scale-down>\n"
            '<discovery-group-ref discovery-group-name="dgx"/>\n'
            "</scale-down>\n</primary-only></ha-policy>",
            [
                (
                    7,
                    "scale-down names discovery group 'dgx', but no <discovery-groups> defines it;"
                    " did you mean 'dg'?",
                )
            ],
        ),
        (
            "<ha-policy><primary-only>\n<scale-down>\n"
            "<connectors>\n<connector-ref>node9</connector-ref>\n</connectors>\n"
            "</scale-down>\n</primary-only></ha-policy>",
            [
                (
                    8,
                    "scale-down names connector 'node9', but no <connectors> defines it; did you"
                    " mean 'node2'?",
                )
            ],
        ),
        (
            "<ha-policy><live-only>\n<scale-down>\n<group-name>g</group-name>\n</scale-down>\n"
            "</live-only></ha-policy>",
            [
                (
                    6,
                    "scale-down has no peers to move messages to: give <discovery-group-ref> or"
                    " <connectors>, or define a <cluster-connection> whose peers it can use (or"
                    " set <enabled>false</enabled>)",
                )
            ],
        ),
        (
            "<ha-policy><primary-only><scale-down><enabled>false</enabled></scale-down>\n"
            "<scale-down/></primary-only></ha-policy>",
            [(6, "<scale-down> is given twice in <primary-only> (first at line 5)")],
        ),
    ],
)
def test_cluster_errors(body, expected):
    assert cluster_errors(body) == expected


def test_discovery_group_errors():
    text = core(
        """
        <discovery-groups>
           <discovery-group name="jg">
              <jgroups-file>jgroups.xml</jgroups-file>
              <jgroups-channel>activemq_broadcast_channel</jgroups-channel>
           </discovery-group>
           <discovery-group name="d">
              <group-address>231.7.7.7</group-address>
              <refresh-timeout>0</refresh-timeout>
              <initial-wait-timeout>-1</initial-wait-timeout>
              <local-bind-port>70000</local-bind-port>
              <refresh-timout>5</refresh-timout>
           </discovery-group>
           <discovery-group name="d">
              <group-address>231.7.7.8</group-address>
              <group-port>9876</group-port>
           </discovery-group>
        </discovery-groups>
        """
    )
    assert [(e.line, e.message) for e in errors_of(text)] == [
        (5, f"<jgroups-file>: {_JGROUPS}"),
        (6, f"<jgroups-channel>: {_JGROUPS}"),
        (8, "discovery group 'd' needs a <group-port> (the UDP port of the multicast group)"),
        (10, "<refresh-timeout>: must be greater than 0, got '0'"),
        (11, "<initial-wait-timeout>: must be at least 0, got '-1'"),
        (12, "<local-bind-port>: must be at most 65535, got '70000'"),
        (
            13,
            "unknown element <refresh-timout> in <discovery-group>; did you mean <refresh-timeout>?",
        ),
        (15, "a second discovery group named 'd' (the first is at line 8)"),
    ]


def test_several_errors_at_once_with_lines(tmp_path):
    text = core(
        """
        <connectors>
           <connector name="self">tcp://10.0.0.1:61616</connector>
        </connectors>
        <cluster-user>cluster</cluster-user>
        <cluster-password>ENC(1024:AB:CD)</cluster-password>
        <broadcast-groups>
           <broadcast-group name="bg">
              <jgroups-file>jgroups.xml</jgroups-file>
              <connector-ref>self</connector-ref>
           </broadcast-group>
        </broadcast-groups>
        <cluster-connections>
           <cluster-connection name="c">
              <connector-ref>selfie</connector-ref>
              <message-load-balancing>SOMETIMES</message-load-balancing>
           </cluster-connection>
        </cluster-connections>
        <ha-policy>
           <replication/>
        </ha-policy>
        """
    )
    path = write(tmp_path, text)
    with pytest.raises(ConfigErrors) as info:
        load_config(path, env={})
    errs = info.value.errors
    assert all(e.file == str(path) for e in errs)
    assert [(e.line, e.message) for e in errs] == [
        (line_of(text, "<cluster-password>"), _MASKED),
        (line_of(text, "<jgroups-file>"), f"<jgroups-file>: {_JGROUPS}"),
        (
            line_of(text, '<cluster-connection name="c">'),
            "cluster connection 'c' has no peers: give <static-connectors> or"
            ' <discovery-group-ref discovery-group-name="..."/> (artemis-configuration.xsd lets'
            " both be left out, but Junction needs a cluster connection to say how it finds its"
            " peers)",
        ),
        (
            line_of(text, "<connector-ref>selfie"),
            "cluster connection 'c' names connector 'selfie', but no <connectors> defines it;"
            " did you mean 'self'?",
        ),
        (
            line_of(text, "<message-load-balancing>"),
            "<message-load-balancing>: expected one of OFF, STRICT, ON_DEMAND,"
            " OFF_WITH_REDISTRIBUTION, got 'SOMETIMES'",
        ),
        (
            line_of(text, "<replication/>"),
            "<ha-policy><replication> is not supported by Junction yet",
        ),
    ]
    assert str(info.value).splitlines()[0] == f"{path}:{errs[0].line}: {_MASKED}"


def test_unresolved_variable_in_cluster_values_is_reported_once():
    errs = errors_of(cluster_doc(cc("<connector-ref>${ME}</connector-ref>\n" + _DG_REF)), env={})
    assert [(e.line, e.message) for e in errs] == [
        (7, "<connector-ref>: environment variable 'ME' is not set and ${ME} gives no default")
    ]


def test_cluster_password_stays_as_given_when_not_masked():
    # only a leading ENC( is refused; the value is otherwise any text, trimmed
    cfg = parse_config(core("<cluster-password>  pass ENC(x)  </cluster-password>"), env={})
    assert cfg.cluster_password == "pass ENC(x)"


def test_master_broker_names_a_connector():
    body = cc("<connector-ref>self</connector-ref>\n<master-broker>node2</master-broker>\n" + _DG_REF)
    [connection] = parse_config(cluster_doc(body), file="b.xml", env={}).cluster_connections
    assert connection.master_broker == "node2"
    errors = cluster_errors(cc("<connector-ref>self</connector-ref>\n<master-broker>nowhere</master-broker>\n" + _DG_REF))
    assert [(line, "names connector 'nowhere'" in message) for line, message in errors] == [(8, True)]


def test_an_ipv6_group_is_refused_until_discovery_supports_it():
    errors = cluster_errors(bg("<group-address>ff15::7</group-address>\n<group-port>9876</group-port>\n"
                               "<connector-ref>self</connector-ref>"))
    assert any("IPv6 multicast group" in message for _line, message in errors), errors
