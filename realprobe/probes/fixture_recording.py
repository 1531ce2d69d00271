"""Record one real body per catalogue tool as a fixture, so an imported tool can be served by
the sandbox and the simulator from what the API really answered.

Calls go through the one client (live, a sandbox, or an upstream server standing in for the
APIs' hosts), one at a time, with the catalogue's interval between calls to the same host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from realprobe.adapters.adapter import classify_response
from realprobe.adapters.catalog import Catalog
from realprobe.adapters.http import Fetched, FetchFailure
from realprobe.adapters.spec import PLACEHOLDER_RE, ApiSpec
from realprobe.adapters.tool import Tool
from realprobe.clients import TransportOptions, make_sync_client
from realprobe.errors import ErrorCode, RealprobeError
from realprobe.hosts import HostGates, HostLimiter, Strictest, host_key
from realprobe.http.client import ClientConfig, is_private_host
from realprobe.retry_after import retry_after_of
from realprobe.secrets import (
    PLACEHOLDER,
    looks_like_json,
    remember,
    scrub_json_text,
    scrub_text,
)

RECORDED_SOURCE = "recorded by realprobe catalog record-fixtures"
KEPT_HEADERS = ("date", "cache-control", "etag", "last-modified", "retry-after", "age")
MAX_FIXTURE_BYTES = 2 * 1024 * 1024


@dataclass
class FixtureOutcome:
    tool: str
    api_id: str
    url: str  # the canonical URL called, secrets redacted
    status: int | None
    result: str  # one line: what happened
    fixture: dict[str, Any] | None = None
    no_fixture: str | None = None

    @property
    def stored(self) -> bool:
        return self.fixture is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "url": self.url,
            "status": self.status,
            "result": self.result,
            "stored": self.fixture["kind"] if self.fixture else None,
            "no_fixture": self.no_fixture,
        }

    def apply(self, raw_apis: list[dict[str, Any]]) -> None:
        """Write this outcome into the raw catalogue mappings (as read from the file)."""
        for api in raw_apis:
            for tool in api.get("tools") or []:
                if tool.get("name") != self.tool:
                    continue
                fixtures = list(tool.get("fixtures") or [])
                if self.fixture is not None:
                    kind = self.fixture["kind"]
                    fixtures = [
                        f
                        for f in fixtures
                        if not (
                            str(f.get("source", "")).startswith(RECORDED_SOURCE)
                            and f.get("kind", "ok") == kind
                        )
                    ]
                    fixtures.append(self.fixture)
                    tool["fixtures"] = fixtures
                has_ok = any(f.get("kind", "ok") == "ok" for f in fixtures)
                if has_ok:
                    tool.pop("no_fixture", None)
                elif self.no_fixture:
                    tool["no_fixture"] = self.no_fixture
                return


def without_secret_values(raw_apis: list[dict[str, Any]], apis: list[ApiSpec]) -> None:
    """The example and default values of inputs declared `secret` replaced by the
    placeholder in raw catalogue mappings about to be written to another file: a credential
    is never copied anywhere."""
    secret = {t.name: {n for n, f in t.input.items() if f.secret} for a in apis for t in a.tools}
    for api in raw_apis:
        for tool in api.get("tools") or []:
            names = secret.get(str(tool.get("name")), set())
            for example in tool.get("examples") or []:
                for name in names & set(example if isinstance(example, dict) else ()):
                    example[name] = PLACEHOLDER
            for name, field in (tool.get("input") or {}).items():
                if name in names and isinstance(field, dict) and "default" in field:
                    field["default"] = PLACEHOLDER


def _canonical(tool: Tool, base: str, path_url: str, params: dict[str, str]) -> str:
    secret_wire = {wire for wire, template in tool.spec.query.items()
                   if tool.secret_inputs & set(PLACEHOLDER_RE.findall(template))}
    shown = {k: (PLACEHOLDER if k in secret_wire else v) for k, v in params.items()}
    path = httpx.URL(path_url).path
    base_path = httpx.URL(base).path.rstrip("/")
    original = tool.api.base_url + path[len(base_path) :] if path.startswith(base_path) else path
    return original + (("?" + urlencode(shown)) if shown else "")


def _rebased(apis: list[ApiSpec], upstream: str) -> list[ApiSpec]:
    """The same APIs with their scheme and host replaced by the upstream server's."""
    up = urlsplit(upstream.rstrip("/"))
    out = []
    for api in apis:
        parts = urlsplit(api.base_url)
        base = f"{up.scheme}://{up.netloc}{up.path.rstrip('/')}{parts.path}"
        out.append(api.model_copy(update={"base_url": base.rstrip("/")}))
    return out


def record_fixtures(
    apis: list[ApiSpec],
    names: list[str] | None = None,
    *,
    sandbox: str | None = None,
    upstream: str | None = None,
    interval_s: float | None = None,
    timeout_s: float = 20.0,
    progress: Callable[[str], None] | None = None,
    on_plan: Callable[[list[tuple[str, str, float]], float], None] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    sleep: Callable[[float], None] = time.sleep,
    gates: HostGates | None = None,
) -> list[FixtureOutcome]:
    """Call each selected tool once with its first example and keep what came back. Calls
    wait for their host's turn at the one per-host gate (`gates`, shared with other work in
    this process if given): the catalogue's spacing (or `interval_s`), and the pause an API
    asks for with Retry-After (or a bare 429). `on_plan(calls, timeout_s)` first gets each
    call's tool, host and the host's interval, in order."""
    canonical = Catalog(apis)
    calling = Catalog(_rebased(apis, upstream)) if upstream else canonical
    selected = [canonical.get(n) for n in names] if names else list(canonical)
    config = ClientConfig(deadline_s=timeout_s, read_timeout_s=timeout_s)
    gates = gates or HostGates()
    outcomes: list[FixtureOutcome] = []
    if on_plan is not None:
        on_plan([(t.name, host_key(t.api), _limiter(gates, t.api, interval_s).policy.min_interval_s)
                 for t in (calling.get(o.name) for o in selected)], timeout_s)
    with make_sync_client(calling, TransportOptions(sandbox=sandbox), config=config) as client:
        for i, original in enumerate(selected, 1):
            tool = calling.get(original.name)
            limiter = _limiter(gates, tool.api, interval_s)
            wait = limiter.reserve(float("inf"))
            if wait > 0:
                sleep(wait)
            outcome, answer = _record_one(tool, original, client, timeout_s, sandbox, upstream,
                                          now)
            if answer is not None and answer.status >= 400:
                code = ErrorCode.RATE_LIMIT_ERROR if answer.status == 429 else None
                limiter.note(code, retry_after_of(answer.headers))
            outcomes.append(outcome)
            if progress:
                progress(f"[{i}/{len(selected)}] {outcome.tool}: {outcome.result}")
    return outcomes


def _limiter(gates: HostGates, api: ApiSpec, interval_s: float | None) -> HostLimiter:
    """The host's limiter; `interval_s` replaces the catalogue's spacing (no jitter)."""
    if interval_s is None:
        return gates.for_api(api)
    policy = Strictest(max_in_flight=1, min_interval_s=interval_s, jitter_s=0.0,
                       daily_budget=api.politeness.daily_budget)
    return gates.limiter(host_key(api), policy)


def _record_one(
    tool: Tool,
    original: Tool,
    client: Any,
    timeout_s: float,
    sandbox: str | None,
    upstream: str | None,
    now: Callable[[], datetime],
) -> tuple[FixtureOutcome, Fetched | None]:
    """Call the tool with its first example and keep what came back as a fixture: ok, an
    error body, or a soft failure; or say why nothing was stored. Also the answer itself
    (None when nothing came back), for the host's gate."""
    args = dict(tool.examples[0])
    try:
        valid = tool.validate_args(args)
        method, url, params = tool.build_request(valid)
    except (ValueError, RealprobeError) as exc:
        return FixtureOutcome(
            tool.name, tool.api_id, "", None, f"example arguments fail: {exc}"
        ), None
    remember(*tool.secret_values(valid))  # credentials: out of the body and the source
    shown = scrub_text(_canonical(original, tool.api.base_url, url, params))
    private = is_private_host(urlsplit(url).hostname or "")
    try:
        got: Fetched = client.fetch(
            method,
            url,
            params=params,
            headers=tool.request_headers(valid),
            timeout_s=timeout_s,
            allow_private=private,
        )
    except FetchFailure as exc:
        return FixtureOutcome(tool.name, tool.api_id, shown, None,
                              f"{exc.code.value}: {exc.message}; nothing stored"), None  # fmt: skip
    when = now().strftime("%Y-%m-%dT%H:%M:%SZ")
    out = FixtureOutcome(tool.name, tool.api_id, shown, got.status, "")
    text = _storable_text(got, out, f"{method} {shown}", when)
    if text is None:
        return out, got
    text = scrub_json_text(text) if looks_like_json(text) else scrub_text(text)
    via = f" via sandbox {sandbox}" if sandbox else f" via upstream {upstream}" if upstream else ""
    source = f"{RECORDED_SOURCE}: {method} {shown} -> {got.status}{via}"
    _keep_by_outcome(tool, got, _fixture_of(got, text, source, when), out)
    return out, got


def _storable_text(got: Fetched, out: FixtureOutcome, call: str, when: str) -> str | None:
    """The body as text when it can be a fixture; else None, with why in `out` (an empty
    body marks the tool as having no fixture)."""
    if not got.body:
        out.result = f"HTTP {got.status} with no body; marked"
        out.no_fixture = f"HTTP {got.status} with an empty body ({call}, {when})"
        return None
    if len(got.body) > MAX_FIXTURE_BYTES:
        out.result = f"body of {len(got.body)} bytes is over {MAX_FIXTURE_BYTES}; not stored"
        return None
    try:
        return got.body.decode("utf-8")
    except UnicodeDecodeError:
        out.result = "body is not UTF-8 text; not stored"
        return None


def _fixture_of(got: Fetched, text: str, source: str, when: str) -> dict[str, Any]:
    """An ok fixture: status, content type, the headers worth keeping, body and provenance."""
    fixture: dict[str, Any] = {
        "kind": "ok",
        "status": got.status,
        "content_type": httpx.Headers(got.headers).get("content-type")
        or "application/octet-stream",
    }
    kept = {k.title(): v for k, v in got.headers.items() if k.lower() in KEPT_HEADERS}
    if kept:
        fixture["headers"] = dict(sorted(kept.items()))
    fixture.update({"body": text, "source": source, "origin": "recorded", "recorded_at": when})
    return fixture


def _keep_by_outcome(
    tool: Tool, got: Fetched, fixture: dict[str, Any], out: FixtureOutcome
) -> None:
    """Store the fixture as the tool classifies the response: ok, an error body (4xx/5xx),
    or a soft failure its rules name; any other failure is not stored."""
    result = classify_response(tool, got)
    if result.ok:
        out.fixture = fixture
        out.result = f"HTTP {got.status}, {len(got.body)} bytes stored"
        return
    assert result.error is not None
    code = result.error.code
    rule_messages = {r.message for r in tool.spec.soft_failures}
    if got.status >= 400:
        out.fixture = {**fixture, "kind": "error", "code": code.value}
        out.result = f"HTTP {got.status} ({code.value}) stored as an error body"
    elif result.error.message in rule_messages:
        out.fixture = {**fixture, "kind": "soft_failure", "code": code.value}
        out.result = f"soft failure ({code.value}) stored"
    else:
        out.result = f"HTTP {got.status} but {result.error.message}; not stored"

