"""The real Apache ActiveMQ Artemis broker as a child process, in a directory of its own.

:class:`ArtemisBroker` makes a broker instance with the distribution's own ``artemis create``
(on 127.0.0.1, no web console, a small heap, the user and login rule asked for), moves its
acceptors to free loopback ports, and runs ``bin/artemis run`` in the foreground.  It is
ready when its log says ``AMQ221007`` (Server is now active) and its ports answer; it stops
with SIGTERM (Artemis's orderly shutdown), then SIGKILL after :data:`STOP_TIMEOUT_S`; it can
be killed with ``kill -9`` and started again on the same instance, data and ports.

``<dir>`` (``tmp_dir/name``) is the instance as ``artemis create`` writes it: ``etc/``
(``broker.xml``, the users and roles), ``data/`` (journal, bindings, paging, large
messages) and ``log/`` (``artemis.log``, and ``console.log``: the broker's stdout and stderr,
appended across restarts with a banner per start).

Its lifecycle is :class:`tests.childproc.ChildProcess`'s, as a Junction node's is in
:mod:`tests.harness`: stopped at interpreter exit, ``PR_SET_PDEATHSIG`` so it dies with a
test process killed outright, :attr:`died` when it exited by itself.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from tests.artemis.cache import ArtemisDist
from tests.console_child import ChildExited, ConsoleChild
from tests.harness import LOOPBACK, free_port

#: JVM options a test broker runs with, in place of the shipped collector: C1 only and the
#: serial collector -- a test broker lives for seconds to minutes on a two-CPU machine, where
#: C2's compilations and G1's threads cost more CPU than they save.  Benchmarks pass
#: ``jvm_options=()`` to run the broker as shipped.
TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: The broker's maximum heap (``artemis create --java-memory``); Artemis's own default is 2G.
HEAP = "256M"
#: Seconds ``artemis create`` may take, a start until ready, and an orderly stop.
CREATE_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
#: The log line of a broker that is up: "AMQ221007: Server is now active".
READY_LOG_CODE = "AMQ221007"
#: Exit statuses of an orderly stop: the JVM exits with 128 + SIGTERM after its shutdown hooks.
ORDERLY_EXIT = (0, 128 + signal.SIGTERM)
#: The acceptors ``artemis create`` writes, by name: the main one speaks every protocol.
ACCEPTORS = ("artemis", "amqp", "stomp")
#: Options of ``artemis create`` for every test broker: loopback, no web console, no
#: journal auto-tuning (its disk test costs seconds), and no HornetQ or MQTT acceptors.
CREATE_OPTIONS = (
    "--silent", "--host", LOOPBACK, "--http-host", LOOPBACK, "--no-web", "--no-autotune",
    "--no-hornetq-acceptor", "--no-mqtt-acceptor",
)  # fmt: skip

_ACCEPTOR_RE = re.compile(r'(<acceptor name="([^"]+)">tcp://)([^:/?<]+):(\d+)')
_GC_RE = re.compile(r"^-XX:\+Use\w+GC$")
_NODE_ID_RE = re.compile(r"AMQ221001: .*?, nodeID=([0-9a-f-]+)\]")


def router_xml(
    name: str,
    connectors: Mapping[str, str],
    *,
    key: str = "CLIENT_ID",
    policy: str = "FIRST_ELEMENT",
    user: str = "admin",
    password: str = "admin",
    check_period_ms: int = 200,
) -> str:
    """``<connectors>`` and one ``<connection-router>`` over a static pool of them, for
    :class:`ArtemisBroker`'s ``extra_core_xml``: ``connectors`` maps a connector name to its
    URL (``tcp://host:port``); the pool checks its targets with ``user``/``password`` (the
    targets' own login) every ``check_period_ms`` (Artemis's default is 5 s)."""
    defined = "".join(f"<connector name={quoteattr(n)}>{escape(url)}</connector>" for n, url in connectors.items())
    refs = "".join(f"<connector-ref>{escape(n)}</connector-ref>" for n in connectors)
    return (
        f"<connectors>{defined}</connectors>"
        f"<connection-routers><connection-router name={quoteattr(name)}>"
        f"<key-type>{key}</key-type><policy name={quoteattr(policy)}/>"
        f"<pool><username>{escape(user)}</username><password>{escape(password)}</password>"
        f"<check-period>{check_period_ms}</check-period>"
        f"<static-connectors>{refs}</static-connectors></pool>"
        "</connection-router></connection-routers>"
    )


class ArtemisExited(ChildExited):
    """The Artemis broker exited while the harness was waiting for it."""


class ArtemisBroker(ConsoleChild):
    """One real Artemis broker instance in ``tmp_dir/name`` (see the module docstring).

    ``user``/``password``: the user ``artemis create`` makes (role ``amq``, every permission);
    ``anonymous``: connections without credentials are let in (``--allow-anonymous``) rather
    than refused (``--require-login``).  ``amqp``/``stomp``: also run Artemis's AMQP and STOMP
    acceptors (each on its own free port); the main acceptor ``artemis`` (:attr:`core_port`)
    speaks every protocol, or the comma-separated ``protocols``.  ``address_settings``:
    ``{match: {element: value}}`` added to ``<address-settings>``, e.g. ``{"full.#":
    {"max-size-bytes": "10K", "address-full-policy": "BLOCK"}}``.  ``create_options``: more
    ``artemis create`` options.  ``router``: the main acceptor routes its connections with the
    ``<connection-router>`` of that name (its ``router=`` parameter); ``extra_core_xml``: more
    elements of ``<core>`` (``<connectors>``, ``<connection-routers>``: see
    :func:`router_xml`).  ``edit_broker_xml(fn)`` changes anything else.
    """

    kind = "Artemis broker"
    exited_error = ArtemisExited

    def __init__(
        self,
        dist: ArtemisDist,
        tmp_dir: Path,
        name: str = "artemis",
        *,
        user: str = "admin",
        password: str = "admin",
        anonymous: bool = False,
        amqp: bool = False,
        stomp: bool = False,
        protocols: str | None = None,
        address_settings: Mapping[str, Mapping[str, str]] | None = None,
        heap: str = HEAP,
        jvm_options: Sequence[str] = TEST_JVM_OPTIONS,
        create_options: Sequence[str] = (),
        router: str | None = None,
        extra_core_xml: str = "",
        startup_timeout: float = STARTUP_TIMEOUT_S,
        stop_timeout: float = STOP_TIMEOUT_S,
        die_with_parent: bool = True,
    ) -> None:
        self.dist = dist
        self.name = name
        self.dir = Path(tmp_dir) / name
        self.user, self.password, self.anonymous = user, password, anonymous
        self.protocols = protocols
        self.address_settings = dict(address_settings or {})
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.create_options = tuple(create_options)
        self.router = router
        self.extra_core_xml = extra_core_xml
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self.host = LOOPBACK
        self.core_port = free_port()
        self.amqp_port = free_port() if amqp else None
        self.stomp_port = free_port() if stomp else None
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.startup_seconds: float | None = None  # of the last start, until ready
        self._log_offset = 0
        self._console = None

    # ----------------------------------------------------------------- addresses

    @property
    def url(self) -> str:
        """The JMS client's URL of the main acceptor: ``tcp://127.0.0.1:<core_port>``."""
        return f"tcp://{self.host}:{self.core_port}"

    @property
    def ports(self) -> dict[str, int]:
        """Acceptor name -> port, for the acceptors this broker runs."""
        ports = {"artemis": self.core_port, "amqp": self.amqp_port, "stomp": self.stomp_port}
        return {k: v for k, v in ports.items() if v is not None}

    @property
    def broker_xml_path(self) -> Path:
        return self.dir / "etc" / "broker.xml"

    @property
    def console_path(self) -> Path:
        return self.dir / "log" / "console.log"

    # ----------------------------------------------------------------- instance

    @property
    def created(self) -> bool:
        return self.broker_xml_path.is_file()

    def create(self) -> ArtemisBroker:
        """``artemis create`` the instance, then set its ports, settings and JVM; once."""
        if self.created:
            return self
        login = "--allow-anonymous" if self.anonymous else "--require-login"
        cmd = [
            str(self.dist.artemis_cli), "create", str(self.dir), *CREATE_OPTIONS, login,
            "--user", self.user, "--password", self.password, "--name", self.name,
            "--java-memory", self.heap,
        ]  # fmt: skip
        if self.amqp_port is None:
            cmd.append("--no-amqp-acceptor")
        if self.stomp_port is None:
            cmd.append("--no-stomp-acceptor")
        cmd += self.create_options
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTEMIS_", "JAVA_ARGS"))}
        env["JAVA_ARGS"] = shlex.join(["-Xmx256M", *TEST_JVM_OPTIONS])  # the create tool's JVM
        done = subprocess.run(
            cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=CREATE_TIMEOUT_S,
        )  # fmt: skip
        if done.returncode != 0 or not self.created:
            raise RuntimeError(
                f"artemis create {self.dir} failed (exit {done.returncode}):\n"
                f"{done.stdout}{done.stderr}"
            )
        self.edit_broker_xml(self._configure)
        self._configure_jvm()
        return self

    def edit_broker_xml(self, edit: Callable[[str], str]) -> None:
        """Replace ``etc/broker.xml`` by ``edit(text)`` (taken at the next start)."""
        path = self.broker_xml_path
        path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")

    def _configure(self, xml: str) -> str:
        """The acceptors on this broker's ports (and protocols); the address settings added."""
        ports = self.ports
        seen: set[str] = set()

        def acceptor(m: re.Match) -> str:
            name = m.group(2)
            if name not in ports:
                raise RuntimeError(f"artemis create wrote an acceptor {name!r} not asked for")
            seen.add(name)
            return f"{m.group(1)}{self.host}:{ports[name]}"

        xml = _ACCEPTOR_RE.sub(acceptor, xml)
        if seen != set(ports):
            raise RuntimeError(f"broker.xml has acceptors {sorted(seen)}, wanted {sorted(ports)}")
        if self.protocols is not None:
            xml, n = re.subn(
                r'(<acceptor name="artemis">[^<]*?protocols=)[^;<]*',
                lambda m: m.group(1) + self.protocols,
                xml,
            )
            if n != 1:
                raise RuntimeError("broker.xml: no protocols= on the acceptor 'artemis'")
        if self.address_settings:
            added = "".join(
                f"<address-setting match={quoteattr(match)}>"
                + "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in elements.items())
                + "</address-setting>"
                for match, elements in self.address_settings.items()
            )
            xml = xml.replace("</address-settings>", added + "</address-settings>", 1)
        if self.router is not None:
            xml, n = re.subn(
                r'(<acceptor name="artemis">tcp://[^?<]*\?)', lambda m: f"{m.group(1)}router={self.router};", xml
            )
            if n != 1:
                raise RuntimeError("broker.xml: no parameters on the acceptor 'artemis' to add router= to")
        if self.extra_core_xml:
            xml = xml.replace("</core>", self.extra_core_xml + "</core>", 1)
        return xml

    def _configure_jvm(self) -> None:
        """``etc/artemis.profile``'s JAVA_ARGS: no -Xms (the shipped 512M is above a small
        -Xmx), and :attr:`jvm_options` added, in place of the shipped collector if they name
        one."""
        path = self.dir / "etc" / "artemis.profile"
        text = path.read_text(encoding="utf-8")
        replaces_gc = any(_GC_RE.match(o) for o in self.jvm_options)

        def java_args(m: re.Match) -> str:
            args = [
                a for a in m.group(2).split()
                if not a.startswith("-Xms")
                and not (replaces_gc and (_GC_RE.match(a) or a == "-XX:+UseStringDeduplication"))
            ]  # fmt: skip
            return f'{m.group(1)}{" ".join([*args, *self.jvm_options])} "'

        text, n = re.subn(r'^(\s*JAVA_ARGS=")([^"]*)"', java_args, text, count=1, flags=re.M)
        if n != 1:
            raise RuntimeError(f"{path}: no JAVA_ARGS line to set the JVM options in")
        path.write_text(text, encoding="utf-8")

    # ----------------------------------------------------------------- process

    def start(self, timeout: float | None = None) -> ArtemisBroker:
        """Create the instance if needed, run ``bin/artemis run``, wait until ready.

        Fails fast with :class:`ArtemisExited` if the broker exits while starting; on a
        timeout it is stopped and :class:`TimeoutError` raised; both carry the log tail.
        """
        self.create()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTEMIS_", "JAVA_ARGS"))}
        self._run_console(
            [str(self.dir / "bin" / "artemis"), "run"],  # execs the JVM: signals reach it
            cwd=self.dir,
            env=env,
            timeout=timeout,
            what=f"log {READY_LOG_CODE} and listen on {self.ports}",
        )
        return self

    def _logged_ready(self, since_start: bytes) -> bool:
        return READY_LOG_CODE.encode() in since_start

    # ----------------------------------------------------------------- logs

    @property
    def node_id(self) -> str | None:
        """The broker's node id, from its start line (``AMQ221001: ... [name, nodeID=...]``)."""
        found = _NODE_ID_RE.findall(self.log_text())
        return found[-1] if found else None
