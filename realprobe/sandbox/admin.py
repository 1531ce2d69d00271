"""The runtime API: read and change the fault profile, the toxics and the seed while the
sandbox runs, and read the request journal.

- `GET /_admin`: the state (profile name, seed, toxics, journal size, upstream).
- `GET | PUT | DELETE /_admin/profile`: the profile in force (`null` when cleared); set one
  (a JSON profile as the body, or `?builtin=harsh`); clear it (no faults, no added latency).
- `GET /_admin/toxics`; `GET | PUT | DELETE /_admin/toxics/<scope>/<name>`: toxics (the PUT
  body is a toxic as JSON; `type` defaults to the name); `DELETE /_admin/toxics[/<scope>]`
  removes all of them, or a scope's.
- `PUT /_admin/seed`: fresh random streams (`{"seed": 7}`, or no body for the same seed).
- `POST /_admin/reset`: back to the start (profile, toxics, seed) and an empty journal.
- `GET /_journal` (`?since=<seq>`, `?limit=<n>`), `DELETE /_journal`: the request journal.

A scope is `*` (every API), an API id, or a tool name. Changes apply from the next request.
Bodies are validated like profile files are (a non-finite or out-of-range toxic is a 400
naming the field); writes must send `Content-Type: application/json` (the server base
refuses anything else, and any cross-origin or foreign-Host request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError

from realprobe.errors import RealprobeError
from realprobe.limits import load_json_text
from realprobe.sandbox.journal import Journal
from realprobe.sandbox.runtime import Runtime
from realprobe.serving import ERROR_HEADER
from realprobe.simulator.profile import BUILTIN_PROFILES, Profile, builtin_profile
from realprobe.simulator.render import Plan
from realprobe.simulator.toxics import TOXIC_TYPES, toxic_adapter

ADMIN = "/_admin"
JOURNAL = "/_journal"
#: toxics kept at runtime at most (each PUT of a new scope/name adds one)
MAX_RUNTIME_TOXICS = 1000


def json_plan(status: int, obj: object) -> Plan:
    return Plan(
        "control", None, status, [("Content-Type", "application/json")],
        json.dumps(obj).encode(),
    )


def _error(status: int, message: str) -> Plan:
    """An admin error, labelled as the sandbox's own answer (`X-Realprobe-Error: admin`)."""
    plan = json_plan(status, {"error": message, "message": message})
    plan.headers.append((ERROR_HEADER, "admin"))
    return plan


def _validation(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "body"
    return f"invalid at {where}: {err['msg']}"


class Admin:
    def __init__(self, runtime: Runtime, journal: Journal, describe: dict[str, Any]) -> None:
        self.runtime = runtime
        self.journal = journal
        self.describe = describe  # static facts for GET /_admin (upstream, body sources)

    def handles(self, path: str) -> bool:
        return path in (ADMIN, JOURNAL) or path.startswith(ADMIN + "/")

    def handle(self, method: str, path: str, query: str, body: bytes) -> Plan:
        try:
            return self._handle(method, path.rstrip("/") or "/", dict(parse_qsl(query)), body)
        except (ValueError, RealprobeError) as exc:
            return _error(400, str(exc))

    def _handle(self, method: str, path: str, q: dict[str, str], body: bytes) -> Plan:
        rt = self.runtime
        if path == JOURNAL:
            if method == "GET":
                since = int(q.get("since", "0"))
                limit = int(q["limit"]) if "limit" in q else None
                return json_plan(200, self.journal.dump(since, limit))
            if method == "DELETE":
                self.journal.clear()
                return json_plan(200, {"ok": True})
            return _error(405, f"{method} {path}: use GET or DELETE")
        parts = path[len(ADMIN) :].strip("/").split("/") if path != ADMIN else []
        if not parts:
            if method != "GET":
                return _error(405, f"{method} {path}: use GET")
            return json_plan(200, self.state())
        head, rest = parts[0], parts[1:]
        if head == "profile" and not rest:
            return self._profile(method, q, body)
        if head == "toxics":
            return self._toxics(method, rest, body)
        if head == "seed" and not rest and method in ("PUT", "POST"):
            seed: int | str | None = None
            if body.strip():
                doc = load_json_text(body, "seed", max_bytes=len(body))
                if not isinstance(doc, dict) or not isinstance(doc.get("seed"), int | str):
                    raise ValueError('seed: send {"seed": <int or string>} (or no body)')
                seed = doc["seed"]
            rt.reseed(seed)
            return json_plan(200, {"seed": rt.seed})
        if head == "reset" and not rest and method in ("PUT", "POST"):
            rt.reset()
            self.journal.clear()
            return json_plan(200, self.state())
        return _error(
            404,
            f"{method} {path}: unknown admin endpoint; see GET /_admin (profile, toxics, "
            "seed, reset) and GET /_journal",
        )

    def state(self) -> dict[str, Any]:
        rt = self.runtime
        p = rt.profile
        return {
            "profile": None if p is None else (p.name or "unnamed"),
            "cleared": p is None,
            "seed": rt.seed,
            "toxics": rt.toxics.dump(),
            "journal": len(self.journal.entries),
            "journal_bytes": self.journal.bytes,
            "journal_dropped": self.journal.dropped,
            **self.describe,
        }

    def _profile(self, method: str, q: dict[str, str], body: bytes) -> Plan:
        rt = self.runtime
        if method == "GET":
            p = rt.profile
            dump = None if p is None else p.model_dump(mode="json", exclude_none=True)
            return json_plan(200, dump)
        if method == "DELETE":
            rt.set_profile(None, toxics=False)
            return json_plan(200, {"ok": True, "cleared": True})
        if method in ("PUT", "POST"):
            if "builtin" in q:
                name = q["builtin"]
                if name not in BUILTIN_PROFILES:
                    raise ValueError(
                        f"builtin {name!r}: choose one of {', '.join(BUILTIN_PROFILES)}"
                    )
                profile = builtin_profile(name)
            else:
                try:
                    profile = Profile.model_validate_json(body or b"{}")
                except ValidationError as exc:
                    raise ValueError(f"profile {_validation(exc)}") from exc
            rt.set_profile(profile)
            return json_plan(200, {"ok": True, "profile": profile.name or "unnamed"})
        return _error(405, f"{method} /_admin/profile: use GET, PUT or DELETE")

    def _toxics(self, method: str, rest: list[str], body: bytes) -> Plan:
        toxics = self.runtime.toxics
        if method == "GET" and not rest:
            return json_plan(200, toxics.dump())
        if method == "DELETE":
            if not rest:
                toxics.clear()
                return json_plan(200, {"ok": True})
            if len(rest) == 1:
                found = toxics.scopes.pop(rest[0], None) is not None
                return json_plan(200 if found else 404, {"ok": found})
            found = toxics.remove(rest[0], rest[1])
            if not found:
                return _error(404, f"no toxic {rest[1]!r} in scope {rest[0]!r}")
            return json_plan(200, {"ok": True})
        if len(rest) != 2:
            return _error(404, "toxics: use /_admin/toxics/<scope>/<name>")
        scope, name = rest
        if method == "GET":
            toxic = toxics.scopes.get(scope, {}).get(name)
            if toxic is None:
                return _error(404, f"no toxic {name!r} in scope {scope!r}")
            return json_plan(200, toxic.model_dump(mode="json"))
        if method in ("PUT", "POST"):
            doc = load_json_text(body or b"{}", "toxic body", max_bytes=len(body) + 2)
            held = sum(len(v) for v in toxics.scopes.values())
            if held >= MAX_RUNTIME_TOXICS and name not in toxics.scopes.get(scope, {}):
                raise ValueError(f"at most {MAX_RUNTIME_TOXICS} toxics at once; DELETE some "
                                 "first (DELETE /_admin/toxics removes all)")
            if isinstance(doc, dict) and "type" not in doc and name in TOXIC_TYPES:
                doc["type"] = name
            try:
                toxic = toxic_adapter.validate_python(doc)
            except ValidationError as exc:
                raise ValueError(
                    f"toxic {_validation(exc)} (types: {', '.join(TOXIC_TYPES)})"
                ) from exc
            toxics.set(scope, name, toxic)
            return json_plan(200, {"ok": True, "scope": scope, "name": name,
                                   "toxic": toxic.model_dump(mode="json")})
        return _error(405, f"{method}: use GET, PUT or DELETE")


def served_profile(url: str) -> Profile | None:
    """The profile a running sandbox at `url` serves, read from its runtime API through the
    one client (its deadline, body cap and JSON limits); None when it serves none, or does not
    say (the runtime API switched off, a token required, not a realprobe sandbox, no answer
    within 2 s)."""
    body = _admin_json(url, "/profile")
    try:
        return Profile.model_validate(body) if body else None
    except ValidationError:
        return None


@dataclass(frozen=True)
class Draws:
    """How a running sandbox draws its answers, beyond its profile: its seed and the factor
    its drawn latencies are acted out at."""

    seed: int | str
    latency_scale: float = 1.0


def served_draws(url: str) -> Draws | None:
    """The seed and latency scale a running sandbox at `url` draws by (read as
    `served_profile` reads the profile); None when it does not say."""
    body = _admin_json(url, "")
    if not isinstance(body, dict):
        return None
    seed, scale = body.get("seed"), body.get("latency_scale", 1.0)
    if (isinstance(seed, bool) or not isinstance(seed, int | str) or len(str(seed)) > 200
            or isinstance(scale, bool) or not isinstance(scale, int | float)
            or not 0 <= scale < 1e6):
        return None
    return Draws(seed, float(scale))


def _admin_json(url: str, path: str) -> Any:
    """GET `<sandbox>/_admin<path>` as JSON, or None (see `served_profile`)."""
    from realprobe.adapters.bounded import load_json
    from realprobe.http.client import ClientConfig, SyncHttpClient
    from realprobe.http.transports import check_sandbox_url, sync_live_transport

    check_sandbox_url(url)
    config = ClientConfig(connect_timeout_s=2.0, read_timeout_s=2.0, deadline_s=2.0)
    try:
        with SyncHttpClient(sync_live_transport(), config=config) as client:
            got = client.fetch("GET", url.split("/_fault/", 1)[0].rstrip("/") + ADMIN + path,
                               allow_private=True)
        return load_json(got.body) if got.status == 200 else None
    except RealprobeError:
        return None
