"""JSON from a request, within the contract's bounds (section 2): nested at most 64 levels,
integers within 64 bits, finite numbers, strings without NUL or lone surrogates.

Every door parses request JSON through `loads`, so a hostile body costs a 422 and never a 500
(Python's decoder recurses, and PostgreSQL refuses NUL and surrogates that SQLite stores).
The checks stay cheap for ordinary bodies: the nesting walk and the string walk only run when a
count over the raw text says they could find something.
"""

from __future__ import annotations

import json
import re
from typing import Any

from calcgraph.domain.errors import FieldError, ValidationError

MAX_DEPTH = 64
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# A JSON escape that decodes to NUL or to a surrogate code point (paired ones are checked
# after decoding: a pair is one valid character then).
_SUSPICIOUS_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
Loc = tuple[str | int, ...]


def _refuse(loc: Loc, msg: str) -> ValidationError:
    where = ".".join(str(p) for p in loc[1:])
    return ValidationError(f"{msg}{f' at {where}' if where else ''}", [FieldError(loc, msg)])


def _parse_int(text: str) -> int:
    # Checked on the text first: int() of a 5,000-digit literal is already slow work.
    if len(text) > 20:
        raise _refuse(("body",), "an integer has more digits than 64 bits hold")
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise _refuse(("body",), f"the integer {value} is beyond 64 bits")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _refuse(("body",), f"the number {text[:40]} is out of the range of a double")
    return value


def _parse_constant(name: str) -> float:
    raise _refuse(("body",), f"{name} is not JSON; send a finite number")


def bad_text(value: str) -> str | None:
    """What is wrong with a string for storage (NUL, lone surrogate), or None."""
    if "\x00" in value:
        return "a string holds NUL (U+0000), which cannot be stored"
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "a string holds a lone surrogate, which is not Unicode text"
    return None


def check_value(value: Any, loc: Loc = ("body",), depth: int = 1) -> None:
    """Refuse a decoded value nested deeper than MAX_DEPTH or holding bad strings."""
    if depth > MAX_DEPTH:
        raise _refuse(loc, f"JSON is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        problem = bad_text(value)
        if problem is not None:
            raise _refuse(loc, problem)
    elif isinstance(value, dict):
        for key, item in value.items():
            problem = bad_text(key) if isinstance(key, str) else None
            if problem is not None:
                raise _refuse(loc, f"a key: {problem}")
            if isinstance(item, dict | list | str):
                check_value(item, (*loc, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list | str):
                check_value(item, (*loc, index), depth + 1)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `check_value` would find `value` nested deeper than `limit` (a container at
    depth `limit` holding a container or a string), level by level over the containers alone:
    no string or key is looked at (a 12,000-node workflow took `check_value` 142 ms of CPU on
    the event loop)."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    depth = 1
    while level:
        items = (v for c in level for v in (c.values() if isinstance(c, dict) else c))
        if depth >= limit:
            return any(isinstance(item, dict | list | str) for item in items)
        level = [item for item in items if isinstance(item, dict | list)]
        depth += 1
    return False


def loads(raw: str | bytes) -> Any:
    """Decode request JSON within the contract's bounds. Raises ValidationError for what the
    bounds refuse, and json.JSONDecodeError / UnicodeDecodeError for text that is not JSON."""
    # Strict UTF-8: Python's decoder would let encoded surrogates through ('surrogatepass').
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except RecursionError:
        raise _refuse(("body",), f"JSON is nested deeper than {MAX_DEPTH} levels") from None
    openers = text.count("[") + text.count("{")
    # Decoded bytes hold no surrogate; a str handed in (a WebSocket message) might.
    suspicious = _SUSPICIOUS_ESCAPE.search(text) is not None or (
        not isinstance(raw, bytes) and not text.isascii()
    )
    # Only a suspicious text can hold a bad string; a deep one is then walked again by
    # `check_value` to name where.
    if suspicious or (openers > MAX_DEPTH and _deeper_than(value, MAX_DEPTH)):
        check_value(value)
    return value
