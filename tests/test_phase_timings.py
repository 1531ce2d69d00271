"""Phase timings (DNS, connect, TLS, first byte, transfer) and the certificate's expiry."""

from __future__ import annotations

from pathlib import Path

import pytest
from tls_helpers import tls_server

from realprobe import (
    ApiSpec,
    Catalog,
    Mode,
    Store,
    TransportOptions,
    call_tool,
    call_tool_sync,
    make_client,
    make_sync_client,
    stats,
)


def _catalog(base_url: str) -> Catalog:
    api = ApiSpec.model_validate({
        "id": "tlsecho", "name": "TLS echo", "base_url": base_url,
        "docs_url": "https://example.org", "category": "Test", "https": True,
        "tools": [{
            "name": "tlsecho_get", "title": "t", "description": "d", "path": "/v",
            "output": {"v": {"from": "v", "type": "integer"}},
            "examples": [{}],
            "fixtures": [{"body": '{"v": 1}', "source": "test"}],
        }],
    })
    return Catalog([api])


def _check(phases: dict[str, float], latency_ms: float, new: bool) -> None:
    parts = sum(phases[k] for k in ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "transfer_ms"))
    assert parts <= latency_ms + 1.0
    # what is not in a phase is our own bookkeeping around the request: small on loopback
    assert latency_ms - parts < max(25.0, 0.25 * latency_ms), (phases, latency_ms)
    assert phases["ttfb_ms"] >= 100.0  # the server waits 0.15 s before answering
    assert phases["new_connection"] is new
    if new:
        assert phases["dns_ms"] > 0 and phases["connect_ms"] > 0 and phases["tls_ms"] > 0
    else:
        assert phases["dns_ms"] == phases["connect_ms"] == phases["tls_ms"] == 0


async def test_async_phases_add_up_and_the_certificate_expiry_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tls_server(tmp_path, days=42, delay_s=0.15) as server:
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert_file))
        cat = _catalog(server.url)
        tool = cat.get("tlsecho_get")
        async with make_client(cat, TransportOptions(mode=Mode.LIVE)) as client:
            first = await call_tool(tool, {}, client, timeout_s=5)
            second = await call_tool(tool, {}, client, timeout_s=5)
    assert first.ok, first.summary()
    assert first.phases is not None and second.phases is not None
    _check(first.phases, first.latency_ms, new=True)
    _check(second.phases, second.latency_ms, new=False)
    assert first.phases["tls_expires_ts"] == pytest.approx(server.not_after.timestamp(), abs=1)
    assert first.phases["tls_issuer"] == server.issuer
    assert second.phases["tls_expires_ts"] is None  # reused connection: no handshake seen


def test_sync_client_measures_the_same_phases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tls_server(tmp_path, days=3, delay_s=0.15) as server:
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert_file))
        cat = _catalog(server.url)
        with make_sync_client(cat, TransportOptions(mode=Mode.LIVE)) as client:
            result = call_tool_sync(cat.get("tlsecho_get"), {}, client, timeout_s=5)
    assert result.ok and result.phases is not None
    _check(result.phases, result.latency_ms, new=True)
    assert result.phases["tls_expires_ts"] == pytest.approx(server.not_after.timestamp(), abs=1)


async def test_probe_rows_store_phases_and_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from realprobe import PolitenessConfig, run_probes

    with tls_server(tmp_path, days=10, delay_s=0.15) as server:
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert_file))
        cat = _catalog(server.url)
        with Store(tmp_path / "p.db") as store:
            async with make_client(cat, TransportOptions(mode=Mode.LIVE)) as client:
                await run_probes(
                    cat, None, 2, client, store, timeout_s=5,
                    politeness=PolitenessConfig.off(),
                )
            rows = list(store.db["probes"].rows)
    assert len(rows) == 2 and all(r["outcome"] == "ok" for r in rows)
    first = rows[0]
    assert first["new_connection"] == 1 and first["tls_ms"] > 0 and first["ttfb_ms"] >= 100
    assert first["tls_expires_ts"] == pytest.approx(server.not_after.timestamp(), abs=1)
    assert first["tls_issuer"] == server.issuer

    phases = stats(tmp_path / "p.db").phases["tlsecho_get"]
    assert phases["n"] == 2 and phases["new_connections"] >= 1
    assert phases["tls_ms"] > 0 and phases["ttfb_ms"] >= 100
    assert phases["slowest"] == "ttfb_ms"  # the server thinks for 0.15 s


def test_phase_row_has_every_field() -> None:
    """The row is built field by field (no `asdict` per call): it must not miss a field."""
    from dataclasses import fields

    from realprobe.http.phases import Phases

    p = Phases(dns_ms=1.0, tls_issuer="x", tls_expires_ts=2.0, new_connection=True)
    assert p.as_row() == {f.name: getattr(p, f.name) for f in fields(Phases)}
