"""Micro-benchmark of the sans-IO AMQP 1.0 message codec against proton (one core).

The message is what a typical producer sends, encoded by proton: a header
(durable, priority), a properties section (message-id, to, reply-to,
content-type, creation-time), two application properties and a 256-byte data
body.  Timed, in microseconds per message, best of ``--repeat`` runs by
process CPU time (so a noisy neighbour on a 2-core machine does not decide
the figure):

* ``decode_message``   -- junction.protocols.amqp.message.decode_message
* ``encode_message``   -- encode_message of the decoded sections
* ``forward``          -- encode_header + the raw annotated span (what a broker
                          does to pass a message on)
* ``proton decode``    -- proton.Message().decode (the baseline)
* ``proton encode``    -- proton.Message.encode of the same message

plus a calibration loop to compare machines.

    python bench/amqp_codec.py [--messages 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import proton

try:
    from junction.protocols.amqp.message import (
        decode_message,
        encode_header,
        encode_message,
    )
except ImportError:  # run from a source checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from junction.protocols.amqp.message import (
        decode_message,
        encode_header,
        encode_message,
    )

try:
    from . import common  # imported as bench.amqp_codec from the repository root
except ImportError:  # run as ``python bench/amqp_codec.py``: bench/ is on sys.path
    import common


def typical_message() -> proton.Message:
    return proton.Message(
        body=bytes(range(256)),
        inferred=True,  # bytes as a data section
        durable=True,
        priority=5,
        id="ID:junction-1-1234567",
        address="/queue/orders",
        reply_to="/queue/replies",
        content_type="application/octet-stream",
        creation_time=1700000000.123,
        properties={"customer": "acme", "retries": 3},
    )


def cpu_per_op(fn, count: int, repeat: int) -> float:
    """Best CPU microseconds per call of ``fn`` over ``repeat`` runs of ``count``."""
    best = float("inf")
    loop = range(count)
    for _ in range(repeat):
        started = time.process_time()
        for _ in loop:
            fn()
        best = min(best, time.process_time() - started)
    return best / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    count, repeat = args.messages, args.repeat

    message = typical_message()
    data = bytes(message.encode())
    sections = decode_message(data)
    again = decode_message(encode_message(sections))  # proton's choice of widths differs
    assert (again.header, again.properties, again.body) == (
        sections.header, sections.properties, sections.body,
    )
    header = sections.header
    annotated = sections.annotated

    def proton_decode() -> None:
        proton.Message().decode(data)

    def forward() -> bytes:
        return encode_header(header) + annotated

    ours_decode = cpu_per_op(lambda: decode_message(data), count, repeat)
    ours_encode = cpu_per_op(lambda: encode_message(sections), count, repeat)
    ours_forward = cpu_per_op(forward, count, repeat)
    theirs_decode = cpu_per_op(proton_decode, count, repeat)
    theirs_encode = cpu_per_op(message.encode, count, repeat)

    print(f"message: {len(data)} bytes (256-byte data body, header, properties, 2 application properties)")
    print(f"decode_message: {ours_decode:6.2f} us/msg   proton decode: {theirs_decode:6.2f} us/msg   "
          f"ratio {theirs_decode / ours_decode:.2f}x")
    print(f"encode_message: {ours_encode:6.2f} us/msg   proton encode: {theirs_encode:6.2f} us/msg   "
          f"ratio {theirs_encode / ours_encode:.2f}x")
    print(f"forward (encode_header + annotated): {ours_forward:.2f} us/msg")
    print(common.calibration_line())


if __name__ == "__main__":
    main()
