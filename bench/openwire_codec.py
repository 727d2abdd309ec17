"""Micro-benchmark of the sans-IO OpenWire codec's hot path (one core, in process).

The commands are what the real ActiveMQ Classic client and a broker exchange for each
message of ``bench/openwire_throughput.py``, in the encoding they settle (tight, no
marshalling cache):

* ``TextMessage``     -- the send: a 256-character TextMessage, persistent, its producer
                         and message ids, a queue, two properties (``bench_seq`` int,
                         ``bench_ts`` long), a timestamp
* ``MessageDispatch`` -- the same message delivered to a consumer
* ``MessageAck``      -- the consumer's STANDARD ack of it

Timed, in microseconds per command, best of ``--repeat`` runs by process CPU time: the
codec's decode and encode (``_decode``/``_encode``, the straight-line fast path of
:mod:`junction.protocols.openwire.fast`) and the field-by-field path they fall back to
(``_decode_fields``/``_encode_fields``), plus a calibration loop to compare machines.

    python bench/openwire_codec.py [--count 20000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# The checkout this file is in comes first, so the figures are of this source tree.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from junction.protocols.openwire.codec import _decode, _decode_fields, _encode, _encode_fields  # noqa: E402
from junction.protocols.openwire.marshal import WireContext  # noqa: E402
from junction.protocols.openwire.messages import (  # noqa: E402
    AckType,
    ActiveMQTextMessage,
    MessageAck,
    MessageDispatch,
    properties_content,
    text_content,
)
from junction.protocols.openwire.primitives import Int, Long  # noqa: E402
from junction.protocols.openwire.structures import ActiveMQQueue, ConsumerId, MessageId, ProducerId  # noqa: E402

CONNECTION = "ID:bench-host-40000-1795000000000-1:1"


def commands() -> dict:
    """Name -> the command as the client or the broker sends it."""
    producer = ProducerId(CONNECTION, 1, 1)
    queue = ActiveMQQueue("bench.ow.queue")
    message = ActiveMQTextMessage(
        command_id=12,
        response_required=True,
        producer_id=producer,
        destination=queue,
        message_id=MessageId(None, producer, 4711, 0),
        persistent=True,
        priority=4,
        timestamp=1_795_000_000_123,
        content=text_content("x" * 256),
        marshalled_properties=properties_content(
            {"bench_seq": Int(4711), "bench_ts": Long(1_795_000_000_123_456_789)}
        ),
    )
    consumer = ConsumerId(CONNECTION.replace(":1:1", ":2:1"), 1, 1)
    delivered = MessageDispatch(
        consumer_id=consumer,
        destination=queue,
        message=ActiveMQTextMessage(
            **{
                **{n: getattr(message, n) for n in ActiveMQTextMessage._NAMES},
                "command_id": 0,
                "response_required": False,
                "message_id": MessageId(None, producer, 4711, 9_000_001),
                "target_consumer_id": consumer,
            }
        ),
    )
    ack = MessageAck(
        destination=queue,
        consumer_id=consumer,
        ack_type=AckType.STANDARD,
        first_message_id=delivered.message.message_id,
        last_message_id=delivered.message.message_id,
        message_count=1,
    )
    return {"TextMessage": message, "MessageDispatch": delivered, "MessageAck": ack}


def _time(fn, args, count: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(count):
            fn(*args)
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
    ap.add_argument("--count", type=int, default=20000, help="commands per timed run")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs; the best is reported")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    args = ap.parse_args(argv)
    results: dict = {"calibration_ms": round(_calibrate(), 1)}
    for name, command in commands().items():
        ctx = WireContext(tight=True, stack_trace=True, cache_slots=0)
        data = _encode_fields(command, ctx)
        assert _encode(command, ctx) == data, f"{name}: the two writers differ"
        assert _decode(data, 4, len(data), ctx) == command == _decode_fields(data, 4, len(data), ctx)
        row = {"bytes": len(data)}
        for label, fn, arg in (
            ("decode_us", _decode, (data, 4, len(data), ctx)),
            ("decode_fields_us", _decode_fields, (data, 4, len(data), ctx)),
            ("encode_us", _encode, (command, ctx)),
            ("encode_fields_us", _encode_fields, (command, ctx)),
        ):
            row[label] = round(_time(fn, arg, args.count, args.repeat), 2)
        results[name] = row
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"calibration loop: {results['calibration_ms']} ms")
    print(f"{'command':<16}{'bytes':>6}{'decode us':>11}{'(fields)':>10}{'encode us':>11}{'(fields)':>10}")
    for name, row in results.items():
        if isinstance(row, dict):
            print(
                f"{name:<16}{row['bytes']:>6}{row['decode_us']:>11.2f}{row['decode_fields_us']:>10.2f}"
                f"{row['encode_us']:>11.2f}{row['encode_fields_us']:>10.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
