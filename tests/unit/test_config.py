"""Tests for junction.config: broker.xml loading/validation and the users/roles files."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from junction.config import model
from junction.config.loader import (
    ConfigError,
    ConfigErrors,
    load_config,
    parse_config,
)
from junction.config.properties import (
    PropertiesError,
    UserStore,
    add_user,
    hash_password,
    list_users,
    parse_properties,
    remove_user,
    set_password,
    verify_password,
)
from junction.config.schema import ADDRESS_SETTING_ELEMENTS, CORE_ELEMENTS
from junction.config.specs import Value
from junction.config.substitute import substitute
from junction.config.urls import parse_transport_url
from junction.config.values import parse_byte_size
from junction.config.xmlsource import XMLSourceError, parse_string
from junction.model.message import RoutingType

ETC = Path(__file__).resolve().parents[2] / "etc"
ENC_RE = re.compile(r"ENC\(1024:[0-9A-F]{64}:[0-9A-F]{128}\)\Z")


def write(tmp_path: Path, text: str, name: str = "broker.xml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return p


def core(body: str) -> str:
    """A minimal Artemis-layout document around ``body`` (body starts on line 3)."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        + textwrap.dedent(body).strip("\n")
        + "\n</core>\n</configuration>\n"
    )


def errors_of(text: str, env=None, tmp_path: Path | None = None) -> list[ConfigError]:
    with pytest.raises(ConfigErrors) as info:
        parse_config(text, file="b.xml", env=env or {})
    return info.value.errors


def messages(errs) -> list[str]:
    return [e.message for e in errs]


# ---------------------------------------------------------------------------
# The shipped default configuration


def test_default_broker_xml_loads():
    cfg = load_config(ETC / "broker.xml", env={})
    assert cfg.name == "junction"
    assert cfg.persistence_enabled and cfg.security_enabled
    assert cfg.journal_directory == str(ETC / "data" / "journal")
    assert cfg.bindings_directory == str(ETC / "data" / "bindings")
    assert cfg.paging_directory == str(ETC / "data" / "paging")
    assert cfg.large_messages_directory == str(ETC / "data" / "large-messages")
    assert cfg.base_dir == str(ETC)
    stomp, amqp = cfg.acceptors
    assert (stomp.name, stomp.host, stomp.port, stomp.protocols) == (
        "stomp",
        "127.0.0.1",
        61613,
        {"STOMP"},
    )
    assert (amqp.name, amqp.host, amqp.port, amqp.protocols) == ("amqp", "127.0.0.1", 5672, {"AMQP"})
    assert amqp.params["amqpCredits"] == "1000"
    assert (cfg.management_host, cfg.management_port) == ("127.0.0.1", 8161)
    assert cfg.anonymous_user is None
    assert cfg.users_file == str(ETC / "artemis-users.properties")
    assert {a.name for a in cfg.addresses} == {"DLQ", "ExpiryQueue"}
    (catch_all,) = cfg.address_settings
    assert (catch_all.match, catch_all.dead_letter_address, catch_all.expiry_address) == (
        "#",
        "DLQ",
        "ExpiryQueue",
    )
    (sec,) = cfg.security_settings
    assert sec.match == "#"
    assert set(sec.permissions) == set(model.PERMISSION_TYPES)
    assert all(roles == {"amq"} for roles in sec.permissions.values())
    assert cfg.limits == model.Limits()


def test_default_users_and_roles():
    store = UserStore.load(ETC / "artemis-users.properties", ETC / "artemis-roles.properties")
    assert store.authenticate("admin", "admin")
    assert not store.authenticate("admin", "Admin")
    assert not store.authenticate("nobody", "admin")
    assert store.roles_of("admin") == {"amq"}
    text = (ETC / "artemis-users.properties").read_text()
    (stored,) = [v for k, v, _ in parse_properties(text) if k == "admin"]
    assert ENC_RE.match(stored), "the default admin password must be stored hashed"


# ---------------------------------------------------------------------------
# Layouts and namespaces

ARTEMIS_STYLE = """\
<?xml version='1.0'?>
<!-- as "artemis create" writes it, minus MQTT/HORNETQ which Junction refuses -->
<configuration xmlns="urn:activemq"
               xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
               xmlns:xi="http://www.w3.org/2001/XInclude"
               xsi:schemaLocation="urn:activemq /schema/artemis-configuration.xsd">
   <core xmlns="urn:activemq:core" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="urn:activemq:core ">
      <name>0.0.0.0</name>
      <persistence-enabled>true</persistence-enabled>
      <max-redelivery-records>1</max-redelivery-records>
      <journal-type>ASYNCIO</journal-type>
      <paging-directory>${data.dir:data}/paging</paging-directory>
      <bindings-directory>${data.dir:data}/bindings</bindings-directory>
      <journal-directory>${data.dir:data}/journal</journal-directory>
      <large-messages-directory>${data.dir:data}/large-messages</large-messages-directory>
      <journal-datasync>true</journal-datasync>
      <journal-min-files>2</journal-min-files>
      <journal-pool-files>10</journal-pool-files>
      <journal-device-block-size>4096</journal-device-block-size>
      <journal-file-size>10M</journal-file-size>
      <journal-buffer-timeout>16000</journal-buffer-timeout>
      <journal-max-io>4096</journal-max-io>
      <disk-scan-period>5000</disk-scan-period>
      <max-disk-usage>90</max-disk-usage>
      <critical-analyzer>true</critical-analyzer>
      <critical-analyzer-timeout>120000</critical-analyzer-timeout>
      <critical-analyzer-check-period>60000</critical-analyzer-check-period>
      <critical-analyzer-policy>HALT</critical-analyzer-policy>
      <page-sync-timeout>1628000</page-sync-timeout>
      <global-max-size>100Mb</global-max-size>
      <acceptors>
         <acceptor name="artemis">tcp://0.0.0.0:61616?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;amqpMinLargeMessageSize=102400;protocols=CORE,AMQP,STOMP,OPENWIRE;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;amqpDuplicateDetection=true;supportAdvisory=false;suppressInternalManagementObjects=false</acceptor>
         <acceptor name="amqp">tcp://0.0.0.0:5672?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=AMQP;useEpoll=true;amqpCredits=1000;amqpLowCredits=300;amqpMinLargeMessageSize=102400;amqpDuplicateDetection=true</acceptor>
         <acceptor name="stomp">tcp://0.0.0.0:61613?tcpSendBufferSize=1048576;tcpReceiveBufferSize=1048576;protocols=STOMP;useEpoll=true</acceptor>
      </acceptors>
      <security-settings>
         <security-setting match="#">
            <permission type="createNonDurableQueue" roles="amq"/>
            <permission type="deleteNonDurableQueue" roles="amq"/>
            <permission type="createDurableQueue" roles="amq"/>
            <permission type="deleteDurableQueue" roles="amq"/>
            <permission type="createAddress" roles="amq"/>
            <permission type="deleteAddress" roles="amq"/>
            <permission type="consume" roles="amq"/>
            <permission type="browse" roles="amq"/>
            <permission type="send" roles="amq"/>
            <permission type="manage" roles="amq"/>
         </security-setting>
      </security-settings>
      <address-settings>
         <address-setting match="activemq.management.#">
            <dead-letter-address>DLQ</dead-letter-address>
            <expiry-address>ExpiryQueue</expiry-address>
            <redelivery-delay>0</redelivery-delay>
            <max-size-bytes>-1</max-size-bytes>
            <message-counter-history-day-limit>10</message-counter-history-day-limit>
            <address-full-policy>PAGE</address-full-policy>
            <auto-create-queues>true</auto-create-queues>
            <auto-create-addresses>true</auto-create-addresses>
         </address-setting>
         <address-setting match="#">
            <dead-letter-address>DLQ</dead-letter-address>
            <expiry-address>ExpiryQueue</expiry-address>
            <redelivery-delay>0</redelivery-delay>
            <message-counter-history-day-limit>10</message-counter-history-day-limit>
            <address-full-policy>PAGE</address-full-policy>
            <auto-create-queues>true</auto-create-queues>
            <auto-create-addresses>true</auto-create-addresses>
            <auto-delete-queues>false</auto-delete-queues>
            <auto-delete-addresses>false</auto-delete-addresses>
            <page-size-bytes>10M</page-size-bytes>
            <max-size-bytes>-1</max-size-bytes>
            <max-size-messages>-1</max-size-messages>
            <max-read-page-messages>-1</max-read-page-messages>
            <max-read-page-bytes>20M</max-read-page-bytes>
            <page-limit-bytes>-1</page-limit-bytes>
            <page-limit-messages>-1</page-limit-messages>
          </address-setting>
      </address-settings>
      <addresses>
         <address name="DLQ">
            <anycast>
               <queue name="DLQ" />
            </anycast>
         </address>
         <address name="ExpiryQueue">
            <anycast>
               <queue name="ExpiryQueue" />
            </anycast>
         </address>
         <address name="orders">
            <anycast>
               <queue name="orders.eu" max-consumers="2" exclusive="true" purge-on-no-consumers="false">
                  <filter string="region = 'EU'"/>
                  <durable>false</durable>
                  <user>alice</user>
               </queue>
            </anycast>
            <multicast/>
         </address>
      </addresses>
   </core>
</configuration>
"""


def test_artemis_style_broker_xml_loads(tmp_path):
    cfg = load_config(write(tmp_path, ARTEMIS_STYLE), env={})
    assert cfg.name == "0.0.0.0"
    assert cfg.journal_directory == str(tmp_path / "data" / "journal")
    assert cfg.journal_buffer_timeout == 16000
    assert [a.name for a in cfg.acceptors] == ["artemis", "amqp", "stomp"]
    artemis = cfg.acceptors[0]
    assert artemis.protocols == {"CORE", "AMQP", "STOMP", "OPENWIRE"}
    assert artemis.params["amqpCredits"] == "1000"
    assert artemis.source == (str(tmp_path / "broker.xml"), 33)
    mgmt, catch_all = cfg.address_settings
    assert mgmt.match == "activemq.management.#" and catch_all.auto_delete_queues is False
    orders = [a for a in cfg.addresses if a.name == "orders"][0]
    assert orders.routing_types == {RoutingType.ANYCAST, RoutingType.MULTICAST}
    (q,) = orders.queues
    assert (q.name, q.routing_type, q.filter, q.durable, q.user) == (
        "orders.eu",
        RoutingType.ANYCAST,
        "region = 'EU'",
        False,
        "alice",
    )
    assert (q.max_consumers, q.exclusive, q.purge_on_no_consumers) == (2, True, False)
    assert q.given == {"max-consumers", "exclusive", "purge-on-no-consumers"}
    ignored = {name for name, _line, _why in cfg.ignored}
    assert {
        "journal-type",
        "journal-max-io",
        "critical-analyzer-policy",
        "global-max-size",
        "max-read-page-bytes",
    } <= ignored
    assert "page-limit-bytes" in ignored  # accepted because it restates Artemis's default
    line = {name: ln for name, ln, _ in cfg.ignored}
    assert line["journal-type"] == 12


def test_bare_core_root_and_no_namespace():
    for root in ('<core xmlns="urn:activemq:core">', "<core>"):
        cfg = parse_config(
            f"{root}<name>n</name><security-enabled>false</security-enabled></core>", env={}
        )
        assert cfg.name == "n" and cfg.security_enabled is False
    cfg = parse_config("<configuration><core><name>plain</name></core></configuration>", env={})
    assert cfg.name == "plain"


def test_wrong_root_and_foreign_namespace():
    errs = errors_of("<broker><name>x</name></broker>")
    assert "root element must be <configuration>" in errs[0].message
    errs = errors_of('<core xmlns="urn:other"/>')
    assert "namespace" in errs[0].message
    errs = errors_of(core('<x:name xmlns:x="urn:other">a</x:name>'))
    assert (errs[0].line, "namespace 'urn:other'" in errs[0].message) == (3, True)


def test_empty_core_gives_artemis_defaults():
    cfg = parse_config("<core/>", env={}, base_dir="/srv/node")
    d = model.BrokerConfig()
    assert cfg.name == "localhost"
    for f in (
        "persistence_enabled",
        "journal_file_size",
        "journal_sync_transactional",
        "journal_sync_non_transactional",
        "journal_buffer_timeout",
        "id_cache_size",
        "persist_id_cache",
        "security_enabled",
        "wildcard_addresses",
        "limits",
        "management_port",
        "anonymous_user",
    ):
        assert getattr(cfg, f) == getattr(d, f), f
    # artemis-configuration.xsd defaults, resolved against the config folder
    assert cfg.journal_directory == "/srv/node/data/journal"
    assert cfg.bindings_directory == "/srv/node/data/bindings"
    assert cfg.paging_directory == "/srv/node/data/paging"
    assert cfg.large_messages_directory == "/srv/node/data/largemessages"
    assert (cfg.journal_file_size, cfg.journal_buffer_timeout, cfg.id_cache_size) == (
        10485760,
        500000,
        20000,
    )
    assert cfg.acceptors == cfg.addresses == cfg.ignored == ()


def test_absolute_directory_kept(tmp_path):
    cfg = parse_config(
        core("<journal-directory>/var/lib/j</journal-directory>"), env={}, base_dir=str(tmp_path)
    )
    assert cfg.journal_directory == "/var/lib/j"


def test_doctype_and_entities_refused(tmp_path):
    xxe = '<?xml version="1.0"?>\n<!DOCTYPE core [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<core><name>&x;</name></core>'
    with pytest.raises(ConfigErrors) as info:
        load_config(write(tmp_path, xxe), env={})
    (err,) = info.value.errors
    assert err.line == 2 and "DOCTYPE" in err.message
    with pytest.raises(XMLSourceError):
        parse_string('<!DOCTYPE a [<!ENTITY lol "lol">]><a>&lol;</a>')


def test_malformed_xml_reports_line(tmp_path):
    with pytest.raises(ConfigErrors) as info:
        load_config(write(tmp_path, "<core>\n<name>x</name>\n<acceptors>\n</core>\n"), env={})
    (err,) = info.value.errors
    assert err.line == 4 and "not well-formed" in err.message


def test_missing_file():
    with pytest.raises(ConfigErrors) as info:
        load_config("/nonexistent/broker.xml")
    assert "cannot read" in str(info.value)


# ---------------------------------------------------------------------------
# Every error at once, with lines


def test_multiple_errors_reported_together_with_lines(tmp_path):
    path = write(
        tmp_path,
        core(
            """
            <persistence-enabled>yes</persistence-enabled>
            <journal-dir>data/j</journal-dir>
            <id-cache-size>many</id-cache-size>
            <bridges/>
            <acceptors>
               <acceptor name="a">tcp://127.0.0.1:61616?protocol=CORE;tcpNoDelai=true</acceptor>
            </acceptors>
            <address-settings>
               <address-setting match="#">
                  <address-full-policy>SPILL</address-full-policy>
               </address-setting>
            </address-settings>
            """
        ),
    )
    with pytest.raises(ConfigErrors) as info:
        load_config(path, env={})
    errs = info.value.errors
    got = [(e.line, e.message.split(":")[0]) for e in errs]
    assert [line for line, _ in got] == [3, 4, 5, 6, 8, 12]
    assert all(e.file == str(path) for e in errs)
    text = str(info.value)
    lines = text.splitlines()
    assert len(lines) == 6
    assert lines[0] == f"{path}:3: <persistence-enabled>: expected true or false, got 'yes'"
    assert "did you mean <journal-directory>" in lines[1]
    assert lines[2].endswith("<id-cache-size>: expected a whole number, got 'many'")
    assert lines[3].endswith("<bridges> is not supported by Junction yet")
    assert "unknown acceptor parameter 'tcpNoDelai'; did you mean 'tcpNoDelay'" in lines[4]
    assert "expected one of BLOCK, FAIL, DROP, PAGE, got 'SPILL'" in lines[5]


def test_config_error_str():
    e = ConfigError("etc/broker.xml", 12, "bad")
    assert str(e) == "etc/broker.xml:12: bad"
    errs = ConfigErrors([e, ConfigError("f", 1, "x")])
    assert str(errs) == "etc/broker.xml:12: bad\nf:1: x"
    assert len(errs) == 2


def test_repeated_element_is_an_error():
    errs = errors_of(core("<name>a</name>\n<name>b</name>"))
    assert (errs[0].line, "given twice" in errs[0].message, "line 3" in errs[0].message) == (
        4,
        True,
        True,
    )


# ---------------------------------------------------------------------------
# ${VAR} substitution


def test_env_substitution_text_and_attributes():
    text = core(
        """
        <name>${NODE}</name>
        <journal-file-size>${JSIZE:1M}</journal-file-size>
        <acceptors><acceptor name="${ACC:main}">tcp://${HOST:127.0.0.1}:${PORT}?protocols=STOMP</acceptor></acceptors>
        <security-enabled>${ SEC : false }</security-enabled>
        """
    )
    cfg = parse_config(text, env={"NODE": "n1", "PORT": "61700"})
    assert cfg.name == "n1"
    assert cfg.journal_file_size == 1024 * 1024
    (a,) = cfg.acceptors
    assert (a.name, a.host, a.port) == ("main", "127.0.0.1", 61700)
    assert cfg.security_enabled is False
    cfg = parse_config(
        text, env={"NODE": "n1", "PORT": "1", "JSIZE": "2M", "HOST": "[::1]", "ACC": "x"}
    )
    assert cfg.acceptors[0].host == "::1"
    assert cfg.journal_file_size == 2 * 1024 * 1024


def test_env_missing_variable_is_an_error_naming_it():
    errs = errors_of(
        core(
            "<name>${NOPE}</name>\n<acceptors><acceptor name='a'>tcp://h:${P}</acceptor></acceptors>"
        )
    )
    assert [e.line for e in errs] == [3, 4]
    assert "'NOPE' is not set" in errs[0].message
    assert "'P' is not set" in errs[1].message


def test_substitute_default_keeps_colons():
    assert substitute("${URL:tcp://h:1}", {}) == ("tcp://h:1", [])
    assert substitute("a${X:}b", {}) == ("ab", [])
    assert substitute("${X}", {"X": "${Y}"}) == ("${Y}", [])  # no second round
    assert substitute("${X", {})[1] == ["unterminated ${...} reference"]


# ---------------------------------------------------------------------------
# Unknown and unsupported elements


def test_unknown_element_suggests():
    errs = errors_of(core("<persistance-enabled>true</persistance-enabled>"))
    assert (
        errs[0].message
        == "unknown element <persistance-enabled> in <core>; did you mean <persistence-enabled>?"
    )
    errs = errors_of(
        core(
            '<address-settings><address-setting match="#"><dead-leter-address>D</dead-leter-address></address-setting></address-settings>'
        )
    )
    assert (
        "unknown element <dead-leter-address> in <address-setting>; did you mean <dead-letter-address>"
        in errs[0].message
    )
    errs = errors_of(core("<frobnicate/>"))
    assert errs[0].message == "unknown element <frobnicate> in <core>"


@pytest.mark.parametrize(
    "element",
    [
        "bridges",
        "diverts",
        "federations",
        "jgroups-file",
        "broker-connections",
        "grouping-handler",
    ],
)
def test_unsupported_elements(element):
    errs = errors_of(core(f"<{element}/>"))
    assert errs[0].message.startswith(f"<{element}> is not supported by Junction yet")
    assert errs[0].line == 3


def test_tuning_knobs_are_ignored_and_listed():
    cfg = parse_config(
        core("<journal-type>NIO</journal-type>\n<thread-pool-max-size>30</thread-pool-max-size>"),
        env={},
    )
    assert [(n, ln) for n, ln, _ in cfg.ignored] == [
        ("journal-type", 3),
        ("thread-pool-max-size", 4),
    ]
    # ...but still type-checked
    errs = errors_of(core("<journal-type>FAST</journal-type>"))
    assert "expected one of ASYNCIO, NIO, MAPPED" in errs[0].message


def test_default_only_elements():
    cfg = parse_config(core("<resolve-protocols>true</resolve-protocols>"), env={})
    assert cfg.ignored[0][0] == "resolve-protocols"
    errs = errors_of(core("<resolve-protocols>false</resolve-protocols>"))
    assert (
        "not supported by Junction yet (only its Artemis default true is accepted"
        in errs[0].message
    )


def test_element_tables_cover_the_model():
    """Every AddressSettings field is reachable from some element name."""
    reachable = {s.attr for s in ADDRESS_SETTING_ELEMENTS.values() if isinstance(s, Value)}
    fields = {f for f in model.AddressSettings.__dataclass_fields__} - {"match", "source"}
    assert fields == reachable
    for name in (
        "journal-type",
        "journal-min-files",
        "graceful-shutdown-timeout",
        "jmx-management-enabled",
        "critical-analyzer",
        "max-disk-usage",
        "global-max-size",
        "management-address",
        "populate-validated-user",
    ):
        assert type(CORE_ELEMENTS[name]).__name__ == "Ignored", name


def test_xinclude_and_jms_rejected():
    text = (
        '<configuration xmlns="urn:activemq" xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        '<xi:include href="more.xml"/>\n<jms/>\n<core/>\n</configuration>'
    )
    errs = errors_of(text)
    assert [e.line for e in errs] == [2, 3]
    assert all("not supported by Junction yet" in e.message for e in errs)


# ---------------------------------------------------------------------------
# Type errors


@pytest.mark.parametrize(
    "body, expected",
    [
        ("<persistence-enabled>1</persistence-enabled>", "expected true or false, got '1'"),
        ("<id-cache-size>12.5</id-cache-size>", "expected a whole number, got '12.5'"),
        ("<id-cache-size>-1</id-cache-size>", "must be at least 0"),
        ("<journal-file-size>-10M</journal-file-size>", "a negative size takes no unit"),
        ("<journal-file-size>0</journal-file-size>", "must be greater than 0"),
        ("<journal-file-size>4G</journal-file-size>", "must be at most 2147483647"),
        (
            '<address-settings><address-setting match="#"><max-size-bytes>-2</max-size-bytes></address-setting></address-settings>',
            "must be -1 or at least 0",
        ),
        (
            '<address-settings><address-setting match="#"><default-queue-routing-type>BOTH</default-queue-routing-type></address-setting></address-settings>',
            "expected one of ANYCAST, MULTICAST, got 'BOTH'",
        ),
        (
            '<address-settings><address-setting match="#"><address-full-policy>PAGES</address-full-policy></address-setting></address-settings>',
            "expected one of BLOCK, FAIL, DROP, PAGE, got 'PAGES'; did you mean 'PAGE'?",
        ),
        (
            '<address-settings><address-setting match="#"><redelivery-collision-avoidance-factor>2</redelivery-collision-avoidance-factor></address-setting></address-settings>',
            "must be at most 1.0",
        ),
        (
            '<address-settings><address-setting match="#"><slow-consumer-policy>WARN</slow-consumer-policy></address-setting></address-settings>',
            "expected one of KILL, NOTIFY",
        ),
        (
            '<addresses><address name="a"><anycast><queue name="q" max-consumers="x"/></anycast></address></addresses>',
            "queue 'q' attribute max-consumers: expected a whole number",
        ),
        (
            '<addresses><address name="a"><anycast><queue name="q"><durable>nope</durable></queue></anycast></address></addresses>',
            "<durable>: expected true or false",
        ),
        (
            "<wildcard-addresses><delimiter>::</delimiter></wildcard-addresses>",
            "must be a single character",
        ),
        (
            "<wildcard-addresses><delimiter>#</delimiter></wildcard-addresses>",
            "three different characters",
        ),
        (
            '<junction><management port="http"/></junction>',
            "<management port>: expected a whole number",
        ),
        (
            '<junction><limits max-frame-size="lots"/></junction>',
            "<limits max-frame-size>: expected a size",
        ),
        (
            '<security-settings><security-setting match="#"><permission type="write" roles="a"/></security-setting></security-settings>',
            "unknown permission type 'write'",
        ),
    ],
)
def test_type_errors(body, expected):
    errs = errors_of(core(body))
    assert any(expected in m for m in messages(errs)), messages(errs)
    assert all(e.line == 3 for e in errs)


def test_address_and_queue_structure_errors():
    errs = errors_of(
        core(
            """
        <addresses>
           <address name="a"/>
           <address><anycast/></address>
           <address name="b"><anycast><queue name="q"/></anycast></address>
           <address name="b"><multicast><queue name="q"/><topic/></multicast></address>
        </addresses>
        """
        )
    )
    msgs = messages(errs)
    assert "address 'a' has no routing type" in msgs[0]
    assert "<address> needs a name attribute" in msgs[1]
    assert "unknown element <topic> in <multicast>; expected <queue>" in msgs
    assert any("a second address named 'b'" in m for m in msgs)
    assert any("a second queue named 'q'" in m for m in msgs)


def test_security_settings_parse():
    cfg = parse_config(
        core(
            """
        <security-settings>
           <security-setting match="orders.#">
              <permission type="send" roles="producer, admin"/>
              <permission type="send" roles="ops"/>
              <permission type="createTempQueue" roles="app"/>
           </security-setting>
        </security-settings>
        """
        ),
        env={},
    )
    (s,) = cfg.security_settings
    assert s.permissions == {"send": {"producer", "admin", "ops"}, "createNonDurableQueue": {"app"}}
    assert s.source[1] == 4


def test_wildcard_addresses_and_junction_section():
    cfg = parse_config(
        core(
            """
        <wild-card-routing-enabled>false</wild-card-routing-enabled>
        <wildcard-addresses><delimiter>/</delimiter><any-words>+</any-words><single-word>?</single-word></wildcard-addresses>
        <junction>
           <management host="0.0.0.0" port="9000"/>
           <security users-file="/etc/j/users" roles-file="roles" anonymous-user="guest"/>
           <limits max-frame-size="1MiB" max-header-count="10" max-header-length="1k" max-pending-frames="5" connect-timeout="250"/>
        </junction>
        """
        ),
        env={},
        base_dir="/srv",
    )
    w = cfg.wildcard_addresses
    assert (w.routing_enabled, w.enabled, w.delimiter, w.any_words, w.single_word) == (
        False,
        False,
        "/",
        "+",
        "?",
    )
    assert (cfg.management_host, cfg.management_port) == ("0.0.0.0", 9000)
    assert (cfg.users_file, cfg.roles_file, cfg.anonymous_user) == (
        "/etc/j/users",
        "/srv/roles",
        "guest",
    )
    assert cfg.limits == model.Limits(1024 * 1024, 10, 1024, 5, 250)


def test_junction_unknown_child_and_attribute():
    errs = errors_of(core('<junction><managment port="1"/><limits max-frame="1"/></junction>'))
    assert "unknown element <managment> in <junction>; did you mean <management>" in errs[0].message
    assert "<limits> has no attribute 'max-frame'; did you mean 'max-frame-size'" in errs[1].message


# ---------------------------------------------------------------------------
# Transport URLs


def test_url_semicolon_and_ampersand():
    for q in (
        "protocols=STOMP;sslEnabled=true;tcpNoDelay=false",
        "protocols=STOMP&sslEnabled=true&tcpNoDelay=false",
        "protocols=STOMP;sslEnabled=true&tcpNoDelay=false;",
    ):
        url, errs = parse_transport_url(f"tcp://example.org:61613?{q}")
        assert errs == []
        assert url.params == {"protocols": "STOMP", "sslEnabled": "true", "tcpNoDelay": "false"}
        assert (url.scheme, url.host, url.port) == ("tcp", "example.org", 61613)


def test_router_mode_is_a_choice():
    for value in ("redirect", "forward", "auto", "FORWARD"):
        url, errs = parse_transport_url(f"tcp://h:1?router=r;routerMode={value}")
        assert errs == [] and url.params["routerMode"] == value
    _url, errs = parse_transport_url("tcp://h:1?router=r;routerMode=bounce")
    assert len(errs) == 1 and "redirect, forward, auto" in errs[0]
    _url, errs = parse_transport_url("tcp://h:1?routerMode=forward", kind="connector")
    assert errs and "routerMode" in errs[0]


def test_url_forms():
    assert parse_transport_url("tcp://[::1]:5672")[0][1:3] == ("::1", 5672)
    assert parse_transport_url("tcp://h")[0].port == 61616
    assert parse_transport_url("TCP://h:0")[0].port == 0
    url, _ = parse_transport_url("tcp://h:1?keyStorePassword=a%3Bb+c;anycastPrefix=/queue/")
    assert url.params == {"keyStorePassword": "a;b c", "anycastPrefix": "/queue/"}
    assert parse_transport_url("vm://0")[1][0].startswith(
        "in-VM transports (vm://) are not supported"
    )
    assert "unknown transport 'udp'" in parse_transport_url("udp://h:1")[1][0]
    assert "must be at most 65535" in parse_transport_url("tcp://h:70000")[1][0]
    assert "must be greater than 0" in parse_transport_url("tcp://h:0", "connector")[1][0]
    assert "IPv6 addresses must be in brackets" in parse_transport_url("tcp://::1:5672")[1][0]


def test_url_param_errors():
    _, errs = parse_transport_url(
        "tcp://h:1?sslEnabld=true;tcpNoDelay=true;tcpNoDelay=false;flag;connectionsAllowed=x"
    )
    assert errs[0] == "unknown acceptor parameter 'sslEnabld'; did you mean 'sslEnabled'?"
    assert "parameter 'tcpNoDelay' is given twice" in errs
    assert "parameter 'flag' has no value (write flag=value)" in errs
    assert "parameter connectionsAllowed: expected a whole number, got 'x'" in errs
    # connector-only and acceptor-only keys
    assert parse_transport_url("tcp://h:1?localPort=5", "connector")[1] == []
    assert (
        "unknown acceptor parameter 'localPort'"
        in parse_transport_url("tcp://h:1?localPort=5")[1][0]
    )
    assert (
        "unknown connector parameter 'protocols'"
        in parse_transport_url("tcp://h:1?protocols=CORE", "connector")[1][0]
    )


def test_acceptor_protocols_prefixes_router():
    cfg = parse_config(
        core(
            """
        <acceptors>
           <acceptor name="s">tcp://127.0.0.1:0?protocols=stomp, amqp;anycastPrefix=/queue/&amp;multicastPrefix=/topic/;handshake-timeout=5;stompEnableMessageId=true;heartBeatToConnectionTtlModifier=2.5;supportAdvisory=false;useKQueue=false</acceptor>
           <acceptor name="t">tcp://127.0.0.1:0</acceptor>
        </acceptors>
        <connectors><connector name="peer">tcp://10.0.0.2:61616?connect-timeout-millis=500</connector></connectors>
        """
        ),
        env={},
    )
    s, t = cfg.acceptors
    assert s.protocols == {"STOMP", "AMQP"} and t.protocols == frozenset()
    assert (s.anycast_prefix, s.multicast_prefix, s.router) == ("/queue/", "/topic/", None)
    assert s.params["handshake-timeout"] == "5"
    (c,) = cfg.connectors
    assert (c.name, c.host, c.port, c.params) == (
        "peer",
        "10.0.0.2",
        61616,
        {"connect-timeout-millis": "500"},
    )


def test_acceptor_errors():
    errs = errors_of(
        core(
            """
        <acceptors>
           <acceptor name="a">tcp://0.0.0.0:61616?protocols=CORE,MQTT,HORNETQ,AMQPP</acceptor>
           <acceptor name="a">tcp://127.0.0.1:61616</acceptor>
           <acceptor name="r">tcp://127.0.0.1:61617?router=simple</acceptor>
           <acceptor>tcp://127.0.0.1:1</acceptor>
           <acceptor name="m">tcp://127.0.0.1:8161</acceptor>
        </acceptors>
        """
        )
    )
    msgs = messages(errs)
    assert (
        "acceptor 'a': protocol MQTT is not supported by Junction (it serves CORE, AMQP, STOMP, OPENWIRE, CLUSTER)"
        in msgs
    )
    assert (
        "acceptor 'a': protocol HORNETQ is not supported by Junction (it serves CORE, AMQP, STOMP, OPENWIRE, CLUSTER)"
        in msgs
    )
    assert "acceptor 'a': unknown protocol 'AMQPP'; did you mean 'AMQP'?" in msgs
    assert "a second acceptor named 'a' (the first is at line 4)" in msgs
    assert any("127.0.0.1:61616, which acceptor 'a' (line 4) already uses" in m for m in msgs)
    assert any("names router 'simple', but no <connection-routers> defines it" in m for m in msgs)
    assert "<acceptor> needs a name attribute" in msgs
    assert any(
        m.startswith("acceptor 'm' listens on 127.0.0.1:8161, which the management API (by default")
        for m in msgs
    )


# ---------------------------------------------------------------------------
# Byte sizes


@pytest.mark.parametrize(
    "text, value",
    [
        ("0", 0),
        ("1048576", 1048576),
        ("-1", -1),
        ("10b", 10),
        ("1K", 1024),
        ("1kb", 1024),
        ("1KiB", 1024),
        ("10M", 10 * 2**20),
        ("10MB", 10 * 2**20),
        ("10mib", 10 * 2**20),
        ("1G", 2**30),
        ("1GiB", 2**30),
        (" 20 M ", 20 * 2**20),
        ("64KiB", 65536),
    ],
)
def test_byte_sizes(text, value):
    assert parse_byte_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "1.5M", "10T", "ten", "10 MBs", "1iB", "-1K"])
def test_bad_byte_sizes(text):
    with pytest.raises(ValueError):
        parse_byte_size(text)


@given(
    st.integers(0, 2**20),
    st.sampled_from(["", "b", "k", "kb", "kib", "m", "mb", "mib", "g", "gib"]),
)
def test_byte_size_units(n, unit):
    factor = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit[:1] if unit != "b" else ""]
    assert parse_byte_size(f"{n}{unit.upper()}") == parse_byte_size(f"{n}{unit}") == n * factor


# ---------------------------------------------------------------------------
# Users and roles files


def test_hash_format_and_artemis_vectors():
    h = hash_password("secret")
    assert ENC_RE.match(h)
    assert h != hash_password("secret")  # salted
    assert verify_password("secret", h) and not verify_password("Secret", h)
    # hashes written by Artemis (its HashProcessorTest vectors)
    assert verify_password(
        "password",
        "ENC(1024:973A466A489ABFDED3D4B3D181DC77F410F2FC6E87432809A46B72B294147D76:C999ECA8A85387E1FFB14E4FE5CECD17948BA80BA04318A9BE4C3E34B7FE2925F43AB6BC9DFE0D9855DA67439AEEB9850351BC4D5D3AEC6A6903C42B8EB4ED1E)",
    )
    assert verify_password(
        "manager",
        "ENC(1024:48018CDB1B5925DA2CC51DBD6F7E8C5FF156C22C03C6C69720C56F8BE76A1D48:0A0F68C2C01F46D347C6C51D641291A4608EDA50A873ED122909D9134B7A757C14176F0C033F0BD3CE35B3C373D5B652650CDE5FFBBB0F286D4495CEFEEDB166)",
    )
    assert not verify_password("x", "ENC(notahash)")


def test_users_roles_round_trip(tmp_path):
    users, roles = tmp_path / "artemis-users.properties", tmp_path / "artemis-roles.properties"
    add_user(users, roles, "alice", "pw1", ["amq", "ops"])
    add_user(users, roles, "bob", "pw2", ["ops"])
    add_user(users, roles, "carol", "plain", [], plaintext=True)
    with pytest.raises(ValueError):
        add_user(users, roles, "bob", "again", [])
    store = UserStore.load(users, roles)
    assert (
        store.authenticate("alice", "pw1")
        and store.authenticate("bob", "pw2")
        and store.authenticate("carol", "plain")
    )
    assert not store.authenticate("alice", "pw2")
    assert (
        store.roles_of("alice") == {"amq", "ops"}
        and store.roles_of("bob") == {"ops"}
        and store.roles_of("carol") == frozenset()
    )
    assert dict(list_users(users, roles)) == {
        "alice": {"amq", "ops"},
        "bob": {"ops"},
        "carol": frozenset(),
    }
    props = dict((k, v) for k, v, _ in parse_properties(users.read_text()))
    assert ENC_RE.match(props["alice"]) and props["carol"] == "plain"
    assert dict((k, v) for k, v, _ in parse_properties(roles.read_text())) == {
        "amq": "alice",
        "ops": "alice,bob",
    }
    set_password(users, "bob", "new")
    assert UserStore.load(users, roles).authenticate("bob", "new")
    remove_user(users, roles, "alice")
    assert list_users(users, roles) == [("bob", {"ops"}), ("carol", frozenset())]
    assert "amq" not in roles.read_text()  # emptied role removed
    with pytest.raises(KeyError):
        remove_user(users, roles, "alice")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert oct(users.stat().st_mode & 0o777) == oct(0o600)


def test_plain_text_passwords_accepted(tmp_path):
    users = write(tmp_path, "# plain\nguest=guest\nsystem : manager\n", "u.properties")
    store = UserStore.load(users, tmp_path / "missing-roles.properties")
    assert store.authenticate("guest", "guest") and store.authenticate("system", "manager")
    assert not store.authenticate("guest", "")


def test_comments_preserved_on_rewrite(tmp_path):
    original = (
        "## header comment\n! bang comment\n\nadmin = ENC(1024:00:00)\n# about bob\nbob=secret\n"
    )
    users = tmp_path / "users.properties"
    users.write_text(original)
    roles = write(tmp_path, "# roles\nadmins = admin\nusers = admin, bob\n", "roles.properties")
    add_user(users, roles, "carol", "pw", ["users"])
    text = users.read_text()
    assert text.startswith(original)
    assert text.count("\n") == original.count("\n") + 1
    assert roles.read_text().startswith("# roles\nadmins = admin\n")
    assert "users = admin,bob,carol" in roles.read_text()
    set_password(users, "bob", "x", plaintext=True)
    assert users.read_text().splitlines()[4:6] == ["# about bob", "bob = x"]
    remove_user(users, roles, "bob")
    assert "# about bob" in users.read_text() and "bob =" not in users.read_text()


def test_java_properties_syntax():
    text = (
        "  # indented comment\n"
        "key\\ with\\ spaces = value with \\\n"
        "     continuation\n"
        "colon:value\n"
        "blank value\n"
        "uni=caf\\u00e9 \\u00e9\n"
        "tabs\\tkey=\\ leading\n"
        "esc\\=aped = a\\=b\\:c\n"
        "empty=\n"
        "! not a comment continuation \\\n"
        "after=1\n"
        "last=end\\"
    )
    props = {k: v for k, v, _ in parse_properties(text)}
    assert props == {
        "key with spaces": "value with continuation",
        "colon": "value",
        "blank": "value",
        "uni": "café é",
        "tabs\tkey": " leading",
        "esc=aped": "a=b:c",
        "empty": "",
        "after": "1",
        "last": "end",
    }
    assert [ln for _, _, ln in parse_properties(text)] == [2, 4, 5, 6, 7, 8, 9, 11, 12]


@settings(deadline=None, max_examples=60)
@given(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(
        lambda s: s == s.strip() and "," not in s
    ),
    st.text(st.characters(blacklist_categories=("Cs",))),
)
def test_properties_escape_round_trip(user, password):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        users, roles = os.path.join(d, "u"), os.path.join(d, "r")
        add_user(users, roles, user, password, ["r1"], plaintext=True)
        props = {k: v for k, v, _ in parse_properties(open(users, encoding="latin-1").read())}
        assert props == {user: password}
        store = UserStore.load(users, roles)
        assert store.authenticate(user, password)
        assert store.roles_of(user) == {"r1"}


def test_roles_regexp(tmp_path):
    users = write(tmp_path, "svc-a=x\nsvc-b=y\nother=z\n", "u")
    roles = write(tmp_path, "services=/svc-.*/\nall = other\n", "r")
    store = UserStore.load(users, roles)
    assert store.roles_of("svc-a") == {"services"} and store.roles_of("other") == {"all"}


def test_malformed_hash_reported_with_line(tmp_path):
    users = write(tmp_path, "# c\nok=x\nbad=ENC(12:zz:00)\n", "u")
    with pytest.raises(PropertiesError) as info:
        UserStore.load(users, tmp_path / "r")
    assert (info.value.line, "'bad'" in str(info.value)) == (3, True)


def test_load_user_store(tmp_path):
    from junction.config.loader import load_user_store

    write(tmp_path, "admin=admin\n", "artemis-users.properties")
    write(tmp_path, "amq=admin\n", "artemis-roles.properties")
    cfg = load_config(write(tmp_path, core("<name>n</name>")), env={})
    assert load_user_store(cfg).roles_of("admin") == {"amq"}
    cfg = load_config(
        write(tmp_path, core('<junction><security anonymous-user="guest"/></junction>')), env={}
    )
    with pytest.raises(ConfigErrors, match="anonymous-user 'guest' is not a user"):
        load_user_store(cfg)
    cfg = load_config(
        write(tmp_path, core('<junction><security users-file="nope"/></junction>')), env={}
    )
    with pytest.raises(ConfigErrors, match="cannot read the users file"):
        load_user_store(cfg)


# ---------------------------------------------------------------------------
# Connection routers


ROUTER_EXAMPLE = core(
    """
    <connectors>
       <connector name="server1">tcp://10.0.0.1:61616</connector>
       <connector name="server2">tcp://10.0.0.2:61616</connector>
    </connectors>
    <acceptors>
       <acceptor name="gw">tcp://127.0.0.1:61700?router=simple-router;protocols=AMQP</acceptor>
    </acceptors>
    <connection-routers>
       <connection-router name="simple-router">
          <key-type>CLIENT_ID</key-type>
          <key-filter>^.{3}</key-filter>
          <local-target-filter>NULL|0</local-target-filter>
          <policy name="CONSISTENT_HASH_MODULO">
             <property key="MODULO" value="2"/>
          </policy>
          <cache>
             <persisted>true</persisted>
             <timeout>60000</timeout>
          </cache>
          <pool>
             <username>guest</username>
             <password>${POOL_PASSWORD}</password>
             <check-period>1000</check-period>
             <quorum-size>2</quorum-size>
             <quorum-timeout>1000</quorum-timeout>
             <local-target-enabled>true</local-target-enabled>
             <static-connectors>
                <connector-ref>server1</connector-ref>
                <connector-ref>server2</connector-ref>
             </static-connectors>
          </pool>
       </connection-router>
       <connection-router name="defaults">
          <pool>
             <static-connectors><connector-ref>server2</connector-ref></static-connectors>
          </pool>
          <policy name="CONSISTENT_HASH"><property key="HASH" value="fnv1a"/></policy>
          <cache/>
       </connection-router>
       <connection-router name="local-only"/>
    </connection-routers>
    """
)


def test_connection_routers_round_trip_with_defaults():
    cfg = parse_config(ROUTER_EXAMPLE, file="b.xml", env={"POOL_PASSWORD": "s3cret"})
    simple, defaults, local_only = cfg.connection_routers
    assert simple == model.ConnectionRouterConfig(
        name="simple-router",
        key_type="CLIENT_ID",
        key_filter="^.{3}",
        local_target_filter="NULL|0",
        policy=model.PolicyConfig("CONSISTENT_HASH_MODULO", (("MODULO", "2"),), ("b.xml", 15)),
        cache=model.CacheConfig(persisted=True, timeout=60000, source=("b.xml", 18)),
        pool=model.PoolConfig(
            username="guest",
            password="s3cret",
            check_period=1000,
            quorum_size=2,
            quorum_timeout=1000,
            local_target_enabled=True,
            static_connectors=("server1", "server2"),
            source=("b.xml", 22),
        ),
        source=("b.xml", 11),
    )
    assert defaults == model.ConnectionRouterConfig(
        name="defaults",
        key_type="SOURCE_IP",
        policy=model.PolicyConfig("CONSISTENT_HASH", (("HASH", "FNV1A"),), ("b.xml", 39)),
        cache=model.CacheConfig(persisted=False, timeout=0, source=("b.xml", 40)),
        pool=model.PoolConfig(
            check_period=5000,
            quorum_size=1,
            quorum_timeout=3000,
            local_target_enabled=False,
            static_connectors=("server2",),
            source=("b.xml", 36),
        ),
        source=("b.xml", 35),
    )
    # a router with no pool and no policy deploys in Artemis: local or refused
    assert local_only == model.ConnectionRouterConfig("local-only", source=("b.xml", 42))
    assert (local_only.policy, local_only.pool, local_only.cache) == (None, None, None)
    (gw,) = cfg.acceptors
    assert gw.router == "simple-router"
    assert defaults.policy.get("HASH") == "FNV1A"
    assert simple.policy.get("HASH", model.DEFAULT_HASH) == "MURMUR3"
    assert "s3cret" not in repr(cfg)


def test_router_model_defaults():
    assert model.BrokerConfig().connection_routers == ()
    pool = model.PoolConfig()
    assert (pool.check_period, pool.quorum_size, pool.quorum_timeout) == (5000, 1, 3000)
    assert (pool.username, pool.password, pool.local_target_enabled) == (None, None, False)
    assert (pool.static_connectors, pool.discovery_group, pool.cluster_connection) == (
        (),
        None,
        None,
    )
    assert (model.CacheConfig().persisted, model.CacheConfig().timeout) == (False, 0)
    router = model.ConnectionRouterConfig("r")
    assert (router.key_type, router.key_filter, router.local_target_filter) == (
        "SOURCE_IP",
        None,
        None,
    )
    assert model.DEFAULT_HASH == "MURMUR3"


def test_router_tables_cover_the_model():
    from junction.config.schema import CACHE_ELEMENTS, POOL_ELEMENTS, ROUTER_ELEMENTS

    def reachable(table):
        return {s.attr for s in table.values() if isinstance(s, Value)}

    assert reachable(ROUTER_ELEMENTS) | {"policy", "cache", "pool"} == set(
        model.ConnectionRouterConfig.__dataclass_fields__
    ) - {"name", "source"}
    assert reachable(CACHE_ELEMENTS) == set(model.CacheConfig.__dataclass_fields__) - {"source"}
    assert reachable(POOL_ELEMENTS) | {
        "static_connectors",
        "discovery_group",
        "cluster_connection",
    } == set(model.PoolConfig.__dataclass_fields__) - {"source"}


#: Two connectors on line 3; <connection-router name="r"> on line 5; the
#: router's body starts on line 6.
_CONNECTORS = (
    '<connectors><connector name="server1">tcp://10.0.0.1:61616</connector>'
    '<connector name="server2">tcp://10.0.0.2:61616</connector></connectors>'
)
_POOL = "<pool><static-connectors><connector-ref>server1</connector-ref></static-connectors></pool>"


def router_doc(inner: str) -> str:
    return core(
        _CONNECTORS
        + '\n<connection-routers>\n<connection-router name="r">\n'
        + textwrap.dedent(inner).strip("\n")
        + "\n</connection-router>\n</connection-routers>"
    )


def router_errors(inner: str) -> list[tuple[int, str]]:
    return [(e.line, e.message) for e in errors_of(router_doc(inner))]


def test_router_doc_helper_lines():
    cfg = parse_config(router_doc("<key-type>USER_NAME</key-type>\n" + _POOL), file="b.xml", env={})
    (r,) = cfg.connection_routers
    assert (r.source, r.key_type, r.pool.source) == (("b.xml", 5), "USER_NAME", ("b.xml", 7))


_ONLY = "(it takes none)"


@pytest.mark.parametrize(
    "inner, expected",
    [
        (
            "<key-type>CLIENTID</key-type>",
            [
                (
                    6,
                    "<key-type>: expected one of CLIENT_ID, SNI_HOST, SOURCE_IP, USER_NAME,"
                    " ROLE_NAME, got 'CLIENTID'; did you mean 'CLIENT_ID'?",
                )
            ],
        ),
        (
            "<key-filter>(a</key-filter>",
            [
                (
                    6,
                    "<key-filter>: not a valid regular expression: missing ), unterminated"
                    " subpattern at position 0",
                )
            ],
        ),
        (
            r"<key-filter>\p{Lu}+</key-filter>",
            [
                (
                    6,
                    r"<key-filter>: not a valid regular expression: bad escape \p at position 0;"
                    r" \p{...}/\P{...} character classes are Java regex syntax that Python's re"
                    r" does not have; spell the class out, e.g. [A-Za-z] for \p{Alpha}",
                )
            ],
        ),
        (
            "<local-target-filter>(?&lt;shard&gt;[0-9])</local-target-filter>",
            [
                (
                    6,
                    "<local-target-filter>: not a valid regular expression: unknown extension"
                    " ?<s at position 1; (?<name>...) named groups are Java regex syntax;"
                    " Python writes (?P<name>...)",
                )
            ],
        ),
        (
            "<local-target-filter>[a-z&amp;&amp;[^b]]</local-target-filter>",
            [
                (
                    6,
                    "<local-target-filter>: this regular expression uses && at position 4 (a class"
                    " intersection in Java), which Python's re reads as literal characters;"
                    " write the character class out in full",
                )
            ],
        ),
        (
            '<policy name="ROUND_ROBBIN"/>',
            [
                (
                    6,
                    "unknown policy 'ROUND_ROBBIN' in connection router 'r'; did you mean 'ROUND_ROBIN'?",
                )
            ],
        ),
        (
            '<policy name="round_robin"/>',
            [
                (
                    6,
                    "unknown policy 'round_robin' in connection router 'r'; did you mean 'ROUND_ROBIN'?",
                )
            ],
        ),
        (
            '<policy name="RANDOM"/>',
            [
                (
                    6,
                    "unknown policy 'RANDOM' in connection router 'r'; expected one of FIRST_ELEMENT,"
                    " ROUND_ROBIN, CONSISTENT_HASH, LEAST_CONNECTIONS, CONSISTENT_HASH_MODULO, or a"
                    " policy registered in the Python entry-point group junction.policies",
                )
            ],
        ),
        (
            "<policy/>",
            [
                (
                    6,
                    "<policy> needs a name attribute: one of FIRST_ELEMENT, ROUND_ROBIN,"
                    " CONSISTENT_HASH, LEAST_CONNECTIONS, CONSISTENT_HASH_MODULO, or a policy"
                    " registered in the entry-point group junction.policies",
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH_MODULO"/>',
            [
                (
                    6,
                    "policy CONSISTENT_HASH_MODULO of connection router 'r' needs"
                    ' <property key="MODULO" value="..."/> (Artemis fails to deploy it without one)',
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH_MODULO">\n<property key="MODULO" value="two"/>\n</policy>',
            [
                (
                    7,
                    "policy CONSISTENT_HASH_MODULO property MODULO: expected a whole number, got 'two'",
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH_MODULO">\n<property key="MODULO" value="0"/>\n</policy>',
            [(7, "policy CONSISTENT_HASH_MODULO property MODULO: must be greater than 0, got '0'")],
        ),
        (
            '<policy name="CONSISTENT_HASH_MODULO">\n<property key="modulo" value="2"/>\n</policy>',
            [
                (
                    6,
                    "policy CONSISTENT_HASH_MODULO of connection router 'r' needs"
                    ' <property key="MODULO" value="..."/> (Artemis fails to deploy it without one)',
                ),
                (
                    7,
                    "policy CONSISTENT_HASH_MODULO of connection router 'r' has no property"
                    " 'modulo'; did you mean 'MODULO'?",
                ),
            ],
        ),
        (
            '<policy name="LEAST_CONNECTIONS">\n'
            '<property key="CONNECTION_COUNT_THRESHOLD" value="-1"/>\n</policy>',
            [
                (
                    7,
                    "policy LEAST_CONNECTIONS property CONNECTION_COUNT_THRESHOLD: must be at"
                    " least 0, got '-1'",
                )
            ],
        ),
        (
            '<policy name="LEAST_CONNECTIONS">\n'
            '<property key="CONNECTION_COUNT_TRESHOLD" value="30"/>\n</policy>',
            [
                (
                    7,
                    "policy LEAST_CONNECTIONS of connection router 'r' has no property"
                    " 'CONNECTION_COUNT_TRESHOLD'; did you mean 'CONNECTION_COUNT_THRESHOLD'?",
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH">\n<property key="HASH" value="SHA1"/>\n</policy>',
            [
                (
                    7,
                    "policy CONSISTENT_HASH property HASH: expected one of MURMUR3, FNV1A, got 'SHA1'",
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH">\n<property key="MODULO" value="2"/>\n</policy>',
            [
                (
                    7,
                    "policy CONSISTENT_HASH of connection router 'r' has no property 'MODULO'"
                    " (it takes HASH)",
                )
            ],
        ),
        (
            '<policy name="ROUND_ROBIN">\n<property key="WEIGHT" value="2"/>\n</policy>',
            [
                (
                    7,
                    f"policy ROUND_ROBIN of connection router 'r' has no property 'WEIGHT' {_ONLY}",
                )
            ],
        ),
        (
            '<policy name="CONSISTENT_HASH">\n<property key="HASH" value="FNV1A"/>\n'
            '<property key="HASH" value="MURMUR3"/>\n</policy>',
            [(8, "property 'HASH' is given twice in policy CONSISTENT_HASH (first at line 7)")],
        ),
        (
            '<policy name="CONSISTENT_HASH">\n<property key="HASH"/>\n<param/>\n</policy>',
            [
                (7, '<property key="HASH"> needs a value attribute'),
                (8, "unknown element <param> in <policy>; expected <property>"),
            ],
        ),
        (
            "<pool>\n<local-target-enabled>true</local-target-enabled>\n</pool>",
            [
                (
                    6,
                    "pool of connection router 'r' has no targets: give <static-connectors>,"
                    ' <discovery-group-ref> or <cluster-connection> (Artemis: "Pool configuration'
                    ' not valid")',
                )
            ],
        ),
        (
            "<pool/>",
            [
                (
                    6,
                    "pool of connection router 'r' has no targets: give <static-connectors>,"
                    ' <discovery-group-ref> or <cluster-connection> (Artemis: "Pool configuration'
                    ' not valid")',
                )
            ],
        ),
        (
            "<pool>\n<cluster-connection>cc</cluster-connection>\n</pool>",
            [
                (
                    7,
                    "the pool of connection router 'r' names cluster connection 'cc', but no"
                    " <cluster-connections> defines it",
                )
            ],
        ),
        (
            '<pool>\n<discovery-group-ref discovery-group-name="dg1"/>\n</pool>',
            [
                (
                    7,
                    "the pool of connection router 'r' names discovery group 'dg1', but no"
                    " <discovery-groups> defines it",
                )
            ],
        ),
        (
            "<pool>\n<static-connectors><connector-ref>server1</connector-ref></static-connectors>\n"
            "<cluster-connection>cc</cluster-connection>\n</pool>",
            [
                (
                    6,
                    "pool of connection router 'r' gives <cluster-connection> and"
                    " <static-connectors>: give exactly one source of targets (Artemis would use"
                    " <cluster-connection> and ignore the rest)",
                ),
                (
                    8,
                    "the pool of connection router 'r' names cluster connection 'cc', but no"
                    " <cluster-connections> defines it",
                ),
            ],
        ),
        (
            "<pool>\n<static-connectors>\n<connector-ref>server3</connector-ref>\n"
            "<connector-ref>nowhere</connector-ref>\n</static-connectors>\n</pool>",
            [
                (
                    8,
                    "pool of connection router 'r' names connector 'server3', but no <connectors>"
                    " defines it; did you mean 'server1' or 'server2'?",
                ),
                (
                    9,
                    "pool of connection router 'r' names connector 'nowhere', but no <connectors>"
                    " defines it",
                ),
            ],
        ),
        (
            "<pool>\n<static-connectors>\n<connector-ref>server1</connector-ref>\n"
            "<connector-ref>server1</connector-ref>\n</static-connectors>\n</pool>",
            [(9, "connector 'server1' is listed twice in <static-connectors> (first at line 8)")],
        ),
        (
            "<pool>\n<static-connectors/>\n</pool>",
            [
                (
                    7,
                    "<static-connectors> names no connectors; add a"
                    " <connector-ref>name</connector-ref> for each target",
                )
            ],
        ),
        (
            "<pool>\n<check-period>0</check-period>\n<quorum-size>0</quorum-size>\n"
            "<quorum-timeout>-1</quorum-timeout>\n"
            "<static-connectors><connector-ref>server1</connector-ref></static-connectors>\n</pool>",
            [
                (7, "<check-period>: must be greater than 0, got '0'"),
                (8, "<quorum-size>: must be greater than 0, got '0'"),
                (9, "<quorum-timeout>: must be at least 0, got '-1'"),
            ],
        ),
        (
            "<pool>\n<check-period>5s</check-period>\n<local-target-enabled>yes</local-target-enabled>\n"
            "<static-connectors><connector-ref>server1</connector-ref></static-connectors>\n</pool>",
            [
                (7, "<check-period>: expected a whole number, got '5s'"),
                (8, "<local-target-enabled>: expected true or false, got 'yes'"),
            ],
        ),
        (
            "<pool>\n<password>ENC(-3fa0b3c7e1)</password>\n"
            "<static-connectors><connector-ref>server1</connector-ref></static-connectors>\n</pool>",
            [
                (
                    7,
                    "<password>: masked passwords (ENC(...)) are not supported by Junction yet"
                    " (Artemis decodes them with its password codec); write the password in clear"
                    " text or take it from the environment with ${VAR}",
                )
            ],
        ),
        (
            "<cache>\n<timeout>-1</timeout>\n<ttl>5</ttl>\n</cache>",
            [
                (7, "<timeout>: must be at least 0, got '-1'"),
                (8, "unknown element <ttl> in <cache>; expected <persisted> or <timeout>"),
            ],
        ),
        (
            "<key-typ>CLIENT_ID</key-typ>",
            [(6, "unknown element <key-typ> in <connection-router>; did you mean <key-type>?")],
        ),
        (
            '<key-transformer name="x"/>',
            [
                (
                    6,
                    "<key-transformer> is not supported by Junction yet (Artemis ignores it too: it"
                    " is in artemis-configuration.xsd, but no Artemis version reads it; keys are"
                    " transformed by the policy, e.g. CONSISTENT_HASH_MODULO)",
                )
            ],
        ),
        (
            '<policy name="FIRST_ELEMENT"/>\n<policy name="ROUND_ROBIN"/>',
            [(7, "<policy> is given twice in <connection-router> (first at line 6)")],
        ),
    ],
)
def test_connection_router_errors(inner, expected):
    assert router_errors(inner) == expected


def test_connection_router_names():
    errs = errors_of(
        core(
            """
            <connection-routers>
               <connection-router name="a"/>
               <connection-router name="a"><key-type>SNI_HOST</key-type></connection-router>
               <connection-router/>
               <connection-router name="b" id="x"/>
               <router name="c"/>
            </connection-routers>
            """
        )
    )
    assert [(e.line, e.message) for e in errs] == [
        (5, "a second connection router named 'a' (the first is at line 4)"),
        (6, "<connection-router> needs a name attribute (an acceptor uses it with router=)"),
        (7, "<connection-router> has no attribute 'id'"),
        (8, "unknown element <router> in <connection-routers>; expected <connection-router>"),
    ]


def test_connection_router_errors_all_at_once():
    errs = errors_of(
        core(
            """
            <acceptors>
               <acceptor name="gw">tcp://127.0.0.1:61700?router=simple-routr</acceptor>
            </acceptors>
            <connection-routers>
               <connection-router name="simple-router">
                  <key-type>CLIENTID</key-type>
                  <key-filter>(a</key-filter>
                  <policy name="ROUND_ROBBIN"/>
                  <cache><timeout>-5</timeout></cache>
                  <pool>
                     <quorum-size>0</quorum-size>
                     <static-connectors><connector-ref>server9</connector-ref></static-connectors>
                  </pool>
               </connection-router>
            </connection-routers>
            """
        )
    )
    assert [e.line for e in errs] == [4, 8, 9, 10, 11, 13, 14]
    assert all(e.file == "b.xml" for e in errs)
    msgs = messages(errs)
    assert msgs[0] == (
        "acceptor 'gw' names router 'simple-routr', but no <connection-routers> defines it;"
        " did you mean 'simple-router'?"
    )
    assert msgs[-1] == (
        "pool of connection router 'simple-router' names connector 'server9', but no"
        " <connectors> defines it"
    )


def test_acceptor_router_must_name_a_defined_router():
    # the router may be defined after the acceptor that names it
    text = core(
        """
        <acceptors>
           <acceptor name="gw">tcp://127.0.0.1:61700?router=shard</acceptor>
           <acceptor name="other">tcp://127.0.0.1:61701?router=nope</acceptor>
        </acceptors>
        <connection-routers>
           <connection-router name="shard">
              <key-type>CLIENT_ID</key-type>
              <local-target-filter>NULL|0</local-target-filter>
              <policy name="CONSISTENT_HASH_MODULO"><property key="MODULO" value="2"/></policy>
           </connection-router>
        </connection-routers>
        """
    )
    errs = errors_of(text)
    assert [(e.line, e.message) for e in errs] == [
        (5, "acceptor 'other' names router 'nope', but no <connection-routers> defines it"),
    ]
    cfg = parse_config(text.replace(";router=nope", "").replace("?router=nope", ""), env={})
    gw, other = cfg.acceptors
    assert (gw.router, other.router) == ("shard", None)
    assert [r.name for r in cfg.connection_routers] == ["shard"]


def test_plugin_policies_from_entry_points(monkeypatch):
    from importlib import metadata

    import junction.config.schema as loader

    eps = metadata.EntryPoints(
        [metadata.EntryPoint("STICKY_TENANT", "mypkg.policies:Sticky", "junction.policies")]
    )

    def entry_points(**params):
        assert params == {"group": "junction.policies"}
        return eps

    monkeypatch.setattr(loader.metadata, "entry_points", entry_points)
    assert loader.registered_policies() == ("STICKY_TENANT",)
    cfg = parse_config(
        router_doc(
            '<policy name="STICKY_TENANT"><property key="Anything" value=" as given"/></policy>'
        ),
        env={},
    )
    (r,) = cfg.connection_routers
    # a plug-in's properties are its own business: kept as strings, unchecked
    assert r.policy == model.PolicyConfig(
        "STICKY_TENANT", (("Anything", " as given"),), ("<string>", 6)
    )
    assert router_errors('<policy name="STICKY_TENANTS"/>') == [
        (
            6,
            "unknown policy 'STICKY_TENANTS' in connection router 'r'; did you mean 'STICKY_TENANT'?",
        )
    ]


def test_connection_routers_warned_at_startup():
    from junction.node import unimplemented_settings

    cfg = parse_config(ROUTER_EXAMPLE, file="b.xml", env={"POOL_PASSWORD": "x"})
    warnings = [w for w in unimplemented_settings(cfg) if "connection router" in w]
    # every client protocol protocols= accepts (AMQP, CORE, OPENWIRE, STOMP) is routed
    assert warnings == []


def test_security_cache_settings_are_read_as_artemis_names_them():
    cfg = parse_config(
        core(
            "<security-invalidation-interval>2500</security-invalidation-interval>"
            "<authentication-cache-size>50</authentication-cache-size>"
            "<authorization-cache-size>0</authorization-cache-size>"
        ),
        env={},
    )
    assert (cfg.security_invalidation_interval, cfg.authentication_cache_size, cfg.authorization_cache_size) == (
        2500,
        50,
        0,
    )
    defaults = parse_config(core(""), env={})
    assert (defaults.security_invalidation_interval, defaults.authentication_cache_size) == (10_000, 1000)
    with pytest.raises(ConfigErrors, match="authentication-cache-size"):
        parse_config(core("<authentication-cache-size>-5</authentication-cache-size>"), env={})


def test_junction_events_section():
    assert parse_config(core("<name>n</name>"), env={}).events is None
    cfg = parse_config(core("<junction><events/></junction>"), env={})
    assert cfg.events == model.EventsConfig()
    assert cfg.events.categories == ("connection", "message", "topology")
    cfg = parse_config(
        core(
            '<junction><events directory="/var/log/j" message="false" message-sample-rate="0.25"'
            ' max-file-size="1MiB" max-file-age="60000" max-files="7" max-spool-size="2GiB"/></junction>'
        ),
        env={},
    )
    assert cfg.events == model.EventsConfig("/var/log/j", True, False, True, 0.25, 1024 * 1024, 60_000, 7, 2 << 30)
    assert cfg.events.categories == ("connection", "topology")


def test_junction_events_errors_all_at_once():
    errs = errors_of(
        core(
            '<junction><events message-sample-rate="2" max-files="0" max-file-size="1" topology="yes"'
            ' colour="red" max-spool-size="1KiB"/></junction>'
        )
    )
    text = "\n".join(e.message for e in errs)
    assert len(errs) == 6, text
    for expected in ("message-sample-rate", "max-files", "max-file-size", "max-spool-size", "<events topology>: expected true or false", "no attribute 'colour'"):
        assert expected in text
