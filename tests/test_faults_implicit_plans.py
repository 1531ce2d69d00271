"""Implicit faults (simulator and sandbox), fault plans, labelled injections, the fault-rate
dial and ResiliBench's two rules."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from realprobe import (
    Catalog,
    ErrorCode,
    FaultModel,
    Mode,
    Profile,
    RealprobeError,
    ToolResult,
    TransportOptions,
    call_tool,
    make_client,
    plan_tasks,
)
from realprobe.probes.stats import wilson
from realprobe.simulator.plans import BUILTIN_PLANS, FaultPlan, FaultPlanError, load_plan
from realprobe.simulator.profile import (
    IMPLICIT_VARIANTS,
    ProfileError,
    ToolProfile,
    builtin_profile,
    resilibench_marginal,
)
from realprobe.tasks.runner import RunConfig, RunOutcome, run_batch
from tests.llm_server import ScriptedLLM, text, tool_calls

TOOL = "jsonplaceholder_post"  # two real fixtures, numbers, text: every variant stays ok
TASKS = {t.instance_id: t for t in plan_tasks(all=True).tasks}
PET = TASKS["pet_newsletter"]


def _plan(fault: str, tool: str = "*", **rule: Any) -> FaultPlan:
    return FaultPlan(base="none", rules=[{"tool": tool, "fault": fault, **rule}])


async def _simulated(
    catalog: Catalog, plan: FaultPlan, calls: int = 2
) -> tuple[list[ToolResult], Any]:
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, fault_plan=plan))
    tool = catalog.get(TOOL)
    try:
        results = [await call_tool(tool, dict(tool.examples[0]), client) for _ in range(calls)]
    finally:
        await client.aclose()
    return results, client.transport


async def _clean(catalog: Catalog) -> ToolResult:
    client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, profile="calm"))
    tool = catalog.get(TOOL)
    try:
        return await call_tool(tool, dict(tool.examples[0]), client)
    finally:
        await client.aclose()


# -- implicit variants ---------------------------------------------------------------------


@pytest.mark.parametrize("variant", IMPLICIT_VARIANTS)
def test_each_implicit_variant_in_the_simulator_is_ok_valid_and_in_the_ledger(
    catalog: Catalog, variant: str
) -> None:
    clean = asyncio.run(_clean(catalog))
    results, transport = asyncio.run(_simulated(catalog, _plan(variant)))
    schema = catalog.get(TOOL).output_schema
    for r in results:
        assert r.ok and r.http_status == 200, r.summary()
        jsonschema.validate(r.data, schema)
    # the content is not the clean answer (stale repeats an earlier answer; this tool's drift
    # retypes a number as text, which its declared output reads back as the same number)
    if variant in ("empty", "wrong"):
        assert results[0].data != clean.data
    ledger = transport.ledger
    assert [(i.tool, i.call, i.variant, i.kind, i.by) for i in ledger] == [
        (TOOL, n, variant, "implicit", "plan") for n in (1, 2)
    ]
    assert all(i.note for i in ledger)


def test_stale_repeats_an_earlier_answer(catalog: Catalog) -> None:
    plan = FaultPlan(base="none", rules=[{"tool": TOOL, "n": 3, "fault": "stale"}])

    async def go() -> list[ToolResult]:
        client = make_client(catalog, TransportOptions(mode=Mode.SIMULATE, fault_plan=plan))
        tool = catalog.get(TOOL)
        out = []
        for args in ({"id": 1}, {"id": 6}, {"id": 1}):
            out.append(await call_tool(tool, args, client))
        await client.aclose()
        return out

    first, second, third = asyncio.run(go())
    assert first.data != second.data
    assert third.data == second.data  # asked about id 1, got the earlier answer (id 6)


@pytest.mark.parametrize("variant", IMPLICIT_VARIANTS)
def test_each_implicit_variant_through_the_sandbox(
    catalog: Catalog, calm_sandbox: str, variant: str
) -> None:
    async def go() -> tuple[ToolResult, list[dict[str, Any]]]:
        client = make_client(
            catalog, TransportOptions(sandbox=f"{calm_sandbox}/_fault/{variant}")
        )
        tool = catalog.get(TOOL)
        try:
            r = await call_tool(tool, dict(tool.examples[0]), client)
        finally:
            await client.aclose()
        async with httpx.AsyncClient() as plain:
            journal = (await plain.get(f"{calm_sandbox}/_journal")).json()
        return r, journal

    r, journal = asyncio.run(go())
    assert r.ok and r.http_status == 200, r.summary()
    jsonschema.validate(r.data, catalog.get(TOOL).output_schema)
    entries = journal["entries"] if isinstance(journal, dict) else journal
    (entry,) = [e for e in entries if e["tool"] == TOOL]
    assert entry["fault"] == variant and entry["forced"] and entry["status"] == 200


def test_an_implicit_fault_drawn_by_the_sandbox_profile_is_journaled_not_announced(
    catalog: Catalog, sandbox_factory: Any
) -> None:
    prof = Profile.model_validate(
        {**builtin_profile("calm").model_dump(), "implicit": {TOOL: {"rates": {"empty": 1.0}}}}
    )
    url = sandbox_factory(prof)
    tool = catalog.get(TOOL)
    path = httpx.URL(tool.api.base_url).path.rstrip("/") + "/posts/1"
    resp = httpx.get(f"{url}/{tool.api_id}{path}")
    assert resp.status_code == 200 and "x-realprobe-fault" not in resp.headers
    entries = httpx.get(f"{url}/_journal").json()
    entries = entries["entries"] if isinstance(entries, dict) else entries
    assert entries[-1]["fault"] == "empty" and not entries[-1]["forced"]


def test_profile_implicit_section_is_validated() -> None:
    with pytest.raises(ValueError, match="at most 1"):
        Profile.model_validate({"implicit": {"*": {"rates": {"empty": 0.7, "stale": 0.6}}}})
    with pytest.raises(ValueError):
        Profile.model_validate({"implicit": {"*": {"rates": {"bogus": 0.1}}}})
    with pytest.raises(ValueError):
        Profile.model_validate({"implicit": {"*": {"rates": {"empty": 0.1}, "permanent": 2}}})


def test_permanent_implicit_share_sticks_and_transient_ones_do_not() -> None:
    def variants(permanent: float) -> list[str | None]:
        prof = Profile.model_validate(
            {"implicit": {"*": {"rates": {"wrong": 0.2}, "permanent": permanent}}}
        )
        model = FaultModel(prof, seed=4)
        return [model.draw("t").variant for _ in range(300)]

    transient = variants(0.0)
    assert 30 < transient.count("wrong") < 90  # about 20 %
    stuck = variants(1.0)
    first = stuck.index("wrong")
    assert all(v == "wrong" for v in stuck[first:])


# -- fault plans ---------------------------------------------------------------------------


def test_builtin_plans_load_and_bad_plans_fail_in_one_line(tmp_path: Path) -> None:
    assert {load_plan(n).name for n in BUILTIN_PLANS} == set(BUILTIN_PLANS)
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rules]]\ntool = "*"\nfault = "explode"\n')
    with pytest.raises(FaultPlanError, match=r"bad\.toml: invalid fault plan at rules\.0\.fault"):
        load_plan(bad)
    with pytest.raises(FaultPlanError, match="neither a file nor a built-in"):
        load_plan("no-such-plan")
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps({"rules": [{"tool": "a*", "every": 2, "fault": "TIMEOUT"}]}))
    assert load_plan(as_json).rules[0].every == 2


def test_plan_rules_pick_calls_and_last_as_long_as_asked() -> None:
    plan = FaultPlan.model_validate({"base": "none", "rules": [
        {"tool": "a", "first": 2, "fault": "500"},
        {"tool": "b", "n": [3], "fault": "429", "duration": 2},
        {"tool": "c", "every": 3, "fault": "empty"},
        {"tool": "d", "after": 4, "fault": "dead"},
    ]})  # fmt: skip
    model = FaultModel(builtin_profile("harsh"), seed=1, plan=plan)
    seen = {t: [model.draw(t).variant for _ in range(7)] for t in "abcde"}
    assert seen["a"] == ["500", "500", None, None, None, None, None]
    assert seen["b"] == [None, None, "429", "429", None, None, None]
    assert seen["c"] == [None, None, "empty", None, None, "empty", None]
    assert seen["d"] == [None] * 4 + ["503"] * 3
    assert seen["e"] == [None] * 7  # base = none: the harsh profile's own failures are off
    kinds = {(i.tool, i.persistence) for i in model.ledger}
    assert ("d", "permanent") in kinds and ("a", "transient") in kinds


def test_a_time_window_counts_from_the_first_call() -> None:
    plan = _plan("hang", window=(10.0, 20.0))
    model = FaultModel(builtin_profile("calm"), seed=0, plan=plan)
    got = [(t, model.draw("x", now_s=100.0 + t).code) for t in (0, 5, 10, 15, 20)]
    assert got == [(0, None), (5, None), (10, ErrorCode.TIMEOUT), (15, ErrorCode.TIMEOUT),
                   (20, None)]  # fmt: skip


def _run(catalog: Catalog, cfg: RunConfig) -> RunOutcome:
    (out,) = asyncio.run(run_batch([PET], cfg, catalog))
    return out


def _steps(out: RunOutcome) -> list[tuple[Any, ...]]:
    return [(s.tool, s.ok, s.error_code, s.fault_origin, s.fault_kind, s.fault_variant)
            for s in out.state.steps]  # fmt: skip


DEAD_CAT = FaultPlan(rules=[{"tool": "catfact_fact", "first": 1, "fault": "dead"}])


def test_a_dead_tool_plan_gives_the_same_steps_for_any_seed(catalog: Catalog) -> None:
    runs = [
        _run(catalog, RunConfig(agent="reference", mode=Mode.SIMULATE, profile="calm",
                                seed=seed, fault_plan=DEAD_CAT))  # type: ignore[arg-type]
        for seed in (1, 2)
    ]
    first, second = (_steps(r) for r in runs)
    assert first == second
    cat = [s for s in first if s[0] == "catfact_fact"]
    assert cat and all(s[1:] == (False, "SERVER_ERROR", "injected", "explicit-permanent", "503")
                       for s in cat)  # fmt: skip
    assert all(s[3] is None for s in first if s[0] != "catfact_fact")


def test_a_dead_tool_plan_gives_another_agent_the_same_faults(catalog: Catalog) -> None:
    ref = _run(catalog, RunConfig(agent="reference", mode=Mode.SIMULATE, profile="calm",
                                  fault_plan=DEAD_CAT))  # type: ignore[arg-type]
    server = ScriptedLLM([
        tool_calls(("catfact_fact", {}), ("dogceo_random_image", {})),
        tool_calls(("catfact_fact", {}), ("icanhazdadjoke_random", {})),
        text("TASK COMPLETE: gave up on the cat."),
    ])  # fmt: skip
    server.start()
    try:
        from realprobe.tasks.agents import LlmSettings

        llm = LlmSettings(base_url=server.base_url, model="scripted-1", api_key="k")
        other = _run(catalog, RunConfig(agent="openai", mode=Mode.SIMULATE, profile="calm",
                                        llm=llm, fault_plan=DEAD_CAT))  # type: ignore[arg-type]
    finally:
        server.stop()

    def per_tool(out: RunOutcome) -> dict[str, set[tuple[Any, ...]]]:
        got: dict[str, set[tuple[Any, ...]]] = {}
        for s in _steps(out):
            got.setdefault(s[0], set()).add(s[1:])
        return got

    a, b = per_tool(ref), per_tool(other)
    assert a["catfact_fact"] == b["catfact_fact"] == {
        (False, "SERVER_ERROR", "injected", "explicit-permanent", "503")
    }
    for tool in ("dogceo_random_image", "icanhazdadjoke_random"):
        assert a[tool] == b[tool] == {(True, None, None, None, None)}


def test_plans_reach_the_simulator_through_the_task_api(catalog: Catalog) -> None:
    from realprobe import TaskBatch

    batch = TaskBatch.plan(["pet_newsletter"], fault_plan="toolmaze-explicit-transient",
                           catalog=catalog)  # fmt: skip
    assert batch.config.mode is Mode.SIMULATE and batch.config.profile == "calm"
    with pytest.raises(RealprobeError, match="sandbox takes its own"):
        TaskBatch.plan(["pet_newsletter"], fault_plan="toolmaze-explicit-transient",
                       sandbox="http://127.0.0.1:9", catalog=catalog)  # fmt: skip
    with pytest.raises(RealprobeError, match="between 0 and 1"):
        TaskBatch.plan(["pet_newsletter"], fault_rate=1.5, catalog=catalog)


# -- labelled injections -------------------------------------------------------------------


def test_calm_profile_with_flawed_prompts_meets_no_injected_fault(catalog: Catalog) -> None:
    cfg = RunConfig(agent="reference", prompts=["flawed:all"], mode=Mode.SIMULATE,
                    profile="calm")  # fmt: skip
    from realprobe.tasks.metrics import recovery
    from realprobe.tasks.prompts import prompt_variants

    cfg.prompts = prompt_variants("flawed:all")
    runs = asyncio.run(run_batch(list(TASKS.values()), cfg, catalog))
    rows = [r.row for r in runs]
    assert sum(r["failures"] for r in rows) > 0  # the flaws do make calls fail ...
    assert all(r["tool_faults"] == 0 and r["fault_kinds"] == {} for r in rows)
    assert recovery(rows)["runs_with_failures"] == 0  # ... but none was a tool's fault
    failed = [s for r in runs for s in r.state.steps if not s.ok]
    assert failed and all(s.fault_origin == "agent" for s in failed)


def test_recovery_is_counted_per_fault_kind(catalog: Catalog) -> None:
    from realprobe.tasks.results import summarise

    rows = []
    for plan in ("toolmaze-explicit-transient", "toolmaze-implicit-permanent"):
        cfg = RunConfig(agent="reference", mode=Mode.SIMULATE, profile="calm", fault_plan=plan)
        rows += [r.row for r in asyncio.run(run_batch([PET], cfg, catalog))]
    by_kind = {
        r["fault_plan"]: r["recovery_by_kind"] for r in summarise(rows)["reliability"]
    }
    et = by_kind["toolmaze-explicit-transient"]
    assert et["explicit-transient"]["runs_with_failures"] == 1
    assert et["explicit-transient"]["recovery_rate"] == 1.0  # a retry gets the answer
    ip = by_kind["toolmaze-implicit-permanent"]["implicit-permanent"]
    # the reference agent cannot see a quiet fault: the wrong answer is not a success
    assert ip["runs_with_failures"] == 1 and ip["recovery_rate"] == 0.0


# -- the fault-rate dial -------------------------------------------------------------------


def test_scaled_zero_never_fails() -> None:
    model = FaultModel(builtin_profile("harsh").scaled(0.0), seed=3)
    assert all(model.draw(t).ok for t in ("a", "b") for _ in range(2000))


@pytest.mark.parametrize("lam", [0.075, 0.175, 0.275])
@pytest.mark.parametrize("base", ["harsh", "calm"])
def test_scaled_hits_its_rate_keeping_mix_and_bursts(base: str, lam: float) -> None:
    prof = builtin_profile(base)
    scaled = prof.scaled(lam)
    model = FaultModel(scaled, seed=11)
    outs = [model.draw("some_tool") for _ in range(10_000)]
    fails = sum(not o.ok for o in outs)
    # bursty failures: the interval on the chain's effective n (lag-one correlation rho)
    burst = scaled.for_tool("some_tool").burst
    rho = burst.p_fail_after_fail - burst.p_fail_after_ok if burst else 0.0
    n_eff = 10_000 * (1 - rho) / (1 + rho)
    lo, hi = wilson(lam * n_eff, n_eff)
    assert lo <= fails / 10_000 <= hi
    if prof.default is not None and prof.default.burst is not None:
        b0 = prof.default.burst
        assert rho == pytest.approx(b0.p_fail_after_fail - b0.p_fail_after_ok)
        assert scaled.for_tool("x").errors == prof.default.errors


@pytest.mark.parametrize("lam", [0.1, 0.3, 0.5, 0.9])
def test_scaled_meets_its_rate_within_one_day_of_a_profile_with_day_effects(lam: float) -> None:
    # a calibrated profile whose days differ: the dial's rate holds on each day, so the 400
    # calls of one run (one day) cover it; with the day effect kept most days missed it
    prof = Profile.model_validate({"default": {
        "success_rate": 0.8, "errors": {"SERVER_ERROR": 1.0}, "daily_logit_sd": 0.8}})
    scaled = prof.scaled(lam)
    assert scaled.for_tool("t").daily_logit_sd is None
    for seed in range(3):
        model = FaultModel(scaled, seed=seed)
        fails = sum(not model.draw("t", 1.7e9 + i).ok for i in range(400))
        lo, hi = wilson(fails, 400)
        assert lo <= lam <= hi, (seed, fails)


def test_scaled_rejects_a_rate_outside_zero_one() -> None:
    with pytest.raises(ProfileError):
        builtin_profile("calm").scaled(1.2)


# -- ResiliBench's rules -------------------------------------------------------------------


def _rule_success(rule: str, base: float) -> float:
    tp = ToolProfile(success_rate=base, errors={ErrorCode.TIMEOUT: 1.0})
    prof = Profile(default=tp, rule=rule)  # type: ignore[arg-type]
    model = FaultModel(prof, seed=5)
    return sum(model.draw("t").ok for _ in range(4000)) / 4000


def test_resilibench_code_rule_is_clamped_and_the_paper_rule_is_not() -> None:
    # the code's rule: p = clamp(b * 0.9^(failures among the last 3), 0.1, 0.95)

    code = _rule_success("resilibench-code", 0.8)
    assert code == pytest.approx(resilibench_marginal(0.8), abs=0.03)
    assert _rule_success("resilibench-code", 1.0) < 0.96  # the clamp caps success at 0.95
    # the paper's rule: every earlier failure counts, no clamp: success decays to nothing
    paper = _rule_success("resilibench-paper", 0.8)
    assert paper < 0.05
    assert _rule_success("resilibench-paper", 1.0) == 1.0


def test_resilibench_rules_read_the_task_history_and_the_dependencies() -> None:
    # A failed three times: B, another tool, pays for them (the task's history, not B's)
    def model(rule: str) -> FaultModel:
        tp = ToolProfile(success_rate=0.8, errors={ErrorCode.TIMEOUT: 1.0})
        m = FaultModel(Profile(default=tp, rule=rule), seed=0)  # type: ignore[arg-type]
        m.bind([["A"], ["B"]], {"B": [["A"]]})
        return m

    for rule, dep in (("resilibench-paper", 0.7), ("resilibench-code", 0.5)):
        m = model(rule)
        m.history = [("A", True)] * 3  # the code: A never succeeded, so it is unmet
        assert 1 - m.p_fail("B", 0.8) == pytest.approx(0.8 * dep * 0.9**3)
    # the code's window waits for three calls; the paper counts from the first failure
    paper, code = model("resilibench-paper"), model("resilibench-code")
    paper.history = code.history = [("A", True)]
    assert 1 - paper.p_fail("B", 0.8) == pytest.approx(0.8 * 0.7 * 0.9)
    assert 1 - code.p_fail("B", 0.8) == pytest.approx(0.8 * 0.5)  # A never succeeded
    # an uncalled dependency halves the chance under both; the code clamps at 0.1
    for rule in ("resilibench-paper", "resilibench-code"):
        assert 1 - model(rule).p_fail("B", 0.8) == pytest.approx(0.4)
    code.history = [("A", False), ("A", True), ("A", True), ("A", True)]
    assert 1 - code.p_fail("B", 0.8) == pytest.approx(0.8 * 0.7 * 0.9**3)
    assert 1 - code.p_fail("B", 0.1) == pytest.approx(0.1)


def test_scaled_under_resilibench_rules_reaches_lambda_or_refuses() -> None:
    tp = ToolProfile(success_rate=0.8, errors={ErrorCode.TIMEOUT: 1.0})
    with pytest.raises(ProfileError, match="resilibench-paper"):
        Profile(default=tp, rule="resilibench-paper").scaled(0.1)
    with pytest.raises(ProfileError, match="resilibench-code"):
        Profile(default=tp, rule="resilibench-code").scaled(0.01)

    scaled = Profile(default=tp, rule="resilibench-code").scaled(0.275)
    assert resilibench_marginal(scaled.for_tool("x").success_rate) == pytest.approx(0.725)


def test_profile_call_timeout_turns_slow_answers_into_timeouts() -> None:
    tp = ToolProfile(success_rate=1.0, latency_ms={"p50": 40_000, "p90": 60_000})
    model = FaultModel(Profile(default=tp, call_timeout_s=30.0), seed=0)
    outs = [model.draw("t") for _ in range(200)]
    assert all(o.code is ErrorCode.TIMEOUT and math.isinf(o.latency_s) for o in outs if not o.ok)
    assert sum(not o.ok for o in outs) > 100


# -- the faults page -----------------------------------------------------------------------


def test_the_examples_of_the_faults_page_are_valid() -> None:
    import re
    import tomllib

    page = (Path(__file__).resolve().parent.parent / "docs" / "faults.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", page, flags=re.S)
    plans = [b for lang, b in blocks if lang == "toml"]
    profiles = [b for lang, b in blocks if lang == "json"]
    assert plans and len(profiles) == 2
    for block in plans:
        assert FaultPlan.model_validate(tomllib.loads(block)).rules
    for block in profiles:
        Profile.model_validate_json(block)
    for cmd in (b for lang, b in blocks if lang == "bash"):
        for plan_name in re.findall(r"--fault-plan (toolmaze-\S+)", cmd):
            assert plan_name in BUILTIN_PLANS


# -- sweeps and commands ---------------------------------------------------------------------


def test_a_sweep_crosses_simulate_targets_with_plans_and_rates(tmp_path: Path) -> None:
    from realprobe.tasks.sweep import cells, load_sweep

    path = tmp_path / "s.toml"
    path.write_text(
        'fault_plans = ["toolmaze-explicit-transient", "toolmaze-implicit-permanent"]\n'
        "lambda = [0, 0.175]\n"
        '[[targets]]\nkind = "simulate"\nprofile = "calm"\n'
        '[[targets]]\nkind = "sandbox"\nurl = "http://127.0.0.1:9"\n'
    )
    got = [(c.target.kind, c.fault_plan, c.fault_rate) for c in cells(load_sweep(path))]
    assert got == [
        ("simulate", "toolmaze-explicit-transient", 0.0),
        ("simulate", "toolmaze-explicit-transient", 0.175),
        ("simulate", "toolmaze-implicit-permanent", 0.0),
        ("simulate", "toolmaze-implicit-permanent", 0.175),
        ("sandbox", None, None),  # a sandbox takes its own plan and rate
    ]
    path.write_text("lambda = [1.5]\n")
    with pytest.raises(RealprobeError, match="between 0 and 1"):
        load_sweep(path)


def test_run_and_results_commands_take_plans_and_show_recovery_per_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_stats_cli import one_line_error, run_cli

    db = str(tmp_path / "t.db")
    code, _, err = run_cli(["run", "pet_newsletter", "--fault-plan", "no-such-plan", "--db", db],
                           monkeypatch, capsys)  # fmt: skip
    assert "neither a file nor a built-in" in one_line_error(code, err)
    code, _, err = run_cli(["run", "pet_newsletter", "--fault-rate", "2", "--db", db],
                           monkeypatch, capsys)  # fmt: skip
    assert "--fault-rate" in one_line_error(code, err)
    code, out, err = run_cli(["run", "pet_newsletter", "--fault-plan",
                              "toolmaze-explicit-transient", "--db", db], monkeypatch, capsys)
    assert code == 0, err
    assert "1 runs met tool faults they did not cause" in out
    code, out, err = run_cli(["results", "--db", db], monkeypatch, capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "Recovery per injected fault kind" in flat and "of 1" in flat


def test_the_sandbox_api_takes_a_plan_and_a_rate(catalog: Catalog) -> None:
    from realprobe import make_sandbox
    from realprobe.sandbox.server import running

    tool = catalog.get(TOOL)
    path = f"/{tool.api_id}" + httpx.URL(tool.api.base_url).path.rstrip("/") + "/posts/1"
    plan = FaultPlan(rules=[{"tool": TOOL, "after": 1, "fault": "dead"}])
    with running(make_sandbox("calm", catalog=catalog, latency_scale=0.0,
                              fault_plan=plan)) as url:  # fmt: skip
        statuses = [httpx.get(url + path).status_code for _ in range(4)]
    assert statuses == [200, 503, 503, 503]
    with running(make_sandbox("calm", catalog=catalog, latency_scale=0.0,
                              fault_rate=0.0)) as url:  # fmt: skip
        assert httpx.get(url + path).status_code == 200
    assert make_sandbox("calm", catalog=catalog, fault_rate=0.2).profile.for_tool(
        TOOL
    ).success_rate == pytest.approx(0.8)


async def test_the_mcp_server_serves_a_plan(catalog: Catalog) -> None:
    from mcp import Client

    from realprobe import McpService, ServiceOptions

    opts = TransportOptions(fault_plan=DEAD_CAT)
    service = McpService(catalog, ServiceOptions(transport=opts, tools="catfact_fact"))
    async with service, Client(service.server) as client:
        results = [await client.call_tool("catfact_fact", {}) for _ in range(2)]
    assert all(r.is_error for r in results)
    assert all("SERVER_ERROR" in r.content[0].text for r in results)  # type: ignore[union-attr]


def test_task_steps_against_a_sandbox_are_labelled_from_its_journal(
    catalog: Catalog, sandbox_factory: Any
) -> None:
    wrong_cat = {"catfact_fact": {"rates": {"wrong": 1.0}}}
    prof = Profile.model_validate({**builtin_profile("calm").model_dump(), "implicit": wrong_cat})
    url = sandbox_factory(prof)
    out = _run(catalog, RunConfig(agent="reference", mode=Mode.LIVE, sandbox=url))
    labels = {s.tool: (s.ok, s.fault_origin, s.fault_kind, s.fault_variant)
              for s in out.state.steps}  # fmt: skip
    # an implicit fault looks like a success on the wire: only the journal tells
    assert labels["catfact_fact"] == (True, "injected", "implicit-transient", "wrong")
    assert labels["dogceo_random_image"] == (True, None, None, None)
    # the reference agent doubts the scrambled fact and asks once more: wrong again
    assert out.row["fault_kinds"] == {"implicit-transient": 2}
    assert [s.role for s in out.state.steps if s.tool == "catfact_fact"] == ["call", "retry"]
    assert out.row["outcome"] != "full"  # the wrong answer was not a successful execution


def test_a_plan_bound_to_the_path_ignores_off_path_calls() -> None:
    calm = Profile(default=ToolProfile(success_rate=1.0))
    for name, dead_after in (("toolmaze-explicit-permanent", True),
                             ("toolmaze-explicit-transient", False)):
        model = FaultModel(calm, seed=3, plan=load_plan(name))
        model.bind([["a"], ["b", "b2"], ["c"]], {})
        assert model.draw("x").ok and model.draw("a").ok  # off the branch: nothing
        assert not model.draw("b2").ok  # the group entered through its alternative
        assert model.draw("b").ok  # the other tool of the group still answers
        assert model.draw("b2").ok is not dead_after
        assert [i.tool for i in model.ledger] == ["b2"] * (1 + dead_after)
    # a step selector hits only the step's preferred tool; a task with one path: step 1
    plan = FaultPlan.model_validate({"base": "none", "rules": [
        {"on": "step:2", "fault": "500"}]})
    model = FaultModel(calm, seed=0, plan=plan)
    model.bind([["a"], ["b", "b2"]], {})
    assert model.draw("b2").ok and not model.draw("b").ok
    single = FaultModel(calm, seed=0, plan=load_plan("toolmaze-explicit-transient"))
    single.bind([["a"], ["b"]], {})
    assert single.draw("b").ok and not single.draw("a").ok
    # no task known (a sandbox): a rule that names no tool never lands on whatever is
    # called first; one that names tools binds to the first of them called
    unbound = FaultModel(calm, seed=0, plan=load_plan("toolmaze-explicit-transient"))
    assert unbound.draw("x").ok and unbound.draw("a").ok and not unbound.ledger
    named = FaultModel(calm, seed=0, plan=FaultPlan.model_validate({"base": "none", "rules": [
        {"tool": "a*", "on": "branch", "n": 1, "fault": "500"}]}))
    assert named.draw("x").ok and not named.draw("a2").ok and named.draw("a").ok
    with pytest.raises(ValueError):
        FaultPlan.model_validate({"rules": [{"on": "step:0", "fault": "500"}]})
