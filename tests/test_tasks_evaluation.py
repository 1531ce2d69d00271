"""Evaluating agents the way the benchmarks do: graded flaws, trajectory metrics, paraphrase
levels, results that never pool, the reliability surface, and scoring your own agent (a
Python callable, an MCP client session)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

import realprobe
from realprobe import (
    EvalSettings,
    McpService,
    RealprobeError,
    ServiceOptions,
    TransportOptions,
    data_dir,
    default_catalog,
    plan_tasks,
)
from realprobe.tasks.evaluate import Toolbox, evaluate
from realprobe.tasks.flaws import affected, with_variant
from realprobe.tasks.metrics import chain_f1, compare, graph_f1, kendall_tau, mcis_node_f1
from realprobe.tasks.paraphrase import missing_items, paraphrase_text, paraphrased, text_order
from realprobe.tasks.prompts import FAILURE_HINTS, prompt_variants, render
from realprobe.tasks.results import load_prices, summarise, surface, volume
from realprobe.tasks.runner import RunOutcome, shipped_cassettes
from realprobe.tasks.scoring import out_of_order

TASKS = {t.instance_id: t for t in plan_tasks(all=True).tasks}
CATALOG = default_catalog()


# -- graded flaws ---------------------------------------------------------------------------


def test_severity_changes_the_number_of_steps() -> None:
    task = TASKS["content_social_post"]  # 4 API steps + the output step
    n = {sev: len(with_variant(task, f"flawed:missing_steps@{sev}", CATALOG)
                  .steps_for(f"flawed:missing_steps@{sev}")) for sev in (10, 30, 50, 100)}
    assert n == {10: 4, 30: 3, 50: 2, 100: 1}
    assert [affected(4, s) for s in (10, 30, 50)] == [1, 2, 3]  # the small-|V| rule
    compressed = with_variant(task, "flawed:compressed_steps@50", CATALOG)
    steps = compressed.steps_for("flawed:compressed_steps@50")
    assert len(steps) == 2 and "and also" in " ".join(s.purpose for s in steps)
    reworded = with_variant(task, "flawed:reworded_steps@50", CATALOG)
    changed = [a.purpose != b.purpose for a, b in zip(
        reworded.steps_for("flawed:reworded_steps@50"), task.workflow.steps, strict=True)]
    assert sum(changed) == 3 and [s.tool for s in task.workflow.steps] == [
        s.tool for s in reworded.steps_for("flawed:reworded_steps@50")]
    redundant = with_variant(task, "flawed:redundant_operation@50", CATALOG)
    assert len(redundant.steps_for("flawed:redundant_operation@50")) == 8


def test_graded_flaws_are_seeded() -> None:
    task = TASKS["name_insights"]
    p = "flawed:missing_steps@50"
    a = with_variant(task, p, CATALOG, seed=0).flawed["missing_steps@50"]
    b = with_variant(task, p, CATALOG, seed=0).flawed["missing_steps@50"]
    others = {tuple(with_variant(task, p, CATALOG, seed=s).flawed["missing_steps@50"]
                    .detail["affected"]) for s in range(1, 8)}
    assert a == b and len(others) > 1
    stored = with_variant(task, "flawed:tool_misuse", CATALOG)
    assert stored is task  # seed 0 without a severity: the variant stored in the file
    assert with_variant(task, "flawed:tool_misuse", CATALOG, seed=3).flawed["tool_misuse"].seed == 3


def test_prompt_variants_parse_severities() -> None:
    assert prompt_variants("flawed:missing_steps@30,flawed:tool_misuse") == [
        "flawed:missing_steps@30", "flawed:tool_misuse"]
    assert len(prompt_variants("flawed:all@10")) == 10
    for bad, msg in (("flawed:missing_steps", "needs a severity"),
                     ("flawed:missing_step@0", "1 to 100"), ("flawed:nope@10", "unknown flaw")):
        with pytest.raises(RealprobeError, match=msg):
            prompt_variants(bad)


def test_the_failure_unaware_prompt_drops_only_the_failure_hints() -> None:
    task = TASKS[TASK]
    aware, unaware = render(task, "baseline"), render(task, "failure-unaware", protocol="text")
    assert FAILURE_HINTS in aware.system and FAILURE_HINTS not in unaware.system
    assert unaware.user == aware.user and "<tool_call>" in unaware.system
    assert prompt_variants("baseline,failure-unaware") == ["baseline", "failure-unaware"]


# -- trajectory metrics on hand-computed sequences ------------------------------------------


def test_chain_f1_and_kendall_tau_by_hand() -> None:
    opt = ["a", "b", "c", "d"]
    assert chain_f1(opt, opt) == 1.0 and kendall_tau(opt, opt) == 1.0
    # LCS(a c b d, a b c d) = 3: P = R = 3/4
    assert chain_f1(["a", "c", "b", "d"], opt) == pytest.approx(0.75)
    # pairs (a,c)+ (a,b)+ (a,d)+ (c,b)- (c,d)+ (b,d)+ -> (5 - 1) / 6
    assert kendall_tau(["a", "c", "b", "d"], opt) == pytest.approx(4 / 6)
    assert kendall_tau(list(reversed(opt)), opt) == -1.0
    # an unmatched extra call lowers precision only: L = 2, P = 2/3, R = 2/4
    assert chain_f1(["a", "x", "b"], opt) == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert kendall_tau(["a", "a", "x"], opt) is None and chain_f1([], opt) == 0.0


def test_graph_f1_by_hand() -> None:
    gold = {("a", "c"), ("b", "c"), ("c", "d")}
    assert graph_f1(gold, gold) == 1.0
    # 2 of 3 found, one wrong: P = 2/3, R = 2/3
    assert graph_f1({("a", "c"), ("b", "c"), ("a", "d")}, gold) == pytest.approx(2 / 3)
    assert graph_f1(set(), gold) == 0.0 and graph_f1({("a", "b")}, set()) is None


def test_mcis_node_f1_by_hand() -> None:
    nodes, gold = ["a", "b", "c", "d"], {("a", "c"), ("b", "c"), ("c", "d")}
    assert mcis_node_f1(nodes, gold, nodes, gold) == 1.0
    # c reached without b's data: {a, b, c, d} disagree on (b, c); the largest agreeing set
    # drops b or c: 3 of 4 nodes, P = R = 3/4 (the edge metric says 2/3)
    assert mcis_node_f1(nodes, gold - {("b", "c")}, nodes, gold) == pytest.approx(0.75)
    # an extra node lowers precision only: S = 4, P = 4/5, R = 1
    assert mcis_node_f1([*nodes, "x"], gold, nodes, gold) == pytest.approx(8 / 9)
    # independent steps: any common subset agrees
    assert mcis_node_f1(["a", "b"], set(), ["a", "b", "c"], set()) == pytest.approx(0.8)
    assert mcis_node_f1([], set(), nodes, gold) == 0.0


def test_run_metrics_are_stored(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    realprobe.run_tasks(["travel_briefing"], profile="calm", db=db,
                        prompt="optimal,flawed:missing_steps@50")
    rows = sqlite3.connect(db).execute(
        "SELECT prompt, severity, chain_f1, kendall_tau, graph_f1, graph_node_f1, "
        "severity_share FROM task_runs ORDER BY prompt"
    ).fetchall()
    (flawed, sev, cf1, tau, gf1, nf1, share), (optimal, _, ocf1, otau, ogf1, onf1, _) = rows
    assert flawed == "flawed:missing_steps@50" and sev == 50 and optimal == "optimal"
    assert (ocf1, otau, ogf1, onf1) == (1.0, 1.0, 1.0, 1.0)  # calm: the run is the workflow
    assert cf1 < 1.0 and gf1 < 1.0 and nf1 < 1.0 and tau == 1.0  # steps left out
    assert share == 0.75  # 3 of travel_briefing's 4 API steps (1 / 2 / 3 at 10 / 30 / 50)


# -- paraphrases --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(TASKS))
def test_paraphrases_keep_criteria_and_change_text(name: str) -> None:
    task = TASKS[name]
    texts = [paraphrased(task, lv).description for lv in (0, 1, 2)]
    assert texts[0] == task.description and len(set(texts)) == 3
    for lv in (1, 2):
        p = paraphrased(task, lv)
        assert p.model_dump(exclude={"description"}) == task.model_dump(exclude={"description"})
        assert paraphrased(task, lv).description == texts[lv]  # deterministic
        assert texts[lv] in render(p, "baseline").user
    with pytest.raises(RealprobeError, match="0, 1 or 2"):
        paraphrased(task, 3)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_paraphrase_still_names_every_step(name: str) -> None:
    task = TASKS[name]
    assert set(task.metadata["mentions"]) == {s.id for s in task.workflow.steps[:-1]}
    for lv in (0, 1, 2):
        assert missing_items(task, paraphrased(task, lv).description) == []
    assert "check the country up" not in paraphrase_text(TASKS["travel_briefing"].description, 2)


def test_a_paraphrase_that_loses_an_item_is_refused() -> None:
    task = TASKS["pet_newsletter"]
    assert missing_items(task, "Write a blurb with a cat fact and a dad joke.") == ["dog"]
    assert missing_items(task, "a cat tidbit, a dog photo and a dad joke") == []  # synonyms
    broken = task.model_copy(update={"metadata": {"mentions": {"dog": ["hamster picture"]}}})
    with pytest.raises(RealprobeError, match="no longer names dog"):
        paraphrased(broken, 2)


def test_text_order_follows_the_text_but_waits_for_inputs() -> None:
    task = TASKS["travel_briefing"]  # weather and holidays read the country step
    text = "Brief me: the exchange rate, the public holidays, then look the country up."
    assert text_order(task, text) == ["money", "country", "holidays", "weather", "report"]


def test_scoring_demands_only_the_data_flow_order(tmp_path: Path) -> None:
    # the reference agent under `baseline` follows the text; level 2 reorders its items
    rows = {eps: realprobe.run_tasks(["travel_briefing", "holiday_planner"], profile="calm",
                                     prompt="baseline", paraphrase=eps).runs
            for eps in (0, 2)}
    assert all(r.row["outcome"] == "full" for eps in (0, 2) for r in rows[eps])
    order = {eps: [[s.tool for s in r.state.steps] for r in rows[eps]] for eps in (0, 2)}
    assert order[0] != order[2]  # the calls really came in another order
    # a step before the step whose output it reads is out of order, and named
    task = TASKS["holiday_planner"]
    firsts = [1, 0, 2, 3, 4]  # holidays (reads country) before country
    assert out_of_order(task, firsts) == [("country", "holidays")]
    assert out_of_order(task, [0, 3, 2, 1, 4]) == []  # independent steps: any order


# -- results ------------------------------------------------------------------------------


def _stored_runs(db: Path) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT * FROM task_runs")]


def test_results_never_pool_two_profiles(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for profile in ("calm", "harsh"):
        realprobe.run_tasks(["pet_newsletter", "quiz_night"], profile=profile, db=db, repeat=2)
    res = realprobe.task_results(db)
    assert [(r["target"], r["runs"]) for r in res["by_prompt"]] == [
        ("simulate:calm", 4), ("simulate:harsh", 4)]
    assert len(res["reliability"]) == 2
    only = realprobe.task_results(db, profile="harsh")
    assert [r["target"] for r in only["by_prompt"]] == ["simulate:harsh"]
    mix = {r["target"]: r["error_mix"] for r in res["by_prompt"]}
    stored = sqlite3.connect(db).execute(
        "SELECT count(*) FROM task_steps s JOIN task_runs r ON r.id = s.run_id "
        "WHERE s.ok = 0 AND r.profile = 'harsh'").fetchone()[0]
    assert mix["simulate:harsh"]["failed"] == stored
    assert sum(mix["simulate:harsh"]["resilibench"].values()) == stored
    assert set(mix["simulate:harsh"]["resilibench"]) <= {
        "TIMEOUT", "OPERATION_FAILED", "INVALID_INPUT", "INVALID_RESPONSE", "NETWORK_ERROR",
        "RATE_LIMIT_ERROR"}
    with pytest.raises(RealprobeError, match="for that filter"):
        realprobe.task_results(db, agent="nobody")
    # the kind is a closed set: a misspelt one is named, a capitalised one is read
    with pytest.raises(RealprobeError, match="target_kind 'simulat': choose one of live"):
        realprobe.task_results(db, target_kind="simulat")
    assert realprobe.task_results(db, target_kind="Simulate")["runs"] == 8


def test_tokens_and_cost_use_the_price_table(tmp_path: Path) -> None:
    rows = [{"agent": "openai", "model": "gpt-4o-mini", "prompt": "baseline", "flaw": None,
             "task": "t", "target": "live", "outcome": "full", "score": 1.0, "grounded": 1,
             "strict": 1,
             "tokens_in": 1_000_000, "tokens_out": 500_000, "tool_calls": 3, "failures": 0,
             "optimal_calls": 3, "mode": "live", "profile": None}]
    (row,) = summarise(rows)["by_prompt"]
    assert row["cost_usd"] == pytest.approx(0.15 + 0.30)
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpt-4o-mini]\ninput = 1.0\noutput = 2.0\n')

    (row,) = summarise(rows, load_prices(prices))["by_prompt"]
    assert row["cost_usd"] == pytest.approx(2.0)
    (row,) = summarise([{**rows[0], "model": "unpriced"}])["by_prompt"]
    assert row["cost_usd"] is None
    for bad in ("input = nan\noutput = 2.0", "input = 1.0\noutput = -2.0"):
        prices.write_text(f"[gpt-4o-mini]\n{bad}\n")
        with pytest.raises(RealprobeError, match="a price must be a finite number >= 0"):
            load_prices(prices)


def test_surface_over_k_epsilon_lambda() -> None:
    def run(task: str, eps: int, lam: float, ok: bool) -> dict[str, Any]:
        return {"agent": "a", "model": "m", "prompt": "optimal", "target": "simulate:x",
                "paraphrase": eps, "fault_rate": lam, "task": task,
                "outcome": "full" if ok else "failure", "strict": ok}

    rows = [run(t, e, lam, ok) for t in ("t1", "t2") for e in (0, 2) for lam in (0.0, 1.0)
            for ok in ([True, True] if (e, lam) == (0, 0.0) or t == "t1" else [True, False])]
    (surf,) = surface(rows)
    cells = {(c["k"], c["epsilon"], c["lambda"]): c["pass^k"] for c in surf["cells"]}
    assert cells[(1, 0, 0.0)] == 1.0 and cells[(2, 2, 1.0)] == 0.5
    assert cells[(1, 2, 1.0)] == 0.75
    # two points per axis: the volume is the mean of the 8 corners, (1 + 1 + 3 x 1.25) / 8
    assert surf["volume"] == pytest.approx(0.71875, abs=1e-4)
    assert volume({(1, 0, 0.0): 1.0, (2, 0, 0.0): 0.5}) == pytest.approx(0.75)


def test_surface_lambda_is_the_dial_share_and_reports_gradient_and_threshold() -> None:
    def run(lam: float | None, eps: int, ok: bool, task: str = "t") -> dict[str, Any]:
        target = "simulate:published" + (f"@{lam:g}" if lam is not None else "")
        return {"agent": "a", "model": "m", "prompt": "optimal", "target": target,
                "paraphrase": eps, "fault_rate": lam, "task": task,
                "outcome": "full" if ok else "failure"}

    # pass^1 at eps 0: 1.0, 0.75, 0.25 over lambda 0, 0.1, 0.3; eps 1 one run worse each
    share = {0.0: 4, 0.1: 3, 0.3: 1}
    rows = [run(lam, e, i < n - e) for lam, n in share.items() for e in (0, 1)
            for i in range(4)]
    rows += [run(None, 0, True), run(None, 0, False)]  # undialled: the profile's own faults
    dialled, undialled = sorted(surface(rows), key=lambda s: len(s["lambda"]), reverse=True)
    assert dialled["target"] == undialled["target"] == "simulate:published"
    assert dialled["lambda"] == [0.0, 0.1, 0.3] and undialled["lambda"] == [None]
    # slopes: -0.25 per level at every lambda, -2.5 per unit share between every pair
    assert dialled["gradient"] == {"epsilon": -0.25, "lambda": -2.5}
    # pass^1 at eps 0 crosses 0.5 between 0.1 (0.75) and 0.3 (0.25): at 0.2
    assert dialled["critical_lambda"] == pytest.approx(0.2)
    assert undialled["critical_lambda"] is None and undialled["volume"] == 0.25  # k = 1, 2


# -- your own agent -------------------------------------------------------------------------

TASK = "pet_newsletter"
CASSETTE = shipped_cassettes() / f"{TASK}__reference__optimal__s0__r0.json"
SAME = ("outcome", "score", "grounded", "strict", "tool_calls", "failures", "artifact",
        "chain_f1", "kendall_tau", "graph_f1", "termination")


@pytest.fixture(scope="module")
def ref() -> RunOutcome:
    """The reference agent's run of the shipped cassette (replayed offline)."""
    return realprobe.run_tasks([TASK], mode="replay", cassette=CASSETTE).runs[0]


def test_a_user_agent_scores_like_the_reference(tmp_path: Path, ref: RunOutcome) -> None:
    seen: list[str] = []

    async def mine(prompt: str, tools: Toolbox) -> str:
        seen.append(prompt)
        assert {"compose_post", "catfact_fact"} <= {t["function"]["name"] for t in tools.tools}
        for step in ref.state.steps:
            await tools.call(step.tool, json.dumps(step.args))
        return ref.state.final_message

    db = tmp_path / "own.db"
    out = evaluate(mine, [TASK], target=realprobe.options(mode="replay", cassette=CASSETTE),
                   prompt="optimal", db=db, name="mine", model="scripted").runs[0]
    assert {k: out.row[k] for k in SAME} == {k: ref.row[k] for k in SAME}
    assert TASKS[TASK].description in seen[0]
    (row,) = _stored_runs(db)
    assert (row["agent"], row["model"], row["outcome"]) == ("mine", "scripted", ref.row["outcome"])


def test_a_user_agent_that_raises_is_a_failed_run() -> None:
    async def broken(prompt: str, tools: Toolbox) -> str:
        raise ValueError("oops")

    out = evaluate(broken, [TASK], target=realprobe.options(profile="calm")).runs[0]
    assert out.row["outcome"] == "failure" and out.row["termination"] == "agent_error"
    assert "ValueError: oops" in out.row["final_message"]


async def test_an_mcp_client_session_scores_like_the_reference(
    tmp_path: Path, ref: RunOutcome
) -> None:
    db = tmp_path / "mcp.db"
    opts = ServiceOptions(
        transport=TransportOptions(mode="replay", cassette=CASSETTE), db=str(db), task=TASK,
        settings=EvalSettings(mode="replay", cassette=CASSETTE, prompt="optimal"),
        model="scripted-client",
    )
    async with McpService(CATALOG, opts) as service, Client(service.server) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"finish", "task_prompt", "compose_post", "catfact_fact"} <= names
        prompt = await client.call_tool("task_prompt", {})
        assert TASKS[TASK].description in prompt.content[0].text  # type: ignore[union-attr]
        for step in ref.state.steps:
            await client.call_tool(step.tool, step.args)
        done = await client.call_tool(
            "finish", {"answer": ref.state.final_message, "tokens_in": 7, "tokens_out": 3}
        )
        assert done.structured_content is not None
        assert done.structured_content["outcome"] == ref.row["outcome"]
    (row,) = _stored_runs(db)
    assert {k: row[k] for k in SAME} == {k: ref.row[k] for k in SAME}
    assert (row["agent"], row["model"], row["source"]) == ("mcp", "scripted-client", "task")
    assert (row["tokens_in"], row["tokens_out"]) == (7, 3)


async def test_an_mcp_session_that_ends_is_scored(tmp_path: Path) -> None:
    db = tmp_path / "end.db"
    opts = ServiceOptions(transport=TransportOptions(profile="calm"), db=str(db), task=TASK)
    async with McpService(CATALOG, opts) as service, Client(service.server) as client:
        await client.call_tool("catfact_fact", {})
    (row,) = _stored_runs(db)
    assert row["tool_calls"] == 1 and row["outcome"] == "failure"
    assert not row["final_message"]


async def test_an_mcp_finish_with_an_absurd_token_count_is_stored(tmp_path: Path) -> None:
    db = tmp_path / "tok.db"
    opts = ServiceOptions(transport=TransportOptions(profile="calm"), db=str(db), task=TASK)
    async with McpService(CATALOG, opts) as service, Client(service.server) as client:
        await client.call_tool("catfact_fact", {})
        done = await client.call_tool("finish", {"answer": "x", "tokens_in": 10**30,
                                                 "tokens_out": 5})
        assert done.structured_content is not None
    (row,) = _stored_runs(db)
    assert (row["tokens_in"], row["tokens_out"]) == (0, 5)


async def test_an_mcp_session_shows_a_graded_flaw_as_a_run_would(tmp_path: Path) -> None:
    """`mcp --task T --prompt flawed:<type>@<sev>` offers what `run --prompt` offers."""

    prompt = "flawed:missing_steps@50"
    opts = ServiceOptions(transport=TransportOptions(profile="calm"), db=str(tmp_path / "g.db"),
                          task=TASK, settings=EvalSettings(profile="calm", prompt=prompt))
    async with McpService(CATALOG, opts) as service, Client(service.server) as client:
        shown = (await client.call_tool("task_prompt", {})).content[0].text  # type: ignore[union-attr]
    expected = render(with_variant(TASKS[TASK], prompt, CATALOG), prompt).user
    assert expected in shown and render(TASKS[TASK], "optimal").user not in shown


@pytest.mark.parametrize(("prompt", "words"), [
    ("bogus", "--prompt 'bogus': choose baseline"),
    ("flawed:missing_steps@300", "--prompt 'flawed:missing_steps@300': the severity"),
    ("flawed:all", "--prompt 'flawed:all' names 7 prompts; a session runs one"),
])
def test_mcp_task_prompt_is_checked_like_run_prompt(
    tmp_path: Path, prompt: str, words: str
) -> None:
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "realprobe.cli", "mcp", "--task", TASK, "--prompt", prompt,
         "--db", str(tmp_path / "m.db")],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 2 and res.stderr.startswith(f"error: {words}"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.db").exists()


def test_the_evaluate_page_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    page = Path(__file__).resolve().parent.parent / "docs" / "evaluate.md"
    (code,) = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    exec(compile(code, str(page), "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith("partial ") for line in lines)


def test_a_sweep_lists_paraphrase_levels_and_graded_flaws() -> None:
    from realprobe.tasks.sweep import SweepFile, plan_sweep

    sweep = SweepFile.model_validate({
        "tasks": ["pet_newsletter"], "prompts": ["optimal", "flawed:missing_steps@30"],
        "paraphrase": [0, 2], "flaw_seed": 4,
    })
    jobs = plan_sweep(sweep, TASKS)
    assert sorted((j.prompt, j.cfg.paraphrase) for j in jobs) == [
        ("flawed:missing_steps@30", 0), ("flawed:missing_steps@30", 2),
        ("optimal", 0), ("optimal", 2)]
    assert {j.cfg.flaw_seed for j in jobs} == {4} and len({j.key for j in jobs}) == 4
    with pytest.raises(ValueError):
        SweepFile.model_validate({"paraphrase": [3]})


def test_the_cli_flags_reach_the_runs_and_the_surface(tmp_path: Path) -> None:
    from cli_runner import invoke

    db = str(tmp_path / "cli.db")
    graded = ["--prompt", "flawed:missing_steps@50", "--flaw-seed", "3"]
    for args in (["--paraphrase", "2"], graded):
        res = invoke(["run", "pet_newsletter", "--profile", "calm", "--repeat", "2",
                      "--db", db, "--json", *args])
        assert res.exit_code == 0, res.output
    rows = {r["prompt"]: r for r in _stored_runs(Path(db))}
    assert rows["optimal"]["paraphrase"] == 2
    assert (rows["flawed:missing_steps@50"]["flaw_seed"], rows["flawed:missing_steps@50"]
            ["severity"]) == (3, 50)
    out = invoke(["results", "--db", db, "--surface"])
    assert out.exit_code == 0 and "volume 1.000" in out.output, out.output
    res = invoke(["results", "--db", db, "--target-kind", "sandbox"])
    assert res.exit_code != 0 and "for that filter" in str(res.exception)


def _short_deadline_task(tmp_path: Path, seconds: float) -> Path:
    """The shipped task with a deadline of `seconds`, in a folder of its own."""
    data = json.loads((data_dir("tasks_realworld") / f"{TASK}.json").read_text())
    data["constraints"] = {"timeout_s": seconds}
    (tmp_path / f"{TASK}.json").write_text(json.dumps(data))
    return tmp_path


def test_a_user_agent_that_never_answers_ends_at_the_deadline(tmp_path: Path) -> None:
    """On a virtual clock only tool calls move time: the deadline still holds in real time."""
    import asyncio

    async def waits(prompt: str, tools: Toolbox) -> str:
        await tools.call("catfact_fact", {})
        await asyncio.Event().wait()  # an answer that never comes
        return "TASK COMPLETE"

    import threading

    folder = _short_deadline_task(tmp_path, 0.3)
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(evaluate(
        waits, [TASK], target=realprobe.options(profile="calm"), tasks_dir=folder)),
        daemon=True)
    worker.start()
    worker.join(60)  # bounded even when the deadline does not hold
    assert got, "evaluate did not return"
    out = got[0].runs[0]
    assert out.row["termination"] == "deadline" and out.row["outcome"] == "failure"
    assert out.row["tool_calls"] == 1


def test_a_user_agent_that_raises_cancelled_error_itself_is_a_failed_run() -> None:
    """Its own CancelledError (nobody cancelled it) is the agent's failure, not a lost run."""
    import asyncio

    async def confused(prompt: str, tools: Toolbox) -> str:
        raise asyncio.CancelledError("my own")

    result = evaluate(confused, [TASK], target=realprobe.options(profile="calm"), repeat=2)
    assert [r.row["termination"] for r in result.runs] == ["agent_error", "agent_error"]
    assert "CancelledError: my own" in result.runs[0].row["final_message"]


def test_a_user_agent_that_swallows_the_end_of_its_run_is_stopped() -> None:
    calls = []

    async def stubborn(prompt: str, tools: Toolbox) -> str:
        for _ in range(20):  # the same successful call: the third is a loop
            try:
                calls.append((await tools.call("catfact_fact", {})).ok)
            except Exception:
                calls.append(None)
        return "TASK COMPLETE"

    out = evaluate(stubborn, [TASK], target=realprobe.options(profile="calm")).runs[0]
    assert out.row["termination"] == "loop" and out.row["tool_calls"] == 3
    assert out.row["outcome"] == "failure" and calls.count(None) == 18


def test_the_graded_examples_in_the_tasks_page_run(tmp_path: Path, no_network: None) -> None:
    import re
    import shlex

    from cli_runner import invoke

    page = Path(__file__).resolve().parent.parent / "docs" / "tasks.md"
    block = re.search(r"### Graded perturbations.*?```bash\n(.*?)```",
                      page.read_text(encoding="utf-8"), re.S)
    assert block, "docs/tasks.md lost its graded-perturbations block"
    commands = [shlex.split(line.split("#", 1)[0]) for line in block.group(1).splitlines()
                if line.split("#", 1)[0].strip()]
    assert len(commands) == 4 and commands[-1][:2] == ["realprobe", "results"]
    db = str(tmp_path / "graded.db")
    for argv in commands:
        res = invoke([*argv[1:], "--db", db])
        assert res.exit_code == 0, (argv, res.output, res.exception)
    summary = realprobe.task_results(db, surface=True)
    assert len(summary["by_flaw"]) == 2 + 10  # missing_steps@10, @50, and all ten @30
    assert {r["paraphrase"] for r in summary["by_prompt"]} == {0, 2}


def test_the_sweep_comparison_keeps_paraphrase_levels_apart() -> None:
    rows = [{"model": "m", "agent": "a", "target": "simulate:x", "paraphrase": p, "task": "t",
             "prompt": "baseline", "outcome": o, "strict": 0, "failures": 0, "tool_calls": 3,
             "optimal_calls": 3} for p, o in ((0, "full"), (0, "full"), (2, "failure"))]
    out = compare(rows)
    assert [(r["paraphrase"], r["runs"], r["full_rate"]) for r in out] == [(0, 2, 1.0),
                                                                           (2, 1, 0.0)]


def test_the_agent_reads_the_paraphrase_and_is_scored_the_same() -> None:
    seen: dict[int, str] = {}

    async def reader(prompt: str, tools: Toolbox) -> str:
        seen[len(seen)] = prompt
        for step in tools.task.workflow.steps[:-1]:
            await tools.call(step.tool, {a: v.value for a, v in step.args.items()})
        return "nothing stored"

    runs = [evaluate(reader, ["quiz_night"], target=realprobe.options(profile="calm"),
                     paraphrase=level).runs[0] for level in (0, 2)]
    assert seen[0] != seen[1] and paraphrased(TASKS["quiz_night"], 2).description in seen[1]
    assert [r.row["paraphrase"] for r in runs] == [0, 2]
    same = ("outcome", "score", "tool_calls", "chain_f1", "kendall_tau", "graph_f1")
    assert {k: runs[0].row[k] for k in same} == {k: runs[1].row[k] for k in same}


# -- hostile agents: every run is stored with a reason ----------------------------------------


def _evaluate_bounded(agent: Any, folder: Path | None = None, repeat: int = 2) -> Any:
    """`evaluate` in a worker thread, joined with a bound, so a hang fails instead of blocking."""
    import threading

    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(evaluate(
        agent, [TASK], target=realprobe.options(profile="calm"), repeat=repeat,
        tasks_dir=folder)), daemon=True)
    worker.start()
    worker.join(120)
    assert got, "evaluate did not return"
    return got[0]


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@pytest.mark.parametrize(("behaviour", "reason", "said"), [
    ("unprintable", "agent_error", "RuntimeError: no text for you"),
    ("system_exit", "agent_error", "SystemExit: 3"),
    ("keyboard", "agent_error", "KeyboardInterrupt"),
])
def test_a_hostile_answer_or_exit_is_a_stored_failed_run(
    behaviour: str, reason: str, said: str
) -> None:
    async def hostile(prompt: str, tools: Toolbox) -> Any:
        await tools.call("catfact_fact", {})
        if behaviour == "system_exit":
            raise SystemExit(3)
        if behaviour == "keyboard":
            raise KeyboardInterrupt
        return _Unprintable()

    result = _evaluate_bounded(hostile)
    assert [r.row["termination"] for r in result.runs] == [reason, reason]
    assert all(r.row["outcome"] == "failure" and r.row["tool_calls"] == 1 for r in result.runs)
    assert said in result.runs[0].row["final_message"]


@pytest.mark.parametrize("behaviour", ["blocks", "swallows_cancel", "spawns"])
def test_an_agent_holding_its_loop_ends_at_the_deadline(tmp_path: Path, behaviour: str) -> None:
    import asyncio
    import contextlib
    import time as clock

    async def hostile(prompt: str, tools: Toolbox) -> str:
        await tools.call("catfact_fact", {})
        if behaviour == "blocks":
            clock.sleep(30)  # blocks its own loop: the batch's loop must not care
        elif behaviour == "swallows_cancel":
            for _ in range(10**6):
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.sleep(0.05)
        else:
            async def forever() -> None:
                while True:
                    try:
                        await asyncio.sleep(0.05)
                    except asyncio.CancelledError:
                        continue

            asyncio.get_running_loop().create_task(forever())
            await asyncio.Event().wait()
        return "TASK COMPLETE"

    result = _evaluate_bounded(hostile, _short_deadline_task(tmp_path, 0.5))
    assert [r.row["termination"] for r in result.runs] == ["deadline", "deadline"]
    assert all(r.row["outcome"] == "failure" and r.row["tool_calls"] == 1 for r in result.runs)


def test_the_toolbox_never_raises_for_a_bad_call() -> None:
    seen: list[Any] = []

    async def sloppy(prompt: str, tools: Toolbox) -> str:
        for name, args in ((None, {}), (42, "{"), ("catfact_fact", {"x": object()}),
                           ("catfact_fact", [1, 2])):
            seen.append(await tools.call(name, args))  # type: ignore[arg-type]
        return "done"

    out = _evaluate_bounded(sloppy, repeat=1).runs[0]
    assert len(seen) == 4 and not any(c.ok for c in seen)
    assert out.row["termination"] == "finished" and out.row["tool_calls"] == 4


def test_some_tasks_have_many_to_many_data_flow() -> None:
    """ToolMaze's C3/C4: API steps with several API parents, and API steps with several
    API children, in the same task."""
    def many(task: Any) -> bool:
        api = {s.id for s in task.workflow.steps[:-1]}
        parents = {s.id: {r for r, _ in s.refs()} & api for s in task.workflow.steps[:-1]}
        children = {u: sum(u in p for p in parents.values()) for u in api}
        return any(len(p) > 1 for p in parents.values()) and max(children.values()) > 1

    found = sorted(n for n, t in TASKS.items() if many(t))
    assert {"author_workload", "name_origins", "year_in_country"} <= set(found)
    assert found == sorted(n for n, t in TASKS.items() if t.topology in ("C3", "C4"))
    assert len(found) >= 12
