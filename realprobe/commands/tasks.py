"""`realprobe run` (real-world tasks under an agent) and `realprobe results` (Table 5)."""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from realprobe.commands.common import (
    CatalogOpt,
    JsonOpt,
    ModeOpt,
    SandboxOpt,
    SimulateOpt,
    check_loopback_hint,
    console,
    err_console,
    load_catalog,
    print_json,
)
from realprobe.errors import RealprobeError
from realprobe.replay.modes import Mode
from realprobe.simulator.profile import load_profile
from realprobe.store import Store, default_db_path
from realprobe.tasks.agents import AGENT_NAMES, LlmSettings
from realprobe.tasks.metrics import levels, pass_k, recovery
from realprobe.tasks.model import Task, default_tasks_dir, load_tasks, pick_tasks
from realprobe.tasks.outputs import OUTPUT_TOOLS
from realprobe.tasks.prompts import prompt_variants
from realprobe.tasks.runner import (
    RunConfig,
    RunOutcome,
    batch_infrastructure_failure,
    check_cassettes,
    plan_runs,
    run_batch,
)
from realprobe.tasks.store import TaskStore

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
DbOpt = Annotated[
    Path | None, typer.Option("--db", help="SQLite file (default: $REALPROBE_DB or the data dir).")
]


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)
    app.command("results")(results_cmd)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _llm(
    agent: str, base_url: str | None, model: str | None, key_env: str, timeout: float
) -> LlmSettings | None:
    if agent == "reference":
        if base_url or model:
            raise RealprobeError("--base-url/--model are for --agent openai or openai-text")
        return None
    if not base_url or not model:
        raise RealprobeError(f"--agent {agent} needs --base-url URL and --model NAME")
    if not base_url.startswith(("http://", "https://")):
        raise RealprobeError(
            f"--base-url {base_url!r}: expected a URL like http://127.0.0.1:8000/v1"
        )
    key = os.environ.get(key_env)
    if not key:
        err_console.print(
            f"[yellow]note[/yellow]: ${key_env} is not set; sending a placeholder key"
        )
        key = "no-key"
    return LlmSettings(base_url=base_url, model=model, api_key=key, timeout_s=timeout)


def _mode(mode: Mode, sandbox: str | None, simulate: str | None) -> tuple[Mode, str | None]:
    if sandbox is not None:
        check_loopback_hint(sandbox)
    if simulate is not None and sandbox is not None:
        raise RealprobeError("--sandbox and --simulate exclude each other: pick one")
    if simulate is not None and mode is Mode.LIVE:
        mode = Mode.SIMULATE
    if mode is Mode.SIMULATE and simulate is None:
        simulate = "published"
    if simulate is not None:
        load_profile(simulate)  # fail early on a bad name or file
    return mode, simulate


def run_cmd(
    tasks: Annotated[
        list[str] | None, typer.Argument(help="Task ids (see tasks_realworld/).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Run every task.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the tasks and exit.")] = False,
    agent: Annotated[
        str, typer.Option("--agent", help="reference, openai or openai-text.")
    ] = "reference",
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            help="baseline, cot, optimal, flawed:<type> or flawed:all (comma-separated list ok). "
            "Default: optimal for the reference agent, baseline for LLM agents.",
        ),
    ] = None,
    mode: ModeOpt = Mode.LIVE,
    sandbox: SandboxOpt = None,
    simulate: SimulateOpt = None,
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
    tasks_dir: Annotated[
        Path | None, typer.Option("--tasks-dir", help="Folder of task files.")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run real-world tasks under an agent, score them, and store the runs (task_runs, task_steps).

    `realprobe run --all --agent reference --mode replay` replays the shipped cassettes offline.
    """
    if list_:
        _list_tasks(load_tasks(tasks_dir or default_tasks_dir()), as_json)
        return
    if agent not in AGENT_NAMES:
        raise RealprobeError(f"--agent {agent!r}: choose one of {', '.join(AGENT_NAMES)}")
    if repeat < 1:
        raise RealprobeError("--repeat must be at least 1")
    if max_turns is not None and max_turns < 1:
        raise RealprobeError("--max-turns must be at least 1")
    for name, value in (("--timeout", timeout), ("--call-timeout", call_timeout)):
        if value is not None and value <= 0:
            raise RealprobeError(f"{name} must be positive")
    mode, simulate = _mode(mode, sandbox, simulate)
    llm = _llm(agent, base_url, model, api_key_env, llm_timeout)
    prompts = prompt_variants(prompt or ("optimal" if agent == "reference" else "baseline"))
    cat = load_catalog(catalog)
    chosen = pick_tasks(load_tasks(tasks_dir or default_tasks_dir()), tasks or [], all_)
    known = {*cat.tools, *OUTPUT_TOOLS}
    for task in chosen:
        task.check_tools(known)
        for p in prompts:
            task.steps_for(p)  # a missing flawed variant is an error before anything runs
    cfg = RunConfig(
        agent=agent,
        prompts=prompts,
        mode=mode,
        sandbox=sandbox,
        profile=simulate,
        cassette=cassette,
        repeat=repeat,
        seed=seed,
        llm=llm,
        max_turns=max_turns,
        timeout_s=timeout,
        call_timeout_s=call_timeout,
    )
    check_cassettes(chosen, cfg)
    store = TaskStore(Store(db))
    total = len(plan_runs(chosen, cfg))
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=as_json,
    ) as progress:
        bar = progress.add_task("tasks", total=total)

        def done(res: RunOutcome) -> None:
            store.insert_run(res.row, res.steps)
            progress.update(bar, advance=1, description=f"{res.row['task']} {res.row['outcome']}")

        finished: list[RunOutcome] = []

        def keep(res: RunOutcome) -> None:
            finished.append(res)
            done(res)

        try:
            results = asyncio.run(run_batch(chosen, cfg, cat, on_done=keep))
        except KeyboardInterrupt:
            err_console.print(
                f"interrupted: {len(finished)} of {total} runs finished and are stored in "
                f"{store.store.path}; the run in progress is dropped"
            )
            raise typer.Exit(130) from None
    rows = [r.row for r in results]
    summary = {"levels": levels(rows), **pass_k(rows), "recovery": recovery(rows)}
    broken = batch_infrastructure_failure(results)
    if as_json:
        print_json(
            {
                "runs": [{**r.row, "score_detail": r.score.as_dict()} for r in results],
                "summary": summary,
                "infrastructure_failure": broken,
            }
        )
    else:
        _print_runs(results)
        _print_summary(summary, store.store.path)
    if broken:
        raise RealprobeError(
            f"{broken}; check --base-url, the API key in ${api_key_env} and the network"
            if llm is not None
            else f"{broken}; check the network or the --sandbox URL"
        )


def _list_tasks(tasks: dict[str, Task], as_json: bool) -> None:
    if as_json:
        print_json(
            [
                {
                    "instance_id": t.instance_id,
                    "task_type": t.task_type,
                    "complexity": t.complexity,
                    "description": t.description,
                    "required_tools": t.required_tools,
                    "inputs": t.inputs,
                }
                for t in tasks.values()
            ]
        )
        return
    table = Table(title=f"{len(tasks)} tasks")
    for col in ("task", "type", "complexity", "required tools (in order)"):
        table.add_column(col, overflow="fold")
    for t in tasks.values():
        table.add_row(t.instance_id, t.task_type, t.complexity, " -> ".join(t.required_tools))
    console.print(table)


def _print_runs(results: list[RunOutcome]) -> None:
    table = Table(title=f"{len(results)} task runs")
    table.add_column("task", no_wrap=True)
    table.add_column("prompt", no_wrap=True)
    for col in ("#", "outcome", "grounded", "calls", "retries", "fallbacks", "turns", "ended"):
        table.add_column(col, no_wrap=col in ("outcome", "ended"))
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
        f"full {_pct(lv['full_rate'])}  partial {_pct(lv['partial_rate'])}  "
        f"failure {_pct(lv['failure_rate'])}  grounded {_pct(lv['grounded_rate'])}  "
        f"strict {_pct(lv['strict_rate'])}  mean score {lv['mean_score']:.2f}"
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
            f"recovery: {rec['runs_with_failures']} runs met tool failures, "
            f"{_pct(rec['recovery_rate'])} still reached full success, "
            f"{rec['recovery_cost']:.2f} extra calls per failure"
        )
    console.print(
        f"stored in {db} (tables task_runs, task_steps); `realprobe results` for the tables"
    )


# -- results --------------------------------------------------------------------------------


def _group(rows: Iterable[Mapping[str, Any]], key: Any) -> dict[Any, list[Mapping[str, Any]]]:
    out: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return dict(sorted(out.items(), key=lambda kv: tuple(str(x) for x in kv[0])))


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Table 5 (by agent, model, prompt type), per flaw type, and reliability."""

    def prompt_type(r: Mapping[str, Any]) -> str:
        return "flawed" if str(r["prompt"]).startswith("flawed:") else str(r["prompt"])

    by_prompt = [
        {"agent": a, "model": m, "prompt": p, **levels(rs)}
        for (a, m, p), rs in _group(
            rows, lambda r: (r["agent"], r["model"], prompt_type(r))
        ).items()
    ]
    flawed = [r for r in rows if r["flaw"]]
    by_flaw = [
        {"agent": a, "model": m, "flaw": f, **levels(rs)}
        for (a, m, f), rs in _group(flawed, lambda r: (r["agent"], r["model"], r["flaw"])).items()
    ]
    reliability = []
    for (a, m, p, mode, prof, kind), rs in _group(
        rows,
        lambda r: (r["agent"], r["model"], r["prompt"], r["mode"], r["profile"] or "",
                   r.get("target_kind") or "live"),
    ).items():
        pk = pass_k(rs)
        reliability.append(
            {
                "agent": a,
                "model": m,
                "prompt": p,
                "mode": mode,
                "profile": prof,
                "target_kind": kind,  # live | sandbox | simulate | replay: never pooled
                "runs": len(rs),
                **pk,
                **recovery(rs),
            }
        )
    return {
        "runs": len(rows),
        "by_prompt": by_prompt,
        "by_flaw": by_flaw,
        "reliability": reliability,
    }


def _outcome_table(title: str, rows: list[dict[str, Any]], key: str) -> Table:
    """Full / partial / failure shares (the paper's Table 5) per agent, model and `key`."""
    with_score = key == "prompt"
    cols = ["agent", "model", key, "runs", "full", "partial", "failure", "grounded", "strict"]
    t = Table(title=title)
    for col in [*cols, "score"] if with_score else cols:
        t.add_column(col)
    for r in rows:
        cells = [r["agent"], r["model"], r[key], str(r["runs"])]
        cells += [_pct(r[f"{level}_rate"]) for level in cols[4:]]
        if with_score:
            cells.append(f"{r['mean_score']:.2f}")
        t.add_row(*cells)
    return t


def results_cmd(
    db: DbOpt = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", help="Only this batch id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Task results like the paper's Table 5: full / partial / failure per agent and prompt
    type, then per flaw type, then pass^k and recovery."""
    path = db or default_db_path()
    if not path.exists():
        raise RealprobeError(f"no database at {path}; run `realprobe run` first or pass --db FILE")
    rows = TaskStore(Store(path)).runs(batch)
    if agent:
        rows = [r for r in rows if r["agent"] == agent]
    if not rows:
        raise RealprobeError(
            f"no task runs in {path}" + (" for that filter" if agent or batch else "")
        )
    s = summarise(rows)
    if as_json:
        print_json(s)
        return
    console.print(
        _outcome_table(
            f"Task outcomes by agent and prompt type ({s['runs']} runs)", s["by_prompt"], "prompt"
        )
    )
    if s["by_flaw"]:
        console.print(_outcome_table("Flawed-workflow prompts by flaw type", s["by_flaw"], "flaw"))
    rel = Table(
        title="Reliability: pass^k over repeats (full success), recovery after tool failures"
    )
    for col in (
        "agent",
        "model",
        "prompt",
        "mode",
        "profile",
        "runs",
        "pass^1",
        "pass^k",
        "k",
        "recovery",
        "cost",
    ):
        rel.add_column(col)
    for r in s["reliability"]:
        hat = r["pass^k"]
        k = max(hat) if hat else 0
        rel.add_row(
            r["agent"],
            r["model"],
            r["prompt"],
            r["mode"],
            str(r["profile"]),
            str(r["runs"]),
            f"{hat[1]:.2f}" if hat else "-",
            f"{hat[k]:.2f}" if hat else "-",
            str(k),
            _pct(r["recovery_rate"]),
            "-" if r["recovery_cost"] is None else f"{r['recovery_cost']:.2f}",
        )
    console.print(rel)
