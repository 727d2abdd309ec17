"""TOY: a line-based protocol that exists only to prove the protocol table's seam.

Following docs/adding-a-protocol.md, it is one package with the four parts a
protocol brings, and no line of the gateway or the broker core knows it:

* :mod:`.signature` -- the detector (lines starting ``TOY ``);
* :mod:`.opening` -- the gateway's opening reader (``TOY LOGIN <user>
  <password> <client-id>``), sans-IO, with the refusal writer;
* :mod:`.gateway` -- the gateway side that makes the reader per connection;
* :mod:`.broker` -- the broker core's adapter, which answers lines through a
  ``ServerSession``.

:data:`ENTRY` is what the entry point ``TOY = tests.toyproto:ENTRY`` in the
group ``junction.protocols`` names; :func:`write_dist_info` writes that
registration into a directory to put on ``PYTHONPATH`` (the tests register
the protocol for their own processes only).
"""

from __future__ import annotations

from pathlib import Path

from junction.protocols.registry import ENTRY_POINT_GROUP, ProtocolEntry

__all__ = ["ENTRY", "NAME", "write_dist_info"]

NAME = "TOY"

ENTRY = ProtocolEntry(
    NAME,
    detector="tests.toyproto.signature:detect",
    gateway="tests.toyproto.gateway:ToySide",
    adapter="tests.toyproto.broker:ToyFactory",
)


def write_dist_info(directory: Path) -> Path:
    """Register TOY in ``directory`` (a ``*.dist-info`` with its entry point); returns ``directory``."""
    dist = directory / "junction_toyproto-0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: junction-toyproto\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{NAME} = tests.toyproto:ENTRY\n")
    return directory
