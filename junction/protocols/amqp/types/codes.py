"""AMQP format codes (spec part 1 section 1.6): their names and types, and the errors that name them.

A literal table of the spec's encodings: ``_CODE_NAMES`` names each code in
error messages (and lists the codes the decoder knows).
"""

from __future__ import annotations

from junction.protocols.amqp.types.values import MAX_DEPTH, DecodeError

_CODE_NAMES = {
    0x00: "described",
    0x40: "null", 0x41: "true", 0x42: "false", 0x56: "boolean",
    0x50: "ubyte", 0x60: "ushort", 0x70: "uint", 0x52: "smalluint", 0x43: "uint0",
    0x80: "ulong", 0x53: "smallulong", 0x44: "ulong0",
    0x51: "byte", 0x61: "short", 0x71: "int", 0x54: "smallint",
    0x81: "long", 0x55: "smalllong",
    0x72: "float", 0x82: "double",
    0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128",
    0x73: "char", 0x83: "timestamp", 0x98: "uuid",
    0xA0: "vbin8", 0xB0: "vbin32", 0xA1: "str8-utf8", 0xB1: "str32-utf8",
    0xA3: "sym8", 0xB3: "sym32",
    0x45: "list0", 0xC0: "list8", 0xD0: "list32", 0xC1: "map8", 0xD1: "map32",
    0xE0: "array8", 0xF0: "array32",
}

def _code_name(code: int) -> str:
    return f"{_CODE_NAMES.get(code, 'unknown')} (format code 0x{code:02x})"


def _truncated(code: int, pos: int) -> DecodeError:
    return DecodeError(f"truncated {_code_name(code)}: input ends at offset {pos}", pos)


def _too_deep(code: int, pos: int) -> DecodeError:
    return DecodeError(
        f"{_code_name(code)} at offset {pos - 1} nested deeper than MAX_DEPTH={MAX_DEPTH}",
        pos - 1,
    )
