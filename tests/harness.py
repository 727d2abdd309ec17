"""Process-level test support: run a real ``python -m junction run`` and wait on it.

Modelled on qpid-dispatch's ``system_test.py``: every test that needs a broker
gets its own directory holding a generated Artemis-style ``broker.xml``, the
users/roles properties files, the broker's data directories and its
stdout/stderr logs, so a failing test leaves everything needed to understand
it in one place.

Rules this module exists to enforce:

* **No sleeping as synchronisation.**  Anything that waits for something to
  become true goes through :func:`wait_for`, which polls with a deadline and
  raises a :class:`TimeoutError` naming what it waited for.  The only sleep is
  the poll interval inside :func:`wait_for`.
* **No orphan processes.**  Every :class:`BrokerProcess` that is started is
  registered and stopped by an ``atexit`` hook (and by the pytest fixture
  finalizers in ``tests/conftest.py``); on Linux the child also gets
  ``PR_SET_PDEATHSIG`` so it receives SIGTERM if the test process dies hard
  (SIGKILL, OOM killer) and ``atexit`` never runs (:mod:`tests.childproc`,
  the lifecycle it shares with the real Artemis broker of :mod:`tests.artemis`).

Limits:

* :func:`free_port` hands out a port that was free a moment ago; another
  process can still take it before the broker binds it.  What it does about
  that: it picks from :func:`port_range`, the ports *below the kernel's
  ephemeral range* (``/proc/sys/net/ipv4/ip_local_port_range``), so no
  outgoing connection of any process gets one as its source port (binding
  port 0 picks an ephemeral port, which every ``connect()`` on the machine
  also draws from); it gives each pytest-xdist worker its own slice of that
  range (``PYTEST_XDIST_WORKER`` of ``PYTEST_XDIST_WORKER_COUNT``), starts
  at a random place in the slice (another test run on the same machine has
  workers of the same numbers), checks each candidate by binding and
  listening on it, and never hands the same port out twice in one process.
  Left: a port bound by a process of another run in the moment between the
  check and the broker's bind, and a machine whose ephemeral range leaves
  less than :data:`MIN_PORT_RANGE` ports free above :data:`PORT_RANGE_START`
  (then it falls back to binding port 0).  A test that must be immune binds
  the port itself.
* ``PR_SET_PDEATHSIG`` fires when the *thread* that started the child exits,
  not the process; start brokers from the main thread or a thread that lives
  as long as the broker should (pass ``die_with_parent=False`` otherwise).
* Only the stdlib is used, so the module imports fine in unit tests and in
  ``bench/``; HTTP is plain ``urllib`` against the management API.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from xml.sax.saxutils import escape, quoteattr

from tests.childproc import ChildProcess

#: The repository root (the folder holding the ``junction`` package); put on
#: the child's PYTHONPATH so the broker runs from this checkout, installed or not.
REPO_ROOT = Path(__file__).resolve().parents[1]

LOOPBACK = "127.0.0.1"

#: urllib opener that ignores http_proxy & co.: the management API is on loopback.
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

T = TypeVar("T")

# --------------------------------------------------------------------------- ports

#: The lowest port :func:`free_port` hands out (the usual ports of common services are below).
PORT_RANGE_START = 10000
#: Fewer free ports than this between PORT_RANGE_START and the ephemeral range: use port 0.
MIN_PORT_RANGE = 1000
#: Where the kernel keeps its ephemeral (outgoing source and port 0) range.
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
#: Candidates free_port tries before giving up.
PORT_TRIES = 200

_handed_out: set[int] = set()
_ports_lock = threading.Lock()
_port_rng = random.Random()  # seeded from os.urandom: parallel runs start apart


def ephemeral_range(path: str = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The kernel's ephemeral port range ``(low, high)``, or None where it cannot be read."""
    try:
        with open(path, encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        return None
    return low, high


def port_range(
    ephemeral: tuple[int, int] | None,
    worker: str | None = None,
    workers: str | None = None,
) -> range | None:
    """The ports this process picks from: its xdist worker's slice of the ports between
    :data:`PORT_RANGE_START` and the ephemeral range (or above it, where that is larger).

    ``worker``/``workers`` are ``PYTEST_XDIST_WORKER`` (``gw3``) and
    ``PYTEST_XDIST_WORKER_COUNT``; None when the range is too small (or unknown).
    """
    if ephemeral is None:
        return None
    low, high = ephemeral
    below = range(PORT_RANGE_START, max(PORT_RANGE_START, low))
    above = range(max(PORT_RANGE_START, high + 1), 65536)
    ports = max(below, above, key=len)
    if len(ports) < MIN_PORT_RANGE:
        return None
    try:
        count = max(1, int(workers or 1))
        index = int((worker or "gw0").lstrip("gw")) % count
    except ValueError:
        count, index = 1, 0
    size = len(ports) // count
    if size < MIN_PORT_RANGE // 10:  # too many workers to slice: share the range
        return ports
    return ports[index * size : (index + 1) * size]


def _claims_dir() -> str:
    """Where this test run's processes claim ports: one directory per run (the xdist
    controller's pid for its workers, this process's own without xdist)."""
    run = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    return os.path.join(tempfile.gettempdir(), f"junction-test-ports-{run}")


def claim_port(port: int) -> bool:
    """Claim ``port`` for this process among the run's worker processes (a file made with
    O_EXCL): False when another process of the run has it.  Ports a test picks by arithmetic
    (``junction up --port-offset``) may fall in another worker's slice of :func:`port_range`;
    claimed, that worker's :func:`free_port` never hands them out, even while the port is
    briefly free (a node restarting)."""
    directory = _claims_dir()
    os.makedirs(directory, exist_ok=True)
    try:
        os.close(os.open(os.path.join(directory, str(port)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _bindable(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound and listened on right now (then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK) -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    Picks from :func:`port_range` (below the ephemeral range, this xdist
    worker's slice), from a random start, each candidate checked by binding
    and listening; ports already returned by this process are skipped, so
    consecutive calls give distinct ports.  Racy by nature (see the module
    docstring): a test that must be immune binds the port itself.
    """
    with _ports_lock:
        ports = port_range(
            ephemeral_range(),
            os.environ.get("PYTEST_XDIST_WORKER"),
            os.environ.get("PYTEST_XDIST_WORKER_COUNT"),
        )
        if ports is not None:
            start = _port_rng.randrange(len(ports))
            for i in range(min(PORT_TRIES, len(ports))):
                port = ports[(start + i) % len(ports)]
                if port not in _handed_out and _bindable(host, port) and claim_port(port):
                    _handed_out.add(port)
                    return port
        else:  # no room below the ephemeral range: the kernel's choice
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            for _ in range(PORT_TRIES):
                with socket.socket(family, socket.SOCK_STREAM) as s:
                    s.bind((host, 0))
                    port = s.getsockname()[1]
                if port not in _handed_out:
                    _handed_out.add(port)
                    return port
    raise RuntimeError(f"free_port: no free port on {host} after {PORT_TRIES} tries")


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True if a TCP connect to ``host:port`` succeeds (the port is listening)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- waiting


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll ``predicate()`` until it returns something truthy; return that value.

    Polls every ``interval`` seconds until ``timeout`` seconds (monotonic
    clock) have passed; the predicate is always called at least once and
    once more at the deadline, so a slow interval cannot make it miss the
    last chance.  On expiry raises :class:`TimeoutError` with ``what`` and the
    last value the predicate returned, e.g. ``timed out after 5.0 s waiting
    for broker b1 health``.  Exceptions raised by the predicate propagate
    unchanged: a predicate that should tolerate errors (a port not yet
    listening) catches them itself.
    """
    if timeout < 0:
        raise ValueError("timeout must be >= 0")
    if interval <= 0:
        raise ValueError("interval must be > 0")
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"timed out after {timeout:g} s waiting for {what} (last value: {value!r})"
            )
        time.sleep(min(interval, remaining))


# --------------------------------------------------------------------------- broker


class BrokerExited(RuntimeError):
    """The broker process exited while the harness was waiting for it."""


#: Artemis permission types, granted to every role of ``users`` when security
#: is on and the caller supplied no ``<security-settings>`` of its own.
_ALL_PERMISSIONS = (
    "send",
    "consume",
    "createAddress",
    "deleteAddress",
    "createDurableQueue",
    "deleteDurableQueue",
    "createNonDurableQueue",
    "deleteNonDurableQueue",
    "manage",
    "browse",
)


def core_acceptor(port: int) -> str:
    """A ``protocols=CORE`` acceptor named ``core`` on loopback ``port``, for a node's
    ``extra_acceptors_xml`` (the Artemis JMS client's tests and benchmarks)."""
    return f'<acceptor name="core">tcp://{LOOPBACK}:{port}?protocols=CORE</acceptor>'


class BrokerProcess(ChildProcess):
    """One Junction broker run as a child process, in its own directory.

    ``tmp_dir/name`` holds ``broker.xml`` (written at construction, see
    :meth:`broker_xml`), ``artemis-users.properties`` /
    ``artemis-roles.properties`` (see :meth:`users_properties`), ``data/`` (the
    journal, bindings, paging and large-message directories, relative to the
    config file as the broker resolves them) and ``stdout.log`` /
    ``stderr.log``, which are appended to across restarts.

    Ports are chosen once (``free_port()`` when not given) and kept across
    :meth:`restart`, so clients can reconnect to the same address.

    ``users`` maps user name to ``(password, roles)``; passwords are written in
    plain text, which Artemis's properties login module accepts.  With
    ``security=True`` and no ``<security-settings>`` in ``extra_core_xml``,
    every role named in ``users`` is granted every permission on ``#``.

    ``address_settings_xml`` is either the inner ``<address-setting>``
    elements or a complete ``<address-settings>`` element.
    ``extra_acceptors_xml`` and ``extra_junction_xml`` are inserted verbatim
    inside ``<acceptors>`` and ``<junction>``; ``extra_core_xml`` verbatim
    inside ``<core>``.

    ``stomp_acceptor_params`` maps extra URL parameters of the ``stomp``
    acceptor (e.g. ``{"anycastPrefix": "/queue/", "multicastPrefix":
    "/topic/"}``); they are appended after ``protocols=STOMP``, ``;``-separated.
    ``amqp_acceptor_params`` does the same for the ``amqp`` acceptor
    (``protocols=AMQP`` on ``amqp_port``).

    ``env`` entries are added to (not substituted for) the inherited
    environment; a value of ``None`` removes that variable.
    """

    def __init__(
        self,
        tmp_dir: str | os.PathLike[str],
        *,
        name: str,
        stomp_port: int | None = None,
        amqp_port: int | None = None,
        mgmt_port: int | None = None,
        security: bool = False,
        users: Mapping[str, tuple[str, str | list[str] | tuple[str, ...]]] | None = None,
        extra_core_xml: str = "",
        address_settings_xml: str = "",
        env: Mapping[str, str | None] | None = None,
        anonymous_user: str | None = "guest",
        persistence: bool = True,
        extra_acceptors_xml: str = "",
        extra_junction_xml: str = "",
        stomp_acceptor_params: Mapping[str, str] | None = None,
        amqp_acceptor_params: Mapping[str, str] | None = None,
        security_attributes: Mapping[str, str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        #: extra attributes of ``<junction><security>`` (``cert-users-file`` ...)
        self.security_attributes = dict(security_attributes or {})
        self.host = LOOPBACK
        self.dir = Path(tmp_dir) / name
        self.stomp_port = stomp_port if stomp_port is not None else free_port()
        self.amqp_port = amqp_port if amqp_port is not None else free_port()
        self.mgmt_port = mgmt_port if mgmt_port is not None else free_port()
        self.security = security
        self.users = dict(users or {})
        self.extra_core_xml = extra_core_xml
        self.address_settings_xml = address_settings_xml
        self.env = dict(env or {})
        self.anonymous_user = anonymous_user
        self.persistence = persistence
        self.extra_acceptors_xml = extra_acceptors_xml
        self.extra_junction_xml = extra_junction_xml
        self.stomp_acceptor_params = dict(stomp_acceptor_params or {})
        self.amqp_acceptor_params = dict(amqp_acceptor_params or {})
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._out = None
        self._err = None
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_config()

    # ----------------------------------------------------------------- files

    @property
    def config_path(self) -> Path:
        return self.dir / "broker.xml"

    @property
    def stdout_path(self) -> Path:
        return self.dir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.dir / "stderr.log"

    @property
    def users_path(self) -> Path:
        return self.dir / "artemis-users.properties"

    @property
    def roles_path(self) -> Path:
        return self.dir / "artemis-roles.properties"

    def _roles(self) -> dict[str, list[str]]:
        """role -> users, in first-seen order (Artemis's roles file layout)."""
        roles: dict[str, list[str]] = {}
        for user, (_password, user_roles) in self.users.items():
            if isinstance(user_roles, str):
                user_roles = [r.strip() for r in user_roles.split(",") if r.strip()]
            for role in user_roles:
                roles.setdefault(role, []).append(user)
        return roles

    def users_properties(self) -> str:
        """``artemis-users.properties``: ``user = password`` (plain text).

        The broker refuses an ``anonymous-user`` that is not in the users
        file, so when ``anonymous_user`` is set and not among ``users`` it is
        added with a random password and no roles: with security on it can
        then connect anonymously but is granted nothing unless the caller
        lists it in ``users`` with roles.
        """
        lines = ["# generated by tests/harness.py"]
        lines += [f"{_prop_key(u)} = {pw}" for u, (pw, _r) in self.users.items()]
        if self.anonymous_user is not None and self.anonymous_user not in self.users:
            lines.append(f"{_prop_key(self.anonymous_user)} = {secrets.token_hex(16)}")
        return "\n".join(lines) + "\n"

    def roles_properties(self) -> str:
        """``artemis-roles.properties``: ``role = user1,user2``."""
        lines = ["# generated by tests/harness.py"]
        lines += [f"{_prop_key(r)} = {','.join(us)}" for r, us in self._roles().items()]
        return "\n".join(lines) + "\n"

    def broker_xml(self) -> str:
        """The ``broker.xml`` text for this broker's settings."""
        b = "true" if self.persistence else "false"
        s = "true" if self.security else "false"
        anon = (
            f" anonymous-user={quoteattr(self.anonymous_user)}"
            if self.anonymous_user is not None
            else ""
        )
        security_extra = "".join(f" {k}={quoteattr(str(v))}" for k, v in self.security_attributes.items())
        stomp_params = "".join(f";{k}={v}" for k, v in self.stomp_acceptor_params.items())
        amqp_params = "".join(f";{k}={v}" for k, v in self.amqp_acceptor_params.items())
        asx = self.address_settings_xml.strip()
        if not asx.startswith("<address-settings"):
            asx = f"<address-settings>{asx}</address-settings>"
        security_settings = ""
        if self.security and "<security-settings" not in self.extra_core_xml:
            roles = ",".join(self._roles())
            if roles:
                perms = "".join(
                    f'\n        <permission type="{p}" roles={quoteattr(roles)}/>'
                    for p in _ALL_PERMISSIONS
                )
                security_settings = (
                    f'\n    <security-settings>\n      <security-setting match="#">{perms}'
                    "\n      </security-setting>\n    </security-settings>"
                )
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>{escape(self.name)}</name>
    <persistence-enabled>{b}</persistence-enabled>
    <journal-directory>data/journal</journal-directory>
    <bindings-directory>data/bindings</bindings-directory>
    <paging-directory>data/paging</paging-directory>
    <large-messages-directory>data/large</large-messages-directory>
    <security-enabled>{s}</security-enabled>
    <acceptors>
      <acceptor name="stomp">tcp://{self.host}:{self.stomp_port}?protocols=STOMP{escape(stomp_params)}</acceptor>
      <acceptor name="amqp">tcp://{self.host}:{self.amqp_port}?protocols=AMQP{escape(amqp_params)}</acceptor>
      {self.extra_acceptors_xml}
    </acceptors>
    <junction>
      <management host="{self.host}" port="{self.mgmt_port}"/>
      <security users-file="{self.users_path.name}" roles-file="{self.roles_path.name}"{anon}{security_extra}/>
      {self.extra_junction_xml}
    </junction>{security_settings}
    {asx}
    {self.extra_core_xml}
  </core>
</configuration>
"""

    def write_config(self) -> None:
        """(Re)write broker.xml and the users/roles properties files.

        Called by the constructor; call it again after changing attributes
        (then :meth:`restart`) to run the broker with a new configuration.
        """
        self.config_path.write_text(self.broker_xml(), encoding="utf-8")
        # always written (empty without users): broker.xml names them, and the
        # broker, like Artemis's properties login module, expects them to exist
        self.users_path.write_text(self.users_properties(), encoding="utf-8")
        self.roles_path.write_text(self.roles_properties(), encoding="utf-8")

    # ----------------------------------------------------------------- lifecycle

    @property
    def stomp_address(self) -> tuple[str, int]:
        """``(host, port)`` of the STOMP acceptor, as stomp.py wants it."""
        return (self.host, self.stomp_port)

    @property
    def amqp_address(self) -> tuple[str, int]:
        """``(host, port)`` of the AMQP acceptor."""
        return (self.host, self.amqp_port)

    @property
    def amqp_url(self) -> str:
        """``amqp://host:port`` for python-qpid-proton."""
        return f"amqp://{self.host}:{self.amqp_port}"

    @property
    def mgmt_url(self) -> str:
        return f"http://{self.host}:{self.mgmt_port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "junction", "run", "--config", str(self.config_path)]

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        pp = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + pp if pp else "")
        env["PYTHONUNBUFFERED"] = "1"
        for k, v in self.env.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def start(self, timeout: float | None = None) -> BrokerProcess:
        """Launch the broker and wait until ``/api/health`` says ``ok``.

        Fails fast with :class:`BrokerExited` (log tail in the message) if the
        process exits while starting; on a readiness timeout the process is
        stopped and :class:`TimeoutError` raised, also with the log tail.
        Returns ``self`` so ``BrokerProcess(...).start()`` chains.
        """
        if self.running:
            raise RuntimeError(f"broker {self.name} is already running (pid {self.pid})")
        self._close_logs()
        self.starts += 1
        banner = f"\n===== harness: start #{self.starts} at {time.strftime('%H:%M:%S')} =====\n"
        self._out = open(self.stdout_path, "ab")  # closed by _forget()
        self._err = open(self.stderr_path, "ab")
        for f in (self._out, self._err):
            f.write(banner.encode())
            f.flush()
        self._spawn(
            self.command(), cwd=self.dir, env=self._child_env(), stdout=self._out, stderr=self._err
        )
        try:
            self.wait_ready(timeout if timeout is not None else self.startup_timeout)
        except TimeoutError as e:
            tail = self.log_tail()
            self.stop()
            raise TimeoutError(f"{e}\n--- {self.name} log tail ---\n{tail}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        """One readiness probe; raises :class:`BrokerExited` if the child is gone."""
        if self.proc is None:
            raise BrokerExited(f"broker {self.name} was never started")
        rc = self.proc.poll()
        if rc is not None:
            raise BrokerExited(
                f"broker {self.name} exited with status {rc} while starting"
                f"\n--- {self.name} log tail ---\n{self.log_tail()}"
            )
        try:
            return self.health(timeout=1.0).get("status") == "ok"
        except (OSError, ValueError):  # refused, HTTP error, not JSON yet
            return False

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until health is ``ok``; see :meth:`start`."""
        wait_for(
            self._ready,
            timeout if timeout is not None else self.startup_timeout,
            interval=0.05,
            what=f"broker {self.name} health at {self.mgmt_url}/api/health",
        )

    def _close_logs(self) -> None:
        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<BrokerProcess {self.name} stomp={self.stomp_port} mgmt={self.mgmt_port} {state}>"

    # ----------------------------------------------------------------- logs

    def log_text(self) -> str:
        """stdout.log then stderr.log, whole (both appended across restarts)."""
        parts = []
        for p in (self.stdout_path, self.stderr_path):
            text = p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""
            parts.append(f"--- {p.name} ---\n{text}")
        return "\n".join(parts)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of each log file, for failure messages."""
        parts = []
        for p in (self.stdout_path, self.stderr_path):
            text = p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- {p.name} (last {lines} lines) ---\n{tail}")
        return "\n".join(parts)

    # ----------------------------------------------------------------- management API

    def get_json(self, path: str, timeout: float = 5.0) -> Any:
        """GET ``path`` from the management API and decode the JSON body.

        Raises ``urllib.error.HTTPError`` on a non-2xx status, ``OSError`` if
        the API is not reachable, ``ValueError`` if the body is not JSON.
        """
        with _NO_PROXY.open(self.mgmt_url + path, timeout=timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def health(self, timeout: float = 5.0) -> dict:
        """``GET /api/health`` as a dict (``{"status": "ok", ...}`` when ready)."""
        return self.get_json("/api/health", timeout)

    def status(self, timeout: float = 5.0) -> dict:
        """``GET /api/status`` as a dict."""
        return self.get_json("/api/status", timeout)


def _prop_key(key: str) -> str:
    """Escape a java.util.Properties key (``=``, ``:``, whitespace, ``#``/``!``)."""
    out = []
    for i, ch in enumerate(key):
        if ch in "=: \\" or (i == 0 and ch in "#!"):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


__all__ = [
    "LOOPBACK",
    "REPO_ROOT",
    "BrokerExited",
    "BrokerProcess",
    "free_port",
    "port_open",
    "wait_for",
]


# --------------------------------------------------------------------------- status queries


def queue_status(broker: BrokerProcess, name: str) -> dict | None:
    """Queue ``name`` as ``/api/status`` lists it, or None if it does not exist."""
    for q in broker.status()["queues"]:
        if q["name"] == name:
            return q
    return None


def address_status(broker: BrokerProcess, name: str) -> dict | None:
    """Address ``name`` as ``/api/status`` lists it, or None if it does not exist."""
    for a in broker.status()["addresses"]:
        if a["name"] == name:
            return a
    return None


def wait_queue(broker: BrokerProcess, name: str, timeout: float = 10.0, *, interval: float = 0.02, **expected) -> dict:
    """Poll the management API until queue ``name`` exists with the ``expected`` field values.

    Raises AssertionError (with the queue's last status) at the deadline, so a
    test fails with what it saw rather than a bare timeout.
    """

    def check():
        q = queue_status(broker, name)
        if q is not None and all(q.get(k) == v for k, v in expected.items()):
            return q
        return None

    try:
        return wait_for(check, timeout, interval=interval, what=f"queue {name} with {expected}")
    except TimeoutError as e:
        raise AssertionError(f"{e}; queue now: {queue_status(broker, name)}") from None


def router_xml(
    connectors: Mapping[str, str],
    *,
    key_type: str = "CLIENT_ID",
    policy: str = "FIRST_ELEMENT",
    name: str = "r",
    check_period: int = 200,
    username: str = "pool",
    password: str = "pool-secret",
) -> str:
    """``<connectors>`` plus one ``<connection-router>`` whose pool is those connectors, for ``extra_core_xml``.

    ``connectors`` maps connector name to its URL (``tcp://127.0.0.1:PORT?...``).
    """
    defined = "".join(f'<connector name="{n}">{escape(url)}</connector>' for n, url in connectors.items())
    refs = "".join(f"<connector-ref>{n}</connector-ref>" for n in connectors)
    return f"""
    <connectors>{defined}</connectors>
    <connection-routers>
      <connection-router name="{name}">
        <key-type>{key_type}</key-type>
        <policy name="{policy}"/>
        <pool>
          <username>{username}</username><password>{password}</password>
          <check-period>{check_period}</check-period><quorum-timeout>500</quorum-timeout>
          <static-connectors>{refs}</static-connectors>
        </pool>
      </connection-router>
    </connection-routers>"""
