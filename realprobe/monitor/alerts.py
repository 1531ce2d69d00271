"""Alert rules over the probe database: evaluate, deduplicate, notify webhooks.

A rules file (TOML, YAML or JSON) holds `rules` and `webhooks`:

```toml
[[webhooks]]
url = "http://127.0.0.1:9000/hook"
format = "json"            # or "slack" ({"text": ...}, Slack-compatible)

[[rules]]
name = "success"
kind = "success_below"     # the interval's upper bound is under `threshold`
threshold = 0.9
window = "1h"
min_calls = 10

[[rules]]
kind = "p95_above"          # p95 latency of successes above `threshold_ms`
threshold_ms = 2000
window = "1h"

[[rules]]
kind = "cert_expiring"      # the API's certificate expires within `days`
days = 14

[[rules]]
kind = "no_success"         # no successful call for `for_` ("for" in the file)
for = "2h"

[[rules]]
kind = "drift_worse"        # drift verdict `worse`: `window` against the `baseline` before it
window = "24h"
baseline = "7d"
```

Every rule may name `tools` (default: every tool with rows) and a `target` kind (default
`live`). Rules read their rows like every reader does (`loading.conditions`), and `p95_above`
takes its p95 from the statistics code behind `realprobe stats`. Each (rule, tool) pair is one
alert whose state lives in the database's `alert_state` table: it is sent when it starts
firing, once when it resolves, and again while it keeps firing only after `repeat_interval`
(top level of the file, default 4h), so a check run every minute does not spam. As in
Alertmanager, a check sends one notification per webhook with every alert grouped in it,
to all webhooks at once, each delivery within its `timeout_s` in total.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from realprobe.errors import RealprobeError
from realprobe.limits import read_document
from realprobe.probes.loading import conditions, kind_expr, load_probes, probe_columns
from realprobe.probes.provenance import parse_target
from realprobe.probes.stats import (
    EXTRAPOLATED,
    ChainPrior,
    interval_text,
    latency_stats,
    quoted_success,
)
from realprobe.ranges import parse_duration
from realprobe.store import Database, Store, iso_utc

RuleKind = Literal["success_below", "p95_above", "cert_expiring", "no_success", "drift_worse"]


class Webhook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str
    format: Literal["json", "slack"] = "json"
    timeout_s: float = Field(5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        return v


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    kind: RuleKind
    name: str = ""
    tools: list[str] | None = None
    target: str = "live"
    window: str = "1h"
    baseline: str = "7d"
    threshold: float | None = Field(None, ge=0, le=1)
    threshold_ms: float | None = Field(None, gt=0)
    days: float | None = Field(None, gt=0)
    for_: str | None = Field(None, alias="for")
    min_calls: int = Field(10, ge=1)

    @field_validator("target")
    @classmethod
    def _kind(cls, v: str) -> str:
        """A kind the rows can hold (a misspelt one would match no row and never fire)."""
        try:
            return str(parse_target(v))
        except RealprobeError as exc:
            raise ValueError(str(exc).replace("kinds ", "", 1)) from None

    def label(self) -> str:
        return self.name or self.kind

    def finding(self, subject: str, value: float | None, message: str) -> Finding:
        return Finding(rule=self.label(), kind=self.kind, subject=subject, value=value,
                       message=message)

    def check(self) -> Rule:
        need = {
            "success_below": ("threshold", self.threshold),
            "p95_above": ("threshold_ms", self.threshold_ms),
            "cert_expiring": ("days", self.days),
            "no_success": ("for", self.for_),
        }.get(self.kind)
        if need is not None and need[1] is None:
            raise RealprobeError(f"alert rule {self.label()!r}: kind {self.kind} needs {need[0]}")
        for text in (self.window, self.baseline, self.for_):
            if text is not None:
                parse_duration(text)
        return self


class AlertConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[Rule]
    webhooks: list[Webhook] = Field(default_factory=list)
    #: an alert that keeps firing is sent again after this long (Alertmanager's
    #: `repeat_interval`)
    repeat_interval: str = "4h"

    @field_validator("repeat_interval")
    @classmethod
    def _duration(cls, v: str) -> str:
        try:
            parse_duration(v)
        except RealprobeError as exc:
            raise ValueError(str(exc)) from None
        return v


def load_rules(path: str | Path) -> AlertConfig:
    p = Path(path)
    fmt = p.suffix.lower().lstrip(".")
    data = read_document(p, "alert rules file", fmt if fmt in ("toml", "yaml", "yml") else "json")
    try:
        config = AlertConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise RealprobeError(f"{p}: {where}: {first['msg']}") from exc
    for rule in config.rules:
        rule.check()
    return config


class Finding(BaseModel):
    """One (rule, subject) whose condition holds now."""

    rule: str
    kind: str
    subject: str  # tool name, or api for certificates
    message: str
    value: float | None = None


class Event(BaseModel):
    """A notification: an alert started firing or resolved."""

    status: Literal["firing", "resolved"]
    rule: str
    kind: str
    subject: str
    message: str
    value: float | None = None
    at: str
    #: still firing, sent again after the repeat interval
    repeat: bool = False


# -- evaluation --------------------------------------------------------------------------


def evaluate(db: Database, config: AlertConfig, now: float | None = None) -> list[Finding]:
    now = time.time() if now is None else now
    conn = db.read()
    try:
        cols = probe_columns(conn)
        out: list[Finding] = []
        for rule in config.rules:
            out += _EVALUATORS[rule.kind](conn, cols, rule, now)
        return out
    finally:
        conn.close()


def _kinds(rule: Rule) -> list[str] | None:
    return None if rule.target == "all" else [rule.target]


def _scope(cols: set[str], rule: Rule, since: float | None = None) -> tuple[str, list[Any]]:
    """The rule's rows, selected like every other reader selects them (`conditions`)."""
    return conditions(cols, since, None, rule.tools, _kinds(rule), None)


def _success_below(
    conn: sqlite3.Connection, cols: set[str], rule: Rule, now: float
) -> list[Finding]:
    """Fires when the interval `stats` quotes (burst-adjusted) lies wholly below the
    threshold, over the rows `stats` would read."""
    since = now - parse_duration(rule.window)
    arr = load_probes(conn, since, None, rule.tools, kinds=_kinds(rule))
    # a tool with few failures borrows from every tool of the window, as `stats` does
    prior = ChainPrior.of_rows(load_probes(conn, since, None, None, kinds=_kinds(rule))
                               ) if rule.tools else None
    out = []
    assert rule.threshold is not None
    for tool, s in quoted_success(arr, prior).items():
        k, n, ci = s.successes, s.n, s.quoted95
        if n < rule.min_calls or not ci[1] < rule.threshold:
            continue
        out.append(rule.finding(tool, k / n, f"{tool}: success {k}/{n} = {k / n:.1%} "
                                f"{interval_text(ci)} over {rule.window} is below "
                                f"{rule.threshold:.0%}"))
    return out


def _p95_above(
    conn: sqlite3.Connection, cols: set[str], rule: Rule, now: float
) -> list[Finding]:
    """p95 as `stats` computes it (probes/stats.py: the censored fit when the deadline
    bites, else the successes' own percentile), over the same rows `stats` would read."""
    arr = load_probes(conn, now - parse_duration(rule.window), None, rule.tools,
                      kinds=_kinds(rule))
    out = []
    assert rule.threshold_ms is not None
    for i, tool in enumerate(arr.tools):
        part = arr.slice(i)
        lat = latency_stats(part.latency_ms, part.code, part.timeout_s)
        if lat.n < rule.min_calls or lat.p95 is None or not lat.p95 > rule.threshold_ms:
            continue
        mark = EXTRAPOLATED if lat.extrapolated else ""
        how = f" ({mark} extrapolated: censored fit past the deadline)" if mark else ""
        out.append(rule.finding(tool, lat.p95, f"{tool}: p95 latency {lat.p95:.0f}{mark} ms "
                                f"over {rule.window} ({lat.n} successes) is above "
                                f"{rule.threshold_ms:g} ms{how}"))
    return out


def _cert_expiring(
    conn: sqlite3.Connection, cols: set[str], rule: Rule, now: float
) -> list[Finding]:
    if "tls_expires_ts" not in cols:
        return []
    where, params = _scope(cols, rule)
    rows = conn.execute(
        f"SELECT api, tls_expires_ts, tls_issuer FROM probes WHERE {where} "
        "AND typeof(tls_expires_ts) = 'real' AND id IN (SELECT MAX(id) FROM probes "
        "WHERE tls_expires_ts IS NOT NULL GROUP BY api) ORDER BY api", params
    ).fetchall()
    out = []
    assert rule.days is not None
    for api, expires, issuer in rows:
        days = (float(expires) - now) / 86400.0
        if days <= rule.days:
            out.append(rule.finding(api, days, f"{api}: TLS certificate (issuer {issuer or '?'}) "
                                    f"expires {iso_utc(float(expires))}, in {days:.1f} days"))
    return out


def _no_success(
    conn: sqlite3.Connection, cols: set[str], rule: Rule, now: float
) -> list[Finding]:
    where, params = _scope(cols, rule)
    assert rule.for_ is not None
    span = parse_duration(rule.for_)
    rows = conn.execute(
        f"SELECT tool, MAX(CASE WHEN outcome = 'ok' THEN started_ts END), MAX(started_ts), "
        f"MIN(started_ts) FROM probes WHERE {where} GROUP BY tool ORDER BY tool", params
    ).fetchall()
    out = []
    for tool, last_ok, last, first in rows:
        since = last_ok if last_ok is not None else first
        if last is not None and last > now - span and since < now - span:
            what = f"last success {iso_utc(last_ok)}" if last_ok else "no success on record"
            out.append(rule.finding(tool, (now - since) / 3600.0,
                                    f"{tool}: no successful call for {rule.for_} ({what})"))
    return out


def _drift_worse(
    conn: sqlite3.Connection, cols: set[str], rule: Rule, now: float
) -> list[Finding]:
    from realprobe.probes.drift import drift

    cur_start = now - parse_duration(rule.window)
    base_start = cur_start - parse_duration(rule.baseline)
    base = load_probes(conn, base_start, cur_start, rule.tools, kinds=_kinds(rule))
    cur = load_probes(conn, cur_start, now, rule.tools, kinds=_kinds(rule))
    report = drift(base, cur, baseline_window=(base_start, cur_start),
                   current_window=(cur_start, now))
    out = []
    for t in report.tools:
        if t.verdict == "worse":
            what = []
            if t.success and t.success.flagged:
                what.append(f"success {t.success.baseline:.1%} -> {t.success.current:.1%}")
            if t.latency and t.latency.flagged:
                what.append(f"median latency x{t.latency.ratio:.2f}")
            out.append(rule.finding(
                t.tool, t.success.change if t.success else None,
                f"{t.tool}: worse over the last {rule.window} than the {rule.baseline} before "
                f"({', '.join(what) or 'see drift'})"))
    return out


_EVALUATORS: dict[str, Callable[..., list[Finding]]] = {
    "success_below": _success_below,
    "p95_above": _p95_above,
    "cert_expiring": _cert_expiring,
    "no_success": _no_success,
    "drift_worse": _drift_worse,
}


# -- state: fire once, resolve once ------------------------------------------------------

STATE_COLUMNS: dict[str, Any] = {
    "rule": str, "subject": str, "kind": str, "state": str, "since": str,
    "changed_ts": float, "message": str, "value": float, "notified_ts": float,
}


def _state_table(store: Store) -> Any:
    table = store.db.table("alert_state")
    if not table.exists():
        table.create(STATE_COLUMNS, pk=("rule", "subject"))
    elif "notified_ts" not in table.columns_dict:
        table.add_column("notified_ts", float)
    return table


def transitions(store: Store, findings: Iterable[Finding], config: AlertConfig,
                now: float) -> list[Event]:
    """Compare findings with the stored state: the events to send (nothing is stored). An
    alert still firing is sent again once `repeat_interval` has passed since it was last
    sent."""
    table = _state_table(store)
    firing = {(r["rule"], r["subject"]): r for r in table.rows_where("state = 'firing'")}
    repeat_s = parse_duration(config.repeat_interval)
    at = iso_utc(now)
    events: list[Event] = []
    seen: set[tuple[str, str]] = set()
    for f in findings:
        key = (f.rule, f.subject)
        seen.add(key)
        row = firing.get(key)
        last = None if row is None else (row.get("notified_ts") or row.get("changed_ts") or 0)
        if last is not None and now - float(last) < repeat_s:
            continue
        events.append(Event(status="firing", rule=f.rule, kind=f.kind, subject=f.subject,
                            message=f.message, value=f.value, at=at, repeat=row is not None))
    rules = {r.label() for r in config.rules}
    for key, row in firing.items():
        if key in seen or key[0] not in rules:
            continue
        events.append(Event(status="resolved", rule=row["rule"], kind=row["kind"],
                            subject=row["subject"], message=f"resolved: {row['message']}",
                            at=at))
    return events


def record(store: Store, events: Iterable[Event], now: float) -> None:
    """Store delivered events, so the same alert is not sent again while it lasts (until the
    repeat interval)."""
    table = _state_table(store)
    with store.conn:
        for e in events:
            if e.repeat:
                table.update((e.rule, e.subject), {"notified_ts": now, "message": e.message,
                                                   "value": e.value})
                continue
            table.upsert({
                "rule": e.rule, "subject": e.subject, "kind": e.kind,
                "state": "firing" if e.status == "firing" else "resolved",
                "since": e.at, "changed_ts": now, "message": e.message, "value": e.value,
                "notified_ts": now,
            }, pk=("rule", "subject"))


# -- notification ------------------------------------------------------------------------


def payload(events: list[Event], fmt: str) -> dict[str, Any]:
    """One notification for every alert of a check (firing and resolved grouped, as
    Alertmanager groups them), through the secrets scrubber like every other output."""
    from realprobe.secrets import scrub_strings

    n_firing = sum(e.status == "firing" for e in events)
    status = "firing" if n_firing else "resolved"
    if fmt == "slack":
        lines = [
            f"{':red_circle:' if e.status == 'firing' else ':large_green_circle:'} "
            f"[{e.status.upper()}] {e.rule}: {e.message}"
            for e in sorted(events, key=lambda e: e.status)
        ]
        if len(lines) > 1:
            lines.insert(0, f"realprobe: {n_firing} firing, {len(events) - n_firing} resolved")
        body: dict[str, Any] = {"text": "\n".join(lines)}
    else:
        body = {
            "version": "1", "source": "realprobe", "status": status,
            "firing": n_firing, "resolved": len(events) - n_firing,
            "alerts": [e.model_dump() for e in events],
        }
    scrubbed: dict[str, Any] = scrub_strings(body)
    return scrubbed


def notify(events: list[Event], webhooks: list[Webhook],
           transport: httpx.AsyncBaseTransport | None = None) -> tuple[list[Event], list[str]]:
    """POST one grouped notification to each webhook, all at once, each within its
    `timeout_s` in total (a server that answers one byte at a time is cut at the deadline):
    (events every webhook took, failed deliveries). If a webhook did not take the group, its
    events stay pending and are sent again on the next check."""
    if not events or not webhooks:
        return list(events), []

    async def deliver_all() -> list[str | None]:
        async with httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(retries=1), follow_redirects=False
        ) as client:
            return list(await asyncio.gather(
                *(_deliver(client, hook, payload(events, hook.format)) for hook in webhooks)
            ))

    failures = [f for f in asyncio.run(deliver_all()) if f is not None]
    return ([] if failures else list(events)), failures


async def _deliver(client: httpx.AsyncClient, hook: Webhook, body: dict[str, Any]
                   ) -> str | None:
    """One POST under a total deadline; None when taken, else why not."""
    try:
        async with asyncio.timeout(hook.timeout_s):
            resp = await client.post(hook.url, json=body, timeout=hook.timeout_s)
    except TimeoutError:
        return f"{_where(hook.url)}: no answer within {hook.timeout_s:g}s"
    except httpx.HTTPError as exc:
        return f"{_where(hook.url)}: {type(exc).__name__}"
    if resp.status_code >= 300:
        return f"{_where(hook.url)}: HTTP {resp.status_code}"
    return None


def _where(url: str) -> str:
    """A webhook named without its path: Slack-style URLs carry their secret there."""
    u = httpx.URL(url)
    return f"{u.scheme}://{u.host}{':' + str(u.port) if u.port else ''}/..."


class CheckResult(BaseModel):
    findings: list[Finding]
    events: list[Event]
    delivery_failures: list[str] = Field(default_factory=list)
    dry_run: bool = False
    #: rules that could not fire because their rows are not there (e.g. no live rows in the
    #: window of a database of sandbox runs), one line each
    notes: list[str] = Field(default_factory=list)


def check(db: Database, config: AlertConfig, *, now: float | None = None,
          dry_run: bool = False, transport: httpx.AsyncBaseTransport | None = None
          ) -> CheckResult:
    """Evaluate every rule, work out what changed, and (unless dry) notify and store it."""
    now = time.time() if now is None else now
    findings = evaluate(db, config, now)
    notes = missing_rows(db, config, now)
    with db.write() as store:
        events = transitions(store, findings, config, now)
        failures: list[str] = []
        if not dry_run:
            delivered, failures = notify(events, config.webhooks, transport)
            record(store, delivered, now)
    return CheckResult(findings=findings, events=events, delivery_failures=failures,
                       dry_run=dry_run, notes=notes)


def missing_rows(db: Database, config: AlertConfig, now: float) -> list[str]:
    """One line per (target kind, window) of the rules that holds no rows, saying which kinds
    the window does hold: such rules cannot fire, which is not the same as all clear."""
    conn = db.read()
    try:
        cols = probe_columns(conn)
        out: list[str] = []
        for target, span in sorted({(r.target, r.for_ or r.window) for r in config.rules
                                    if r.kind != "cert_expiring"}):
            since = now - parse_duration(span)
            kinds = None if target == "all" else [target]
            where, params = conditions(cols, since, None, None, kinds, None)
            if conn.execute(f"SELECT 1 FROM probes WHERE {where} LIMIT 1", params).fetchone():
                continue
            where, params = conditions(cols, since, None, None, None, None)
            held = conn.execute(
                f"SELECT {kind_expr(cols)}, COUNT(*) FROM probes WHERE {where} GROUP BY 1",
                params,
            ).fetchall()
            there = ", ".join(f"{k} {n}" for k, n in held) or "no rows at all"
            what = "" if target == "all" else f"{target} "
            out.append(f"no {what}rows in the last {span} (the window holds: {there}); "
                       "rules on them cannot fire")
        return out
    finally:
        conn.close()


class RoundChecks:
    """Alert checks after a schedule's rounds, off the rounds' path: a round never waits for
    webhooks. A check still running when the next round ends is not started twice (the
    next round's check sees the same rows and more); `drain` waits for the last one."""

    def __init__(self, db: Database, config: AlertConfig,
                 say: Callable[[str], None]) -> None:
        self.db, self.config, self.say = db, config, say
        self._task: asyncio.Future[None] | None = None

    def after_round(self) -> None:
        """Start a check in a worker thread (call from the schedule's event loop)."""
        if self._task is not None and not self._task.done():
            self.say("alert check still running (slow webhooks); this round's check skipped")
            return
        self._task = asyncio.ensure_future(asyncio.to_thread(self._check))

    async def drain(self) -> None:
        if self._task is not None:
            await self._task

    def _check(self) -> None:
        """One check; a failure here never stops the schedule."""
        try:
            result = check(self.db, self.config)
        except RealprobeError as exc:
            self.say(f"alert check failed: {exc}")
            return
        for event in result.events:
            again = " (still firing)" if event.repeat else ""
            self.say(f"alert {event.status}{again}: {event.rule} / {event.subject}: "
                     f"{event.message}")
        for line in result.delivery_failures:
            self.say(f"webhook delivery failed: {line} (will retry)")
