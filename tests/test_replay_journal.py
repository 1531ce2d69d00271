"""Crash-safe recording: a record run killed with SIGKILL keeps every call that had finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from cli_runner import invoke

from realprobe import CassetteError, load_cassette
from realprobe.cassettes.journal import journal_path
from realprobe.cassettes.recording import SyncRecordingTransport

RECORDER = textwrap.dedent('''
    import sys, time, httpx
    from realprobe.cassettes.recording import SyncRecordingTransport

    def origin(request):
        n = int(request.url.params["n"])
        if n % 7 == 3:
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json={"n": n}, headers={"x-api-key": "sekrit-abcdef"})

    transport = SyncRecordingTransport(httpx.MockTransport(origin), sys.argv[1])
    with httpx.Client(transport=transport) as client:
        for n in range(10_000):
            try:
                client.get("https://api.example.test/n", params={"n": n, "api_key": "k-123456"})
            except httpx.ReadTimeout:
                pass
            print(n, flush=True)
            if n + 1 >= int(sys.argv[2]):
                time.sleep(60)   # hold here until killed
''')


def _record_and_kill(tmp_path: Path, cassette: Path, after: int) -> int:
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(cassette), str(after)],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    assert proc.stdout is not None
    done = -1
    for line in proc.stdout:
        done = int(line)
        if done + 1 >= after:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return done + 1


@pytest.mark.parametrize("after", [1, 6, 40])
def test_sigkill_keeps_every_finished_call(tmp_path: Path, after: int) -> None:
    cassette = tmp_path / "killed.json"
    finished = _record_and_kill(tmp_path, cassette, after)
    assert not cassette.exists()  # the run never reached its atomic write
    assert journal_path(cassette).exists()
    recovered = load_cassette(cassette)  # the next open recovers it
    assert len(recovered.calls) >= finished
    ns = [json.loads(c.body)["n"] for c in recovered.calls if c.error is None]
    timeouts = [c for c in recovered.calls if c.error is not None]
    assert all(t.error is not None and t.error.type == "ReadTimeout" for t in timeouts)
    assert sorted(ns + [int(httpx.URL(t.uri).params["n"]) for t in timeouts]) == list(
        range(len(recovered.calls))
    )
    assert not journal_path(cassette).exists()
    text = cassette.read_text()
    assert "sekrit-abcdef" not in text and "k-123456" not in text  # journal was scrubbed too
    assert recovered.meta.get("recovered") is True


def test_recover_command(tmp_path: Path) -> None:
    cassette = tmp_path / "killed.yaml"
    finished = _record_and_kill(tmp_path, cassette, 5)
    result = invoke(["cassette", "recover", str(cassette), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["interactions"] >= finished
    again = invoke(["cassette", "recover", str(cassette)])
    assert isinstance(again.exception, CassetteError)
    assert "nothing to recover" in str(again.exception)


def test_clean_close_leaves_no_journal(tmp_path: Path) -> None:
    cassette = tmp_path / "clean.json"
    transport = SyncRecordingTransport(
        httpx.MockTransport(lambda r: httpx.Response(200, text="ok")), cassette
    )
    with httpx.Client(transport=transport) as client:
        client.get("https://api.example.test/a")
        assert journal_path(cassette).exists()
    assert cassette.exists() and not journal_path(cassette).exists()
    assert len(load_cassette(cassette).calls) == 1
