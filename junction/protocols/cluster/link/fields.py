"""What every field of every record and event may hold: one table, checked on both sides.

``_FIELDS`` lists each dataclass's fields and their kinds; the same kinds
check an event before it is sent (:class:`~junction.protocols.errors.LocalProtocolError`,
code ``invalid-event``) and build one from a received JSON object
(:class:`~junction.protocols.errors.RemoteProtocolError`, code ``malformed``).
Also the JSON encoder and decoder of the control frames, and
:func:`encode_binding` / :func:`decode_binding` for what carries a binding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from junction.protocols.cluster.link.constants import (
    _INVALID,
    _MALFORMED,
    CHANGE_OPS,
    MAX_COUNT,
    MAX_SEQ,
    REFUSED_CODES,
    ROUTING_TYPES,
)
from junction.protocols.cluster.link.events import (
    Ack,
    Binding,
    BindingAdded,
    BindingRemoved,
    Bindings,
    Change,
    ChangeResult,
    Consumers,
    Goodbye,
    Hello,
    Member,
    MessageFrame,
    Nack,
    Ping,
    Pong,
    Record,
    RecordEntry,
    Refused,
    Topology,
    Welcome,
)
from junction.protocols.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "encode_binding",
    "decode_binding",
]


class _Invalid(Exception):
    """A field or key at ``path`` is missing or holds the wrong thing."""

    def __init__(self, path: str, problem: str):
        super().__init__(path, problem)
        self.path = path
        self.problem = problem


_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_text(value: Any) -> bool:
    # A lone surrogate cannot be encoded as UTF-8 (JSON can smuggle one in as \\ud800).
    return type(value) is str and (value.isascii() or _SURROGATE.search(value) is None)


@dataclass(frozen=True, slots=True)
class _Scalar:
    """A JSON scalar: the same test on both sides."""

    expected: str
    test: Callable[[Any], bool]
    #: never show the value in an error (it would reach logs and the peer)
    secret: bool = False

    def check(self, value: Any, path: str) -> None:
        if not self.test(value):
            shown = "" if self.secret else f", not {_shown(value)}"
            raise _Invalid(path, f"must be {self.expected}{shown}")

    def from_json(self, value: Any, path: str) -> Any:
        self.check(value, path)
        return value


@dataclass(frozen=True, slots=True)
class _Optional:
    inner: Any

    def check(self, value: Any, path: str) -> None:
        if value is not None:
            self.inner.check(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.from_json(value, path)


@dataclass(frozen=True, slots=True)
class _Added:
    """A field added in a minor version: a peer of an older minor version leaves it out."""

    inner: Any
    default: Any = None

    def check(self, value: Any, path: str) -> None:
        self.inner.check(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        return self.inner.from_json(value, path)


@dataclass(frozen=True, slots=True)
class _Tuple:
    """A tuple in Python, an array in JSON; ``unique``: an item attribute that may not repeat."""

    item: Any
    unique: str | None = None

    def check(self, value: Any, path: str) -> None:
        if type(value) is not tuple:
            raise _Invalid(path, f"must be a tuple, not {_shown(value)}")
        for i, item in enumerate(value):
            self.item.check(item, f"{path}[{i}]")
        self._unique(value, path)

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not list:
            raise _Invalid(path, f"must be an array, not {_shown(value)}")
        result = tuple(self.item.from_json(item, f"{path}[{i}]") for i, item in enumerate(value))
        self._unique(result, path)
        return result

    def _unique(self, items: tuple, path: str) -> None:
        if self.unique is None:
            return
        seen: set[str] = set()
        for i, item in enumerate(items):
            key = getattr(item, self.unique)
            if key in seen:
                raise _Invalid(f"{path}[{i}].{self.unique}", f"repeats {_shown(key)}")
            seen.add(key)


@dataclass(frozen=True, slots=True)
class _Pair:
    """A fixed-length tuple in Python, an array of that length in JSON."""

    items: tuple

    def check(self, value: Any, path: str) -> None:
        if type(value) is not tuple or len(value) != len(self.items):
            raise _Invalid(path, f"must be a tuple of {len(self.items)}, not {_shown(value)}")
        for i, (kind, item) in enumerate(zip(self.items, value, strict=True)):
            kind.check(item, f"{path}[{i}]")

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not list or len(value) != len(self.items):
            raise _Invalid(path, f"must be an array of {len(self.items)}, not {_shown(value)}")
        return tuple(
            kind.from_json(item, f"{path}[{i}]")
            for i, (kind, item) in enumerate(zip(self.items, value, strict=True))
        )


@dataclass(frozen=True, slots=True)
class _Record:
    """A dataclass in Python (fields from :data:`_FIELDS`), an object in JSON."""

    cls: type

    def check(self, value: Any, path: str) -> None:
        if type(value) is not self.cls:
            raise _Invalid(path, f"must be a {self.cls.__name__}, not {_shown(value)}")
        for name, kind in _FIELDS[self.cls]:
            kind.check(getattr(value, name), _join(path, name))

    def from_json(self, value: Any, path: str) -> Any:
        if type(value) is not dict:
            raise _Invalid(path, f"must be a JSON object, not {_shown(value)}")
        values = {}
        for name, kind in _FIELDS[self.cls]:
            if name not in value:
                if type(kind) is _Added:
                    values[name] = kind.default
                    continue
                raise _Invalid(_join(path, name), "is missing")
            values[name] = kind.from_json(value[name], _join(path, name))
        return self.cls(**values)


_TEXT = _Scalar("a string", _is_text)
def _is_name(value: Any) -> bool:
    return _is_text(value) and value != ""


_NAME = _Scalar("a non-empty string", _is_name)
_COUNT = _Scalar(f"an integer 0..{MAX_COUNT}", lambda v: type(v) is int and 0 <= v <= MAX_COUNT)
_SEQ_KIND = _Scalar(f"an integer 0..{MAX_SEQ}", lambda v: type(v) is int and 0 <= v <= MAX_SEQ)
_PORT = _Scalar("an integer 0..65535", lambda v: type(v) is int and 0 <= v <= 65535)
_SECRET = _Scalar("a string", _is_text, secret=True)
_BOOL = _Scalar("a boolean", lambda v: type(v) is bool)
_BYTES = _Scalar("bytes", lambda v: type(v) is bytes)
_ROUTING = _Scalar(
    " or ".join(map(repr, ROUTING_TYPES)), lambda v: type(v) is str and v in ROUTING_TYPES
)
_FILTERS = _Optional(_Tuple(_TEXT))
_CHANGE_OP = _Scalar(" or ".join(map(repr, CHANGE_OPS)), lambda v: type(v) is str and v in CHANGE_OPS)

# Every record and event: its fields, in dataclass order, and what each may hold.
_FIELDS: dict[type, tuple[tuple[str, Any], ...]] = {
    Binding: (
        ("id", _NAME), ("address", _NAME), ("queue", _NAME), ("routing_type", _ROUTING),
        ("filter", _Optional(_TEXT)), ("consumers", _COUNT), ("consumer_filters", _FILTERS),
        ("hops", _COUNT), ("origin", _NAME), ("durable", _BOOL),
        # (a kind this version does not know, from a newer peer, reads as "")
        ("kind", _Added(_TEXT, "")),
    ),
    Member: (("node_id", _NAME), ("name", _TEXT), ("host", _TEXT), ("port", _PORT)),
    Hello: (
        ("node_id", _NAME), ("name", _TEXT), ("cluster", _NAME), ("user", _TEXT),
        ("password", _SECRET), ("max_hops", _COUNT), ("host", _TEXT), ("port", _PORT),
    ),
    Welcome: (
        ("node_id", _NAME), ("name", _TEXT), ("scale_down_group", _Added(_Optional(_TEXT))),
        ("version", _Added(_TEXT, "1.0")),
    ),
    Refused: (("code", _NAME), ("reason", _TEXT)),
    Bindings: (("bindings", _Tuple(_Record(Binding), unique="id")),),
    BindingAdded: (("binding", _Record(Binding)),),
    BindingRemoved: (("id", _NAME),),
    Consumers: (("id", _NAME), ("count", _COUNT), ("filters", _FILTERS)),
    Topology: (("nodes", _Tuple(_Record(Member), unique="node_id")),),
    MessageFrame: (
        ("seq", _SEQ_KIND), ("route", _Tuple(_Pair((_NAME, _NAME)))),
        ("duplicate_id", _Optional(_BYTES)), ("body", _BYTES),
        ("create", _Added(_Optional(_Record(Binding)))),
    ),
    Ack: (("seqs", _Tuple(_SEQ_KIND)),),
    Nack: (("seq", _SEQ_KIND), ("reason", _TEXT)),
    Ping: (),
    Pong: (),
    Goodbye: (("reason", _TEXT),),
    Change: (("seq", _SEQ_KIND), ("op", _CHANGE_OP), ("entity", _Record(Binding))),
    ChangeResult: (("seq", _SEQ_KIND), ("ok", _BOOL), ("reason", _TEXT)),
    RecordEntry: (("seq", _SEQ_KIND), ("op", _CHANGE_OP), ("entity", _Record(Binding))),
    Record: (("entries", _Tuple(_Record(RecordEntry))), ("full", _BOOL)),
}


def _local_invalid(what: str, exc: _Invalid) -> LocalProtocolError:
    return LocalProtocolError(f"{what}: field {exc.path!r} {exc.problem}", code=_INVALID)


def _remote_malformed(frame: str, exc: _Invalid) -> RemoteProtocolError:
    where = f"key {exc.path!r}" if exc.path else "payload"
    return RemoteProtocolError(f"{frame} frame: {where} {exc.problem}", code=_MALFORMED)


def _message_ok(event: MessageFrame) -> bool:
    """The hot path's quick check of a MessageFrame (False: let the generic check say why)."""
    seq, route, dup = event.seq, event.route, event.duplicate_id
    return (
        event.create is None
        and type(seq) is int and 0 <= seq <= MAX_SEQ and type(event.body) is bytes
        and (dup is None or type(dup) is bytes) and type(route) is tuple
        and all(
            type(pair) is tuple and len(pair) == 2 and _is_name(pair[0]) and _is_name(pair[1])
            for pair in route
        )
    )


def _check_event(event: Any) -> None:
    """Raise LocalProtocolError unless every field of ``event`` holds what it may."""
    cls = type(event)
    if cls is MessageFrame and _message_ok(event):
        return
    try:
        _Record(cls).check(event, "")
    except _Invalid as exc:
        raise _local_invalid(f"{cls.__name__} event", exc) from None
    if cls is Refused and event.code not in REFUSED_CODES:
        raise LocalProtocolError(
            f"Refused event: code {event.code!r} is not one of {sorted(REFUSED_CODES)}",
            code=_INVALID,
        )


def _jsonable(value: Any) -> Any:
    """A checked record or event as JSON-ready lists and dicts."""
    if type(value) is tuple:
        return [_jsonable(item) for item in value]
    spec = _FIELDS.get(type(value))
    if spec is not None:
        return {name: _jsonable(getattr(value, name)) for name, _ in spec}
    return value


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dump(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode("utf-8")


_JSON_KINDS = {
    list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
    type(None): "null",
}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


# One decoder for every frame (json.loads would build one per call).
_JSON = json.JSONDecoder(parse_constant=_no_constant)


def _load_object(frame: str, raw: bytes, what: str = "payload") -> dict:
    """``raw`` as a JSON object, or RemoteProtocolError naming ``frame`` and ``what``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(
            f"{frame} frame: {what} is not valid UTF-8 (byte {exc.start})", code=_MALFORMED
        ) from None
    try:
        obj = _JSON.decode(text)
    except (ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RemoteProtocolError(
            f"{frame} frame: {what} is not valid JSON ({detail})", code=_MALFORMED
        ) from None
    if type(obj) is not dict:
        raise RemoteProtocolError(
            f"{frame} frame: {what} must be a JSON object, not {_JSON_KINDS[type(obj)]}",
            code=_MALFORMED,
        )
    return obj


def encode_binding(binding: Binding) -> dict:
    """``binding`` as the JSON object BINDINGS and BINDING_ADDED carry.

    Raises LocalProtocolError (code ``invalid-event``) when a field is invalid.
    """
    try:
        _Record(Binding).check(binding, "")
    except _Invalid as exc:
        raise _local_invalid("Binding", exc) from None
    return _jsonable(binding)


def decode_binding(obj: Any) -> Binding:
    """The :class:`Binding` a JSON object describes (RemoteProtocolError if it is not one)."""
    try:
        return _Record(Binding).from_json(obj, "")
    except _Invalid as exc:
        raise _remote_malformed("binding", exc) from None

