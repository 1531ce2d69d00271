"""The public-apis list (github.com/public-apis/public-apis) as candidates for the catalogue.

The list is Markdown: one `### Category` heading per category, each followed by a table
`API | Description | Auth | HTTPS | CORS`. A copy ships in `data/public-apis.md`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from importlib import resources
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from realprobe.adapters.spec import ApiSpec

SHIPPED_SOURCE = (
    "public-apis/public-apis README at commit c045a2eb505f0f8b7992bb4af53cc020f25003fd (MIT)"
)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_LINK = re.compile(r"^\[(?P<name>.+?)\]\((?P<link>[^)\s]*)\s*\)")

Status = Literal["covered", "no key", "needs key", "needs OAuth", "other auth"]


class Candidate(BaseModel):
    name: str
    category: str
    description: str
    auth: str  # "No", "apiKey", "OAuth", or what the list says (e.g. "X-Mashape-Key")
    https: bool
    cors: str  # Yes | No | Unknown (as written)
    link: str
    covered_by: str | None = None  # catalogue API id when the catalogue already has it

    @property
    def needs_key(self) -> bool:
        return self.auth.lower() != "no"

    @property
    def status(self) -> Status:
        if self.covered_by:
            return "covered"
        auth = self.auth.lower()
        if auth == "no":
            return "no key"
        if auth == "apikey":
            return "needs key"
        if auth == "oauth":
            return "needs OAuth"
        return "other auth"

    @property
    def next_step(self) -> str:
        return {
            "covered": f"in the catalogue (api {self.covered_by}): probe it",
            "no key": "profilable without a key: import its OpenAPI document "
            "(catalog import-openapi) or write a catalogue entry",
            "needs key": "needs an API key: import its OpenAPI document with --include-auth",
            "needs OAuth": "needs OAuth: import its OpenAPI document with --include-auth "
            "and supply a token",
            "other auth": f"needs {self.auth}: write a catalogue entry with that header",
        }[self.status]


def shipped_text() -> str:
    return (resources.files("realprobe.adapters") / "data" / "public-apis.md").read_text(
        encoding="utf-8"
    )


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(body)]


def parse(text: str) -> list[Candidate]:
    """Every row of every category table, in the list's order."""
    out: list[Candidate] = []
    category: str | None = None
    columns: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
            category = heading.group(2) if heading and len(heading.group(1)) == 3 else None
            columns = None
            continue
        if category is None or "|" not in line:
            continue
        cells = _cells(line)
        if columns is None:
            names = [c.lower() for c in cells]
            if "auth" in names and "https" in names and "description" in names:
                columns = names
            continue
        if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
            continue  # the separator row
        row = dict(zip(columns, cells, strict=False))
        m = _LINK.match(row.get("api", ""))
        if not m:
            continue
        out.append(
            Candidate(
                name=m.group("name").strip(),
                category=category,
                description=row.get("description", ""),
                auth=row.get("auth", "").strip("` ") or "No",
                https=row.get("https", "").strip().lower() == "yes",
                cors=(row.get("cors", "").strip() or "Unknown").capitalize(),
                link=m.group("link"),
            )
        )
    return out


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _host(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def mark_covered(candidates: Iterable[Candidate], apis: Iterable[ApiSpec]) -> list[Candidate]:
    """Set `covered_by` where a catalogue API has the same name or the same docs/API host."""
    by_name: dict[str, str] = {}
    by_host: dict[str, str] = {}
    for api in apis:
        by_name.setdefault(_norm(api.name), api.id)
        for url in (api.docs_url, api.base_url):
            host = _host(url)
            if host and host not in ("github.com", "gitlab.com"):
                by_host.setdefault(host, api.id)
    items = list(candidates)
    hits = [by_host.get(_host(c.link)) for c in items]
    found_by_host = {h for h in hits if h}
    out = []
    for c, hit in zip(items, hits, strict=True):
        if hit is None:
            # a same-named entry counts only when no entry reached that API by its host
            # (two different "Cat Facts" APIs share a name)
            by = by_name.get(_norm(c.name))
            hit = by if by not in found_by_host else None
        out.append(c.model_copy(update={"covered_by": hit}))
    return out


def summary(candidates: list[Candidate]) -> dict[str, object]:
    """Counts per status, category and auth value."""
    return {
        "candidates": len(candidates),
        "by_status": dict(Counter(c.status for c in candidates).most_common()),
        "by_auth": dict(Counter(c.auth for c in candidates).most_common()),
        "by_category": dict(Counter(c.category for c in candidates).most_common()),
    }
