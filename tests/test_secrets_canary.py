"""Canaries in every position (query under many names, headers, a path input declared secret, a
query input declared secret, a JSON body, OAuth redirects, the LLM key) go through record, probe,
MCP, tasks and report against a loopback echo server that reflects them raw, percent-encoded and
base64 in bodies, headers, Set-Cookie and Location. Then every file written is grepped."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

import httpx
import pytest
from cli_runner import invoke

from realprobe import Catalog, Mode, TransportOptions, make_client
from realprobe.cassettes.recording import RecordingTransport
from realprobe.cassettes.scrub import ScrubConfig
from realprobe.secrets import (
    LogScrubber,
    Redactor,
    forget_all,
    remember,
    scrub_text,
    secret_header,
    secret_name,
)

ACCESS = "CNRY:access/key+1"
SIG = "CNRYsig2~x y"
SESSION = "CNRYsession3&z"
HDR = "CNRYhdr4-abcdef"
BEARER = "CNRYbearer5.ghijk"
PATH = "CNRYpath6 mno"
QREF = "CNRYref10yz!"
BODY = "CNRYbody7/pqr"
CODE = "CNRYcode8stu"
STATE = "CNRYstate9vwx"
LLM_KEY = "sk-CNRYllm11-abcdef"
CANARIES = (ACCESS, SIG, SESSION, HDR, BEARER, PATH, QREF, BODY, CODE, STATE, LLM_KEY)


def forms(value: str) -> set[str]:
    raw = value.encode()
    b64 = base64.b64encode(raw).decode()
    url = base64.urlsafe_b64encode(raw).decode()
    out = {value, quote(value, safe=""), quote(value), quote_plus(value), b64, url,
           b64.rstrip("="), url.rstrip("=")}
    out |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), o) for o in out}
    return out


def leaks(folder: Path) -> list[str]:
    found = []
    for f in sorted(folder.rglob("*")):
        if not f.is_file():
            continue
        data = f.read_bytes()
        for canary in CANARIES:
            for form in forms(canary):
                if form.encode() in data:
                    found.append(f"{canary!r} as {form!r} in {f.name}")
    return found


class EchoHandler(BaseHTTPRequestHandler):
    """Reflects every part of the request: decoded, percent-encoded and base64."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query))
        values = [path, *query.values(), *self.headers.values(), body]
        host = self.headers.get("Host", "")
        if parts.path.startswith("/redir"):
            self.send_response(302)
            target = (f"http://{host}/callback?code={quote(CODE)}&state={quote(STATE)}"
                      f"&next={quote(path, safe='')}")
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status = 401 if parts.path.startswith("/deny") else 200
        echo = {
            "path": path,
            "query": query,
            "headers": dict(self.headers.items()),
            "body": body,
            "percent": [quote(v, safe="") for v in values],
            "base64": [base64.b64encode(v.encode()).decode() for v in values],
            "fact": "cats sleep a lot",
        }
        payload = json.dumps(echo).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", f"sid={quote(path, safe='')}; Path=/; HttpOnly")
        self.send_header("X-Echo-Query", " ".join(query.values()))
        self.send_header("X-Echo-B64", base64.b64encode(path.encode()).decode())
        self.send_header("X-Echo-Auth", self.headers.get("Authorization", ""))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _answer
    do_POST = _answer


@pytest.fixture
def echo_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def catalogue(base: str, folder: Path) -> Path:
    tools = []
    for name, path in (("echo_all", "/v1/{account}/echo"), ("echo_redirect", "/redir/{account}"),
                       ("echo_denied", "/deny/{account}")):
        tools.append(f"""
[[apis.tools]]
name = "{name}"
title = "Echo"
description = "Reflects the request."
path = "{path}"
query = {{ accessKey = "{{access}}", sig_v2 = "{{sig}}", session_id = "{{session}}", \
ref = "{{ref}}" }}
headers = {{ "X-Api-Key" = "{HDR}", Authorization = "Bearer {BEARER}" }}
examples = [{{ account = "{PATH}", access = "{ACCESS}", sig = "{SIG}", \
session = "{SESSION}", ref = "{QREF}" }}]
[apis.tools.input.account]
secret = true
required = true
[apis.tools.input.access]
required = true
[apis.tools.input.sig]
secret = true
required = true
[apis.tools.input.session]
required = true
[apis.tools.input.ref]
secret = true
required = true
[apis.tools.output.fact]
from = "fact"
""")
    text = f"""
[[apis]]
id = "echo"
name = "Echo"
base_url = "{base}"
docs_url = "{base}/docs"
category = "test"
https = false
in_public_apis = false
[apis.politeness]
min_interval_s = 0.0
jitter_s = 0.0
max_in_flight = 4
""" + "".join(tools)
    folder.mkdir(exist_ok=True)
    path = folder / "echo.toml"
    path.write_text(text)
    return path


def test_the_name_rules_are_exact_credential_names() -> None:
    for name in ("accessKey", "session_id", "api_key", "apikey", "apiKey", "API-KEY", "token",
                 "access_token", "refresh_token", "client_secret", "signature", "password",
                 "passwd", "X-Amz-Credential", "key", "appid"):
        assert secret_name(name), name
    for name in ("author", "keyword", "q", "country_code", "prompt_tokens", "monkey", "auth",
                 "access", "assertion", "publisher", "next_token", "promptTokenCount",
                 "totalTokenCount", "x-access-level", "reset", "sig_v2", "tokenizer"):
        assert not secret_name(name), name
    for name in ("Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key"):
        assert secret_header(name), name
    for name in ("X-Access-Level", "X-RateLimit-Reset", "Access-Control-Allow-Headers",
                 "WWW-Authenticate", "X-Token-Count"):
        assert not secret_header(name), name
    text = "HTTP 401 from http://h/x?code=CNRYa1234&state=CNRYb5678 then redirect"
    assert "CNRYa1234" not in scrub_text(text) and "CNRYb5678" not in scrub_text(text)
    assert scrub_text("GET /alpha?code=de") == "GET /alpha?code=de"  # a country code stays


def test_no_canary_reaches_any_file(echo_url: str, tmp_path: Path, catalog: Catalog) -> None:
    forget_all()
    out = tmp_path / "out"
    out.mkdir()
    cat_file = catalogue(echo_url, tmp_path / "in")
    args = ["--catalog", str(cat_file)]

    # record through the CLI: every tool, recorded (cassettes, JSON and YAML)
    for i, tool in enumerate(("echo_all", "echo_redirect", "echo_denied")):
        for suffix in ("json", "yaml"):
            res = invoke(["call", tool, *args, "--mode", "record", "--cassette",
                          str(out / f"{tool}.{suffix}"), "--json"])
            (out / f"call-{i}-{suffix}.json").write_text(res.output)
            assert res.exit_code in (0, 1), res.output
    recorded = json.loads((out / "echo_all.json").read_text())
    assert "REDACTED" in json.dumps(recorded)
    # the redirect really was followed and the denied call really was an HTTP 401
    assert "callback" in (out / "echo_redirect.json").read_text()
    assert "401" in (out / "call-2-json.json").read_text()

    # the scrubbed recording still replays: declared secrets are scrubbed from the incoming
    # request the same way before matching
    forget_all()
    res = invoke(["call", "echo_all", *args, "--mode", "replay", "--cassette",
                  str(out / "echo_all.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["ok"] is True

    # a JSON request body and a form body, through the recording transport
    async def post() -> None:
        rec = RecordingTransport(httpx.AsyncHTTPTransport(), out / "bodies.json")
        async with httpx.AsyncClient(transport=rec) as client:
            await client.post(f"{echo_url}/v1/login", json={"user": "me", "password": BODY})
            await client.post(
                f"{echo_url}/v1/token", data={"grant_type": "x", "client_secret": BODY}
            )
            await client.get(f"{echo_url}/callback?code={quote(CODE)}&state={quote(STATE)}")

    asyncio.run(post())

    # probe rows (args, detail with the URL, redirects) and the run rows
    db = out / "probes.db"
    res = invoke(["probe", *args, "--tools", "echo_all,echo_redirect,echo_denied",
                  "--rounds", "2", "--db", str(db), "--json"])
    assert res.exit_code in (0, 1), res.output
    (out / "probe.json").write_text(res.output)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tool, outcome, args, detail, redirects FROM probes").fetchall()
    assert len(rows) == 6
    assert any(r[4] and "callback" in r[4] for r in rows)  # redirects kept, scrubbed
    assert any(r[3] and "HTTP 401" in r[3] for r in rows)
    for suffix in ("-wal", "-shm"):  # the WAL is grepped while it exists too
        wal = db.with_name(db.name + suffix)
        if wal.exists():
            (out / f"copy{suffix}").write_bytes(wal.read_bytes())

    # report and stats outputs
    for fmt in ("html", "json"):
        res = invoke(["report", "--db", str(db), "--format", fmt,
                      "-o", str(out / f"report.{fmt}")])
        assert res.exit_code == 0, res.output
    res = invoke(["stats", "--db", str(db), "--json"])
    (out / "stats.json").write_text(res.output)

    # MCP-served calls as rows
    from mcp import Client

    from realprobe import McpService, ServiceOptions

    mcp_db = out / "mcp.db"
    user_cat = Catalog.load([cat_file])

    async def serve() -> None:
        service = McpService(user_cat, ServiceOptions(transport=TransportOptions(),
                                                      db=str(mcp_db)))
        async with service, Client(service.server) as client:
            for tool in ("echo_all", "echo_redirect", "echo_denied"):
                await client.call_tool(tool, dict(user_cat.get(tool).examples[0]))

    asyncio.run(serve())
    with sqlite3.connect(mcp_db) as conn:
        assert conn.execute("SELECT count(*) FROM probes").fetchone()[0] == 3

    # the LLM key, echoed by the model into its final message, and a task row
    from realprobe import Store
    from realprobe.tasks.agents import LlmSettings
    from realprobe.tasks.store import TaskStore

    LlmSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key=LLM_KEY)
    with Store(out / "tasks.db") as store:
        TaskStore(store).insert_run(
            {"id": "r1", "final_message": f"Done. My key is {LLM_KEY} (base64 "
                                          f"{base64.b64encode(LLM_KEY.encode()).decode()})",
             "conditions": {"llm": {"api_key": LLM_KEY}}},
            [{"run_id": "r1", "idx": 0, "tool": "echo_all",
              "args": {"account": PATH, "accessKey": ACCESS},
              "message": f"HTTP 401 from {echo_url}/deny/x?accessKey={quote(ACCESS)}",
              "result": json.dumps({"echo": LLM_KEY})}],
        )

    problems = leaks(out)
    assert not problems, "\n".join(problems[:20])


def test_cassette_scrub_with_defaults_removes_what_recording_would(
    echo_url: str, tmp_path: Path
) -> None:
    """Recorded with scrubbing off, then `cassette scrub` in a fresh process state (no declared
    values remembered): the same canaries go as when recording scrubs."""
    forget_all()
    cat_file = catalogue(echo_url, tmp_path / "in")
    user_cat = Catalog.load([cat_file])
    (tmp_path / "out").mkdir()
    raw = tmp_path / "out" / "raw.json"

    async def record() -> None:
        opts = TransportOptions(mode=Mode.RECORD, cassette=raw, scrub=False)
        client = make_client(user_cat, opts)
        from realprobe import call_tool

        try:
            for tool in ("echo_all", "echo_redirect", "echo_denied"):
                await call_tool(user_cat.get(tool), dict(user_cat.get(tool).examples[0]), client,
                                timeout_s=5)
        finally:
            await client.aclose()

    asyncio.run(record())
    assert ACCESS in unquote(raw.read_text())
    forget_all()
    res = invoke(["cassette", "scrub", str(raw), "--catalog", str(cat_file),
                  "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["total"] > 10
    problems = leaks(tmp_path / "out")
    assert not problems, "\n".join(problems[:20])
    assert ScrubConfig().enabled


def test_echoes_inside_longer_encodings_are_found() -> None:
    secret = "CNRY/echo+12 ab"
    red = Redactor([secret])
    for prefix in ("", "a", "ab", "abc"):
        blob = base64.b64encode(f"{prefix}{secret}-tail".encode()).decode()
        cleaned = red.text(f"x={blob}")
        assert cleaned != f"x={blob}", prefix
        # what is left decodes to at most a couple of the secret's bytes on either side
        left = cleaned.split("=", 1)[1].split("REDACTED")
        assert len(left) == 2 and len(left[0]) <= len(prefix) * 4 // 3 + 3, (prefix, left)
    lower_hex = re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe=""))
    for form in (quote(secret, safe=""), quote_plus(secret), lower_hex,
                 json.dumps(secret)[1:-1], base64.urlsafe_b64encode(secret.encode()).decode()):
        assert "REDACTED" in red.text(f"[{form}]") and form not in red.text(f"[{form}]"), form


def test_log_lines_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    remember("CNRYlogsecret42")
    logger = logging.getLogger("realprobe.test.scrub")
    handler_filter = LogScrubber()
    caplog.handler.addFilter(handler_filter)
    try:
        logger.warning("calling %s?api_key=%s and %s", "http://h/x", "CNRYkey9876",
                       "CNRYlogsecret42")
    finally:
        caplog.handler.removeFilter(handler_filter)
    text = caplog.text
    assert "CNRYkey9876" not in text and "CNRYlogsecret42" not in text and "REDACTED" in text
