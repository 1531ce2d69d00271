"""The scrubber runs before anything is cut short and on every output: error snippets (the
`detail` of a probe), the table output of `realprobe call`, and fixture bodies and sources
recorded by `catalog record-fixtures`. Tried the way a careless server would leak: the key
echoed where a cut falls, raw and in base64, and in a redirect."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from cli_runner import invoke

from realprobe import Catalog, TransportOptions, call_tool_sync, make_sync_client
from realprobe.secrets import (
    Redactor,
    clip,
    forget_all,
    redact_json,
    remember,
    scrub_strings,
    scrub_url,
    secret_field,
)
from tests.loopback_http import serving

KEY = "CNRYcutkey-0123456789abcdefghij"
PATHKEY = "CNRYpathkey-9876543210"
JSON = "application/json"


def pieces(secret: str, n: int = 8) -> list[str]:
    """Every run of `n` characters of the secret (half a key is still a leak)."""
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


def leaked(text: str, *secrets: str) -> list[str]:
    out = []
    for s in secrets:
        b64 = base64.b64encode(s.encode()).decode()
        out += [p for p in pieces(s) + pieces(b64, 12) if p in text]
    return out


def catalogue(base: str, folder: Path) -> Path:
    text = f"""
[[apis]]
id = "leaky"
name = "Leaky"
base_url = "{base}"
docs_url = "{base}/docs"
category = "test"
https = false
in_public_apis = false
[apis.politeness]
min_interval_s = 0.0
jitter_s = 0.0
max_in_flight = 4

[[apis.tools]]
name = "leaky_denied"
title = "Denied"
description = "Answers 401 echoing the key where the snippet is cut."
path = "/deny"
query = {{ api_key = "{{key}}" }}
examples = [{{ key = "{KEY}" }}]
[apis.tools.input.key]
required = true
[apis.tools.output.fact]
from = "fact"

[[apis.tools]]
name = "leaky_echo"
title = "Echo"
description = "Echoes its credentials in the body."
path = "/v1/{{account}}/echo"
query = {{ api_key = "{{key}}" }}
examples = [{{ account = "{PATHKEY}", key = "{KEY}" }}]
[apis.tools.input.account]
required = true
secret = true
[apis.tools.input.key]
required = true
[apis.tools.output.fact]
from = "fact"
"""
    folder.mkdir(exist_ok=True)
    path = folder / "leaky.toml"
    path.write_text(text)
    return path


def routes() -> dict[str, tuple[int, str, bytes]]:
    # the key starts at byte 100 of the body: a 120-byte snippet cut keeps its first 20 bytes
    deny = ("x" * 100 + KEY + " was refused").encode()
    echo = json.dumps({
        "fact": "cats sleep", "seen": KEY, "seen_b64": base64.b64encode(KEY.encode()).decode(),
        "path": PATHKEY, "path_b64": base64.b64encode(PATHKEY.encode()).decode(),
        "token_count": 12,
    }).encode()
    return {"/deny": (401, "text/plain", deny),
            f"/v1/{quote(PATHKEY)}/echo": (200, JSON, echo)}


def test_clip_scrubs_before_it_cuts() -> None:
    forget_all()
    remember(KEY)
    text = "y" * 100 + KEY
    assert leaked(clip(text, 120), KEY) == []
    assert leaked(text[:120], KEY)  # what a plain cut would have kept


def test_an_error_snippet_never_keeps_half_a_key(tmp_path: Path) -> None:
    forget_all()
    with serving(routes()) as up:
        cat = Catalog.load([catalogue(up.url, tmp_path / "cat")])
        with make_sync_client(cat, TransportOptions()) as client:
            result = call_tool_sync(cat.get("leaky_denied"), {"key": KEY}, client)
    assert result.error is not None and "401" in result.error.message
    assert leaked(result.error.message, KEY) == []
    assert leaked(result.error.message[:500], KEY) == []  # the probes `detail` cut


def test_the_call_table_output_prints_no_secret(tmp_path: Path) -> None:
    forget_all()
    with serving(routes()) as up:
        cat_file = catalogue(up.url, tmp_path / "cat")
        res = invoke(["call", "leaky_denied", "--catalog", str(cat_file),
                      "--arg", f"key={KEY}"])
    assert "401" in res.output, res.output
    assert leaked(res.output, KEY) == []


def test_record_fixtures_stores_no_echoed_credential(tmp_path: Path) -> None:
    forget_all()
    with serving(routes()) as up:
        cat_file = catalogue(up.url, tmp_path / "cat")
        out = tmp_path / "with-fixtures.json"
        res = invoke(["catalog", "record-fixtures", str(cat_file),
                      "--tools", "leaky_echo", "--interval", "0",
                      "-o", str(out)])
        assert res.exit_code == 0, res.output
    assert leaked(res.output, KEY, PATHKEY) == []
    # the catalogue's own examples are the user's text; the recorded fixture must be clean
    (tool,) = [t for a in json.loads(out.read_text())["apis"] for t in a["tools"]
               if t["name"] == "leaky_echo"]
    (fixture,) = tool["fixtures"]
    assert leaked(json.dumps(fixture), KEY, PATHKEY) == []
    assert leaked(fixture["source"], KEY, PATHKEY) == [] and "/echo" in fixture["source"]
    body = json.loads(fixture["body"])
    assert body["fact"] == "cats sleep" and body["token_count"] == 12  # the data is kept


def test_json_stays_valid_and_only_string_values_change() -> None:
    text = ('{"reset": 1700000123, "app_id_echo": 987654321, "token": "tok-123456",\n'
            ' "next_token": "b26v89c19z", "tok-123456": 1, "note": "sent tok-123456",'
            ' "promptTokenCount": 5}')
    found: list[str] = []
    named = redact_json(text, secret=secret_field, found=found)
    assert found == ["tok-123456"]
    clean = redact_json(named, redactor=Redactor([*found, "987654321"]))
    data = json.loads(clean)
    assert data == {"reset": 1700000123, "app_id_echo": "REDACTED", "token": "REDACTED",
                    "next_token": "b26v89c19z", "tok-123456": 1, "note": "sent REDACTED",
                    "promptTokenCount": 5}  # the key that looks like the secret is kept
    assert clean.startswith('{"reset": 1700000123, ') and ',\n "next_token"' in clean


@pytest.mark.parametrize(("url", "want"), [
    # the URL's own parse decides: an OAuth word in the host alone is no OAuth path
    ("https://oauth.example.com/cb?code=1", "https://oauth.example.com/cb?code=1"),
    ("https://h/oauth/callback?code=abc&state=xyz",
     "https://h/oauth/callback?code=REDACTED&state=REDACTED"),
    ("https://h/p?api\tkey=s3cr3t", "https://h/p?apikey=REDACTED"),  # tabs dropped, as parsed
    ("HTTPS://h/p?api_key=s3cr3t&x=1", "https://h/p?api_key=REDACTED&x=1"),
    ("https://h/p?q=1&api%5Fkey=s3cr3t", "https://h/p?q=1&api%5Fkey=REDACTED"),
    ("https://h/p?q=a+b%20c&x=1", "https://h/p?q=a+b%20c&x=1"),
])
def test_scrub_url_without_and_with_parsing_agree(url: str, want: str) -> None:
    assert scrub_url(url) == want


def test_printed_json_scrubs_strings_and_keeps_every_other_value() -> None:
    """`print_json`'s scrub: strings at any depth lose their secrets; numbers, booleans and
    nulls come out as the very same objects (the same printed bytes), tuples as lists."""

    values = [0.1 + 0.2, 2.3199870243169578e-06, 7, True, False, None, float("nan")]
    doc = {"n": values, "deep": [{"url": "https://x.test/?api_key=hunter2hunter2"}, (1, "ok")]}
    out = scrub_strings(doc)
    assert all(a is b for a, b in zip(out["n"], values, strict=True))
    assert "hunter2" not in json.dumps(out) and out["deep"][1] == [1, "ok"]
    assert json.dumps(out["n"]) == json.dumps(values)
