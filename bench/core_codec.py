"""Micro-benchmark of the sans-IO CORE codec's hot path (one core, in process).

The packets are what the real Artemis JMS client and broker exchange for a
message:

* ``SESS_SEND``        -- the benchmark's send (``bench/core_throughput.py``): a
                          256-byte BytesMessage, durable, a JMS message id, an
                          address and two properties (``bench_ts`` long,
                          ``__AMQ_CID`` string), 130+ trailer: 421 bytes
* ``SESS_RECEIVE_MSG`` -- the same message delivered to a consumer

Timed, in microseconds per packet, best of ``--repeat`` runs by process CPU
time (so a noisy neighbour on a 2-core machine does not decide the figure):
``decode_packet`` and ``encode_packet`` of each, plus a calibration loop to
compare machines.

    python bench/core_codec.py [--packets 20000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# The checkout this file is in comes first, so the figures are of this source tree.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from junction.protocols.core import packets as p  # noqa: E402
from junction.protocols.core.codec import decode_packet, encode_packet  # noqa: E402
from junction.protocols.core.message import MessageHeaders, MessageType  # noqa: E402


def bench_message() -> tuple[bytes, MessageHeaders]:
    """The body and headers of the benchmark's message."""
    headers = MessageHeaders(
        message_id=0,
        address="bench.queue",
        user_id=bytes(range(16)),
        type=MessageType.BYTES,
        durable=True,
        expiration=0,
        timestamp=1_795_000_000_000,
        priority=4,
        properties=(("bench_ts", 1_795_000_000_123_456_789), ("__AMQ_CID", "c2f1b7e0-5a1d-11ef-9b7e-0242ac120002")),
    )
    return bytes(range(256)), headers


def packets() -> dict[str, bytes]:
    """Name -> wire bytes of each timed packet."""
    body, headers = bench_message()
    send = p.SessSend(body, headers, True, 7, 1, channel_id=11)
    delivered = p.SessReceiveMsg(body, headers.__class__(**{**_fields(headers), "message_id": 4_294_967_301}),
                                 0, 1, channel_id=11)
    return {"SESS_SEND": encode_packet(send), "SESS_RECEIVE_MSG": encode_packet(delivered)}


def _fields(headers: MessageHeaders) -> dict:
    return {name: getattr(headers, name) for name in headers.__slots__}


def _time(fn, arg, count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(count):
            fn(arg)
        best = min(best, time.process_time() - start)
    return best / count * 1e6


def _calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop (compare machines and load)."""
    start = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i & 7
    return (time.process_time() - start) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=20000, help="packets per timed run")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs; the best is reported")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    args = ap.parse_args(argv)
    results = {"calibration_ms": round(_calibrate(), 1)}
    for name, data in packets().items():
        packet = decode_packet(data)
        assert encode_packet(packet) == data, f"{name} does not re-encode to its bytes"
        results[name] = {
            "bytes": len(data),
            "decode_us": round(_time(decode_packet, data, args.packets, args.repeat), 2),
            "encode_us": round(_time(encode_packet, packet, args.packets, args.repeat), 2),
        }
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"calibration loop: {results['calibration_ms']} ms")
    print(f"{'packet':<18}{'bytes':>6}{'decode us':>11}{'encode us':>11}")
    for name, row in results.items():
        if isinstance(row, dict):
            print(f"{name:<18}{row['bytes']:>6}{row['decode_us']:>11.2f}{row['encode_us']:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
