"""Scenarios run by the real ActiveMQ Classic JMS client over OpenWire.

:class:`OpenWireClient` runs a scenario -- a list of commands, one dict each -- with
``tests/java/openwire/OpenWireScenario.java`` in a fresh JVM over one connection, with one of
the two clients of :mod:`tests.classic.cache` (Debian's 5.17, javax.jms; the 6.x, jakarta.jms),
and returns one result dict per command.  The runs are :class:`tests.artemis.jms.JmsRun`\\ s
(the same JSON lines, events, deadline and thread dump), so everything said there about
``wait``, ``check`` and events holds here.

The program uses the JMS 1.1 API only, which both clients have; for the 6.x client it is
compiled with its ``javax.jms`` imports read as ``jakarta.jms`` (a copy in the cache, never in
the repository).  Commands (``op`` and its fields; every field but ``op`` optional)::

    connect     url, user, password, clientId    (a new connection, started, and an auto-ack
                                                  session; client options go in the URL:
                                                  tcp://h:p?jms.prefetchPolicy.all=0&
                                                  wireFormat.tightEncodingEnabled=false, or
                                                  failover:(tcp://h:p?wireFormat...)?jms...)
                -> remoteAddress (tcp://host:port now), clientId, brokerName,
                   protocolVersion (negotiated), queuePrefetch, topicPrefetch, useAsyncSend,
                   provider (the client's version)
    info        the connect fields, now (after a reconnect: where the client is)
    xa_connect  the same, an XAConnection with one XASession (its Session is current)
    session     transacted (bool) | ack: auto, client, dups_ok, individual
                                                 (the new current session; the old stays open)
    temp_queue  id    temp_topic id    (a temporary destination of the connection, named by
                                        ``id`` in later commands) -> name      delete_temp id
    send        queue | topic | temp, type: text bytes map object stream message, body,
                count, persistent (true), priority, ttl, properties, indexProperty,
                groups (a list of JMSXGroupID values: message i is in groups[i % n]),
                correlationId, jmsType, replyToQueue | replyToTopic | replyToTemp,
                progress (an event every N), ids (false: leave the list of IDs out)
                -> sent (acknowledged sends, when the send is synchronous), ids
    consumer    id, queue | topic | temp, selector, durable (subscription name), noLocal
    receive     consumer (an id) | consumers (ids, polled in turn; each message names its
                consumer) | the consumer fields (a consumer for this receive only),
                count (max, 1), timeout (ms without a message, 5000; 0 = receiveNoWait),
                acknowledge (the last), until (a text body: stop after it, a marker),
                brief (each message as its text body and redelivered flag only)
                -> messages: [{id, type, body, properties, destination, persistent,
                               priority, redelivered, timestamp, expiration, correlationId,
                               jmsType, replyTo, groupId, deliveryCount}]
    serve       queue, count, timeout, prefix ("re: ")   (request/reply: each request is
                answered on its JMSReplyTo with prefix + its text, correlation ID = its
                message ID) -> served: the requests
    close_consumer id    browse queue, selector -> messages
    prefetched  id, count, timeout (ms, 10000)   (waits until that consumer holds count
                messages dispatched and not yet received) -> prefetched
    acknowledge   commit   rollback   recover   unsubscribe name   close
    xa_start xid, flags   xa_end xid, flags   xa_prepare xid -> vote   xa_commit xid, onePhase
    xa_rollback xid   xa_forget xid   xa_recover -> xids      (as tests/artemis/jms.py)

Events: ``exception`` (the ExceptionListener), ``interrupted`` and ``resumed`` (the
transport: a ``failover:`` connection lost and found again), ``progress``.  Destinations
come back as ``queue://q``, ``topic://t``, ``temp-queue://ID:...``, ``temp-topic://ID:...``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.artemis.cache import cache_lock
from tests.artemis.jms import CLIENT_JVM_OPTIONS, RUN_TIMEOUT_S, JmsClient, javac
from tests.classic.cache import OpenWireClientJars, classic_cache
from tests.harness import REPO_ROOT

#: The scenario program, one source for both clients, and what it shares with the Artemis
#: client's (JSON, typed values, Xids; no JMS).
SCENARIO_SOURCE = REPO_ROOT / "tests" / "java" / "openwire" / "OpenWireScenario.java"
SUPPORT_SOURCE = REPO_ROOT / "tests" / "java" / "ScenarioSupport.java"
SCENARIO_MAIN = "OpenWireScenario"
_JAVAX_JMS = re.compile(r"\bjavax\.jms\.")


def compile_scenario(client: OpenWireClientJars, source: Path = SCENARIO_SOURCE) -> Path:
    """The classes of the scenario compiled against ``client`` (in the cache, once per
    change); for a jakarta client from a copy with ``javax.jms.`` read as ``jakarta.jms.``."""
    text = source.read_text(encoding="utf-8")
    if client.jakarta:
        text = _JAVAX_JMS.sub("jakarta.jms.", text)
    support = SUPPORT_SOURCE.read_bytes()
    key = hashlib.sha256(f"{client.name}\0{client.version}\0".encode() + text.encode() + b"\0" + support)
    out = classic_cache() / "classes" / key.hexdigest()[:16]
    if out.is_dir():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with cache_lock("compile", directory=classic_cache()):
        if out.is_dir():
            return out
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=".javac-") as tmp:
            src = Path(tmp) / "src" / source.name
            classes = Path(tmp) / "classes"
            src.parent.mkdir()
            src.write_text(text, encoding="utf-8")
            javac([src, SUPPORT_SOURCE], client.classpath, classes)
            os.rename(classes, out)
    return out


class OpenWireClient(JmsClient):
    """Runs scenarios with one real ActiveMQ Classic client; the runs' stderr go to ``workdir``.

    ``OpenWireClient(jars, classes, workdir).run([{"op": "connect", "url": ...}, ...])``;
    :meth:`start` runs one in the background; :meth:`close` kills runs still going.
    """

    def __init__(
        self,
        jars: OpenWireClientJars,
        classes: Path,
        workdir: Path,
        *,
        jvm_options: Sequence[str] = CLIENT_JVM_OPTIONS,
        timeout: float = RUN_TIMEOUT_S,
    ) -> None:
        super().__init__(
            None, classes, workdir, main=SCENARIO_MAIN, jvm_options=jvm_options, timeout=timeout
        )  # type: ignore[arg-type]  # no Artemis distribution: the classpath is the client's
        self.jars = jars

    @property
    def name(self) -> str:
        return self.jars.name

    @property
    def classpath(self) -> str:
        return os.pathsep.join([self.jars.classpath, str(self.classes)])

    def __repr__(self) -> str:
        return f"<OpenWireClient {self.jars.name} ({self.jars.version})>"
