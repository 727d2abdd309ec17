"""Micro-benchmark of the sans-IO STOMP codec (no sockets, one core).

Parses N typical SEND frames (256-byte body, 5 headers, STOMP 1.2) fed in
64 KiB chunks, as a broker reading a busy connection would see them, and
serialises N MESSAGE frames as a broker delivering them would.  Prints
frames/s for each; the best of ``--repeat`` runs is reported so that a noisy
neighbour on a 2-core machine does not decide the figure.

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


def message_frames(count: int) -> list[Frame]:
    body = b"x" * 256
    return [
        Frame(
            "MESSAGE",
            (
                ("subscription", "sub-0"),
                ("message-id", f"ID:junction-1-{i}"),
                ("destination", "/queue/orders"),
                ("ack", f"ack-{i}"),
                ("content-type", "text/plain"),
                ("persistent", "true"),
            ),
            body,
        )
        for i in range(count)
    ]


def bench_parse(count: int, chunk: int) -> tuple[float, int]:
    client = StompCodec(server=False)
    client.set_version("1.2")
    stream = b"".join(client.send(frame) for frame in send_frames(count))
    server = StompCodec()
    server.set_version("1.2")
    chunks = [stream[i:i + chunk] for i in range(0, len(stream), chunk)]
    parsed = 0
    started = time.perf_counter()
    for piece in chunks:
        parsed += len(server.receive_data(piece))
    elapsed = time.perf_counter() - started
    assert parsed == count, (parsed, count)
    return elapsed, len(stream)


def bench_serialise(count: int) -> float:
    frames = message_frames(count)
    server = StompCodec()
    server.set_version("1.2")
    send = server.send
    started = time.perf_counter()
    for frame in frames:
        send(frame)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=64 * 1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    parse_best = min(bench_parse(args.frames, args.chunk)[0] for _ in range(args.repeat))
    _, size = bench_parse(args.frames, args.chunk)
    send_best = min(bench_serialise(args.frames) for _ in range(args.repeat))
    print(
        f"parse     {args.frames} SEND frames ({size / args.frames:.0f} B each, "
        f"{args.chunk} B chunks): {args.frames / parse_best:,.0f} frames/s "
        f"({size / parse_best / 1e6:,.0f} MB/s, {parse_best / args.frames * 1e6:.2f} us/frame)"
    )
    print(
        f"serialise {args.frames} MESSAGE frames: {args.frames / send_best:,.0f} frames/s "
        f"({send_best / args.frames * 1e6:.2f} us/frame)"
    )


if __name__ == "__main__":
    main()
