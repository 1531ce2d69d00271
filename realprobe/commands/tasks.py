"""`realprobe run` (real-world tasks under an agent) and `realprobe results` (Table 5).
Thin: `realprobe.api.run_tasks` / `TaskBatch` and `realprobe.api.task_results` do the work."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from realprobe.commands.common import (
    CatalogOpt,
    DbOpt,
    FaultPlanOpt,
    FaultRateOpt,
    FlawSeedOpt,
    JsonOpt,
    ModeOpt,
    ParaphraseOpt,
    ProfileOpt,
    PromptOpt,
    SandboxOpt,
    as_flags,
    console,
    err_console,
    load_catalog,
    printed_json,
    wrapped_prose,
)
from realprobe.commands.completion import complete_task
from realprobe.commands.tables import pct
from realprobe.errors import RealprobeError
from realprobe.http.mode import Mode

if TYPE_CHECKING:
    from realprobe.commands.tables import Column, FitTable
    from realprobe.store import Database
    from realprobe.tasks.batch import TaskBatch
    from realprobe.tasks.model import Task
    from realprobe.tasks.runner import RunOutcome

TaskCassetteOpt = Annotated[
    Path | None,
    typer.Option(
        "--cassette",
        help="Record/replay: a file for one run, a folder for several (one cassette per run). "
        "Replay without it uses the shipped cassettes.",
    ),
]
TaskSeedOpt = Annotated[
    int, typer.Option("--seed", help="Seeds the fault model and the agent's jitter, per run.")
]
RunExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (default: one event loop) or ray (pip install 'realprobe[ray]'; live "
        "runs share one politeness state across the workers).",
    ),
]
RunAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address", help="Ray cluster to join, e.g. 10.0.0.5:6379 (default: a local Ray)."
    ),
]


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("results")(results_cmd)


def _run_mcp(a: dict[str, Any]) -> None:
    """`run TASKS.json --mcp-server CMD` (`a`: the command's arguments): the MCP tasks of one
    file, each following its workflow (the `workflow` agent), scored by its own check."""
    from realprobe.api_mcp import evaluate
    from realprobe.store import open_db

    tasks, agent, timeout = a["tasks"], a["agent"], a["timeout"]

    if agent not in ("reference", "workflow"):
        raise RealprobeError("on an MCP server, `run` drives the tasks' workflows (--agent "
                             "workflow); evaluate your own agent with realprobe.evaluate")
    if not tasks or len(tasks) != 1:
        raise RealprobeError("give one MCP tasks file (JSON or TOML) as TASKS")
    handle = open_db(a["db"])
    with as_flags("mcp_server", "mcp_url", "profile", "fault_plan", "fault_rate", "repeat",
                  "timeout"):
        runs = evaluate(
            "workflow", tasks[0], mcp_server=a["mcp_server"], mcp_url=a["mcp_url"],
            profile=a["profile"], fault_plan=a["fault_plan"], fault_rate=a["fault_rate"],
            seed=a["seed"], repeat=a["repeat"], db=handle, name="workflow",
            timeout=timeout or 10.0)
    if printed_json(a["as_json"], [{"task": r.task, "repeat": r.repeat, "success": r.success,
                                    "reasons": r.reasons, "calls": len(r.calls)} for r in runs]):
        return
    for r in runs:
        mark = "[green]full[/green]" if r.success else "[red]failure[/red]"
        console.print(f"{r.task} #{r.repeat}: {mark} · {len(r.calls)} calls"
                      + (f" · {'; '.join(r.reasons)}" if r.reasons else ""))
    console.print(f"{sum(r.success for r in runs)} of {len(runs)} runs met their check -> {handle}")


def run_cmd(
    tasks: Annotated[
        list[str] | None, typer.Argument(help="Task ids (see `realprobe run --list`).",
                                         autocompletion=complete_task)
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Run every task.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the tasks and exit.")] = False,
    agent: Annotated[
        str, typer.Option("--agent", help="reference, openai, openai-text or openai-reflexion.")
    ] = "reference",
    prompt: PromptOpt = None,
    flaw_seed: FlawSeedOpt = 0,
    paraphrase: ParaphraseOpt = 0,
    mode: ModeOpt = Mode.LIVE,
    sandbox: SandboxOpt = None,
    profile: ProfileOpt = None,
    cassette: TaskCassetteOpt = None,
    db: DbOpt = None,
    repeat: Annotated[
        int, typer.Option("--repeat", help="Runs per task and prompt (for pass^k).")
    ] = 1,
    seed: TaskSeedOpt = 0,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name at that endpoint.")
    ] = None,
    api_key_env: Annotated[
        str, typer.Option("--api-key-env", help="Environment variable holding the API key.")
    ] = "OPENAI_API_KEY",
    llm_timeout: Annotated[
        float, typer.Option("--llm-timeout", help="Seconds per LLM request.")
    ] = 120.0,
    max_turns: Annotated[
        int | None, typer.Option("--max-turns", help="LLM turn limit (task default 10).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Deadline per task, seconds.")
    ] = None,
    call_timeout: Annotated[
        float | None, typer.Option("--call-timeout", help="Deadline per tool call, seconds.")
    ] = None,
    fault_plan: FaultPlanOpt = None,
    fault_rate: FaultRateOpt = None,
    tasks_dir: Annotated[
        Path | None, typer.Option("--tasks-dir", help="Folder of task files.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", help="Runs side by side on one event loop.")
    ] = 1,
    llm_rpm: Annotated[
        float | None, typer.Option("--llm-rpm", help="LLM requests per minute (all runs).")
    ] = None,
    llm_tpm: Annotated[
        float | None, typer.Option("--llm-tpm", help="LLM tokens per minute (all runs).")
    ] = None,
    llm_concurrency: Annotated[
        int | None, typer.Option("--llm-concurrency", help="LLM requests in flight at once.")
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Skip runs already stored complete in --db (same task, "
                     "agent, model, prompt, target, seed, repeat); redo infrastructure errors."),
    ] = False,
    executor: RunExecutorOpt = "local",
    address: RunAddressOpt = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
    mcp_server: Annotated[
        str | None,
        typer.Option("--mcp-server", help="Run the MCP tasks of the file given as TASKS on this "
                     "MCP server (a command), through `realprobe mcp proxy`."),
    ] = None,
    mcp_url: Annotated[
        str | None, typer.Option("--mcp-url", help="... or on this streamable-HTTP MCP server.")
    ] = None,
) -> None:
    """Run real-world tasks under an agent, score them, and store the runs (task_runs, task_steps).

    `realprobe run --all --agent reference --mode replay` replays the shipped cassettes offline;
    add `--executor ray` to spread the runs over a local Ray (or `--address` a cluster).
    """
    if mcp_server is not None or mcp_url is not None:  # the tasks of an MCP server instead
        return _run_mcp(locals())
    if list_:
        from realprobe.tasks.model import default_tasks_dir, load_tasks

        _list_tasks(load_tasks(tasks_dir or default_tasks_dir()), as_json)
        return
    with as_flags("agent", "repeat", "max_turns", "timeout", "call_timeout", "base_url",
                  "model", "sandbox", "mode", "prompt", "concurrency", "executor",
                  "address", "paraphrase", "fault_plan", "fault_rate"):
        if fault_plan:  # a file handed in is refused before the runner is even imported
            from realprobe.simulator.plans import load_plan

            load_plan(fault_plan)
        from realprobe.api import plan_tasks
        from realprobe.tasks.executors import check_executor
        from realprobe.tasks.settings import EvalSettings

        check_executor(executor, address)  # before the tasks are even loaded

        batch = plan_tasks(
            tasks or [], all=all_, agent=agent, repeat=repeat,
            settings=EvalSettings(
                mode=mode, sandbox=sandbox, profile=profile, cassette=cassette, seed=seed,
                fault_plan=fault_plan, fault_rate=fault_rate, prompt=prompt,
                flaw_seed=flaw_seed, paraphrase=paraphrase,
            ),
            base_url=base_url, model=model, api_key_env=api_key_env, llm_timeout=llm_timeout,
            max_turns=max_turns, timeout=timeout, call_timeout=call_timeout,
            tasks_dir=tasks_dir, catalog=load_catalog(catalog),
            on_note=lambda note: err_console.print(f"[yellow]note[/yellow]: {note}"),
            concurrency=concurrency, llm_rpm=llm_rpm, llm_tpm=llm_tpm,
            llm_concurrency=llm_concurrency,
        )
    from realprobe.store import open_db

    handle = open_db(db)
    result = _run_with_progress(
        batch, handle, as_json=as_json, resume=resume, executor=executor, address=address
    )
    if result.skipped:
        err_console.print(
            f"resume: {result.skipped} of {result.skipped + len(result.runs)} runs already "
            f"stored complete in {handle}"
        )
    if not printed_json(as_json, result):
        _print_runs(result.runs)
        _print_summary(result.summary, handle.path)
    if result.infrastructure_failure:
        from realprobe.errors import Unavailable

        raise Unavailable(
            f"{result.infrastructure_failure}; check --base-url, the API key in ${api_key_env} "
            "and the network"
            if batch.config.llm is not None
            else f"{result.infrastructure_failure}; check the network or the --sandbox URL"
        )


def _run_with_progress(
    batch: TaskBatch, db: Database, as_json: bool, resume: bool = False, executor: str = "local",
    address: str | None = None,
) -> Any:
    """Run the batch under a progress bar (where every long command draws one); Ctrl-C keeps
    the finished runs (stored) and exits 130."""
    from realprobe.commands.progress import bar_wanted
    from realprobe.commands.sweep import SweepProgress

    progress = SweepProgress(disable=not bar_wanted(as_json), label="tasks",
                             workers=batch.config.concurrency, transient=True,
                             catalog=batch.catalog)
    with progress.bar:
        try:
            return batch.run(db=db, on_done=progress.finished, resume=resume,
                             executor=executor, address=address, on_plan=progress.plan)
        except KeyboardInterrupt:
            err_console.print(
                f"interrupted: {len(batch.finished)} of {batch.total} runs finished and are "
                f"stored in {db}; the run in progress is dropped"
            )
            raise typer.Exit(130) from None


def _list_tasks(tasks: dict[str, Task], as_json: bool) -> None:
    from realprobe.commands.tables import Column, fit_table

    if printed_json(as_json, [
        {
            "instance_id": t.instance_id,
            "task_type": t.task_type,
            "complexity": t.complexity,
            "topology": t.topology,  # C1 chain .. C4 many-to-many with alternatives
            "has_alternative": t.has_alternative,
            "description": t.description,
            "required_tools": t.required_tools,
            "inputs": t.inputs,
        }
        for t in tasks.values()
    ]):
        return
    table = fit_table(
        [Column("task", "name"), Column("type", "name", drop=2),
         Column("complexity", "name", drop=1), Column("grade", "name"),
         Column("required tools (in order)")],
        title=f"{len(tasks)} tasks (grade: C1 chain .. C4 many-to-many with alternatives)",
    )
    for t in tasks.values():
        table.add_row(t.instance_id, t.task_type, t.complexity, t.topology,
                      " -> ".join(t.required_tools))
    console.print(table)


def _print_runs(results: list[RunOutcome], elsewhere: str = "in --json") -> None:
    from realprobe.commands.tables import Column, fit_table

    table = fit_table(
        [Column("task", "name"), Column("prompt", "name"), Column("#", "num"),
         Column("outcome", "name"), Column("grounded", "name", drop=5),
         Column("calls", "num", drop=1), Column("retries", "num", drop=3),
         Column("fallbacks", "num", drop=4), Column("turns", "num", drop=2),
         Column("ended", "name", drop=6)],
        title=f"{len(results)} task runs", elsewhere=elsewhere,
    )
    colour = {"full": "green", "partial": "yellow", "failure": "red", "error": "magenta"}
    for r in results:
        row = r.row
        c = colour[row["outcome"]]
        table.add_row(
            row["task"],
            row["prompt"],
            str(row["repeat"]),
            f"[{c}]{row['outcome']}[/{c}]",
            "yes" if row["grounded"] else "no",
            str(row["tool_calls"]),
            str(row["retries"]),
            str(row["fallbacks"]),
            str(row["turns"]),
            row["termination"],
        )
    console.print(table)


def _print_summary(summary: Mapping[str, Any], db: Path) -> None:
    lv = summary["levels"]
    rec = summary["recovery"]
    line = (
        f"full {pct(lv['full_rate'])}  partial {pct(lv['partial_rate'])}  "
        f"failure {pct(lv['failure_rate'])}  grounded {pct(lv['grounded_rate'])}  "
        f"strict {pct(lv['strict_rate'])}  mean score {lv['mean_score']:.2f}"
    )
    if lv["error"]:
        line += f"  ({lv['error']} runs lost to LLM endpoint errors)"
    console.print(line)
    hat = summary["pass^k"]
    if len(hat) > 1:
        console.print(
            "pass^k "
            + "  ".join(f"k={k}: {v:.2f}" for k, v in hat.items())
            + "   pass@k "
            + "  ".join(f"k={k}: {v:.2f}" for k, v in summary["pass@k"].items())
        )
    if rec["runs_with_failures"]:
        console.print(
            f"recovery: {rec['runs_with_failures']} runs met tool faults they did not cause, "
            f"{pct(rec['recovery_rate'])} still reached full success, "
            f"{rec['recovery_cost']:.2f} extra calls per failure"
        )
    console.print(
        f"stored in {db} (tables task_runs, task_steps); `realprobe results` for the tables"
    )


# -- results --------------------------------------------------------------------------------


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def _errors_text(mix: Mapping[str, Any]) -> str:
    top = list(mix["errors"].items())[:3]
    return ", ".join(f"{code} {n}" for code, n in top) or "-"


def _runs_table(rows: list[dict[str, Any]], key: str, columns: list[Column], title: str,
                values: Callable[[dict[str, Any]], list[str]]) -> FitTable:
    """A row per entry of `rows`: first the columns that say which runs it holds (agent and
    model, `key`, target; fault plan and paraphrase level only when some row has one), then
    `columns`, filled by `values`. Agent and model share a column, one above the other (one
    name when they are the same), so that both fit at 80 columns. The first columns are
    never left out (one that holds the same value in every row is named above the table on
    a narrow terminal)."""
    from realprobe.commands.tables import Column, fit_table

    names = [key, "target"]
    extra = [(c, label) for c, label, default in (("fault_plan", "plan", "-"),
                                                  ("paraphrase", "ε", 0))
             if any(r[c] != default for r in rows)]
    headers = ["agent\nmodel", *names] + [label for _, label in extra]
    t = fit_table([*(Column(c, "name", key=True) for c in headers), *columns], title=title)
    for r in rows:
        who = str(r["agent"]) if r["model"] in (r["agent"], None, "") else \
            f"{r['agent']}\n{r['model']}"
        t.add_row(who, *(str(r[n]) for n in names), *(str(r[c]) for c, _ in extra), *values(r))
    return t


def _outcome_table(title: str, rows: list[dict[str, Any]], key: str) -> FitTable:
    """Full / partial / failure shares (the paper's Table 5) per agent, model and `key`, per
    target, fault plan and paraphrase level, with the trajectory metrics' means."""
    from realprobe.commands.tables import Column

    levels = ["full", "partial", "failure", "grounded", "strict"]
    drops = {"grounded": 3, "strict": 2, "chain F1": 4, "τ": 4, "graph F1": 4, "node F1": 4,
             "score": 1}
    return _runs_table(
        rows, key, [Column("runs", "num"), *(Column(c, "num", drop=drops.get(c, 0)) for c in
                                             [*levels, "score", "chain F1", "τ", "graph F1",
                                              "node F1"])], title,
        lambda r: [str(r["runs"]), *(pct(r[f"{lv}_rate"]) for lv in levels),
                   f"{r['mean_score']:.2f}", _num(r["chain_f1"]), _num(r["kendall_tau"]),
                   _num(r["graph_f1"]), _num(r.get("graph_node_f1"))])


def _usage_table(rows: list[dict[str, Any]]) -> FitTable:
    """Tokens, cost and the error mix of the calls the agent made, per row of Table 5."""
    from realprobe.commands.tables import Column

    return _runs_table(
        rows, "prompt",
        [Column("tokens in", "num", drop=2), Column("tokens out", "num", drop=2),
         Column("cost $", "num"), Column("calls", "num"), Column("failed", "num"),
         Column("top errors", "list", drop=1)],
        "Usage, cost and the agent's failed calls by error code",
        lambda r: [str(r["tokens_in"]), str(r["tokens_out"]), _num(r["cost_usd"], ".4f"),
                   str(r["error_mix"]["calls"]), str(r["error_mix"]["failed"]),
                   _errors_text(r["error_mix"])])


def results_cmd(
    db: DbOpt = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", help="Only this batch id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this model.")] = None,
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", help="Only this prompt (e.g. flawed:missing_steps@30)."),
    ] = None,
    profile: Annotated[  # --target simulate:NAME says it too
        str | None, typer.Option("--profile", hidden=True)
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="Only this target label, e.g. simulate:harsh.")
    ] = None,
    target_kind: Annotated[
        str | None, typer.Option("--target-kind", help="live, sandbox, simulate or replay.")
    ] = None,
    fault_plan: Annotated[
        str | None, typer.Option("--fault-plan", help="Only runs under this fault plan.")
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="TOML/JSON price table (USD per million tokens) over "
                     "the shipped one."),
    ] = None,
    surface: Annotated[
        bool,
        typer.Option("--surface", help="Print pass^k over k x ε (paraphrase) x λ (fault rate) "
                     "and the surface's volume."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Task results like the paper's Table 5: full / partial / failure per agent and prompt
    type, flaws, pass^k.

    One row per target, fault plan and paraphrase level (never pooled); then per flaw type,
    then pass^k and recovery over repeats; --surface adds the reliability surface."""
    from realprobe.api import task_results
    from realprobe.store import open_db

    handle = open_db(db)
    if not handle.path.exists():
        raise RealprobeError(f"no database at {handle}; run `realprobe run` first or pass "
                             "--db FILE")
    with as_flags("prices", "target_kind"):
        s = task_results(
            handle, agent=agent, batch=batch, model=model, prompt=prompt, profile=profile,
            target=target, target_kind=target_kind, fault_plan=fault_plan, prices=prices,
            surface=surface,
        )
    if printed_json(as_json, s):
        return
    with wrapped_prose():  # read, not parsed: no line wider than the terminal, even in a pipe
        print_results(s)


def print_results(s: Mapping[str, Any]) -> None:
    """The tables of `realprobe results` (and the surface, when asked)."""
    console.print(
        _outcome_table(
            f"Task outcomes by agent and prompt type ({s['runs']} runs)", s["by_prompt"], "prompt"
        )
    )
    verdict = results_verdict(s["by_prompt"])
    if verdict:
        console.print(verdict, highlight=False)
    console.print(_usage_table(s["by_prompt"]))
    if s["by_flaw"]:
        console.print(_outcome_table("Flawed-workflow prompts by flaw type", s["by_flaw"], "flaw"))
    if s.get("by_complexity"):
        console.print(_complexity_table(s["by_complexity"]))
    _print_power(s.get("power") or [])
    console.print(_reliability_table(s["reliability"]))
    _print_recovery_by_kind(s["reliability"])
    for surf in s.get("surface") or []:
        console.print(
            f"Reliability surface of {surf['agent']} / {surf['model']} / {surf['prompt']} on "
            f"{surf['target']} (fault plan {surf['fault_plan']}, {surf['runs']} runs)"
        )
        console.print(_surface_table(surf))


def results_verdict(rows: list[dict[str, Any]]) -> str | None:
    """One paragraph: the rows with the highest and the lowest full-success rate."""
    if len(rows) < 2:
        return None

    def who(r: dict[str, Any]) -> str:
        agent = r["agent"] if r["model"] in (r["agent"], None, "") else f"{r['agent']}/{r['model']}"
        return f"{agent} with the {r['prompt']} prompt on {r['target']}"

    def at(rate: float) -> str:
        same = [who(r) for r in rows if (r["full_rate"] or 0.0) == rate]
        return "; ".join(same[:2]) + (f" and {len(same) - 2} more" if len(same) > 2 else "")

    rates = [r["full_rate"] or 0.0 for r in rows]
    hi, lo = max(rates), min(rates)
    if hi == lo:
        return f"Verdict: every row reaches full success in {pct(hi)} of its runs."
    return (f"Verdict: full success is highest, {pct(hi)}, for {at(hi)}; lowest, {pct(lo)}, "
            f"for {at(lo)}.")


def _reliability_table(rows: list[dict[str, Any]]) -> FitTable:
    from realprobe.commands.tables import Column

    drops = {"pass^1": 3, "k": 2, "extra calls": 1}

    def values(r: dict[str, Any]) -> list[str]:
        hat = r["pass^k"]
        k = max(hat) if hat else 0
        return [str(r["runs"]), f"{hat[1]:.2f}" if hat else "-",
                f"{hat[k]:.2f}" if hat else "-", str(k), pct(r["recovery_rate"]),
                _num(r["recovery_cost"])]

    return _runs_table(
        rows, "prompt", [Column(c, "num", drop=drops.get(c, 0)) for c in
                         ("runs", "pass^1", "pass^k", "k", "recovery", "extra calls")],
        "Reliability: pass^k over repeats (full success), recovery after tool failures", values)


def _complexity_table(rows: list[dict[str, Any]]) -> FitTable:
    """Outcomes per task complexity grade (C1 chains .. C4 many-to-many with alternatives),
    with the recovery rate after tool faults the agent did not cause."""
    from realprobe.commands.tables import Column

    return _runs_table(
        rows, "prompt",
        [Column("grade", "name", key=True), Column("runs", "num"),
         *(Column(c, "num", drop=d) for c, d in (("full", 0), ("partial", 2), ("failure", 2),
                                                 ("chain F1", 3), ("recovery", 1)))],
        "Task outcomes by complexity (C1 chain .. C4 many-to-many with alternatives)",
        lambda r: [str(r["topology"]), str(r["runs"]), pct(r["full_rate"]),
                   pct(r["partial_rate"]), pct(r["failure_rate"]), _num(r["chain_f1"]),
                   pct(r["recovery_rate"])])


def _print_power(rows: list[dict[str, Any]]) -> None:
    """One line per row of Table 5: the runs that would tell it from a rate 10 points away."""
    for r in rows:
        if r["runs_per_agent"] is None:
            continue
        console.print(
            f"power: {r['agent']} / {r['prompt']}: telling {pct(r['full_rate'])} full success "
            f"from {pct(r['other_rate'])} at {r['confidence']:.0%} confidence and "
            f"{r['power']:.0%} power takes {r['runs_per_agent']} runs per agent "
            f"({r['repeats']} repeats of its {r['tasks']} tasks)", highlight=False)


def _surface_table(surf: Mapping[str, Any]) -> FitTable:
    """pass^k per (ε, λ) row and k column, titled with the surface's volume."""
    from realprobe.commands.tables import Column, fit_table

    vol = "-" if surf["volume"] is None else f"{surf['volume']:.3f}"
    t = fit_table(  # on a narrow terminal the largest k go first
        [Column("ε", "num"), Column("λ", "num"),
         *(Column(f"k={k}", "num", drop=i if i > 0 else 0) for i, k in enumerate(surf["k"]))],
        title=f"pass^k R(k, ε, λ = absolute fault share), volume {vol}",
    )
    cells = {(c["epsilon"], c["lambda"], c["k"]): c["pass^k"] for c in surf["cells"]}
    for e in surf["epsilon"]:
        for lam in surf["lambda"]:
            shown = "profile" if lam is None else f"{lam:g}"
            t.add_row(str(e), shown, *(f"{cells[(e, lam, k)]:.2f}" for k in surf["k"]))
    grad, crit = surf.get("gradient") or {}, surf.get("critical_lambda")
    t.caption = (f"dR/dε {_num(grad.get('epsilon'))} per level, dR/dλ {_num(grad.get('lambda'))}"
                 f" per unit share; pass^1 below 0.5 from λ = {_num(crit)}")
    return t


def _print_recovery_by_kind(reliability: list[dict[str, Any]]) -> None:
    """Recovery per fault kind (explicit/implicit x transient/permanent), where any met."""
    from realprobe.commands.tables import Column
    from realprobe.tasks.metrics import FAULT_KINDS

    rows = [r for r in reliability
            if any(r["recovery_by_kind"][k]["runs_with_failures"] for k in FAULT_KINDS)]
    kinds = [k for k in FAULT_KINDS if any(r["recovery_by_kind"][k]["runs_with_failures"]
                                           for r in rows)]  # fmt: skip
    if not rows:
        return

    def rates(r: dict[str, Any]) -> list[str]:
        by = [r["recovery_by_kind"][k] for k in kinds]
        return [f"{pct(b['recovery_rate'])} of {b['runs_with_failures']}"
                if b["runs_with_failures"] else "-" for b in by]

    console.print(_runs_table(
        rows, "prompt", [Column(k.replace("-", " "), "num") for k in kinds],
        "Recovery per injected fault kind (runs that met one; full success; kinds no run met "
        "are left out)", rates))
