"""The configuration's tables: address settings, URL parameters, what is not implemented.

Each table is the one place a fact lives; these tests check that what is built
from it (the model, the loader's element tables, the node's warnings) says the
same, and that the facts other modules still state themselves (an adapter's
defaults) agree with the table.  That each part reads the acceptor parameters
the table lists for it is tests/unit/test_acceptor_params_read.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from junction.config import model, schema
from junction.config.address_settings import (
    ADDRESS_SETTINGS,
    ADDRESS_SETTINGS_DEFAULTS,
    AddressSettings,
    ResolvedAddressSettings,
)
from junction.config.loader import ConfigErrors, parse_config
from junction.config.params import (
    ACCEPTOR_PARAMS,
    CONNECTOR_PARAMS,
    PARAMS,
    param,
)
from junction.config.specs import NoEffect, Value, Warned
from junction.config.unimplemented import UNIMPLEMENTED, warnings
from tests.unit.test_config import core


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first occurrence of ``needle`` in ``text``."""
    return text[: text.index(needle)].count("\n") + 1


# -- the address settings ------------------------------------------------------------


def test_the_address_settings_model_is_the_table():
    fields = [f.name for f in dataclasses.fields(AddressSettings)]
    names = list(dict.fromkeys(row.name for row in ADDRESS_SETTINGS))
    assert fields == ["match", *names, "source"]
    assert list(ADDRESS_SETTINGS_DEFAULTS) == names
    assert [f.name for f in dataclasses.fields(ResolvedAddressSettings)] == [*names, "matched"]
    for row in ADDRESS_SETTINGS:
        assert ADDRESS_SETTINGS_DEFAULTS[row.name] == row.default
        assert schema.ADDRESS_SETTING_ELEMENTS[row.element] == Value(row.name, row.parse)
    # Artemis's defaults, spot-checked against AddressSettings.java
    assert ADDRESS_SETTINGS_DEFAULTS["max_delivery_attempts"] == 10
    assert ADDRESS_SETTINGS_DEFAULTS["address_full_policy"] == "PAGE"
    assert ADDRESS_SETTINGS_DEFAULTS["page_size_bytes"] == 10 * 1024 * 1024


def test_an_address_setting_row_reads_its_element_and_resolves_to_its_default():
    from junction.brokercore.wildcard import SettingsRepository

    cfg = parse_config(
        core(
            '<address-settings><address-setting match="orders">'
            "<default-last-value-queue>true</default-last-value-queue>"
            "<max-delivery-attempts>3</max-delivery-attempts>"
            "</address-setting></address-settings>"
        ),
        env={},
    )
    (setting,) = cfg.address_settings
    assert (setting.last_value_queue, setting.max_delivery_attempts) == (True, 3)
    assert setting.redelivery_delay is None
    resolved = SettingsRepository(cfg.address_settings).resolve("orders")
    assert (resolved.max_delivery_attempts, resolved.redelivery_delay) == (3, 0)
    assert SettingsRepository(cfg.address_settings).resolve("other").max_delivery_attempts == 10


def test_element_tables_show_their_defaults_from_the_model():
    rows = {name: (field, default) for name, _spec, field, default in schema.CORE_ELEMENTS.rows()}
    assert rows["configuration-file-refresh-period"] == ("configuration_file_refresh_period", 5000)
    assert rows["journal-type"] == (None, None)  # not read into the model
    rows = {name: (field, default) for name, _spec, field, default in schema.CLUSTER_CONNECTION_ELEMENTS.rows()}
    assert rows["max-hops"] == ("max_hops", 1)
    for table in (
        schema.CORE_ELEMENTS,
        schema.ADDRESS_SETTING_ELEMENTS,
        schema.QUEUE_ATTRIBUTES,
        schema.ROUTER_ELEMENTS,
        schema.CLUSTER_CONNECTION_ELEMENTS,
        schema.DISCOVERY_GROUP_ELEMENTS,
        schema.BROADCAST_GROUP_ELEMENTS,
        schema.SCALE_DOWN_ELEMENTS,
    ):
        model_fields = {f.name for f in dataclasses.fields(table.model)}
        for name, spec, field, _default in table.rows():
            if isinstance(spec, Value) and name != "wild-card-routing-enabled":  # goes to <wildcard-addresses>
                assert field in model_fields, (name, table.model)


# -- what is not implemented ------------------------------------------------------------

_TABLES = {
    "core": schema.CORE_ELEMENTS,
    "address-setting": schema.ADDRESS_SETTING_ELEMENTS,
    "queue": schema.QUEUE_ATTRIBUTES,
    "connection-router": schema.ROUTER_ELEMENTS,
    "broadcast-group": schema.BROADCAST_GROUP_ELEMENTS,
    "discovery-group": schema.DISCOVERY_GROUP_ELEMENTS,
    "cluster-connection": schema.CLUSTER_CONNECTION_ELEMENTS,
    "ha-policy": schema.HA_POLICY_ELEMENTS,
    "scale-down": schema.SCALE_DOWN_ELEMENTS,
}


def test_every_unimplemented_element_is_read_as_the_table_says():
    for where, table in _TABLES.items():
        for name, spec in UNIMPLEMENTED.get(where, {}).items():
            if isinstance(spec, Warned):
                # read into the model like any value (or by the section's own reader), then warned
                assert name in table, (where, name)
                assert not isinstance(table[name], Warned)
            else:
                assert table[name] is spec, (where, name)


def test_unimplemented_elements_are_logged_warned_or_refused():
    cfg = parse_config(core("<journal-type>NIO</journal-type><resolve-protocols>true</resolve-protocols>"), env={})
    assert [what for what, _line, _why in cfg.ignored] == ["journal-type", "resolve-protocols"]
    with pytest.raises(ConfigErrors) as info:
        parse_config(core("<bridges/>\n<security-settings><role-mapping/></security-settings>"), file="b.xml", env={})
    assert [str(e) for e in info.value.errors] == [
        "b.xml:3: <bridges> is not supported by Junction yet",
        "b.xml:4: <role-mapping> is not supported by Junction yet",
    ]


_WARNED = core(
    """
    <connectors><connector name="self">tcp://127.0.0.1:61616</connector></connectors>
    <discovery-groups>
       <discovery-group name="dg">
          <group-address>231.7.7.7</group-address><group-port>9876</group-port>
          <initial-wait-timeout>5000</initial-wait-timeout>
       </discovery-group>
    </discovery-groups>
    <cluster-connections>
       <cluster-connection name="c">
          <connector-ref>self</connector-ref>
          <min-large-message-size>1000</min-large-message-size>
          <discovery-group-ref discovery-group-name="dg"/>
       </cluster-connection>
    </cluster-connections>
    <ha-policy><primary-only><scale-down>
       <discovery-group-ref discovery-group-name="dg"/>
    </scale-down></primary-only></ha-policy>
    <address-settings>
       <address-setting match="#">
          <default-last-value-queue>false</default-last-value-queue>
          <redelivery-collision-avoidance-factor>0.5</redelivery-collision-avoidance-factor>
       </address-setting>
    </address-settings>
    <addresses>
       <address name="a"><anycast>
          <queue name="q" non-destructive="true" last-value="false"/>
       </anycast></address>
    </addresses>
    """
)


def test_warned_settings_are_said_at_start_with_their_file_and_line():
    cfg = parse_config(_WARNED, file="b.xml", env={})
    setting, queue = line_of(_WARNED, "<address-setting match"), line_of(_WARNED, '<queue name="q"')
    cluster, group = line_of(_WARNED, "<cluster-connection "), line_of(_WARNED, "<discovery-group ")
    scale_down = line_of(_WARNED, "<scale-down>")
    assert warnings(cfg) == [
        f"b.xml:{setting}: address-setting '#': <redelivery-collision-avoidance-factor> "
        "is not implemented by Junction yet and has no effect",
        f"b.xml:{setting}: address-setting '#': <last-value-queue> is not implemented by Junction yet and has no effect",
        f"b.xml:{queue}: queue 'q': non-destructive is not implemented by Junction yet and has no effect",
        f"b.xml:{cluster}: cluster connection 'c': <min-large-message-size> has no effect in Junction "
        "(its links carry a message of up to 64 MiB whole, and nodes have no failover yet)",
        f"b.xml:{group}: discovery group 'dg': <initial-wait-timeout> has no effect in Junction "
        "(cluster connections and pools act on each broadcast as it comes)",
        f"b.xml:{scale_down}: scale-down <discovery-group-ref> has no effect in Junction yet: "
        "scale-down uses the peers of a cluster connection (cluster-name, else the first)",
    ]
    # at Artemis's defaults, nothing is said
    quiet = (
        _WARNED.replace("<initial-wait-timeout>5000", "<initial-wait-timeout>10000")
        .replace("<min-large-message-size>1000", "<min-large-message-size>100KiB")
    )
    assert [w for w in warnings(parse_config(quiet, file="b.xml", env={})) if "has no effect in Junction (" in w] == []


# -- URL parameters ------------------------------------------------------------------------


def test_url_parameters_come_from_the_two_tables():
    no_effect_on_acceptors = set(UNIMPLEMENTED["acceptor-url"])
    assert ACCEPTOR_PARAMS == {p.name for p in PARAMS if p.acceptor} | no_effect_on_acceptors
    assert CONNECTOR_PARAMS == {p.name for p in PARAMS if p.connector} | set(UNIMPLEMENTED["connector-url"])
    # a parameter without effect on acceptors is acted on by no part there
    assert not {p.name for p in PARAMS if p.acceptor} & no_effect_on_acceptors
    for rows in (UNIMPLEMENTED["acceptor-url"], UNIMPLEMENTED["connector-url"]):
        assert all(isinstance(spec, NoEffect) for spec in rows.values())


def test_parameter_defaults_are_those_the_code_uses():
    from junction.brokercore import amqp_server, stomp_server
    from junction.edge.stack import DEFAULT_BACKLOG, listen_backlog
    from junction.gateway import forward, multi_probe
    from junction.tls import server as tls_server

    defaults = {p.name: p.default for p in PARAMS}
    assert defaults["amqpCredits"] == amqp_server.DEFAULT_CREDITS
    assert defaults["amqpLowCredits"] == amqp_server.DEFAULT_LOW_CREDITS
    assert defaults["amqpIdleTimeout"] == amqp_server.DEFAULT_IDLE_TIMEOUT_MS
    assert defaults["maxFrameSize"] == amqp_server.DEFAULT_MAX_FRAME_SIZE
    assert defaults["amqpChannelMax"] == amqp_server.DEFAULT_CHANNEL_MAX
    assert defaults["heartBeatToConnectionTtlModifier"] == stomp_server.DEFAULT_TTL_MODIFIER
    assert defaults["handshake-timeout"] == tls_server.DEFAULT_HANDSHAKE_TIMEOUT  # seconds, as the TLS listener reads it
    assert defaults["connect-timeout-millis"] == forward.DEFAULT_CONNECT_TIMEOUT * 1000
    assert defaults["probeProtocols"] == ",".join(multi_probe.DEFAULT_PROBE_PROTOCOLS)

    class Acceptor:
        params: dict = {}

    assert listen_backlog(Acceptor()) == DEFAULT_BACKLOG  # backlog's -1
    Acceptor.params = {"backlog": "64"}
    assert listen_backlog(Acceptor()) == 64


def test_param_reads_a_value_with_its_type_else_the_default():
    assert param({"handshakesAllowed": "5"}, "handshakesAllowed") == 5
    assert param({}, "handshakesAllowed") == -1
    assert param(None, "tcpNoDelay") is True
    assert param({"tcpNoDelay": "FALSE"}, "tcpNoDelay") is False
    assert param({"sniHost": "a.example"}, "sniHost") == "a.example"
    with pytest.raises(KeyError):
        param({}, "batchDelay")  # no effect in Junction: not in the table of parameters


def test_the_model_keeps_its_address_settings_names():
    assert model.AddressSettings is AddressSettings
    assert model.ADDRESS_SETTINGS_DEFAULTS is ADDRESS_SETTINGS_DEFAULTS
