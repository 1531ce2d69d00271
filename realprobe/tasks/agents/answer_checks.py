"""What the reference agent checks in an answer that came back `ok`, knowing the implicit
failure modes a tool has (ToolMaze's implicit faults: structurally fine, semantically not):

- an output the step needs is missing, null or blank (an emptied answer, or a schema drift
  that renamed or dropped the field);
- a text reads backwards: its words in reverse order make a sentence (the first word ends one,
  or the text starts in lower case and its last word is capitalised) and the text as given
  does not; or a link spelled backwards (`//:sptth`): a scrambled answer;
- a count disagrees with what it counts: a record's `length` is not the length of its text
  (a shifted number);
- a record lost its identifier: `id` is null (a drift that dropped it).

An answer that fails a check is treated as a failed call: asked again, then the step's
alternatives. Implicit faults that leave the content plausible (an earlier answer again, an
answer for other arguments, a shifted number) pass these checks; nothing in one answer tells
them apart from a true one."""

from __future__ import annotations

import re
from typing import Any

from realprobe.tasks.values import leaves

_END = re.compile(r"[.!?][\"')\]]*$")
_REVERSED_LINK = re.compile(r"//:s?ptth")


def _sentence(words: list[str]) -> bool:
    first = words[0].lstrip("\"'(")[:1]
    return (first.isupper() or first.isdigit()) and _END.search(words[-1]) is not None


def reads_backwards(text: str) -> bool:
    """A text of four words or more whose reversed word order reads as a sentence while the
    text itself does not (`"hard. working by work hard of value the learned I"`,
    `"office our is world The"`)."""
    words = text.split()
    if len(words) < 4 or _sentence(words):
        return False
    ends_first = _END.search(words[0]) is not None
    starts_low = words[0][:1].islower() and words[-1][:1].isupper() and not words[-1].isupper()
    reversed_reads = words[-1][:1].isupper() or words[-1][:1].isdigit()
    return reversed_reads and (ends_first or starts_low) and (
        _sentence(words[::-1]) or starts_low)


#: the text fields a record's `length` counts
_TEXTS = ("quote", "fact", "text", "content", "joke")


def _records(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value] + [r for v in value.values() for r in _records(v)]
    if isinstance(value, list):
        return [r for v in value for r in _records(v)]
    return []


def _inconsistent(record: dict[str, Any]) -> str | None:
    length = record.get("length")
    texts = [record[k] for k in _TEXTS if isinstance(record.get(k), str)]
    if isinstance(length, int) and not isinstance(length, bool) and len(texts) == 1 \
            and texts[0] and length != len(texts[0]):
        return f"length {length} for a text of {len(texts[0])} characters"
    if "id" in record and record["id"] is None and any(v is not None for v in record.values()):
        return "a record without its id"
    return None


def suspect(outputs: dict[str, Any], wanted: list[str], data: dict[str, Any] | None) -> str | None:
    """Why an `ok` answer looks wrong (None: it passes): `outputs` are the step's extracted
    outputs, `wanted` the names it needs, `data` the whole answer."""
    gone = [n for n in wanted if outputs.get(n) in (None, "", [], {})]
    if gone:
        return f"no {', '.join(gone)} in the answer"
    for leaf in leaves(data):
        if isinstance(leaf, str) and (reads_backwards(leaf) or _REVERSED_LINK.search(leaf)):
            return f"scrambled text in the answer: {leaf[:60]!r}"
    for record in _records(data):
        why = _inconsistent(record)
        if why is not None:
            return why
    return None


__all__ = ["reads_backwards", "suspect"]
