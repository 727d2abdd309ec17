"""A local SparkSession shared by the pipeline's tests (starting the JVM takes seconds)."""

from __future__ import annotations

import os
import shlex
from contextlib import contextmanager

import pytest

#: JVM options of the tests' Spark: the C1 compiler only.  A test JVM runs small jobs for a
#: few minutes, where C2's compilations cost more CPU than they save: measured on a 2-CPU
#: machine, a session's start and its first audit took ~42 s of JVM CPU with the default
#: tiers and ~24 s with C1 alone (a warm audit ~10 s and ~6 s).  The results are the same.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

#: PYSPARK_SUBMIT_ARGS that give the tests' Spark driver :data:`TEST_JVM_OPTIONS`
#: (``spark.driver.defaultJavaOptions`` comes before the job's own extraJavaOptions); a
#: ``junction analyze`` subprocess gets them with this in its environment
TEST_SUBMIT_ARGS = shlex.join(["--conf", f"spark.driver.defaultJavaOptions={TEST_JVM_OPTIONS}", "pyspark-shell"])


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


@pytest.fixture(scope="session")
def spark():
    from junction.pipeline.common import get_spark

    with _test_jvm_options():
        session = get_spark("local[2]")
    yield session
    session.stop()
