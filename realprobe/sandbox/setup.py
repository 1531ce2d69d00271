"""A Sandbox for a catalogue: routes, origins, recordings, upstream and politeness wired up."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx
from pydantic import ValidationError

from realprobe.adapters.catalog import Catalog
from realprobe.cassettes.cassette import CassetteError
from realprobe.cassettes.importers import load_any
from realprobe.errors import RealprobeError
from realprobe.http.simulate import origin_of, routes_from_catalog
from realprobe.sandbox.bodies import Recordings, cassette_paths
from realprobe.sandbox.proxy import LIVE, Upstream, store_ledger
from realprobe.sandbox.server import Sandbox
from realprobe.simulator.plans import FaultPlan, plan_for, without_task
from realprobe.simulator.profile import Profile, ProfileRef, resolve_profile
from realprobe.simulator.toxics import ANY_SCOPE, TOXIC_TYPES, Toxic, toxic_adapter
from realprobe.store import Database, open_db


def load_recordings(paths: Sequence[str | Path]) -> Recordings:
    files = cassette_paths(paths)
    missing = [str(p) for p in files if not Path(p).exists()]
    if missing:
        raise RealprobeError(
            f"cassettes: no such file or folder: {', '.join(missing)}", param="cassettes"
        )
    if not files:
        raise RealprobeError("cassettes: no cassette files (.json, .yaml) found", param="cassettes")
    try:
        return Recordings(load_any(p) for p in files)
    except CassetteError as exc:
        raise RealprobeError(f"cassettes: {exc}", param="cassettes") from exc


def make_upstream(
    catalog: Catalog,
    target: str,
    *,
    polite: bool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    db: str | Path | Database | None = None,
) -> Upstream:
    """`live` (each API's real base URL) or an http(s) URL. Politeness and daily budgets hold
    by default for `live` only (`polite` forces them on or off); with `db`, budgets are
    counted in that store's ledger (shared with live probe runs), else by this process."""
    if target != LIVE:
        url = httpx.URL(target.replace("{api}", "api"))
        if url.scheme not in ("http", "https") or not url.host:
            raise RealprobeError(
                f"upstream {target!r}: give `live` or an http(s) URL", param="upstream"
            )
    use_polite = (target == LIVE) if polite is None else polite
    policies = {a.id: a.politeness for a in catalog.apis.values()} if use_polite else None
    base_urls = {a.id: a.base_url for a in catalog.apis.values()}
    # the store's ledger holds budgets of the real APIs: a test URL never spends them
    ledger = store_ledger(open_db(db)) if db is not None and use_polite and target == LIVE \
        else None
    return Upstream(target, base_urls, transport=transport, politeness=policies, ledger=ledger)


def parse_toxic(text: str) -> tuple[str, str, Toxic]:
    """`[scope:]type[:k=v,k=v]`, e.g. `latency:latency_ms=200,jitter_ms=50` or
    `agify:bandwidth:rate=2000`. Returns (scope, name, toxic)."""
    parts = text.split(":")
    scope = ANY_SCOPE
    if parts and parts[0] not in TOXIC_TYPES and len(parts) >= 2:
        scope = parts.pop(0)
    if not parts or parts[0] not in TOXIC_TYPES:
        raise RealprobeError(
            f"toxics {text!r}: give [scope:]type[:k=v,...] with type one of "
            f"{', '.join(TOXIC_TYPES)}",
            param="toxics",
        )
    kind = parts[0]
    params: dict[str, object] = {"type": kind}
    for item in ":".join(parts[1:]).split(","):
        if not item.strip():
            continue
        k, sep, v = item.partition("=")
        if not sep:
            raise RealprobeError(f"toxics {text!r}: parameter {item!r} is not k=v", param="toxics")
        params[k.strip()] = v.strip()
    try:
        toxic = toxic_adapter.validate_python(params)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"][1:]) or kind
        raise RealprobeError(
            f"toxics {text!r}: {where}: {err['msg']}", param="toxics"
        ) from exc
    return scope, kind, toxic


def sandbox_for(
    catalog: Catalog,
    profile: ProfileRef | None = None,
    *,
    seed: int | str = 0,
    latency_scale: float = 1.0,
    host: str = "127.0.0.1",
    port: int = 0,
    cassettes: Sequence[str | Path] = (),
    upstream: str | Upstream | None = None,
    polite: bool | None = None,
    toxics: Sequence[str] = (),
    admin: bool = True,
    db: str | Path | Database | None = None,
    allowed_hosts: Sequence[str] = (),
    auth_token: str | None = None,
    fault_plan: str | Path | FaultPlan | None = None,
    fault_rate: float | None = None,
) -> Sandbox:
    prof: Profile = resolve_profile(profile)
    if fault_rate is not None:
        prof = prof.scaled(fault_rate)
    up = upstream
    if isinstance(up, str):
        up = make_upstream(catalog, up, polite=polite, db=db)
    sb = Sandbox(
        routes_from_catalog(catalog),
        prof,
        seed=seed,
        latency_scale=latency_scale,
        host=host,
        port=port,
        # {api id: origin of its base URL}; routes already carry the base URL's path
        origins={api.id: origin_of(api.base_url) for api in catalog.apis.values()},
        recordings=load_recordings(cassettes) if cassettes else None,
        upstream=up,
        admin=admin,
        allowed_hosts=tuple(allowed_hosts),
        auth_token=auth_token,
        plan=without_task(plan_for(fault_plan, fault_rate, prof.rule), "the sandbox"),
    )
    for text in toxics:
        scope, name, toxic = parse_toxic(text)
        sb.runtime.toxics.set(scope, name, toxic)
    return sb
