"""The Inspect AI integration, offline: Inspect's own scripted model (`mockllm/model`) makes
the reference agent's calls through an Inspect task, and realprobe's scorer gives the run
the reference agent's score; the run is stored like any other."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import realprobe
from realprobe import TransportOptions
from realprobe.tasks.runner import shipped_cassettes

inspect_ai = pytest.importorskip(
    "inspect_ai", reason="inspect-ai is not installed (pip install 'realprobe[inspect]')"
)

TASK = "pet_newsletter"
CASSETTE = shipped_cassettes() / f"{TASK}__reference__optimal__s0__r0.json"


def test_an_inspect_task_scores_like_the_reference(tmp_path: Path) -> None:
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from realprobe.tasks.inspect_eval import inspect_task

    ref = realprobe.run_tasks([TASK], mode="replay", cassette=CASSETTE).runs[0]
    outputs = [ModelOutput.for_tool_call("mockllm/model", s.tool, s.args)
               for s in ref.state.steps]
    outputs.append(ModelOutput.from_content("mockllm/model", ref.state.final_message))
    for out in outputs:  # scripted usage: the mock model would count tokens with tiktoken
        out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    model = get_model("mockllm/model", custom_outputs=outputs)
    db = tmp_path / "inspect.db"
    task = inspect_task(TASK, target=TransportOptions(mode="replay", cassette=CASSETTE),
                        prompt="optimal", db=db)
    (log,) = inspect_ai.eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))
    assert log.status == "success", log.error
    (sample,) = log.samples
    score = sample.scores["realprobe_scorer"]
    assert score.value == ref.row["score"]
    assert score.metadata["outcome"] == ref.row["outcome"]
    assert score.metadata["chain_f1"] == ref.row["chain_f1"]
    row = sqlite3.connect(db).execute(
        "SELECT agent, model, outcome, tool_calls, artifact, tokens_in, tokens_out "
        "FROM task_runs"
    ).fetchone()
    assert row == ("inspect", "mockllm/model", ref.row["outcome"], ref.row["tool_calls"],
                   ref.row["artifact"], 100 * len(outputs), 10 * len(outputs))
