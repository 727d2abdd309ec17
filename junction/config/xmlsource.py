"""A small XML tree that remembers where every element came from.

Why not ``xml.etree.ElementTree.parse``: it forgets line numbers, and every
configuration error Junction reports must say ``file:line`` (DESIGN.md,
principle 8).  So this module drives :mod:`xml.parsers.expat` directly and
builds :class:`Element` nodes that carry the line (and column) of their start
tag.

What it accepts:

* the Artemis layout ``<configuration xmlns="urn:activemq"><core
  xmlns="urn:activemq:core">...</core></configuration>``;
* a bare ``<core>`` root, with the ``urn:activemq:core`` namespace or none;
* documents with no namespace at all.

Namespaces are resolved by expat; :attr:`Element.tag` is the local name and
:attr:`Element.ns` the namespace URI (``""`` when there is none), so the loader
checks namespaces once, in :func:`find_core`, and otherwise works with local
names.  Attributes in a namespace (``xsi:schemaLocation``, ``xml:lang`` ...)
are kept apart in :attr:`Element.ns_attrib` and never validated.

Security: a broker.xml is trusted input, but it is also the file most often
copied from the internet.  Document type declarations are refused outright,
which rules out internal and external entities (billion laughs, XXE) and
external DTD fetching: expat never sees an entity declaration it could
expand.  Artemis itself resolves ``xi:include``; Junction does not (the loader
reports it as unsupported).

This module only builds the tree; what the elements mean is
:mod:`junction.config.loader`'s business.
"""

from __future__ import annotations

import os
from xml.parsers import expat

#: The namespace of Artemis's outer ``<configuration>`` element.
NS_CONFIGURATION = "urn:activemq"
#: The namespace of Artemis's ``<core>`` element and everything in it
#: (``artemis-configuration.xsd``'s ``targetNamespace``).
NS_CORE = "urn:activemq:core"
#: Namespaces an element of a broker.xml may be in ("" = no namespace).
ACCEPTED_NAMESPACES = frozenset({"", NS_CONFIGURATION, NS_CORE})

#: Largest broker.xml read, in bytes.  Real ones are a few tens of KiB; the
#: cap keeps a wrong path (a journal file, /dev/zero) from eating memory.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

# expat reports namespaced names as "uri<sep>local"; a space cannot occur in
# either part of a valid name or in a sane namespace URI.
_NS_SEP = " "


class XMLSourceError(Exception):
    """The document is not well-formed XML, or uses a forbidden construct.

    ``file`` and ``line`` say where; ``message`` says what, without the
    location (``str()`` adds it).
    """

    def __init__(self, file: str, line: int, message: str):
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


class Element:
    """One XML element with its position.

    ``text`` is the element's own character data (the text between its
    children, concatenated), not stripped; ``children`` are in document
    order.  The tree is mutable so the loader can substitute ``${VAR}``
    references in place; nothing outside :mod:`junction.config` sees it.
    """

    __slots__ = (
        "tag",
        "ns",
        "attrib",
        "ns_attrib",
        "text",
        "children",
        "file",
        "line",
        "column",
        "parent",
    )

    def __init__(self, tag: str, ns: str, file: str, line: int, column: int = 0):
        self.tag = tag
        self.ns = ns
        self.attrib: dict[str, str] = {}
        self.ns_attrib: dict[str, str] = {}
        self.text = ""
        self.children: list[Element] = []
        self.file = file
        self.line = line
        self.column = column
        self.parent: Element | None = None

    @property
    def source(self) -> tuple[str, int]:
        """``(file, line)`` of the start tag, as the model's ``source`` fields want."""
        return (self.file, self.line)

    @property
    def value(self) -> str:
        """The text content, stripped (Artemis trims element text too)."""
        return self.text.strip()

    def iter(self):
        """This element and every descendant, depth first, in document order."""
        stack = [self]
        while stack:
            el = stack.pop()
            yield el
            stack.extend(reversed(el.children))

    def __repr__(self) -> str:
        ns = f"{{{self.ns}}}" if self.ns else ""
        return f"<Element {ns}{self.tag} at {self.file}:{self.line}>"


def _split(name: str) -> tuple[str, str]:
    if _NS_SEP in name:
        ns, local = name.split(_NS_SEP, 1)
        return ns, local
    return "", name


class _Builder:
    def __init__(self, file: str, encoding: str | None = None):
        self.file = file
        self.root: Element | None = None
        self.stack: list[Element] = []
        # ``encoding`` overrides the document's declaration (used for text
        # that is already decoded); None lets expat honour the declaration.
        self.parser = expat.ParserCreate(encoding, namespace_separator=_NS_SEP)
        p = self.parser
        # Refuse DTDs and anything entity-related before expat acts on them.
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartDoctypeDeclHandler = self._doctype
        p.EntityDeclHandler = self._entity
        p.UnparsedEntityDeclHandler = self._entity
        p.ExternalEntityRefHandler = self._external
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.CharacterDataHandler = self._chars
        p.buffer_text = True
        p.ordered_attributes = False

    def _where(self) -> int:
        return self.parser.CurrentLineNumber

    def _doctype(self, *_args):
        raise XMLSourceError(
            self.file,
            self._where(),
            "DOCTYPE declarations are not allowed in broker.xml (no DTDs or entities)",
        )

    def _entity(self, *_args):
        raise XMLSourceError(
            self.file, self._where(), "entity declarations are not allowed in broker.xml"
        )

    def _external(self, *_args):
        raise XMLSourceError(
            self.file, self._where(), "external entities are not allowed in broker.xml"
        )

    def _start(self, name: str, attrs: dict[str, str]):
        ns, local = _split(name)
        el = Element(
            local, ns, self.file, self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber
        )
        for key, val in attrs.items():
            ans, alocal = _split(key)
            if ans:
                el.ns_attrib[f"{{{ans}}}{alocal}"] = val
            else:
                el.attrib[alocal] = val
        if self.stack:
            el.parent = self.stack[-1]
            self.stack[-1].children.append(el)
        else:
            self.root = el
        self.stack.append(el)

    def _end(self, _name: str):
        self.stack.pop()

    def _chars(self, data: str):
        if self.stack:
            self.stack[-1].text += data

    def feed(self, data: bytes) -> Element:
        try:
            self.parser.Parse(data, True)
        except expat.ExpatError as e:
            raise XMLSourceError(
                self.file, e.lineno, f"not well-formed XML: {expat.ErrorString(e.code)}"
            ) from None
        assert self.root is not None
        return self.root


def parse_bytes(data: bytes, file: str = "<string>") -> Element:
    """Parse a whole document held in memory; ``file`` names it in errors."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise XMLSourceError(
            file, 1, f"file is larger than {MAX_DOCUMENT_BYTES} bytes (MAX_DOCUMENT_BYTES)"
        )
    return _Builder(file).feed(data)


def parse_string(text: str, file: str = "<string>") -> Element:
    """Parse a document given as already-decoded text.

    The text is handed to expat as UTF-8 whatever its ``<?xml encoding=?>``
    says, since decoding has already happened.
    """
    data = text.encode("utf-8")
    if len(data) > MAX_DOCUMENT_BYTES:
        raise XMLSourceError(
            file, 1, f"file is larger than {MAX_DOCUMENT_BYTES} bytes (MAX_DOCUMENT_BYTES)"
        )
    return _Builder(file, "utf-8").feed(data)


def parse_file(path: str | os.PathLike) -> Element:
    """Read and parse ``path``.  Errors name the path as given."""
    file = os.fspath(path)
    try:
        size = os.path.getsize(file)
        if size > MAX_DOCUMENT_BYTES:
            raise XMLSourceError(
                file, 1, f"file is larger than {MAX_DOCUMENT_BYTES} bytes (MAX_DOCUMENT_BYTES)"
            )
        with open(file, "rb") as fh:
            data = fh.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as e:
        raise XMLSourceError(file, 0, f"cannot read: {e.strerror or e}") from None
    return parse_bytes(data, file)


def find_core(root: Element) -> tuple[Element | None, list[tuple[Element, str]]]:
    """Find the ``<core>`` element of a parsed broker.xml.

    Returns ``(core, problems)``; ``problems`` are ``(element, message)`` for
    the outer layer only (wrong root, wrong namespace, siblings of ``<core>``
    that Junction does not support such as the legacy ``<jms>`` or XInclude).
    ``core`` is ``None`` when there is none to read.
    """
    problems: list[tuple[Element, str]] = []
    if root.tag == "core":
        if root.ns not in ("", NS_CORE):
            problems.append(
                (root, f"<core> must be in namespace {NS_CORE!r} or none, not {root.ns!r}")
            )
        return root, problems
    if root.tag != "configuration":
        problems.append(
            (
                root,
                f"the root element must be <configuration> (Artemis layout) or <core>, not <{root.tag}>",
            )
        )
        return None, problems
    if root.ns not in ("", NS_CONFIGURATION):
        problems.append(
            (
                root,
                f"<configuration> must be in namespace {NS_CONFIGURATION!r} or none, not {root.ns!r}",
            )
        )
    core = None
    for child in root.children:
        if child.tag == "core" and child.ns in ("", NS_CORE, NS_CONFIGURATION):
            if core is not None:
                problems.append(
                    (child, f"a second <core> element (the first is at line {core.line})")
                )
                continue
            core = child
        elif child.tag == "include" and child.ns == "http://www.w3.org/2001/XInclude":
            problems.append(
                (
                    child,
                    "xi:include is not supported by Junction yet; put the elements in broker.xml",
                )
            )
        elif child.tag == "jms":
            problems.append(
                (
                    child,
                    "jms is not supported by Junction yet (the legacy JMS configuration of Artemis 1.x)",
                )
            )
        else:
            problems.append(
                (child, f"unknown element <{child.tag}> in <configuration>; expected <core>")
            )
    if core is None and not problems:
        problems.append((root, "<configuration> has no <core> element"))
    if core is not None and root.text.strip():
        problems.append((root, "unexpected text in <configuration>"))
    return core, problems
