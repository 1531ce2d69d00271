"""Bad cassettes and bad options: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from realprobe import CassetteError, Mode, RealprobeError, TransportOptions, load_cassette
from realprobe.clients import on_exhausted_of, replay_latency_of

REALWORLD = Path(__file__).parent / "data" / "realworld_cassettes"


def good_json(tmp_path: Path) -> Path:
    from cli_runner import invoke

    out = tmp_path / "good.json"
    src = REALWORLD / "pokeapi__rdavid1099-poke-api-v2.yaml"
    assert invoke(["cassette", "import", str(src), "-o", str(out)]).exit_code == 0
    return out


def cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = good_json(tmp_path)
    raw = good.read_text()
    data = json.loads(raw)
    out: dict[str, tuple[Path, str]] = {}

    def put(name: str, text: str, expect: str) -> None:
        p = tmp_path / name
        p.write_text(text)
        out[name] = (p, expect)

    out["missing"] = (tmp_path / "nope.json", "no cassette at")
    put("truncated.json", raw[: len(raw) // 2], "ends early")
    put("corrupt.json", '{"version": 1, "interactions": [}', "not valid JSON at line 1")
    put("empty.json", "", "the file is empty")
    newer = json.loads(raw)
    newer["realprobe"]["format_version"] = 99
    put("newer.json", json.dumps(newer), "format version 99 is newer")
    vcr2 = dict(data, version=2)
    put("vcr2.json", json.dumps(vcr2), "vcrpy cassette version 2")
    put("notacassette.json", json.dumps({"hello": "world"}), "not a cassette")
    put("unsafe.yaml", "interactions: !!python/object/apply:os.system ['echo hi']\n",
        "not valid YAML")
    bad_status = json.loads(raw)
    bad_status["interactions"][0]["response"]["status"]["code"] = "two hundred"
    put("badstatus.json", json.dumps(bad_status), "is not a number")
    return out


def test_each_bad_cassette_gets_its_own_clear_error(tmp_path: Path) -> None:
    for name, (path, expect) in cases(tmp_path).items():
        with pytest.raises(CassetteError) as info:
            load_cassette(path)
        msg = str(info.value)
        assert expect in msg, (name, msg)
        assert "\n" not in msg


@pytest.mark.parametrize(
    ("name", "command"),
    [("missing", "call"), ("truncated.json", "inspect"), ("newer.json", "call")],
)
def test_the_cli_prints_one_line_and_exits_2(tmp_path: Path, name: str, command: str) -> None:
    path, expect = cases(tmp_path)[name]
    exe = shutil.which("realprobe", path=str(Path(sys.executable).parent))
    assert exe is not None
    if command == "call":
        argv = [exe, "call", "pokeapi_version", "--mode", "replay", "--cassette", str(path)]
    else:
        argv = [exe, "cassette", "inspect", str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (argv, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and expect in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr + proc.stdout


def test_bad_replay_options_are_refused() -> None:
    with pytest.raises(RealprobeError, match="none, real, scaled:X"):
        replay_latency_of(TransportOptions(mode=Mode.REPLAY, cassette="x", replay_latency="fast"))
    with pytest.raises(RealprobeError, match="needs cassette=PATH"):
        TransportOptions(mode=Mode.REPLAY).normalised()

    with pytest.raises(RealprobeError, match="repeat-last"):
        on_exhausted_of(TransportOptions(mode=Mode.REPLAY, cassette="x", on_exhausted="loop"))
