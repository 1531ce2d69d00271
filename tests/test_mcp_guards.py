"""`realprobe mcp` holds: Host/Origin checks whatever it binds to (0.0.0.0 included), an
optional bearer token, capped and expiring sessions over HTTP; over stdio a malformed line is
answered with a JSON-RPC error and the server keeps serving. Clients connect to 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import httpx
import pytest

from realprobe.mcp.guards import line_problem
from realprobe.serving import Guard
from tests.test_mcp_transports import CLI, http_server

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def local(url: str) -> tuple[str, int]:
    """The URL on 127.0.0.1 (the server may print 0.0.0.0) and its port."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    return f"http://127.0.0.1:{port}/mcp", port


def initialize(url: str, **headers: str) -> httpx.Response:
    return httpx.post(url, json=INIT, headers={**HEADERS, **headers}, timeout=10)


def test_the_guard_keeps_the_checks_for_every_bind_address() -> None:
    for host in ("0.0.0.0", "::", "127.0.0.1", "192.0.2.10"):
        g = Guard(host)
        assert g.host_ok("127.0.0.1:8766") and g.host_ok("[::1]:1") and g.host_ok("localhost")
        assert not g.host_ok("evil.example") and not g.origin_ok("http://evil.example")
    assert Guard("192.0.2.10").host_ok("192.0.2.10:8766")
    assert not Guard("0.0.0.0").host_ok("0.0.0.0")
    wide = Guard("0.0.0.0", ["mcp.example.org", "box:9000"])
    assert wide.host_ok("mcp.example.org:443") and wide.host_ok("box")
    assert wide.origin_ok("https://mcp.example.org") and not wide.origin_ok("null")
    assert Guard("0.0.0.0", ["*"]).host_ok("anything.example")


def test_bound_to_all_interfaces_the_host_and_origin_checks_hold() -> None:
    with http_server("--host", "0.0.0.0") as (url, _):
        mcp_url, port = local(url)
        assert initialize(mcp_url, Host="evil.example").status_code == 421
        assert initialize(mcp_url, Host=f"evil.example:{port}").status_code == 421
        assert initialize(mcp_url, Origin="http://evil.example").status_code == 403
        assert initialize(mcp_url).status_code == 200
        assert initialize(mcp_url, Host=f"localhost:{port}",
                          Origin=f"http://localhost:{port}").status_code == 200


def test_allowed_host_widens_the_check() -> None:
    with http_server("--allowed-host", "mcp.example.org") as (url, _):
        mcp_url, port = local(url)
        ok = initialize(mcp_url, Host=f"mcp.example.org:{port}",
                        Origin="https://mcp.example.org")
        assert ok.status_code == 200
        assert initialize(mcp_url, Host="evil.example").status_code == 421


def test_a_bearer_token_can_be_required(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "rp-test-token-0123456789abcdef"
    monkeypatch.setenv("RP_MCP_TOKEN", token)
    with http_server("--auth-token-env", "RP_MCP_TOKEN") as (url, _proc):
        mcp_url, _ = local(url)
        assert initialize(mcp_url).status_code == 401
        assert initialize(mcp_url, Authorization="Bearer wrong-token").status_code == 401
        assert initialize(mcp_url, Authorization=f"Bearer {token}").status_code == 200
        assert initialize(mcp_url, Host="evil.example",
                          Authorization=f"Bearer {token}").status_code == 421


def test_a_missing_token_variable_is_a_one_line_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RP_NOPE"}
    proc = subprocess.run([*CLI, "--transport", "http", "--port", "0", "--auth-token-env",
                           "RP_NOPE"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --auth-token-env RP_NOPE") and \
        proc.stderr.count("\n") == 1


def initialize_from(source: str, url: str) -> httpx.Response:
    """An initialize request sent from another loopback address (another client)."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=source)) as client:
        return client.post(url, json=INIT, headers=HEADERS, timeout=10)


def test_sessions_are_capped_per_client_and_expire() -> None:
    with http_server("--max-sessions", "3", "--session-idle-timeout", "6") as (url, _):
        mcp_url, _ = local(url)
        assert [initialize(mcp_url).status_code for _ in range(3)] == [200, 200, 200]
        refused = initialize(mcp_url)  # a fourth session of this client is refused
        assert refused.status_code == 503 and "most one client may" in refused.text
        # the attacker's full cap locks out no one else: other clients still get sessions
        assert initialize_from("127.0.0.2", mcp_url).status_code == 200
        ended = initialize_from("127.0.0.3", mcp_url)
        sid = ended.headers["mcp-session-id"]
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3")) as c:
            assert c.delete(mcp_url, headers={**HEADERS, "Mcp-Session-Id": sid}).status_code \
                < 300
        assert [initialize_from("127.0.0.3", mcp_url).status_code for _ in range(3)] == [200] * 3
        deadline = time.monotonic() + 20
        status = 503
        while status == 503 and time.monotonic() < deadline:
            time.sleep(0.5)
            status = initialize(mcp_url).status_code
        assert status == 200  # the idle ones expired, making room


def test_stdio_answers_malformed_lines_and_keeps_serving() -> None:
    proc = subprocess.Popen(
        [*CLI, "--profile", "calm"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def read() -> dict[str, Any]:
        assert proc.stdout is not None
        return dict(json.loads(proc.stdout.readline()))

    try:
        send("this is not json")
        bad = read()
        assert bad["error"]["code"] == -32700 and bad["id"] is None
        send('{"jsonrpc": "2.0", "id": 7}')
        invalid = read()
        assert invalid["error"]["code"] == -32600 and invalid["id"] == 7
        send("[1, 2, 3]")
        assert read()["error"]["code"] == -32600
        send("")  # a blank line is skipped
        send('{"jsonrpc": "2.0", "id": 8, "method": ')  # truncated
        assert read()["error"]["code"] == -32700
        send(json.dumps(INIT))
        first = read()
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "realprobe"
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send("\x00\xff garbage again")
        assert read()["error"]["code"] == -32700
        send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        listed = read()
        assert listed["id"] == 2 and listed["result"]["tools"]
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0


def test_line_checks() -> None:
    assert line_problem('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None
    assert line_problem("  \n") is False
    err = line_problem("{")
    assert not isinstance(err, bool) and err is not None and err.error.code == -32700
    deep = "[" * 100_000 + "]" * 100_000
    err = line_problem(deep)
    assert not isinstance(err, bool) and err is not None and err.error.code in (-32700, -32600)


def test_stdio_from_a_file_answers_a_too_long_line_once(tmp_path) -> None:
    """The tail of a line over 16 MiB is never run as a call of its own."""
    from realprobe.mcp.serve import STDIN_LINE_LIMIT

    tail = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"})
    ready = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lines = [json.dumps(INIT), ready, " " * (STDIN_LINE_LIMIT + 10) + tail]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with path.open("rb") as stdin:
        proc = subprocess.run([*CLI, "--profile", "calm"], stdin=stdin, capture_output=True,
                              text=True, timeout=120)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, None], proc.stderr[-500:]  # never 99
    assert answers[1]["error"]["code"] == -32700 and "too long" in answers[1]["error"]["message"]
    assert proc.returncode == 0


def test_stdio_from_dev_null_exits_cleanly() -> None:
    with open(os.devnull, "rb") as stdin:
        proc = subprocess.run([*CLI, "--profile", "calm"], stdin=stdin, capture_output=True,
                              text=True, timeout=60)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stdout == ""
