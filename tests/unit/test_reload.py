"""Reloading at run time: the users files at each login, broker.xml every refresh period.

Files are real (in ``tmp_path``); time is a Clock for the refresh timer and an
injected wall clock for the "racily clean" rule of :mod:`junction.config.filewatch`.
The broker core is a real :class:`BrokerServer` on the Clock.
"""

from __future__ import annotations

import logging
import os
import time

import pytest
from twisted.internet.task import Clock

from junction.brokercore.config_reload import ConfigReloader, restart_needed
from junction.brokercore.security import SecurityManager
from junction.brokercore.server import BrokerServer
from junction.cli.status_table import format_status
from junction.config import properties
from junction.config.filewatch import RACY_WINDOW_NS, FileWatch
from junction.config.loader import load_config
from junction.config.reloading import ReloadingFiles, watch_user_store
from junction.model.message import RoutingType

HOUR_NS = 3600 * 10**9


def age(path, seconds: float = 3600) -> None:
    """Make ``path`` look written ``seconds`` ago (not racy)."""
    t = time.time() - seconds
    os.utime(path, (t, t))


# -- FileWatch ---------------------------------------------------------------------------------


def test_a_watch_sees_a_rewrite_a_rename_over_and_a_removal_but_not_a_read(tmp_path):
    f = tmp_path / "users"
    f.write_text("a = 1\n")
    age(f)
    watch = FileWatch([str(f)])
    assert watch.changed()  # never read yet
    watch.read(watch.stamps())
    assert not watch.changed()
    f.read_text()
    assert not watch.changed()
    f.write_text("a = 22\n")  # in place, another size
    age(f)
    assert watch.changed()
    watch.read(watch.stamps())
    # same size, same modification time, but a new file renamed over it
    new = tmp_path / "users.new"
    new.write_text("a = 33\n")
    os.utime(new, ns=(os.stat(f).st_mtime_ns,) * 2)
    os.replace(new, f)
    assert watch.changed()
    watch.read(watch.stamps())
    f.unlink()
    assert watch.changed()
    watch.read(watch.stamps())
    assert not watch.changed()  # still missing: no change
    f.write_text("a = 1\n")
    assert watch.changed()  # appeared


def test_a_racy_stamp_counts_as_changed_until_it_is_old_enough(tmp_path):
    f = tmp_path / "users"
    f.write_text("a = 1\n")
    mtime = os.stat(f).st_mtime_ns
    now = [mtime + 1000]
    watch = FileWatch([str(f)], wall_ns=lambda: now[0])
    watch.read(watch.stamps())
    # an in-place write of the same size within the same timestamp tick changes nothing stat sees
    assert watch.changed()
    now[0] = mtime + RACY_WINDOW_NS + 1
    watch.read(watch.stamps())
    assert not watch.changed()


# -- the users files -----------------------------------------------------------------------------


class Config:
    """The two fields watch_user_store and load_user_store read."""

    def __init__(self, folder):
        self.users_file = str(folder / "artemis-users.properties")
        self.roles_file = str(folder / "artemis-roles.properties")
        self.anonymous_user = None
        self.config_path = str(folder / "broker.xml")


@pytest.fixture
def files(tmp_path):
    config = Config(tmp_path)
    properties.add_user(config.users_file, config.roles_file, "admin", "admin", ["amq"], plaintext=True)
    age(config.users_file)
    age(config.roles_file)
    return config


def test_users_are_read_again_only_when_the_files_change(files, monkeypatch):
    loads = []
    real = properties.UserStore.load

    def counting(*args):
        loads.append(args)
        return real(*args)

    monkeypatch.setattr(properties.UserStore, "load", counting)
    store = watch_user_store(files)
    assert len(loads) == 1
    for _ in range(100):
        assert store.refresh() is False
    assert len(loads) == 1, "unchanged files are not read again"
    properties.add_user(files.users_file, files.roles_file, "bob", "b0b", ["amq"])
    assert store.refresh() is True
    assert store.authenticate("bob", "b0b") and store.roles_of("bob") == {"amq"}
    assert store.status()["users"] == 2 and store.status()["reloads"] == 1


def test_a_half_written_users_file_keeps_the_users_loaded_before(files, caplog):
    store = watch_user_store(files)
    good = open(files.users_file).read()
    properties.add_user(files.users_file, files.roles_file, "bob", "b0b", ["amq"])
    whole = open(files.users_file).read()
    open(files.users_file, "w").write(good)
    store.refresh()
    caplog.set_level(logging.ERROR, logger="junction.reload")
    # caught in the middle of bob's hash: the ENC( is not closed
    cut = whole[: whole.index("bob = ENC(") + 30]
    with open(files.users_file, "w") as fh:
        fh.write(cut)
    for _ in range(3):
        assert store.refresh() is False
    assert store.authenticate("admin", "admin") and not store.authenticate("bob", "b0b")
    [error] = store.error
    line = cut.count("\n") + 1
    assert error.startswith(f"{files.users_file}:{line}: user 'bob': ENC(")
    logged = [r.getMessage() for r in caplog.records]
    assert sum("cannot be used; keeping 1 user from" in m for m in logged) == 1, logged  # said once
    # the writer finishes: bob can log in, the error is gone
    with open(files.users_file, "w") as fh:
        fh.write(whole)
    assert store.refresh() is True
    assert store.authenticate("bob", "b0b") and store.error is None


@pytest.mark.parametrize("damage", ["missing", "empty", "anonymous"])
def test_a_missing_or_empty_users_file_or_a_lost_anonymous_user_keeps_the_users(files, damage):
    files.anonymous_user = "admin"
    store = watch_user_store(files)
    if damage == "missing":
        os.unlink(files.users_file)
    elif damage == "empty":
        open(files.users_file, "w").close()
    else:
        properties.add_user(files.users_file, files.roles_file, "bob", "b0b")
        properties.remove_user(files.users_file, files.roles_file, "admin")
    assert store.refresh() is False
    assert store.authenticate("admin", "admin")
    assert store.error and store.status()["failures"] == 1


def test_a_cached_login_is_forgotten_when_the_user_is_removed(files):
    clock = Clock()
    store = watch_user_store(files)
    properties.add_user(files.users_file, files.roles_file, "bob", "b0b", ["amq"])
    security = SecurityManager(store, (), clock=clock)
    assert security.authenticate("bob", "b0b").roles == {"amq"}
    assert security.authenticate("bob", "b0b") is not None  # from the authentication cache now
    properties.remove_user(files.users_file, files.roles_file, "bob")
    assert security.authenticate("bob", "b0b") is None
    assert security.authenticate("admin", "admin") is not None


def test_a_reload_that_reads_the_same_users_changes_nothing(files):
    calls = []

    def load():
        calls.append(1)
        return properties.UserStore.load(files.users_file, files.roles_file)

    store = ReloadingFiles("users", [files.users_file, files.roles_file], load)
    before = store.current
    with open(files.users_file, "a") as fh:
        fh.write("# a comment\n")
    assert store.refresh() is False and store.current is before and len(calls) == 2


# -- broker.xml --------------------------------------------------------------------------------------

XML = """<configuration xmlns="urn:activemq">
<core xmlns="urn:activemq:core">
  <persistence-enabled>false</persistence-enabled>
  <configuration-file-refresh-period>200</configuration-file-refresh-period>
  <acceptors><acceptor name="a">tcp://127.0.0.1:61699</acceptor></acceptors>
  <security-settings>
    <security-setting match="#"><permission type="send" roles="amq"/></security-setting>
    {security}
  </security-settings>
  <address-settings>
    <address-setting match="#">{settings}</address-setting>
    {more_settings}
  </address-settings>
  <addresses>
    <address name="kept"><anycast><queue name="kept"/></anycast></address>
    {addresses}
  </addresses>
</core>
</configuration>
"""


def write(path, **parts):
    values = {"security": "", "settings": "", "more_settings": "", "addresses": ""} | parts
    path.write_text(XML.format(**values))
    age(path)  # as a file written a while ago (the racy rule is tested above)


@pytest.fixture
def node(tmp_path, files):
    """A broker core on a Clock, its security manager, and a reloader for its broker.xml."""
    path = tmp_path / "broker.xml"
    write(path)
    config = load_config(path)
    clock = Clock()
    security = SecurityManager(watch_user_store(files), config.security_settings, clock=clock)
    server = BrokerServer(config, reactor=clock, security=security)
    server.start()
    applied = []
    reloader = ConfigReloader(config, server, reactor=clock, on_applied=applied.append)
    reloader.start()
    node = type("N", (), {})()
    node.path, node.clock, node.server, node.security, node.reloader, node.applied = (
        path, clock, server, security, reloader, applied,
    )
    node.tick = lambda: clock.advance(0.2)
    yield node
    reloader.stop()
    server.stop()


def test_the_first_check_finds_the_file_the_node_started_with_and_comments_are_no_change(node, caplog):
    caplog.set_level(logging.INFO, logger="junction.reload")
    node.tick()
    assert node.reloader.checks == 1 and node.reloader.last is None and node.applied == []
    node.path.write_text("<!-- a comment -->\n\n" + node.path.read_text())
    node.tick()
    assert node.reloader.last is None and node.applied == [] and caplog.records == []


def test_an_edit_applies_address_settings_security_settings_and_addresses_within_a_period(node, caplog):
    caplog.set_level(logging.INFO, logger="junction.reload")
    node.tick()
    assert not node.security.is_allowed(_principal("amq"), "consume", "orders.eu")
    assert node.server.settings_for("orders.eu").max_delivery_attempts == 10
    write(
        node.path,
        security='<security-setting match="orders.#"><permission type="consume" roles="amq"/></security-setting>',
        more_settings='<address-setting match="orders.#"><max-delivery-attempts>3</max-delivery-attempts></address-setting>',
        addresses='<address name="orders.eu"><anycast><queue name="orders.eu"/></anycast>'
        '<multicast><queue name="audit"/></multicast></address>',
    )
    node.clock.advance(0.1)
    assert "orders.eu" not in node.server.queues  # not before the period
    node.clock.advance(0.1)
    assert node.security.is_allowed(_principal("amq"), "consume", "orders.eu")
    assert node.server.settings_for("orders.eu").max_delivery_attempts == 3
    address = node.server.addresses["orders.eu"]
    assert address.routing_types == {RoutingType.ANYCAST, RoutingType.MULTICAST}
    assert set(address.queues) == {"orders.eu", "audit"}
    last = node.reloader.last
    assert last["result"] == "applied"
    assert last["applied"] == ["security settings", "address settings", "addresses"]
    assert "deployed ANYCAST queue orders.eu on address orders.eu" in last["done"]
    [running] = node.applied
    assert [a.name for a in running.addresses] == ["kept", "orders.eu"]
    logged = [r.getMessage() for r in caplog.records]
    for part in ("security settings", "address settings", "addresses"):
        assert f"reloading configuration: {part}" in logged


def test_an_invalid_edit_changes_nothing_and_says_every_error_with_file_and_line(node, caplog):
    node.tick()
    caplog.set_level(logging.ERROR, logger="junction.reload")
    text = XML.format(
        security="", settings="<max-delivery-attempts>often</max-delivery-attempts>", more_settings="",
        addresses='<address name="new"><anycast><queue name="new"/></anycast></address><adress name="x"/>',
    )
    node.path.write_text(text)
    age(node.path)
    node.tick()
    errors = node.reloader.errors
    lines = text.splitlines()
    bad_setting = next(i for i, line in enumerate(lines, 1) if "often" in line)
    bad_address = next(i for i, line in enumerate(lines, 1) if "<adress" in line)
    assert errors[0].startswith(f"{node.path}:{bad_setting}: <max-delivery-attempts>")
    assert errors[1].startswith(f"{node.path}:{bad_address}: unknown element <adress>")
    assert "new" not in node.server.queues and node.applied == []
    status = node.reloader.status()
    assert status["state"] == "failed" and status["last"]["result"] == "failed"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "not valid: the running configuration is kept (2 errors)" in logged
    assert errors[0] in logged and errors[1] in logged
    assert "CONFIG NOT RELOADED" in format_status({"reload": status})
    # the same broken file is not read again at every check; a fixed one is applied
    node.tick()
    assert node.reloader.failures == 1
    write(node.path, addresses='<address name="new"><anycast><queue name="new"/></anycast></address>')
    node.tick()
    assert "new" in node.server.queues and node.reloader.errors is None


@pytest.mark.parametrize("policy", ["OFF", "FORCE"])
def test_what_the_file_no_longer_declares_goes_only_under_force(node, policy):
    declared = '<address name="gone"><anycast><queue name="gone.q"/><queue name="gone.r"/></anycast></address>'
    settings = f"<config-delete-queues>{policy}</config-delete-queues>"
    write(node.path, settings=settings, addresses=declared)
    node.tick()
    assert {"gone.q", "gone.r"} <= set(node.server.queues)
    # one queue less
    write(node.path, settings=settings, addresses=declared.replace('<queue name="gone.r"/>', ""))
    node.tick()
    assert ("gone.r" in node.server.queues) is (policy == "OFF")
    # the whole address less: config-delete-addresses
    write(node.path, settings=settings + f"<config-delete-addresses>{policy}</config-delete-addresses>")
    node.tick()
    assert ("gone" in node.server.addresses) is (policy == "OFF")
    assert ("gone.q" in node.server.queues) is (policy == "OFF")
    # an auto-created address and a queue nobody declared are never undeployed
    assert "kept" in node.server.queues


def test_changes_that_need_a_restart_are_named_and_not_applied(node, caplog):
    node.tick()
    caplog.set_level(logging.WARNING, logger="junction.reload")
    node.path.write_text(node.path.read_text().replace("61699", "61698").replace("false", "true", 1))
    age(node.path)
    node.tick()
    assert node.reloader.restart_needed == ["persistence-enabled", "acceptors"]
    assert node.reloader.last["result"] == "restart needed"
    assert any("acceptors take effect at the next restart" in r.getMessage() for r in caplog.records)
    assert "Restart needed" in format_status({"reload": node.reloader.status()})


def test_moving_lines_is_no_change():
    import dataclasses

    from junction.config.loader import parse_config

    a = parse_config(XML.format(security="", settings="", more_settings="", addresses=""), env={})
    b = parse_config("\n\n" + XML.format(security="", settings="", more_settings="", addresses=""), env={})
    assert a.acceptors[0].source != b.acceptors[0].source
    assert restart_needed(a, b) == []
    assert restart_needed(a, dataclasses.replace(b, name="other")) == ["name"]


def test_a_higher_limit_releases_blocked_sends(node):
    node.tick()
    server = node.server
    address = server.addresses["kept"]
    waiting = server.post_office.wait_for_space(address)
    fired = []
    waiting.addCallback(fired.append)
    address.size = 100
    write(node.path, settings="<max-size-bytes>10</max-size-bytes><address-full-policy>BLOCK</address-full-policy>")
    node.tick()
    assert fired == [] and server.post_office.address_full(address, 1) == "BLOCK"
    write(node.path, settings="<max-size-bytes>1000</max-size-bytes><address-full-policy>BLOCK</address-full-policy>")
    node.tick()
    assert fired == [None]
    address.size = 0


def test_users_files_are_checked_every_period_without_a_login(node, files):
    node.tick()
    properties.add_user(files.users_file, files.roles_file, "bob", "b0b", ["amq"])
    node.tick()
    assert node.reloader.status()["users"]["users"] == 2


def test_refresh_period_minus_one_sets_no_timer(tmp_path):
    path = tmp_path / "broker.xml"
    write(path)
    path.write_text(path.read_text().replace(">200<", ">-1<"))
    config = load_config(path)
    clock = Clock()
    server = BrokerServer(config, reactor=clock, security=None)
    reloader = ConfigReloader(config, server, reactor=clock)
    reloader.start()
    assert [c for c in clock.getDelayedCalls() if "ConfigReloader" in repr(c.func)] == []
    assert reloader.status()["refresh_period_ms"] == -1


def _principal(*roles):
    from junction.brokercore.security import Principal

    return Principal("u", frozenset(roles))


def _consumer(queue, *, exclusive=False):
    from junction.brokercore.queue import Consumer

    consumer = Consumer(queue, lambda ref: None, exclusive=exclusive)
    queue.add_consumer(consumer)
    return consumer


def test_an_existing_queue_takes_exclusive_max_consumers_purge_and_grouping_as_artemis_updates_them(node, caplog):
    caplog.set_level(logging.INFO, logger="junction.reload")
    declared = '<address name="orders"><anycast><queue name="orders"{attrs}/></anycast></address>'
    write(node.path, addresses=declared.format(attrs=""))
    node.tick()
    queue = node.server.queues["orders"]
    first, second = _consumer(queue), _consumer(queue)
    assert not queue.definition.exclusive and queue.groups is not None
    write(node.path, addresses=declared.format(
        attrs=' exclusive="true" max-consumers="5" purge-on-no-consumers="true"'))
    node.tick()
    assert node.server.queues["orders"] is queue  # the same queue, its messages kept
    d = queue.definition
    assert (d.exclusive, d.max_consumers, d.purge_on_no_consumers) == (True, 5, True)
    assert queue.groups is None  # an exclusive queue does not group
    assert "deployed changes to queue orders: exclusive True, max-consumers 5, purge-on-no-consumers True" in node.reloader.last["done"]
    write(node.path, addresses=declared.format(attrs=' group-buckets="8" group-rebalance="true"'))
    node.tick()
    assert not queue.definition.exclusive and queue._exclusive is None
    assert queue.groups is not None and queue.groups.rebalance
    # more consumers attached than a new max-consumers allows: kept, and said (Artemis refuses it)
    write(node.path, addresses=declared.format(attrs=' max-consumers="1" group-buckets="8" group-rebalance="true"'))
    node.tick()
    assert queue.definition.max_consumers == -1
    assert any("keeps max-consumers -1: 2 consumers are attached, more than 1" in p for p in node.reloader.last["problems"])
    assert first in queue.consumers and second in queue.consumers


def test_an_exclusive_consumer_keeps_its_dispatch_when_the_queue_stops_being_exclusive(node):
    declared = '<address name="jobs"><anycast><queue name="jobs"{attrs}/></anycast></address>'
    write(node.path, addresses=declared.format(attrs=' exclusive="true"'))
    node.tick()
    queue = node.server.queues["jobs"]
    _consumer(queue)
    holder = _consumer(queue, exclusive=True)
    write(node.path, addresses=declared.format(attrs=""))
    node.tick()
    assert not queue.definition.exclusive
    assert queue._exclusive is not None and queue._exclusive.holder is holder


def test_a_changed_filter_is_still_reported_and_not_applied(node):
    declared = '<address name="f"><anycast><queue name="f">{flt}</queue></anycast></address>'
    write(node.path, addresses=declared.format(flt=""))
    node.tick()
    write(node.path, addresses=declared.format(flt="<filter string=\"color='red'\"/>"))
    node.tick()
    assert node.server.queues["f"].definition.filter is None
    assert any("queue f changed; the existing queue keeps its filter" in p for p in node.reloader.last["problems"])


def test_a_queue_definition_changed_at_run_time_is_what_a_restart_recovers():
    from dataclasses import replace

    from junction.brokercore.journal import FaultyFiles, Journal
    from junction.brokercore.queue import QueueDefinition
    from junction.brokercore.storage import JournalStorage
    from tests.unit.writer_fixtures import InlineReactor, settle

    files, reactor = FaultyFiles(), InlineReactor()

    def storage():
        journal = Journal(None, reactor=reactor, files=files, writer="inline", file_size=4096)
        return journal, JournalStorage(journal)

    journal, first = storage()
    first.load()
    journal.start()
    defn = QueueDefinition(name="orders", address="orders", routing_type=RoutingType.ANYCAST)
    first.store_queue(41, defn)
    first.update_queue(41, replace(defn, exclusive=True, max_consumers=3))
    first.update_queue(41, replace(defn, exclusive=True, max_consumers=4))
    settle(reactor)
    _journal, second = storage()
    recovered = second.load()
    assert recovered.queues[41]["exclusive"] is True
    assert recovered.queues[41]["max_consumers"] == 4
