"""Paraphrase levels of a task's text (ReliabilityBench's ε axis): the same task reworded,
its clauses reordered, a distractor sentence added, with its success criteria unchanged.

- level 0: the task as written;
- level 1: about half the words found in the shipped synonym list are swapped;
- level 2: every such word is swapped, the listed items of each sentence are reordered, and
  one unrelated distractor sentence is added.

Deterministic: every choice draws from `random.Random` seeded with the level and the text
itself, so a task's paraphrase is the same on every machine and every run. Only the
description changes; the workflow, the expected outputs and the grounding check (what
scoring reads) stay as they are.
"""

from __future__ import annotations

import random
import re

from realprobe.errors import RealprobeError
from realprobe.tasks.model import Task

LEVELS = (0, 1, 2)

#: the shipped synonym list: word -> replacement (one pass, so a chain never forms)
SYNONYMS: dict[str, str] = {
    "draft": "write up",
    "write": "compose",
    "compose": "write",
    "combines": "brings together",
    "random": "arbitrary",
    "programming": "coding",
    "quote": "quotation",
    "take": "make",
    "snapshot": "overview",
    "capital": "capital city",
    "prepare": "put together",
    "developer": "engineer",
    "note": "memo",
    "read": "look at",
    "list": "enumerate",
    "add": "include",
    "plan": "organise",
    "find": "determine",
    "next": "upcoming",
    "idea": "suggestion",
    "predicted": "estimated",
    "likely": "probable",
    "save": "store",
    "short": "brief",
    "blurb": "snippet",
    "picture": "photo",
    "link": "URL",
    "fun": "amusing",
    "character": "figure",
    "briefing": "summary",
    "forecast": "outlook",
    "given": "specified",
    "fetch": "retrieve",
    "get": "obtain",
    "look": "check",
    "suggest": "propose",
    "fact": "tidbit",
    "sheet": "handout",
}

#: sentences that have nothing to do with any task (no numbers, names or quotes to copy)
DISTRACTORS: tuple[str, ...] = (
    "The office coffee machine was repaired this morning.",
    "Someone left an umbrella in the meeting room again.",
    "The weekly team lunch has moved to the usual place around the corner.",
    "Please ignore the fire-alarm test scheduled for later this week.",
    "The printer on the second floor is out of paper.",
)

_WORD = re.compile(r"\b(" + "|".join(sorted(SYNONYMS, key=len, reverse=True)) + r")\b", re.I)


def _rng(level: int, text: str) -> random.Random:
    return random.Random(f"paraphrase:{level}:{text}")


def swap_synonyms(text: str, rng: random.Random, share: float = 1.0) -> str:
    """Swap a `share` of the listed words (at least one when any is found), keeping case."""
    hits = list(_WORD.finditer(text))
    if not hits:
        return text
    n = max(1, round(share * len(hits)))
    chosen = {m.start() for m in rng.sample(hits, n)}

    def sub(m: re.Match[str]) -> str:
        if m.start() not in chosen:
            return m.group(0)
        new = SYNONYMS[m.group(0).lower()]
        return new[:1].upper() + new[1:] if m.group(0)[0].isupper() else new

    return _articles(_WORD.sub(sub, text))


def _articles(text: str) -> str:
    """`a` / `an` agreeing with the word after a swap (`an arbitrary`, `a suggestion`)."""
    text = re.sub(r"\b([Aa]) (?=[aeioAEIO])", r"\1n ", text)
    return re.sub(r"\b([Aa])n (?=[b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z])", r"\1 ", text)


def reorder_clauses(sentence: str, rng: random.Random) -> str:
    """The comma-separated items after a sentence's first clause, in another order."""
    body = sentence.rstrip()
    end = body[-1] if body and body[-1] in ".!?" else ""
    body = body[: len(body) - len(end)]
    parts = [p.strip() for p in body.split(", ")]
    head, items = parts[0], [re.sub(r"^and ", "", p) for p in parts[1:]]
    if len(items) < 2:
        return sentence
    order = items[:]
    rng.shuffle(order)
    if order == items:
        order = items[1:] + items[:1]
    return f"{head}, {', '.join(order[:-1])} and {order[-1]}{end}"


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def paraphrase_text(text: str, level: int) -> str:
    """The text at paraphrase `level` (0, 1 or 2)."""
    if level not in LEVELS:
        raise RealprobeError(f"paraphrase {level!r}: choose 0, 1 or 2", param="paraphrase")
    if level == 0:
        return text
    rng = _rng(level, text)
    if level == 1:
        return swap_synonyms(text, rng, share=0.5)
    sentences = [reorder_clauses(s, rng) for s in _sentences(text)]
    sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(DISTRACTORS))
    return swap_synonyms(" ".join(sentences), rng, share=1.0)


def paraphrased(task: Task, level: int) -> Task:
    """The task with its description at `level`; everything scoring reads is unchanged."""
    if level == 0:
        paraphrase_text(task.description, level)  # checks the level
        return task
    return task.model_copy(update={"description": paraphrase_text(task.description, level)})


__all__ = ["LEVELS", "paraphrase_text", "paraphrased", "swap_synonyms"]
