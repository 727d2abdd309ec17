"""The real Artemis JMS client, scripted: ``tests/java/JmsScenario.java`` run with ``java -cp``.

The Java sources in ``tests/java/`` are compiled with ``javac`` against the client jar into the
cache (``artemis/classes/<hash>``, keyed by the sources and the jar; see :func:`compile_sources`),
once per change, under a lock.  :class:`JmsClient` runs a scenario -- a list of commands, one
dict each -- in a fresh JVM over one connection, and returns one result dict per command.

Commands (``op`` and its fields; every field but ``op`` optional)::

    connect     url, user, password, clientId   (a new connection, started, and an auto-ack
                                                 session; factory options go in the URL:
                                                 tcp://127.0.0.1:61616?blockOnDurableSend=false)
                watchTopology (bool: an event per topology change the client is told,
                ``{"event": "node_up", nodeId, uniqueEventId, primary, backup, last}`` or
                ``{"event": "node_down", nodeId, uniqueEventId}``)
    topology    members (wait until the client holds exactly that many), timeout (ms, 0)
                -> members: [{nodeId, uniqueEventId, primary, backup, scaleDownGroupName}]
                   (a connector: {name, factory, params}), reached (the count came)
    session     transacted (bool) | ack: auto, client, dups_ok, individual
                                                (the new current session)
    send        queue | topic, type: text bytes map object stream message, body, size,
                count, persistent (true), priority, ttl, delay (ms), properties,
                indexProperty, correlationId, jmsType, replyTo (a queue, or topic://name),
                completion (async send with a CompletionListener; waits
                completionTimeout ms), progress (an event every N)
                -> sent, ids (of the messages sent: blocking sends are acknowledged),
                   completed, failed (async)
    consumer    id, queue | topic, selector, durable (subscription name), sharedDurable,
                shared (shared non-durable subscription name), noLocal  (kept open)
    receive     consumer (an id) | the consumer fields (a consumer for this receive only),
                count (max, 1), timeout (ms per message, 5000; 0 = receiveNoWait),
                digest (size + sha256 instead of a text/bytes body), acknowledge (the last),
                until (a text body: stop after the message that has it, a marker)
                -> messages: [{id, type, body, properties, destination, persistent,
                               priority, redelivered, timestamp, expiration, correlationId,
                               jmsType, replyTo}]   (stops at the first timeout)
    close_consumer id     browse queue, selector, digest -> messages
    acknowledge   commit   rollback   recover   unsubscribe name   close
    wait_file   path, timeout (ms, 30000)   (blocks until the test creates the file: a
                                             point where the test acts, e.g. restarts the broker)

Any command may have ``mayFail: true``: its error is reported and the run goes on.

XA (``XAResource`` calls; an Xid is ``{"format": n, "gtrid": text, "bqual": text}``, its ids
the text's UTF-8 bytes)::

    xa_connect  url, user, password   (a new XAConnection, started, and one XASession: its
                                       Session is the current session, its XAResource the
                                       one the xa_* ops call)
    xa_start    xid, flags: none (TMNOFLAGS), join, resume
    xa_end      xid, flags: success (TMSUCCESS), fail, suspend
    xa_prepare  xid -> vote (0 XA_OK, 3 XA_RDONLY)
    xa_commit   xid, onePhase (false)      xa_rollback xid      xa_forget xid
    xa_recover  -> xids (the prepared branches: [{format, gtrid, bqual}])
    xa_timeout  seconds -> set (setTransactionTimeout's answer)

A failed XA call's ``error`` also has ``xaErrorCode`` (``XAException.errorCode``).

Bodies: text is a string (``{i}`` becomes the message's index); bytes are base64; map and
stream are an object and a list of values; object is a value (objects become a HashMap,
lists an ArrayList).  ``size`` makes a text or bytes body of that many bytes by
:func:`pattern`.  Values (properties, map and stream entries) are JSON with types: strings,
booleans and null bare; the rest tagged, ``{"int": 3}``, ``{"long": 3}``, ``{"short": 3}``,
``{"byte": 3}``, ``{"double": 1.5}``, ``{"float": 1.5}``, ``{"char": "c"}``, ``{"bytes":
"<base64>"}``; a bare integer is an int (a long if it does not fit), a bare fraction a double.
Received values always come back tagged, so a type that changes on the way shows.

Each result has ``op`` and ``ok``; a failed one has ``error`` (``class``, ``message``,
``errorCode``, ``cause``) and ends the run.  Events (``{"event": "progress", "sent": n}``,
``{"event": "exception", "error": ...}`` from the connection's ExceptionListener, and for an
``xa_connect`` connection ``{"event": "failover", "type": "FAILOVER_COMPLETED"}`` and the
other FailoverEventTypes) arrive as
they happen (:meth:`JmsRun.wait_event`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.artemis.cache import ArtemisDist, artemis_cache, cache_lock
from tests.childproc import pdeathsig_preexec
from tests.harness import REPO_ROOT, wait_for

#: The Java programs of the tests, compiled together.
JAVA_SOURCES = REPO_ROOT / "tests" / "java"
#: The scenario runner's main class.
SCENARIO_MAIN = "JmsScenario"
#: JVM options of the client runs: a short-lived JVM starts fastest with C1 only and the
#: serial collector.  Benchmarks pass their own.
CLIENT_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m")
#: Seconds one scenario may run (its JVM's start included) before it is killed.
RUN_TIMEOUT_S = 60.0
#: Seconds javac may take.
COMPILE_TIMEOUT_S = 180.0
#: Seconds a run past its deadline is given to print its thread dump, and the dump's last
#: section (HotSpot ends it with the JNI reference counts and the heap).
THREAD_DUMP_WAIT_S = 2.0
THREAD_DUMP_END = "JNI global refs"
#: Lines of stderr quoted in a failure.
STDERR_TAIL_LINES = 40
#: Exit status of the runner: a command failed (its result says which and why).
EXIT_COMMAND_FAILED = 1


class JmsRunError(AssertionError):
    """A scenario did not run through: a command failed, the JVM exited badly or timed out."""


def pattern(size: int) -> bytes:
    """The body of a ``size`` message: byte i is ``i % 251`` (as JmsScenario makes it)."""
    block = bytes(range(251))
    return (block * (size // 251 + 1))[:size]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def b64(data: bytes) -> str:
    """Bytes as a scenario's bytes body or ``{"bytes": ...}`` value wants them."""
    return base64.b64encode(data).decode("ascii")


def compile_sources(dist: ArtemisDist, sources: Path = JAVA_SOURCES) -> Path:
    """The classes of ``sources/*.java`` compiled against the client jar, in the cache."""
    files = sorted(sources.glob("*.java"))
    if not files:
        raise FileNotFoundError(f"no Java sources in {sources}")
    key = hashlib.sha256(dist.client_jar.name.encode())
    for f in files:
        key.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    out = artemis_cache() / "classes" / key.hexdigest()[:16]
    if out.is_dir():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock("compile"):
        if out.is_dir():
            return out
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".javac-") as tmp:
            javac(files, str(dist.client_jar), Path(tmp))
            os.rename(tmp, out)
            os.mkdir(tmp)  # for TemporaryDirectory's cleanup
    return out


def javac(files: Sequence[Path], classpath: str, dest: Path) -> None:
    """Compile ``files`` against ``classpath`` into ``dest`` (Java 17, every lint a failure);
    RuntimeError with javac's output if it fails."""
    cmd = [
        "javac", "--release", "17", "-encoding", "UTF-8", "-Xlint:all", "-Werror",
        "-cp", classpath, "-d", str(dest), *map(str, files),
    ]  # fmt: skip
    try:
        done = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S
        )
    except FileNotFoundError:
        raise RuntimeError(
            "javac is needed to compile tests/java; ./test.sh installs a JDK "
            "(apt-get install default-jdk-headless)"
        ) from None
    if done.returncode != 0:
        raise RuntimeError(f"javac failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")


class JmsRun:
    """One scenario's JVM, running: its stdout read line by line as it comes."""

    def __init__(
        self, proc: subprocess.Popen, stderr_path: Path, commands: Sequence[Mapping], timeout: float
    ) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.commands = list(commands)
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.results: list[dict[str, Any]] = []  # one per command run
        self.events: list[dict[str, Any]] = []  # progress, exceptions
        self.other: list[str] = []  # stdout lines that are not JSON (a thread dump)
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"jms-run-{proc.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            try:
                item = json.loads(line)
            except ValueError:
                item = None
            with self._cond:
                if isinstance(item, dict) and "event" in item:
                    self.events.append(item)
                elif isinstance(item, dict) and "op" in item:
                    self.results.append(item)
                elif line:
                    self.other.append(line)
                self._cond.notify_all()

    def wait_event(self, predicate: Callable[[dict], bool], timeout: float) -> dict:
        """The first event (so far or to come) for which ``predicate`` holds."""

        def found() -> dict | None:
            with self._cond:
                return next((e for e in self.events if predicate(e)), None)

        return wait_for(found, timeout, interval=0.02, what=f"an event of JMS run {self.proc.pid}")

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(10)

    def _dumped(self) -> bool:
        """Whether the JVM's thread dump (after a SIGQUIT) has reached its last section."""
        with self._cond:
            return any(line.startswith(THREAD_DUMP_END) for line in self.other)

    def wait(self, *, check: bool = True) -> list[dict[str, Any]]:
        """Wait for the JVM (until the run's deadline) and return the results.

        With ``check`` (the default) anything but a clean run of every command raises
        :class:`JmsRunError`; without it a failed command's result is returned (its ``ok``
        false) and only a run that went wrong otherwise raises.  A run past its deadline gets
        a SIGQUIT first, so the JVM's thread dump is in the error.
        """
        try:
            self.proc.wait(max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGQUIT)  # the JVM prints its threads on stdout
            try:
                wait_for(self._dumped, THREAD_DUMP_WAIT_S, what="the JVM's thread dump")
            except TimeoutError:
                pass  # kill it anyway; the error shows what there is
            self.kill()
            raise JmsRunError(self._describe(f"timed out after {self.timeout:g} s")) from None
        self._reader.join(10)
        rc = self.proc.returncode
        if rc == 0 and len(self.results) == len(self.commands):
            return self.results
        if rc == EXIT_COMMAND_FAILED and self.results and not self.results[-1]["ok"]:
            if not check:
                return self.results
            return self._fail(f"command {len(self.results)} failed: {self.results[-1]}")
        return self._fail(
            f"exited with status {rc} after {len(self.results)} of {len(self.commands)} commands"
        )

    def _fail(self, what: str) -> list[dict[str, Any]]:
        raise JmsRunError(self._describe(what))

    def _describe(self, what: str) -> str:
        tail = "\n".join(self.stderr().splitlines()[-STDERR_TAIL_LINES:])
        parts = [f"JMS scenario (pid {self.proc.pid}) {what}", f"results: {self.results}"]
        if self.events:
            parts.append(f"events: {self.events}")
        if self.other:
            parts.append("other output:\n" + "\n".join(self.other[-200:]))
        parts.append(f"stderr ({self.stderr_path}):\n{tail}")
        return "\n".join(parts)


class JmsClient:
    """Runs scenarios with the real Artemis JMS client; the runs' stderr go to ``workdir``.

    ``JmsClient(dist, classes, workdir).run([{"op": "connect", "url": broker.url, ...},
    {"op": "send", "queue": "q", "body": "hi"}])``.  :meth:`start` runs one in the background
    (for a test that kills the broker meanwhile); :meth:`close` kills runs still going.
    """

    def __init__(
        self,
        dist: ArtemisDist,
        classes: Path,
        workdir: Path,
        *,
        main: str = SCENARIO_MAIN,
        jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS,
        timeout: float = RUN_TIMEOUT_S,
    ) -> None:
        self.dist = dist
        self.classes = classes
        self.workdir = Path(workdir)
        self.main = main
        self.jvm_options = tuple(jvm_options)
        self.timeout = timeout
        self.runs: list[JmsRun] = []

    @property
    def classpath(self) -> str:
        return os.pathsep.join([str(self.dist.client_jar), str(self.classes)])

    def command(self, main: str | None = None) -> list[str]:
        return ["java", *self.jvm_options, "-cp", self.classpath, main or self.main]

    def start(self, commands: Iterable[Mapping], *, timeout: float | None = None) -> JmsRun:
        """Start a scenario in its own JVM; its commands go in on stdin, all at once."""
        commands = list(commands)
        self.workdir.mkdir(parents=True, exist_ok=True)
        stderr_path = self.workdir / f"jms-{len(self.runs) + 1}.stderr"
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                preexec_fn=pdeathsig_preexec(),
            )
        run = JmsRun(proc, stderr_path, commands, timeout if timeout is not None else self.timeout)
        self.runs.append(run)
        assert proc.stdin is not None
        try:
            with proc.stdin:
                proc.stdin.write(b"".join(json.dumps(c).encode() + b"\n" for c in commands))
        except BrokenPipeError:  # the JVM is gone already: wait() says how
            pass
        return run

    def run(
        self, commands: Iterable[Mapping], *, timeout: float | None = None, check: bool = True
    ) -> list[dict[str, Any]]:
        """Run a scenario to its end; see :meth:`JmsRun.wait` for ``check``."""
        return self.start(commands, timeout=timeout).wait(check=check)

    def close(self) -> None:
        for run in self.runs:
            run.kill()
