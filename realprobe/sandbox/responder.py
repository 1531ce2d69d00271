"""What the sandbox answers to one request: control paths, the runtime API, or an API call
(fault drawn from the profile, body from recordings, fixtures or the upstream, toxics)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from realprobe.adapters.http import FetchFailure
from realprobe.errors import ErrorCode
from realprobe.sandbox.admin import Admin, json_plan
from realprobe.sandbox.bodies import SOURCE_HEADER, BodySource
from realprobe.sandbox.journal import Entry, Journal
from realprobe.sandbox.proxy import HeldBack, Upstream, upstream_body
from realprobe.sandbox.runtime import Runtime
from realprobe.sandbox.wire import Active, resolve
from realprobe.serving import ERROR_HEADER
from realprobe.simulator.faults import Outcome
from realprobe.simulator.profile import IMPLICIT_VARIANTS
from realprobe.simulator.render import (
    BODY_VARIANTS,
    FAULT_PREFIX,
    MOVED_PREFIX,
    VARIANTS,
    Plan,
    choose_variant,
    is_variant,
    known_variants,
    render,
)
from realprobe.simulator.routes import Body, Route, RouteTable

FAULT_HEADER = "X-Realprobe-Fault"
REQUEST_ID_HEADER = "X-Request-Id"
#: a client's request id is kept when it is this sane (else the sandbox makes one)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")


def draw_of(headers: Mapping[str, str]) -> tuple[str, int] | None:
    """(caller key, call number) a request gives itself (`X-Realprobe-Draw: <run>:<round>`
    from a probe), or None."""
    key, _, n = headers.get("x-realprobe-draw", "").rpartition(":")
    return (key[:80], int(n)) if key and n.isdigit() and len(n) < 7 else None


def request_id(headers: Mapping[str, str]) -> str:
    """The client's `X-Request-Id` when it sends a sane one, else a fresh id."""
    given = headers.get("x-request-id", "")
    return given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:16]


def made_here(status: int, label: str, message: str, **extra: object) -> Plan:
    """An answer the sandbox makes itself (no API behaviour): JSON, labelled with
    `X-Realprobe-Error`, so a client never mistakes it for the API's."""
    plan = json_plan(status, {"error": label, "message": message, **extra})
    plan.headers.append((ERROR_HEADER, label))
    return plan


@dataclass
class Stats:
    requests: int = 0
    faults: int = 0


@dataclass(slots=True)
class Answer:
    plan: Plan
    active: Active
    entry: Entry | None = None  # None: a control path (not journaled)


def _split_path(path: str, forced: str | None, numbered: bool = False,
                ) -> tuple[str, str, str | None]:
    """(api id, the API's own path, the forced variant) of `/<api>/<path>`. The `_moved`
    target of a forced redirect answers normally, and so does where a numbered call was
    sent on (its outcome was drawn with the call: drawing it again would play the redirect
    again)."""
    _, api, *rest_parts = path.split("/", 2)
    original = "/" + (rest_parts[0] if rest_parts else "")
    if original.startswith(MOVED_PREFIX + "/"):
        original = original[len(MOVED_PREFIX) :]
        if forced == "redirect_ok" or (numbered and forced is None):
            forced = "ok"
    return api, original, forced


class Responder:
    def __init__(
        self,
        routes: RouteTable,
        runtime: Runtime,
        journal: Journal,
        bodies: BodySource,
        *,
        upstream: Upstream | None = None,
        admin: bool = True,
        stats: Stats | None = None,
        latency_scale: float = 1.0,
    ) -> None:
        self.routes = routes
        self.runtime = runtime
        self.journal = journal
        self.bodies = bodies
        self.upstream = upstream
        self.stats = stats or Stats()
        #: the last body each tool answered (what a `stale` fault repeats)
        self.earlier: dict[str, bytes] = {}
        describe = {
            "upstream": upstream.shown if upstream else None,
            "recordings": bodies.recordings.count if bodies.recordings else 0,
            "latency_scale": latency_scale,  # what a model of its calls scales them by
        }
        self.admin = Admin(runtime, journal, describe) if admin else None

    async def answer(
        self, method: str, target: str, body: bytes, headers: Mapping[str, str]
    ) -> Answer:
        path, _, query = target.partition("?")
        if self.admin is not None and self.admin.handles(path):
            return Answer(self.admin.handle(method, path, query, body), Active())
        forced: str | None = None
        if path.startswith(FAULT_PREFIX):
            forced, _, tail = path[len(FAULT_PREFIX) :].partition("/")
            path = "/" + tail
            if not is_variant(forced):
                bad = made_here(
                    400, "unknown-fault-variant",
                    f"unknown fault variant {forced!r} in /_fault/{forced}/; known variants: "
                    f"{known_variants()}",
                    known_variants=[*VARIANTS, "fixture-<n>"],
                )
                return Answer(bad, Active())
        if path == "/_health":
            return Answer(json_plan(200, {"ok": True, "requests": self.stats.requests}), Active())
        if path == "/_routes":
            routes = [
                {"api": r.api_id, "tool": r.tool, "path": f"/{r.api_id}{r.path}"}
                for r in self.routes.routes
            ]
            return Answer(json_plan(200, routes), Active())
        self.stats.requests += 1  # API requests only; control paths are not counted
        entry = self.journal.start(method, target, request_id(headers))
        got = await self._api(method, path, query, body, headers, forced, entry)
        got.plan.headers.append((REQUEST_ID_HEADER, entry.request_id or ""))
        return got

    async def _api(self, method: str, path: str, query: str, body: bytes,
                   headers: Mapping[str, str], forced: str | None, entry: Entry) -> Answer:
        entry.forced = forced is not None
        numbered = draw_of(headers)
        api, original, forced = _split_path(path, forced, numbered is not None)
        entry.api = api or None
        route = self.routes.match(api, method, original)
        toxics = self.runtime.toxics.for_request(api or None, route.tool if route else None)
        active = resolve(toxics, self.runtime.rng)
        if route is None:
            return Answer(await self._unrouted(api, method, original, query, headers, entry),
                          active, entry)
        entry.tool = route.tool
        entry.draw = None if numbered is None else numbered[1]
        outcome, variant = self._draw(route, forced, numbered)
        got = await self._success_body(route, variant, outcome.pick, method, original, query,
                                       body, headers, entry)
        if isinstance(got, Plan):
            return Answer(got, active, entry)
        ok, source = got
        plan = render(route, outcome, path=original, now_wall=time.time(), variant=forced, ok=ok,
                      earlier=self.earlier.get(route.tool))  # fmt: skip
        if plan.code is None and plan.status == 200:
            self.earlier[route.tool] = plan.body
        self._annotate(plan, variant, forced, api, original, source, entry)
        return Answer(plan, active, entry)

    async def _unrouted(
        self,
        api: str,
        method: str,
        original: str,
        query: str,
        headers: Mapping[str, str],
        entry: Entry,
    ) -> Plan:
        """A path outside the catalogue: forwarded as is by a proxy (with the API's toxics
        only), else a labelled 421: the sandbox never answers for an API it does not serve
        (a bare 404 would read as the real API's answer)."""
        up = self.upstream
        if up is not None and api in up.base_urls:
            return await self._forward_plain(api, method, original, query, headers, entry)
        known = api in self.routes.by_api
        entry.fault = "unknown-route" if known else "unknown-api"
        what = (f"no {method} {original} for API {api!r}" if known
                else f"no API {api!r}")
        return made_here(
            421, entry.fault,
            f"this realprobe sandbox serves {what}; its catalogue differs from the client's "
            "(start it with the same --catalog)",
            api=api, path=original,
        )

    def _draw(self, route: Route, forced: str | None, numbered: tuple[str, int] | None = None
              ) -> tuple[Outcome, str]:
        """The outcome and the variant to play: forced by the URL, or drawn from the profile
        (the numbered call's own outcome when the request numbers itself)."""
        if forced is not None:
            return Outcome(VARIANTS.get(forced), 0.0, 0), forced
        outcome = self.runtime.draw(route.tool, numbered)
        if outcome.variant is not None:
            return outcome, outcome.variant
        return outcome, "ok" if outcome.code is None else choose_variant(route, outcome)[0]

    async def _success_body(
        self,
        route: Route,
        variant: str,
        pick: int,
        method: str,
        original: str,
        query: str,
        body: bytes,
        headers: Mapping[str, str],
        entry: Entry,
    ) -> tuple[Body | None, str | None] | Plan:
        """The success body the variant is built from and its source (None, None: the
        renderer picks a fixture), or the answer itself when the upstream failed."""
        if variant in BODY_VARIANTS:
            if self.upstream is not None:
                got = await self._fetch(route.api_id, method, original, query, headers, entry)
                return got if isinstance(got, Plan) else (got, "upstream")
            chosen = self.bodies.choose(route, method, original, query, body or None, pick)
            if chosen is not None:
                return chosen.body, chosen.source
        elif variant.startswith("fixture"):
            return None, "fixture"
        return None, None

    def _annotate(
        self,
        plan: Plan,
        variant: str,
        forced: str | None,
        api: str,
        original: str,
        source: str | None,
        entry: Entry,
    ) -> None:
        """Label the rendered plan (variant, source headers, redirect target) and journal it."""
        if variant == "ok" and plan.variant != "no_fixture":
            # a success as the profile drew it, whatever status the chosen body carries
            # (an unknown-input 404 is the API's answer, not an injected fault)
            plan.variant, plan.code = "ok", None
        if plan.code is not None:
            self.stats.faults += 1
        if plan.variant == "redirect_ok":
            prefix = FAULT_PREFIX + "redirect_ok" if forced else ""
            plan.headers = [("Location", f"{prefix}/{api}{MOVED_PREFIX}{original}")]
        entry.fault = plan.variant
        entry.source = source
        if source is not None:
            plan.headers.append((SOURCE_HEADER, source))
        if plan.variant not in IMPLICIT_VARIANTS:
            # an implicit fault looks like a plain success on the wire: its truth is in the
            # journal only (`fault`), where an evaluator reads it and the agent cannot
            plan.headers.append((FAULT_HEADER, plan.variant))

    async def _fetch(self, api: str, method: str, path: str, query: str,
                     headers: Mapping[str, str], entry: Entry) -> Body | Plan:
        """The upstream's answer as a body, or the plan that says why there is none."""
        assert self.upstream is not None
        started = time.perf_counter()
        try:
            fetched = await self.upstream.fetch(api, method, path, query, headers)
        except HeldBack as exc:
            return _held_back(exc, entry)
        except FetchFailure as exc:
            return self._upstream_failed(exc, entry)
        finally:
            entry.upstream_ms = (time.perf_counter() - started) * 1000.0
        return upstream_body(fetched)

    def _upstream_failed(self, exc: FetchFailure, entry: Entry) -> Plan:
        status = 504 if exc.code is ErrorCode.TIMEOUT else 502
        entry.fault, entry.source = f"upstream-{exc.code.value}", "upstream"
        plan = json_plan(status, {"error": f"upstream {exc.code.value}", "message": exc.message})
        plan.headers.append(("X-Realprobe-Upstream-Error", exc.code.value))
        return plan

    async def _forward_plain(self, api: str, method: str, path: str, query: str,
                             headers: Mapping[str, str], entry: Entry) -> Plan:
        b = await self._fetch(api, method, path, query, headers, entry)
        if isinstance(b, Plan):
            return b
        entry.fault, entry.source = "ok", "upstream"
        return Plan(
            "ok", None, b.status,
            [("Content-Type", b.content_type), *b.headers, (SOURCE_HEADER, "upstream")],
            b.body,
        )


def _held_back(exc: HeldBack, entry: Entry) -> Plan:
    """Nothing was sent upstream: realprobe's politeness held the call back."""
    entry.fault, entry.source = "held-back", "upstream"
    plan = made_here(429, "held-back", f"held back by realprobe politeness: {exc.why}",
                     why=exc.why)
    plan.headers += [
        ("Retry-After", str(max(1, round(exc.retry_after_s)))),
        ("X-Realprobe-Held-Back", exc.why),
    ]
    return plan
