"""Changes without a restart: ``junction user`` and an edited broker.xml, with real clients.

* The shipped appliance runs as ``./run.sh`` runs it (``junction up`` in a folder
  holding ``etc/appliance``); ``junction user add`` with no option edits the users
  file its nodes share, and stomp.py and python-qpid-proton log in as the new
  user through the gateway at once; after ``junction user passwd`` only the new
  password works; after ``junction user rm`` the user is refused.
* A node whose users file is caught half-written keeps the users it had, says
  so in its status with file and line, and takes the file once it is whole.
* A node applies an edited broker.xml (a security setting, an address setting,
  an address with its queue) within ``configuration-file-refresh-period``; an
  invalid edit changes nothing and is reported with file and line.

Waits poll the management API with deadlines; nothing sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
from proton import Message
from proton.utils import BlockingConnection
from stomp.exception import ConnectFailedException

from junction.config import properties
from tests.harness import REPO_ROOT, wait_for
from tests.integration.test_appliance import copy_appliance, status
from tests.integration.test_stomp_clients import Client, new_id

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 30.0
#: the refresh period the single-node tests use (Artemis's default is 5000 ms)
REFRESH_MS = 200


def junction(*args, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-m", "junction", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def stomp_login(address, user, password) -> Client:
    return Client(SimpleNamespace(stomp_address=address), "1.2").connect(user, password)


def stomp_refused(address, user, password) -> str:
    client = Client(SimpleNamespace(stomp_address=address), "1.2")
    with pytest.raises(ConnectFailedException):
        client.connect(user, password)
    return client.rec.wait_error().headers.get("message", "")


def stomp_roundtrip(client: Client, queue: str) -> None:
    body = new_id("body")
    client.subscribe(f"/queue/{queue}", new_id("sub"), ack="client-individual")
    client.send(f"/queue/{queue}", body, persistent="true")
    message = client.rec.wait_messages(1)[0]
    assert message.body == body
    client.ack(message)


def amqp(port: int, user: str, password: str) -> BlockingConnection:
    return BlockingConnection(
        f"amqp://127.0.0.1:{port}", timeout=TIMEOUT, user=user, password=password,
        allowed_mechs="PLAIN", allow_insecure_mechs=True,
    )


def amqp_refused(port: int, user: str, password: str) -> None:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - proton's SASL failure
        amqp(port, user, password).close()
    assert "auth" in str(caught.value).lower(), caught.value


# -- the appliance -----------------------------------------------------------------------------------


@pytest.fixture
def appliance(tmp_path):
    """The shipped appliance in ``tmp_path/etc/appliance``, run by ``junction up`` from ``tmp_path``."""
    folder = tmp_path / "etc" / "appliance"
    folder.mkdir(parents=True)
    ports = copy_appliance(folder)
    out = open(tmp_path / "up.out", "wb")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "junction", "up", "--no-status"], stdout=out, stderr=subprocess.STDOUT,
        env=env, cwd=tmp_path,
    )
    try:
        yield SimpleNamespace(proc=proc, ports=ports, folder=folder, cwd=tmp_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()


def test_junction_user_on_the_running_appliance_takes_effect_without_a_restart(appliance):
    ports = appliance.ports
    gateway_stomp, gateway_amqp = ("127.0.0.1", ports[61613]), ports[5672]

    def ready():
        router = ((status(ports[8161]) or {}).get("routers") or {}).get("shard")
        return router and router["ready"] == 3

    wait_for(ready, TIMEOUT, interval=0.1, what="the gateway's three cores ready")
    pids = {status(port)["name"]: status(port)["pid"] for port in (ports[8161], ports[8162], ports[8163], ports[8164])}
    assert stomp_refused(gateway_stomp, "bob", "b0b") == "Security Error occurred: User name [bob] or password is invalid"

    # no --config, no --etc: the appliance junction up runs from this folder
    added = junction("user", "add", "bob", "--password", "b0b", "--role", "amq", cwd=appliance.cwd)
    assert added.returncode == 0, added.stderr
    users_file = appliance.folder / "artemis-users.properties"
    assert f"user bob added to {users_file}" in added.stdout
    for name, pid in pids.items():
        assert f"{name} (pid {pid})" in added.stdout, added.stdout
    assert "no restart needed" in added.stdout

    # at once, through the gateway (which authenticates) to the core (which authenticates again)
    bob = stomp_login(gateway_stomp, "bob", "b0b")
    stomp_roundtrip(bob, "bobs")
    bob.disconnect()
    conn = amqp(gateway_amqp, "bob", "b0b")
    conn.create_sender("bobs").send(Message(body="by amqp", durable=True))
    conn.close()
    assert [p for p in (status(ports[8161]) or {}).get("reload", {}).get("users", {}).get("files", [])] == [
        str(users_file), str(appliance.folder / "artemis-roles.properties")
    ]

    changed = junction("user", "passwd", "bob", "--password", "n3w", cwd=appliance.cwd)
    assert changed.returncode == 0, changed.stderr
    stomp_refused(gateway_stomp, "bob", "b0b")
    amqp(gateway_amqp, "bob", "n3w").close()

    removed = junction("user", "rm", "bob", cwd=appliance.cwd)
    assert removed.returncode == 0, removed.stderr
    stomp_refused(gateway_stomp, "bob", "n3w")
    amqp_refused(gateway_amqp, "bob", "n3w")
    admin = stomp_login(gateway_stomp, "admin", "admin")  # everyone else is untouched
    stomp_roundtrip(admin, "admins")
    admin.disconnect()
    # nothing restarted
    assert {status(port)["name"]: status(port)["pid"] for port in (ports[8161], ports[8162], ports[8163], ports[8164])} == pids


# -- one node --------------------------------------------------------------------------------------

REFRESH = f"<configuration-file-refresh-period>{REFRESH_MS}</configuration-file-refresh-period>"
SECURITY = """<security-settings>
      <security-setting match="#">
        <permission type="send" roles="amq"/><permission type="consume" roles="amq"/>
        <permission type="createAddress" roles="amq"/><permission type="createDurableQueue" roles="amq"/>
      </security-setting>
    </security-settings>"""


def node_reload(broker) -> dict:
    return broker.status().get("reload") or {}


def test_a_half_written_users_file_keeps_the_users_the_node_had(broker_factory):
    broker = broker_factory(
        "halfwritten", security=True, users={"admin": ("admin", "amq")}, anonymous_user=None,
        extra_core_xml=REFRESH,
    ).start()
    users = broker.users_path
    # the file a writer is producing: today's users and bob (made on a copy, not yet in place)
    draft = broker.dir / "draft.properties"
    draft.write_text(users.read_text())
    properties.add_user(draft, broker.roles_path, "bob", "b0b", ["amq"])
    whole = draft.read_text()

    # caught in the middle of bob's hash (put in place whole, so the node sees exactly this)
    cut = whole[: whole.index("bob = ENC(") + 40]
    replace(users, cut)

    def refused():
        error = node_reload(broker).get("users", {}).get("error")
        return error if error and "ENC(" in error[0] else None

    error = wait_for(refused, TIMEOUT, interval=0.05, what="the half-written users file refused")
    assert error[0].startswith(f"{users}:{cut.count(chr(10)) + 1}: user 'bob': ENC("), error
    admin = stomp_login(broker.stomp_address, "admin", "admin")  # not locked out
    stomp_roundtrip(admin, "still-here")
    admin.disconnect()
    stomp_refused(broker.stomp_address, "bob", "b0b")
    assert "users and roles files changed but cannot be used; keeping 1 user from" in broker.log_text()

    replace(users, whole)  # the writer finishes: bob logs in at once, the status is clear
    stomp_login(broker.stomp_address, "bob", "b0b").disconnect()
    assert node_reload(broker)["users"]["error"] is None


def replace(path, text: str) -> None:
    """Put ``text`` in ``path`` whole (a temporary file renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_an_edited_broker_xml_is_applied_within_the_refresh_period_and_an_invalid_one_changes_nothing(broker_factory):
    broker = broker_factory(
        "edited", security=True, users={"admin": ("admin", "amq"), "carol": ("c4rol", "auditors")},
        anonymous_user=None, extra_core_xml=REFRESH + SECURITY,
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
    ).start()
    carol = stomp_login(broker.stomp_address, "carol", "c4rol")
    carol.conn.subscribe("/queue/audit", "a")
    assert "User: carol does not have permission" in carol.rec.wait_error().headers["message"]
    original = broker.config_path.read_text()

    edit = """
    <addresses><address name="audit"><anycast><queue name="audit"/></anycast></address></addresses>
    <address-settings><address-setting match="audit">
      <max-size-messages>1</max-size-messages><address-full-policy>FAIL</address-full-policy>
    </address-setting></address-settings>"""
    edited = original.replace(SECURITY, SECURITY.replace(
        "</security-settings>",
        '  <security-setting match="audit"><permission type="consume" roles="auditors"/>'
        '<permission type="send" roles="amq"/></security-setting>\n    </security-settings>',
    ) + edit)
    edited = edited.replace("<address-settings></address-settings>", "")
    assert edited != original
    broker.config_path.write_text(edited)

    def applied():
        reload = node_reload(broker)
        last = reload.get("last") or {}
        return last.get("result") == "applied" and last

    last = wait_for(applied, TIMEOUT, interval=0.05, what="broker.xml reloaded")
    assert last["applied"] == ["security settings", "address settings", "addresses"], last
    assert "audit" in {q["name"] for q in broker.status()["queues"]}

    # the security setting: carol may consume now; the address setting: a second message is refused
    carol = stomp_login(broker.stomp_address, "carol", "c4rol")
    carol.subscribe("/queue/audit", "a", ack="client-individual")
    admin = stomp_login(broker.stomp_address, "admin", "admin")
    admin.send("/queue/audit", "first")
    admin.send("/queue/audit", "second", receipt=False)
    assert "is full" in admin.rec.wait_error().headers["message"]
    [message] = carol.rec.wait_messages(1)
    assert message.body == "first"
    carol.ack(message)
    carol.disconnect()

    # an invalid edit: every error with file and line, in the log and the status; nothing changes
    broken = edited.replace('<queue name="audit"/>', '<queue name="audit"/><queue nam="typo"/>').replace(
        "<max-size-messages>1</max-size-messages>", "<max-size-messages>one</max-size-messages>"
    )
    broker.config_path.write_text(broken)
    errors = wait_for(lambda: node_reload(broker).get("errors"), TIMEOUT, interval=0.05, what="the edit refused")
    lines = broken.splitlines()
    typo = next(i for i, line in enumerate(lines, 1) if 'nam="typo"' in line)
    one = next(i for i, line in enumerate(lines, 1) if ">one<" in line)
    path = str(broker.config_path)
    assert any(e.startswith(f"{path}:{typo}:") for e in errors), errors
    assert any(e.startswith(f"{path}:{one}: <max-size-messages>") for e in errors), errors
    assert node_reload(broker)["state"] == "failed"
    log = broker.log_text()
    assert "not valid: the running configuration is kept" in log
    for error in errors:
        assert error in log
    # still the settings of the last valid file
    admin = stomp_login(broker.stomp_address, "admin", "admin")
    admin.send("/queue/audit", "again")
    admin.send("/queue/audit", "refused", receipt=False)
    assert "is full" in admin.rec.wait_error().headers["message"]


def _two_consumers_and_a_producer(broker, queue: str, text: str, count: int):
    """Two STOMP consumers on ``queue``, then ``count`` messages sent to it by a third client."""
    consumers = []
    for i in range(2):
        client = stomp_login(broker.stomp_address, "guest", "guest")
        client.subscribe(f"/queue/{queue}", f"s{i}")
        consumers.append(client)
    producer = stomp_login(broker.stomp_address, "guest", "guest")
    for i in range(count):
        producer.send(f"/queue/{queue}", f"{text} {i}")
    return consumers, producer


def test_a_queue_made_exclusive_by_an_edit_sends_everything_to_one_consumer_and_a_restart_keeps_it(broker_factory):
    """Artemis's updateQueue on a reload: the declared queue takes exclusive="true" in place
    (its consumers stay attached), and is still exclusive after a restart."""
    declared = '<addresses><address name="jobs"><anycast><queue name="jobs"{attrs}/></anycast></address></addresses>'
    broker = broker_factory(
        "exclusive-edit", extra_core_xml=REFRESH + declared.format(attrs=""),
        stomp_acceptor_params={"anycastPrefix": "/queue/"},
    ).start()
    consumers, producer = _two_consumers_and_a_producer(broker, "jobs", "shared", 4)
    assert all(c.rec.wait_messages(2) for c in consumers)  # round robin: two each

    original = broker.config_path.read_text()
    broker.config_path.write_text(original.replace(declared.format(attrs=""), declared.format(attrs=' exclusive="true"')))

    def applied():
        last = node_reload(broker).get("last") or {}
        return last.get("result") == "applied" and last

    last = wait_for(applied, TIMEOUT, interval=0.05, what="broker.xml reloaded")
    assert "deployed changes to queue jobs: exclusive True" in last["done"], last
    for i in range(6):
        producer.send("/queue/jobs", f"exclusive {i}")
    wait_for(lambda: sum(len(c.rec.messages) for c in consumers) == 10, TIMEOUT, interval=0.05, what="six more delivered")
    counts = sorted(len(c.rec.messages) - 2 for c in consumers)
    assert counts == [0, 6], counts  # all six to one consumer
    for client in (*consumers, producer):
        client.disconnect()

    broker.stop()
    broker.start()  # the edited file and the queue's stored definition: still exclusive
    consumers, _producer = _two_consumers_and_a_producer(broker, "jobs", "after restart", 4)
    wait_for(lambda: sum(len(c.rec.messages) for c in consumers) == 4, TIMEOUT, interval=0.05, what="four delivered")
    assert sorted(len(c.rec.messages) for c in consumers) == [0, 4]
