"""The packet base class, the field kinds, and the table of packets the codec reads.

A packet is a frozen dataclass whose fields are its body, in wire order, each
declared with :func:`wire` and a :class:`Kind` (how it is read and written).
:func:`packet` makes the dataclass, records its type number and registers it
in :data:`PACKETS`; the generic :meth:`Packet.decode` and
:meth:`Packet.encode_body` then need no code per packet.  A packet whose body
is not a flat list of fields (a topology change, a message) overrides both.

Optional tails: Artemis appends fields to a packet as versions go on and
reads them only ``if (buffer.readableBytes() > 0)``.  A field declared
``wire(kind, tail=True)`` starts such a group: when no bytes remain there,
it and every later field keep their default (None).  Writing, a tail
field of a non-nullable kind that is None ends the body there (the older
form); nullable kinds are always written, as Artemis does.

The channel id is framing, not body: every packet has ``channel_id``
(keyword-only, default 0, the connection channel; 1 for the session-creation
packets), set by the codec from the header it read.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, NamedTuple

from junction.protocols.core.encoding import Reader, Writer
from junction.protocols.core.packet_types import CONNECTION_CHANNEL

__all__ = [
    "BOOL",
    "BYTE",
    "INT",
    "Kind",
    "LONG",
    "NULLABLE_SIMPLE_STRING",
    "NULLABLE_STRING",
    "OPT_BOOL",
    "OPT_INT",
    "OPT_LONG",
    "PACKETS",
    "Packet",
    "SIMPLE_STRING",
    "STRING",
    "packet",
    "wire",
]


class Kind(NamedTuple):
    """How one field is read and written; ``nullable``: None is a value it can write."""

    read: Callable[[Reader], Any]
    write: Callable[[Writer, Any], None]
    nullable: bool = False


BYTE = Kind(Reader.read_byte, Writer.write_byte)
BOOL = Kind(Reader.read_bool, Writer.write_bool)
INT = Kind(Reader.read_int, Writer.write_int)
LONG = Kind(Reader.read_long, Writer.write_long)
STRING = Kind(Reader.read_string, Writer.write_string)
NULLABLE_STRING = Kind(Reader.read_nullable_string, Writer.write_nullable_string, True)
SIMPLE_STRING = Kind(Reader.read_simple_string, Writer.write_simple_string)
NULLABLE_SIMPLE_STRING = Kind(Reader.read_nullable_simple_string, Writer.write_nullable_simple_string, True)
OPT_BOOL = Kind(Reader.read_opt_bool, Writer.write_opt_bool, True)
OPT_INT = Kind(Reader.read_opt_int, Writer.write_opt_int, True)
OPT_LONG = Kind(Reader.read_opt_long, Writer.write_opt_long, True)


def wire(kind: Kind, *, tail: bool = False, default: Any = MISSING) -> Any:
    """A body field of ``kind``; ``tail`` starts an optional group (default None)."""
    if tail and default is MISSING:
        default = None
    return field(default=default, metadata={"kind": kind, "tail": tail})


#: type number -> packet class, for every packet the codec decodes.
PACKETS: dict[int, type[Packet]] = {}


@dataclass(frozen=True, slots=True)
class Packet:
    """One CORE packet.  ``TYPE``: its type number; ``SENDER``: "client", "server" or "both"."""

    TYPE: ClassVar[int]
    SENDER: ClassVar[str] = "both"
    # (name, kind, tail) of each body field, in wire order; set by @packet.
    LAYOUT: ClassVar[tuple[tuple[str, Kind, bool], ...]] = ()

    channel_id: int = field(default=CONNECTION_CHANNEL, kw_only=True)

    @classmethod
    def decode(cls, r: Reader, channel_id: int) -> Packet:
        """Read the body from ``r`` (the codec checks that nothing is left after)."""
        values = []
        append = values.append
        for _name, kind, tail in cls.LAYOUT:
            if tail and r.pos == r.end:
                break
            append(kind.read(r))
        return cls(*values, channel_id=channel_id)

    def encode_body(self, w: Writer) -> None:
        """Write the body (the codec writes the header around it)."""
        for name, kind, tail in self.LAYOUT:
            value = getattr(self, name)
            if tail and value is None and not kind.nullable:
                break
            kind.write(w, value)


def packet(type_number: int, sender: str = "both"):
    """Class decorator: a frozen, slotted dataclass registered under ``type_number``."""

    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        cls.TYPE = type_number
        cls.SENDER = sender
        cls.LAYOUT = tuple(
            (f.name, f.metadata["kind"], f.metadata["tail"]) for f in fields(cls) if "kind" in f.metadata
        )
        if type_number in PACKETS:
            raise RuntimeError(f"packet type {type_number} registered twice")
        PACKETS[type_number] = cls
        return cls

    return wrap
