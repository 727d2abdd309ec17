"""Unit tests of tests/harness.py pieces that need no running broker.

Covered: ``free_port`` (bindable, distinct), ``wait_for`` (returns the truthy
value, deadline and message on timeout, predicate errors propagate, argument
checks), the generated ``broker.xml`` (well-formed, namespaced as Artemis
expects, ports and options in place) and the properties files, and the process
lifecycle (start/readiness/fail-fast/stop/kill9/restart) driven against a
stand-in child that serves ``/api/health`` -- starting the real broker is
the integration suites' business.  And the Hypothesis profile of
``tests/conftest.py``: an example that stalls is not a failure.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import harness
from tests.harness import (
    REPO_ROOT,
    BrokerExited,
    BrokerProcess,
    free_port,
    port_open,
    wait_for,
)

NS = {"a": "urn:activemq", "c": "urn:activemq:core"}


# --------------------------------------------------------------------------- free_port


def test_free_port_is_bindable_and_distinct():
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    for p in ports[:5]:
        assert 1024 <= p <= 65535
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_free_port_stays_out_of_the_ephemeral_range():
    """Outgoing connections take their source ports from the ephemeral range (and so
    does binding port 0): a port handed to a broker must not be one of them."""
    ephemeral = harness.ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    if harness.port_range(ephemeral) is not None:  # else the fallback: port 0, the kernel's choice
        low, high = ephemeral
        assert all(not low <= p <= high and p >= harness.PORT_RANGE_START for p in ports), ports


def test_port_range_gives_each_xdist_worker_its_own_slice():
    ephemeral = (32768, 60999)
    whole = harness.port_range(ephemeral)
    assert whole == range(harness.PORT_RANGE_START, 32768)
    slices = [harness.port_range(ephemeral, f"gw{i}", "3") for i in range(3)]
    assert all(len(s) >= harness.MIN_PORT_RANGE for s in slices)
    assert all(a[-1] < b[0] for a, b in zip(slices, slices[1:], strict=False))  # disjoint, in order
    assert all(s[0] in whole and s[-1] in whole for s in slices)
    assert harness.port_range(ephemeral, "gw4", "3") == slices[1]  # wraps, never fails
    # an ephemeral range low in the port space: the ports above it
    assert harness.port_range((1024, 40000)) == range(40001, 65536)
    # no room anywhere, or unknown: None (free_port then binds port 0)
    assert harness.port_range((1024, 65535)) is None and harness.port_range(None) is None


def test_free_port_skips_a_port_in_use(monkeypatch):
    monkeypatch.setattr(harness, "ephemeral_range", lambda: (32768, 60999))  # Linux's default
    ports = harness.port_range(
        (32768, 60999), os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    )
    free = harness._handed_out.isdisjoint
    k = next(k for k in range(len(ports) - 1)
             if free(ports[k : k + 2]) and all(harness._bindable("127.0.0.1", p) for p in ports[k : k + 2]))
    with socket.socket() as held:  # the port the random start lands on is taken
        held.bind(("127.0.0.1", ports[k]))
        held.listen()
        monkeypatch.setattr(harness._port_rng, "randrange", lambda n: k)
        assert free_port() == ports[k + 1]


def test_port_open_sees_a_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_open(s.getsockname()[1])
    assert not port_open(free_port())


# --------------------------------------------------------------------------- wait_for


def test_wait_for_returns_first_truthy_value():
    calls = []

    def pred():
        calls.append(1)
        return len(calls) >= 3 and "done"

    assert wait_for(pred, timeout=5, interval=0.001, what="three calls") == "done"
    assert len(calls) == 3


def test_wait_for_immediate_success_with_zero_timeout():
    assert wait_for(lambda: 42, timeout=0) == 42


def test_wait_for_times_out_with_a_clear_message():
    start = time.monotonic()
    with pytest.raises(TimeoutError) as ei:
        wait_for(lambda: 0, timeout=0.2, interval=0.01, what="the moon to turn blue")
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 2.0
    msg = str(ei.value)
    assert "the moon to turn blue" in msg
    assert "0.2 s" in msg
    assert "last value: 0" in msg


def test_wait_for_checks_once_more_at_the_deadline():
    # an interval far longer than the timeout must not skip the final check
    t0 = time.monotonic()
    assert wait_for(lambda: time.monotonic() - t0 >= 0.1, timeout=0.15, interval=10) is True


def test_wait_for_propagates_predicate_errors():
    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        wait_for(boom, timeout=1)


@pytest.mark.parametrize("kwargs", [{"timeout": -1}, {"timeout": 1, "interval": 0}])
def test_wait_for_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        wait_for(lambda: True, **kwargs)


# --------------------------------------------------------------------------- broker.xml


def _core(b: BrokerProcess) -> ET.Element:
    root = ET.parse(b.config_path).getroot()
    assert root.tag == "{urn:activemq}configuration"
    core = root.find("c:core", NS)
    assert core is not None
    return core


def test_broker_xml_is_well_formed_and_has_the_ports(tmp_path):
    b = BrokerProcess(tmp_path, name="b1")
    assert b.config_path == tmp_path / "b1" / "broker.xml"
    assert b.stomp_port != b.mgmt_port
    core = _core(b)
    assert core.findtext("c:name", namespaces=NS) == "b1"
    assert core.findtext("c:persistence-enabled", namespaces=NS) == "true"
    assert core.findtext("c:security-enabled", namespaces=NS) == "false"
    for d in ("journal", "bindings", "paging", "large-messages"):
        assert core.findtext(f"c:{d}-directory", namespaces=NS).startswith("data/")
    acc = core.findall("c:acceptors/c:acceptor", NS)
    assert [a.get("name") for a in acc] == ["stomp", "amqp"]
    assert acc[0].text == f"tcp://127.0.0.1:{b.stomp_port}?protocols=STOMP"
    assert acc[1].text == f"tcp://127.0.0.1:{b.amqp_port}?protocols=AMQP"
    assert len({b.stomp_port, b.amqp_port, b.mgmt_port}) == 3
    assert b.amqp_url == f"amqp://127.0.0.1:{b.amqp_port}"
    mgmt = core.find("c:junction/c:management", NS)
    assert mgmt.get("host") == "127.0.0.1"
    assert mgmt.get("port") == str(b.mgmt_port)
    sec = core.find("c:junction/c:security", NS)
    assert sec.get("users-file") == "artemis-users.properties"
    assert sec.get("anonymous-user") == "guest"
    assert core.find("c:address-settings", NS) is not None
    # no users: the files exist anyway; the anonymous user is in the users
    # file (the broker insists) with a random password and no roles
    entries = [ln for ln in b.users_path.read_text().splitlines() if not ln.startswith("#")]
    assert len(entries) == 1 and entries[0].startswith("guest = ")
    assert [ln for ln in b.roles_path.read_text().splitlines() if not ln.startswith("#")] == []


def test_broker_xml_explicit_ports_and_options(tmp_path):
    b = BrokerProcess(
        tmp_path,
        name="a&b",
        stomp_port=61999,
        mgmt_port=18161,
        persistence=False,
        anonymous_user=None,
        address_settings_xml=(
            '<address-setting match="q.#"><max-delivery-attempts>3</max-delivery-attempts>'
            "</address-setting>"
        ),
        amqp_port=5998,
        amqp_acceptor_params={"amqpCredits": "50"},
        extra_acceptors_xml='<acceptor name="extra">tcp://127.0.0.1:5999?protocols=AMQP</acceptor>',
        extra_core_xml="<addresses/>",
    )
    core = _core(b)
    assert core.findtext("c:name", namespaces=NS) == "a&b"
    assert core.findtext("c:persistence-enabled", namespaces=NS) == "false"
    assert "61999" in core.find("c:acceptors/c:acceptor", NS).text
    acceptors = core.findall("c:acceptors/c:acceptor", NS)
    assert [a.get("name") for a in acceptors] == ["stomp", "amqp", "extra"]
    assert acceptors[1].text == "tcp://127.0.0.1:5998?protocols=AMQP;amqpCredits=50"
    assert core.find("c:junction/c:management", NS).get("port") == "18161"
    assert core.find("c:junction/c:security", NS).get("anonymous-user") is None
    s = core.find("c:address-settings/c:address-setting", NS)
    assert s.get("match") == "q.#"
    assert s.findtext("c:max-delivery-attempts", namespaces=NS) == "3"
    assert core.find("c:addresses", NS) is not None


def test_full_address_settings_element_is_not_wrapped_twice(tmp_path):
    b = BrokerProcess(
        tmp_path,
        name="b",
        address_settings_xml='<address-settings><address-setting match="#"/></address-settings>',
    )
    core = _core(b)
    assert len(core.findall("c:address-settings", NS)) == 1
    assert len(core.findall("c:address-settings/c:address-setting", NS)) == 1


def test_security_users_and_roles_files(tmp_path):
    b = BrokerProcess(
        tmp_path,
        name="sec",
        security=True,
        users={"admin": ("s3cret", ["amq", "admin"]), "bob": ("pw", "amq")},
    )
    core = _core(b)
    assert core.findtext("c:security-enabled", namespaces=NS) == "true"
    users = b.users_path.read_text().splitlines()
    assert "admin = s3cret" in users and "bob = pw" in users
    assert any(u.startswith("guest = ") for u in users)  # the anonymous user
    roles = b.roles_path.read_text().splitlines()
    assert "amq = admin,bob" in roles and "admin = admin" in roles
    perms = core.findall("c:security-settings/c:security-setting/c:permission", NS)
    assert {p.get("type") for p in perms} >= {"send", "consume", "createDurableQueue"}
    assert all(p.get("roles") == "amq,admin" for p in perms)


def test_caller_security_settings_are_not_doubled(tmp_path):
    own = (
        '<security-settings><security-setting match="#">'
        '<permission type="send" roles="amq"/></security-setting></security-settings>'
    )
    b = BrokerProcess(
        tmp_path, name="s", security=True, users={"u": ("p", ["amq"])}, extra_core_xml=own
    )
    assert len(_core(b).findall("c:security-settings", NS)) == 1


def test_command_and_environment(tmp_path):
    b = BrokerProcess(tmp_path, name="e", env={"JUNCTION_X": "1", "HOME": None})
    assert b.command() == [
        sys.executable,
        "-m",
        "junction",
        "run",
        "--config",
        str(b.config_path),
    ]
    env = b._child_env()
    assert env["JUNCTION_X"] == "1" and "HOME" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
    assert not b.running and b.pid is None
    assert b.stop() is None  # stopping a never-started broker is a no-op


# --------------------------------------------------------------------------- lifecycle (stand-in)

#: A stand-in "broker": serves {"status": "ok"} on /api/health at the port
#: given as argv[1], logs to stdout, exits on SIGTERM (default disposition).
FAKE_BROKER = """
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": "ok", "path": self.path}).encode()
        self.send_response(200 if self.path in ("/api/health", "/api/status") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("fake broker up", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class FakeBroker(BrokerProcess):
    def command(self):
        return [sys.executable, "-c", FAKE_BROKER, str(self.mgmt_port)]


class DyingBroker(BrokerProcess):
    def command(self):
        return [
            sys.executable,
            "-c",
            "import sys; print('config is bad', file=sys.stderr); sys.exit(3)",
        ]


def test_lifecycle_start_stop_restart_kill9(tmp_path):
    b = FakeBroker(tmp_path, name="fake", startup_timeout=20)
    with b:
        assert b.running and b.pid
        assert b.health()["status"] == "ok"
        assert b.status()["path"] == "/api/status"
        first = b.pid
        b.restart()
        assert b.running and b.pid != first
        assert b.kill9() == -9
        assert not b.running
        b.start()
    assert not b.running
    assert b.proc.returncode == -15  # SIGTERM
    log = b.log_text()
    assert log.count("fake broker up") == 3
    assert log.count("harness: start #") == 6  # a banner per start in each file


def test_start_fails_fast_with_the_log_tail(tmp_path):
    b = DyingBroker(tmp_path, name="dying", startup_timeout=60)
    t0 = time.monotonic()
    with pytest.raises(BrokerExited) as ei:
        b.start()
    assert time.monotonic() - t0 < 30
    assert "exited with status 3" in str(ei.value)
    assert "config is bad" in str(ei.value)
    assert not b.running


def test_start_timeout_stops_the_process(tmp_path):
    class Silent(BrokerProcess):
        def command(self):
            return [sys.executable, "-c", "import time; time.sleep(60)"]

    b = Silent(tmp_path, name="silent")
    with pytest.raises(TimeoutError) as ei:
        b.start(timeout=0.5)
    assert "broker silent health" in str(ei.value)
    assert not b.running and b.proc.returncode is not None


@settings(max_examples=2)  # settings of its own, as most properties here have: the profile still holds
@given(st.integers())
def test_a_stalled_hypothesis_example_is_not_a_failure(n):
    """An example stalled past Hypothesis's default deadline (200 ms), as a loaded machine can."""
    time.sleep(0.25)  # stands for the stall; nothing here waits for anything
    assert isinstance(n, int)
