"""Every HTTP server realprobe runs holds the same guards (`realprobe.serving`), tried the way
an attacker would: a web page driving the sandbox's /_admin (cross-origin `text/plain` POSTs,
DNS rebinding), bodies that are not JSON, runtime toxics that would break every later request,
a journal grown by long paths, a crafted path choosing the proxy's upstream host, half-sent
requests pinning the exporter, /probe spending an API's calls. Servers run on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from loopback_upstream import Upstream as LoopbackUpstream

from realprobe import Catalog, Mode, Sandbox, Store, TransportOptions, load_profile, open_db
from realprobe.http.simulate import routes_from_catalog
from realprobe.monitor.blackbox import BlackboxProber
from realprobe.monitor.exporter import Exporter, ExporterServer
from realprobe.sandbox.journal import Journal
from realprobe.sandbox.server import SandboxThread
from realprobe.sandbox.setup import sandbox_for
from realprobe.serving import Guard, Limits, off_loopback_warning

EVIL = "http://evil.example"


@pytest.fixture
def sandbox(catalog: Catalog) -> object:
    with SandboxThread(sandbox_for(catalog, "calm", latency_scale=0.0)) as url:
        yield url


def _state(url: str) -> dict[str, object]:
    return dict(httpx.get(f"{url}/_admin", timeout=5).json())


def test_a_web_page_cannot_drive_the_admin_api(sandbox: str) -> None:
    before = _state(sandbox)
    attempts = [
        # cross-origin, no preflight: text/plain and form bodies, and an empty POST
        ("PUT", "/_admin/profile?builtin=harsh", {"Origin": EVIL}, b""),
        ("POST", "/_admin/reset", {"Origin": EVIL, "Content-Type": "text/plain"}, b"x"),
        ("PUT", "/_admin/toxics/*/latency", {"Origin": EVIL, "Content-Type": "text/plain"},
         b'{"latency_ms": 5000}'),
        ("PUT", "/_admin/toxics/*/latency", {"Origin": "null"}, b'{"latency_ms": 5000}'),
        # same origin but not JSON: an HTML form can send these
        ("PUT", "/_admin/toxics/*/latency", {"Content-Type": "text/plain"},
         b'{"latency_ms": 5000}'),
        ("PUT", "/_admin/profile",
         {"Content-Type": "application/x-www-form-urlencoded"}, b'{"name": "x"}'),
        # DNS rebinding: the page's own name, now pointing at 127.0.0.1
        ("PUT", "/_admin/profile?builtin=harsh", {"Host": "evil.example:8765"}, b""),
        ("GET", "/_journal", {"Host": "evil.example"}, b""),
    ]
    statuses = []
    for method, path, headers, body in attempts:
        r = httpx.request(method, sandbox + path, headers=headers, content=body, timeout=5)
        statuses.append(r.status_code)
        assert r.headers.get("x-realprobe-error") in ("cross-origin", "not-json",
                                                      "foreign-host"), (path, r.text)
    assert statuses == [403, 403, 403, 403, 415, 415, 421, 421]
    assert _state(sandbox) == before  # nothing changed
    # the same changes, sent as a client would, still work
    ok = httpx.put(f"{sandbox}/_admin/toxics/*/latency", json={"latency_ms": 1}, timeout=5)
    assert ok.status_code == 200
    same_origin = httpx.put(f"{sandbox}/_admin/profile?builtin=calm", timeout=5,
                            headers={"Origin": sandbox})
    assert same_origin.status_code == 200


def test_runtime_toxics_are_validated_like_files(sandbox: str) -> None:
    for body in (b'{"type": "bandwidth", "rate": 1e309}', b'{"latency_ms": 1e400}',
                 b'{"type": "latency", "latency_ms": 1e300}', b'{"rate": NaN}'):
        r = httpx.put(f"{sandbox}/_admin/toxics/*/bandwidth" if b"rate" in body
                      else f"{sandbox}/_admin/toxics/*/latency", content=body,
                      headers={"Content-Type": "application/json"}, timeout=5)
        assert r.status_code == 400, (body, r.text)
        assert r.headers["x-realprobe-error"] == "admin"
    profile = (b'{"format": "realprobe-profile/1", "tools": {}, '
               b'"toxics": {"*": [{"type": "bandwidth", "rate": 1e309}]}}')
    r = httpx.put(f"{sandbox}/_admin/profile", content=profile,
                  headers={"Content-Type": "application/json"}, timeout=5)
    assert r.status_code == 400 and "rate" in r.json()["error"]
    # every later request is still served
    for _ in range(3):
        assert httpx.get(f"{sandbox}/agify/?name=ann", timeout=5).status_code == 200


@pytest.mark.parametrize(
    "default",
    [
        '{"success_rate": 1, "latency_ms": {"p50": -5, "p90": 10, "p99": 20}}',
        '{"success_rate": 0.5, "errors": {"TIMEOUT": Infinity}}',
        '{"success_rate": 1, "latency_ms": {"p50": 10, "p90": 20, "p99": 1e300}}',
        '{"success_rate": 0.5, "errors": {"RATE_LIMIT_ERROR": 1}, "retry_after": '
        '{"RATE_LIMIT_ERROR": {"share": 1, "values": [[1e300, 1]]}}}',
        '{"success_rate": 1, "latency_ms": {"lognormal": {"mu": 900, "sigma": 1}}}',
    ],
)
def test_runtime_profiles_with_impossible_numbers_are_refused(sandbox: str, default: str) -> None:
    """A profile put at runtime is checked like a file: no negative, non-finite or absurd
    latency or Retry-After, and the sandbox goes on serving."""
    body = '{"format": "realprobe-profile/1", "tools": {}, "default": ' + default + "}"
    r = httpx.put(f"{sandbox}/_admin/profile", content=body,
                  headers={"Content-Type": "application/json"}, timeout=5)
    assert r.status_code == 400, r.text
    for _ in range(3):
        assert httpx.get(f"{sandbox}/agify/?name=ann", timeout=5).status_code == 200


def test_the_journal_is_bounded_by_bytes(catalog: Catalog) -> None:
    budget = 256 * 1024
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0,
                 journal=Journal(max_bytes=budget))
    long_path = "/agify/?name=" + "a" * 8000
    with SandboxThread(sb) as url, httpx.Client(timeout=5) as client:
        for _ in range(150):  # 1.2 MB of paths
            client.get(url + long_path)
        answer = client.get(f"{url}/_journal")
        state = client.get(f"{url}/_admin").json()
    assert len(answer.content) <= budget
    assert sb.journal.bytes <= budget and state["journal_dropped"] > 100
    assert answer.json()[-1]["seq"] == 150  # the newest are kept


def test_a_request_path_never_chooses_the_proxy_upstream_host(catalog: Catalog) -> None:
    with LoopbackUpstream() as victim:
        port = victim.url.rsplit(":", 1)[1]
        sb = sandbox_for(catalog, "calm", latency_scale=0.0,
                         upstream="http://{api}.mirror.test:9/")
        with SandboxThread(sb) as url, socket.create_connection(
            ("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5
        ) as s:
            for api in (f"127.0.0.1:{port}#", f"127.0.0.1:{port}", f"x@127.0.0.1:{port}#"):
                s.sendall(f"GET /{api}/steal HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                head = s.recv(65536)
                assert head.startswith(b"HTTP/1.1 421"), head[:200]
                assert b"unknown-api" in head
        assert victim.requests == []


def test_unknown_api_is_labelled_and_stored_as_excluded(catalog: Catalog, tmp_path: Path
                                                       ) -> None:
    from probe_helpers import probe

    served = Catalog([catalog.apis["agify"]])
    missing = catalog.get("catfact_fact")
    with SandboxThread(sandbox_for(served, "calm", latency_scale=0.0)) as url:
        raw = httpx.get(f"{url}/catfact/fact", timeout=5)
        assert raw.status_code == 421 and raw.headers["x-realprobe-error"] == "unknown-api"
        db = tmp_path / "p.db"
        probe(catalog, [missing, catalog.get("agify_age")], 2, TransportOptions(sandbox=url),
              db, 5.0)
    with Store(db) as store:
        rows = {r["tool"]: r for r in store.db["probes"].rows}
    bad = rows["catfact_fact"]
    assert bad["excluded"] == 1 and bad["error_code"] == "OPERATION_FAILED"
    assert "realprobe sandbox" in bad["detail"] and "--catalog" in bad["detail"]
    assert not bad["detail"].startswith("HTTP ")  # the real host is not blamed
    assert rows["agify_age"]["excluded"] == 0 and rows["agify_age"]["request_id"]


def test_request_ids_are_echoed_and_journaled(sandbox: str) -> None:
    mine = httpx.get(f"{sandbox}/agify/?name=ann", headers={"X-Request-Id": "call-42"})
    made = httpx.get(f"{sandbox}/agify/?name=bob")
    odd = httpx.get(f"{sandbox}/agify/?name=eve", headers={"X-Request-Id": "a b\x7f"})
    assert mine.headers["x-request-id"] == "call-42"
    assert made.headers["x-request-id"] and odd.headers["x-request-id"] != "a b\x7f"
    journal = httpx.get(f"{sandbox}/_journal").json()
    assert [e["request_id"] for e in journal] == [
        "call-42", made.headers["x-request-id"], odd.headers["x-request-id"]]


def test_a_token_can_be_required(catalog: Catalog) -> None:
    token = "sandbox-token-0123456789"
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0,
                 auth_token=token)
    with SandboxThread(sb) as url:
        assert httpx.get(f"{url}/_admin").status_code == 401
        assert httpx.get(f"{url}/_admin", headers={"Authorization": "Bearer nope"}
                         ).status_code == 401
        assert httpx.get(f"{url}/_admin", headers={"Authorization": f"Bearer {token}"}
                         ).status_code == 200


def test_one_warning_wording_off_loopback() -> None:
    for what in ("sandbox", "exporter", "mcp"):
        assert off_loopback_warning(what, "127.0.0.1", token=False) is None
        line = off_loopback_warning(what, "0.0.0.0", token=False)
        assert line is not None and "--auth-token-env" in line and "\n" not in line
    assert Guard("0.0.0.0").host_ok("localhost:1") and not Guard("0.0.0.0").host_ok("0.0.0.0")
    assert Guard("0.0.0.0", ["box:9000"]).host_ok("box") and Guard("::", ["*"]).host_ok("x")


# -- the exporter -------------------------------------------------------------------------


def _half_sent(port: int, n: int) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(f"GET /metrics?{i} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
        socks.append(s)
    return socks


def test_half_sent_requests_do_not_pin_the_exporter(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    Store(db).close()
    server = ExporterServer(Exporter(open_db(db)), port=0, limits=Limits(header_timeout_s=1.0))
    port = int(server.url.rsplit(":", 1)[1])
    threads_before = threading.active_count()
    try:
        socks = _half_sent(port, 300)
        started = time.monotonic()
        # served meanwhile, and no thread per half-sent request
        assert httpx.get(f"{server.url}/-/healthy", timeout=5).status_code == 200
        assert threading.active_count() < threads_before + 20
        closed = 0
        for s in socks:
            s.settimeout(max(0.1, 15 - (time.monotonic() - started)))
            try:
                data = s.recv(4096)
                closed += data == b"" or data.startswith(b"HTTP/1.1 408")
            except ConnectionError:
                closed += 1  # reset by the server: closed as well
            except TimeoutError:
                pass  # still held: counted as not closed
            s.close()
        assert closed == 300
        assert time.monotonic() - started < 15
    finally:
        server.stop()


def test_exporter_refuses_foreign_hosts_and_origins(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    Store(db).close()
    server = ExporterServer(Exporter(open_db(db)), port=0)
    try:
        assert httpx.get(f"{server.url}/metrics", headers={"Host": "evil.example"}
                         ).status_code == 421
        assert httpx.get(f"{server.url}/probe?tool=x", headers={"Origin": EVIL}
                         ).status_code == 403
        assert httpx.post(f"{server.url}/metrics", content=b"x").status_code == 405
        assert httpx.get(f"{server.url}/metrics").status_code == 200
    finally:
        server.stop()


def _slow_api(catalog: Catalog, delay_ms: int) -> tuple[SandboxThread, str]:
    sb = sandbox_for(catalog, "calm", latency_scale=0.0,
                     toxics=[f"agify:latency:latency_ms={delay_ms}"])
    thread = SandboxThread(sb)
    return thread, thread.start()


def test_probe_endpoint_keeps_in_flight_limits_and_retry_after(catalog: Catalog,
                                                              tmp_path: Path) -> None:
    """While one call is in flight (the host's slot held: waited on, not timed), every other
    scrape is answered from the store; a 429 with Retry-After 3600 holds every later one."""
    from realprobe import Politeness, PolitenessConfig
    from realprobe.hosts import host_key

    thread, url = _slow_api(catalog, 4000)
    db = tmp_path / "p.db"
    Store(db).close()
    one = PolitenessConfig(override=Politeness(max_in_flight=1, min_interval_s=0, jitter_s=0))
    prober = BlackboxProber(catalog, TransportOptions(mode=Mode.LIVE, sandbox=url), open_db(db),
                            timeout_s=30, politeness=one)
    server = ExporterServer(Exporter(open_db(db), prober=prober), port=0)
    tool = catalog.get("agify_age")
    try:
        with httpx.Client(timeout=60) as client:
            def scrape() -> str:
                r = client.get(f"{server.url}/probe", params={"tool": "agify_age"})
                return r.headers.get("x-realprobe-cached", "")

            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(1) as pool:
                first_call = pool.submit(scrape)
                deadline = time.monotonic() + 60  # a bound on a hung test, not a margin
                while not (prober._gates and prober._gates.limiter(
                        host_key(tool.api), one.for_api(tool.api)).slots.locked()):
                    assert time.monotonic() < deadline and not first_call.done()
                    time.sleep(0.01)
                others = [scrape() for _ in range(6)]
                reasons = [first_call.result(), *others]
        journal = httpx.get(f"{url}/_journal").json()
        assert len(journal) == 1, reasons  # one call in flight, six answered from the store
        assert sorted(reasons) == ["", *["in-flight"] * 6]
        # an API answering 429 Retry-After: 3600 gets no more calls for an hour
        httpx.put(f"{url}/_admin/profile", json={"tools": {"agify_age": {
            "success_rate": 0.0, "errors": {"RATE_LIMIT_ERROR": 1.0},
            "retry_after": {"RATE_LIMIT_ERROR": {"n": 1, "share": 1.0,
                                                 "values": [[3600, 1]]}}}}})
        httpx.delete(f"{url}/_admin/toxics")
        first = httpx.get(f"{server.url}/probe", params={"tool": "agify_age"}, timeout=30)
        assert "x-realprobe-cached" not in first.headers
        later = [httpx.get(f"{server.url}/probe", params={"tool": "agify_age"}, timeout=30)
                 for _ in range(8)]
        assert {r.headers.get("x-realprobe-cached") for r in later} == {"retry-after"}
        assert len(httpx.get(f"{url}/_journal").json()) == 2
    finally:
        server.stop()
        thread.stop()


def test_probe_leaves_a_budget_share_for_scheduled_probes(tmp_path: Path) -> None:
    from realprobe import ApiSpec

    with LoopbackUpstream() as up:
        api = ApiSpec.model_validate({
            "id": "local", "name": "Local", "docs_url": "https://example.org",
            "category": "Test", "base_url": up.url, "https": False,
            "politeness": {"min_interval_s": 0, "jitter_s": 0, "daily_budget": 10},
            "tools": [{"name": "local_get", "title": "t", "description": "d", "path": "/v",
                       "output": {"n": {"from": "n", "type": "integer"}}, "examples": [{}],
                       "fixtures": [{"body": '{"n": 1}', "source": "test"}]}],
        })
        db = tmp_path / "p.db"
        Store(db).close()
        prober = BlackboxProber(Catalog([api]), TransportOptions(mode=Mode.LIVE), open_db(db),
                                timeout_s=5)
        try:
            answers = [prober.probe("local_get").cached for _ in range(8)]
        finally:
            prober.close()
    assert answers == [None] * 5 + ["budget"] * 3  # half of 10 is left to the schedule
    assert len(up.requests) == 5


def test_sigterm_marks_the_exporter_run_finished(catalog: Catalog, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    with SandboxThread(sandbox_for(catalog, "calm", latency_scale=0.0)) as url:
        db = tmp_path / "p.db"
        proc = subprocess.Popen(
            [sys.executable, "-m", "realprobe.cli", "exporter", "--port", "0", "--db", str(db),
             "--sandbox", url], stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            base = line.split(" on ", 1)[1].split(" ", 1)[0]
            assert httpx.get(f"{base}/probe", params={"tool": "agify_age"},
                             timeout=10).status_code == 200
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    with Store(db) as store:
        runs = list(store.db["probe_runs"].rows)
    assert [r["status"] for r in runs] == ["done"]


def test_the_mcp_protocol_closes_half_sent_requests() -> None:
    import uvicorn

    from realprobe.mcp.guards import GuardedApp, guarded_h11

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(GuardedApp(app, Guard("127.0.0.1")), log_level="error",
                            http=guarded_h11(0.5), lifespan="off")
    server = uvicorn.Server(config)
    loop_thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])),
                                   daemon=True)
    loop_thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        socks = _half_sent(port, 50)
        started = time.monotonic()
        assert httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": "evil.example"}
                         ).status_code == 421
        for s in socks:
            s.settimeout(10)
            assert s.recv(4096) == b""
            s.close()
        assert time.monotonic() - started < 8
    finally:
        server.should_exit = True
        loop_thread.join(10)


def test_runtime_toxics_are_capped(catalog: Catalog) -> None:
    from realprobe.sandbox.admin import MAX_RUNTIME_TOXICS, Admin
    from realprobe.sandbox.runtime import Runtime

    admin = Admin(Runtime(load_profile("calm")), Journal(), {})
    body = b'{"type": "latency", "latency_ms": 1}'
    statuses = [admin.handle("PUT", f"/_admin/toxics/*/t{i}", "", body).status
                for i in range(MAX_RUNTIME_TOXICS + 3)]
    assert statuses.count(200) == MAX_RUNTIME_TOXICS and statuses[-3:] == [400] * 3
    assert admin.handle("PUT", "/_admin/toxics/*/t0", "", body).status == 200  # a replacement


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for the server's own counters, not for time (bounded: a hang fails)."""
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, f"the server never {what}"
        time.sleep(0.01)


def test_connections_and_buffered_bytes_are_capped(catalog: Catalog) -> None:
    sb = Sandbox(routes_from_catalog(catalog), load_profile("calm"), latency_scale=0.0)
    sb.limits = Limits(header_timeout_s=5, max_connections=4, max_buffered=100_000)
    with SandboxThread(sb) as url:
        port = int(url.rsplit(":", 1)[1])
        head = (b"POST /_admin/seed HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 90000\r\n\r\n")
        first = socket.create_connection(("127.0.0.1", port), timeout=5)
        first.sendall(head + b" " * 60_000)  # held, not complete
        _until(lambda: sb.buffered >= 60_000, "buffered the first body")
        second = socket.create_connection(("127.0.0.1", port), timeout=5)
        second.sendall(head + b" " * 60_000)
        assert second.recv(100).startswith(b"HTTP/1.1 503")  # 120 kB > 100 kB in flight
        more = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
        assert more[-1].recv(100).startswith(b"HTTP/1.1 503")  # the fifth connection
        for s in (first, second, *more):
            s.close()
        _until(lambda: sb.buffered == 0 and not sb._conns, "let the connections go")
        assert httpx.get(f"{url}/_health", timeout=5).status_code == 200


def test_every_server_command_warns_in_one_line_off_loopback(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    from realprobe.commands.common import server_guards

    monkeypatch.setenv("RP_GUARD_TOKEN", "guard-token-0123456789")
    lines = []
    for what in ("sandbox", "exporter", "mcp"):
        assert server_guards(what, "127.0.0.1", None, None) == ((), None)
        allowed, token = server_guards(what, "0.0.0.0", ["box.example"], None)
        assert allowed == ("box.example",) and token is None
        out = capsys.readouterr().err.strip().splitlines()
        assert len(out) == 1 and out[0].startswith(f"realprobe {what}: warning:")
        lines.append(out[0].replace(what, "SERVER"))
        _, token = server_guards(what, "0.0.0.0", None, "RP_GUARD_TOKEN")
        assert token == "guard-token-0123456789"
        assert "token is required" in capsys.readouterr().err
    assert len(set(lines)) == 1  # the same wording everywhere
    with pytest.raises(Exception, match="not a URL"):
        server_guards("sandbox", "127.0.0.1", ["http://box"], None)
