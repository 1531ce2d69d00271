"""Input files are bounded: billion-laughs YAML, over-size cassettes and a corpus of malformed
HAR / vcrpy / Ruby VCR files each end in one line on stderr and exit 2, never a traceback, for
`cassette import`, `cassette verify` and a replay."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from realprobe import CassetteError, cli, load_cassette
from realprobe.limits import (
    InputTooLarge,
    check_nesting,
    expanded_size,
    load_json_text,
    text_depth,
)
from tests.malformed_har import cases, corpus

#: malformed in the letter but read on purpose (vcrpy writes such files): they must load
LENIENT = {"gzip-garbage.har"}


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The real entry point in process (RealprobeError -> `error: ...`, exit 2)."""
    old = sys.argv
    sys.argv = ["realprobe", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    return code, capsys.readouterr().err


def test_the_corpus_is_large() -> None:
    assert len(cases()) - len(LENIENT) >= 40
    assert sum(1 for n in cases() if n.endswith(".har")) >= 30


@pytest.mark.parametrize("name", sorted(set(cases()) - LENIENT))
def test_each_malformed_file_is_one_line_and_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = corpus(tmp_path / "corpus")[name]
    for argv in (
        ["cassette", "import", str(path), "-o", str(tmp_path / "out.json")],
        ["cassette", "verify", str(path)],
        ["call", "catfact_fact", "--mode", "replay", "--cassette", str(path)],
    ):
        code, err = run_main(argv, capsys)
        assert code == 2, (argv, err)
        assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
        assert "Traceback" not in err and name in err, (argv, err)
    assert not (tmp_path / "out.json").exists()


def test_lenient_files_load(tmp_path: Path) -> None:
    paths = corpus(tmp_path / "corpus")
    for name in LENIENT:
        assert load_cassette(paths[name]).calls


def test_the_named_cases_through_the_installed_command(tmp_path: Path) -> None:
    """A real process: stderr holds one line and no traceback."""
    paths = corpus(tmp_path / "corpus")
    for name in ("status-abc.har", "status-infinity.har", "bad-base64.har", "response-list.har",
                 "mixed-dates.har", "billion-laughs.yaml"):
        proc = subprocess.run(
            [sys.executable, "-m", "realprobe.cli", "cassette", "import", str(paths[name]),
             "-o", str(tmp_path / "x.json")],
            capture_output=True, text=True, timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


def test_billion_laughs_is_refused_within_a_small_memory_budget(tmp_path: Path) -> None:
    path = corpus(tmp_path / "corpus")["billion-laughs.yaml"]
    assert path.stat().st_size < 1000
    tracemalloc.start()
    try:
        with pytest.raises(CassetteError, match="billion laughs"):
            load_cassette(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 1024 * 1024


def test_recursive_and_deep_yaml_are_refused(tmp_path: Path) -> None:
    cyc = tmp_path / "cycle.yaml"
    cyc.write_text("version: 1\nx: &a [1, *a]\ninteractions: []\n")
    with pytest.raises(CassetteError, match="cycle"):
        load_cassette(cyc)
    deep = tmp_path / "deep.yaml"
    deep.write_text("version: 1\ninteractions: []\nx: " + "[" * 2000 + "]" * 2000 + "\n")
    with pytest.raises(CassetteError):
        load_cassette(deep)


def test_aliases_that_stay_small_still_load(tmp_path: Path) -> None:
    path = tmp_path / "alias.yaml"
    path.write_text(
        "version: 1\nh: &h {Content-Type: [text/plain]}\ninteractions:\n"
        "- request: {method: GET, uri: 'https://x.test/a', headers: *h}\n"
        "  response: {status: {code: 200, message: OK}, headers: *h, body: {string: hi}}\n"
        "- request: {method: GET, uri: 'https://x.test/b', headers: *h}\n"
        "  response: {status: {code: 200, message: OK}, headers: *h, body: {string: ho}}\n"
    )
    assert [c.body for c in load_cassette(path).calls] == [b"hi", b"ho"]


def test_expanded_size_counts_every_copy() -> None:
    import yaml

    node = yaml.compose("a: &x [1, 2, 3]\nb: [*x, *x]\n")
    # mapping + 2 keys + list(3) + [ list(3) twice ]
    assert expanded_size(node) == 1 + 2 + 4 + 1 + 4 + 4


def test_cassettes_over_the_size_cap_are_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REALPROBE_MAX_CASSETTE_MB", "1")
    big = tmp_path / "big.json"
    body = "x" * 2_000_000
    big.write_text(json.dumps({"version": 1, "interactions": [
        {"request": {"method": "GET", "uri": "https://catfact.ninja/fact"},
         "response": {"status": {"code": 200}, "body": {"string": body}}}]}))
    for argv in (["cassette", "verify", str(big)], ["cassette", "inspect", str(big)],
                 ["cassette", "import", str(big), "-o", str(tmp_path / "o.json")]):
        code, err = run_main(argv, capsys)
        assert code == 2 and "over the 1 MB limit" in err and err.count("\n") == 1, err
    monkeypatch.setenv("REALPROBE_MAX_CASSETTE_MB", "5")
    assert len(load_cassette(big).calls) == 1


# -- the depth of JSON text, counted over the text instead of walking the parsed value -------

#: string pieces that a miscounting scan would take for structure
HOSTILE = ["[", "]", "{", "}", '"', "\\", '\\"', "\\\\", "\\\\\\", '"]', '\\"[', "\u005b",
           "\u0022", "\ud800", "\U0001f600", "é[", "\x00", "\n", "/", "\\u005b", " "]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(HOSTILE) for _ in range(rng.randrange(6)))


def _document(rng: random.Random, depth: int) -> object:
    """A random value nested `depth` levels at most, its strings and keys made of HOSTILE."""
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([_string(rng), rng.randrange(-9, 10), 1.5, None, True])
    if rng.random() < 0.5:
        return [_document(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {_string(rng): _document(rng, depth - 1) for _ in range(rng.randrange(4))}


def _walk_depth(value: object) -> int:
    """The deepest level `check_nesting` (the exact walk) refuses nothing at, plus one."""
    lo = -1
    while True:
        try:
            check_nesting(value, "doc", limit=lo)
            return lo + 1
        except InputTooLarge:
            lo += 1


@pytest.mark.parametrize("seed", range(4))
def test_the_text_depth_agrees_with_the_walk_on_hostile_documents(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        value = _document(rng, rng.randrange(1, 9))
        for wrap in range(rng.choice([0, 0, 3])):  # some deeper than their strings
            value = [value] if wrap % 2 else {_string(rng): value}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5,
                          indent=rng.choice([None, 1]))
        want = _walk_depth(value)
        assert text_depth(text) == want, text
        assert text_depth(text.encode("utf-8", "surrogatepass")) == want, text
        assert text_depth(text.encode("utf-16", "surrogatepass")) == want, text


@pytest.mark.parametrize(("text", "ok"), [
    ("[" * 501 + "]" * 501, True),  # the outermost list is level 0: 500 levels below it
    ("[" * 502 + "]" * 502, False),
    ("[" * 5000 + "]" * 5000, False),
    ('["' + "[" * 5000 + '"]', True),  # brackets inside a string are text
    ('["\\\\", ' + "[" * 600 + "]" * 600 + "]", False),  # an even backslash run ends it
    ('["\\"' + "[" * 600 + '", 1]', True),  # an odd run escapes the quote
    ('{"\\u0022[": "' + "{" * 900 + '"}', True),
])
def test_deep_json_text_is_refused_and_deep_strings_are_not(text: str, ok: bool) -> None:
    for data in (text, text.encode(), text.encode("utf-16")):
        if ok:
            assert load_json_text(data, "body", max_bytes=10**6) is not None
        else:
            with pytest.raises(InputTooLarge, match="nested deeper than the limit of 500"):
                load_json_text(data, "body", max_bytes=10**6)


def test_entries_are_still_counted_where_a_caller_limits_them() -> None:
    body = json.dumps([[i] for i in range(600)])
    assert len(load_json_text(body, "body", max_bytes=10**6, max_entries=1200)) == 600
    with pytest.raises(InputTooLarge, match="more than the limit of 1,000 entries"):
        load_json_text(body, "body", max_bytes=10**6, max_entries=1000)
