"""Two builds of Junction in one run: the benches' ``--baseline REV``.

``bench/stomp_throughput.py``, ``bench/amqp_throughput.py`` and
``bench/gateway.py`` measure the checkout they are in.  With ``--baseline
REV`` they also measure git revision REV of this repository, in the same
invocation, and print for every scenario both figures and the ratio
current / baseline with its spread, so that a change can be checked for
"no slower than before" on a machine whose speed drifts:

* **the baseline tree** -- ``git archive REV | tar -x`` into a fresh
  temporary directory (never inside the repository), removed when the run
  ends, also on an error, Ctrl-C or the watchdog's hard stop;
* **the nodes** -- each build's nodes are ``python -m junction run`` started
  by ``tests/harness.py`` of this checkout (same interpreter and virtualenv,
  same generated configuration, free ports from the same scheme), with
  ``PYTHONPATH`` set to that build's tree: the exported tree for the
  baseline, this checkout (uncommitted changes included) for the current
  build.  ``PYTHONPATH`` comes before the virtualenv's editable install on
  ``sys.path``, and a node that did not import ``junction`` from the
  exported tree (no bytecode written there) fails the run.  Both builds'
  nodes are up for the whole run; the clients are this checkout's;
* **the order** -- every scenario runs ``--rounds`` rounds (``--runs`` in
  ``bench/gateway.py``); in each round both builds run it once, the first of
  the two alternating between rounds (baseline, current, current,
  baseline, ...), so a drift of the shared machine's speed falls on both
  alike and a linear drift cancels over two rounds;
* **the figures** -- per scenario and figure, the median of each build's
  rounds and the ratio current / baseline of each round (the two trials of
  one round ran next to each other): median, min and max.  The spread of
  those ratios over ``--baseline HEAD`` (the build against itself) is the
  noise floor: a difference inside it cannot be told from noise;
* **guards** -- every process (clients, nodes of both builds) shares the
  same CPUs, the bench's own; both builds' nodes run with the same
  ``PYTHONHASHSEED``; the CPU that the build *not* under test uses
  during a trial (it should be idle) and the CPU that programs outside the
  benchmark use are measured and reported, with a warning above
  :data:`IDLE_CPU_WARN` and :data:`OTHERS_WARN`; the load average at the
  start and the end is printed with the figures.

A bad REV (or one without a ``junction`` package) is refused before
anything starts, with exit status 2.

What stays the same for both builds, and so is not compared: the client
code, ``tests/harness.py`` and the configuration it writes.  The exported
tree has no package metadata of its own: entry points are read from the
virtualenv's installed package, as the tests read them.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

try:
    from . import common  # imported as bench.baseline from the repository root
except ImportError:  # run from a script in bench/: bench/ is on sys.path
    import common

#: the names of the two builds, as the tables and the JSON rows show them
BASELINE, CURRENT = "baseline", "current"
#: rounds per scenario when the script has no ``--runs`` of its own
ROUNDS = 5
#: the ``PYTHONHASHSEED`` of both builds' nodes (see :meth:`Build.env`)
HASH_SEED = "0"
#: seconds ``git`` and ``tar`` may take to resolve and export a revision
GIT_TIMEOUT = 120.0
#: share of one CPU that the build not under test may use during the trials before a warning
IDLE_CPU_WARN = 0.02
#: CPUs that other programs may use during the trials before a warning
OTHERS_WARN = 0.1


class BaselineError(common.BenchError):
    """``--baseline REV`` cannot be honoured: not a commit, no ``junction`` in it, export failed."""


# --------------------------------------------------------------------------- the builds


@dataclass(frozen=True)
class Build:
    """One build under test: its name, the tree its nodes import ``junction`` from, a label."""

    name: str
    root: Path
    label: str

    def env(self) -> dict[str, str | None]:
        """Environment entries of this build's node processes: ``PYTHONPATH`` to its tree.

        Given to ``tests/harness.BrokerProcess(env=...)``, which lets them override
        its own ``PYTHONPATH`` (this checkout); None removes a variable.  A node
        of an exported tree writes its bytecode there (the tree is removed
        afterwards), which is how :meth:`check_imported` sees where it imported
        ``junction`` from.  Every build's nodes get the same ``PYTHONHASHSEED``
        (:data:`HASH_SEED` unless this process has one): with a random seed per
        process, the layout of every str-keyed dict and set differs between the
        two nodes for the whole run, a difference that is not the code's and
        that alternating rounds cannot average out.
        """
        inherited = os.environ.get("PYTHONPATH")
        env: dict[str, str | None] = {
            "PYTHONPATH": str(self.root) + (os.pathsep + inherited if inherited else ""),
            "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", HASH_SEED),
        }
        if self.root != common.REPO_ROOT:
            env["PYTHONDONTWRITEBYTECODE"] = None
        return env

    def environ(self) -> dict[str, str]:
        """This process's environment with :meth:`env` applied, for ``subprocess``."""
        env = dict(os.environ)
        for k, v in self.env().items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def check_imported(self) -> None:
        """BenchError unless a node has imported ``junction`` from this tree.

        An exported tree starts without bytecode; Python writes
        ``junction/__pycache__`` when it imports the package from there (see
        :meth:`env`).  Nothing to check for this checkout.
        """
        if self.root == common.REPO_ROOT:
            return
        if not any((self.root / "junction" / "__pycache__").glob("__init__.*.pyc")):
            raise common.BenchError(
                f"the {self.name} node did not import junction from {self.root}: "
                "the comparison would measure the wrong code"
            )


def git(*argv: str, repo: Path = common.REPO_ROOT) -> subprocess.CompletedProcess:
    """``git -C repo ARGV...``, its output as text (not checked)."""
    return subprocess.run(
        ["git", "-C", str(repo), *argv],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def resolve(rev: str, repo: Path = common.REPO_ROOT) -> str:
    """The full hash of commit ``rev`` of ``repo``, or BaselineError saying why not."""
    if not rev or rev.startswith("-"):
        raise BaselineError(f"--baseline {rev!r}: not a revision")
    r = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", repo=repo)
    if r.returncode != 0 or not r.stdout.strip():
        raise BaselineError(f"--baseline {rev!r}: no such commit in this repository")
    return r.stdout.strip()


def describe(commit: str, repo: Path = common.REPO_ROOT) -> str:
    """A short label of ``commit``: its abbreviated hash and subject."""
    r = git("log", "-1", "--format=%h %s", commit, repo=repo)
    return r.stdout.strip()[:60] if r.returncode == 0 else commit[:12]


def describe_checkout(repo: Path = common.REPO_ROOT) -> str:
    """This checkout: HEAD's short hash, and whether ``junction/`` (what a node runs) differs."""
    head = git("rev-parse", "--short", "HEAD", repo=repo).stdout.strip() or "?"
    dirty = git("status", "--porcelain", "--", "junction", repo=repo).stdout.strip()
    return (
        f"{head} + uncommitted changes in junction/"
        if dirty
        else f"{head} (junction/ as committed)"
    )


@contextmanager
def exported(
    commit: str, repo: Path = common.REPO_ROOT, *, parent: str | None = None
) -> Iterator[Path]:
    """Export ``commit`` of ``repo`` (``git archive | tar -x``) into a temporary directory.

    Yields the directory; removes it on exit, and also when the watchdog
    stops the run (the removal is on :data:`common.CLEANUP`).  ``parent``
    is where the temporary directory goes (the system's default if None);
    one inside the repository is refused.
    """
    tree = Path(tempfile.mkdtemp(prefix="junction-baseline-", dir=parent)).resolve()
    name = f"baseline tree {tree.name}"
    common.CLEANUP.push(name, lambda: shutil.rmtree(tree, ignore_errors=True))
    try:
        if tree.is_relative_to(repo.resolve()):
            raise BaselineError(f"refusing to export into the repository ({tree})")
        archive = subprocess.Popen(
            ["git", "-C", str(repo), "archive", "--format=tar", commit],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        try:
            untar = subprocess.run(
                ["tar", "-x", "-C", str(tree)],
                stdin=archive.stdout,
                capture_output=True,
                timeout=GIT_TIMEOUT,
            )
        finally:
            archive.stdout.close()
            archive_err = archive.stderr.read().decode(errors="replace")
            archive.stderr.close()
            archive.wait(GIT_TIMEOUT)
        if archive.returncode != 0 or untar.returncode != 0:
            raise BaselineError(
                f"exporting {commit[:12]} failed: git archive {archive.returncode} "
                f"{archive_err.strip()}; tar {untar.returncode} "
                f"{untar.stderr.decode(errors='replace').strip()}"
            )
        if not (tree / "junction" / "__main__.py").is_file():
            raise BaselineError(f"--baseline {commit[:12]}: that commit has no junction package")
        yield tree
    finally:
        common.CLEANUP.run(name)
        shutil.rmtree(tree, ignore_errors=True)


def current_build() -> Build:
    return Build(CURRENT, common.REPO_ROOT, describe_checkout())


@contextmanager
def builds(commit: str) -> Iterator[list[Build]]:
    """The baseline (``commit``, exported) and current builds, in that order."""
    with exported(commit) as tree:
        yield [Build(BASELINE, tree, describe(commit)), current_build()]


def order(items: list, round_no: int) -> list:
    """Round 0 in the given order, round 1 reversed, ...: ABBA over the rounds."""
    return list(items) if round_no % 2 == 0 else list(reversed(items))


# --------------------------------------------------------------------------- the options


def add_options(p, *, rounds: bool = True) -> None:
    """``--baseline REV`` (and ``--rounds N`` for a script without ``--runs``)."""
    p.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure git revision REV of this repository (exported to a temporary "
        "directory), interleaved with this checkout; print current/baseline ratios",
    )
    if rounds:
        p.add_argument(
            "--rounds",
            type=int,
            default=ROUNDS,
            help="with --baseline: alternating rounds per mode (each build once per round)",
        )


def dispatch(args, parser, run_baseline: Callable[[], int]) -> int | None:
    """A script's ``--baseline`` branch: exit status 2 for bad options (printed),
    ``run_baseline()``'s status with ``--baseline``, None without it (the script goes on)."""
    problem = options_problem(args, parser)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return None if args.baseline is None else run_baseline()


def options_problem(args, parser) -> str | None:
    """What is wrong with ``--baseline`` and its companions, or None (the script exits 2).

    Resolves REV to ``args.baseline_commit``, so a bad one is refused before
    anything starts.  With ``--baseline`` Junction is the only target (no
    ``--compare``, no other ``--target``, no ``--port``).  A ``--timeout``
    left at its default grows with the rounds, as the run does.
    """
    args.baseline_commit = None
    if args.baseline is None:
        return None
    if getattr(args, "compare", None) or getattr(args, "target", "junction") != "junction":
        return "--baseline compares two Junction builds: no --compare or --target with it"
    if getattr(args, "port", None) is not None:
        return "--baseline starts its own nodes: no --port with it"
    rounds = args.rounds if hasattr(args, "rounds") else args.runs
    if rounds <= 0:
        return "--rounds must be positive"
    try:
        args.baseline_commit = resolve(args.baseline)
    except BaselineError as e:
        return str(e)
    if args.timeout == parser.get_default("timeout"):
        args.timeout *= max(2, rounds)
    return None


# --------------------------------------------------------------------------- guards


def affinity_text() -> str:
    cpus = sorted(os.sched_getaffinity(0))
    return f"{len(cpus)} CPUs ({','.join(map(str, cpus))}) shared by clients and nodes"


def own_cpu() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class TrialWatch:
    """What else used the CPUs while a trial ran: the idle build, and other programs.

    Both builds' nodes stay up for the whole run; the one waiting its turn
    should be idle.  ``pids`` maps a build's name to its nodes' PIDs.
    *Others* is the host's busy CPU minus both builds' nodes, this process
    and its finished children (the consumer processes): programs outside the
    benchmark, which make its figures noisy.  CPU comes in clock ticks
    (10 ms), so one trial's share is coarse; the shares over all trials are
    what :meth:`note` judges.
    """

    def __init__(self, pids: dict[str, list[int]]) -> None:
        self.pids = pids
        self.idle_ticks = 0
        self.other_seconds = 0.0
        self.seconds = 0.0

    @property
    def share(self) -> float:
        """The idle builds' CPU over all trials, as a share of one CPU."""
        return self.idle_ticks / common.CLK_TCK / self.seconds if self.seconds > 0 else 0.0

    @property
    def others(self) -> float:
        """Other programs' CPU over all trials, in CPUs."""
        return self.other_seconds / self.seconds if self.seconds > 0 else 0.0

    def run(self, build: str, fn: Callable[[], dict]) -> dict:
        """``fn()``'s row with ``idle_build_cpu`` and ``other_cpu`` (CPUs) during it."""
        every = [p for pids in self.pids.values() for p in pids]
        idle = [p for name, pids in self.pids.items() if name != build for p in pids]
        before = (self._ticks(idle), self._ticks(every), common.host_busy_ticks(), own_cpu())
        t0 = time.monotonic()
        row = fn()
        seconds = time.monotonic() - t0
        after = (self._ticks(idle), self._ticks(every), common.host_busy_ticks(), own_cpu())
        if None in before or None in after or seconds <= 0:
            return row
        idle_ticks, node_ticks, host_ticks, own = (
            b - a for a, b in zip(before, after, strict=True)
        )
        other = max(0.0, (host_ticks - node_ticks) / common.CLK_TCK - own)
        row["idle_build_cpu"] = idle_ticks / common.CLK_TCK / seconds
        row["other_cpu"] = other / seconds
        self.idle_ticks += idle_ticks
        self.other_seconds += other
        self.seconds += seconds
        return row

    @staticmethod
    def _ticks(pids: list[int]) -> int | None:
        ticks = [common.proc_cpu_ticks(p) for p in pids]
        return None if any(t is None for t in ticks) else sum(ticks)

    def note(self) -> str:
        text = (
            f"during the {self.seconds:.0f} s of trials: the build waiting its turn used "
            f"{self.share:.1%} of a CPU, other programs {self.others:.2f} CPUs"
        )
        if self.share > IDLE_CPU_WARN:
            text += f"\nWARNING: the idle build used over {IDLE_CPU_WARN:.0%} of a CPU"
        if self.others > OTHERS_WARN:
            text += (
                f"\nWARNING: other programs used over {OTHERS_WARN:g} CPUs: the ratios are "
                "noisier than on a quiet machine"
            )
        return text


# --------------------------------------------------------------------------- the comparison


def compare(
    rows: list[dict], keys: tuple[str, ...], metrics, *, round_key: str = "round"
) -> list[dict]:
    """Per scenario (rows matched on ``keys``) and metric: medians and round ratios.

    ``rows`` carry ``build`` and ``round_key``; a row with ``error`` or a
    None figure is left out.  A round's ratio is current / baseline of that
    round's two trials; ``metrics`` are ``(field, label, format)``.
    """
    scenarios: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        per_build = scenarios.setdefault(tuple(r.get(k) for k in keys), {BASELINE: {}, CURRENT: {}})
        if r.get("build") in per_build and "error" not in r:
            per_build[r["build"]][r[round_key]] = r
    out = []
    for key, per_build in scenarios.items():
        base, cur = per_build[BASELINE], per_build[CURRENT]
        for field, label, spec in metrics:
            b = [r[field] for r in base.values() if r.get(field) is not None]
            c = [r[field] for r in cur.values() if r.get(field) is not None]
            ratios = sorted(
                cur[n][field] / base[n][field]
                for n in base.keys() & cur.keys()
                if cur[n].get(field) is not None and base[n].get(field)
            )
            if not b and not c:
                continue
            out.append(
                {
                    **dict(zip(keys, key, strict=True)),
                    "metric": field,
                    "label": label,
                    "format": spec,
                    "baseline": statistics.median(b) if b else None,
                    "current": statistics.median(c) if c else None,
                    "rounds": len(ratios),
                    "ratio_median": statistics.median(ratios) if ratios else None,
                    "ratio_min": ratios[0] if ratios else None,
                    "ratio_max": ratios[-1] if ratios else None,
                }
            )
    return out


def print_comparison(comp: list[dict], key_header: str, key_cells: Callable[[dict], str]) -> None:
    """The table of :func:`compare`: a key, the figure, both medians, the round ratios."""
    f = common.fmt
    print(
        f"{key_header}  {'figure':14}  {'baseline':>10}  {'current':>10}  "
        f"{'ratio':>6}  {'min':>6}  {'max':>6}  rounds"
    )
    for q in comp:
        print(
            f"{key_cells(q)}  {q['label']:14}  {f(q['baseline'], q['format']):>10}  "
            f"{f(q['current'], q['format']):>10}  {f(q['ratio_median'], '.3f'):>6}  "
            f"{f(q['ratio_min'], '.3f'):>6}  {f(q['ratio_max'], '.3f'):>6}  {q['rounds']}"
        )


def header(the_builds: list[Build], rounds: int, load_start: float, load_end: float) -> str:
    """The lines that say what was compared, how, and on how loaded a machine."""
    labels = "; ".join(f"{b.name} = {b.label}" for b in the_builds)
    return (
        f"\ncurrent / baseline: {labels}\n"
        f"{rounds} round(s) per scenario, each build once per round, first of the pair "
        f"alternating; figures are medians of the rounds, ratio = median of the rounds' "
        f"current/baseline [min, max] (msg/s, conn/s: higher is better; ms, us: lower is "
        f"better); {affinity_text()}; load average {load_start:.2f} at the start, "
        f"{load_end:.2f} at the end"
    )


# --------------------------------------------------------------------------- the throughput scripts


#: what the throughput scripts compare: (row field, label, format)
THROUGHPUT_METRICS = (
    ("msgs_per_s", "msg/s", ",.0f"),
    ("p50_ms", "p50 ms", ".2f"),
    ("p99_ms", "p99 ms", ".2f"),
    ("broker_cpu_us_per_msg", "broker us/msg", ".1f"),
)


def run(args, script, *, name: str, trial: Callable, key_header: str, key_cells: Callable) -> int:
    """The throughput scripts' ``--baseline`` run: both builds, every mode, interleaved.

    ``script`` is the script's module; this uses its ``junction_target(args,
    deadline, build)`` (a context that starts a node of ``build`` and yields
    its Target), ``row_key``, ``MODE_KEYS``, ``format_row``, ``print_report``
    (its usual table) and ``json_settings``.  ``trial(target, mode, n, args,
    deadline, tag)`` runs one trial; ``key_header`` and ``key_cells(row)``
    make the comparison's key column.  ``args`` have passed
    :func:`options_problem`.  Exit status 1 if a trial failed, else 0.
    """
    commit = args.baseline_commit

    def run_all(args, deadline: common.Deadline) -> dict:
        load_start = os.getloadavg()[0]
        with builds(commit) as the_builds, ExitStack() as stack:
            targets = {}
            for b in the_builds:
                print(f"== {b.name}: {b.label} ({b.root})", file=sys.stderr)
                targets[b.name] = stack.enter_context(script.junction_target(args, deadline, b))
                b.check_imported()
            watch = TrialWatch({n: [t.pid] for n, t in targets.items() if t.pid is not None})

            def on(b: Build, mode, n: int, tag: str) -> dict:
                return trial(targets[b.name], mode, n, args, deadline, tag)

            rows: list[dict] = []
            for mode in args.modes:
                for b in the_builds:
                    if args.warmup:
                        warm = partial(on, b, mode, args.warmup, ".warm")
                        row = common.guarded(warm, script.row_key(b.name, mode), deadline)
                        if "error" in row:
                            print(f"  warm-up {script.format_row(row)}", file=sys.stderr)
                for n in range(args.rounds):
                    for b in order(the_builds, n):
                        measured = partial(
                            watch.run, b.name, partial(on, b, mode, args.messages, "")
                        )
                        row = common.guarded(measured, script.row_key(b.name, mode), deadline)
                        row.update(build=b.name, round=n)
                        rows.append(row)
                        print(f"  round {n}: {script.format_row(row)}", file=sys.stderr)
        return {
            "builds": the_builds,
            "rows": rows,
            "idle": watch.note(),
            "idle_share": watch.share,
            "others": watch.others,
            "load": (load_start, os.getloadavg()[0]),
        }

    def report(out: dict) -> None:
        json_wanted, args.json = args.json, False
        script.print_report(out["rows"], None, args)
        args.json = json_wanted
        comp = compare(out["rows"], script.MODE_KEYS, THROUGHPUT_METRICS)
        print(header(out["builds"], args.rounds, *out["load"]))
        print(out["idle"])
        print_comparison(comp, key_header, key_cells)
        if args.json:
            common.print_json(
                {
                    **script.json_settings(args),
                    "builds": {b.name: b.label for b in out["builds"]},
                    "rounds": args.rounds,
                    "loadavg": out["load"],
                    "idle_build_cpu": out["idle_share"],
                    "other_cpu": out["others"],
                    "comparison": comp,
                },
                out["rows"],
                None,
            )

    def failed(out: dict) -> bool:
        return any("error" in r for r in out["rows"])

    return common.run_guarded(name, args, run_all, report, failed)


# --------------------------------------------------------------------------- in-process routing


#: a row of ``bench/gateway_routing.py``'s table: router, path, us/decision, decisions/s
ROUTING_LINE = re.compile(r"^(\S+)\s+(cache miss|cache hit|-)\s+([0-9.]+)\s+[0-9,]+$")


def parse_routing(text: str) -> list[dict]:
    """The rows of ``bench/gateway_routing.py``'s output: router, path and us per decision."""
    rows = []
    for line in text.splitlines():
        m = ROUTING_LINE.match(line.strip())
        if m:
            rows.append({"router": m[1], "path": m[2], "us": float(m[3])})
    return rows


def routing_rows(build: Build, keys: int, repeat: int, deadline: common.Deadline) -> list[dict]:
    """``bench/gateway_routing.py`` of ``build``'s own tree, run on that tree's ``junction``.

    The routing decisions are timed in process, so each build runs its own
    script (the current one's imports follow the current package layout).
    """
    script = build.root / "bench" / "gateway_routing.py"
    if not script.is_file():
        raise common.BenchError(f"{build.name}: no bench/gateway_routing.py in its tree")
    r = subprocess.run(
        [sys.executable, str(script), "--keys", str(keys), "--repeat", str(repeat)],
        cwd=build.root,
        env=build.environ(),
        capture_output=True,
        text=True,
        timeout=max(1.0, deadline.cap(300.0)),
        stdin=subprocess.DEVNULL,
    )
    rows = parse_routing(r.stdout)
    if r.returncode != 0 or not rows:
        raise common.BenchError(
            f"{build.name}: bench/gateway_routing.py failed ({r.returncode}): "
            f"{(r.stderr.strip().splitlines() or ['no rows'])[-1]}"
        )
    return rows
