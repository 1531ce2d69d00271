"""JSON from outside realprobe's own process is parsed under the input limits, whatever the
surface: an LLM endpoint's answer and its tool-call arguments, a request body matched against
a cassette, a cassette file, a fault plan. A body nested 5,000 levels deep, or one over the
size cap, ends in one clear line (exit 2 on the command line, an error row in a run), never a
RecursionError traceback and never a hang. And no module outside `realprobe/limits.py` parses
JSON or YAML itself."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import httpx
import pytest

import realprobe
from realprobe import RealprobeError
from tests.cli_runner import run as realprobe_cli
from tests.llm_server import ScriptedLLM, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent
DEEP = "[" * 5000 + "]" * 5000
REALWORLD = ROOT / "tests/data/realworld_cassettes"

# -- the invariant --------------------------------------------------------------------------

PARSERS = {("json", "loads"), ("json", "load"), ("yaml", "safe_load"), ("yaml", "load"),
           ("yaml", "full_load"), ("yaml", "unsafe_load"), ("yaml", "load_all"),
           ("yaml", "safe_load_all"), ("yaml", "full_load_all"), ("yaml", "unsafe_load_all")}
#: (module, call) pairs allowed to parse directly: realprobe-made values only, each with its
#: reason (none today)
ALLOWED: set[tuple[str, str]] = set()


def direct_parses(source: str) -> list[str]:
    """`json.loads`-like calls (and imports of those names) in a module's source; a
    `yaml.load` whose Loader is `bounded_loader(...)` from the limits is fine."""
    tree = ast.parse(source)
    modules = {"json": "json", "yaml": "yaml"}  # local name -> module, `import json as j` too
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("json", "yaml"):
            found += [f"{node.module}.{a.name}" for a in node.names
                      if (node.module, a.name) in PARSERS]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name) and node.func.value.id in modules):
            name = (modules[node.func.value.id], node.func.attr)
            bounded = any(kw.arg == "Loader" and isinstance(kw.value, ast.Call)
                          and isinstance(kw.value.func, ast.Name)
                          and kw.value.func.id == "bounded_loader" for kw in node.keywords)
            if name in PARSERS and not (name == ("yaml", "load") and bounded):
                found.append(".".join(name))
    return found


@pytest.mark.parametrize(("source", "flagged"), [
    ("import json\njson.loads(body)", ["json.loads"]),
    ("import json as j\nj.load(fh)", ["json.load"]),
    ("from json import loads", ["json.loads"]),
    ("import yaml\nyaml.safe_load(text)", ["yaml.safe_load"]),
    ("import yaml\nyaml.load(text, Loader=yaml.SafeLoader)", ["yaml.load"]),
    ("import yaml\nyaml.load(text, Loader=bounded_loader(yaml.SafeLoader))", []),
    ("import json\njson.dumps(value)", []),
])
def test_the_check_finds_direct_parses(source: str, flagged: list[str]) -> None:
    assert direct_parses(source) == flagged


def test_no_module_outside_the_limits_parses_json_or_yaml_itself() -> None:
    offenders = []
    for path in sorted((ROOT / "realprobe").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "realprobe/limits.py":
            continue
        offenders += [(rel, name) for name in direct_parses(path.read_text(encoding="utf-8"))
                      if (rel, name) not in ALLOWED]
    assert not offenders, f"parse through realprobe.limits (load_json_text...): {offenders}"


# -- an LLM endpoint ------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def llm_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_an_llm_endpoint_nesting_5000_deep_is_an_error_row(tmp_path: Path) -> None:
    """Tool-call arguments nested 5,000 deep are a malformed call the model is told about; an
    answer nested 5,000 deep ends the run as an LLM error, both in one line."""
    deep_answer = b'{"id": "x", "object": "chat.completion", "choices": ' + DEEP.encode() + b"}"
    with ScriptedLLM([tool_calls(("catfact_fact", DEEP)), deep_answer]) as llm:
        result = realprobe.run_tasks(
            ["pet_newsletter"], agent="openai", base_url=llm.base_url, model="scripted-1",
            mode="simulate", profile="calm", prompt="optimal", db=tmp_path / "runs.db",
        )
    (run,) = result.runs
    assert (run.row["outcome"], run.row["termination"]) == ("error", "llm_error")
    assert run.row["infra_error"] == ("LLM endpoint: APIError: the answer: nested deeper than "
                                      "the limit of 500 levels")
    (step,) = run.steps
    assert step["kind"] == "malformed" and step["tool"] == "catfact_fact"
    assert "arguments: nested deeper than the limit of 500 levels" in json.dumps(step)


def test_an_llm_answer_over_the_input_cap_is_an_error_row(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("REALPROBE_MAX_INPUT_MB", "0.1")  # 100,000 bytes: task files fit
    with ScriptedLLM([text("TASK COMPLETE " + "x" * 150_000)]) as llm:
        result = realprobe.run_tasks(
            ["pet_newsletter"], agent="openai", base_url=llm.base_url, model="scripted-1",
            mode="simulate", profile="calm", prompt="optimal",
        )
    (run,) = result.runs
    assert run.row["termination"] == "llm_error"
    assert run.row["infra_error"].startswith("LLM endpoint: APIError: the answer: 150,")
    assert run.row["infra_error"].endswith("bytes, over the limit of 100,000")


# -- cassettes ------------------------------------------------------------------------------


@pytest.fixture
def advice_cassette(tmp_path: Path) -> Path:
    """A real Ruby VCR recording of api.adviceslip.com (turingschool-examples/friendly-advice,
    see tests/data/realworld_cassettes/SOURCES.md), imported as a realprobe cassette."""
    source = REALWORLD / "advice-slip__turingschool-examples-friendly-advice.yaml"
    out = tmp_path / "advice.json"
    realprobe.import_cassette(source, out)
    return out


def test_a_request_body_nesting_5000_deep_is_a_clear_cassette_miss(advice_cassette: Path) -> None:
    url = "https://api.adviceslip.com/advice"
    with realprobe.use_cassette(advice_cassette, record_mode="none",
                                match_on=["method", "uri", "body"], libraries=("httpx",)
                                ), httpx.Client() as client:
        assert client.get(url).status_code == 200  # the recorded request still matches
        with pytest.raises(RealprobeError) as miss:
            client.request("GET", url, content=DEEP.encode())
    assert str(miss.value).startswith("no recording for GET")
    assert not isinstance(miss.value.__context__, RecursionError)


#: a file a user hands in: its document's head, the variable of its size cap, and the command
#: that reads it
FILES = {
    "cassette": ('{"version": 1, "interactions": ', "REALPROBE_MAX_CASSETTE_MB",
                 ["cassette", "inspect", "{file}"]),
    "fault plan": ('{"format": "realprobe-fault-plan/1", "rules": ', "REALPROBE_MAX_INPUT_MB",
                   ["run", "pet_newsletter", "--profile", "calm", "--fault-plan", "{file}",
                    "--db", "{db}"]),
}


@pytest.mark.parametrize("shape", ["deep", "huge"])
@pytest.mark.parametrize("kind", sorted(FILES))
def test_a_hostile_file_is_one_line(tmp_path: Path, kind: str, shape: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    head, cap_env, command = FILES[kind]
    path, db = tmp_path / "hostile.json", tmp_path / "runs.db"
    if shape == "deep":
        path.write_text(head + DEEP + "}")
        why = "nested deeper than the limit of 500 levels"
    else:
        monkeypatch.setenv(cap_env, "0.001")
        path.write_text(head + "[]" + " " * 2000 + "}")
        why = "over the 0.001 MB limit"
    res = realprobe_cli([arg.format(file=path, db=db) for arg in command])
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert why in line and str(path) in line and not db.exists()
