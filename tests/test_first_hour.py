"""What a newcomer meets first: answers before footnotes, whole names in every table, groups
that list their verbs, numbers that repeat under load, a hint instead of silence."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_runner import invoke, run
from rich.console import Console

from realprobe import api
from realprobe.commands import common
from realprobe.probes.stats import verdict
from realprobe.sandbox.server import running
from realprobe.simulator.faults import MAX_CALL_NUMBER, MAX_KEPT, FaultModel, caller_seed


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "realprobe.cli", *args],
                          capture_output=True, text=True, timeout=300)


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """What `cli` gives, without a new interpreter: for what is not about the process."""
    return run(args)


@pytest.fixture()
def screen(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The commands' console at a chosen width; call it with the width, read `.getvalue()`."""
    def at(width: int) -> io.StringIO:
        buf = io.StringIO()
        monkeypatch.setattr(common.console, "_console",
                            Console(file=buf, width=width, soft_wrap=True, color_system=None))
        return buf
    yield at


# -- groups ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("group", "verbs"), [
    ("catalog", ("import-openapi", "record-fixtures", "public-apis")),
    ("cassette", ("inspect", "verify", "scrub", "import", "export", "record-round")),
    ("alert", ("check",)),
    ("mcp", ("proxy", "replay")),
])
def test_groups_list_their_verbs_and_a_bare_group_exits_0(group: str, verbs: tuple[str]) -> None:
    helped = cli(group, "-h")
    assert helped.returncode == 0 and "Commands:" in helped.stdout
    assert all(f"  {v} " in helped.stdout for v in verbs), helped.stdout
    listing = helped.stdout.split("Commands:", 1)[1]
    assert "..." not in listing and listing.rstrip().endswith("."), listing  # whole sentences
    if group not in ("catalog", "mcp"):  # a bare `catalog` lists the tools, `mcp` serves
        bare = cli(group)
        assert bare.returncode == 0, bare.stderr
        assert bare.stderr == "" and "Commands:" in bare.stdout


# -- stats: the answer first, notes grouped --------------------------------------------------


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("fh") / "p.db"
    api.probe(None, rounds=3, target=api.options(profile="harsh"), db=db, seed=3,
              politeness="off")
    return db


def test_stats_prints_a_verdict_and_counts_its_notes(probed: Path, screen: Any) -> None:
    out = screen(80)
    res = invoke(["stats", "--db", str(probed), "--threshold", "0.9"])
    assert res.exit_code == 0, res.output
    text = " ".join(out.getvalue().split())
    assert "Verdict at a 90% success threshold" in text
    assert "tools are below it, worst " in text
    per_tool = [ln for ln in out.getvalue().splitlines() if ln.startswith(("† ", "‡ "))]
    assert all(" tools: " in ln or " tool: " in ln for ln in per_tool), per_tool
    assert "--explain lists them" in text

    full = screen(80)
    res = invoke(["stats", "--db", str(probed), "--explain"])
    assert res.exit_code == 0
    listed = [ln for ln in full.getvalue().splitlines() if ln.startswith("  ")]
    rep = api.stats(probed)
    assert sum("pairs after a failure" in ln for ln in listed) == sum(
        bool(t.success.note) for t in rep.tools)


def test_calibrate_counts_its_notes_by_kind(probed: Path, tmp_path: Path) -> None:
    """The profile's per-tool notes are one counted line per kind on stderr, every tool's
    note with --explain; the profile file keeps them all."""
    out = tmp_path / "p.json"
    prof = api.calibrate(probed)
    notes = [(tool, n) for tool, tp in prof.tools.items() for n in tp.notes]
    assert len(notes) > 2  # a group big enough to be counted
    res = in_process("calibrate", "--db", str(probed), "--output", str(out))
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if "tool" in ln and "NOT MEASURED" not in ln]
    assert len(said) < len(notes), res.stderr
    assert any(ln.startswith(f"{len(notes)} tools: the burst chain is rough (--explain")
               for ln in said), res.stderr
    res = in_process("calibrate", "--db", str(probed), "--output", str(out), "--explain")
    listed = [ln.strip() for ln in res.stderr.splitlines() if ln.startswith("  ")]
    assert sorted(listed) == sorted(f"{t}: {n.partition(': ')[2]}" for t, n in notes)


@pytest.mark.parametrize("bad", ["0", "1.5", "95"])
def test_a_threshold_outside_0_1_is_refused(probed: Path, bad: str) -> None:
    res = in_process("stats", "--db", str(probed), "--threshold", bad)
    assert res.returncode == 2 and res.stderr.startswith("error: --threshold"), res.stderr


def test_the_report_leads_with_the_verdict(probed: Path, tmp_path: Path) -> None:
    """The HTML and Markdown reports carry the verdict `stats` prints, above the per-tool
    table; the command prints it before saying where the file went."""

    says = verdict(api.stats(probed))
    html = tmp_path / "r.html"
    res = in_process("report", "--db", str(probed), "--output", str(html))
    assert res.returncode == 0, res.stderr
    assert " ".join(res.stderr.split()).index(says) < " ".join(res.stderr.split()).index("wrote")
    text = html.read_text()
    assert f"<p id='verdict'>{says}</p>" in text and text.index(says) < text.index("id='tools'")
    md = in_process("report", "--db", str(probed), "--format", "md").stdout
    assert says in md and md.index(says) < md.index("| tool |")


def test_verdict_sorts_tools_by_their_quoted_interval(probed: Path) -> None:
    rep = api.stats(probed)
    says = verdict(rep, 0.99)
    below = [t for t in rep.tools if t.success.quoted95[1] < 0.99]
    assert f"{len(below)} of {len(rep.tools)} tools are below it" in says
    lowest = min(t.success.rate for t in below)
    named = says.split("worst ", 1)[1].split(" ", 1)[0]
    assert next(t for t in below if t.tool == named).success.rate == lowest


def test_library_warnings_stay_off_the_console(tmp_path: Path) -> None:
    """A RuntimeWarning raised inside a command never reaches stderr."""
    code = ("import warnings, sys\n"
            "from realprobe import cli\n"
            "import realprobe.commands.common as c\n"
            "real = c.load_catalog\n"
            "def noisy(*a, **k):\n"
            "    warnings.warn('overflow in exp', RuntimeWarning)\n"
            "    return real(*a, **k)\n"
            "c.load_catalog = noisy\n"
            "cli.main(['catalog'])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "RuntimeWarning" not in res.stderr and "overflow" not in res.stderr


def test_a_sandbox_started_and_stopped_leaves_no_warning_at_exit() -> None:
    """With warnings on (`python -W default`), the demo's sandbox thread closes its event loop
    when it stops: no `ResourceWarning: unclosed event loop` when the process ends."""
    code = ("from realprobe import api\n"
            "with api.sandbox_running('calm', seed=0) as url:\n"
            "    api.call('advice_random', target=api.options(sandbox=url))\n")
    res = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


# -- results and drift -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same simulated runs (two prompts) stored under two agents with long model names."""
    db = tmp_path_factory.mktemp("fh") / "r.db"
    res = invoke(["run", "travel_briefing", "dev_standup", "--agent",
                  "reference", "--mode", "simulate", "--profile", "harsh",
                  "--prompt", "optimal,flawed:missing_steps@30", "--db", str(db)])
    assert res.exit_code == 0, res.output
    with sqlite3.connect(db) as conn:
        conn.execute("create temp table t as select * from task_runs")
        conn.execute("update t set id = id || '-b', agent = 'openai-text', "
                     "model = 'qwen2.5-coder-7b-instruct'")
        conn.execute("insert into task_runs select * from t")
    return db


@pytest.mark.parametrize("width", [80, 200])
def test_results_keep_two_agents_apart_with_whole_names(
    two_agents: Path, width: int, screen: Any
) -> None:
    out = screen(width)
    res = invoke(["results", "--db", str(two_agents)])
    assert res.exit_code == 0, res.output
    lines = out.getvalue().splitlines()
    assert all(len(ln) <= width for ln in lines if ln[:1] in "┃│┏┗┡└")
    for name in ("openai-text", "qwen2.5-coder-7b-instruct", "reference"):
        assert sum(name in ln for ln in lines) >= 4, name  # in every table, whole
    assert "Recovery per injected fault kind" in out.getvalue()
    assert "agent" in out.getvalue() and "left out to fit: agent" not in out.getvalue()
    assert not any(ln.startswith("agent: ") for ln in lines)  # tables, not records
    # one agent: its name above the tables, and room for the error codes, each kept beside
    # its count ("TIMEOUT 3", never "TIMEOUT" / "3")
    one = screen(width)
    res = invoke(["results", "--db", str(two_agents), "--agent", "reference"])
    assert res.exit_code == 0, res.output
    assert "top errors" in one.getvalue()
    codes = [m for ln in one.getvalue().splitlines()
             for m in re.findall(r"\b[A-Z][A-Z_]{4,}\b(?! \d)", ln)]
    assert not codes, one.getvalue()
    assert "Verdict: every row reaches full success in" in out.getvalue() or \
        "Verdict: full success is highest" in out.getvalue()


def test_drift_headers_stay_whole_when_nothing_can_be_tested(probed: Path, screen: Any) -> None:
    out = screen(80)
    res = invoke(["drift", "--db", str(probed), "--baseline", "1d..now",
                  "--current", "1d..now", "--tools", "advice_random"])
    assert res.exit_code == 0, res.output
    head = " ".join(ln.strip("┃ ") for ln in out.getvalue().splitlines() if ln.startswith("┃"))
    words = head.split()
    for header in ("success (p adj)", "median ms (p adj)", "mix V (p adj)"):
        assert all(w in words for w in header.split()), (header, head)
    heads = [ln for ln in out.getvalue().splitlines() if ln.startswith("┃")]
    assert sum(ln.count("(p adj)") for ln in heads) == 3, heads  # "(p" / "adj)" never split
    assert "Verdict over 1 tools" in out.getvalue()


# -- numbers that repeat ---------------------------------------------------------------------


def _drawn(journal: Any) -> list[tuple[str, int, str | None]]:
    """(tool, the call's number in its run, the variant the sandbox played) of every call the
    sandbox read."""
    return sorted((e.tool, e.draw, e.fault) for e in journal.entries if e.draw is not None)


def _outcomes(db: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    """Every stored call by its id in the run (tool, round): its outcome and error code."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select tool, round, outcome, error_code from probes")
        return {(t, r): (o, c) for t, r, o, c in rows}


def test_the_same_seed_gives_the_same_outcomes_beside_busy_loops(tmp_path: Path) -> None:
    """The demo's probe (every tool, 5 rounds, 2 s deadline) run twice with seed 0: as the
    machine is, then beside a busy loop on every core. Every call ends the same, by its id:
    what the sandbox plays is drawn from the seed and the request, a call drawn to miss the
    deadline is said so by the sandbox, and an answer drawn in time is not lost to a late
    timer."""

    runs, drawn = [], []
    for i, busy in enumerate((0, max(2, os.cpu_count() or 2))):
        loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(busy)]
        try:
            assert all(p.poll() is None for p in loops)
            sb = api.make_sandbox("published", seed=0)
            with running(sb) as url:
                db = tmp_path / f"{i}.db"
                api.probe(None, rounds=5, target=api.options(sandbox=url), db=db, timeout=2,
                          politeness="off", seed=0)
        finally:
            for p in loops:
                p.kill()
                p.wait()
        runs.append(_outcomes(db))
        drawn.append(_drawn(sb.journal))
    assert len(runs[0]) == 5 * len(api.load_catalog())
    successes = [sum(c is None for _, c in run.values()) for run in runs]
    assert successes[0] == successes[1]
    assert runs[0] == runs[1]
    assert drawn[0] == drawn[1]
    codes = {c for _, c in runs[0].values()}
    assert "TIMEOUT" in codes and None in codes and len(codes) > 2  # faults were drawn


def test_a_sandbox_calls_outcome_is_the_sandboxs_word_not_the_timers() -> None:
    """Read after its deadline (a loaded machine), a sandbox answer that says its drawn delay
    counts with that delay; one marked missed is a timeout at the deadline; an unmarked late
    answer is late; a live call ignores the marks."""
    import httpx

    from realprobe import ClientConfig, DeadlineExceeded, VirtualClock
    from realprobe.http.client import _Call
    from realprobe.http.transports import DELAY_HEADER, MISSED_HEADER, SANDBOX_EXT

    def late(headers: dict[str, str], sandbox: bool = True) -> _Call:
        clock = VirtualClock()
        call = _Call(ClientConfig(), clock, "GET", "http://x.test/", None, None, 2.0, False)
        call.sent = httpx.Request("GET", "http://x.test/", extensions={SANDBOX_EXT: sandbox})
        clock.advance(2.6)
        call.settle(httpx.Response(200 if MISSED_HEADER not in headers else 504,
                                   headers=headers))
        return call

    assert late({DELAY_HEADER: "1480.5"}).elapsed() == pytest.approx(1.4805)
    with pytest.raises(DeadlineExceeded):
        late({})
    with pytest.raises(DeadlineExceeded) as missed:
        late({MISSED_HEADER: "body"})
    assert "sandbox drew no answer" in str(missed.value)
    live = late({MISSED_HEADER: "headers"}, sandbox=False)
    assert live.elapsed() == pytest.approx(2.6) and live.settled is None


def test_an_answer_drawn_in_time_comes_by_three_quarters_of_the_budget() -> None:
    """With latencies scaled up, many answers are drawn close to the 2 s deadline: none is
    sent in its last quarter (where a loaded machine would push it past), and answers drawn
    later than the deadline keep their delay."""

    sb = api.make_sandbox("published", seed=0, latency_scale=4.0)
    with running(sb) as url:
        for _ in range(3):
            api.call_all(target=api.options(sandbox=url), timeout=2.0)
    delays = [e.delay_ms for e in sb.journal.entries]
    assert len(delays) == 3 * len(api.load_catalog())
    assert not [d for d in delays if 1500 < d < 1900], sorted(delays)
    assert [d for d in delays if 1200 < d <= 1500] and [d for d in delays if d >= 1900]


def test_a_schedule_whose_rounds_overlap_says_so_once(tmp_path: Path) -> None:
    """Every call hangs to a 1.5 s deadline and rounds fire every second, so a fire time
    falls inside a round: the schedule's own event says it was skipped, and no line of
    APScheduler's reaches the console."""
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps({"format": "realprobe-profile/1", "name": "dead", "tools": {},
                                "default": {"success_rate": 0.0, "errors": {"TIMEOUT": 1.0},
                                            "latency_ms": {"p50": 50}}}))
    with api.sandbox_running(dead, seed=0) as url:
        res = cli("schedule", "--tools", "advice_random", "--every", "1s", "--max-runs", "2",
                  "--sandbox", url, "--db", str(tmp_path / "s.db"), "--politeness", "off",
                  "--timeout", "1.5")
    assert res.returncode == 0, res.stderr
    assert "skipped_overlap" in res.stderr
    assert "Execution of job" not in res.stderr and "apscheduler" not in res.stderr.lower()


def test_numbered_draws_do_not_depend_on_arrival_order() -> None:
    from realprobe import load_profile

    prof = load_profile("harsh")
    a, b = FaultModel(prof, 7), FaultModel(prof, 7)
    forward = [a.draw_numbered("advice_random", "run1", n) for n in range(20)]
    backward = [b.draw_numbered("advice_random", "run1", n) for n in reversed(range(20))]
    assert forward == backward[::-1]
    # another caller in between changes nothing: its outcomes are its own, not a replay
    c = FaultModel(prof, 7)
    mixed = []
    for n in range(20):
        c.draw_numbered("advice_random", "run2", n)
        c.draw("advice_random")  # an unnumbered caller too
        mixed.append(c.draw_numbered("advice_random", "run1", n))
    assert mixed == forward
    again = [a.draw_numbered("advice_random", "run2", n).code for n in range(20)]
    assert again != [o.code for o in forward]
    # what an in-process model seeded for the caller plays, call by call
    alone = FaultModel(prof, caller_seed(7, "run1"))
    assert [alone.draw("advice_random") for _ in range(20)] == forward
    # another seed, other outcomes
    other = FaultModel(prof, 8)
    assert [other.draw_numbered("advice_random", "run1", n).code for n in range(20)] != [
        o.code for o in forward]


def test_a_numbered_call_asked_again_meets_the_same_outcome() -> None:
    """A run made again against the same sandbox meets the same faults, however long ago
    its numbers were drawn; a far number costs no memory, and many callers are let go."""
    from realprobe import load_profile

    model = FaultModel(load_profile("harsh"), 0)
    first = [model.draw_numbered("advice_random", "run", n) for n in range(50)]
    assert [model.draw_numbered("advice_random", "run", n) for n in range(50)] == first
    far = model.draw_numbered("advice_random", "run", MAX_CALL_NUMBER - 1)
    caller = model._callers["run"]
    assert len(caller._kept["advice_random"]) <= MAX_KEPT
    assert [model.draw_numbered("advice_random", "run", n) for n in range(50)] == first
    assert model.draw_numbered("advice_random", "run", MAX_CALL_NUMBER - 1) == far
    # past the numbers a caller may give: the shared stream's next outcome, nothing drawn up
    drawn = caller._calls["advice_random"]
    model.draw_numbered("advice_random", "run", 999_999)
    assert caller._calls["advice_random"] == drawn and model._calls["advice_random"] == 1
    for n in range(5_000):  # many callers: the least recently seen are let go
        model.draw_numbered("advice_random", f"k{n}", 0)
    assert len(model._callers) <= 4096
    assert [model.draw_numbered("advice_random", "run", n) for n in range(50)] == first


# -- a hint instead of silence ---------------------------------------------------------------


def test_a_probe_whose_rows_were_all_excluded_says_why_and_exits_3(tmp_path: Path) -> None:
    with api.sandbox_running("calm", seed=0) as url:
        res = in_process("probe", "--tools", "om_forecast,om_marine", "--catalog", "openmeteo",
                  "--sandbox", url, "--db", str(tmp_path / "x.db"), "--politeness", "off")
    assert res.returncode == 3, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "were excluded from statistics: the sandbox serves another catalogue" in line
    assert "realprobe sandbox --catalog" in line
    # every reader of that database says the same, not "no rows ... probe first"
    for verb in (["stats"], ["report", "--format", "md"],
                 ["drift", "--baseline", "1d..now", "--current", "1d..now"]):
        res = in_process(*verb, "--db", str(tmp_path / "x.db"))
        assert res.returncode == 3, (verb, res.stderr)
        (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert "all 2 sandbox rows" in line and "the sandbox serves another catalogue" in line
        assert "realprobe sandbox --catalog" in line and "probe first" not in line


def test_a_probe_with_the_sandbox_down_says_why_and_so_does_stats(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    db = str(tmp_path / "down.db")
    res = in_process("probe", "--tools", "advice_random", "--sandbox", url, "--db", db,
              "--politeness", "off")
    assert res.returncode == 3, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "nothing was reachable" in line and "--sandbox URL" in line
    res = in_process("stats", "--db", db)
    assert res.returncode == 3, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert "the one sandbox row" in line and "the prober reached no server" in line
    assert "--sandbox URL, then probe again" in line


# -- the docs' words are the output's ----------------------------------------------------------


def test_catalog_format_mcp_prints_json_without_the_json_flag() -> None:
    import json

    res = in_process("catalog", "--format", "mcp")
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)["tools"]) == len(api.load_catalog())


def test_a_skipped_operation_names_the_flag_that_keeps_it(tmp_path: Path) -> None:
    spec = tmp_path / "o.json"
    spec.write_text('{"openapi": "3.0.0", "info": {"title": "t", "version": "1"},'
                    ' "servers": [{"url": "https://api.example.com"}],'
                    ' "components": {"securitySchemes": {"k": {"type": "apiKey", "in": "query",'
                    ' "name": "api_key"}}},'
                    ' "paths": {"/private": {"get": {"security": [{"k": []}],'
                    ' "responses": {"200": {"description": "ok"}}}}}}')
    res = in_process("catalog", "import-openapi", str(spec), "--output", str(tmp_path / "c.toml"))
    assert "skipped GET /private: needs credentials (API key 'api_key' in query); " \
           "--include-auth keeps it" in res.stderr, res.stderr


def test_prompts_the_reference_agent_treats_alike_are_said_to_be_one_run(tmp_path: Path) -> None:
    res = in_process("run", "travel_briefing", "--agent", "reference", "--mode", "simulate",
              "--profile", "harsh", "--prompt", "baseline,optimal", "--db",
              str(tmp_path / "t.db"))
    assert res.returncode == 0, res.stderr
    assert "note: the reference agent makes the same calls under baseline, optimal: one run " \
           "stands for them all, stored as baseline" in " ".join(res.stderr.split())
    with sqlite3.connect(tmp_path / "t.db") as conn:
        assert conn.execute("select prompt from task_runs").fetchall() == [("baseline",)]
