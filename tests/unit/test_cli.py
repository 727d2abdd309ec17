"""The ``junction`` command line: user management, config errors, version."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from junction import cli
from junction.config.properties import UserStore

ETC = Path(__file__).resolve().parents[2] / "etc"


@pytest.fixture
def etc(tmp_path):
    target = tmp_path / "etc"
    shutil.copytree(ETC, target, ignore=shutil.ignore_patterns("data"))
    return target


def run(*argv) -> int:
    return cli.main(list(argv))


def test_user_add_list_update_and_remove(etc, capsys):
    config = str(etc / "broker.xml")
    assert run("user", "add", "bob", "--password", "s3cret", "--role", "amq,ops", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert store.authenticate("bob", "s3cret")
    assert not store.authenticate("bob", "wrong")
    assert store.roles_of("bob") == frozenset({"amq", "ops"})
    # the password is stored hashed, never as given
    assert "s3cret" not in (etc / "artemis-users.properties").read_text()

    assert run("user", "add", "bob", "--password", "n3w", "--role", "amq", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert store.authenticate("bob", "n3w") and not store.authenticate("bob", "s3cret")
    assert store.roles_of("bob") == frozenset({"amq"})

    capsys.readouterr()
    assert run("user", "list", "--config", config) == 0
    listing = capsys.readouterr().out.splitlines()
    assert "bob\tamq" in listing and "admin\tamq" in listing

    assert run("user", "rm", "bob", "--config", config) == 0
    store = UserStore.load(etc / "artemis-users.properties", etc / "artemis-roles.properties")
    assert "bob" not in store.users


def test_user_rm_of_an_unknown_user_is_a_clear_error(etc, capsys):
    assert run("user", "rm", "nobody", "--config", str(etc / "broker.xml")) == 1
    assert "no user 'nobody'" in capsys.readouterr().err


def test_invalid_config_reports_every_error_and_exits_2(tmp_path, capsys):
    bad = tmp_path / "broker.xml"
    bad.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">\n'
        "<persistence-enabled>maybe</persistence-enabled>\n"
        "<jornal-directory>x</jornal-directory>\n"
        "</core></configuration>\n"
    )
    with pytest.raises(SystemExit) as exc:
        run("run", "--config", str(bad))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and f"{bad}:3:" in err
    assert "journal-directory" in err  # the did-you-mean suggestion


def test_version(capsys):
    assert run("version") == 0
    assert capsys.readouterr().out.startswith("junction ")


# -- junction run --port-offset ---------------------------------------------------------------
def test_a_port_offset_out_of_the_port_range_is_a_config_error(etc, capsys):
    with pytest.raises(SystemExit) as exc:
        run("run", "--config", str(etc / "broker.xml"), "--port-offset", "10000")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "acceptor 'stomp': port 61613 moved by --port-offset 10000 is 71613, outside 1..65535" in err
    assert "the management API: port 8161" not in err  # 18161 is a port


# -- junction status / route: the node meant ---------------------------------------------------
STATUS = {"name": "core1", "node_id": "6f1c-0001", "pid": 1, "acceptors": []}


@pytest.fixture
def answering(monkeypatch):
    monkeypatch.setattr("junction.cli.status_table.fetch_status", lambda url, timeout=5: dict(STATUS))


@pytest.mark.parametrize("node", [None, "core1", "6f1c-0001"])
def test_status_of_the_node_meant_by_name_or_id(answering, capsys, node):
    assert run("status", *(("--node", node) if node else ())) == 0
    assert capsys.readouterr().out.startswith("Node         core1 (6f1c-0001)")


def test_status_and_route_of_another_node_exit_3_and_say_which_answered(answering, capsys):
    assert run("status", "--url", "127.0.0.1:8162", "--node", "gateway") == 3
    assert capsys.readouterr().err == (
        "junction: 127.0.0.1:8162 is node core1 (6f1c-0001), not gateway: another node has this port\n")
    assert run("route", "shard", "admin", "--node", "gateway") == 3
    assert "is node core1 (6f1c-0001), not gateway" in capsys.readouterr().err


@pytest.fixture
def asked(monkeypatch):
    """The URLs ``junction status`` fetched, answering as core1 does."""
    urls = []

    def fetch(url, timeout=5):
        urls.append(url)
        return dict(STATUS)

    monkeypatch.setattr("junction.cli.status_table.fetch_status", fetch)
    return urls


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        ((), "http://127.0.0.1:8161"),  # the gateway of the shipped appliance
        (("--port-offset", "1000"), "http://127.0.0.1:9161"),
        (("--node", "core1"), "http://127.0.0.1:8162"),  # found by name in the appliance's files
        (("--node", "core1", "--port-offset", "1000"), "http://127.0.0.1:9162"),
        (("--node", "6f1c-0001"), "http://127.0.0.1:8161"),  # a node id: asked where the gateway is
        (("--node", "core1", "--url", "http://127.0.0.1:7000"), "http://127.0.0.1:7000"),  # --url wins
    ],
)
def test_status_finds_the_node_meant_in_the_appliance_and_follows_the_port_offset(
    etc, asked, capsys, argv, url
):
    assert run("status", "--etc", str(etc / "appliance"), *argv) in (0, 3)
    assert asked == [url]


def test_route_asks_the_node_found_by_name(etc, asked, monkeypatch, capsys):
    routes = []
    monkeypatch.setattr(
        "junction.cli.status_table.fetch_route",
        lambda url, timeout=5: routes.append(url) or (200, {"target": None}),
    )
    run("route", "shard", "admin", "--etc", str(etc / "appliance"), "--node", "core1", "--port-offset", "7")
    assert asked == ["http://127.0.0.1:8169"]
    assert routes and routes[0].startswith("http://127.0.0.1:8169/")


@pytest.fixture
def other_program():
    """A TCP server on a free port answering each connection with *answer* (another program)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    box = {"answer": b""}

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(box["answer"])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], box
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes the accept
        server.close()
        thread.join(5)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\n\r\n<html>Not Found</html>",
         "it answered HTTP 404: <html>Not Found</html>"),
        (b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>console</html>",
         "it did not answer JSON (text/html)"),
        (b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"status": "UP"}',
         "its JSON has no node_id and name"),
        (b"ERROR\nmessage:unknown command\n\n\x00", "it did not answer HTTP"),  # a STOMP port
        (b"", "it did not answer HTTP"),  # closed without a word
    ],
)
def test_a_port_that_is_not_a_junction_node_is_said_with_its_process(other_program, capsys, answer, said):
    import os

    port, box = other_program
    box["answer"] = answer
    assert run("status", "--url", f"http://127.0.0.1:{port}") == 3
    err = capsys.readouterr().err
    assert err.startswith(f"junction: http://127.0.0.1:{port}/api/status is not a Junction node's management API: ")
    assert said in err
    assert err.rstrip().endswith(f"port {port} here is held by pid {os.getpid()} ({_comm()})")
    assert run("route", "shard", "admin", "--url", f"http://127.0.0.1:{port}") == 3


def _comm() -> str:
    with open("/proc/self/comm") as f:
        return f.read().strip()


def test_an_unreachable_node_is_exit_1(capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert run("status", "--url", f"127.0.0.1:{port}") == 1
    assert "cannot reach" in capsys.readouterr().err


def test_the_listener_of_a_port_is_found_on_this_host():
    import os
    import socket

    from junction.cli.portowner import describe_listener, listener

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert listener(port) == (os.getpid(), _comm())
        assert describe_listener(port) == f"pid {os.getpid()} ({_comm()})"
    assert listener(port) is None  # nothing listens there now


def test_a_reader_that_goes_away_gets_no_traceback(etc):
    """``junction user list | head -1``: the pipe closes before the output is written; the
    command ends with status 1, with no BrokenPipeError traceback or error line."""
    repo = Path(__file__).resolve().parents[2]
    for i in range(40):  # enough users that the listing is more than one line
        assert run("user", "add", f"user{i}", "--password", "p", "--config", str(etc / "broker.xml")) == 0
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write fails with EPIPE
    done = subprocess.run(
        [sys.executable, "-m", "junction", "user", "list", "--config", str(etc / "broker.xml")],
        stdout=writer, stderr=subprocess.PIPE, text=True, cwd=repo, timeout=30,
    )
    os.close(writer)
    assert done.returncode == 1 and "pipe" not in done.stderr.lower() and "Traceback" not in done.stderr
