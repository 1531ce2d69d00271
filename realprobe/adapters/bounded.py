"""Bounded parsing of response bodies: whatever a server sends, parsing ends in data or in a
BadResponse (INVALID_RESPONSE) with a clear message, never in a crash or a runaway.

`json.loads` alone recurses once per nesting level (200,000 `[` raise RecursionError), turns
`1e999` into infinity, accepts `NaN`/`Infinity`, and keeps strings of any length. Here the
depth is measured before parsing (on the body with its strings blanked out, so brackets
inside strings do not count), every number token and string is checked against a limit,
and a text tool refuses a body that is a JSON array or object where one line was promised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from realprobe.errors import BadResponse, ErrorCode


@dataclass(frozen=True, slots=True)
class ParseLimits:
    #: arrays/objects inside each other; real APIs stay under 20
    max_depth: int = 64
    #: characters in one JSON number token (a 64-bit integer has at most 20)
    max_number_chars: int = 40
    #: characters in one JSON string (key or value), and in a text tool's whole body
    max_string_chars: int = 100_000


DEFAULT_LIMITS = ParseLimits()

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _bad(message: str) -> BadResponse:
    return BadResponse(ErrorCode.INVALID_RESPONSE, message)


def nesting_depth(body: bytes) -> int:
    """The deepest nesting of arrays/objects in a JSON text, counted without recursion."""
    brackets = _STRING.sub(b'""', body).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(0, max(accumulate(_STEP[b] for b in brackets)))


def _number(limits: ParseLimits, convert: type[int] | type[float]) -> Any:
    def parse(token: str) -> int | float:
        if len(token) > limits.max_number_chars:
            raise _bad(
                f"body holds a number of {len(token)} characters (limit {limits.max_number_chars})"
            )
        value = convert(token)
        if isinstance(value, float) and (value != value or value in (float("inf"), -float("inf"))):
            raise _bad(f"body holds the number {token[:20]} which is out of range")
        return value

    return parse


def _constant(token: str) -> Any:
    raise _bad(f"body holds {token}, which is not a JSON number")


def _check_strings(value: Any, limits: ParseLimits) -> None:
    """Walk the parsed value (iteratively) for strings over the limit."""
    stack = [value]
    cap = limits.max_string_chars
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > cap:
                raise _bad(f"body holds a string of {len(item)} characters (limit {cap})")
        elif isinstance(item, dict):
            for key, sub in item.items():
                if len(key) > cap:
                    raise _bad(f"body holds a key of {len(key)} characters (limit {cap})")
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)


def load_json(body: bytes, limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """Parse a JSON body under `limits`; BadResponse(INVALID_RESPONSE) for anything else."""
    depth = nesting_depth(body)
    if depth > limits.max_depth:
        raise _bad(f"body is nested {depth} levels deep (limit {limits.max_depth})")
    try:
        value = json.loads(
            body,
            parse_int=_number(limits, int),
            parse_float=_number(limits, float),
            parse_constant=_constant,
        )
    except BadResponse:
        raise
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        snippet = body[:60].decode("utf-8", "replace")
        raise _bad(f"body is not valid JSON ({exc}): {snippet!r}") from exc
    _check_strings(value, limits)
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
