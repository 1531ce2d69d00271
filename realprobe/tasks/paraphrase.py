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
    "briefing": "summary",
    "forecast": "outlook",
    "given": "specified",
    "fetch": "retrieve",
    "get": "obtain",
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
    """The comma-separated items after a sentence's first clause, in another order (a
    clause after `; ` stays where it is)."""
    body = sentence.rstrip()
    end = body[-1] if body and body[-1] in ".!?" else ""
    body = body[: len(body) - len(end)]
    if "; " in body:
        body, rest = body.split("; ", 1)
        end = "; " + rest + end
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
    rng = random.Random(f"paraphrase:{level}:{text}")
    if level == 1:
        return swap_synonyms(text, rng, share=0.5)
    sentences = [reorder_clauses(s, rng) for s in _sentences(text)]
    sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(DISTRACTORS))
    return swap_synonyms(" ".join(sentences), rng, share=1.0)


def paraphrased(task: Task, level: int) -> Task:
    """The task with its description at `level`; everything scoring reads is unchanged.
    A task that says which words name its steps (`metadata.mentions`) is checked: every
    step must still be named, else the paraphrase lost meaning and is refused."""
    text = paraphrase_text(task.description, level)  # checks the level
    if level == 0:
        return task
    lost = missing_items(task, text)
    if lost:
        raise RealprobeError(
            f"task {task.instance_id!r}: the level-{level} paraphrase no longer names "
            f"{', '.join(lost)}: {text!r}", param="paraphrase",
        )  # fmt: skip
    return task.model_copy(update={"description": text})


def _mention(phrase: str) -> re.Pattern[str]:
    """A phrase naming a step, each word as written or as its listed synonym."""
    words = []
    for w in phrase.split():
        alts = {re.escape(w), re.escape(SYNONYMS.get(w.lower(), w))}
        if w.lower() in ("a", "an"):
            alts = {"an?"}
        words.append("(?:" + "|".join(sorted(alts)) + ")")
    return re.compile(r"\b" + r"\s+".join(words) + r"\b", re.I)


def named_steps(task: Task, text: str) -> dict[str, int]:
    """API step id -> where the text first names it (the task's `metadata.mentions`)."""
    at: dict[str, int] = {}
    for step, phrases in (task.metadata.get("mentions") or {}).items():
        hits = [m.start() for p in phrases for m in [_mention(p).search(text)] if m]
        if hits:
            at[step] = min(hits)
    return at


def missing_items(task: Task, text: str) -> list[str]:
    """The steps the task's mentions name that the text no longer names."""
    at = named_steps(task, text)
    return [s for s in (task.metadata.get("mentions") or {}) if s not in at]


def text_order(task: Task, text: str) -> list[str]:
    """The step ids in the order the text names them, as an agent that reads the text
    would do them: a step waits for the steps whose outputs it reads; the output step last."""
    steps = task.workflow.steps
    at = named_steps(task, text)
    todo = sorted(steps[:-1], key=lambda s: at.get(s.id, len(text)))
    order: list[str] = []
    while todo:
        ready = next((s for s in todo if all(r in order for r, _ in s.refs())), todo[0])
        order.append(ready.id)
        todo.remove(ready)
    return [*order, steps[-1].id]


__all__ = [
    "LEVELS", "missing_items", "named_steps", "paraphrase_text", "paraphrased", "swap_synonyms",
    "text_order",
]
