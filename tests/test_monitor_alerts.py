"""Alerts fire once and resolve once, against a loopback webhook receiver."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from monitor_helpers import write_rows

from realprobe import RealprobeError, open_db
from realprobe.monitor.alerts import Event, check, load_rules, payload

T0 = 1_790_000_000.0


class Receiver:
    def __init__(self) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.fail_next = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.fail_next:
                    receiver.fail_next -= 1
                    self.send_response(503)
                else:
                    receiver.posts.append((self.path, json.loads(body)))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        out, self.posts = self.posts, []
        return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


def rules_file(tmp_path: Path, receiver: Receiver, body: str) -> Path:
    path = tmp_path / "alerts.toml"
    path.write_text(f"""
[[webhooks]]
url = "{receiver.url}/json"

[[webhooks]]
url = "{receiver.url}/slack"
format = "slack"
{body}""")
    return path


def test_a_burst_fires_once_and_the_recovery_resolves_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "p.db"
    config = load_rules(rules_file(tmp_path, receiver, """
[[rules]]
name = "agify-success"
kind = "success_below"
threshold = 0.9
window = "10m"
min_calls = 5
"""))
    write_rows(db, "agify_age", "o" * 20, t0=T0)
    assert check(open_db(db), config, now=T0 + 200).events == []

    # a degraded stretch (two calls in three fail): the quoted interval knows its n
    write_rows(db, "agify_age", "xxo" * 10, t0=T0 + 200, run_id="burst")
    fired = check(open_db(db), config, now=T0 + 360)
    assert [(e.status, e.subject) for e in fired.events] == [("firing", "agify_age")]
    posts = receiver.take()
    assert sorted(p for p, _ in posts) == ["/json", "/slack"]
    payload = dict(posts)
    assert payload["/json"]["status"] == "firing"
    (alert,) = payload["/json"]["alerts"]
    assert alert["rule"] == "agify-success" and "below 90%" in alert["message"]
    assert payload["/slack"]["text"].startswith(":red_circle: [FIRING] agify-success")

    for later in (T0 + 370, T0 + 380, T0 + 390):  # still firing: nothing new is sent
        again = check(open_db(db), config, now=later)
        assert again.findings and again.events == []
    assert receiver.take() == []

    write_rows(db, "agify_age", "o" * 60, t0=T0 + 400, run_id="recovered")
    resolved = check(open_db(db), config, now=T0 + 1000)
    assert [(e.status, e.subject) for e in resolved.events] == [("resolved", "agify_age")]
    assert [p["status"] for path, p in receiver.take() if path == "/json"] == ["resolved"]
    assert check(open_db(db), config, now=T0 + 1010).events == []
    assert receiver.take() == []


def test_a_failed_delivery_is_sent_again_on_the_next_check(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "p.db"
    config = load_rules(rules_file(tmp_path, receiver, """
[[rules]]
kind = "no_success"
for = "5m"
"""))
    write_rows(db, "catfact_fact", "o" + "x" * 60, t0=T0)
    receiver.fail_next = 1
    first = check(open_db(db), config, now=T0 + 610)
    assert first.delivery_failures and first.events
    second = check(open_db(db), config, now=T0 + 611)
    assert [e.status for e in second.events] == ["firing"]
    assert {p for p, _ in receiver.take()} == {"/json", "/slack"}
    assert check(open_db(db), config, now=T0 + 612).events == []


def test_p95_and_certificate_rules(tmp_path: Path, receiver: Receiver) -> None:
    db = tmp_path / "p.db"
    config = load_rules(rules_file(tmp_path, receiver, """
[[rules]]
kind = "p95_above"
threshold_ms = 1000
window = "1h"

[[rules]]
kind = "cert_expiring"
days = 14
"""))
    write_rows(db, "agify_age", "o" * 20, t0=T0, latency_ms=1500.0,
               extra={"tls_expires_ts": T0 + 5 * 86400, "tls_issuer": "Test CA"})
    write_rows(db, "catfact_fact", "o" * 20, t0=T0, run_id="r2", latency_ms=90.0,
               extra={"tls_expires_ts": T0 + 90 * 86400, "tls_issuer": "Test CA"})
    result = check(open_db(db), config, now=T0 + 300, dry_run=True)
    got = sorted((f.kind, f.subject) for f in result.findings)
    assert got == [("cert_expiring", "agify"), ("p95_above", "agify_age")]
    assert receiver.take() == []  # dry run: nothing sent ...
    assert len(check(open_db(db), config, now=T0 + 301).events) == 2  # ... and nothing stored


def test_bad_rules_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\nkind = "success_below"\n')
    with pytest.raises(RealprobeError, match="needs threshold"):
        load_rules(bad)
    bad.write_text('[[rules]]\nkind = "nonsense"\n')
    with pytest.raises(RealprobeError, match=r"rules\.0\.kind"):
        load_rules(bad)
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "alert", "check", str(bad),
         "--db", str(tmp_path / "x.db")],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 2 and res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr


def test_a_misspelt_kind_or_a_non_utf8_rules_file_is_a_one_line_error(tmp_path: Path) -> None:
    """A rule on kind "sandobx" would match no row and stay silent for ever."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\nkind = "p95_above"\nthreshold_ms = 5\ntarget = "sandobx"\n')
    with pytest.raises(RealprobeError, match=r"rules\.0\.target.*'sandobx': choose one of live"):
        load_rules(bad)
    bad.write_text('[[rules]]\nkind = "p95_above"\nthreshold_ms = 5\ntarget = "Sandbox"\n')
    assert load_rules(bad).rules[0].target == "sandbox"
    bad.write_bytes(b"\xff\xfe[[rules]]\n")
    with pytest.raises(RealprobeError, match="not UTF-8 text"):
        load_rules(bad)


def test_cli_dry_run_prints_and_exits_1_while_firing(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "p.db"
    write_rows(db, "agify_age", "x" * 20, t0=time.time() - 300, step_s=10)
    rules = rules_file(tmp_path, receiver, """
[[rules]]
kind = "success_below"
threshold = 0.9
window = "1h"
""")
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "alert", "check", str(rules), "--db", str(db),
         "--dry-run", "--json"],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 1, res.stderr
    out = json.loads(res.stdout)
    assert out["dry_run"] and out["events"][0]["status"] == "firing"
    assert receiver.take() == []


def test_schedule_checks_alerts_after_every_round(
    tmp_path: Path, receiver: Receiver, sandbox_factory: Any
) -> None:
    from realprobe import Profile

    down = Profile.model_validate({
        "format": "realprobe-profile/1",
        "tools": {"catfact_fact": {"n": 100, "success_rate": 0.0,
                                   "errors": {"SERVER_ERROR": 1.0}}},
    })
    url = sandbox_factory(down)
    rules = rules_file(tmp_path, receiver, """
[[rules]]
kind = "success_below"
threshold = 0.9
window = "1h"
min_calls = 3
target = "all"
""")
    db = tmp_path / "p.db"
    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "schedule", "--every", "1s", "--max-runs", "3",
         "--tools", "catfact_fact", "--rounds", "12", "--sandbox", url, "--politeness", "off",
         "--alerts", str(rules), "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    posts = [p for path, p in receiver.take() if path == "/json"]
    assert [p["status"] for p in posts] == ["firing"]  # rounds 2 and 3: still firing, silent
    assert posts[0]["alerts"][0]["subject"] == "catfact_fact"


def test_webhook_payloads_go_through_the_secrets_scrubber(monkeypatch: pytest.MonkeyPatch) -> None:
    """A message that carries a secret (a rule subject built from a URL with a key, a
    declared key's value) reaches the webhook redacted, in both formats."""

    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-0123456789abcdef0123")
    event = Event(
        status="firing", rule="r", kind="success_below", subject="https://x.test/?api_key=hunter2",
        message="calls to https://x.test/?api_key=hunter2 failed with "
        "sk-canary-0123456789abcdef0123",
        at="2026-01-01T00:00:00Z",
    )
    for fmt in ("json", "slack"):
        text = json.dumps(payload([event], fmt))
        assert "hunter2" not in text and "sk-canary" not in text, text
