"""``python -m tests.fuzz``: run the fuzz targets under atheris (libFuzzer).

    python -m tests.fuzz list
    python -m tests.fuzz run TARGET [-runs=N -seed=N -max_total_time=S ...] [CORPUS_DIR]
    python -m tests.fuzz long [--seconds 600] [--out build/fuzz] [--rss-limit-mb 2048] [TARGET ...]
    python -m tests.fuzz replay TARGET FILE ...
    python -m tests.fuzz mutate TARGET [--runs N] [--seed N]

``run`` fuzzes one target; flags starting with ``-`` go to libFuzzer.  Without
a corpus directory it fuzzes from a fresh temporary one holding the target's
seeds (valid inputs built with the project's own encoders); an empty corpus
directory is seeded the same way.  A crash (an exception the contract does not
allow, or a failed assertion) leaves a ``crash-*`` file and exits non-zero.

``long`` runs every target (or those named) one after another for
``--seconds`` each, each in its own process at the lowest CPU priority
(``nice -n 19``), keeping each corpus and log under ``--out``, and writes the
figures (executions, exec/s, coverage, features, corpus, peak RSS, crashes)
to ``--out/summary.md``.

``replay`` runs a target's harness on input files without atheris (to debug
a crash file, or to check a fix).  ``mutate`` runs it without atheris on its
seeds and ``--runs`` random mutations of them (a fixed ``--seed``): no
coverage guidance, for a platform atheris has no wheel for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from hashlib import sha1
from pathlib import Path

from tests.fuzz.targets import TARGETS, load

ROOT = Path(__file__).resolve().parents[2]


def _write_seeds(corpus: Path, seeds) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (corpus / ("seed-" + sha1(seed).hexdigest())).write_bytes(seed)


def run(name: str, args: list[str]) -> None:
    """Fuzz target ``name`` in this process (does not return: libFuzzer exits)."""
    import atheris

    with atheris.instrument_imports(include=["junction"]):
        harness, seeds = load(name)
    flags = [a for a in args if a.startswith("-")]
    dirs = [a for a in args if not a.startswith("-")]
    if not dirs:
        dirs = [tempfile.mkdtemp(prefix=f"fuzz-{name}-")]
    corpus = Path(dirs[0])
    if not corpus.exists() or not any(corpus.iterdir()):
        _write_seeds(corpus, seeds)
    atheris.Setup([sys.argv[0], *flags, *dirs], harness)
    atheris.Fuzz()


def replay(name: str, files: list[str]) -> int:
    harness, _ = load(name)
    for file in files:
        harness(Path(file).read_bytes())
        print(f"{file}: ok")
    return 0


def mutate(name: str, runs: int, seed: int) -> int:
    """The harness on its seeds, then on ``runs`` seeded random mutations of them."""
    import random

    harness, seeds = load(name)
    rng = random.Random(seed)
    corpus = list(seeds())
    for data in corpus:
        harness(data)
    for _ in range(runs):
        data = bytearray(rng.choice(corpus))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(5)
            at = rng.randrange(len(data) + 1)
            if op == 0 and data:
                data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[at:at] = bytes([rng.randrange(256)]) * rng.randint(1, 8)
            elif op == 2:
                del data[at:at + rng.randint(1, 16)]
            elif op == 3:
                data[at:at] = data[rng.randrange(len(data) + 1):][:rng.randint(1, 32)]
            else:
                other = rng.choice(corpus)
                data = data[:at] + other[rng.randrange(len(other) + 1):]
        harness(bytes(data[:4096]))
    print(f"Done {len(corpus) + runs} runs (mutation, seed {seed})")
    return 0


_STATUS = re.compile(
    r"^#(\d+)\s+(?:\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\S+).*?exec/s: (\d+) rss: (\d+)Mb", re.M
)
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)", re.M)


def figures(log: str) -> dict:
    """The figures of one libFuzzer log: the last status line and the final stats."""
    result: dict = {}
    status = _STATUS.findall(log)
    if status:
        runs, cov, ft, corp, corp_size, _eps, rss = status[-1]
        result.update(cov=int(cov), ft=int(ft), corpus=int(corp), corpus_size=corp_size)
        result["status_runs"] = int(runs)
        result["status_rss_mb"] = int(rss)
    result.update({key: int(value) for key, value in _STAT.findall(log)})
    return result


def long_run(targets: list[str], seconds: int, out: Path, rss_limit_mb: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in targets:
        tdir = out / name
        corpus = tdir / "corpus"
        tdir.mkdir(parents=True, exist_ok=True)
        log_path = out / f"{name}.log"
        cmd = [
            "nice", "-n", "19", sys.executable, "-m", "tests.fuzz", "run", name,
            f"-max_total_time={seconds}", f"-rss_limit_mb={rss_limit_mb}", "-timeout=20",
            "-max_len=4096", "-print_final_stats=1", f"-artifact_prefix={tdir}/", str(corpus),
        ]
        started = time.monotonic()
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).returncode
        elapsed = time.monotonic() - started
        text = log_path.read_text(errors="replace")
        row = {"target": name, "rc": rc, "seconds": round(elapsed), **figures(text)}
        row["crashes"] = sorted(p.name for p in tdir.glob("crash-*")) + sorted(
            p.name for p in tdir.glob("timeout-*")) + sorted(p.name for p in tdir.glob("oom-*"))
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| target | seconds | executions | exec/s | cov | ft | corpus | peak RSS MB | crashes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['target']} | {r['seconds']} | {r.get('number_of_executed_units', '?')} "
            f"| {r.get('average_exec_per_sec', '?')} | {r.get('cov', '?')} | {r.get('ft', '?')} "
            f"| {r.get('corpus', '?')} ({r.get('corpus_size', '?')}) | {r.get('peak_rss_mb', '?')} "
            f"| {len(r['crashes'])} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if any(r["crashes"] or r["rc"] for r in rows) else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"] and len(argv) >= 2:
        run(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list")
    sub.add_parser("run", help="run TARGET [libFuzzer flags] [CORPUS_DIR]")
    p_long = sub.add_parser("long")
    p_long.add_argument("--seconds", type=int, default=600)
    p_long.add_argument("--out", type=Path, default=ROOT / "build" / "fuzz")
    p_long.add_argument("--rss-limit-mb", type=int, default=2048)
    p_long.add_argument("targets", nargs="*")
    p_mutate = sub.add_parser("mutate")
    p_mutate.add_argument("target", choices=sorted(TARGETS))
    p_mutate.add_argument("--runs", type=int, default=1000)
    p_mutate.add_argument("--seed", type=int, default=1)
    p_replay = sub.add_parser("replay")
    p_replay.add_argument("target", choices=sorted(TARGETS))
    p_replay.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(TARGETS))
        return 0
    if args.command == "replay":
        return replay(args.target, args.files)
    if args.command == "mutate":
        return mutate(args.target, args.runs, args.seed)
    if args.command == "long":
        unknown = [t for t in args.targets if t not in TARGETS]
        if unknown:
            parser.error(f"unknown targets: {', '.join(unknown)}")
        return long_run(args.targets or list(TARGETS), args.seconds, args.out, args.rss_limit_mb)
    parser.error("run needs a TARGET")
    return 2


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main(sys.argv[1:]))
