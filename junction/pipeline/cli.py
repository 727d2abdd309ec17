"""``junction analyze``: the Spark jobs over event logs, and the synthetic log generator.

``junction analyze audit|routing|gravity --events PATH --out DIR`` runs one
job (:mod:`junction.pipeline.audit`, ``routing``, ``gravity``), prints its
headline figures and the report's path, and exits with the job's status (the
audit's is 1 when messages were lost or unexpected).  ``junction analyze
synth --events N --out DIR`` writes a synthetic log with its truth.

Nothing here imports pyspark, so ``junction`` works without the ``spark``
extra: a job's module (and pyspark) is imported only once that job's command
line is being parsed -- its options come from the module's
``add_arguments`` -- and a missing pyspark is then one clear line, exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

__all__ = ["add_parser", "main", "JOBS"]

#: the Spark jobs: sub-command -> one line of help
JOBS = {
    "routing": "how the gateway routed connections: decisions, refusals, balance, decision times",
    "audit": "follow every message across nodes: lost, duplicated, unexpected, out of order, latency",
    "gravity": "data gravity: a partition of keys over the brokers that keeps their traffic local, and its router config",
}
#: exit status of a user error (missing path, empty input, newer events, no pyspark)
EXIT_USAGE = 2
#: the options every job has; whatever else the parsed arguments hold goes to the job's run()
_COMMON_DESTS = frozenset({"command", "func", "analyze_command", "events", "out", "master", "json"})
_INSTALL_HINT = "pip install 'junction[spark]'"
_EVENT_FILE_SUFFIX = ".jsonl"


def _error(message: str) -> int:
    print(f"junction analyze: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _missing_extra(exc: ImportError) -> bool:
    """Whether ``exc`` is the spark extra missing (pyspark, py4j or matplotlib)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    return name in ("pyspark", "py4j", "matplotlib")


def _import_job(job: str):
    """The job's module; :class:`SystemExit` (status 2) with one line when it cannot be imported."""
    try:
        return importlib.import_module(f"junction.pipeline.{job}")
    except ImportError as exc:
        if _missing_extra(exc):
            raise SystemExit(_error(f"the analyze jobs need pyspark, which is not installed: {_INSTALL_HINT}")) from None
        raise SystemExit(_error(f"the {job} job is not available ({exc})")) from None


class _JobParser(argparse.ArgumentParser):
    """A sub-command parser that adds its job's own options only when it is used.

    So ``junction --help`` and every other command never import pyspark.
    """

    job: str | None = None
    _job_loaded = False

    def _load_job(self) -> None:
        if self.job and not self._job_loaded:
            self._job_loaded = True
            _import_job(self.job).add_arguments(self)

    def parse_known_args(self, args=None, namespace=None):
        self._load_job()
        return super().parse_known_args(args, namespace)

    def format_help(self):
        self._load_job()
        return super().format_help()


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``analyze`` and its sub-commands on ``junction``'s sub-parsers."""
    analyze = subparsers.add_parser(
        "analyze", help="analyse nodes' event logs with Spark (audit, routing, gravity) or make a synthetic one",
        description="Analyse the JSON Lines event logs that nodes write (<junction><events>) with Spark.",
    )
    jobs = analyze.add_subparsers(dest="analyze_command", required=True, parser_class=_JobParser)
    for job, help_text in JOBS.items():
        parser = jobs.add_parser(job, help=help_text, description=help_text)
        parser.job = job
        parser.add_argument("--events", required=True, metavar="PATH",
                            help="event files: a file, a directory (its *.jsonl, recursively), a glob or a URL")
        parser.add_argument("--out", required=True, metavar="PATH",
                            help=f"where the Parquet tables and {job}.html are written")
        parser.add_argument("--master", default="local[*]", metavar="URL",
                            help="the Spark master (default: %(default)s)")
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
        parser.set_defaults(func=main)

    synth = jobs.add_parser(
        "synth", help="write a synthetic event log with known faults (and truth.json)",
        description="Write what a gateway and its broker cores would log, with planted faults "
                    "recorded in truth.json, to try and test the jobs.",
    )
    synth.add_argument("--events", type=int, required=True, metavar="N", help="about how many events to write")
    synth.add_argument("--out", required=True, metavar="DIR", help="the directory to write to")
    synth.add_argument("--seed", type=int, default=1, help="the same seed gives the same files (default: 1)")
    synth.add_argument("--nodes", type=int, default=3, help="broker cores behind the gateway (default: 3)")
    synth.add_argument("--keys", type=int, default=200, help="users, the routing keys (default: 200)")
    synth.add_argument("--tenants", type=int, default=8, help="tenants the users belong to (default: 8)")
    synth.add_argument("--addresses-per-tenant", type=int, default=4, help="addresses of each tenant (default: 4)")
    synth.add_argument("--groups", type=int, default=40, help="message groups per chunk of messages (default: 40)")
    for name, default, what in (
        ("loss", 0.001, "lost"), ("duplicates", 0.001, "acknowledged twice"),
        ("reorders", 0.0005, "delivered out of group order"), ("unexpected", 0.0002, "without message.sent"),
        ("expired", 0.0005, "expired"), ("dead-lettered", 0.0003, "dead-lettered"),
        ("cross-tenant", 0.03, "to or from another tenant's addresses"),
    ):
        synth.add_argument(f"--{name}", type=float, default=default, metavar="P",
                           help=f"chance that a message is {what} (default: {default})")
    synth.add_argument("--rate", type=float, default=2000.0, help="messages per second of log time (default: 2000)")
    synth.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    synth.add_argument("--json", action="store_true", help="print the truth's figures as JSON")
    synth.set_defaults(func=main)
    return analyze


def _precheck(path: str) -> str | None:
    """A user error found without starting Spark (local paths only), or None."""
    if "://" in path or path.startswith("file:") or any(c in path for c in "*?["):
        return None
    if not os.path.exists(path):
        return f"no such path: {path}"
    if os.path.isdir(path):
        for _root, _dirs, files in os.walk(path):
            if any(f.endswith(_EVENT_FILE_SUFFIX) for f in files):
                return None
        return f"no events in {path}"
    return None


def _print_summary(title: str, summary: dict, extra: list[tuple[str, str]]) -> None:
    width = max([len(k) for k in summary] + [len(k) for k, _ in extra] + [1])
    print(title)
    for key, value in summary.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            shown = json.dumps(value) if not isinstance(value, str) else value
        elif isinstance(value, int):
            shown = f"{value:,}"
        else:
            shown = f"{value:,.4g}"
        print(f"  {key.replace('_', ' '):<{width}}  {shown}")
    for key, value in extra:
        print(f"{key}: {value}")


def _run_synth(args) -> int:
    from junction.pipeline.synth import generate

    names = ("seed", "nodes", "keys", "tenants", "addresses_per_tenant", "groups", "loss", "duplicates",
             "reorders", "unexpected", "expired", "dead_lettered", "cross_tenant", "rate", "workers")
    try:
        truth = generate(args.out, args.events, **{n: getattr(args, n) for n in names})
    except ValueError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"cannot write {args.out}: {exc}")
    figures = {
        "events": truth.events, "messages": truth.messages, "files": len(truth.files),
        "lost": len(truth.lost), "duplicated": len(truth.duplicated), "unexpected": len(truth.unexpected),
        "out_of_order": len(truth.out_of_order), "expired": truth.expired, "dead_lettered": truth.dead_lettered,
        "tenants": len(truth.tenants), "connections": truth.connections,
        "refused": sum(truth.refused.values()),
    }
    truth_path = os.path.join(args.out, "truth.json")
    if args.json:
        print(json.dumps({"job": "synth", "summary": figures, "truth": truth_path}))
    else:
        _print_summary(f"synth: {args.out}", figures, [("truth", truth_path)])
    return 0


def _run_job(args) -> int:
    job = args.analyze_command
    problem = _precheck(args.events)
    if problem:
        return _error(problem)
    module = _import_job(job)
    try:
        from junction.pipeline.common import PipelineError, get_spark
    except ImportError as exc:
        if _missing_extra(exc):
            return _error(f"the analyze jobs need pyspark, which is not installed: {_INSTALL_HINT}")
        raise
    from pyspark.sql import SparkSession

    options = {k: v for k, v in vars(args).items() if k not in _COMMON_DESTS}
    # called from a program that has a session already (a notebook, the tests): use it, leave it running
    running = SparkSession.getActiveSession()
    try:
        spark = running or get_spark(args.master, app=f"junction-analyze-{job}")
    except Exception as exc:  # no Java, a bad master URL...: one line, not a Py4J trace
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return _error(f"could not start Spark ({args.master}): {first_line}")
    try:
        result = module.run(spark, args.events, args.out, **options)
    except PipelineError as exc:
        return _error(str(exc))
    finally:
        if running is None:
            spark.stop()
    if args.json:
        print(json.dumps({
            "job": result.job, "summary": result.summary, "exit_code": result.exit_code,
            "report": result.report, "tables": result.tables,
        }))
    else:
        _print_summary(
            f"{job}: {args.events}", result.summary,
            [("report", result.report), ("tables", ", ".join(sorted(result.tables)) or "-")],
        )
    return result.exit_code


def main(args) -> int:
    """Run the parsed ``junction analyze ...`` command; its exit status."""
    try:
        if args.analyze_command == "synth":
            return _run_synth(args)
        return _run_job(args)
    except KeyboardInterrupt:
        print("junction analyze: interrupted", file=sys.stderr)
        return 130
