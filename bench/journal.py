#!/usr/bin/env python3
"""Journal group-commit throughput and append-to-durable latency.

Two measurements in one run, on one disk, so their ratio is meaningful:

* **group commit** -- ``--records`` (100,000) records of ``--size`` (300)
  bytes appended with ``sync=True`` from the reactor thread, by
  ``--inflight`` (256) simulated concurrent producers: each producer appends
  its next record when the previous one is durable, the way a broker with
  that many producers waiting for their send confirmations would.
* **baseline** -- ``--baseline-records`` (2,000) records, one producer, so
  each record gets a write and fsync of its own (no group commit).

For each: records/s, syncs, records per sync, the p50/p99/max latency from
the append call to its Deferred firing (record durable), and the process CPU
time per record (reactor, writer and preallocator threads; this figure is
steadier than records/s on a shared machine).  Then the ratio
group/baseline.  ``--buffer-timeout-us`` sets the journal's
``buffer_timeout_ns``; ``--no-preallocate`` turns segment preallocation off.

The journal directory is a fresh temporary directory under ``--dir``
(default: the current directory, so the disk is the project's, not a tmpfs).

Run: ``python bench/journal.py`` (from the repository root).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from junction.brokercore.journal import Journal  # noqa: E402


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, int(round(p / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[k]


def run_load(reactor, directory, records, size, inflight, args):
    """Append ``records`` with ``inflight`` producers; a Deferred of the result dict."""
    from twisted.internet.defer import Deferred

    journal = Journal(
        directory,
        file_size=args.file_size,
        buffer_timeout_ns=args.buffer_timeout_us * 1000,
        reactor=reactor,
        preallocate=not args.no_preallocate,
        writer=args.writer,
    )
    journal.load()
    journal.start()
    payload = os.urandom(size)
    latencies = []
    state = {"issued": 0, "done": 0, "errors": 0}
    finished = Deferred()
    now = time.perf_counter_ns

    def issue():
        state["issued"] += 1
        start = now()
        d = journal.append_add(journal.next_id(), 1, payload, sync=True)
        d.addCallbacks(confirmed, failed, callbackArgs=(start,))

    def confirmed(_result, start):
        latencies.append(now() - start)
        state["done"] += 1
        if state["issued"] < records:
            issue()
        elif state["done"] == records:
            finish()

    def failed(f):
        state["errors"] += 1
        print("append failed:", f.getErrorMessage(), file=sys.stderr)
        state["done"] += 1
        if state["done"] == records:
            finish()

    def finish():
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        stats = journal.stats()

        def stopped(_):
            latencies.sort()
            finished.callback(
                {
                    "records": records,
                    "seconds": elapsed,
                    "rate": records / elapsed,
                    "cpu_us": cpu / records * 1e6,
                    "syncs": stats["syncs"],
                    "reactor_batches": stats["reactor_batches"],
                    "records_per_sync": stats["records_per_sync"],
                    "p50_ms": percentile(latencies, 50) / 1e6,
                    "p99_ms": percentile(latencies, 99) / 1e6,
                    "max_ms": latencies[-1] / 1e6 if latencies else 0.0,
                    "files": stats["files"],
                    "errors": state["errors"],
                }
            )

        journal.stop().addCallback(stopped)

    t0 = time.perf_counter()
    c0 = time.process_time()
    for _ in range(min(inflight, records)):
        issue()
    return finished


def show(label, r):
    print(
        f"{label:14s} {r['records']:>7d} records  {r['rate']:>9.0f} rec/s  "
        f"{r['syncs']:>6d} syncs ({r['reactor_batches']} batches on the reactor)  "
        f"{r['records_per_sync']:>7.1f} rec/sync  "
        f"p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  max {r['max_ms']:.2f} ms  "
        f"CPU {r['cpu_us']:.1f} us/rec" + (f"  ERRORS {r['errors']}" if r["errors"] else "")
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=300, help="payload bytes per record")
    parser.add_argument("--inflight", type=int, default=256, help="concurrent producers")
    parser.add_argument("--baseline-records", type=int, default=2_000)
    parser.add_argument("--buffer-timeout-us", type=int, default=0)
    parser.add_argument("--file-size", type=int, default=10 * 1024 * 1024)
    parser.add_argument("--no-preallocate", action="store_true")
    parser.add_argument(
        "--writer",
        choices=("adaptive", "thread"),
        default="adaptive",
        help="the journal's writer (adaptive: the default, lone batches on the reactor)",
    )
    parser.add_argument("--dir", default=".", help="parent of the temporary journal directory")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args(argv)

    from twisted.internet import reactor

    root = tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir)
    results = {}

    def go():
        d = run_load(
            reactor, os.path.join(root, "baseline"), args.baseline_records, args.size, 1, args
        )

        def baseline_done(r):
            results["baseline"] = r
            return run_load(
                reactor, os.path.join(root, "group"), args.records, args.size, args.inflight, args
            )

        def group_done(r):
            results["group"] = r

        def report_error(f):
            print(f.getTraceback(), file=sys.stderr)

        d.addCallback(baseline_done)
        d.addCallback(group_done)
        d.addErrback(report_error)
        d.addBoth(lambda _: reactor.stop())

    reactor.callWhenRunning(go)
    try:
        reactor.run()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if "group" not in results:
        return 1
    if args.json:
        import json

        results["ratio"] = results["group"]["rate"] / results["baseline"]["rate"]
        print(json.dumps(results))
        return 0
    print(
        f"journal bench: {args.size}-byte records, sync=True, file size {args.file_size}, "
        f"buffer timeout {args.buffer_timeout_us} us, preallocate {not args.no_preallocate}, "
        f"{os.cpu_count()} CPUs"
    )
    show("baseline (1)", results["baseline"])
    show(f"group ({args.inflight})", results["group"])
    ratio = results["group"]["rate"] / results["baseline"]["rate"]
    print(f"group commit / one fsync per record: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
