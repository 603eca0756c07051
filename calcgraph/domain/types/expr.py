"""Type expressions: a canonical name, `list[T]`, `dict[str, T]`, or an inline struct.

An inline struct is written `{field: T, other: list[T]}` in a string, as JSON text in a
string (`{"field": "T", "other": "list[T]"}`: quoted field names and quoted expressions, as
a client that serialises a dict writes it), or given as a JSON object mapping field names to
type expressions. All three mean the same type. Whitespace is free everywhere.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from calcgraph.domain.types.catalog import CATALOG

_JSON = json.JSONDecoder()
MAX_DEPTH = 32
MAX_LENGTH = 4096


class TypeExprError(ValueError):
    """A malformed expression or an unknown name; `position` is an offset into the text."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True)
class Named:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListOf:
    item: TypeExpr

    def __str__(self) -> str:
        return f"list[{self.item}]"


@dataclass(frozen=True)
class DictOf:
    value: TypeExpr

    def __str__(self) -> str:
        return f"dict[str, {self.value}]"


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, TypeExpr], ...]

    def field_map(self) -> dict[str, TypeExpr]:
        return dict(self.fields)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}: {v}" for k, v in self.fields) + "}"


TypeExpr = Named | ListOf | DictOf | Struct


def _unknown(name: str, position: int) -> TypeExprError:
    close = difflib.get_close_matches(name, list(CATALOG), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TypeExprError(f"unknown type name {name!r} at position {position}{hint}", position)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> TypeExprError:
        found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of expression"
        return TypeExprError(f"expected {what} at position {self.pos}, found {found}", self.pos)

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(repr(char))
        self.pos += 1

    def ident(self, what: str) -> tuple[str, int]:
        self.skip()
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isascii()
            and (self.text[self.pos].isalnum() or self.text[self.pos] == "_")
        ):
            self.pos += 1
        if start == self.pos or self.text[start].isdigit():
            self.pos = start
            raise self.error(what)
        return self.text[start : self.pos], start

    def quoted(self, what: str) -> tuple[str, int]:
        """A JSON string literal at the current position: its text and where it starts."""
        self.skip()
        start = self.pos
        if self.peek() != '"':
            raise self.error(what)
        try:
            text, end = _JSON.raw_decode(self.text, start)
        except json.JSONDecodeError as exc:
            raise TypeExprError(
                f"unterminated or malformed string at position {start}: {exc.msg}", start
            ) from None
        self.pos = end
        return str(text), start

    def field_name(self) -> tuple[str, int]:
        if self.peek() != '"':
            return self.ident("a field name")
        name, start = self.quoted("a field name")
        if not name.isidentifier() or not name.isascii():
            raise TypeExprError(
                f"struct field name {name!r} at position {start} is not an identifier", start
            )
        return name, start

    def parse(self) -> TypeExpr:
        result = self.expr(0)
        if self.peek() != "":
            raise self.error("end of expression")
        return result

    def expr(self, depth: int) -> TypeExpr:
        if depth > MAX_DEPTH:
            raise TypeExprError(f"type expression nests deeper than {MAX_DEPTH} levels", self.pos)
        if self.peek() == "{":
            return self.struct(depth)
        if self.peek() == '"':
            return self.quoted_expr(depth)
        name, start = self.ident("a type name")
        if name == "list":
            self.expect("[")
            item = self.expr(depth + 1)
            self.expect("]")
            return ListOf(item)
        if name == "dict":
            self.expect("[")
            key, key_pos = self.ident("'str'")
            if key != "str":
                raise TypeExprError(
                    f"dict keys must be str, found {key!r} at position {key_pos}", key_pos
                )
            self.expect(",")
            value = self.expr(depth + 1)
            self.expect("]")
            return DictOf(value)
        if name not in CATALOG:
            raise _unknown(name, start)
        return Named(name)

    def quoted_expr(self, depth: int) -> TypeExpr:
        """`"list[Force]"`: a type expression as a JSON string, in JSON-text structs."""
        text, start = self.quoted("a type name")
        inner = _Parser(text)
        try:
            if not text.strip():
                raise TypeExprError("type expression is empty", 0)
            result = inner.expr(depth + 1)
            if inner.peek() != "":
                raise inner.error("end of expression")
        except TypeExprError as exc:
            raise TypeExprError(
                f"in the string at position {start}: {exc.message}", start
            ) from None
        return result

    def struct(self, depth: int) -> Struct:
        self.expect("{")
        fields: list[tuple[str, TypeExpr]] = []
        seen: set[str] = set()
        if self.peek() == "}":
            raise self.error("a field name (a struct needs at least one field)")
        while True:
            name, start = self.field_name()
            if name in seen:
                raise TypeExprError(f"duplicate struct field {name!r} at position {start}", start)
            seen.add(name)
            self.expect(":")
            fields.append((name, self.expr(depth + 1)))
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return Struct(tuple(fields))


def parse_type_expr(text: str) -> TypeExpr:
    """Parse a type expression string; raise TypeExprError with a position on any problem."""
    if not isinstance(text, str):
        raise TypeExprError(f"a type expression is a string, not {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise TypeExprError(f"type expression is longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise TypeExprError("type expression is empty", 0)
    return _Parser(text).parse()


def from_json(value: object, depth: int = 0) -> TypeExpr:
    """A type expression as JSON: a string, or an object mapping field names to expressions."""
    if depth > MAX_DEPTH:
        raise TypeExprError(f"type expression nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return parse_type_expr(value)
    if isinstance(value, Mapping):
        if not value:
            raise TypeExprError("an inline struct needs at least one field")
        fields: list[tuple[str, TypeExpr]] = []
        for key, sub in value.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise TypeExprError(f"struct field name {key!r} is not an identifier")
            try:
                fields.append((key, from_json(sub, depth + 1)))
            except TypeExprError as exc:
                raise TypeExprError(f"field {key!r}: {exc.message}") from None
        return Struct(tuple(fields))
    raise TypeExprError(
        f"a type expression is a string or an object of fields, not {type(value).__name__}"
    )
