"""Micro-benchmark of the sans-IO STOMP codec (no sockets, one core).

Parses N typical SEND frames (256-byte body, 5 headers, STOMP 1.2) fed in
64 KiB chunks, as a broker reading a busy connection would see them, and
serialises N MESSAGE frames as a broker delivering them would (once with
headers that need no escaping, once with a message-id that does).  Prints
frames/s by wall clock and by process CPU time, best of ``--repeat`` runs, so
that a noisy neighbour on a 2-core machine does not decide the figure, plus a
calibration loop to compare machines.

    python bench/stomp_codec.py [--frames 100000] [--chunk 65536] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

try:
    from junction.protocols.stomp import Frame, StompCodec
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from junction.protocols.stomp import Frame, StompCodec

try:
    from . import common  # imported as bench.stomp_codec from the repository root
except ImportError:  # run as ``python bench/stomp_codec.py``: bench/ is on sys.path
    import common


def send_frames(count: int) -> list[Frame]:
    body = bytes(range(256))
    return [
        Frame(
            "SEND",
            (
                ("destination", "/queue/orders"),
                ("content-type", "application/octet-stream"),
                ("content-length", "256"),
                ("receipt", f"r-{i}"),
                ("persistent", "true"),
            ),
            body,
        )
        for i in range(count)
    ]


def message_frames(count: int, escaped: bool = False) -> list[Frame]:
    """MESSAGE frames as a broker delivers them (Artemis-style headers).

    With ``escaped`` the message-id holds a colon, so every frame takes the
    STOMP 1.1/1.2 escaping path instead of the fast path.
    """
    body = b"x" * 256
    return [
        Frame(
            "MESSAGE",
            (
                ("subscription", "sub-0"),
                ("message-id", f"ID:junction-1-{i}" if escaped else str(1_000_000 + i)),
                ("destination", "/queue/orders"),
                ("ack", str(i)),
                ("content-type", "text/plain"),
                ("persistent", "true"),
            ),
            body,
        )
        for i in range(count)
    ]


def bench_parse(count: int, chunk: int) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, stream bytes) to parse ``count`` SEND frames."""
    client = StompCodec(server=False)
    client.set_version("1.2")
    stream = b"".join(client.send(frame) for frame in send_frames(count))
    server = StompCodec()
    server.set_version("1.2")
    chunks = [stream[i:i + chunk] for i in range(0, len(stream), chunk)]
    receive = server.receive_data
    parsed = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for piece in chunks:
        parsed += len(receive(piece))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert parsed == count, (parsed, count)
    return wall, cpu, len(stream)


def bench_serialise(count: int, escaped: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to serialise ``count`` MESSAGE frames."""
    frames = message_frames(count, escaped)
    server = StompCodec()
    server.set_version("1.2")
    send = server.send
    wall, cpu = time.perf_counter(), time.process_time()
    for frame in frames:
        send(frame)
    return time.perf_counter() - wall, time.process_time() - cpu


def report(label: str, count: int, runs: list[tuple[float, ...]], extra: str = "") -> None:
    wall = min(run[0] for run in runs)
    cpu = min(run[1] for run in runs)
    print(
        f"{label}: {count / wall:,.0f} frames/s wall, {count / cpu:,.0f} frames/s CPU "
        f"({cpu / count * 1e6:.2f} us/frame CPU){extra}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=64 * 1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    count = args.frames

    runs = [bench_parse(count, args.chunk) for _ in range(args.repeat)]
    size = runs[0][2]
    report(
        f"parse {count} SEND frames ({size / count:.0f} B each, 256 B body, 5 headers, "
        f"{args.chunk} B reads)",
        count,
        runs,
        f", {size / min(run[0] for run in runs) / 1e6:,.0f} MB/s",
    )
    for escaped, what in ((False, "no escaping needed"), (True, "message-id needs \\c")):
        runs = [bench_serialise(count, escaped) for _ in range(args.repeat)]
        report(f"serialise {count} MESSAGE frames ({what})", count, runs)
    print(common.calibration_line())


if __name__ == "__main__":
    main()
