"""The real Artemis client and broker, fetched once into a cache outside the repository.

What is fetched (with Maven, ``mvn dependency:copy``, from the Maven repositories its settings
name), for :data:`ARTEMIS_VERSION`:

* the JMS client, ``org.apache.activemq:artemis-jms-client-all`` (one shaded jar, javax.jms);
* the broker distribution, ``org.apache.activemq:apache-artemis`` classifier ``bin`` (a zip),
  unpacked next to it.

Where: :func:`cache_root` (``$JUNCTION_TEST_CACHE``, else ``$XDG_CACHE_HOME/junction-tests``,
else ``~/.cache/junction-tests``), laid out as::

    artemis/<version>/artemis-jms-client-all-<version>.jar
    artemis/<version>/apache-artemis-<version>-bin.zip
    artemis/<version>/apache-artemis-<version>/        the unpacked distribution
    artemis/classes/<hash>/                            tests/java compiled (see jms.py)
    artemis/m2/                                        Maven's own repository (its plugins)

Each step is idempotent: a file or directory that exists is complete, because every one is
made under a temporary name and renamed into place.  Parallel test processes (pytest-xdist
workers) take :func:`cache_lock` around each step, so one fetches and the others wait for it
and then find the result.  Offline: run ``python -m tests.artemis fetch`` where the network is
(or copy the two files above into ``artemis/<version>/`` by hand); nothing else is needed.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.harness import wait_for

#: The Artemis release the tests run: 2.40.0 is the newest with the ``bin`` distribution
#: served by Maven; ``$JUNCTION_ARTEMIS_VERSION`` picks another.
ARTEMIS_VERSION = os.environ.get("JUNCTION_ARTEMIS_VERSION", "2.40.0")
#: Maven coordinates (``group:artifact:version:type[:classifier]``) of the client and broker.
CLIENT_ARTIFACT = "org.apache.activemq:artemis-jms-client-all:{version}:jar"
BROKER_ARTIFACT = "org.apache.activemq:apache-artemis:{version}:zip:bin"
#: The Maven plugin that copies an artifact, pinned so a fetch does not ask for its newest.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
#: Seconds one Maven fetch may take (the broker zip is about 48 MB).
FETCH_TIMEOUT_S = 600.0
#: Seconds a process waits for another to finish a cache step (a fetch) before giving up.
LOCK_TIMEOUT_S = FETCH_TIMEOUT_S + 60.0


class ArtemisFetchError(RuntimeError):
    """The client or the broker could not be fetched or unpacked."""


@dataclass(frozen=True)
class ArtemisDist:
    """The fetched Artemis release: the client jar and the unpacked broker distribution."""

    version: str
    client_jar: Path
    home: Path  # the unpacked distribution (bin/artemis, lib/, schema/)

    @property
    def artemis_cli(self) -> Path:
        return self.home / "bin" / "artemis"


def cache_root() -> Path:
    """The cache for heavy test dependencies (outside the repository)."""
    explicit = os.environ.get("JUNCTION_TEST_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "junction-tests"


def artemis_cache() -> Path:
    return cache_root() / "artemis"


@contextmanager
def cache_lock(
    name: str, timeout: float = LOCK_TIMEOUT_S, directory: Path | None = None
) -> Iterator[None]:
    """Hold the exclusive lock ``<directory>/<name>.lock`` (an flock: released if the holder
    dies); ``directory`` is :func:`artemis_cache` unless given.

    Polled with a deadline, so a process stuck holding it gives a :class:`TimeoutError`
    naming the lock rather than a hung test.
    """
    path = (directory or artemis_cache()) / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:

        def take() -> bool:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        wait_for(take, timeout, interval=0.2, what=f"the cache lock {path}")
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _maven_copy(coordinates: str, dest: Path) -> None:
    """``mvn dependency:copy`` of one artifact to the file ``dest`` (under a temporary name
    first).  Maven keeps what it fetches for itself (its plugins) under ``artemis/m2``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtemisFetchError(
            f"Maven (mvn) is needed to fetch {coordinates}; ./test.sh installs it "
            f"(apt-get install maven), or put the file at {dest} by hand"
        )
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        cmd = [
            mvn, "--batch-mode", "--quiet", "--strict-checksums",
            f"-Dmaven.repo.local={artemis_cache() / 'm2'}",
            f"{DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact={coordinates}",
            f"-DoutputDirectory={tmp}",
            "-Dstyle.color=never",
        ]  # fmt: skip
        try:
            done = subprocess.run(
                cmd, cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=FETCH_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise ArtemisFetchError(
                f"fetching {coordinates} took over {FETCH_TIMEOUT_S:g} s"
            ) from None
        got = [p for p in Path(tmp).iterdir() if p.is_file()]
        if done.returncode != 0 or len(got) != 1:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
            raise ArtemisFetchError(
                f"could not fetch {coordinates} (mvn exit {done.returncode}); "
                f"offline, put the file at {dest}\n{tail}"
            )
        got[0].rename(dest)
    # Maven's own copy of the artifact (in its repository) would double the cache's size
    shutil.rmtree(artemis_cache() / "m2" / "org" / "apache" / "activemq", ignore_errors=True)


def _unpack(zip_path: Path, dest: Path) -> None:
    """Unpack the distribution zip into ``dest`` (its single top folder), keeping the files'
    Unix modes (``bin/artemis`` must stay executable; zipfile alone drops them)."""
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".unpack-") as tmp:
        with zipfile.ZipFile(zip_path) as z:
            for info in z.infolist():
                path = Path(z.extract(info, tmp))
                mode = (info.external_attr >> 16) & 0o777
                if mode and not info.is_dir():
                    path.chmod(mode | stat.S_IRUSR)
        tops = list(Path(tmp).iterdir())
        if len(tops) != 1 or not (tops[0] / "bin" / "artemis").is_file():
            raise ArtemisFetchError(f"{zip_path} is not an Artemis distribution (top: {tops})")
        tops[0].rename(dest)


def fetch(version: str = ARTEMIS_VERSION) -> ArtemisDist:
    """The client jar and the unpacked broker of ``version``, fetched if not cached yet."""
    base = artemis_cache() / version
    base.mkdir(parents=True, exist_ok=True)
    jar = base / f"artemis-jms-client-all-{version}.jar"
    zip_path = base / f"apache-artemis-{version}-bin.zip"
    home = base / f"apache-artemis-{version}"
    if jar.is_file() and home.is_dir():
        return ArtemisDist(version, jar, home)
    with cache_lock(f"fetch-{version}"):
        if not jar.is_file():
            _maven_copy(CLIENT_ARTIFACT.format(version=version), jar)
        if not home.is_dir():
            if not zip_path.is_file():
                _maven_copy(BROKER_ARTIFACT.format(version=version), zip_path)
            _unpack(zip_path, home)
    return ArtemisDist(version, jar, home)
