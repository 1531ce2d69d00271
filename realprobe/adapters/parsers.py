"""Named parsers, for the few APIs whose bodies need code before the declarative fields apply.

A catalogue entry names one with `parser = "..."`. Each takes the decoded body and returns
the structure the entry's `output` paths read from.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from realprobe.errors import RealprobeError

Parser = Callable[[Any], Any]
_PARSERS: dict[str, Parser] = {}


def register(name: str) -> Callable[[Parser], Parser]:
    def deco(fn: Parser) -> Parser:
        _PARSERS[name] = fn
        return fn

    return deco


def get(name: str) -> Parser:
    try:
        return _PARSERS[name]
    except KeyError:
        raise RealprobeError(
            f"unknown parser {name!r}; known: {', '.join(sorted(_PARSERS))}"
        ) from None


def names() -> list[str]:
    return sorted(_PARSERS)


def _unescape(value: Any) -> Any:
    if isinstance(value, str):
        return html.unescape(value)
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    if isinstance(value, dict):
        return {k: _unescape(v) for k, v in value.items()}
    return value


@register("html_unescape")
def html_unescape(body: Any) -> Any:
    """OpenTDB (default encoding) HTML-escapes its strings: `&quot;`, `&#039;`."""
    return _unescape(body)


@register("single_object_as_list")
def single_object_as_list(body: Any) -> Any:
    """A list endpoint whose recorded body is one bare object (Nager.Date via a proxy): wrap it."""
    return [body] if isinstance(body, dict) else body


@register("programming_quotes")
def programming_quotes(body: Any) -> Any:
    """Programming Quotes: herokuapp-era items hold the text in `en`, later ones in `text`."""
    if isinstance(body, list):
        return [{"text": q.get("en"), **q} if isinstance(q, dict) else q for q in body]
    return body
