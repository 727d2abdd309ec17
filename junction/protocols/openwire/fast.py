"""Straight-line readers and writers of whole commands, in every encoding.

Every message, dispatch and ack of a connection goes through here.  The field-by-field path (:mod:`.marshal`, :mod:`.encoding`) makes a
Python call per field and per bit -- some 150 for a text message -- and
spent most of a node's time per message.  For each command class a reader
and a writer are generated once, as one function each, with every nested
structure whose type is known (ids, destinations, the message in a
dispatch) written out in place and the frame's bytes, position and bits
held in local variables.

A cached field (a destination, a producer's or consumer's id) is a nested
object with the marshalling cache off; with it on, "new" and a slot, and the
object only when new, read and written through the connection's
:class:`~.marshal.WireContext` exactly as :func:`~.marshal.cached` does.

They are a fast path, not a second codec.  Anything they do not expect --
a cached marshalled form, a nested object of an open type (``data_structure``),
an array, an exception, a malformed or truncated body, a value a writer
cannot pack -- makes them give up (:class:`Fallback`, or whatever exception
Python raises), and the caller runs the field-by-field path from the start,
which gives the command or the error (its type, text and offset) as it
always did.  A reader returns only when it consumed exactly the frame, so a
read past the frame's end (into the next one) can never return a command.
``tests/unit/test_openwire_fast.py`` checks both paths agree on the real
client's frames, on every truncation and on corruptions of every byte.
"""

from __future__ import annotations

import struct

from junction.protocols.openwire.encoding import (
    _BITS,
    MAX_TIGHT_UTF_BYTES,
    MAX_UTF_BYTES,
    decode_mutf8,
    encode_mutf8,
    marshal_boolean_stream,
)
from junction.protocols.openwire.marshal import (
    BOOL,
    BYTE,
    BYTES,
    INT,
    LONG,
    MAGIC,
    STRING,
    STRUCTURES,
)

__all__ = ["Fallback", "fast_reader", "fast_writer"]

#: Levels of nested structures a generated reader writes out in place at most (a dispatch,
#: its message, the message id, its producer id: 3); deeper fields are left to the
#: field-by-field path.
MAX_INLINE_DEPTH = 4


class Fallback(Exception):
    """The fast path met something it leaves to the field-by-field path."""


class _Unsupported(Exception):
    """A class has a field kind the generator does not write out (no fast path for it)."""


_ENV = {
    "Fallback": Fallback,
    "_BITS": _BITS,
    "_SHORT": struct.Struct(">h"),
    "_USHORT": struct.Struct(">H"),
    "_INT": struct.Struct(">i"),
    "_UINT": struct.Struct(">I"),
    "_LONG": struct.Struct(">q"),
    "_BYTE": struct.Struct(">b"),
    "decode_mutf8": decode_mutf8,
    "encode_mutf8": encode_mutf8,
    "marshal_boolean_stream": marshal_boolean_stream,
    "MAX_TIGHT_UTF": MAX_TIGHT_UTF_BYTES,
    "MAX_UTF": MAX_UTF_BYTES,
}


class _Gen:
    """Source lines and fresh names for one generated function."""

    def __init__(self, tight: bool, cache: bool = False) -> None:
        self.tight = tight
        self.cache = cache
        self.lines: list[str] = []
        self.env: dict = dict(_ENV)
        self.n = 0
        self.depth = 0  # the deepest level written out

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def const(self, value) -> str:
        name = self.name("c")
        self.env[name] = value
        return name


_MAKERS: dict = {}


def maker(cls):
    """A function building ``cls`` from its fields in order, as ``cls(*values)`` does but without
    the frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field: half the time of
    reading a message); ``cls`` itself when it has a ``__post_init__`` to run."""
    made = _MAKERS.get(cls)
    if made is not None:
        return made
    if hasattr(cls, "__post_init__"):
        made = cls
    else:
        env: dict = {"new": object.__new__, "cls": cls}
        args = ", ".join(f"v{i}" for i in range(len(cls._NAMES)))
        lines = ["    o = new(cls)"]
        for i, name in enumerate(cls._NAMES):
            owner = next(k for k in cls.__mro__ if name in vars(k))
            env[f"s{i}"] = vars(owner)[name].__set__  # the slot's own descriptor
            lines.append(f"    s{i}(o, v{i})")
        source = f"def make({args}):\n" + "\n".join(lines) + "\n    return o\n"
        exec(compile(source, f"<openwire maker {cls.__name__}>", "exec"), env)  # noqa: S102 - our own source
        made = env["make"]
    _MAKERS[cls] = made
    return made


def _groups(accepts) -> list[tuple[list[int], type]]:
    """The accepted type bytes grouped by field layout: [(types, a class of that layout)]."""
    by_layout: dict = {}
    for t in sorted(accepts):
        cls = STRUCTURES[t]
        by_layout.setdefault(cls._KINDS, []).append(t)
    return [(types, STRUCTURES[types[0]]) for types in by_layout.values()]


# -- readers --------------------------------------------------------------------------------------


def _read_fields(g: _Gen, cls, ind: int, level: int) -> list[str]:
    """Lines reading ``cls``'s fields; the names of the values, in order."""
    names = []
    for kind in cls._KINDS:
        v = g.name("v")
        names.append(v)
        _read_field(g, kind, v, ind, level)
    return names


def _flag(g: _Gen) -> tuple[str, str]:
    """A presence flag (and a boolean field): a bit (tight) or a byte, any non-zero one true
    (loose): the expression that reads it, and the statement that steps over it."""
    return ("bits[bp]", "bp += 1") if g.tight else ("buf[pos]", "pos += 1")


def _inline(kind, level: int) -> bool:
    """A nested (or cached) field of known types, shallow enough to be written out in place."""
    return bool(kind.accepts) and level < MAX_INLINE_DEPTH


def _read_field(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    e = g.emit
    present, skip_flag = _flag(g)
    if kind is BOOL:
        e(ind, f"{v} = bits[bp] == 1; bp += 1" if g.tight else f"{v} = buf[pos] != 0; pos += 1")
    elif kind is BYTE:
        e(ind, f"{v} = buf[pos]; pos += 1")
        e(ind, f"if {v} > 127: {v} -= 256")
    elif kind is INT:
        e(ind, f"{v} = _INT.unpack_from(buf, pos)[0]; pos += 4")
    elif kind is LONG and not g.tight:
        e(ind, f"{v} = _LONG.unpack_from(buf, pos)[0]; pos += 8")
    elif kind is LONG:
        e(ind, "if bits[bp]:")
        e(ind + 1, "if bits[bp + 1]:")
        e(ind + 2, f"{v} = _LONG.unpack_from(buf, pos)[0]; pos += 8")
        e(ind + 1, "else:")
        e(ind + 2, f"{v} = _UINT.unpack_from(buf, pos)[0]; pos += 4")
        e(ind, "elif bits[bp + 1]:")
        e(ind + 1, f"{v} = _USHORT.unpack_from(buf, pos)[0]; pos += 2")
        e(ind, "else:")
        e(ind + 1, f"{v} = 0")
        e(ind, "bp += 2")
    elif kind is STRING and not g.tight:
        e(ind, "if buf[pos]:")
        e(ind + 1, "n = _USHORT.unpack_from(buf, pos + 1)[0]; pos += 3")
        e(ind + 1, f"{v} = decode_mutf8(buf[pos:pos + n]); pos += n")
        e(ind, "else:")
        e(ind + 1, f"{v} = None; pos += 1")
    elif kind is STRING:
        e(ind, "if bits[bp]:")
        e(ind + 1, "if bits[bp + 1]:")  # ASCII: a short length (negative: malformed)
        e(ind + 2, "n = _SHORT.unpack_from(buf, pos)[0]; pos += 2")
        e(ind + 2, "if n < 0: raise Fallback")
        e(ind + 2, f"{v} = buf[pos:pos + n].decode('latin-1')")
        e(ind + 1, "else:")  # writeUTF: an unsigned short length
        e(ind + 2, "n = _USHORT.unpack_from(buf, pos)[0]; pos += 2")
        e(ind + 2, f"{v} = decode_mutf8(buf[pos:pos + n])")
        e(ind + 1, "pos += n; bp += 2")
        e(ind, "else:")
        e(ind + 1, f"{v} = None; bp += 1")
    elif kind is BYTES:
        e(ind, f"if {present}:")
        e(ind + 1, skip_flag)
        e(ind + 1, "n = _INT.unpack_from(buf, pos)[0]; pos += 4")
        e(ind + 1, "if n < 0: raise Fallback")
        e(ind + 1, f"{v} = bytes(buf[pos:pos + n]); pos += n")
        e(ind, "else:")
        e(ind + 1, f"{v} = None; {skip_flag}")
    elif kind is MAGIC:
        e(ind, f"{v} = bytes(buf[pos:pos + 8]); pos += 8")
    elif kind.shape == "cached" and g.cache:
        _read_cached(g, kind, v, ind, level)
    elif kind.shape in ("nested", "cached") and _inline(kind, level):
        # with the cache off a cached field is a nested one
        _read_nested(g, kind, v, ind, level)
    elif kind.shape in ("nested", "cached", "array", "throwable"):
        # present: left to the field-by-field path; absent: one flag, as all of these
        e(ind, f"if {present}: raise Fallback")
        e(ind, f"{v} = None; {skip_flag}")
    else:
        raise _Unsupported(kind.shape)


def _read_cached(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    """A cached field with the cache on: "new" and a slot, then the object if new
    (kept in the unmarshalling cache at that slot), else the object the slot holds."""
    e = g.emit
    if not _inline(kind, level):
        raise _Unsupported("cached")  # "new" or a slot, then an object not written out: no fast path
    new, index = g.name("new"), g.name("i")
    e(ind, f"{new} = bits[bp]; bp += 1" if g.tight else f"{new} = buf[pos] != 0; pos += 1")
    e(ind, f"{index} = _SHORT.unpack_from(buf, pos)[0]; pos += 2")
    e(ind, f"if {new}:")
    _read_nested(g, kind, v, ind + 1, level)
    e(ind + 1, f"ctx.keep({index}, {v})")
    e(ind, "else:")
    e(ind + 1, f"{v} = ctx.recall({index})")
    e(ind + 1, f"if {v} is not None and {v}.TYPE not in {g.const(frozenset(kind.accepts))}: raise Fallback")


def _read_nested(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    """A nested object of a known type, written out in place."""
    e = g.emit
    present, skip_flag = _flag(g)
    e(ind, f"if {present}:")
    e(ind + 1, skip_flag)
    t = g.name("t")
    e(ind + 1, f"{t} = buf[pos]; pos += 1")
    first = True
    for types, cls in _groups(kind.accepts):
        test = f"{t} == {types[0]}" if len(types) == 1 else f"{t} in {g.const(frozenset(types))}"
        e(ind + 1, f"{'if' if first else 'elif'} {test}:")
        first = False
        if cls.MARSHALL_AWARE and g.tight:
            e(ind + 2, "if bits[bp]: raise Fallback")  # a cached marshalled form
            e(ind + 2, "bp += 1")
        g.depth = max(g.depth, level + 1)
        values = _read_fields(g, cls, ind + 2, level + 1)
        make = g.const(maker(cls)) if len(types) == 1 else f"{g.const({x: maker(STRUCTURES[x]) for x in types})}[{t}]"
        e(ind + 2, f"{v} = {make}({', '.join(values)})")
    e(ind + 1, "else:")
    e(ind + 2, "raise Fallback")
    e(ind, "else:")
    e(ind + 1, f"{v} = None; {skip_flag}")


def fast_reader(cls, tight: bool = True, cache: bool = False):
    """``read(buf, pos, end, ctx) -> command`` for ``cls``, or None.

    ``buf[pos:end]`` is the body after the type byte.  Raises (anything)
    instead of returning when the body is not what it expects; the returned
    function's ``depth`` is the deepest nesting it writes out.  With ``cache``
    it reads the cached fields through ``ctx``'s unmarshalling cache, filling
    slots with :meth:`~.marshal.WireContext.keep`: the caller brackets it with
    ``ctx.begin_read()`` and, when it gives up, ``ctx.forget_kept()``;
    without, ``ctx`` is not used.
    """
    g = _Gen(tight, cache)
    if tight:
        g.emit(1, "n = buf[pos]; pos += 1")
        g.emit(1, "if n == 0xC0:")
        g.emit(2, "n = buf[pos]; pos += 1")
        g.emit(1, "elif n == 0x80:")
        g.emit(2, "n = _SHORT.unpack_from(buf, pos)[0]; pos += 2")
        g.emit(2, "if n < 0: raise Fallback")
        g.emit(1, "bits = b''.join([_BITS[b] for b in buf[pos:pos + n]]); pos += n; bp = 0")
    try:
        values = _read_fields(g, cls, 1, 0)
    except _Unsupported:
        return None
    g.emit(1, "if pos != end: raise Fallback")
    g.emit(1, f"return {g.const(maker(cls))}({', '.join(values)})")
    read = _compile(g, "read(buf, pos, end, ctx=None)", f"<openwire fast reader {cls.__name__}>")
    read.depth = g.depth
    return read


# -- writers --------------------------------------------------------------------------------------


def _write_fields(g: _Gen, cls, obj: str, ind: int, level: int) -> None:
    for kind, name in zip(cls._KINDS, cls._NAMES, strict=True):
        v = g.name("v")
        g.emit(ind, f"{v} = {obj}.{name}")
        _write_field(g, kind, v, ind, level)


def _write_field(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    e = g.emit
    tight = g.tight
    # a presence flag: a bit (tight) or a byte (loose)
    present = "acc |= 1 << nb; nb += 1" if tight else "buf.append(1)"
    absent = "nb += 1" if tight else "buf.append(0)"
    if kind is BOOL:
        if tight:
            e(ind, f"if {v}: acc |= 1 << nb")
            e(ind, "nb += 1")
        else:
            e(ind, f"buf.append(1 if {v} else 0)")
    elif kind is BYTE:
        e(ind, f"buf += _BYTE.pack({v})")
    elif kind is INT:
        e(ind, f"buf += _INT.pack({v})")
    elif kind is LONG and not tight:
        e(ind, f"buf += _LONG.pack({v})")
    elif kind is LONG:
        e(ind, f"if {v} == 0:")
        e(ind + 1, "pass")
        e(ind, f"elif {v} & ~0xFFFF == 0:")
        e(ind + 1, f"acc |= 2 << nb; buf += _USHORT.pack({v})")
        e(ind, f"elif {v} & ~0xFFFFFFFF == 0:")
        e(ind + 1, f"acc |= 1 << nb; buf += _UINT.pack({v})")
        e(ind, "else:")
        e(ind + 1, f"acc |= 3 << nb; buf += _LONG.pack({v})")
        e(ind, "nb += 2")
    elif kind is STRING and not tight:
        e(ind, f"if {v} is None:")
        e(ind + 1, "buf.append(0)")
        e(ind, "else:")
        e(ind + 1, f"if not isinstance({v}, str): raise Fallback")
        e(ind + 1, f"data = encode_mutf8({v})")
        e(ind + 1, "if len(data) > MAX_UTF: raise Fallback")
        e(ind + 1, "buf.append(1); buf += _USHORT.pack(len(data)); buf += data")
    elif kind is STRING:
        e(ind, f"if {v} is None:")
        e(ind + 1, "nb += 1")
        e(ind, "else:")
        e(ind + 1, f"if not isinstance({v}, str): raise Fallback")
        e(ind + 1, f"if {v}.isascii() and '\\x00' not in {v}:")
        e(ind + 2, f"data = {v}.encode('ascii'); acc |= 3 << nb")
        e(ind + 1, "else:")
        e(ind + 2, f"data = encode_mutf8({v}); acc |= 1 << nb")
        e(ind + 1, "if len(data) > MAX_TIGHT_UTF: raise Fallback")
        e(ind + 1, "nb += 2; buf += _USHORT.pack(len(data)); buf += data")
    elif kind is BYTES:
        e(ind, f"if {v} is None:")
        e(ind + 1, absent)
        e(ind, "else:")
        e(ind + 1, f"{present}; buf += _INT.pack(len({v})); buf += {v}")
    elif kind is MAGIC:
        e(ind, f"if len({v}) != 8: raise Fallback")
        e(ind, f"buf += {v}")
    elif kind.shape == "cached" and g.cache:
        _write_cached(g, kind, v, ind, level)
    elif kind.shape in ("nested", "cached") and _inline(kind, level):
        _write_nested(g, kind, v, ind, level)
    elif kind.shape in ("nested", "cached", "array", "throwable"):
        e(ind, f"if {v} is not None: raise Fallback")
        e(ind, absent)
    else:
        raise _Unsupported(kind.shape)


def _write_cached(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    """A cached field with the cache on, as the field-by-field writer does it: "not new" and
    the slot of an object the peer has; else "new", the object and the slot it takes (tight:
    the slot taken after the object's own cached parts took theirs; loose: before them)."""
    e = g.emit
    if not _inline(kind, level):
        raise _Unsupported("cached")  # "new" or a slot, then an object not written out: no fast path
    index = g.name("i")
    e(ind, f"{index} = ctx.index_of({v})")
    e(ind, f"if {index} is not None:")
    e(ind + 1, "nb += 1" if g.tight else "buf.append(0)")
    e(ind + 1, f"buf += _SHORT.pack({index})")
    e(ind, "else:")
    if g.tight:
        at = g.name("at")
        e(ind + 1, f"acc |= 1 << nb; nb += 1; {at} = len(buf); buf += b'\\0\\0'")
        _write_nested(g, kind, v, ind + 1, level)
        e(ind + 1, f"buf[{at}:{at} + 2] = _SHORT.pack(ctx.assign({v}))")
    else:
        e(ind + 1, f"buf.append(1); {index} = ctx.assign({v}); buf += _SHORT.pack({index})")
        _write_nested(g, kind, v, ind + 1, level)
        e(ind + 1, f"ctx.settle({index}, {v})")


def _write_nested(g: _Gen, kind, v: str, ind: int, level: int) -> None:
    """A nested object of a known type, written out in place."""
    e = g.emit
    tight = g.tight
    present = "acc |= 1 << nb; nb += 1" if tight else "buf.append(1)"
    absent = "nb += 1" if tight else "buf.append(0)"
    e(ind, f"if {v} is None:")
    e(ind + 1, absent)
    e(ind, "else:")
    e(ind + 1, present)
    c = g.name("k")
    e(ind + 1, f"{c} = type({v})")
    first = True
    for t in sorted(kind.accepts):
        cls = STRUCTURES[t]
        e(ind + 1, f"{'if' if first else 'elif'} {c} is {g.const(cls)}:")
        first = False
        if cls.MARSHALL_AWARE and tight:
            e(ind + 2, "nb += 1")
        e(ind + 2, f"buf.append({t})")
        _write_fields(g, cls, v, ind + 2, level + 1)
    e(ind + 1, "else:")
    e(ind + 2, "raise Fallback")


def fast_writer(cls, tight: bool = True, cache: bool = False):
    """``write(command, ctx) -> body`` for ``cls``: the bytes after the type byte (the
    BooleanStream first when tight); or None.  Raises (anything) where it gives up.  With
    ``cache`` it assigns ``ctx``'s marshalling cache slots as the field-by-field writer does:
    the caller brackets it with ``ctx.begin()`` and, when it gives up, ``ctx.rollback()``."""
    g = _Gen(tight, cache)
    g.emit(1, "buf = bytearray(); acc = 0; nb = 0")
    try:
        _write_fields(g, cls, "obj", 1, 0)
    except _Unsupported:
        return None
    if tight:
        g.emit(1, "return marshal_boolean_stream(acc.to_bytes((nb + 7) >> 3, 'little'), nb) + buf")
    else:
        g.emit(1, "return bytes(buf)")
    return _compile(g, "write(obj, ctx=None)", f"<openwire fast writer {cls.__name__}>")


def _compile(g: _Gen, signature: str, filename: str):
    source = f"def {signature}:\n" + "\n".join(g.lines) + "\n"
    exec(compile(source, filename, "exec"), g.env)  # noqa: S102 - our own source
    return g.env[signature.partition("(")[0]]
