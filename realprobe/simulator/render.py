"""Turn an Outcome into a concrete response plan: status, headers, body, and socket behaviour.

The same plan drives the in-process simulate transport (which turns behaviours into httpx
exceptions on a virtual clock) and the loopback sandbox (which really hangs, drips, resets).
Variants of one code are chosen with the outcome's `pick`, so a seed fixes them too.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Literal

from realprobe.errors import ErrorCode
from realprobe.simulator.faults import Outcome
from realprobe.simulator.routes import Body, Route

Action = Literal["respond", "hang", "drip", "reset", "reset_mid_body", "truncated"]

#: every named fault variant and the code a correct client must classify it as
VARIANTS: dict[str, ErrorCode | None] = {
    "ok": None,
    "ok_html_ctype": None,
    "redirect_ok": None,
    "hang": ErrorCode.TIMEOUT,
    "drip": ErrorCode.TIMEOUT,
    "reset": ErrorCode.NETWORK_ERROR,
    "reset_mid_body": ErrorCode.NETWORK_ERROR,
    "truncated": ErrorCode.NETWORK_ERROR,
    "429": ErrorCode.RATE_LIMIT_ERROR,
    "429_date": ErrorCode.RATE_LIMIT_ERROR,
    "500": ErrorCode.SERVER_ERROR,
    "502": ErrorCode.SERVER_ERROR,
    "503": ErrorCode.SERVER_ERROR,
    "520": ErrorCode.SERVER_ERROR,
    "522": ErrorCode.SERVER_ERROR,
    "523": ErrorCode.SERVER_ERROR,
    "524": ErrorCode.SERVER_ERROR,
    "400": ErrorCode.INVALID_INPUT,
    "404": ErrorCode.NOT_FOUND,
    "410": ErrorCode.NOT_FOUND,
    "401": ErrorCode.AUTH_ERROR,
    "403": ErrorCode.AUTH_ERROR,
    "bad_json": ErrorCode.INVALID_RESPONSE,
    "html": ErrorCode.INVALID_RESPONSE,
    "invalid_utf8": ErrorCode.INVALID_RESPONSE,
    "gzip_bomb": ErrorCode.INVALID_RESPONSE,
    "oversized": ErrorCode.INVALID_RESPONSE,
    "redirect_private": ErrorCode.OPERATION_FAILED,
    "redirect_loopback": ErrorCode.OPERATION_FAILED,
    "418": ErrorCode.OPERATION_FAILED,
}

#: variants drawn at random for a code (gzip bombs and 6 MB bodies only when asked for)
_RANDOM: dict[ErrorCode, tuple[str, ...]] = {
    ErrorCode.TIMEOUT: ("hang", "hang", "drip"),
    ErrorCode.NETWORK_ERROR: ("reset", "reset_mid_body", "truncated"),
    ErrorCode.RATE_LIMIT_ERROR: ("429", "429_date"),
    ErrorCode.SERVER_ERROR: ("500", "502", "503", "520", "522", "523", "524"),
    ErrorCode.INVALID_INPUT: ("400",),
    ErrorCode.NOT_FOUND: ("404", "410"),
    ErrorCode.AUTH_ERROR: ("401", "403"),
    ErrorCode.INVALID_RESPONSE: ("bad_json", "html"),
    ErrorCode.OPERATION_FAILED: ("redirect_private", "redirect_loopback", "418"),
}

OVERSIZE_BYTES = 6 * 1024 * 1024
MOVED_PREFIX = "/_moved"


def is_variant(name: str) -> bool:
    """A named variant, or `fixture-<n>`: the n-th real fixture body of the tool."""
    return name in VARIANTS or (
        name.startswith("fixture-") and name.removeprefix("fixture-").isdigit()
    )


@dataclass(slots=True)
class Plan:
    variant: str
    code: ErrorCode | None
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    delay_s: float = 0.0
    action: Action = "respond"

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


def _json(status: int, obj: object, **extra: str) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = [("Content-Type", "application/json")] + [
        (k.replace("_", "-"), v) for k, v in extra.items()
    ]
    return status, headers, json.dumps(obj).encode()


def _cloudflare(status: int) -> tuple[int, list[tuple[str, str]], bytes]:
    names = {
        520: "Web server is returning an unknown error",
        522: "Connection timed out",
        523: "Origin is unreachable",
        524: "A timeout occurred",
    }
    body = (
        f"<!DOCTYPE html><html><head><title>{status}: {names.get(status, 'Error')}</title></head>"
        f"<body><h1>Error {status}</h1><p>{names.get(status, 'Error')}</p>"
        "<p>cloudflare</p></body></html>"
    ).encode()
    return status, [("Content-Type", "text/html; charset=UTF-8"), ("Server", "cloudflare")], body


def _ok_body(route: Route, pick: int) -> Body:
    oks = route.ok_bodies()
    return oks[pick % len(oks)]


def choose_variant(route: Route, outcome: Outcome) -> tuple[str, Body | None]:
    """The variant name (and the real fixture, when one is used) for an outcome."""
    if outcome.code is None:
        return "ok", _ok_body(route, outcome.pick)
    real = route.failure_bodies(outcome.code)
    options: list[str] = list(_RANDOM[outcome.code])
    if route.response == "text" and outcome.code is ErrorCode.INVALID_RESPONSE:
        options = ["invalid_utf8"]
    if real and (outcome.pick >> 8) % 2 == 0:
        return "fixture", real[(outcome.pick >> 9) % len(real)]
    return options[(outcome.pick >> 1) % len(options)], None


#: 424 (failed dependency): the client classifies it OPERATION_FAILED, not retryable, since
#: asking again cannot help
NO_FIXTURE_STATUS = 424


def no_fixture_plan(route: Route) -> Plan:
    """What a tool with no recorded body gets: a clear error, never an invented body."""
    body = json.dumps({
        "error": "no fixture",
        "tool": route.tool,
        "message": f"the realprobe sandbox has no recorded body for tool {route.tool!r}; "
        "record one with `realprobe catalog record-fixtures`",
    }).encode()  # fmt: skip
    return Plan("no_fixture", None, NO_FIXTURE_STATUS,
                [("Content-Type", "application/json")], body)  # fmt: skip


def render(
    route: Route,
    outcome: Outcome,
    *,
    path: str,
    now_wall: float,
    variant: str | None = None,
) -> Plan:
    """A plan for answering `path` (the original request path) under `outcome`.

    `variant` forces a named fault (see VARIANTS), for tests and for `/_fault/<name>/`.
    """
    if not route.ok_bodies() and not ((variant or "").startswith("fixture-") and route.bodies):
        return no_fixture_plan(route)
    fixture: Body | None = None
    if variant is None:
        variant, fixture = choose_variant(route, outcome)
    elif variant.startswith("fixture-"):
        fixture = route.bodies[int(variant.removeprefix("fixture-")) % len(route.bodies)]
    elif variant not in VARIANTS:
        raise KeyError(variant)
    delay = 0.0 if math.isinf(outcome.latency_s) else outcome.latency_s
    pick = outcome.pick

    if fixture is not None:
        headers = [("Content-Type", fixture.content_type), *fixture.headers]
        return Plan(
            f"fixture:{fixture.kind}",
            fixture.code if fixture.kind != "ok" else None,
            fixture.status,
            headers,
            fixture.body,
            delay,
        )

    code = VARIANTS[variant]
    ok = _ok_body(route, pick)
    ok_headers = [("Content-Type", ok.content_type), *ok.headers]
    plan = Plan(variant, code, 200, ok_headers, ok.body, delay)

    if variant == "ok":
        return plan
    if variant == "ok_html_ctype":
        plan.headers = [("Content-Type", "text/html; charset=UTF-8")]
        return plan
    if variant == "redirect_ok":
        plan.status, plan.body = 301, b""
        plan.headers = [("Location", MOVED_PREFIX + path)]
        return plan
    if variant == "hang":
        plan.action = "hang"
        return plan
    if variant in ("drip", "reset_mid_body", "truncated"):
        plan.action = variant  # type: ignore[assignment]
        return plan
    if variant == "reset":
        plan.action = "reset"
        return plan
    if variant == "429":
        wait = str(1 + pick % 5)
        plan.status, plan.headers, plan.body = _json(
            429, {"error": "Too Many Requests"}, Retry_After=wait
        )
        return plan
    if variant == "429_date":
        when = formatdate(now_wall + 2 + pick % 5, usegmt=True)
        plan.status, plan.headers, plan.body = _json(
            429,
            {"error": "Too Many Requests"},
            Retry_After=when,
            Date=formatdate(now_wall, usegmt=True),
        )
        return plan
    if variant in ("500", "502", "503"):
        status = int(variant)
        extra = {"Retry_After": "2"} if status == 503 else {}
        plan.status, plan.headers, plan.body = _json(
            status, {"error": f"HTTP {status}", "message": "upstream failure"}, **extra
        )
        return plan
    if variant in ("520", "522", "523", "524"):
        plan.status, plan.headers, plan.body = _cloudflare(int(variant))
        return plan
    if variant in ("400", "410", "401", "403", "418"):
        status = int(variant)
        plan.status, plan.headers, plan.body = _json(status, {"error": f"HTTP {status}"})
        return plan
    if variant == "404":
        plan.status = 404
        plan.headers = [("Content-Type", "text/plain; charset=utf-8")]
        plan.body = b"Not Found"
        return plan
    if variant == "bad_json":
        plan.body = ok.body[: max(1, len(ok.body) // 2)] if len(ok.body) > 1 else b"{"
        plan.headers = [("Content-Type", "application/json")]
        return plan
    if variant == "html":
        plan.headers = [("Content-Type", "text/html; charset=UTF-8")]
        plan.body = b"<!DOCTYPE html><html><body><h1>We'll be right back</h1></body></html>"
        return plan
    if variant == "invalid_utf8":
        plan.headers = [("Content-Type", "text/plain")]
        plan.body = b"\xff\xfe\xfa not text"
        return plan
    if variant == "gzip_bomb":
        plan.headers = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
        plan.body = gzip.compress(b"[" + b" " * OVERSIZE_BYTES + b"]", compresslevel=9)
        return plan
    if variant == "oversized":
        plan.headers = [("Content-Type", "application/json")]
        plan.body = b'["' + b"x" * OVERSIZE_BYTES + b'"]'
        return plan
    if variant in ("redirect_private", "redirect_loopback"):
        host = "10.255.255.1" if variant == "redirect_private" else "127.0.0.1:9"
        plan.status, plan.body = 301, b""
        plan.headers = [("Location", f"http://{host}{path}")]
        return plan
    raise KeyError(variant)
