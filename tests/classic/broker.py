"""The real ActiveMQ Classic broker (Debian's ``activemq`` package) as a child process.

:class:`ClassicBroker` writes a broker instance into ``tmp_dir/name`` -- ``conf/activemq.xml``
(its connectors on free loopback ports, KahaDB in ``data/``, small memory limits, a user
unless anonymous) and ``conf/log4j.properties`` (the log on the console) -- and runs the
package's ``activemq.jar start`` in the foreground, as Debian's own service script would but
without switching user or base directory.  It is ready when its log says ``... started`` and
its ports answer; it stops with SIGTERM (the broker's shutdown hook: exit status 143), then
SIGKILL after :data:`STOP_TIMEOUT_S`; it can be killed with ``kill -9`` and started again on
the same data and ports.

Debian's package has the OpenWire and STOMP transports (and MQTT) but no AMQP module, so
cross-protocol tests against Classic use STOMP.  ``<dir>/log/console.log`` is the broker's
stdout and stderr, appended across restarts with a banner per start.  The lifecycle is
:class:`tests.console_child.ConsoleChild`'s (no orphans, parent-death signal, :attr:`died`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from tests.console_child import ChildExited, ConsoleChild
from tests.harness import LOOPBACK, free_port

#: Where Debian's ``activemq`` package puts the broker (``bin/activemq.jar``, ``lib/``).
ACTIVEMQ_HOME = Path("/usr/share/activemq")
#: The Debian package of the broker.
DEBIAN_BROKER_PACKAGE = "activemq"
#: JVM options of a test broker: C1 only and the serial collector (see tests/artemis/broker.py).
TEST_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: The broker's maximum heap; Debian's service runs it with 512M.
HEAP = "256M"
#: The broker's memory limit for messages (its ``<memoryUsage>``; the default is 1 GB, more
#: than the heap) and its store and temp limits (the default store limit is 100 GB).
MEMORY_LIMIT = "64 mb"
STORE_LIMIT = "2 gb"
TEMP_LIMIT = "1 gb"
#: Seconds a start may take until ready, and an orderly stop.
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
#: Exit statuses of an orderly stop: the JVM exits with 128 + SIGTERM after its shutdown hook.
ORDERLY_EXIT = (0, 128 + signal.SIGTERM)
#: The log line of a broker that is up: "Apache ActiveMQ 5.17.2 (<name>, ID:...) started".
_READY_RE = re.compile(rb"Apache ActiveMQ \S+ \(([^,]+), (ID:[^)]+)\) started")

LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, out
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{HH:mm:ss,SSS} %-5p %m | %c | %t%n
"""


class ClassicExited(ChildExited):
    """The Classic broker exited while the harness was waiting for it."""


class ClassicBroker(ConsoleChild):
    """One real ActiveMQ Classic broker in ``tmp_dir/name`` (see the module docstring).

    ``user``/``password``: the one user of its ``simpleAuthenticationPlugin`` (every
    permission; Classic has no authorization unless configured); ``anonymous``: no
    authentication at all, Classic's default.  ``stomp``: also a STOMP connector on its own
    free port.  ``connector_options``: the query of the OpenWire connector's URI (e.g.
    ``"wireFormat.tightEncodingEnabled=false"``); ``transport``: its scheme (``auto``: Classic's
    connector that also takes STOMP and AMQP on the same port, as a gateway's readiness probe
    needs); ``extra_broker_xml``: more elements of ``<broker>`` (``<destinationPolicy>``, ...).
    """

    kind = "Classic broker"
    exited_error = ClassicExited

    def __init__(
        self,
        tmp_dir: Path,
        name: str = "classic",
        *,
        user: str = "admin",
        password: str = "admin",
        anonymous: bool = False,
        stomp: bool = False,
        connector_options: str = "",
        transport: str = "tcp",
        extra_broker_xml: str = "",
        heap: str = HEAP,
        jvm_options: Sequence[str] = TEST_JVM_OPTIONS,
        home: Path = ACTIVEMQ_HOME,
        startup_timeout: float = STARTUP_TIMEOUT_S,
        stop_timeout: float = STOP_TIMEOUT_S,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        self.dir = Path(tmp_dir) / name
        self.user, self.password, self.anonymous = user, password, anonymous
        self.connector_options = connector_options
        self.transport = transport
        self.extra_broker_xml = extra_broker_xml
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        self.home = Path(home)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self.host = LOOPBACK
        self.openwire_port = free_port()
        self.stomp_port = free_port() if stomp else None
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.broker_id: str | None = None  # "ID:..." of the last start

    # ----------------------------------------------------------------- addresses

    @property
    def url(self) -> str:
        """The client's URL of the OpenWire connector: ``tcp://127.0.0.1:<openwire_port>``."""
        return f"tcp://{self.host}:{self.openwire_port}"

    @property
    def ports(self) -> dict[str, int]:
        """Connector name -> port, for the connectors this broker runs."""
        ports = {"openwire": self.openwire_port, "stomp": self.stomp_port}
        return {k: v for k, v in ports.items() if v is not None}

    @property
    def conf_dir(self) -> Path:
        return self.dir / "conf"

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def console_path(self) -> Path:
        return self.dir / "log" / "console.log"

    # ----------------------------------------------------------------- instance

    def broker_xml(self) -> str:
        """The broker's ``activemq.xml`` (Spring XML, as the package's own)."""
        data = escape(str(self.data_dir))
        query = f"?{self.connector_options}" if self.connector_options else ""
        uri = f"{self.transport}://{self.host}:{self.openwire_port}{query}"
        connectors = f'<transportConnector name="openwire" uri={quoteattr(uri)}/>'
        if self.stomp_port is not None:
            connectors += f'<transportConnector name="stomp" uri="stomp://{self.host}:{self.stomp_port}"/>'
        auth = ""
        if not self.anonymous:
            auth = (
                "<plugins><simpleAuthenticationPlugin><users>"
                f"<authenticationUser username={quoteattr(self.user)} "
                f'password={quoteattr(self.password)} groups="admins"/>'
                "</users></simpleAuthenticationPlugin></plugins>"
            )
        return (
            '<beans xmlns="http://www.springframework.org/schema/beans"'
            ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
            ' xsi:schemaLocation="http://www.springframework.org/schema/beans'
            " http://www.springframework.org/schema/beans/spring-beans-2.0.xsd"
            " http://activemq.apache.org/schema/core"
            ' http://activemq.apache.org/schema/core/activemq-core.xsd">\n'
            '<broker xmlns="http://activemq.apache.org/schema/core" useJmx="false"'
            f' brokerName={quoteattr(self.name)} dataDirectory="{data}" schedulerSupport="false">\n'
            f'<persistenceAdapter><kahaDB directory="{data}/kahadb"/></persistenceAdapter>\n'
            "<systemUsage><systemUsage>"
            f'<memoryUsage><memoryUsage limit="{MEMORY_LIMIT}"/></memoryUsage>'
            f'<storeUsage><storeUsage limit="{STORE_LIMIT}"/></storeUsage>'
            f'<tempUsage><tempUsage limit="{TEMP_LIMIT}"/></tempUsage>'
            "</systemUsage></systemUsage>\n"
            f"{auth}\n<transportConnectors>{connectors}</transportConnectors>\n"
            f"{self.extra_broker_xml}</broker>\n</beans>\n"
        )

    def create(self) -> ClassicBroker:
        """Write the instance's configuration (again at each start: settings may change)."""
        jar = self.home / "bin" / "activemq.jar"
        if not jar.is_file():
            raise RuntimeError(
                f"ActiveMQ Classic is not installed ({jar} missing); ./test.sh installs it "
                f"(apt-get install {DEBIAN_BROKER_PACKAGE})"
            )
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "activemq.xml").write_text(self.broker_xml(), encoding="utf-8")
        (self.conf_dir / "log4j.properties").write_text(LOG4J_PROPERTIES, encoding="utf-8")
        return self

    def command(self) -> list[str]:
        return [
            "java", f"-Xmx{self.heap}", *self.jvm_options,
            f"-Dactivemq.home={self.home}", f"-Dactivemq.base={self.dir}",
            f"-Dactivemq.conf={self.conf_dir}", f"-Dactivemq.data={self.data_dir}",
            f"-Dlog4j.configuration=file:{self.conf_dir / 'log4j.properties'}",
            "-jar", str(self.home / "bin" / "activemq.jar"),
            "start", f"xbean:file:{self.conf_dir / 'activemq.xml'}",
        ]  # fmt: skip

    # ----------------------------------------------------------------- process

    def start(self, timeout: float | None = None) -> ClassicBroker:
        """Write the configuration, run the broker, wait until it is ready.

        Fails fast with :class:`ClassicExited` if the broker exits while starting; on a
        timeout it is stopped and :class:`TimeoutError` raised; both carry the log tail.
        """
        self.create()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIVEMQ_", "JAVA_TOOL"))}
        self._run_console(
            self.command(), cwd=self.dir, env=env, timeout=timeout,
            what=f"log 'started' and listen on {self.ports}",
        )  # fmt: skip
        return self

    def _logged_ready(self, since_start: bytes) -> bool:
        m = _READY_RE.search(since_start)
        if m is not None:
            self.broker_id = m.group(2).decode()
        return m is not None
