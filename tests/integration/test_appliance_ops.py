"""Operating the shipped appliance: ports moved with one option, the docs' management writes,
commands that say which node they reached, and a node that cannot bind saying why.

Unlike tests/integration/test_appliance.py, the files of ``etc/appliance`` are copied
unchanged: ``junction up --port-offset K`` moves every port of every node (K is chosen so
that every moved port is free).  The management write examples are read from README.md and
docs/*.md and run with curl through bash, as a user pastes them, only their ports moved by K;
each must answer 2xx and have its effect (a router's filter changed, a queue created on every
core of the cluster, ...).  `junction status` and `junction route` run as processes.  Waits
poll with deadlines; nothing sleeps to synchronise.
"""

from __future__ import annotations

import http.server
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from types import SimpleNamespace

import pytest

from tests.harness import REPO_ROOT, claim_port, wait_for
from tests.integration.test_appliance import APPLIANCE, SHIPPED_PORTS, TIMEOUT, status

pytestmark = pytest.mark.timeout(120)

#: the management port of each node of the shipped appliance
NODE_PORTS = {8161: "gateway", 8162: "core1", 8163: "core2", 8164: "core3"}
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_offset() -> int:
    """A port offset that moves every shipped port to a free one (the shipped ones may be taken)."""
    pick = random.SystemRandom()
    for _ in range(200):
        offset = pick.randint(1, 65535 - max(SHIPPED_PORTS))
        # claimed too, so that the other test workers never pick a moved port (see claim_port)
        if all(_bindable(p + offset) for p in SHIPPED_PORTS) and all(claim_port(p + offset) for p in SHIPPED_PORTS):
            return offset
    raise RuntimeError("no port offset with every moved port free")


def copy_shipped(folder) -> None:
    """The shipped files, unchanged (not a data directory a run from the checkout left)."""
    folder.mkdir()
    for path in APPLIANCE.iterdir():
        if path.is_file():
            shutil.copy(path, folder / path.name)


def start_up(tmp, offset: int, *options: str) -> SimpleNamespace:
    folder = tmp / "appliance"
    copy_shipped(folder)
    out_path = tmp / "up.out"
    out = open(out_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "junction", "up", "--etc", str(folder), "--port-offset", str(offset), *options],
        stdout=out, stderr=subprocess.STDOUT, env=ENV, cwd=tmp,
    )
    world = SimpleNamespace(proc=proc, offset=offset, folder=folder, out=out, tmp=tmp)
    world.output = lambda: out_path.read_text(errors="replace")
    world.port = lambda shipped: shipped + offset
    world.url = lambda shipped: f"http://127.0.0.1:{shipped + offset}"
    return world


def stop_up(world) -> int:
    if world.proc.poll() is None:
        world.proc.send_signal(signal.SIGTERM)
        try:
            world.proc.wait(60)
        except subprocess.TimeoutExpired:
            world.proc.kill()
            world.proc.wait()
    world.out.close()
    return world.proc.returncode


def wait_ready(world) -> None:
    def ready():
        gw = status(world.port(8161))
        router = ((gw or {}).get("routers") or {}).get("shard")
        return router and router["ready"] == 3

    wait_for(ready, TIMEOUT, interval=0.1, what="the gateway's three cores ready")


@pytest.fixture(scope="module")
def appliance(tmp_path_factory):
    world = start_up(tmp_path_factory.mktemp("ops"), free_offset(), "--no-status")
    try:
        wait_ready(world)
        for core in (8162, 8163, 8164):  # the cluster links (static connectors moved too)
            wait_for(lambda p=core: open_bridges(world, p) == 2, TIMEOUT, what="each core linked to the other two")
        yield world
    finally:
        assert stop_up(world) == 0


def open_bridges(world, core: int) -> int:
    cluster = status(world.port(core))["cluster"]
    return len([b for c in cluster["connections"] for b in c["bridges"] if b["state"] == "open"])


def get_json(url: str) -> tuple[int, dict]:
    try:
        with _NO_PROXY.open(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def junction(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "junction", *argv], capture_output=True, text=True, env=ENV, timeout=60)


# -- ports ----------------------------------------------------------------------------------
def test_one_port_offset_moves_every_port_of_every_node(appliance):
    world, k = appliance, appliance.offset
    assert f"(every port moved by --port-offset {k})" in world.output()
    for path in world.folder.iterdir():  # the files are the shipped ones, untouched
        if path.is_file():
            assert path.read_bytes() == (APPLIANCE / path.name).read_bytes(), path.name
    expected = {"gateway": {"all": 61616, "amqp": 5672, "stomp": 61613}}
    expected.update({f"core{i}": {"gateway-in": 61616 + i, "cluster": 61716 + i} for i in (1, 2, 3)})
    for shipped, name in NODE_PORTS.items():
        node = status(world.port(shipped))
        assert node["name"] == name
        assert node["management"]["port"] == shipped + k
        assert {a["name"]: a["port"] for a in node["acceptors"]} == {a: p + k for a, p in expected[name].items()}
        assert all(a["listening"] for a in node["acceptors"])
    # the gateway reaches the cores through its moved connectors ...
    code, target = get_json(world.url(8161) + "/api/routers/shard/target?key=admin")
    assert code == 200
    core = target["connector"]["name"]
    assert int(target["connector"]["params"]["port"]) == 61616 + int(core[-1]) + k
    # ... and each core its peers through the moved static connectors
    for i in (1, 2, 3):
        bridges = [b for c in status(world.port(8161 + i))["cluster"]["connections"] for b in c["bridges"]]
        assert sorted(b["target"] for b in bridges) == [f"127.0.0.1:{61716 + j + k}" for j in (1, 2, 3) if j != i]


# -- the docs' management write examples ---------------------------------------------------------
def shell_commands(path):
    """``(where, command)`` for each command in the sh/bash/shell code blocks of a Markdown file.

    A command goes on over lines that end in a backslash or while a quote is open, as in a shell.
    """
    fence, pending, start = None, [], 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = line.strip()[3:] if fence is None else None
            pending = []
            continue
        if fence not in ("sh", "bash", "shell", "console"):
            continue
        if not pending:
            start = number
            line = line.removeprefix("$ ")
        pending.append(line)
        text = "\n".join(pending)
        if text.endswith("\\"):
            continue
        try:
            shlex.split(text, comments=True)
        except ValueError:  # a quote still open
            continue
        pending = []
        yield f"{path.name}:{start}", text


def write_examples():
    """Every curl command of README.md and docs/*.md that changes something (a method other than GET)."""
    found = []
    for doc in DOCS:
        for where, text in shell_commands(doc):
            argv = shlex.split(text, comments=True)
            if not argv or argv[0] != "curl":
                continue
            method = argv[argv.index("-X") + 1] if "-X" in argv else None
            data = next((argv[i + 1] for i, a in enumerate(argv) if a in ("-d", "--data")), None)
            method = method or ("POST" if data is not None else "GET")
            if method in ("GET", "HEAD"):
                continue
            url = next(a for a in argv if a.startswith("http"))
            found.append(SimpleNamespace(where=where, text=text, method=method, url=url,
                                         data=json.loads(data) if data else None))
    return found


def moved(text: str, offset: int) -> str:
    """*text* with every shipped appliance port on 127.0.0.1 moved by *offset* (the only change made)."""
    return re.sub(r"(?<=127\.0\.0\.1:)(\d+)\b",
                  lambda m: str(int(m[1]) + offset) if int(m[1]) in SHIPPED_PORTS else m[1], text)


def run_curl(world, text: str) -> tuple[int, str]:
    """Run a command with bash, curl writing the HTTP status after the body (a .curlrc, not the command)."""
    home = world.tmp / "curl"
    home.mkdir(exist_ok=True)
    (home / ".curlrc").write_text('--silent\n--show-error\n--write-out "\\n%{http_code}"\n')
    result = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=30,
                            env=dict(ENV, CURL_HOME=str(home)))
    assert result.returncode == 0, f"{text}\n{result.stderr}"
    body, _, code = result.stdout.rpartition("\n")
    return int(code), body


def check_effect(world, example, body: dict) -> None:
    """What the example changed is changed (else the test names the example it cannot check)."""
    split = urllib.parse.urlsplit(example.url)
    shipped, path, data = split.port, split.path.rstrip("/"), example.data or {}
    base = world.url(shipped)
    if re.fullmatch(r"/api/routers/[^/]+/filters", path):
        code, filters = get_json(base + path)
        assert code == 200 and all(filters[k] == (v or None) for k, v in data.items()), filters
    elif path == "/api/queues" and example.method == "POST":
        name = data["name"]
        want = (data.get("address", name), data.get("routing_type", "ANYCAST").upper())
        nodes = [shipped] if NODE_PORTS[shipped] == "gateway" else [8162, 8163, 8164]  # a core's: the cluster's
        for node in nodes:
            wait_for(lambda n=node: (q := get_json(f"{world.url(n)}/api/queues/{name}")[1]).get("name") == name
                     and (q["address"], q["routing_type"]) == want, TIMEOUT, what=f"queue {name} on {NODE_PORTS[node]}")
    elif re.fullmatch(r"/api/queues/[^/]+", path) and example.method == "DELETE":
        assert get_json(base + path)[0] == 404
    elif path == "/api/tls/reload":
        assert body == {"reloaded": [], "failed": {}}  # the shipped appliance has no TLS acceptor
    elif path in ("/jolokia", "/console/jolokia") and data.get("type") == "write":
        assert body["status"] == 200, body
        request = {"type": "read", "mbean": data["mbean"], "attribute": data["attribute"]}
        with _NO_PROXY.open(urllib.request.Request(base + path + "/", json.dumps(request).encode()), timeout=10) as r:
            assert json.loads(r.read())["value"] == data["value"]
    else:
        pytest.fail(f"{example.where}: a management write example this test does not know how to check:\n"
                    f"{example.text}")
    node = NODE_PORTS[shipped]
    wait_for(lambda: re.search(rf"^{node} \| .*management API: {example.method} {re.escape(split.path)}\S* by user admin$",
                               world.output(), re.M), TIMEOUT, what=f"{node} logged the change by admin")


def test_the_docs_management_write_examples_work_on_the_shipped_appliance(appliance):
    world = appliance
    examples = write_examples()
    shown = {(e.method, urllib.parse.urlsplit(e.url).path) for e in examples}
    # the docs show every kind of change the API makes, so each is run here
    assert {("PUT", "/api/routers/shard/filters"), ("POST", "/api/tls/reload"), ("POST", "/api/queues"),
            ("DELETE", "/api/queues/ledger"), ("POST", "/jolokia/")} <= shown, shown
    for example in examples:
        code, body = run_curl(world, moved(example.text, world.offset))
        assert 200 <= code < 300, f"{example.where}: HTTP {code} {body}\n{example.text}"
        check_effect(world, example, json.loads(body))
    # security is still on: no credentials, or a user without manage, change nothing
    first = moved(examples[0].text, world.offset)
    assert run_curl(world, first.replace("-u admin:admin", ""))[0] == 401
    assert run_curl(world, first.replace("-u admin:admin", "-u probe:probe"))[0] == 403
    # back to the shipped filters for the other tests
    code, _ = run_curl(world, f"curl -u admin:admin -X PUT -d '{{\"localTargetFilter\": null, \"keyFilter\": null}}' "
                              f"{world.url(8161)}/api/routers/shard/filters")
    assert code == 200


def test_the_docs_reading_commands_work_on_the_shipped_appliance(appliance):
    """Every `curl` GET and `junction status|route` of the docs answers, run with the appliance's --port-offset."""
    world, ran = appliance, []
    for doc in DOCS:
        for where, text in shell_commands(doc):
            argv = shlex.split(moved(text, world.offset), comments=True)
            if argv and argv[0] == "curl" and "-X" not in argv and "-d" not in argv:
                code, body = run_curl(world, moved(text, world.offset))
                assert code == 200, f"{where}: HTTP {code} {body[:200]}\n{text}"
            elif argv and argv[0].endswith("junction") and argv[1:2] in (["status"], ["route"]):
                if "--url" not in argv:  # the node found as a user finds it: the folder and the offset
                    argv += ["--etc", str(world.folder), "--port-offset", str(world.offset)]
                result = junction(*argv[1:])
                assert result.returncode == 0, f"{where}: {text}\n{result.stderr}"
            else:
                continue
            ran.append(where)
    assert any(w.startswith("README.md") for w in ran) and len(ran) >= 4, ran


# -- junction status / junction route: the node meant, or say what answered -------------------------
@pytest.fixture
def foreign_http():
    """Another program's HTTP server (an Artemis console, say) on a port of this host."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><body>Not Found</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_status_and_route_check_they_reached_the_node_meant(appliance, foreign_http):
    world = appliance
    gateway, core1 = world.url(8161), world.url(8162)
    gateway_pid = status(world.port(8161))["pid"]

    ok = junction("status", "--url", gateway, "--node", "gateway")
    assert ok.returncode == 0 and ok.stdout.startswith("Node ") and "gateway (" in ok.stdout.splitlines()[0]
    node_id = status(world.port(8162))["node_id"]
    assert junction("status", "--url", core1, "--node", node_id).returncode == 0  # a node id works too

    other = junction("status", "--url", gateway, "--node", "core1")
    assert other.returncode == 3
    assert f"{gateway} is node gateway (" in other.stderr and "not core1" in other.stderr

    # a node's messaging port (STOMP) and another program's web server are not a management API
    stomp = junction("status", "--url", f"127.0.0.1:{world.port(61613)}")
    assert stomp.returncode == 3
    assert "is not a Junction node's management API" in stomp.stderr
    assert f"port {world.port(61613)} here is held by pid {gateway_pid} (" in stomp.stderr
    web = junction("status", "--url", f"http://127.0.0.1:{foreign_http}", "--json")
    assert web.returncode == 3 and web.stdout == ""
    assert "is not a Junction node's management API: it answered HTTP 404" in web.stderr
    assert f"held by pid {os.getpid()} (" in web.stderr

    route = junction("route", "shard", "admin", "--url", gateway, "--node", "gateway")
    assert route.returncode == 0, route.stderr
    lines = route.stdout.splitlines()
    assert lines[0].startswith("router:    shard on node gateway (")
    core, port = re.fullmatch(r"connector: core([123]) 127\.0\.0\.1:(\d+)", lines[-1]).groups()
    assert int(port) == 61616 + int(core) + world.offset
    wrong = junction("route", "shard", "admin", "--url", core1, "--node", "gateway")
    assert wrong.returncode == 3 and "is node core1 (" in wrong.stderr and "not gateway" in wrong.stderr
    assert junction("route", "shard", "admin", "--url", f"http://127.0.0.1:{foreign_http}").returncode == 3


# -- a node that cannot bind ---------------------------------------------------------------------
def test_a_node_that_cannot_bind_shows_the_port_in_the_live_table(tmp_path):
    offset = free_offset()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 8161 + offset))  # the gateway's management port, taken by this process
    squatter.listen(1)
    world = start_up(tmp_path, offset, "--status")
    try:
        reason = f"{8161 + offset} in use (management API), by pid {os.getpid()} ("

        def gateway_row():
            screens = world.output().split("\x1b[H\x1b[2J")
            rows = [line for line in screens[-1].splitlines() if line.startswith("gateway ")] if len(screens) > 1 else []
            return rows[0] if rows else ""

        wait_for(lambda: reason in gateway_row(), TIMEOUT, interval=0.1, what="the gateway's row saying why")
        assert "restarting in" in gateway_row() or "starting" in gateway_row()
        assert re.search(rf"gateway: exited \(exit 3\): {re.escape(reason)}", world.output())
        squatter.close()  # the port is free again: the next restart binds it
        wait_for(lambda: (status(world.port(8161)) or {}).get("name") == "gateway", TIMEOUT, interval=0.1,
                 what="the gateway up once the port is free")
        wait_for(lambda: " running " in gateway_row(), TIMEOUT, interval=0.1, what="the table shows it running")
    finally:
        squatter.close()
        assert stop_up(world) == 0
