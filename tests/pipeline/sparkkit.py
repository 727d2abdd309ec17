"""The tests' Spark: one SparkSession per test process, started once, set for small inputs.

Starting a JVM with Spark costs seconds of CPU, and a cold JVM runs its first jobs several
times slower than a warm one (class loading, compilation), so every test that runs Spark
in-process shares one session per process (pytest-xdist's ``--dist loadfile`` gives each of
its workers whole files; the session is the worker's).  ``tests/conftest.py`` makes it a
session fixture, started on first use -- in the background where a test has other work to
do meanwhile -- and stopped when the process's tests end.

What is set here is for test inputs of a few hundred to a few thousand events, and changes no
result: the JVM options (:data:`TEST_JVM_OPTIONS`) and the session's SQL settings
(:data:`TEST_SESSION_CONF`).  ``junction analyze`` as a user runs it, with its own Spark and
the product's settings, is run as a process by tests/integration/test_appliance_analytics.py.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import shlex
import threading
from contextlib import contextmanager

#: JVM options of the tests' Spark drivers.  C1 only: a test JVM runs small jobs for a few
#: minutes, where C2's compilations cost more CPU than they save (a session's start and first
#: audit took ~42 s of JVM CPU with the default tiers, ~24 s with C1 alone).  The serial
#: collector: the heap of a test's jobs is small, and G1's concurrent and parallel GC threads
#: cost CPU the two test workers need (a cold audit ~10-20 % less JVM CPU).  Results are the same.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: PYSPARK_SUBMIT_ARGS that give a Spark driver that PySpark launches :data:`TEST_JVM_OPTIONS`
#: (``spark.driver.defaultJavaOptions`` comes before the job's own extraJavaOptions); a
#: ``junction analyze`` subprocess gets them through its environment
TEST_SUBMIT_ARGS = shlex.join(["--conf", f"spark.driver.defaultJavaOptions={TEST_JVM_OPTIONS}", "pyspark-shell"])

#: the shared session's SQL settings for small inputs (each test may set others while it runs,
#: with :func:`session_conf`):
#:
#: - two shuffle partitions, not the jobs' two per core: every shuffle still splits its rows
#:   over more than one task (what the jobs' partitioning must get right), and the two tasks
#:   of a stage run at once on local[2];
#: - no adaptive query execution: it re-plans between stages, a cost that only pays on big
#:   shuffles (it would coalesce these tiny ones into one partition anyway);
#: - interpreted expressions, no generated Java code: compiling it costs more than it saves on
#:   a few thousand rows.
TEST_SESSION_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: the shared session's master
TEST_MASTER = "local[2]"
#: seconds a test waits for the shared session to start (a busy machine takes a while)
START_TIMEOUT_S = 180.0


def analyze_env(env: dict) -> dict:
    """``env`` for a ``junction analyze`` subprocess: its JVM with :data:`TEST_JVM_OPTIONS` (a
    PYSPARK_SUBMIT_ARGS already in ``env`` wins).  Only JVM options: the job keeps its own
    Spark settings, as a user runs it."""
    return {"PYSPARK_SUBMIT_ARGS": TEST_SUBMIT_ARGS, **env}


@contextmanager
def _test_jvm_options():
    """PYSPARK_SUBMIT_ARGS set to :data:`TEST_SUBMIT_ARGS` while a session starts its JVM
    (only PySpark's launcher reads it), unless it is set already."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ:
        yield
        return
    os.environ["PYSPARK_SUBMIT_ARGS"] = TEST_SUBMIT_ARGS
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_SUBMIT_ARGS", None)


@contextmanager
def session_conf(spark, settings: dict):
    """``settings`` on the session ``spark`` while inside, its own values again after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _start():
    from junction.pipeline.common import get_spark

    # py4j logs each closed gateway connection at INFO from __del__, which may run after
    # pytest has closed the stream its capture handler writes to ("--- Logging error ---")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    with _test_jvm_options():
        session = get_spark(TEST_MASTER, app="junction-tests")
    for key, value in TEST_SESSION_CONF.items():
        session.conf.set(key, value)
    return session


def make_active(session) -> None:
    """Make ``session`` the calling thread's active session, as it is for the thread that
    created it: ``junction analyze`` called in-process uses the active session and leaves it
    running (PySpark does the same in createDataFrame; it has no public call for it)."""
    from pyspark.sql import SparkSession

    SparkSession._get_j_spark_session_class(session._jvm).setActiveSession(session._jsparkSession)


class SharedSpark:
    """The process's test session: :meth:`soon` starts it in a thread (once) and returns its
    future; :meth:`stop` stops it if it was started."""

    def __init__(self):
        self._lock = threading.Lock()
        self._future: concurrent.futures.Future | None = None

    def soon(self) -> concurrent.futures.Future:
        with self._lock:
            if self._future is None:
                starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-start")
                self._future = starter.submit(_start)
                starter.shutdown(wait=False)
            return self._future

    def get(self):
        return self.soon().result(timeout=START_TIMEOUT_S)

    def stop(self) -> None:
        with self._lock:
            future, self._future = self._future, None
        if future is not None and future.exception(timeout=START_TIMEOUT_S) is None:
            future.result().stop()


#: the one per process
SHARED = SharedSpark()
