"""What the reference agent checks in an answer that came back `ok`, knowing the implicit
failure modes a tool has (ToolMaze's implicit faults: structurally fine, semantically not):

- an output the step needs is missing, null or blank (an emptied answer, or a schema drift
  that renamed or dropped the field);
- a text reads backwards: its words in reverse order make a sentence (the first word ends one,
  the last word starts one) and the text as given does not; or a link spelled backwards
  (`//:sptth`): a scrambled answer.

An answer that fails a check is treated as a failed call: asked again, then the step's
alternatives. Implicit faults that leave the content plausible (an earlier answer again, an
answer for other arguments, a shifted number) pass these checks; nothing in one answer tells
them apart from a true one."""

from __future__ import annotations

import re
from typing import Any

_END = re.compile(r"[.!?][\"')\]]*$")
_REVERSED_LINK = re.compile(r"//:s?ptth")


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value] if isinstance(value, str) else []


def _sentence(words: list[str]) -> bool:
    first = words[0].lstrip("\"'(")[:1]
    return (first.isupper() or first.isdigit()) and _END.search(words[-1]) is not None


def reads_backwards(text: str) -> bool:
    """A text of four words or more whose reversed word order reads as a sentence while the
    text itself does not (`"hard. working by work hard of value the learned I"`)."""
    words = text.split()
    if len(words) < 4:
        return False
    return _sentence(words[::-1]) and not _sentence(words) and _END.search(words[0]) is not None


def suspect(outputs: dict[str, Any], wanted: list[str], data: dict[str, Any] | None) -> str | None:
    """Why an `ok` answer looks wrong (None: it passes): `outputs` are the step's extracted
    outputs, `wanted` the names it needs, `data` the whole answer."""
    gone = [n for n in wanted if outputs.get(n) in (None, "", [], {})]
    if gone:
        return f"no {', '.join(gone)} in the answer"
    for leaf in _leaves(data):
        if reads_backwards(leaf) or _REVERSED_LINK.search(leaf):
            return f"scrambled text in the answer: {leaf[:60]!r}"
    return None


__all__ = ["reads_backwards", "suspect"]
