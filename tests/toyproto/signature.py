"""TOY's signature: every line starts ``TOY `` (sans-IO)."""

from __future__ import annotations

from junction.protocols.registry import MATCH, NEED_MORE

MAGIC = b"TOY "


def detect(data: bytes):
    """MATCH once ``TOY `` arrived, NEED_MORE while it could still, else None."""
    if data.startswith(MAGIC):
        return MATCH
    if MAGIC.startswith(data):
        return NEED_MORE
    return None
