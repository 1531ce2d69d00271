"""Turn an Outcome into a concrete response plan: status, headers, body, and socket behaviour.

The same plan drives the in-process simulate transport (which turns behaviours into httpx
exceptions on a virtual clock) and the loopback sandbox (which really hangs, drips, resets).
Variants of one code are chosen with the outcome's `pick`, so a seed fixes them too.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Literal, cast

from realprobe.errors import ErrorCode
from realprobe.serving import ERROR_HEADER
from realprobe.simulator import implicit
from realprobe.simulator.faults import Outcome
from realprobe.simulator.profile import IMPLICIT_VARIANTS
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
    # implicit: HTTP 200 and a body the client accepts, with wrong content
    **dict.fromkeys(IMPLICIT_VARIANTS),
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


#: the path prefix that forces a sandbox fault (`http://127.0.0.1:8765/_fault/timeout/`)
FAULT_PREFIX = "/_fault/"


def known_variants() -> str:
    """The fault variants a sandbox URL may force, for error messages."""
    return ", ".join([*VARIANTS, "fixture-<n>"])


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
    #: what an implicit variant did to the body (the truth, for the journal and the ledger)
    note: str = ""

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


#: variants whose answer is built from the success body (a proxy must fetch it first, and
#: a fixture chosen by the request's arguments shapes it)
BODY_VARIANTS = frozenset(
    {"ok", "ok_html_ctype", "drip", "truncated", "reset_mid_body", "bad_json",
     *IMPLICIT_VARIANTS}
)


def _ok_body(route: Route, pick: int) -> Body:
    oks = route.ok_bodies()
    return oks[pick % len(oks)]


def choose_variant(
    route: Route, outcome: Outcome, ok: Body | None = None
) -> tuple[str, Body | None]:
    """The variant name (and the real fixture, when one is used) for an outcome; `ok` is the
    success body chosen by the caller (a recording, an argument match), if any."""
    if outcome.variant is not None:
        return outcome.variant, None  # chosen by a fault plan or an implicit fault
    if outcome.code is None:
        return "ok", ok if ok is not None else _ok_body(route, outcome.pick)
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
                [("Content-Type", "application/json"), (ERROR_HEADER, "no-fixture")],
                body)  # fmt: skip


def render(
    route: Route,
    outcome: Outcome,
    *,
    path: str,
    now_wall: float,
    variant: str | None = None,
    ok: Body | None = None,
    earlier: bytes | None = None,
) -> Plan:
    """A plan for answering `path` (the original request path) under `outcome`.

    `variant` forces a named fault (see VARIANTS), for tests and for `/_fault/<name>/`.
    `ok` is the success body to serve and to build body faults from (truncation, drip, bad
    JSON, implicit faults); by default one of the route's fixtures, picked by the outcome.
    `earlier` is an earlier answer of the tool (what a `stale` answer repeats).
    """
    if (
        ok is None
        and not route.ok_bodies()
        and not ((variant or "").startswith("fixture-") and route.bodies)
    ):
        return no_fixture_plan(route)
    fixture: Body | None = None
    if variant is None:
        variant, fixture = choose_variant(route, outcome, ok)
    elif variant == "ok" and ok is not None:
        fixture = ok
    elif variant.startswith("fixture-"):
        fixture = route.bodies[int(variant.removeprefix("fixture-")) % len(route.bodies)]
    elif variant not in VARIANTS:
        raise KeyError(variant)
    delay = 0.0 if math.isinf(outcome.latency_s) else outcome.latency_s
    if fixture is not None:
        return _fixture_plan(fixture, delay)
    if ok is None:
        ok = _ok_body(route, outcome.pick)
    plan = Plan(variant, VARIANTS[variant], 200, [("Content-Type", ok.content_type), *ok.headers],
                ok.body, delay)
    if variant in IMPLICIT_VARIANTS:
        plan.body, plan.note = implicit.shape(variant, route, ok, outcome.pick, earlier)
        return plan
    ctx = _Context(
        ok, path, now_wall, outcome.pick, outcome.retry_after_s, outcome.retry_after_measured
    )
    _SHAPE[variant](plan, ctx)
    wait = ctx.retry_after(None)
    if wait is not None and plan.action == "respond" and plan.header("Retry-After") is None:
        plan.headers.append(("Retry-After", _seconds(wait)))  # any code the profile measured
    return plan


def _fixture_plan(fixture: Body, delay: float) -> Plan:
    """A real recorded body, served as it was recorded."""
    headers = [("Content-Type", fixture.content_type), *fixture.headers]
    code = fixture.code if fixture.kind != "ok" else None
    return Plan(f"fixture:{fixture.kind}", code, fixture.status, headers, fixture.body, delay)


@dataclass(slots=True, frozen=True)
class _Context:
    """What shaping a variant may use: the tool's ok body, the request path, the time."""

    ok: Body
    path: str
    now_wall: float
    pick: int
    #: the outcome's Retry-After draw (seconds) and whether the profile measured it
    retry_after_s: float | None = None
    retry_after_measured: bool = False

    def retry_after(self, default: float | None) -> float | None:
        """The Retry-After to send: the profile's draw when it measured one for this code
        (None there means "no header", as for that share of the measured answers), else the
        default for a profile that measured none."""
        return self.retry_after_s if self.retry_after_measured else default


# Each shaper turns the default plan (200 with the tool's ok body) into one variant.


def _success(plan: Plan, ctx: _Context) -> None:
    if plan.variant == "ok_html_ctype":
        plan.headers = [("Content-Type", "text/html; charset=UTF-8")]
    elif plan.variant == "redirect_ok":
        plan.status, plan.body = 301, b""
        plan.headers = [("Location", MOVED_PREFIX + ctx.path)]


def _socket(plan: Plan, ctx: _Context) -> None:
    """hang, drip, reset, reset_mid_body, truncated: acted out on the socket."""
    plan.action = cast(Action, plan.variant)


#: Retry-After when the profile measured none for the code: 1-5 s on a 429 (2-6 s in the
#: HTTP-date form), 2 s on a 503, nothing on other answers; a code whose profile measured
#: it carries the measured draw, whatever the status
DEFAULT_429_S = (1.0, 2.0, 3.0, 4.0, 5.0)
DEFAULT_503_S = 2.0


def _seconds(value: float) -> str:
    """Delay-seconds are a whole number (RFC 9110): a fractional draw is rounded up."""
    return str(max(0, math.ceil(value - 1e-9)))


def _rate_limited(plan: Plan, ctx: _Context) -> None:
    if plan.variant == "429":
        wait = ctx.retry_after(DEFAULT_429_S[ctx.pick % len(DEFAULT_429_S)])
        extra = {"Retry_After": _seconds(wait)} if wait is not None else {}
        plan.status, plan.headers, plan.body = _json(429, {"error": "Too Many Requests"}, **extra)
        return
    wait = ctx.retry_after(1.0 + DEFAULT_429_S[ctx.pick % len(DEFAULT_429_S)])
    # both stamps on whole seconds, so the client's difference is the drawn value exactly
    now = math.floor(ctx.now_wall)
    dated = (
        {"Retry_After": formatdate(now + int(_seconds(wait)), usegmt=True)}
        if wait is not None
        else {}
    )
    plan.status, plan.headers, plan.body = _json(
        429, {"error": "Too Many Requests"}, **dated, Date=formatdate(now, usegmt=True)
    )


def _server_error(plan: Plan, ctx: _Context) -> None:
    status = int(plan.variant)
    if status >= 520:
        plan.status, plan.headers, plan.body = _cloudflare(status)
        return
    wait = ctx.retry_after(DEFAULT_503_S if status == 503 else None)
    extra = {"Retry_After": _seconds(wait)} if wait is not None else {}
    plan.status, plan.headers, plan.body = _json(
        status, {"error": f"HTTP {status}", "message": "upstream failure"}, **extra
    )


def _client_error(plan: Plan, ctx: _Context) -> None:
    status = int(plan.variant)
    if status == 404:
        plan.status, plan.body = 404, b"Not Found"
        plan.headers = [("Content-Type", "text/plain; charset=utf-8")]
        return
    plan.status, plan.headers, plan.body = _json(status, {"error": f"HTTP {status}"})


@functools.cache
def _gzip_bomb() -> bytes:
    """6 MiB of JSON that gzips to a few KiB. Compressing it takes ~60-90 ms of CPU: built
    once (mtime 0: the same bytes every time), never per request, so a bomb answer does
    not stall the sandbox's event loop and delay every other call in flight."""
    return gzip.compress(b"[" + b" " * OVERSIZE_BYTES + b"]", compresslevel=9, mtime=0)


@functools.cache
def _oversized() -> bytes:
    return b'["' + b"x" * OVERSIZE_BYTES + b'"]'


def _bad_body(plan: Plan, ctx: _Context) -> None:
    """Bodies a client must refuse: cut JSON, HTML, bytes that are not text, bombs, giants.
    Only the variant's own body is built (the large ones are cached)."""
    extra: list[tuple[str, str]] = []
    if plan.variant == "bad_json":
        ok = ctx.ok.body
        ctype, body = "application/json", ok[: max(1, len(ok) // 2)] if len(ok) > 1 else b"{"
    elif plan.variant == "html":
        ctype = "text/html; charset=UTF-8"
        body = b"<!DOCTYPE html><html><body><h1>We'll be right back</h1></body></html>"
    elif plan.variant == "invalid_utf8":
        ctype, body = "text/plain", b"\xff\xfe\xfa not text"
    elif plan.variant == "gzip_bomb":
        ctype, body = "application/json", _gzip_bomb()
        extra = [("Content-Encoding", "gzip")]
    elif plan.variant == "oversized":
        ctype, body = "application/json", _oversized()
    else:
        raise KeyError(plan.variant)
    plan.headers = [("Content-Type", ctype), *extra]
    plan.body = body


def _bad_redirect(plan: Plan, ctx: _Context) -> None:
    host = "10.255.255.1" if plan.variant == "redirect_private" else "127.0.0.1:9"
    plan.status, plan.body = 301, b""
    plan.headers = [("Location", f"http://{host}{ctx.path}")]


_SHAPE: dict[str, Callable[[Plan, _Context], None]] = {
    **dict.fromkeys(("ok", "ok_html_ctype", "redirect_ok"), _success),
    **dict.fromkeys(("hang", "drip", "reset", "reset_mid_body", "truncated"), _socket),
    **dict.fromkeys(("429", "429_date"), _rate_limited),
    **dict.fromkeys(("500", "502", "503", "520", "522", "523", "524"), _server_error),
    **dict.fromkeys(("400", "404", "410", "401", "403", "418"), _client_error),
    **dict.fromkeys(("bad_json", "html", "invalid_utf8", "gzip_bomb", "oversized"), _bad_body),
    **dict.fromkeys(("redirect_private", "redirect_loopback"), _bad_redirect),
}
assert set(_SHAPE) | set(IMPLICIT_VARIANTS) == set(VARIANTS), "every variant has a shaper"
