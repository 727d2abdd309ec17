"""WireFormatInfo (type 1) and the negotiation both ends run on it.

Both sides send a WireFormatInfo at once on connect, in the loose encoding
with a size prefix, and neither waits for the other (openwire.md section 2).
Its body is not a BaseCommand: ``magic "ActiveMQ"``, ``int32 version`` and
the options as a primitive map.  :class:`WireFormat` is what one side offers
(:meth:`WireFormat.info` writes it, :meth:`WireFormat.from_info` reads the
peer's) and :func:`negotiate` is ``OpenWireFormat.renegotiateWireFormat``:

* ``version`` and ``max_frame_size``: the smaller, a value of 0 or less
  counting as absent;
* ``tight_encoding``, ``cache_enabled``, ``stack_trace``,
  ``tcp_no_delay``, ``size_prefix_disabled``: both must ask;
* ``cache_size`` (when the cache is on): the smaller, 0 meaning 16,383 slots;
* ``max_inactivity`` / ``max_inactivity_initial_delay``: the smaller, 0
  (or absent) disabling inactivity monitoring (the client's
  ``InactivityMonitor``; :mod:`.inactivity`).

The option value types are the client's: it casts ``(Long)`` the durations
and the frame size and ``(Integer)`` the cache size, so they go out as
:class:`~.primitives.Long` and :class:`~.primitives.Int`, or it throws
ClassCastException.  A missing key reads as 0 / false.

The gateway's offer (:data:`SERVER_WIRE_FORMAT`) is Artemis's: version 12,
tight encoding and stack traces on, the cache off, a 30 s inactivity
duration after a 10 s delay; a node's (:data:`NODE_WIRE_FORMAT`) has the
cache on, as ActiveMQ Classic's; ``MaxFrameSize`` is the frame limit the codec
enforces (:class:`~.codec.OpenWireLimits`), so the client refuses to send
anything larger itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from junction.protocols.openwire.command_types import CommandType as T
from junction.protocols.openwire.errors import MalformedCommand, NegotiationFailed
from junction.protocols.openwire.marshal import BYTES, INT, MAGIC, Structure, structure, wire
from junction.protocols.openwire.primitives import (
    Int,
    Long,
    decode_primitive_map,
    encode_primitive_map,
)

__all__ = [
    "MAGIC_BYTES",
    "MAX_PROPERTIES",
    "OPENWIRE_VERSION",
    "SERVER_WIRE_FORMAT",
    "NODE_WIRE_FORMAT",
    "WireFormat",
    "WireFormatInfo",
    "negotiate",
]

#: What every WireFormatInfo starts with.
MAGIC_BYTES = b"ActiveMQ"
#: The version whose field tables this package holds (``CommandTypes.PROTOCOL_VERSION``;
#: the Classic 5.17 and 6.x clients and Artemis all offer it).
OPENWIRE_VERSION = 12
#: Most options one WireFormatInfo may carry (``WireFormatInfo.MAX_PROPERTY_SIZE``).
MAX_PROPERTIES = 4096
#: Cache slots when the negotiated ``CacheSize`` is 0 (``OpenWireFormat.MARSHAL_CACHE_SIZE``).
DEFAULT_CACHE_SLOTS = 0x7FFF // 2
#: Java's ``Long.MAX_VALUE``: the client's own ``maxFrameSize`` (no limit).
JAVA_LONG_MAX = 0x7FFFFFFFFFFFFFFF


@structure(T.WIREFORMAT_INFO, marshall_aware=True)
class WireFormatInfo(Structure):
    """The opening command of both sides (not a BaseCommand: no command id)."""

    magic: bytes = wire(MAGIC, MAGIC_BYTES)
    version: int = wire(INT, 0)
    marshalled_properties: bytes | None = wire(BYTES)

    def properties(self) -> dict:
        """The options map (empty when absent)."""
        if self.marshalled_properties is None:
            return {}
        return decode_primitive_map(self.marshalled_properties, MAX_PROPERTIES) or {}


@dataclass(frozen=True, slots=True)
class WireFormat:
    """One side's wire-format options (the offer) or the settled ones (after :func:`negotiate`)."""

    version: int = OPENWIRE_VERSION
    tight_encoding: bool = True
    cache_enabled: bool = False
    cache_size: int = 1024
    stack_trace: bool = True
    tcp_no_delay: bool = True
    size_prefix_disabled: bool = False
    max_frame_size: int = JAVA_LONG_MAX
    max_inactivity: int = 30_000
    max_inactivity_initial_delay: int = 10_000
    extra: tuple = ()  # other options sent as they are: (("ProviderName", "..."), ...)

    @property
    def cache_slots(self) -> int:
        """Slots of the marshalling cache (0 with the cache off)."""
        if not self.cache_enabled:
            return 0
        return self.cache_size if self.cache_size > 0 else DEFAULT_CACHE_SLOTS

    def info(self) -> WireFormatInfo:
        """The WireFormatInfo that offers these options."""
        options = {
            "TightEncodingEnabled": self.tight_encoding,
            "CacheEnabled": self.cache_enabled,
            "CacheSize": Int(self.cache_size),
            "StackTraceEnabled": self.stack_trace,
            "TcpNoDelayEnabled": self.tcp_no_delay,
            "SizePrefixDisabled": self.size_prefix_disabled,
            "MaxFrameSize": Long(self.max_frame_size),
            "MaxFrameSizeEnabled": True,
            "MaxInactivityDuration": Long(self.max_inactivity),
            "MaxInactivityDurationInitalDelay": Long(self.max_inactivity_initial_delay),
        }
        options.update(self.extra)
        return WireFormatInfo(MAGIC_BYTES, self.version, encode_primitive_map(options))

    @classmethod
    def from_info(cls, info: WireFormatInfo) -> WireFormat:
        """The options ``info`` offers (raises :class:`NegotiationFailed` for a bad magic or version)."""
        if info.magic != MAGIC_BYTES:
            raise NegotiationFailed(f"WireFormatInfo magic {info.magic!r} is not {MAGIC_BYTES!r}")
        if info.version < 1:
            raise NegotiationFailed(f"WireFormatInfo version {info.version} is below 1")
        try:
            p = info.properties()
        except MalformedCommand as exc:
            raise NegotiationFailed(f"WireFormatInfo options: {exc}") from None

        def flag(name: str) -> bool:
            return p.get(name) is True

        def number(name: str) -> int:
            value = p.get(name)
            return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0

        known = {"TightEncodingEnabled", "CacheEnabled", "CacheSize", "StackTraceEnabled",
                 "TcpNoDelayEnabled", "SizePrefixDisabled", "MaxFrameSize", "MaxFrameSizeEnabled",
                 "MaxInactivityDuration", "MaxInactivityDurationInitalDelay"}
        return cls(
            version=info.version,
            tight_encoding=flag("TightEncodingEnabled"),
            cache_enabled=flag("CacheEnabled"),
            cache_size=number("CacheSize"),
            stack_trace=flag("StackTraceEnabled"),
            tcp_no_delay=flag("TcpNoDelayEnabled"),
            size_prefix_disabled=flag("SizePrefixDisabled"),
            max_frame_size=number("MaxFrameSize"),
            max_inactivity=number("MaxInactivityDuration"),
            max_inactivity_initial_delay=number("MaxInactivityDurationInitalDelay"),
            extra=tuple((k, v) for k, v in p.items() if k not in known and isinstance(k, str)),
        )


def _min_present(a: int, b: int) -> int:
    """``OpenWireFormat.min``: the smaller, a value of 0 or less counting as absent."""
    if a <= 0:
        return b
    if b <= 0:
        return a
    return min(a, b)


def negotiate(ours: WireFormat, theirs: WireFormat) -> WireFormat:
    """What both sides settle on; raises :class:`NegotiationFailed` below :data:`OPENWIRE_VERSION`."""
    version = _min_present(ours.version, theirs.version)
    if version != OPENWIRE_VERSION:
        raise NegotiationFailed(
            f"OpenWire version {theirs.version} is not served: this server speaks version {OPENWIRE_VERSION}")
    cache = ours.cache_enabled and theirs.cache_enabled
    return replace(
        ours,
        version=version,
        tight_encoding=ours.tight_encoding and theirs.tight_encoding,
        cache_enabled=cache,
        cache_size=min(ours.cache_size, theirs.cache_size) if cache else ours.cache_size,
        stack_trace=ours.stack_trace and theirs.stack_trace,
        tcp_no_delay=ours.tcp_no_delay and theirs.tcp_no_delay,
        size_prefix_disabled=ours.size_prefix_disabled and theirs.size_prefix_disabled,
        max_frame_size=_min_present(ours.max_frame_size, theirs.max_frame_size),
        max_inactivity=min(ours.max_inactivity, theirs.max_inactivity),
        max_inactivity_initial_delay=min(ours.max_inactivity_initial_delay, theirs.max_inactivity_initial_delay),
        extra=(),
    )


#: What a gateway offers (Artemis's ``OpenWireFormatFactory`` defaults, the cache off): every
#: backend it may forward to (Artemis, Junction's node, ActiveMQ Classic) settles on these
#: options with the client's replayed offer (:func:`~.opening.replayed_offer`).
SERVER_WIRE_FORMAT = WireFormat(extra=(("ProviderName", "ActiveMQ"), ("PlatformDetails", "Junction")))

#: What a node's OPENWIRE acceptor offers: the same with the marshalling cache on, as ActiveMQ
#: Classic's broker offers it (1,024 slots, the real client's size).  A client that asks for it
#: (the real one does) then sends a destination or a producer's or consumer's id once and a slot
#: number after: smaller frames, less to marshal on both sides (docs/performance.md).  Artemis
#: turns it off; through a gateway the client settles without it, as with Artemis.
NODE_WIRE_FORMAT = replace(SERVER_WIRE_FORMAT, cache_enabled=True)
