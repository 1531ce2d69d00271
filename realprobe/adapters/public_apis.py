"""The public-apis list (github.com/public-apis/public-apis) as candidates for the catalogue.

The list is Markdown: one `### Category` heading per category, each followed by a table
`API | Description | Auth | HTTPS | CORS`. A copy ships in `data/public-apis.md`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel

from realprobe.adapters.spec import ApiSpec
from realprobe.errors import RealprobeError

SHIPPED_SOURCE = (
    "public-apis/public-apis README at commit c045a2eb505f0f8b7992bb4af53cc020f25003fd (MIT)"
)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_LINK = re.compile(r"^\[(?P<name>.+?)\]\((?P<link>[^)\s]*)\s*\)")

Status = Literal["covered", "no key", "needs key", "needs OAuth", "other auth"]
#: the status of an uncovered API by its `Auth` column (any case); anything else: other auth
_BY_AUTH: dict[str, Status] = {"no": "no key", "apikey": "needs key", "oauth": "needs OAuth"}


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
        return _BY_AUTH.get(self.auth.lower(), "other auth")

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


@dataclass(frozen=True)
class CandidateFilter:
    """Which candidates to keep (all of them by default)."""

    no_auth: bool = False  # only APIs that need no key
    https: bool = False  # only APIs served over HTTPS
    cors: bool = False  # only APIs with CORS: Yes
    category: str | None = None  # only this category (any case)
    uncovered: bool = False  # only APIs the catalogue does not cover yet


@dataclass(frozen=True)
class CandidateList:
    source: str  # where the list came from
    candidates: list[Candidate]
    summary: dict[str, object]


def read_candidates(
    file: Path | None = None,
    *,
    catalog_paths: list[Path] | None = None,
    keep: CandidateFilter | None = None,
) -> CandidateList:
    """The public-apis list (the shipped copy, or FILE), marked against the catalogue (the
    built-in one plus `catalog_paths`) and filtered."""
    from realprobe.adapters.catalog import Catalog

    text, source = _list_text(file)
    found = parse(text)
    if not found:
        raise RealprobeError(f"{source}: no API tables found (is it the public-apis README?)")
    found = mark_covered(found, Catalog.load(catalog_paths or []).apis.values())
    found = filter_candidates(found, keep or CandidateFilter())
    return CandidateList(source, found, summary(found))


def _list_text(file: Path | None) -> tuple[str, str]:
    if file is None:
        return shipped_text(), SHIPPED_SOURCE
    from realprobe.limits import read_text_input

    return read_text_input(file, "public-apis list"), str(file)


def filter_candidates(found: list[Candidate], keep: CandidateFilter) -> list[Candidate]:
    """The candidates `keep` selects; an unknown category is an error that lists them."""
    if keep.category is not None:
        categories = sorted({c.category for c in found})
        match = [c for c in categories if c.lower() == keep.category.lower()]
        if not match:
            raise RealprobeError(
                f"category {keep.category!r}: not in the list; categories: "
                f"{', '.join(categories)}",
                param="category",
            )
        found = [c for c in found if c.category == match[0]]
    if keep.no_auth:
        found = [c for c in found if not c.needs_key]
    if keep.https:
        found = [c for c in found if c.https]
    if keep.cors:
        found = [c for c in found if c.cors == "Yes"]
    if keep.uncovered:
        found = [c for c in found if not c.covered_by]
    return found

