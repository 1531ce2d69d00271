"""The commands end to end: call --mode record/replay, record-round/replay-round, inspect,
verify; and the shipped sandbox cassette."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import invoke as cli_invoke

from realprobe import Catalog, data_dir, load_cassette


def invoke(*args: str) -> Any:
    result = cli_invoke(list(args))
    return result


def test_call_records_then_replays_offline_with_the_same_result(
    catalog: Catalog, sandbox_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sandbox_factory("harsh", seed=5)
    cassette = tmp_path / "calls.json"
    tools = [t.name for t in catalog][:6]
    recorded = []
    for name in tools:
        r = invoke("call", name, "--sandbox", url, "--mode", "record", "--cassette",
                   str(cassette.with_name(f"{name}.json")), "--timeout", "0.5", "--json")
        assert r.exit_code in (0, 1), r.output
        recorded.append(json.loads(r.output))
    import socket

    def guard(*a: object, **k: object) -> None:
        raise AssertionError("socket opened during replay")

    monkeypatch.setattr(socket.socket, "connect", guard)
    for name, rec in zip(tools, recorded, strict=True):
        r = invoke("call", name, "--mode", "replay", "--cassette",
                   str(cassette.with_name(f"{name}.json")), "--timeout", "0.5", "--json")
        assert r.exit_code in (0, 1), r.output
        rep = json.loads(r.output)
        # the virtual clock lands where the live call did (stored to 0.1 microsecond)
        assert rep.pop("latency_ms") == pytest.approx(rec.pop("latency_ms"), abs=1e-3)
        assert rep == rec


def test_record_round_then_replay_round_print_the_same_table(tmp_path: Path) -> None:
    out = tmp_path / "round.json"
    rec = invoke("cassette", "record-round", "-o", str(out), "--timeout", "0.5",
                 "--profile", "harsh", "--seed", "2")
    assert rec.exit_code == 0, rec.output
    rep = invoke("cassette", "replay-round", str(out))
    assert rep.exit_code == 0, rep.output
    table = rec.output[rec.output.index("┏"):]
    assert rep.output[rep.output.index("┏"):] == table  # byte for byte, latencies included
    meta = load_cassette(out).meta
    assert meta["source"] == "realprobe sandbox" and meta["profile"] == "harsh"


def test_inspect_and_verify_json(tmp_path: Path) -> None:
    shipped = data_dir("cassettes") / "sandbox-published-round.json"
    r = invoke("cassette", "inspect", str(shipped), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["meta"]["source"] == "realprobe sandbox"
    assert {row["outcome"] for row in data["interactions"]}
    v = invoke("cassette", "verify", str(shipped), "--json")
    assert v.exit_code == 0, v.output
    report = json.loads(v.output)
    assert report["ok"] and report["counts"].get("ok", 0) > 0

    # a stored body that disagrees with its Content-Length is a problem verify reports
    broken = json.loads(shipped.read_text())
    first = broken["interactions"][0]["response"]
    first["headers"]["Content-Length"] = ["999999"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken))
    v = invoke("cassette", "verify", str(bad), "--json")
    assert v.exit_code == 1 and json.loads(v.output)["counts"]["length-mismatch"] == 1
    # and a body that claims gzip but is not
    first["headers"]["Content-Length"] = [str(len(first["body"]["string"].encode()))]
    first["headers"]["Content-Encoding"] = ["gzip"]
    bad.write_text(json.dumps(broken))
    v = invoke("cassette", "verify", str(bad))
    assert v.exit_code == 1 and "undecodable" in v.output


def test_the_shipped_round_covers_the_catalogue_and_replays_offline(
    catalog: Catalog, no_network: None
) -> None:
    shipped = data_dir("cassettes") / "sandbox-published-round.json"
    cassette = load_cassette(shipped)
    meta = cassette.meta
    assert meta["source"] == "realprobe sandbox" and meta["profile"] == "published"
    assert "sandbox recording" in meta["label"] and "seed" in meta and "date" in meta
    r = invoke("cassette", "replay-round", str(shipped), "--json")
    assert r.exit_code == 0, r.output
    results = json.loads(r.output)
    by_tool = {res["tool"]: res for res in results}
    recorded_tools = int(meta["catalog_tools"])
    assert recorded_tools == len(catalog), "regenerate: python bench/record_shipped_cassettes.py"
    misses = [t for t, res in by_tool.items() if res["error"]
              and "no recording" in res["error"]["message"]]
    assert misses == []
    codes = {res["error"]["code"] for res in results if res["error"]}
    assert "TIMEOUT" in codes and any(res["ok"] for res in results)
