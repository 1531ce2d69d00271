"""JSON from outside realprobe's own process is parsed under the input limits, whatever the
surface: an LLM endpoint's answer and its tool-call arguments, a request body matched against
a cassette, a cassette file, a fault plan. A body nested 5,000 levels deep, or one over the
size cap, ends in one clear line (exit 2 on the command line, an error row in a run), never a
RecursionError traceback and never a hang. And no module outside `realprobe/limits.py` parses
JSON or YAML itself."""

from __future__ import annotations

import ast
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import realprobe
from realprobe import RealprobeError
from tests.cli_runner import run as realprobe_cli

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


def _completion(message: dict[str, Any]) -> bytes:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000,
        "model": "scripted-1", "choices": [{"index": 0, "message": message,
                                            "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }).encode()


class RawLLM:
    """A chat-completions endpoint on 127.0.0.1 answering each POST with the next raw body
    (bodies no JSON encoder would write: nested past the interpreter's recursion limit)."""

    def __init__(self, bodies: list[bytes]) -> None:
        self.bodies = list(bodies)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, data = (200, owner.bodies.pop(0)) if owner.bodies else (
                    500, b'{"error": {"message": "script exhausted"}}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def llm_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_an_llm_endpoint_nesting_5000_deep_is_an_error_row(tmp_path: Path) -> None:
    """Tool-call arguments nested 5,000 deep are a malformed call the model is told about; an
    answer nested 5,000 deep ends the run as an LLM error, both in one line."""
    deep_args = {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_0", "type": "function",
        "function": {"name": "catfact_fact", "arguments": DEEP}}]}
    deep_answer = b'{"id": "x", "object": "chat.completion", "choices": ' + DEEP.encode() + b"}"
    with RawLLM([_completion(deep_args), deep_answer]) as base_url:
        result = realprobe.run_tasks(
            ["pet_newsletter"], agent="openai", base_url=base_url, model="scripted-1",
            mode="simulate", profile="calm", prompt="optimal",
            db=tmp_path / "runs.db",
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
    huge = _completion({"role": "assistant", "content": "TASK COMPLETE " + "x" * 150_000})
    with RawLLM([huge]) as base_url:
        result = realprobe.run_tasks(
            ["pet_newsletter"], agent="openai", base_url=base_url, model="scripted-1",
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


@pytest.mark.parametrize("shape", ["deep", "huge"])
def test_a_hostile_cassette_file_is_one_line(tmp_path: Path, shape: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "hostile.json"
    if shape == "deep":
        path.write_text('{"version": 1, "interactions": ' + DEEP + "}")
        why = "nested deeper than the limit of 500 levels"
    else:
        monkeypatch.setenv("REALPROBE_MAX_CASSETTE_MB", "0.001")
        path.write_text(json.dumps({"version": 1, "interactions": [], "pad": "x" * 2000}))
        why = "over the 0.001 MB limit"
    with pytest.raises(RealprobeError, match=why):
        realprobe.load_cassette(path)
    res = realprobe_cli(["cassette", "inspect", str(path)])
    assert res.returncode == 2 and why in res.stderr and "Traceback" not in res.stderr


# -- a fault plan ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["deep", "huge"])
def test_a_hostile_fault_plan_file_is_one_line(tmp_path: Path, shape: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    plan = tmp_path / "plan.json"
    if shape == "deep":
        plan.write_text('{"format": "realprobe-fault-plan/1", "rules": ' + DEEP + "}")
        why = "nested deeper than the limit of 500 levels"
    else:
        monkeypatch.setenv("REALPROBE_MAX_INPUT_MB", "0.002")
        rule = {"on": "call", "n": 1, "fault": "503"}
        plan.write_text(json.dumps({"format": "realprobe-fault-plan/1", "rules": [rule] * 100}))
        why = "over the 0.002 MB limit"
    res = realprobe_cli(["run", "pet_newsletter", "--profile", "calm", "--fault-plan",
                         str(plan), "--db", str(tmp_path / "runs.db")])
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert why in line and str(plan) in line and not (tmp_path / "runs.db").exists()
