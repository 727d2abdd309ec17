"""The real ActiveMQ Classic Java clients the OpenWire tests run, and where their jars are.

Two clients, because the two lines in use differ in their JMS API and in what they send:

* ``5.17``: Debian's ``libactivemq-java`` (5.17.2, javax.jms, JMS 1.1), the jars under
  ``/usr/share/java`` (:data:`DEBIAN_CLIENT_JARS`; ``./test.sh`` installs the package);
* ``6``: ``org.apache.activemq:activemq-client`` :data:`CLIENT6_VERSION` (jakarta.jms) with its
  runtime dependencies, fetched with Maven (``dependency:copy-dependencies`` of a one-line
  project written in a temporary directory) into the cache outside the repository::

      classic/activemq-client-<version>/*.jar      the client and its runtime dependencies
      classic/classes/<hash>/                      OpenWireScenario compiled (see client.py)

Maven's own repository (its plugins) is the Artemis cache's ``artemis/m2``, shared.  Each step
is idempotent and made under a temporary name, then renamed; parallel test processes take
:func:`tests.artemis.cache.cache_lock` (in ``classic/``) around it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from tests.artemis.cache import (
    DEPENDENCY_PLUGIN,
    FETCH_TIMEOUT_S,
    artemis_cache,
    cache_lock,
    cache_root,
)

#: The 6.x client: 6.3.1 is the release the tests were written against;
#: ``$JUNCTION_ACTIVEMQ_CLIENT6_VERSION`` picks another.
CLIENT6_VERSION = os.environ.get("JUNCTION_ACTIVEMQ_CLIENT6_VERSION", "6.3.1")
#: Debian's 5.17 client: the jars a JMS program needs (without the j2ee management spec the
#: client fails with NoClassDefFoundError javax/management/j2ee/statistics/Stats).
DEBIAN_JAVA = Path("/usr/share/java")
DEBIAN_CLIENT_JARS = (
    "activemq-client.jar", "geronimo-jms_1.1_spec.jar", "hawtbuf.jar", "slf4j-api.jar",
    "geronimo-j2ee-management-1.1-spec.jar",
)  # fmt: skip
#: The Debian package with those jars.
DEBIAN_CLIENT_PACKAGE = "libactivemq-java"


class ClientUnavailable(RuntimeError):
    """A client's jars are not installed or could not be fetched."""


@dataclass(frozen=True)
class OpenWireClientJars:
    """One ActiveMQ Classic client: its name in test ids, version, jars, and JMS namespace."""

    name: str  # "5.17" or "6"
    version: str
    jars: tuple[Path, ...]
    jakarta: bool  # jakarta.jms (6.x) rather than javax.jms (5.x)

    @property
    def classpath(self) -> str:
        return os.pathsep.join(map(str, self.jars))


def classic_cache() -> Path:
    return cache_root() / "classic"


def debian_client() -> OpenWireClientJars:
    """Debian's 5.17 client, installed by ``apt-get install libactivemq-java``."""
    jars = tuple(DEBIAN_JAVA / j for j in DEBIAN_CLIENT_JARS)
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise ClientUnavailable(
            f"the ActiveMQ Classic 5.17 client is not installed (missing {', '.join(missing)}); "
            f"./test.sh installs it (apt-get install {DEBIAN_CLIENT_PACKAGE})"
        )
    return OpenWireClientJars("5.17", _jar_version(jars[0]), jars, jakarta=False)


def _jar_version(jar: Path) -> str:
    """The ``Implementation-Version`` of a jar's manifest ("" if it has none)."""
    with zipfile.ZipFile(jar) as z:
        manifest = z.read("META-INF/MANIFEST.MF").decode("utf-8", errors="replace")
    for line in manifest.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Implementation-Version":
            return value.strip()
    return ""


def _pom(version: str) -> str:
    """A project whose only dependency is the client: Maven resolves the rest."""
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>junction.tests</groupId><artifactId>openwire-client</artifactId>"
        "<version>1</version><packaging>pom</packaging><dependencies><dependency>"
        "<groupId>org.apache.activemq</groupId><artifactId>activemq-client</artifactId>"
        f"<version>{escape(version)}</version></dependency></dependencies></project>"
    )


def _maven_copy_dependencies(version: str, dest: Path) -> None:
    """The client ``version`` and its runtime dependencies, copied into the directory ``dest``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClientUnavailable(
            f"Maven (mvn) is needed to fetch activemq-client {version}; ./test.sh installs it"
        )
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        project, lib = Path(tmp) / "project", Path(tmp) / "lib"
        project.mkdir()
        (project / "pom.xml").write_text(_pom(version), encoding="utf-8")
        cmd = [
            mvn, "--batch-mode", "--quiet", "--strict-checksums",
            f"-Dmaven.repo.local={artemis_cache() / 'm2'}",
            f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={lib}", "-Dstyle.color=never",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                cmd, cwd=project, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=FETCH_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise ClientUnavailable(f"fetching activemq-client {version} took over {FETCH_TIMEOUT_S:g} s") from None
        if done.returncode != 0 or not (lib / f"activemq-client-{version}.jar").is_file():
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
            raise ClientUnavailable(
                f"could not fetch activemq-client {version} (mvn exit {done.returncode}); "
                f"offline, put its jars in {dest}\n{tail}"
            )
        lib.rename(dest)


def client6(version: str = CLIENT6_VERSION) -> OpenWireClientJars:
    """The 6.x client and its runtime dependencies, fetched into the cache if not there yet."""
    dest = classic_cache() / f"activemq-client-{version}"
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with cache_lock(f"fetch-client-{version}", directory=classic_cache()):
            if not dest.is_dir():
                _maven_copy_dependencies(version, dest)
    return OpenWireClientJars("6", version, tuple(sorted(dest.glob("*.jar"))), jakarta=True)


#: The clients by name, as tests are parametrized over them.
CLIENTS = {"5.17": debian_client, "6": client6}


def client_jars(name: str) -> OpenWireClientJars:
    return CLIENTS[name]()
