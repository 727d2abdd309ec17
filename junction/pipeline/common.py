"""What every analytics job shares: the Spark session, reading events, writing tables, progress.

The jobs (``audit``, ``routing``, ``gravity``) read the JSON Lines files the
nodes write (:mod:`junction.events.writer`) with one explicit Spark schema
built from :mod:`junction.events.schema`, so Spark never runs an inference
pass over what may be billions of lines, and every job sees the same columns
with the same types whatever subset of fields the files happen to hold.

User mistakes (a path that does not exist, nothing to read, events newer than
this pipeline) raise :class:`PipelineError`, which the CLI prints as one line
and exit status 2 instead of a Java stack trace.

pyspark is imported here at module level: this module is only imported once a
job is about to run (``junction/pipeline/cli.py`` imports jobs lazily).
"""

from __future__ import annotations

import glob as globlib
import hashlib
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from junction.events.schema import ALL_FIELDS, FIELD_TYPES, KINDS, SCHEMA_VERSION

__all__ = [
    "PipelineError",
    "JobResult",
    "EVENT_SCHEMA",
    "get_spark",
    "read_events",
    "write_table",
    "progress",
    "phase",
    "Progress",
]

#: the Spark master when none is given
DEFAULT_MASTER = "local[*]"
#: shuffle partitions per local core (Spark's default of 200 is far too many on a laptop)
SHUFFLE_PARTITIONS_PER_CORE = 2
#: the driver's heap for a local master (it also runs the executors), unless
#: JUNCTION_SPARK_DRIVER_MEMORY or spark-defaults say otherwise
DEFAULT_LOCAL_DRIVER_MEMORY = "2g"
#: files read when the path is a directory (searched recursively)
EVENT_FILE_GLOB = "*.jsonl"
#: unknown kinds named in the warning about them, at most
MAX_UNKNOWN_KINDS_NAMED = 5
#: seconds between looks at Spark's stage progress
PROGRESS_POLL_S = 0.5
#: seconds between progress lines when stderr is not a terminal
PROGRESS_LINE_INTERVAL_S = 5.0
#: the environment variable that silences progress and phase lines when "0"
PROGRESS_ENV = "JUNCTION_PROGRESS"
#: Spark's own logging for the jobs (log4j2): warnings and errors on stderr, without the
#: start-up chatter (host name, native Hadoop library, plan strings) that says nothing to a user
LOG4J2_PROPERTIES = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = spark: %p %c{1}: %m%n
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.strings.name = org.apache.spark.util.SparkStringUtils
logger.strings.level = error
logger.memory.name = org.apache.spark.storage.memory.MemoryStore
logger.memory.level = error
"""

_SPARK_TYPES = {
    "string": T.StringType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "boolean": T.BooleanType(),
    "array<string>": T.ArrayType(T.StringType()),
}

#: the Spark schema of an event line: every field of every kind, typed as FIELD_TYPES says
EVENT_SCHEMA = T.StructType([T.StructField(name, _SPARK_TYPES[FIELD_TYPES[name]], True) for name in ALL_FIELDS])


class PipelineError(Exception):
    """A user-facing error (missing path, empty input, newer schema, bad option): one line, exit 2."""


@dataclass
class JobResult:
    """What a job's ``run`` returns: headline figures, its exit status, report and tables."""

    job: str
    summary: dict
    exit_code: int
    report: str
    tables: dict[str, str] = field(default_factory=dict)


def _is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster")


def _local_cores(master: str) -> int:
    """The cores a local master uses: local -> 1, local[4] -> 4, local[*] -> all."""
    if master == "local":
        return 1
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "*"
    inside = inside.split(",")[0]
    if inside == "*" or not inside.isdigit():
        return os.cpu_count() or 1
    return max(1, int(inside))


def _log4j2_file() -> str:
    """A file holding LOG4J2_PROPERTIES (written once per content, in the temporary folder)."""
    digest = hashlib.sha1(LOG4J2_PROPERTIES.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"junction-spark-log4j2-{digest}.properties")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(LOG4J2_PROPERTIES)
        os.replace(tmp, path)
    return path


def get_spark(master: str | None = None, app: str = "junction-analyze") -> SparkSession:
    """A SparkSession for the jobs: no UI, UTC, WARN logs without start-up chatter, and for a
    local master SHUFFLE_PARTITIONS_PER_CORE partitions per core and a DEFAULT_LOCAL_DRIVER_MEMORY heap.

    Like ``getOrCreate``, it returns the running session when there is one; the
    options that shape the JVM (memory, logging) only apply when it starts one.
    """
    master = master or DEFAULT_MASTER
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j2_file()}")
    if _is_local_master(master):
        builder = builder.config(
            "spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS_PER_CORE * _local_cores(master))
        )
        memory = os.environ.get("JUNCTION_SPARK_DRIVER_MEMORY", DEFAULT_LOCAL_DRIVER_MEMORY)
        builder = builder.config("spark.driver.memory", memory)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


# -- reading -------------------------------------------------------------------------------


def _has_scheme(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return (bool(sep) and head.isalnum()) or path.startswith("file:")


def _local_path(path: str) -> str | None:
    """The local file system path of ``path``, or None when it is a URL of another file system."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    if _has_scheme(path):
        return None
    return path


def _kind_of_path(spark: SparkSession, path: str) -> str | None:
    """"file", "dir", "glob" (matches something) or None (nothing there)."""
    local = _local_path(path)
    if local is not None:
        if globlib.has_magic(local):
            return "glob" if globlib.glob(local, recursive=True) else None
        if os.path.isdir(local):
            return "dir"
        return "file" if os.path.exists(local) else None
    # another file system (hdfs://, s3a://, ...): ask Hadoop through the JVM
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if globlib.has_magic(path):
        statuses = fs.globStatus(hadoop_path)
        return "glob" if statuses is not None and len(statuses) > 0 else None
    if not fs.exists(hadoop_path):
        return None
    return "dir" if fs.getFileStatus(hadoop_path).isDirectory() else "file"


def _warn(message: str) -> None:
    print(f"junction analyze: warning: {message}", file=sys.stderr, flush=True)


def read_events(spark: SparkSession, path: str, kinds: Iterable[str] | None = None) -> DataFrame:
    """The events under ``path`` (only of ``kinds`` when given) as a DataFrame of :data:`EVENT_SCHEMA`.

    ``path`` is a file, a directory (its ``*.jsonl`` files, recursively), a
    glob, or any URL Spark reads.  One pass over the data checks it before a
    job starts: :class:`PipelineError` when nothing is there, nothing of the
    kinds asked for, or any event of a newer schema version (its fields may
    mean something else now).  Lines that are not events (not JSON objects
    with ``v``, ``kind`` and ``ts``) and events of kinds this pipeline does
    not know are left out with a warning on stderr: a damaged or newer line
    must not stop the analysis of a billion good ones.
    """
    wanted = tuple(KINDS) if kinds is None else tuple(dict.fromkeys(kinds))
    unknown_wanted = [k for k in wanted if k not in KINDS]
    if unknown_wanted:
        raise PipelineError(f"unknown event kinds {', '.join(unknown_wanted)}")
    if not wanted:
        raise PipelineError("no event kinds to read")
    where = _kind_of_path(spark, path)
    if where is None:
        raise PipelineError(f"no such path: {path}")
    reader = spark.read.schema(EVENT_SCHEMA).option("mode", "PERMISSIVE")
    if where == "dir":
        reader = reader.option("recursiveFileLookup", "true").option("pathGlobFilter", EVENT_FILE_GLOB)
    raw = reader.json(path)

    malformed = F.col("kind").isNull() | F.col("v").isNull() | F.col("ts").isNull()
    known = F.col("kind").isin(list(KINDS))
    in_wanted = F.col("kind").isin(list(wanted))
    stats = raw.agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.when(malformed, 1).otherwise(0)).alias("malformed"),
        F.max("v").alias("max_v"),
        F.sum(F.when(~malformed & ~known, 1).otherwise(0)).alias("unknown"),
        F.sum(F.when(~malformed & in_wanted, 1).otherwise(0)).alias("wanted"),
    ).first()
    lines = stats["lines"] or 0
    if lines == 0:
        raise PipelineError(f"no events in {path}")
    if stats["max_v"] is not None and stats["max_v"] > SCHEMA_VERSION:
        raise PipelineError(
            f"events of schema version {stats['max_v']} in {path} are newer than this "
            f"pipeline's ({SCHEMA_VERSION}): upgrade junction"
        )
    if stats["malformed"]:
        _warn(f"{stats['malformed']} lines in {path} are not events (JSON objects with v, kind and ts); ignored")
    if stats["unknown"]:
        names = [
            row["kind"]
            for row in raw.filter(~malformed & ~known).select("kind").distinct().limit(MAX_UNKNOWN_KINDS_NAMED).collect()
        ]
        _warn(f"{stats['unknown']} events of unknown kinds ({', '.join(sorted(names))}) in {path}; ignored")
    if not stats["wanted"]:
        if lines == stats["malformed"]:
            raise PipelineError(f"no events in {path}")
        raise PipelineError(f"no events of kinds {', '.join(wanted)} in {path}")
    return raw.filter(~malformed & in_wanted)


# -- writing -------------------------------------------------------------------------------


def _join(out: str, name: str) -> str:
    if _local_path(out) is None:
        return out.rstrip("/") + "/" + name
    return os.path.join(out, name)


def write_table(df: DataFrame, out: str, name: str) -> str:
    """Write ``df`` as Parquet to ``out/name`` (replacing what was there); the path written."""
    path = _join(out, name)
    df.write.mode("overwrite").parquet(path)
    return path


# -- progress --------------------------------------------------------------------------------


def _quiet() -> bool:
    return os.environ.get(PROGRESS_ENV, "1").strip() == "0"


class Progress:
    """Shows what a running job is doing on stderr: its phases and Spark's active stages.

    A daemon thread asks Spark's status tracker every :data:`PROGRESS_POLL_S`;
    on a terminal one line is rewritten in place, otherwise a line is printed
    at most every :data:`PROGRESS_LINE_INTERVAL_S` (and only when something
    moved), so logs of long runs stay short.
    """

    def __init__(self, spark: SparkSession, job: str, stream=None):
        self.spark = spark
        self.job = job
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = _quiet()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shown = ""  # what the terminal line shows now (tty only)
        self._last_line = ""
        self._last_time = 0.0

    def phase(self, msg: str) -> None:
        """Print ``[job] msg`` (a step of the job: reading, joining, writing the report...)."""
        if self.quiet:
            return
        with self._lock:
            self._clear()
            print(f"[{self.job}] {msg}", file=self.stream, flush=True)

    def _clear(self) -> None:
        if self.tty and self._shown:
            self.stream.write("\r" + " " * len(self._shown) + "\r")
            self.stream.flush()
            self._shown = ""

    def _describe(self) -> str:
        tracker = self.spark.sparkContext.statusTracker()
        parts = []
        for stage_id in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(stage_id)
            if info is None:
                continue
            parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks")
        return f"[{self.job}] " + ", ".join(parts) if parts else ""

    def _show(self, line: str) -> None:
        with self._lock:
            if self.tty:
                if line != self._shown:
                    pad = " " * max(0, len(self._shown) - len(line))
                    self.stream.write("\r" + line + pad)
                    self.stream.flush()
                    self._shown = line
            elif line and line != self._last_line and time.monotonic() - self._last_time >= PROGRESS_LINE_INTERVAL_S:
                print(line, file=self.stream, flush=True)
                self._last_line = line
                self._last_time = time.monotonic()

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_POLL_S):
            try:
                self._show(self._describe())
            except Exception:  # the session is stopping, or py4j is gone: progress is best effort
                return

    def start(self) -> None:
        if self.quiet:
            return
        self._thread = threading.Thread(target=self._run, name=f"progress-{self.job}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(PROGRESS_POLL_S * 4)
            self._thread = None
        with self._lock:
            self._clear()


_active: list[Progress] = []


@contextmanager
def progress(spark: SparkSession, job: str) -> Iterator[Progress]:
    """While inside, Spark's stage progress is shown on stderr; yields the :class:`Progress`.

    ``with progress(spark, "audit") as p: p.phase("reading events")`` -- or the
    module function :func:`phase`, which speaks for the innermost one.
    """
    shown = Progress(spark, job)
    _active.append(shown)
    shown.start()
    try:
        yield shown
    finally:
        shown.stop()
        _active.remove(shown)


def phase(msg: str, job: str | None = None) -> None:
    """Print ``[job] msg``; ``job`` defaults to the innermost :func:`progress` block's job."""
    if _active and job is None:
        _active[-1].phase(msg)
        return
    if not _quiet():
        print(f"[{job or 'analyze'}] {msg}", file=sys.stderr, flush=True)
