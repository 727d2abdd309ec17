"""The appliance supervisor and folder loader, on a Clock with a fake spawn.

The fake process (:class:`FakeProcess`) has what the supervisor uses of
Twisted's process transport: ``pid`` and ``signalProcess(name)``; the
process's end is delivered as Twisted does, ``processEnded`` with a
:class:`~twisted.internet.error.ProcessDone` or ``ProcessTerminated``
failure.  tests/integration/test_appliance.py runs the same supervisor with
the reactor's real ``spawnProcess``.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
from twisted.internet import error
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from junction.appliance import supervisor as sup
from junction.appliance.folder import ApplianceErrors, child_specs, load_appliance
from junction.appliance.supervisor import ChildSpec, ChildState, Supervisor
from junction.brokercore.openwire_server import OpenWireProtocol
from junction.cli.board import format_board
from junction.gateway.openwire_side import OpenWireSide
from junction.protocols.openwire.opening import replayed_offer
from junction.protocols.openwire.wireformat import WireFormat, negotiate
from junction.protocols.registry import OPENWIRE

ETC = os.path.join(os.path.dirname(__file__), "..", "..", "etc", "appliance")
_pids = itertools.count(1000)


class FakeProcess:
    def __init__(self, protocol):
        self.protocol = protocol
        self.pid = next(_pids)
        self.signals: list[str] = []

    def signalProcess(self, name: str) -> None:
        self.signals.append(name)

    def end(self, code: int = 0, sig: int | None = None) -> None:
        if code == 0 and sig is None:
            reason = Failure(error.ProcessDone(0))
        else:
            reason = Failure(error.ProcessTerminated(exitCode=None if sig else code, signal=sig))
        self.protocol.processEnded(reason)


class FakeSpawn:
    def __init__(self):
        self.spawned: list[tuple[str, FakeProcess, list]] = []

    def __call__(self, protocol, executable, args, env=None, path=None):
        process = FakeProcess(protocol)
        protocol.makeConnection(process)
        self.spawned.append((protocol.child.name, process, args))
        return process

    def last(self, name: str) -> FakeProcess:
        return [p for n, p, _ in self.spawned if n == name][-1]


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    spawn = FakeSpawn()
    events: list[tuple[str, str]] = []
    specs = [
        ChildSpec("gateway", "gateway", ("python", "gw"), str(tmp_path / "logs" / "gateway.log")),
        ChildSpec("core1", "core", ("python", "c1"), str(tmp_path / "logs" / "core1.log")),
        ChildSpec("core2", "core", ("python", "c2"), str(tmp_path / "logs" / "core2.log")),
    ]
    s = Supervisor(specs, reactor=clock, spawn=spawn, on_event=lambda c, t: events.append((c.name, t)))
    return s, clock, spawn, events, tmp_path


def test_cores_start_before_gateways(world):
    s, clock, spawn, events, _ = world
    s.start()
    assert [n for n, _, _ in spawn.spawned] == ["core1", "core2", "gateway"]
    assert all(c.state is ChildState.STARTING and c.pid for c in s.children)


def test_a_crashed_child_restarts_with_a_doubling_delay_capped_at_the_maximum(world):
    s, clock, spawn, events, _ = world
    s.start()
    core = s.child("core1")
    delays = []
    for _ in range(10):
        spawn.last("core1").end(code=3)
        assert core.state is ChildState.BACKOFF and not core.alive
        delay = core.restart_at - clock.seconds()
        delays.append(round(delay, 6))
        clock.advance(delay - 0.01)
        assert core.state is ChildState.BACKOFF  # not a moment early
        clock.advance(0.02)
        assert core.state is ChildState.STARTING and core.alive
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(delays) == sup.RESTART_DELAY_MAX and delays[-1] == sup.RESTART_DELAY_MAX
    assert core.restarts == 10
    assert core.last_exit == "exit 3"
    # the other children were never touched
    assert len([n for n, _, _ in spawn.spawned if n != "core1"]) == 2


def test_a_child_that_ran_long_enough_restarts_quickly_again(world):
    s, clock, spawn, events, _ = world
    s.start()
    core = s.child("core2")
    for _ in range(4):  # four quick failures: the delay grew to 8 s
        spawn.last("core2").end(code=1)
        clock.advance(core.restart_at - clock.seconds())
    clock.advance(sup.STABLE_AFTER)
    spawn.last("core2").end(sig=9)
    assert core.last_exit == "signal KILL"
    assert core.restart_at - clock.seconds() == sup.RESTART_DELAY_INITIAL
    assert ("core2", "exited (signal KILL)") in events


def test_stop_terminates_gateways_first_then_cores_and_cancels_restarts(world):
    s, clock, spawn, events, _ = world
    s.start()
    spawn.last("core2").end(code=1)  # core2 waits to be restarted
    done = []
    s.stop().addCallback(done.append)
    gateway, core1 = spawn.last("gateway"), spawn.last("core1")
    assert gateway.signals == ["TERM"] and core1.signals == []  # cores wait for the gateway
    gateway.end()
    assert core1.signals == ["TERM"]
    assert s.child("core2").state is ChildState.STOPPED and s.child("core2").restart_at is None
    assert not done
    core1.end()
    assert done == [None]
    assert all(c.state is ChildState.STOPPED for c in s.children)
    clock.advance(3600)  # the cancelled restart never happens, and no timer is left
    assert len(spawn.spawned) == 3
    assert clock.getDelayedCalls() == []


def test_a_child_that_ignores_sigterm_is_killed_after_the_stop_timeout(world):
    s, clock, spawn, events, _ = world
    s.start()
    done = []
    s.stop().addCallback(done.append)
    gateway = spawn.last("gateway")
    clock.advance(sup.STOP_TIMEOUT - 0.1)
    assert gateway.signals == ["TERM"]
    clock.advance(0.1)
    assert gateway.signals == ["TERM", "KILL"]
    gateway.end(sig=9)
    for name in ("core1", "core2"):
        spawn.last(name).end()
    assert done == [None] and clock.getDelayedCalls() == []


def test_output_goes_to_the_log_file_and_whole_lines_to_the_observer(world):
    s, clock, spawn, events, tmp_path = world
    lines = []
    s.on_output = lambda child, line: lines.append((child.name, line))
    s.start()
    proto = spawn.last("core1").protocol
    proto.childDataReceived(2, b"first li")
    proto.childDataReceived(2, b"ne\nsecond\r\nthi")
    assert lines == [("core1", "first line"), ("core1", "second")]
    proto.childDataReceived(2, b"x" * (sup.MAX_LINE_BYTES + 10))  # no newline: cut, not held
    assert lines[-1][1].endswith("...") and len(lines[-1][1]) == sup.MAX_LINE_BYTES + 3
    spawn.last("core1").end(code=2)
    assert (tmp_path / "logs" / "core1.log").read_bytes() == b"first line\nsecond\r\nthi" + b"x" * (sup.MAX_LINE_BYTES + 10)


def test_mark_running_only_moves_a_starting_child(world):
    s, clock, spawn, events, _ = world
    s.start()
    core = s.child("core1")
    s.mark_running(core)
    assert core.state is ChildState.RUNNING and ("core1", "up") in events
    spawn.last("core1").end(code=1)
    s.mark_running(core)  # a late status answer from the dead process
    assert core.state is ChildState.BACKOFF


def test_duplicate_names_are_refused():
    spec = ChildSpec("a", "core", ("x",), "/dev/null")
    with pytest.raises(ValueError, match="unique"):
        Supervisor([spec, spec], reactor=Clock(), spawn=FakeSpawn())


# -- the appliance folder -----------------------------------------------------------------
def test_the_shipped_appliance_is_a_gateway_and_three_cores():
    nodes = load_appliance(ETC)
    assert sorted((n.name, n.role) for n in nodes) == [
        ("core1", "core"),
        ("core2", "core"),
        ("core3", "core"),
        ("gateway", "gateway"),
    ]
    gateway = next(n for n in nodes if n.role == "gateway")
    assert sorted(a.port for a in gateway.config.acceptors) == [5672, 61613, 61616]
    assert gateway.management_url == "http://127.0.0.1:8161"
    specs = child_specs(nodes, ETC)
    assert all(s.argv[1:4] == ("-m", "junction", "run") and "--supervised" in s.argv for s in specs)


def test_the_shipped_gateway_offers_openwire_clients_what_the_cores_settle_on():
    """A forwarded OpenWire client settles its wire format with the gateway (which answers its
    WireFormatInfo), while the core behind settles with the replayed offer (the client's, as
    it settled with the gateway): both must settle alike, or the client and the core would
    read each other's frames by different rules (encoding, cache, frame size, inactivity).
    A core's own offer has the marshalling cache; the gateway's does not."""
    nodes = {n.name: n.config for n in load_appliance(ETC)}
    gateway = nodes.pop("gateway")
    [listener] = [a for a in gateway.acceptors if a.name == "all"]
    assert not listener.protocols  # every protocol, OpenWire sniffed
    factory = SimpleNamespace(params=listener.params, default_max_frame=gateway.limits.max_frame_size)
    offer = OpenWireSide(factory, OPENWIRE).offer
    server = SimpleNamespace(batch_writes=lambda: None, reactor=Clock(), security=None)
    assert sorted(nodes) == ["core1", "core2", "core3"]
    clients = [WireFormat(cache_enabled=True), WireFormat(), WireFormat(tight_encoding=False, cache_enabled=True,
                                                                          max_frame_size=1 << 20)]
    for core in nodes.values():
        [acceptor] = [a for a in core.acceptors if a.name == "gateway-in"]
        assert "OPENWIRE" in acceptor.protocols, core.name
        served = OpenWireProtocol(server, acceptor=acceptor, limits=core.limits, reactor=Clock()).codec.offer
        assert served.cache_enabled and not offer.cache_enabled
        assert replace(served, cache_enabled=False) == offer, core.name
        for client in clients:
            with_gateway = negotiate(offer, client)
            assert negotiate(served, replayed_offer(client, with_gateway)) == with_gateway, (core.name, client)


def test_every_problem_in_the_folder_is_reported_at_once(tmp_path):
    for name in os.listdir(ETC):
        if os.path.isfile(os.path.join(ETC, name)):  # not a data directory a run left behind
            shutil.copy(os.path.join(ETC, name), tmp_path / name)
    core2 = (tmp_path / "core2.xml").read_text()
    # core2 takes core1's port and name; core3 is broken XML
    (tmp_path / "core2.xml").write_text(core2.replace("61618", "61617").replace("<name>core2</name>", "<name>core1</name>"))
    (tmp_path / "core3.xml").write_text((tmp_path / "core3.xml").read_text().replace("</acceptors>", "</acceptor>"))
    with pytest.raises(ApplianceErrors) as info:
        load_appliance(str(tmp_path))
    text = "\n".join(info.value.problems)
    assert "core3.xml:" in text and "not well-formed" in text
    assert "node name core1 is also used by" in text
    assert "port 61617 is also used by" in text


def test_an_empty_folder_and_a_folder_without_a_gateway_are_refused(tmp_path):
    with pytest.raises(ApplianceErrors, match="no node configs"):
        load_appliance(str(tmp_path))
    for name in ("core1.xml", "artemis-users.properties", "artemis-roles.properties"):
        shutil.copy(os.path.join(ETC, name), tmp_path / name)
    with pytest.raises(ApplianceErrors, match="no gateway"):
        load_appliance(str(tmp_path))


def test_the_board_shows_readiness_as_the_gateway_sees_each_core(world):
    s, clock, spawn, events, _ = world
    nodes = [n for n in load_appliance(ETC) if n.name in ("gateway", "core1", "core2")]
    s.start()
    s.child("core2")._process.end(code=3)
    statuses = {
        "gateway": {
            "acceptors": [{"port": 61616, "listening": True, "connections": 0, "forwarded": 2}],
            "routers": {"shard": {"ready": 1, "targets": [{"node_id": "n1", "ready": True}, {"node_id": "n2", "ready": False}]}},
        },
        "core1": {"node_id": "n1", "acceptors": [{"port": 61617, "listening": True, "connections": 2}]},
        "core2": None,
    }
    text = format_board(nodes, s, statuses, clock.seconds())
    rows = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert "shard 1/2" in rows["gateway"] and " 2 " in rows["gateway"]
    assert "ready" in rows["core1"] and "not ready" not in rows["core1"]
    assert "restarting in" in rows["core2"] and "exit 3" in rows["core2"]


def test_a_child_that_exits_says_its_last_error(world):
    s, clock, spawn, events, _ = world
    s.start()
    proto = spawn.last("core1").protocol
    proto.childDataReceived(2, b"2026-11-22 10:00:00,000 INFO junction.node: starting\n")
    proto.childDataReceived(
        2, b"2026-11-22 10:00:01,000 ERROR junction: could not start: Couldn't listen on 127.0.0.1:61617\n"
    )
    spawn.last("core1").end(code=3)
    assert ("core1", "exited (exit 3): could not start: Couldn't listen on 127.0.0.1:61617") in events
    clock.advance(1)  # restarted: the next run starts with no error of its own
    spawn.last("core1").end(code=3)
    assert events[-2] == ("core1", "exited (exit 3)")


def test_one_junction_up_per_appliance_folder(tmp_path):
    import subprocess
    import sys

    from junction.appliance.folder import lock_appliance

    fd = lock_appliance(str(tmp_path))
    try:
        # another process (flock locks are per open file, so a second process is the real test)
        code = (
            "import sys; from junction.appliance.folder import lock_appliance, ApplianceRunning\n"
            f"try:\n    lock_appliance({str(tmp_path)!r})\nexcept ApplianceRunning as e:\n    print(e); sys.exit(3)\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 3
        assert f"already running (junction up, pid {os.getpid()})" in result.stdout
    finally:
        os.close(fd)
    fd = lock_appliance(str(tmp_path))  # released with its holder: free again
    os.close(fd)


# -- --port-offset ------------------------------------------------------------------------
def test_a_port_offset_moves_every_port_of_every_node_and_reaches_the_children():
    shipped = {n.name: n.config for n in load_appliance(ETC)}
    nodes = load_appliance(ETC, port_offset=1000)
    for node in nodes:
        before = shipped[node.name]
        assert [a.port for a in node.config.acceptors] == [a.port + 1000 for a in before.acceptors]
        assert [c.port for c in node.config.connectors] == [c.port + 1000 for c in before.connectors]
        assert node.config.management_port == before.management_port + 1000
        assert node.management_url.endswith(f":{before.management_port + 1000}")
    gateway = next(n for n in nodes if n.role == "gateway")
    assert sorted(a.port for a in gateway.config.acceptors) == [6672, 62613, 62616]
    for spec in child_specs(nodes, ETC, port_offset=1000):
        i = spec.argv.index("--port-offset")
        assert spec.argv[i + 1] == "1000" and spec.argv.index("--supervised") > i
    assert "--port-offset" not in child_specs(nodes, ETC)[0].argv


def test_a_port_offset_that_leaves_the_port_range_names_every_port():
    with pytest.raises(ApplianceErrors) as info:
        load_appliance(ETC, port_offset=4000)
    text = "\n".join(info.value.problems)
    assert re.search(r"gateway\.xml:\d+: acceptor 'all': port 61616 moved by --port-offset 4000 is 65616, "
                     r"outside 1\.\.65535", text)
    assert re.search(r"core2\.xml:\d+: connector 'core3': port 61719 moved", text)
    assert "acceptor 'amqp'" not in text  # 5672 + 4000 is fine


def test_a_port_offset_moves_group_ports_and_leaves_any_port_alone():
    from junction.config.loader import parse_config
    from junction.config.ports import offset_ports

    config = parse_config("""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
      <security-enabled>false</security-enabled>
      <acceptors><acceptor name="any">tcp://127.0.0.1:0</acceptor></acceptors>
      <connectors><connector name="me">tcp://127.0.0.1:61616</connector></connectors>
      <broadcast-groups><broadcast-group name="bg"><group-address>231.7.7.7</group-address>
        <group-port>9876</group-port><local-bind-port>9875</local-bind-port><connector-ref>me</connector-ref>
      </broadcast-group></broadcast-groups>
      <discovery-groups><discovery-group name="dg"><group-address>231.7.7.7</group-address>
        <group-port>9876</group-port></discovery-group></discovery-groups>
      <junction><management port="0"/></junction>
    </core></configuration>""")
    moved = offset_ports(config, 10)
    assert moved.acceptors[0].port == 0 and moved.management_port == 0  # any free port stays so
    assert moved.connectors[0].port == 61626
    assert (moved.broadcast_groups[0].group_port, moved.broadcast_groups[0].local_bind_port) == (9886, 9885)
    assert moved.discovery_groups[0].group_port == 9886
    assert offset_ports(config, 0) is config


# -- a node that cannot bind ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("could not start: Couldn't listen on 127.0.0.1:8161: [Errno 98] Address already in use.",
         "8161 in use (management API), by pid 7 (java)"),
        ("could not start: Couldn't listen on 127.0.0.1:61613: [Errno 98] Address already in use.",
         "61613 in use (acceptor stomp), by pid 7 (java)"),
        ("could not start: Couldn't listen on 127.0.0.1:5672: [Errno 13] Permission denied.",
         "5672 needs privileges (acceptor amqp)"),
        ("could not start: Couldn't listen on 10.9.9.9:61616: [Errno 99] Cannot assign requested address.",
         "10.9.9.9 is not an address of this host (port 61616) (acceptor all)"),
        ("could not start: Couldn't listen on 127.0.0.1:1234: [Errno 24] Too many open files.",
         "cannot listen on 1234: Too many open files"),
        ("data directory data/gateway/journal is locked by another process", None),
        (None, None),
    ],
)
def test_a_bind_failure_says_which_port_what_of_the_node_and_who_holds_it(error, expected):
    from junction.cli.board import bind_problem

    gateway = next(n for n in load_appliance(ETC) if n.role == "gateway")
    assert bind_problem(gateway, error, owner=lambda port: "pid 7 (java)") == expected


def test_the_board_shows_why_a_node_could_not_start(world):
    from junction.cli.board import StatusBoard

    s, clock, spawn, events, _ = world
    nodes = [n for n in load_appliance(ETC) if n.name in ("gateway", "core1", "core2")]
    lines: list[str] = []
    # nobody named as the port's holder: the host's own sockets (another test may listen on
    # 8161 meanwhile) must not decide the text
    board = StatusBoard(nodes, s, reactor=clock, write=lines.append, live=False, agent=object(), owner=lambda port: None)
    s.on_event = board.event
    s.start()
    spawn.last("gateway").protocol.childDataReceived(
        2, b"2026-11-22 10:00:01,000 ERROR junction: could not start: Couldn't listen on 127.0.0.1:8161: "
           b"[Errno 98] Address already in use.\n")
    spawn.last("gateway").end(code=3)
    row = next(line for line in board.render().splitlines() if line.startswith("gateway "))
    assert "restarting in" in row and row.rstrip().endswith("8161 in use (management API)")
    assert any(line.endswith("gateway: exited (exit 3): 8161 in use (management API)\n") for line in lines)
    clock.advance(1)  # restarted, and this time it dies of something else
    spawn.last("gateway").end(code=1)
    row = next(line for line in board.render().splitlines() if line.startswith("gateway "))
    assert row.rstrip().endswith("exit 1") and "in use" not in row


class _Response:
    """What readBody needs of a Twisted web response."""

    def __init__(self, code: int, body: bytes):
        self.code, self.phrase, self.body = code, b"OK", body

    def deliverBody(self, protocol):
        from twisted.web.client import ResponseDone

        protocol.dataReceived(self.body)
        protocol.connectionLost(Failure(ResponseDone()))


class _Agent:
    def __init__(self):
        self.answers: dict[bytes, tuple[int, bytes]] = {}

    def request(self, method, url):
        from twisted.internet import defer

        return defer.succeed(_Response(*self.answers[url]))


def test_the_board_counts_only_the_node_s_own_answer(world):
    import json

    from junction.cli.board import StatusBoard

    s, clock, spawn, events, _ = world
    nodes = [n for n in load_appliance(ETC) if n.name in ("gateway", "core1", "core2")]
    agent = _Agent()
    board = StatusBoard(nodes, s, reactor=clock, write=lambda text: None, live=False, agent=agent)
    s.start()
    pid = s.child("core1").pid
    # core1's management port answers for another node (core1 itself could not bind it)
    agent.answers = {f"{n.management_url}/api/status".encode(): (200, json.dumps({"name": "other", "pid": pid}).encode())
                     for n in nodes}
    board.tick()
    assert board.statuses["core1"] is None and s.child("core1").state is ChildState.STARTING
    agent.answers[b"http://127.0.0.1:8162/api/status"] = (200, json.dumps({"name": "core1", "pid": pid}).encode())
    board.tick()
    assert board.statuses["core1"]["name"] == "core1" and s.child("core1").state is ChildState.RUNNING
