"""The structure base classes, the field kinds, the marshalling cache, the type table.

An OpenWire command or data structure is a frozen dataclass whose fields are
its wire fields in order, each declared with :func:`wire` and a
:class:`Kind`; :func:`structure` makes the dataclass, records its type byte
and registers it in :data:`STRUCTURES`, so reading and writing need no code
per type.  A :class:`Command` starts with BaseCommand's ``command_id`` and
``response_required``; a plain :class:`Structure` (ids, destinations,
WireFormatInfo) does not.

The object kinds (openwire.md section 4):

* :func:`nested` -- a presence flag, the type byte, the fields.  A
  *MarshallAware* class (every message type, WireFormatInfo) has one more
  bit in the tight encoding, "a cached marshalled form follows", which Java
  writers always leave 0; a reader meeting a 1 reads that form (``int`` size,
  type byte, a BooleanStream of its own, the fields) as Java's does.
* :func:`cached` -- with the marshalling cache off, exactly :func:`nested`.
  With it on: a flag "new", a ``short`` index, and the nested object when new;
  the reader keeps new objects at their index and looks the others up.
* :func:`array` -- a presence flag, a ``short`` count, nested objects.
* :data:`THROWABLE` -- a presence flag, class name, message, and, when
  ``StackTraceEnabled`` was negotiated, the stack frames and the cause.

Each object kind names the type bytes it accepts (Java casts them, and a
wrong one fails the connection): a structure of another type is a
:class:`~.errors.MalformedCommand`, an unknown type byte an
:class:`~.errors.UnknownType`.  Nesting is bounded by
:attr:`WireContext.max_depth`.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, NamedTuple

from junction.protocols.openwire.command_types import type_name
from junction.protocols.openwire.encoding import Decoder, Encoder
from junction.protocols.openwire.errors import MalformedCommand, UnknownType

__all__ = [
    "BOOL",
    "BYTE",
    "BYTES",
    "INT",
    "LONG",
    "MAGIC",
    "STRING",
    "STRUCTURES",
    "THROWABLE",
    "Command",
    "JavaThrowable",
    "Kind",
    "StackFrame",
    "Structure",
    "WireContext",
    "array",
    "cached",
    "nested",
    "read_structure",
    "structure",
    "wire",
    "write_structure",
]

#: Slots of the marshalling cache when the negotiated ``CacheSize`` is 0
#: (``OpenWireFormat.MARSHAL_CACHE_SIZE``, ``Short.MAX_VALUE / 2``).
DEFAULT_CACHE_SLOTS = 0x7FFF // 2
#: The most slots a cache may have (its index is a Java short).
MAX_CACHE_SLOTS = 0x7FFF
#: Nested objects at most one inside another (a message's id holds a producer
#: id: 3 levels; a DataResponse holding a ConsumerInfo: 4).  Also bounds a
#: throwable's chain of causes.
DEFAULT_MAX_DEPTH = 32

_EMPTY = object()  # a cache slot never filled (a slot may hold None: Java caches null too)


class Kind(NamedTuple):
    """How one field is read and written; ``shape`` and ``accepts`` describe it (for tools and tests)."""

    read: Callable[[Decoder], Any]
    write: Callable[[Encoder, Any], None]
    shape: str = "primitive"  # or "nested", "cached", "array", "throwable"
    accepts: frozenset = frozenset()  # the type bytes an object kind accepts (empty: any)


def _write_magic(e: Encoder, value: bytes) -> None:
    if len(value) != 8:
        raise ValueError(f"a WireFormatInfo magic is 8 bytes, not {len(value)}")
    e.buf += value


BOOL = Kind(Decoder.boolean, Encoder.boolean)
BYTE = Kind(Decoder.byte, Encoder.byte)
INT = Kind(Decoder.int, Encoder.int)
LONG = Kind(Decoder.varlong, Encoder.varlong)
STRING = Kind(Decoder.string, Encoder.string)
BYTES = Kind(Decoder.byte_array, Encoder.byte_array)
MAGIC = Kind(lambda d: d.raw(8), _write_magic)


class WireContext:
    """One connection's marshalling state: the negotiated options and the two caches.

    ``cache_slots`` is 0 with the cache off.  The unmarshalling cache holds
    what the peer sent as "new" at each index; the marshalling cache hands
    our objects indices round the slots, forgetting the object a slot held
    before (the peer overwrites that slot when it reads the new one).
    """

    __slots__ = ("tight", "stack_trace", "cache_slots", "max_depth", "_in", "_out", "_out_slots", "_next",
                 "_journal", "_in_journal")

    def __init__(self, tight: bool = False, stack_trace: bool = False, cache_slots: int = 0,
                 max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.tight = tight
        self.stack_trace = stack_trace
        self.max_depth = max_depth
        self.cache_slots = cache_slots
        self._in = [_EMPTY] * cache_slots
        self._out: dict = {}
        self._out_slots = [_EMPTY] * cache_slots
        self._next = 0
        self._journal: list = []
        #: (index, what it held) for each slot a fast read filled (see :meth:`keep`)
        self._in_journal: list = []

    def begin(self) -> None:
        """Start writing one frame: :meth:`rollback` undoes what it assigns."""
        self._journal.clear()

    def rollback(self) -> None:
        """Undo the slots assigned since :meth:`begin` (the frame was never sent)."""
        for what, key, old in reversed(self._journal):
            if what == "slot":
                self._out_slots[key] = old
            elif what == "next":
                self._next = old
            elif old is _EMPTY:
                self._out.pop(key, None)
            else:
                self._out[key] = old
        self._journal.clear()

    def _map(self, obj, index) -> None:
        self._journal.append(("map", obj, self._out.get(obj, _EMPTY)))
        if index is _EMPTY:
            del self._out[obj]
        else:
            self._out[obj] = index

    def _fill(self, i: int, obj) -> None:
        old = self._out_slots[i]
        if old is not _EMPTY and self._out.get(old) == i:
            self._map(old, _EMPTY)
        self._journal.append(("slot", i, old))
        self._out_slots[i] = obj
        self._map(obj, i)

    def remember(self, index: int, obj) -> None:
        """Keep what the peer sent new at ``index`` (-1: the peer's cache was full, keep nothing)."""
        if index == -1:
            return
        if not 0 <= index < self.cache_slots:
            raise MalformedCommand(f"marshalling cache index {index} is outside the {self.cache_slots} slots")
        self._in[index] = obj

    def begin_read(self) -> None:
        """Start a fast read of one frame: :meth:`forget_kept` undoes what it keeps."""
        self._in_journal.clear()

    def keep(self, index: int, obj) -> None:
        """:meth:`remember`, undone by :meth:`forget_kept` (a fast read that gives up must leave
        the slots as they were: the field-by-field read may recall what it overwrote)."""
        if 0 <= index < self.cache_slots:
            self._in_journal.append((index, self._in[index]))
        self.remember(index, obj)

    def forget_kept(self) -> None:
        """Undo the :meth:`keep` calls since :meth:`begin_read` (newest first)."""
        journal = self._in_journal
        while journal:
            index, old = journal.pop()
            self._in[index] = old

    def recall(self, index: int):
        """What the peer kept at ``index``."""
        if not 0 <= index < self.cache_slots or self._in[index] is _EMPTY:
            raise MalformedCommand(f"marshalling cache index {index} names nothing the peer sent")
        return self._in[index]

    def index_of(self, obj) -> int | None:
        return self._out.get(obj)

    def assign(self, obj) -> int:
        """The next slot, now holding ``obj``."""
        i = self._next
        self._journal.append(("next", None, i))
        self._next = (i + 1) % self.cache_slots
        self._fill(i, obj)
        return i

    def settle(self, i: int, obj) -> None:
        """``obj`` was written in full into slot ``i``: the peer's slot ``i`` now holds it.

        (Its own cached parts may have taken slot ``i`` meanwhile, when the
        slots went round; the peer keeps ``obj`` there last.)
        """
        if self._out_slots[i] is not obj or self._out.get(obj) != i:
            self._fill(i, obj)


class Structure:
    """A marshalled OpenWire object; subclasses are made by :func:`structure`."""

    __slots__ = ()
    TYPE: ClassVar[int] = -1
    MARSHALL_AWARE: ClassVar[bool] = False
    _KINDS: ClassVar[tuple] = ()
    _NAMES: ClassVar[tuple] = ()


@dataclass(frozen=True, slots=True)
class Command(Structure):
    """A BaseCommand: every command but WireFormatInfo starts with these two fields."""

    command_id: int = field(default=0, metadata={"kind": INT})
    response_required: bool = field(default=False, metadata={"kind": BOOL})


#: type byte -> class, for every structure the codec reads.
STRUCTURES: dict[int, type[Structure]] = {}


def wire(kind: Kind, default: Any = None) -> Any:
    """A wire field of ``kind`` (default None, or ``default``)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError("mutable default")
    return field(default=default, metadata={"kind": kind})


def structure(type_byte: int | None, *, marshall_aware: bool = False):
    """Make ``cls`` a frozen dataclass of wire fields; register it under ``type_byte`` (None: a base)."""

    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        cls.MARSHALL_AWARE = marshall_aware or cls.MARSHALL_AWARE
        cls._KINDS = tuple(f.metadata["kind"] for f in fields(cls))
        cls._NAMES = tuple(f.name for f in fields(cls))
        for f in fields(cls):
            if f.default is MISSING and f.default_factory is MISSING:
                raise TypeError(f"{cls.__name__}.{f.name} needs a default")
        if not hasattr(cls, "__post_init__"):
            cls.__init__ = _slot_init(cls)
        if type_byte is not None:
            if type_byte in STRUCTURES:
                raise ValueError(f"type {type_byte} registered twice")
            cls.TYPE = type_byte
            STRUCTURES[type_byte] = cls
        return cls

    return wrap


def _slot_init(cls):
    """The dataclass's ``__init__`` (same parameters, defaults and effect) setting each field
    through its slot's descriptor rather than ``object.__setattr__`` by name: twice as fast,
    and every command and id is built once per message or more."""
    env: dict = {}
    params, lines = [], []
    for i, f in enumerate(fields(cls)):
        owner = next(k for k in cls.__mro__ if f.name in vars(k))
        env[f"_s{i}"] = vars(owner)[f.name].__set__
        env[f"_d{i}"] = f.default
        params.append(f"{f.name}=_d{i}")
        lines.append(f"    _s{i}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(lines or ["    pass"]) + "\n"
    exec(compile(source, f"<openwire init {cls.__name__}>", "exec"), env)  # noqa: S102 - our own source
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def read_structure(d: Decoder, cls: type[Structure]) -> Structure:
    """The fields of one ``cls`` (its type byte already read)."""
    reader = _READERS.get((cls, d.tight))
    if reader is None:
        reader = _READERS[cls, d.tight] = _compile_reader(cls, d.tight)
    try:
        return reader(d)
    except RecursionError:  # pragma: no cover - max_depth keeps well below the interpreter's limit
        raise MalformedCommand("structures nested too deep") from None


def write_structure(e: Encoder, obj: Structure) -> None:
    """The fields of ``obj`` (its type byte not included)."""
    key = (type(obj), e.tight)
    writer = _WRITERS.get(key)
    if writer is None:
        writer = _WRITERS[key] = _compile_writer(type(obj), e.tight)
    writer(e, obj)


# -- one reader and one writer per structure and encoding, made once ----------------------------------
#
# The fields of a structure are fixed, so its reader is a straight line of calls: the primitive
# fields call the Decoder's method for the encoding directly, the object fields their kind's
# reader.  This is what the generic loop over the kinds did, without its per-field lookups
# (about twice as fast on a message).

#: kind -> (loose call, tight call) for the primitive kinds
_PRIMITIVE_READS = {
    BOOL: ("d.raw_bool()", "d.bit()"),
    BYTE: ("d.byte()", "d.byte()"),
    INT: ("d.int()", "d.int()"),
    LONG: ("d.long()", "d.varlong()"),
    STRING: ("d.loose_string()", "d.tight_string()"),
    BYTES: ("d.byte_array()", "d.byte_array()"),
}
_PRIMITIVE_WRITES = {
    BOOL: ("e.buf.append(1 if {v} else 0)", "e.bit({v})"),
    BYTE: ("e.byte({v})", "e.byte({v})"),
    INT: ("e.int({v})", "e.int({v})"),
    LONG: ("e.long({v})", "e.varlong({v})"),
    STRING: ("e.string({v})", "e.string({v})"),
    BYTES: ("e.byte_array({v})", "e.byte_array({v})"),
}
_READERS: dict = {}
_WRITERS: dict = {}


def _compile_reader(cls, tight: bool):
    env: dict = {"cls": cls}
    lines = []
    for i, kind in enumerate(cls._KINDS):
        calls = _PRIMITIVE_READS.get(kind)
        if calls is None:
            env[f"k{i}"] = kind.read
            lines.append(f"    v{i} = k{i}(d)")
        else:
            lines.append(f"    v{i} = {calls[tight]}")
    values = ", ".join(f"v{i}" for i in range(len(cls._KINDS)))
    source = "def read(d):\n" + "\n".join(lines or ["    pass"]) + f"\n    return cls({values})\n"
    exec(compile(source, f"<openwire reader {cls.__name__}>", "exec"), env)  # noqa: S102 - our own source
    return env["read"]


def _compile_writer(cls, tight: bool):
    env: dict = {}
    lines = []
    for i, (kind, name) in enumerate(zip(cls._KINDS, cls._NAMES, strict=True)):
        calls = _PRIMITIVE_WRITES.get(kind)
        if calls is None:
            env[f"k{i}"] = kind.write
            lines.append(f"    k{i}(e, obj.{name})")
        else:
            lines.append("    " + calls[tight].format(v=f"obj.{name}"))
    source = "def write(e, obj):\n" + "\n".join(lines or ["    pass"]) + "\n"
    exec(compile(source, f"<openwire writer {cls.__name__}>", "exec"), env)  # noqa: S102 - our own source
    return env["write"]


def _names(expect: frozenset) -> str:
    return " or ".join(sorted(type_name(t) for t in expect))


def nested(*expect: int) -> Kind:
    """An object field holding one of the type bytes ``expect`` (none named: any)."""
    accepted = frozenset(expect)

    def read(d: Decoder):
        if not d.boolean():
            return None
        t = d.ubyte()
        cls = STRUCTURES.get(t)
        if cls is None:
            raise UnknownType(t, "a nested object")
        if accepted and t not in accepted:
            raise MalformedCommand(f"a {type_name(t)} where a {_names(accepted)} belongs")
        ctx = d.context
        if d.depth >= ctx.max_depth:
            raise MalformedCommand(f"objects nested more than {ctx.max_depth} deep")
        d.depth += 1
        if d.tight and cls.MARSHALL_AWARE and d.bit():
            # A "cached marshalled form": size, type, and a BooleanStream of its own.
            d.int()
            d.byte()
            outer = d.bits, d.bit_pos, d.bit_end
            d.start_tight()
            obj = read_structure(d, cls)
            d.bits, d.bit_pos, d.bit_end = outer
        else:
            obj = read_structure(d, cls)
        d.depth -= 1
        return obj

    def write(e: Encoder, obj) -> None:
        e.boolean(obj is not None)
        if obj is None:
            return
        t = obj.TYPE
        if t not in STRUCTURES or (accepted and t not in accepted):
            raise TypeError(f"{type(obj).__name__} where a {_names(accepted)} belongs")
        if e.tight and obj.MARSHALL_AWARE:
            e.bit(False)
        e.buf.append(t)
        write_structure(e, obj)

    return Kind(read, write, "nested", accepted)


def cached(*expect: int) -> Kind:
    """An object field that goes through the marshalling cache when it is on."""
    plain = nested(*expect)
    accepted = frozenset(expect)

    def read(d: Decoder):
        ctx = d.context
        if not ctx.cache_slots:
            return plain.read(d)
        new = d.boolean()
        index = d.short()
        if new:
            obj = plain.read(d)
            ctx.remember(index, obj)
            return obj
        obj = ctx.recall(index)
        if obj is not None and accepted and obj.TYPE not in accepted:
            raise MalformedCommand(f"cache index {index} holds a {type_name(obj.TYPE)} where a "
                                   f"{_names(accepted)} belongs")
        return obj

    def write(e: Encoder, obj) -> None:
        ctx = e.context
        if not ctx.cache_slots:
            plain.write(e, obj)
            return
        index = ctx.index_of(obj)
        e.boolean(index is None)
        if index is not None:
            e.short(index)
            return
        if not e.tight:  # as Java's loose writer: the slot first, then the object
            i = ctx.assign(obj)
            e.short(i)
            plain.write(e, obj)
            ctx.settle(i, obj)
            return
        # As Java's tight writer: the object first (its own cached parts take slots), then its slot.
        at = len(e.buf)
        e.buf += b"\0\0"
        plain.write(e, obj)
        e.buf[at:at + 2] = ctx.assign(obj).to_bytes(2, "big")

    return Kind(read, write, "cached", accepted)


def array(*expect: int) -> Kind:
    """An array of objects: a presence flag, a ``short`` count, each nested (a tuple here)."""
    item = nested(*expect)

    def read(d: Decoder):
        if not d.boolean():
            return None
        n = d.short()
        if n < 0:
            raise MalformedCommand(f"an array has the negative length {n}")
        return tuple(item.read(d) for _ in range(n))

    def write(e: Encoder, items) -> None:
        e.boolean(items is not None)
        if items is None:
            return
        e.short(len(items))
        for obj in items:
            item.write(e, obj)

    return Kind(read, write, "array", item.accepts)


@dataclass(frozen=True, slots=True)
class StackFrame:
    """One element of a Java stack trace."""

    class_name: str | None
    method_name: str | None
    file_name: str | None
    line_number: int


@dataclass(frozen=True, slots=True)
class JavaThrowable:
    """A marshalled Java exception: the client rebuilds ``class_name(message)`` from it.

    ``stack_trace`` and ``cause`` travel only when ``StackTraceEnabled`` was
    negotiated; otherwise they are dropped on writing and empty on reading.
    """

    class_name: str | None
    message: str | None = None
    stack_trace: tuple[StackFrame, ...] = ()
    cause: JavaThrowable | None = None


def _read_throwable(d: Decoder, depth: int = 0) -> JavaThrowable | None:
    if not d.boolean():
        return None
    class_name = d.string()
    message = d.string()
    if not d.context.stack_trace:
        return JavaThrowable(class_name, message)
    if depth >= d.context.max_depth:
        raise MalformedCommand(f"exception causes chained more than {d.context.max_depth} deep")
    n = d.short()
    if n < 0:
        raise MalformedCommand(f"a stack trace has the negative length {n}")
    frames = tuple(StackFrame(d.string(), d.string(), d.string(), d.int()) for _ in range(n))
    return JavaThrowable(class_name, message, frames, _read_throwable(d, depth + 1))


def _write_throwable(e: Encoder, exc: JavaThrowable | None) -> None:
    e.boolean(exc is not None)
    if exc is None:
        return
    e.string(exc.class_name)
    e.string(exc.message)
    if not e.context.stack_trace:
        return
    e.short(len(exc.stack_trace))
    for frame in exc.stack_trace:
        e.string(frame.class_name)
        e.string(frame.method_name)
        e.string(frame.file_name)
        e.int(frame.line_number)
    _write_throwable(e, exc.cause)


THROWABLE = Kind(_read_throwable, _write_throwable, "throwable")
