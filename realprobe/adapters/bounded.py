"""Bounded parsing of response bodies: whatever a server sends, parsing ends in data or in a
BadResponse (INVALID_RESPONSE) with a clear message, never in a crash or a runaway.

`json.loads` alone recurses once per nesting level (200,000 `[` raise RecursionError), turns
`1e999` into infinity, accepts `NaN`/`Infinity`, and keeps strings and integers of any size.
Here the RecursionError is caught, the depth is counted over the text, the parsed value is
walked once (without recursion) for string length and number size where a scan of the text
cannot rule them out, and a text tool refuses a body that is a JSON array or object where one
line of text was promised.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from realprobe.errors import BadResponse, ErrorCode
from realprobe.limits import text_depth
from realprobe.secrets import clip


@dataclass(frozen=True, slots=True)
class ParseLimits:
    #: arrays/objects inside each other; real APIs stay under 20
    max_depth: int = 64
    #: characters in one JSON number token (a 64-bit integer has at most 20)
    max_number_chars: int = 40
    #: characters in one JSON string (key or value), and in a text tool's whole body
    max_string_chars: int = 100_000


DEFAULT_LIMITS = ParseLimits()

_HUGE_INT = re.compile(r"integer string conversion: value has (\d+) digits")
_QUOTES_ONLY = bytes(ord('"') if b == ord('"') else ord("x") for b in range(256))
#: a body's shape in one pass: digits as `0`, an exponent's `e`/`E`/`+` as `e`, an opening
#: bracket as `[`, the rest blank
_SHAPE = bytes(
    ord("0") if 48 <= b <= 57 else ord("e") if b in b"eE+" else ord("[") if b in b"[{"
    else ord(" ") for b in range(256)
)


def _bad(message: str) -> BadResponse:
    return BadResponse(ErrorCode.INVALID_RESPONSE, message)


def _constant(token: str) -> Any:
    raise _bad(f"body holds {token}, which is not a JSON number")


def _check_scalars(value: Any, limits: ParseLimits) -> None:
    """Every string, key and number of the parsed value, walked without recursion."""
    cap = limits.max_string_chars
    int_cap = 10**limits.max_number_chars
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind is str and len(item) > cap:
            raise _bad(f"body holds a string of {len(item)} characters (limit {cap})")
        elif kind is int and not -int_cap < item < int_cap:
            raise _bad(
                f"body holds a number of {len(str(abs(item)))} digits "
                f"(limit {limits.max_number_chars})"
            )
        elif kind is float and not math.isfinite(item):
            raise _bad(f"body holds the number {item} which is out of range")


def _check_value(body: bytes, value: Any, limits: ParseLimits) -> None:
    """Depth, string lengths and number sizes of a parsed body. Cheap C-level scans of the
    text rule most bodies out; only a body that might break a limit is walked for it."""
    suspect = False
    if len(body) > limits.max_string_chars:
        # a string over the cap has more than `cap` source bytes without a bare quote
        quotes = body.replace(b'\\"', b"xx").translate(_QUOTES_ONLY)
        suspect = b"x" * (limits.max_string_chars + 1) in quotes
    shape = body.translate(_SHAPE)
    # a long digit run, or an exponent of 3 digits (`1e999` and `1E+999` parse to infinity)
    if suspect or b"0" * (limits.max_number_chars + 1) in shape or b"e000" in shape:
        _check_scalars(value, limits)
    if shape.count(b"[") > limits.max_depth and text_depth(body) > limits.max_depth:
        raise _bad(f"body is nested more than {limits.max_depth} levels deep "
                   f"(limit {limits.max_depth})")


_DECODER = json.JSONDecoder(parse_constant=_constant)


def load_json(body: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Parse a JSON body under `limits`; BadResponse(INVALID_RESPONSE) for anything else.

    The C parser stops at the interpreter's recursion limit (about 1,000 levels) with a
    RecursionError, caught here; shallower bodies are measured after parsing."""
    try:
        # what `json.loads(body, parse_constant=_constant)` does, with one decoder for all
        if isinstance(body, str):
            text = body
        else:  # an object or array whose second byte is no 0 is UTF-8 (json.detect_encoding)
            plain = body[:1] in b"{[" and body[1:2] != b"\x00"
            text = body.decode("utf-8" if plain else json.detect_encoding(body), "surrogatepass")
        if text.startswith("\ufeff"):
            raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        value = _DECODER.decode(text)
    except BadResponse:
        raise
    except RecursionError as exc:
        depth = text_depth(body)
        raise _bad(f"body is nested {depth} levels deep (limit {limits.max_depth})") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        huge = _HUGE_INT.search(str(exc))
        if huge:  # Python's own guard against quadratic int parsing fired first
            raise _bad(
                f"body holds a number of {huge.group(1)} characters "
                f"(limit {limits.max_number_chars})"
            ) from exc
        snippet = clip(bytes(body), 60)
        raise _bad(f"body is not valid JSON ({exc}): {snippet!r}") from exc
    _check_value(body if isinstance(body, bytes) else bytes(body), value, limits)
    return value


def load_text(body: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> str:
    """A text tool's body: UTF-8, within the string limit, and not a JSON array/object."""
    try:
        text = body.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise _bad(f"body is not UTF-8: {exc}") from exc
    if len(text) > limits.max_string_chars:
        raise _bad(
            f"text body of {len(text)} characters is over the limit ({limits.max_string_chars})"
        )
    if text[:1] in ("[", "{") and (text[-1] in ("]", "}") or text[1:2] in ("[", "{", '"')):
        kind = "array" if text[0] == "[" else "object"
        raise _bad(f"expected plain text, got what looks like a JSON {kind}: {text[:40]!r}")
    return text
