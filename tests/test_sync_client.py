"""The synchronous client: same policies, and record/replay through the same cassettes."""

from __future__ import annotations

from pathlib import Path

import pytest

from realprobe import (
    Catalog,
    ClientConfig,
    Mode,
    RealprobeError,
    TransportOptions,
    call_tool_sync,
    make_sync_client,
)

FAST = ClientConfig(deadline_s=1.0, read_timeout_s=0.6)


def test_sync_record_then_replay_offline(
    catalog: Catalog, sandbox_factory, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    url = sandbox_factory("harsh", seed=5)
    cassette = tmp_path / "sync.json"
    tools = list(catalog)[:8]
    opts = TransportOptions(mode=Mode.RECORD, sandbox=url, cassette=cassette)
    with make_sync_client(catalog, opts, config=FAST) as client:
        live = [call_tool_sync(t, dict(t.examples[0]), client) for t in tools]
    assert cassette.exists()
    assert len({r.code for r in live}) >= 2  # harsh: a mix of outcomes was recorded
    replay_opts = TransportOptions(mode=Mode.REPLAY, cassette=cassette)
    with make_sync_client(catalog, replay_opts, config=FAST) as client:
        again = [call_tool_sync(t, dict(t.examples[0]), client) for t in tools]
    assert [(r.ok, r.code, r.data) for r in again] == [(r.ok, r.code, r.data) for r in live]


def test_sync_client_refuses_simulation(catalog: Catalog) -> None:
    with pytest.raises(RealprobeError, match="cannot simulate"):
        make_sync_client(catalog, TransportOptions(profile="calm"))
