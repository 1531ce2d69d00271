"""Write the table of numbers in docs/numbers.md, and the README's few headline numbers, from
bench/results/*.json, so the figures cannot go stale.

The table sits between `<!-- numbers:start -->` and `<!-- numbers:end -->` in docs/numbers.md;
a test checks that the page holds exactly what this script would write. A benchmark without a
results file is left out of the table. The README's headline numbers (`HEADLINES`, at most
eight) sit between `<!-- headline:start -->` and `<!-- headline:end -->` and are written and
checked the same way.

    python bench/readme_numbers.py            # print the table
    python bench/readme_numbers.py --write    # update docs/numbers.md
    python bench/readme_numbers.py --check    # exit 1 if docs/numbers.md is out of date, or if
                                              # a rerun of bench/perf_table.py moves one of
                                              # its figures by more than its stated noise
    python bench/readme_numbers.py --check --no-rerun   # the first half only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perf_table import CHECKED_BELOW, NOISE, claims

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
NUMBERS = HERE.parent / "docs" / "numbers.md"
START, END = "<!-- numbers:start -->", "<!-- numbers:end -->"

Row = tuple[str, str, str, str]  # what, result, goal, command


def _n(v: float, digits: int = 0) -> str:
    return f"{v:,.{digits}f}"


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def probe_throughput(d: dict[str, Any]) -> list[Row]:
    return [(
        f"probe throughput vs raw async httpx, same {_n(d['calls'])} calls",
        f"{_n(d['realprobe_calls_per_s'])} vs {_n(d['raw_httpx_calls_per_s'])} calls/s: "
        f"{d['throughput_ratio_realprobe_to_raw']:.2f} (with one committed SQLite row per call)",
        "–",
        "`python bench/probe_throughput.py`",
    )]


def scheduling_efficiency(d: dict[str, Any]) -> list[Row]:
    return [(
        f"scheduling: {d['hosts']} hosts × {d['calls_per_host']} calls × "
        f"{d['latency_ms']:g} ms, one in flight per host",
        f"{d['ratio_median_to_ideal']:.2f} × ideal (median of {len(d['makespans_s'])}; raw "
        f"httpx same pattern {d['raw_httpx_ratio_to_ideal']:.2f})",
        "≤ 1.15 × ideal",
        "`python bench/scheduling_efficiency.py`",
    )]


def report_100k(d: dict[str, Any]) -> list[Row]:
    return [(
        f"`report` (HTML with four plots) vs `stats` on the same {_n(d['rows'])} rows over "
        f"{d['tools']} tools, fresh processes",
        f"{d['cli_cpu_s']:.2f} s vs {d['stats_cli_cpu_s']:.2f} s of CPU: "
        f"**{d['ratio_cpu_report_to_stats']:.2f}×** (wall {d['cli_total_s']:.2f} s vs "
        f"{d['stats_cli_total_s']:.2f} s; {_load(d)})",
        f"≤ {d['goal_ratio']:g}× `stats`",
        "`python bench/report_100k.py`",
    )]


def cli_startup(d: dict[str, Any]) -> list[Row]:
    return [(
        "`realprobe --help` and `realprobe <verb> --help`, fresh process, best of "
        f"{d['runs']}",
        f"slowest verb {d['worst_best_wall_s']:.2f} s ({d['worst_best_cpu_s']:.2f} s of CPU; "
        f"bare `python -c pass` {d['bare_python_wall_s']:.2f} s; load average "
        f"{d['load_average_1m']:g}); none imports numpy, scipy, matplotlib, mcp, openai, "
        "httpx or pydantic",
        f"< {d['goal_s']:g} s",
        "`python bench/cli_startup.py`",
    )]


def _demo_waiting(d: dict[str, Any]) -> str:
    """Calls and probes are mostly waiting on the sandbox (latencies, hangs to the deadline)."""
    wall, cpu = d["in_process_steps_s"], d.get("in_process_steps_cpu_s")
    if not cpu:
        return ""
    w = wall.get("call-all", 0) + wall.get("probe", 0)
    c = cpu.get("call-all", 0) + cpu.get("probe", 0)
    return f", calls and probes {w:.1f} s of which {w - c:.1f} s waiting on the sandbox"


def demo_time(d: dict[str, Any]) -> list[Row]:
    steps = d["in_process_steps_s"]
    return [(
        "`realprobe demo`, end to end",
        f"{d['cli_wall_s']:.1f} s ({d['cli_cpu_s']:.1f} s of CPU; statistics "
        f"{steps.get('stats', 0):.1f} s, report {steps.get('report', 0):.1f} s in process"
        f"{_demo_waiting(d)}; load average {d['load_average_1m']:g})",
        f"< {d['goal_s']:g} s",
        "`python bench/demo_time.py`",
    )]


def install_time(d: dict[str, Any]) -> list[Row]:
    demo, test = d["demo_install"], d["test_install"]
    return [(
        "the README's installs, each into a fresh venv (pip's index and cache as set up here)",
        f"`pip install .` {demo['wall_s']:.0f} s wall ({demo['cpu_s']:.0f} s CPU); "
        f"`pip install -e '.[test]'` {test['wall_s']:.0f} s wall ({test['cpu_s']:.0f} s CPU) "
        f"on {d['cores']} cores ({_load(d)})",
        "–",
        "`python bench/install_time.py`",
    )]


def first_hour(d: dict[str, Any]) -> list[Row]:
    """What a newcomer's first hour measures (bench/first_hour.py)."""
    seed = d["seed_0_demo"]
    cmd = "`python bench/first_hour.py`"
    return [
        ("`realprobe demo` / `stats` on 32 tools at 80 columns",
         f"{d['demo_lines']['at_80_columns']} / "
         f"{d['stats_32_tools_20_rounds_lines']['at_80_columns']} rows "
         f"(--explain: {d['demo_explain_lines']['at_80_columns']})", "≤ 100 / ≤ 60", cmd),
        ("report at 800 px: page scroll width", f"{d['report']['800px']['page_scroll_width']} px",
         "≤ 800 px", cmd),
        ("seed-0 demo probe successes: twice alone / twice beside 4 busy loops",
         f"{', '.join(str(r['probe_ok']) for r in seed['as_is'])} / "
         f"{', '.join(str(r['probe_ok']) for r in seed['beside_4_busy_loops'])} of "
         f"{seed['as_is'][0]['probe_calls']}; {_load(seed)}", "equal",
         "`python bench/first_hour.py --seeds`"),
    ]


def eta(d: dict[str, Any]) -> list[Row]:
    """How far the progress bar's ETA was from the real remaining time, and how often the
    range it shows held it (bench/eta.py)."""
    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    def probe(k: str) -> str:
        e = d[k]["error"]
        return f"{pct(e['share_within_25pct'])} (median {100 * e['median']:+.0f}%)"

    cmd = "`python bench/eta.py`"
    sweeps, old = d["sweeps"], "old_rate_estimate_error"
    medians = ", ".join(f"{100 * s['error']['median']:+.0f}%" for s in sweeps)
    over = [s["run_over_model"] for s in sweeps if s.get("run_over_model")]
    model = (f"; each run modelled, real / modelled {min(o['min'] for o in over):.2f} to "
             f"{max(o['max'] for o in over):.2f}" if over else "")
    return [
        ("ETA within ±25% from 20% to 90% of a 2 s-deadline probe: polite / side by side; "
         "its 10–90% range held the time left",
         f"{probe('probe_polite')} / {probe('probe_side_by_side')} of readings; range "
         f"{pct(d['probe_polite']['range_coverage'])} / "
         f"{pct(d['probe_side_by_side']['range_coverage'])}; old estimate "
         f"{pct(d['probe_polite'][old]['share_within_25pct'])} / "
         f"{pct(d['probe_side_by_side'][old]['share_within_25pct'])}",
         "100%; range ≈ 80%", cmd),
        (f"ETA within ±25% from 20% to 90% of {len(sweeps)} sandbox sweeps "
         f"({sweeps[0]['runs']} runs, {sweeps[0]['workers']} workers); its 10–90% range held "
         "the time left",
         f"{pct(d['sweep']['error']['share_within_25pct'])} of readings (medians {medians}); "
         f"range {pct(d['sweep']['error']['range_coverage'])}; old estimate "
         f"{pct(d['sweep'][old]['share_within_25pct'])}{model}; {_load(d)}",
         "100%; range ≈ 80%", cmd),
    ]


def interval_coverage(d: dict[str, Any]) -> list[Row]:
    b, ind = d["burst"], d["independent"]
    seeds = b["experiments"] // 4
    return [(
        f"coverage of the 95 % success interval, {_n(b['experiments'])} experiments",
        f"{_pct(b['coverage']['success_burst_adjusted'])} burst-adjusted (plain Wilson "
        f"{_pct(b['coverage']['success_wilson'])}); "
        f"{_pct(ind['coverage']['success_burst_adjusted'])} independent",
        "≈ 95 %",
        f"`python bench/interval_coverage.py --seeds {seeds} --calls "
        f"{b['calls_per_experiment']}`",
    )]


def _experiments(d: dict[str, Any]) -> str:
    counts = set(d.get("seeds_by_cell", {}).values()) or {d["seeds"]}
    return f"{min(counts)}–{max(counts)}" if len(counts) > 1 else str(min(counts))


def stats_coverage(d: dict[str, Any]) -> list[Row]:
    cells = d["coverage"]
    extra = ("P(hang)", "day sd")  # intervals of other parameters, reported apart
    values = [v for k, row in cells.items() if not k.endswith(extra) for v in row.values()]
    outside = sum(1 for v in values if not 0.93 <= v <= 0.97)
    below = sum(1 for v in values if v < 0.93)
    side = "all above it" if not below else f"{below} below it"
    others = {
        name: [v for k, row in cells.items() if k.endswith(name) for v in row.values()]
        for name in extra
    }
    other_text = "".join(
        f"; {name} intervals {_pct(min(vs))} to {_pct(max(vs))}"
        for name, vs in others.items()
        if vs
    )
    return [(
        f"coverage of the 95 % success intervals: independent, bursty (P(fail|fail) 0.5, 0.8), "
        f"deadline, day-to-day and mixture (without and with hangs) truths × N = 50 / 200 / "
        f"1,000 × 3 tools, {_experiments(d)} experiments per cell",
        f"{_pct(min(values))} to {_pct(max(values))} (Monte Carlo error "
        f"±{100 * d.get('monte_carlo_se', 0.011):.1f} points); {outside} of {len(values)} "
        f"cells outside 93–97 %, {side}{other_text} (see docs/statistics.md)",
        "93–97 %",
        f"`python bench/stats_coverage.py --seeds {d['seeds']}`",
    )]


def outage_drift(d: dict[str, Any]) -> list[Row]:
    rows = [v for k, v in d["tools_flagged"].items() if not k.endswith(":0.0")]
    span = lambda key: f"{_pct(min(r[key] for r in rows))}–{_pct(max(r[key] for r in rows))}"  # noqa: E731
    return [(
        f"false drift under outages that keep one code (nothing changed), {d['dbs']} "
        "databases × 8 tools",
        f"error-mix flags {span('mix_new')} (plain χ² {span('mix_old')}); day-variability "
        f"flags {span('var_new')} (plain {span('var_old')})",
        "≤ 5 %",
        "`python bench/outage_drift.py`",
    )]


def error_mix_coverage(d: dict[str, Any]) -> list[Row]:
    cells = d["cells"].values()
    span = lambda key: (  # noqa: E731
        f"{_pct(min(min(c[key].values()) for c in cells))}–"
        f"{_pct(max(max(c[key].values()) for c in cells))}"
    )
    return [(
        f"coverage of the error mix's 95 % intervals (each code's share of failures), "
        f"{len(d['cells'])} cells up to P(fail|fail) 0.9 and code persistence 0.9 × "
        f"{d['seeds']} experiments",
        f"{span('effective_n')} at the effective number of failures (plain multinomial "
        f"{span('plain')})",
        "≈ 95 %",
        "`python bench/error_mix_coverage.py`",
    )]


def profile_roundtrip(d: dict[str, Any]) -> list[Row]:
    p = d["parameters"]
    inside = [v["inside"] for v in p.values() if v["inside"] != "-"]
    lo, hi = min(inside, key=lambda s: float(s[:-1])), max(inside, key=lambda s: float(s[:-1]))
    return [(
        f"round trip of every profile parameter, {d['seeds']} × {_n(d['n'])} calls per scenario",
        f"truth inside its interval {lo}–{hi}; mean abs. error: P(fail|fail) "
        f"{p['bursty:p_fail_after_fail']['mae']:.3f}, code persistence "
        f"{p['bursty:code_persistence']['mae']:.3f}, Retry-After share "
        f"{p['bursty:retry_after.share']['mae']:.3f}, day effect sd "
        f"{p['daily:daily_logit_sd']['mae']:.2f}, hang share behind a deadline "
        f"{p['deadline:errors.TIMEOUT']['mae']:.2f} "
        f"({p['deadline_rare:errors.TIMEOUT']['mae']:.2f} at success 0.97)",
        "inside ≈ 95 %",
        "`python bench/profile_roundtrip.py`",
    )]


def replay_vs_vcrpy(d: dict[str, Any]) -> list[Row]:
    return [(
        f"replay a {_n(d['interactions'])}-interaction cassette, realprobe vs vcrpy "
        f"{d['vcrpy_version']}",
        f"{d['realprobe_replay_s']:.2f} s vs {d['vcrpy_replay_s']:.1f} s: "
        f"**{d['speedup']:.0f}×**",
        "≥ 100×",
        "`python bench/replay_vs_vcrpy.py`",
    )]


def realworld_replay(d: dict[str, Any]) -> list[Row]:
    r, suites, attacks = d["replay"], d["peer_suites"], d["attacks"]
    per_client = ", ".join(f"{c} {v}" for c, v in r["replayed_identically"]["original"].items())
    passed = "; ".join(f"{name} {s.get('passed', 0)} passed" for name, s in suites.items())
    return [
        (f"real third-party cassettes ({r['real_files']} files, {r['interactions']} "
         "interactions: vcrpy, habanero, llm-gemini, tweepy, Ruby VCR): imported, replayed per "
         "client, byte for byte against what the client reads live",
         f"import to JSON {r['imported_to_json']}/{r['real_files']}, to YAML "
         f"{r['imported_to_yaml']}/{r['real_files']}; identical: {per_client} (the same from "
         "both imports)", "all", "`python bench/realworld_replay.py`"),
        ("peer suites unchanged under realprobe's plugin (`-p no:recording`, replay only, "
         "network blocked); attacker-style tests",
         f"{passed}; attacks held {attacks['held']}/{attacks['test_cases']}", "all", "same"),
    ]


def replay_load_time(d: dict[str, Any]) -> list[Row]:
    return [(
        f"cassette load, {_n(d['interactions'])} interactions",
        f"JSON {d['realprobe_load_json_s']:.2f} s, YAML {d['realprobe_load_yaml_s']:.2f} s",
        "–",
        "`python bench/replay_load_time.py`",
    )]


def tasks_simulate(d: dict[str, Any]) -> list[Row]:
    p = d["profiles"]
    rates = ", ".join(f"{_n(v['runs_per_s'])} ({k})" for k, v in p.items())
    return [(
        f"reference agent, simulate mode, all tasks × {d['repeat']}",
        f"runs/s: {rates}; no real sleeping",
        "–",
        "`python bench/tasks_simulate.py`",
    )]


def tasks_replay(d: dict[str, Any]) -> list[Row]:
    return [(
        "replay every shipped task run",
        f"{d['runs']} runs in {1000 * d['best_s']:.0f} ms, {d['outcomes_as_recorded']} as "
        "recorded",
        "–",
        "`python bench/tasks_replay.py`",
    )]


def mcp_overhead(d: dict[str, Any]) -> list[Row]:
    def ms(key: str) -> str:
        return f"+{d[key]['overhead_ms_vs_direct']:.2f} ms"

    return [(
        "MCP overhead per call over a direct call",
        f"{ms('mcp_in_process')} in process, {ms('mcp_stdio')} stdio, {ms('mcp_http')} HTTP",
        "–",
        "`python bench/mcp_overhead.py`",
    )]


def catalog_scale(d: dict[str, Any]) -> list[Row]:
    return [(
        f"catalogue at scale: {d['tools']} tools over {d['apis']} APIs",
        f"load {d['catalog_load']['median_s']:.2f} s, `catalog --json --format mcp` in process "
        f"{d['catalog_json_mcp_in_process']['median_s']:.2f} s, MCP tools/list "
        f"{d['mcp_tools_list']['median_s']:.2f} s (medians; load average "
        f"{d['machine']['load_average_1m']:g})",
        "< 0.5 s at 300 tools",
        "`python bench/catalog_scale.py`",
    )]


def openapi_import(d: dict[str, Any]) -> list[Row]:
    p = d["pokeapi"]
    return [(
        f"OpenAPI import: PokéAPI ({p['tools']} tools from {p['bytes'] // 1000} kB)",
        f"{p['import_s_median']:.2f} s (median of {p['repeat']})",
        "< 2 s",
        "`python bench/openapi_import.py`",
    )]


def hostile_limits(d: dict[str, Any]) -> list[Row]:
    p = d["parse"]
    return [
        (
            f"hostile servers, {d['deadline_s']:g} s deadline: headers dripped, body dripped, "
            "silent; sync and async client",
            f"every call ended by the deadline (worst overrun {d['worst_overrun_s']:.3f} s)",
            "deadline holds",
            "`python bench/hostile_limits.py`",
        ),
        (
            "bounded parsing cost",
            f"{p['nested_200k_bytes']:,} nested `[`: {p['nested_200k_ms'] / 1000:.2f} s to "
            f"refuse; a valid {p['json_5mb_ok_bytes'] / 1e6:.1f} MB body: "
            f"{p['json_5mb_ok_ms'] / 1000:.2f} s",
            "–",
            "same",
        ),
    ]


def drift_false_positives(d: dict[str, Any]) -> list[Row]:
    nc = d["no_change_bursty"]
    return [(
        f"`drift` false positives, bursty no-change (P(fail|fail) {nc['p_fail_after_fail']:g}), "
        f"{nc['databases']} databases × {nc['tools_per_database']} tools",
        f"{_pct(nc['per_tool']['success_flagged'])} of tools flagged on success (plain "
        f"two-proportion test {_pct(nc['per_tool']['success_flagged_plain_test'])})",
        "≤ 6 %",
        "`python bench/drift_false_positives.py`",
    )]


def calibrate_burst_roundtrip(d: dict[str, Any]) -> list[Row]:
    mixed = d["mixed_codes"]
    return [(
        f"`calibrate` round trip of the burst chain under a biting deadline "
        f"({mixed['experiments']} experiments)",
        "mean absolute error vs truth: "
        + ", ".join(
            f"P(fail|{'fail' if k == 'ff' else 'ok'}) {v['mean_abs_error']:.3f}"
            for k, v in mixed["calibrated_vs_truth"].items()
            if isinstance(v, dict) and "mean_abs_error" in v
        ),
        "within 0.03",
        "`python bench/calibrate_burst_roundtrip.py`",
    )]


def latency_fit_checks(d: dict[str, Any]) -> list[Row]:
    ks = d["ks_null_no_deadline"]
    return [(
        f"KS p-value under the null ({ks['replicates']} replicates, no deadline)",
        f"share below 0.05: {_pct(ks['bootstrap_pvalue']['share_below_0.05'])} with the "
        "parametric bootstrap (plain Kolmogorov "
        f"{_pct(ks['kolmogorov_pvalue']['share_below_0.05'])})",
        "≈ 5 %",
        "`python bench/latency_fit_checks.py`",
    )]


def provenance_selection(d: dict[str, Any]) -> list[Row]:
    return [(
        f"`stats` picking live rows out of {_n(d['rows'])} mixed live and simulated rows",
        f"{d['cli_stats_s']:.1f} s for the command (load average {d['load_average_1m']:g}); "
        f"{d['honest_time']['rows_stamped_after_write']} of {_n(d['honest_time']['rounds'])} "
        "simulated rounds stamped after their write",
        "–",
        "`python bench/provenance_selection.py`",
    )]


def sandbox_proxy_throughput(d: dict[str, Any]) -> list[Row]:
    parts = [f"{k.replace('_', ' ')}: {v['proxy_rps']} vs {v['direct_rps']} req/s "
             f"(**{v['ratio']:.2f}**)" for k, v in d["results"].items()]
    return [(
        "sandbox proxy mode (`--upstream URL`, no faults) vs direct to the same loopback "
        "upstream",
        "; ".join(parts),
        "≥ 0.8 of direct",
        "`python bench/sandbox_proxy_throughput.py`",
    )]


def use_cassette_replay(d: dict[str, Any]) -> list[Row]:
    vcrpy = (f"{_n(d['vcrpy_replay_s'])} s (estimated from {d['vcrpy_requests_timed']} "
             "requests spread over the match positions)" if d.get("vcrpy_estimated")
             else f"{_n(d['vcrpy_replay_s'])} s")
    return [(
        f"replay a {_n(d['interactions'])}-interaction cassette through `use_cassette` with a "
        "plain `httpx.Client` vs vcrpy, one run each",
        f"{d['use_cassette_replay_s']:.1f} s vs {vcrpy}: "
        f"**{d['speedup_vs_vcrpy']:.0f}×**; per request {d['ratio_to_mock_floor']:.2f}× an "
        "`httpx.MockTransport` returning prebuilt responses",
        "≥ 100×; within 1.3× of the MockTransport",
        "`python bench/use_cassette_replay.py --vcrpy-requests 40`"
        if d.get("vcrpy_estimated") else "`python bench/use_cassette_replay.py`",
    )]


def input_limits(d: dict[str, Any]) -> list[Row]:
    r = d["results"]
    bl, big, ver = r["billion_laughs"], r["cassette_286mb"], r["cassette_20mb_verify"]
    return [(
        f"refusing input files: {bl['file_bytes']}-byte billion-laughs YAML; "
        f"{big['file_bytes'] / 1e6:.0f} MB cassette; verifying a "
        f"{ver['file_bytes'] / 1e6:.0f} MB one",
        f"{bl['seconds'] * 1000:.0f} ms and {bl['peak_mb']:.1f} MB peak; refused from its size "
        f"in {big['seconds'] * 1000:.1f} ms; {ver['seconds']:.1f} s and "
        f"{ver['peak_mb']:.0f} MB peak",
        "< 1 s and < 100 MB",
        "`python bench/input_limits.py`",
    )]


def json_limits(d: dict[str, Any]) -> list[Row]:
    big = d["many_small_objects"]
    return [(
        f"parsing outside JSON under the input limits (depth from the text): "
        f"{big['bytes'] / 1000:.0f} KB body of small objects; {d['real_bodies']} real bodies",
        f"{big['json_or_none']:.2f} ms against {big['json.loads']:.2f} ms for a bare "
        f"`json.loads`; {d['real_total_ms']['json_or_none']:.3f} ms against "
        f"{d['real_total_ms']['json.loads']:.3f} ms; a 5,000-deep body refused in "
        f"{d['refuse_5000_deep_ms']:.2f} ms (load average {d['load_average_1m'][0]})",
        "< 1.5× a bare parse",
        "`python bench/json_limits.py`",
    )]


def exporter_scrape(d: dict[str, Any]) -> list[Row]:
    return [(
        f"exporter `/metrics` on {_n(d['rows'])} rows, {d['rows_added_between_scrapes']} new "
        "rows between scrapes",
        f"median {d['scrape_median_ms']} ms per scrape (p95 {d['scrape_p95_ms']} ms; CPU "
        f"{d.get('scrape_cpu_median_ms', '–')} ms); first scrape {d['first_scrape_s']} s "
        f"(load average {d['load_avg_1m']})",
        "< 100 ms",
        "`python bench/exporter_scrape.py`",
    )]


def merge_throughput(d: dict[str, Any]) -> list[Row]:
    return [(
        f"`merge` of {d['sources']} vantage databases × {_n(d['rows_per_source'])} rows",
        f"{_n(d['first_merge_rows_per_s'])} rows/s ({d['first_merge_s']} s); merging again "
        f"adds {d['rows_added_again']} rows at {_n(d['second_merge_rows_per_s'])} rows/s "
        f"(load average {d['load_avg_1m']})",
        "–",
        "`python bench/merge_throughput.py`",
    )]


def history_import(d: dict[str, Any]) -> list[Row]:
    u, k, loop = d["upptime_5y"], d["kuma"], d["closed_loop"]
    rows = [(
        f"`history import` of a synthetic 5-year Upptime repository ({_n(u['commits'])} "
        "commits)",
        f"{u['import_s']} s ({u['reimport_added']} rows added again in {u['reimport_s']} s); "
        f"availability {_pct(u['availability'])}, {_n(u['outages'])} outages, longest "
        f"{_n(u['longest_s'])} s: off the hand computation by "
        f"{u['availability_diff_points']} points, {u['outages_diff_pct']} %, "
        f"{u['longest_diff_pct']} %",
        "within 0.5 points, 2 %, 1 %",
        "`python bench/history_import.py`",
    ), (
        f"`history import` of {_n(k['heartbeats'])} Uptime Kuma heartbeats",
        f"{k['import_s']} s; availability off the hand computation by "
        f"{k['api']['availability_diff_points']} points, outages by "
        f"{k['api']['outages_diff_pct']} % (load average {d['load_average_1m']})",
        "–",
        "`python bench/history_import.py`",
    ), (
        "closed loop: import, calibrate, simulate at the monitor's cadence",
        f"availability {_pct(loop['simulated_availability'])} in "
        f"[{_pct(loop['availability_ci95'][0])}, {_pct(loop['availability_ci95'][1])}]; mean "
        f"outage {_n(loop['simulated_mean_outage_s'])} s in "
        f"[{_n(loop['mean_outage_ci95'][0])}, {_n(loop['mean_outage_ci95'][1])}] s",
        "inside both intervals",
        "`python bench/history_import.py`",
    )]
    cov = d.get("interval_coverage")
    if cov:
        e, ln = cov["exponential"], cov["lognormal"]
        rows.append((
            f"imported availability / mean outage 95% intervals over {_n(cov['runs'])} "
            f"simulated {cov['days']:g}-day histories",
            f"coverage {_pct(e['availability_coverage'])} / {_pct(e['mean_outage_coverage'])} "
            f"(exponential periods), {_pct(ln['availability_coverage'])} / "
            f"{_pct(ln['mean_outage_coverage'])} (lognormal outages, twice as spread)",
            "95 %",
            "`python bench/history_import.py`",
        ))
    real = d.get("real_upptime")
    for site, r in (real or {}).get("sites", {}).items():
        year = next(k for k in r if k.isdigit())
        w, y = r["whole"], r[year]
        rows.append((
            f"a real Upptime repository ({real['source'].split('@')[0]}), {site}: whole "
            f"history and {year}",
            f"availability {_pct(w['availability'])} / {_pct(y['availability'])} (git log by "
            f"hand: {_pct(w['availability_by_hand'])} / {_pct(y['availability_by_hand'])}; "
            f"published {r['published']}); outages {w['outages']} / {y['outages']} (by hand "
            f"{w['outages_by_hand']} / {y['outages_by_hand']}); longest off by "
            f"{w['longest_diff_pct']} % / {y['longest_diff_pct']} %",
            "within 0.5 points, 2 %, 1 %",
            "`python bench/history_import.py --real CLONE`",
        ))
    return rows


def eval_round3(d: dict[str, Any]) -> list[Row]:
    by = {(r["model"], r["agent"]): r for r in d["reflexion_vs_react"]}
    refl = ", ".join(
        f"{m}: {by[(m, 'openai-reflexion')]['reached_second_attempt']}/"
        f"{by[(m, 'openai-reflexion')]['runs']} reach a second attempt, "
        f"{by[(m, 'openai-reflexion')]['attempts_mean']:g} attempts, "
        f"{_pct(by[(m, 'openai-reflexion')]['full_success'])} full (ReAct "
        f"{_pct(by[(m, 'openai')]['full_success'])})"
        for m in ("text", "beside-call", "ignores") if (m, "openai-reflexion") in by)
    prr = d["prr"]
    perm = {plan.rsplit("-", 2)[-2] + "-permanent": prr[plan]["with alternative"]["prr"]
            for plan in prr if plan.endswith("-permanent")}
    sev = d["severity"]
    power = d["power_0.6_vs_0.7"]
    load = d["load_average_1m"]
    return [(
        "Reflexion against ReAct on scripted models (reflection in text, beside a tool call, "
        "ignored)",
        refl,
        "a text reflection reaches a second attempt in every run",
        "`python bench/eval_round3.py`",
    ), (
        f"reference agent's recovery (PRR) under permanent ToolMaze faults, {d['tasks']} tasks, "
        "on tasks with an alternative tool",
        ", ".join(f"{k} {v:.2f}" for k, v in sorted(perm.items())),
        "above 0.5",
        "`python bench/eval_round3.py`",
    ), (
        f"graded flaws at 10/30/50 %: Chain F1 and τ over {_n(sev['runs'])} runs",
        f"{len(sev['rises'])} rises with severity; missing steps Chain F1 "
        + " / ".join(f"{v:.2f}" for v in sev["chain_f1_per_flaw_10_30_50"]["missing_steps"])
        + f"; separating 0.6 from 0.7 full success takes {power['runs_per_agent']} runs per agent "
        f"({power['repeats_of_the_task_set']} repeats of the task set) (load average "
        f"{load[0] if isinstance(load, list) else load})",
        "never rises",
        "`python bench/eval_round3.py`",
    )]


def mcp_sessions(d: dict[str, Any]) -> list[Row]:
    o, rt, fx = d["overhead"], d["round_trip"], d["pytest_fixture_replay"]
    parts = []
    for n in ("1", "8"):
        for way in ("http_proxy", "stdio_proxy"):
            m = o[f"{n}_sessions"][way]
            parts.append(f"{way.split('_')[0]} × {n}: {m['overhead_median_ms']} / "
                         f"{m['overhead_p95_ms']} ms")
    cal, through = rt["calibrated"], rt["through_proxy"]
    load = d["load_average_1m"]
    return [(
        "MCP proxy overhead per call, median / p95, with 1 and 8 concurrent sessions",
        "; ".join(parts) + f" (load average {load[0] if isinstance(load, list) else load})",
        "–",
        "`python bench/mcp_sessions.py`",
    ), (
        "MCP failure forms round trip: probe a scripted server, calibrate, proxy, re-measure",
        f"success {through['success_share']} in [{cal['success_ci95'][0]:.3f}, "
        f"{cal['success_ci95'][1]:.3f}], JSON-RPC share {through['jsonrpc_share']} in "
        f"[{cal['jsonrpc_share_ci95'][0]:.3f}, {cal['jsonrpc_share_ci95'][1]:.3f}]",
        "inside both intervals",
        "`python bench/mcp_sessions.py`",
    ), (
        "the pytest `mcp_server` fixture replaying a session",
        f"{fx['replay_run']['per_call_ms']} ms a call ({fx['replay_run']['calls_per_s']} calls/s)",
        "–",
        "`python bench/mcp_sessions.py`",
    )]


def sandbox_budget_flood(d: dict[str, Any]) -> list[Row]:
    load = d["load_average_1m"]
    return [(
        f"{_n(d['connections'])} callers from one address each telling the sandbox a budget "
        "of 86,000 s",
        f"{d['held']} held (the address's share), {d['refused_503']} refused at once; others "
        f"get {d['other_api_status']} (API) and {d['other_admin_status']} (/_admin); every "
        f"slot free {d['slots_freed_after_close_s']} s after the callers left (load average "
        f"{load[0] if isinstance(load, list) else load})",
        "others and /_admin keep answering",
        "`python bench/sandbox_budget_flood.py`",
    )]


def tasks_concurrency(d: dict[str, Any]) -> list[Row]:
    parts = [f"concurrency {m['concurrency']}: {m['makespan_s']} s vs ideal {m['ideal_s']} s "
             f"(**{m['ratio_to_ideal']:.2f}×**)" for m in d["makespan"]]
    ray = d.get("ray")
    if ray:
        parts.append(f"Ray executor +{ray['ray_overhead_per_run_ms']} ms per run over local")
    return [(
        f"330 task runs against a scripted model with {int(d['delay_s'] * 1000)} ms per request",
        "; ".join(parts) + f" ({_load(d)})",
        "≤ 1.2 × ideal",
        "`python bench/tasks_concurrency.py`",
    )]


def sandbox_latency(d: dict[str, Any]) -> list[Row]:
    late, over = d["sandbox_lateness_ms"], d["client_overhead_ms"]
    drawn, measured = d["fit_drawn"], d["fit_measured"]
    return [(
        f"sandbox latency as a client sees it ({d['paired_successes']} successes, "
        "latency scale 0.25)",
        f"sandbox late by {late['median']:.1f} ms median, {late['p99']:.1f} ms p99; client "
        f"adds {over['median']:.1f} ms median (spread {over['robust_sd']:.1f} ms); sigma "
        f"{drawn['sigma']:.3f} drawn, {measured['sigma']:.3f} measured for a true 0.5 "
        f"(load average {d['load_average_1m']:g})",
        "lateness ≪ latency",
        "`python bench/sandbox_latency.py`",
    )]


def eval_numbers(d: dict[str, Any]) -> list[Row]:
    surf = d["surface"]
    cells = {(c["epsilon"], c["lambda"], c["k"]): c["pass^k"] for c in surf["cells"]}
    k = max(surf["k"])
    lams = ", ".join(f"λ={lam:g}: {cells[(0, lam, 1)]:.2f} / {cells[(0, lam, k)]:.2f}"
                     for lam in surf["lambda"])
    by = {(e["flaw"], e["severity"]): e for e in d["flaws"]}
    def f1s(name: str) -> str:
        return " / ".join(f"{by[(name, s)]['chain_f1']['mean']:.2f}" for s in (10, 30, 50))

    names = ("missing_steps", "compressed_steps", "tool_misuse", "sequential_inversion")
    flaws = "; ".join(f"{name} {f1s(name)}" for name in names)
    inv = " / ".join(f"{by[('sequential_inversion', s)]['kendall_tau']['mean']:.2f}"
                     for s in (10, 30, 50))
    return [
        (f"reference agent's reliability surface on the published profile: pass^1 / pass^{k} "
         f"(ε = 0, 1, 2 alike: it does not read the text)",
         f"{lams}; volume **{surf['volume']:.3f}** ({surf['runs']} runs)",
         "–", "`python bench/eval_numbers.py`"),
        ("Chain F1 at flaw severity 10 / 30 / 50 (reference agent, calm profile, "
         f"{by[('missing_steps', 10)]['runs']} runs per cell)",
         f"{flaws}; Kendall τ of inversions {inv}",
         "falls with severity", "same"),
    ]


def door_names(d: dict[str, Any]) -> list[Row]:
    b, a = d["before"], d.get("merged_main", d["after"])
    return [(
        "flags named otherwise than their front-door keyword; visible options (every "
        "command and group's -h); the most on one command",
        f"{b['flags_named_otherwise']} → {a['flags_named_otherwise']}; "
        f"{b['options']} → {a['options']}; {b['most'][1]} → {a['most'][1]} ({a['most'][0]})",
        "0; under 280; at most 20",
        "`python bench/door_names.py`",
    )]


def implicit_drift(d: dict[str, Any]) -> list[Row]:
    t = d["total"]
    return [(
        f"implicit drift found, {d['tools']} tools × {d['calls_per_tool']} answers, "
        f"every {d['drift_every']}th answer's declared output changed",
        f"{t['found']} of {t['changed']}; {t['false_pos']} false signs in "
        f"{_n(t['unchanged'])} unchanged answers",
        "all; none",
        "`python bench/implicit_drift.py`",
    )]


def paraphrase_scoring(d: dict[str, Any]) -> list[Row]:
    lv = d["levels"]
    eps = sorted(lv, key=int)
    return [(
        f"{d['agent']} agent following the text, full success at ε = {', '.join(eps)}",
        "by data flow " + " / ".join(f"{lv[e]['full_by_data_flow']:.2f}" for e in eps)
        + "; by total order " + " / ".join(f"{lv[e]['full_by_total_order']:.2f}" for e in eps),
        "the same at every ε",
        "`python bench/paraphrase_scoring.py`",
    )]


def resilibench_rules(d: dict[str, Any]) -> list[Row]:
    ab, want = d["a_then_b"], d["expected_P(B ok)"]
    sc = d["scaled_share"]["resilibench-code"]
    return [(
        f"ResiliBench rules: P(B ok | A failed 3×), base success {d['base_success_rate']}",
        f"paper rule {ab['resilibench-paper']['P(B ok)']:.3f}, code rule "
        f"{ab['resilibench-code']['P(B ok)']:.3f} (by hand {want['paper']:.3f}); scaled(λ) "
        "under the code rule " + ", ".join(f"{k} → {v:.3f}" for k, v in sc.items()),
        "0.584 / 0.571 ± 0.03; λ ± 0.02",
        "`python bench/resilibench_rules.py`",
    )]


def retry_after_5xx(d: dict[str, Any]) -> list[Row]:
    f, sims = d["first"], d["simulated"]
    lo, hi = f["share_ci95"]
    inside = sum(s["inside"] for s in sims)
    return [(
        f"Retry-After share on 5xx answers, calibrate → simulate → calibrate ({f['n']} errors)",
        f"{f['share']:.3f} [{lo:.3f}, {hi:.3f}]; re-calibrated "
        f"{min(s['share'] for s in sims):.3f}–{max(s['share'] for s in sims):.3f}, "
        f"{inside} of {len(sims)} seeds inside",
        "inside the interval",
        "`python bench/retry_after_5xx.py`",
    )]


def toolmaze_plans(d: dict[str, Any]) -> list[Row]:
    plans = [k for k in d if k.startswith("toolmaze-")]
    cells = ", ".join(
        f"{k.removeprefix('toolmaze-')} {d[k]['on_path']['direct']['PRR']:.2f}/"
        f"{d[k]['on_path']['off_path_first']['PRR']:.2f}" for k in plans)
    return [(
        "ToolMaze PRR per plan, direct / after an off-path first call",
        cells,
        "an off-path call changes nothing",
        "`python bench/toolmaze_plans.py`",
    )]


def mcp_proxy(d: dict[str, Any]) -> list[Row]:
    o, r, f = d["overhead"], d["replay"], d["fault_shares"]
    shares = "; ".join(
        f"asked {v['asked']:g}: {v['failed_share_client']:.3f} failed "
        f"[{v['failed_share_wilson95'][0]:.3f}, {v['failed_share_wilson95'][1]:.3f}]"
        for v in f.values())
    trips = "; ".join(
        f"{name} {v['calibrated_success']:.2f} [{v['success_ci95'][0]:.3f}, "
        f"{v['success_ci95'][1]:.3f}] → {v['replayed_success']:.2f} through the proxy"
        for name, v in d["calibrated_round_trip"].items())
    cmd = "`python bench/mcp_proxy.py`"
    return [
        (f"MCP proxy vs a direct session, {o['n']} calls to mcp-server-time, calm profile",
         f"median {o['ratio_median']:.2f}×, mean {o['ratio_mean']:.2f}× "
         f"({o['proxy']['median_ms']:.1f} vs {o['direct']['median_ms']:.1f} ms)",
         "≤ 1.5×", cmd),
        (f"MCP replay vs the live server through the proxy, {r['n']} calls",
         f"{r['replay']['median_ms']:.1f} vs {r['live_through_proxy']['median_ms']:.1f} ms "
         f"median: {r['speedup_median']:.1f}× faster", "–", cmd),
        ("MCP proxy --fault-rate, seed 7, 200 calls (one seed: every door, rate and several "
         "seeds in `fault_rate_roundtrip`)", shares, "about the share asked", cmd),
        ("MCP servers calibrated from 200 probes, profile replayed through the proxy", trips,
         "inside the interval", cmd),
    ]


def fault_rate_roundtrip(d: dict[str, Any]) -> list[Row]:
    def door(name: str, v: dict[str, Any]) -> str:
        pooled = ", ".join(f"{rate} → {c['pooled_share']:.3f}" for rate, c in v["rates"].items())
        got, of = d["covered"][name]
        return f"{name.replace('_', ' ')}: {pooled}; covered {got}/{of}"

    return [(
        f"fault-rate dial per door, {d['calls']} calls × {len(d['seeds'])} seeds per rate: "
        "share failed (pooled), and how many seeds' quoted 95 % intervals hold the rate",
        "; ".join(door(k, v) for k, v in d["doors"].items()),
        "the rate asked; about 95 % covered",
        "`python bench/fault_rate_roundtrip.py`",
    )]


def _load(d: dict[str, Any]) -> str:
    """The machine's load average while the bench ran (before → after, or one figure)."""
    la = d.get("load_average_1m", d.get("load_avg_1m"))
    if isinstance(la, list):
        return f"load average {la[0]:g} → {la[1]:g}"
    return f"load average {la:g}" if la is not None else ""


def mcp_tools_list(d: dict[str, Any]) -> list[Row]:
    bare_kb = d["payload_kb_without_output_schemas"]
    return [(
        f"MCP `tools/list` over stdio, {d['tools']} tools, vs an SDK `MCPServer` with "
        f"{d['tools']} trivial tools",
        f"{d['realprobe_ms_per_list']:.1f} ms vs {d['anchor_sdk_ms_per_list']:.1f} ms: "
        f"**{d['ratio_realprobe_to_anchor']:.2f}×** ({d['payload_kb']:g} kB vs "
        f"{d['anchor_payload_kb']:g} kB; without output schemas {bare_kb:g} kB, "
        f"{d['ratio_without_output_schemas_to_anchor']:.2f}×; {_load(d)})",
        f"≤ {d['goal_ratio']:g}× the SDK server",
        "`python bench/mcp_tools_list.py`",
    )]


def probe_concurrency(d: dict[str, Any]) -> list[Row]:
    m, med, bad = d["makespan_s"], d["median_call_ms"], d["failed_calls"]
    return [(
        f"live `probe` of {d['hosts']} loopback hosts × {d['calls'] // d['hosts']} rounds, "
        f"{d['latency_ms']:g} ms per call, concurrency 300 vs 32",
        f"{m['300']} s vs {m['32']} s: **{d['ratio_300_to_32']:.2f}×** (median call "
        f"{med['300']} ms vs {med['32']} ms; failed {bad['300']} vs {bad['32']}; {_load(d)})",
        f"≤ {d['goal_ratio']:g}× the run at 32",
        "`python bench/probe_concurrency.py`",
    )]


def ray_live_gate(d: dict[str, Any]) -> list[Row]:
    w, c = d["workers"], d["contested_4_workers"]
    return [(
        f"live-target calls from Ray workers through one shared politeness state: "
        f"{d['jobs']} jobs × {d['calls_per_job']} calls over {d['hosts']} loopback hosts "
        f"(one in flight, {d['interval_s']:g} s apart each)",
        f"{w['1']['calls_per_s']:g} / {w['2']['calls_per_s']:g} / {w['4']['calls_per_s']:g} "
        f"calls/s at 1 / 2 / 4 workers: **{d['speedup_4']:.2f}×** at 4; gaps under the "
        f"interval seen upstream: {sum(v['gaps_shorter_than_interval'] for v in w.values())}; "
        f"over {c['hosts']} contested hosts {c['calls_per_s']:g} calls/s (they allow "
        f"{c['hosts_allow_calls_per_s']:g}), smallest gap {c['min_gap_s']} s, "
        f"{c['gaps_shorter_than_interval']} under the interval ({_load(d)})",
        "spacing never violated; ≥ 3× at 4 workers where the hosts allow",
        "`python bench/ray_live_gate.py`",
    )]


def chunk_store(d: dict[str, Any]) -> list[Row]:
    cmd = "`python bench/chunk_store.py`"
    rows: list[Row] = []
    if "rows" in d:
        rows.append((
            f"the chunk store: `stats`' read and provenance survey of {_n(d['rows'])} live "
            "rows, from the chunks vs through SQL alone (older files), CPU in process",
            f"{d['read_and_survey_cpu_s_chunks']} s vs {d['read_and_survey_cpu_s_sql']} s: "
            f"**{d['read_ratio_sql_to_chunks']}× less**, identical to the last bit: "
            f"{'yes' if d['identical'] else 'NO'} ({d['chunks']} chunks, "
            f"{d['chunk_bytes_per_row']:g} bytes a row; sealing a whole file at once "
            f"{d['seal_cpu_us_per_row']} µs a row; {_load(d)})",
            "read + survey ≤ 0.06 s at 1,000,000 rows", cmd))
    w = d["writer"]

    def cost(k: str) -> str:
        x = w[k]
        return (f"{x['cpu_us_per_row_with_chunks']} µs vs {x['cpu_us_per_row_without']} µs: "
                f"+{x['added_cpu_us_per_row']} µs ({_pct(x['added_share'])}; quartiles "
                f"{x['added_quartiles_us'][0]:+g} to {x['added_quartiles_us'][1]:+g} µs; "
                f"sealing {x['sealing_cpu_us_per_row']} µs of it)")

    rows.append((
        f"the chunk store's cost to the writer, CPU per row, {_n(w['writes'])} rows into two "
        f"files side by side ({w['blocks']} alternating blocks, the median block): one committed "
        f"row a call (`Store.insert_probe`, a prober) / {_n(w['batch'])} rows a call "
        "(`Store.insert_probes`, a merge)",
        f"{cost('one_row_a_call')} / {cost('batched')} ({_load(d)})", "–", cmd))
    return rows


def progress_cost(d: dict[str, Any]) -> list[Row]:
    """What the progress bar costs a probe (bench/progress_cost.py)."""
    p, q = d["probe"], d.get("long_probe")

    def cells(x: dict[str, Any]) -> str:
        b = x["best"]
        return (f"{_n(x['calls'])} calls: front door {b['door']['cpu_s']} s, to a file "
                f"{b['file']['cpu_s']} s (**{x['cpu_ratio']['file']}×**), on a terminal "
                f"{b['pty']['cpu_s']} s (**{x['cpu_ratio']['pty']}×**); wall "
                f"{x['wall_ratio']['file']}× / {x['wall_ratio']['pty']}×; rows the same: "
                f"{'yes' if x['same_rows_every_run'] else 'NO'}")

    return [(
        "the progress bar's cost: a simulated probe (every tool, harsh profile) through the "
        "command line to a file (no bar) and on a terminal (bar and ETA) vs the front door "
        f"`realprobe.probe(...)`, each a fresh process, CPU (best of {p['repeats']}, "
        "interleaved)",
        "; ".join(cells(x) for x in (p, q) if x) + f" ({_load(d)})",
        "≤ 1.15× CPU at 9,600 calls; 20,000 within 1.2×", "`python bench/progress_cost.py`")]


def perf_table(d: dict[str, Any]) -> list[Row]:
    """The performance figures of one run of bench/perf_table.py, each a ratio to an anchor
    measured side by side (CPU time: the machine is shared), with the noise `--check`
    allows."""
    cmd = "`python bench/perf_table.py`"
    load = f"{_load(d)}; noise ±{NOISE['ratio']:.0%}"
    rows: list[Row] = []
    if "stats" in d:
        st = d["stats"]
        # the stats' own load average when they were rerun on their own
        st_load = f"{_load(st)}; noise ±{NOISE['ratio']:.0%}" if "load_average_1m" in st else load
        cells = "; ".join(
            f"{_n(int(k))} rows: {r['stats_cpu_s']} s vs {r['anchor_cpu_s']} s, "
            f"**{r['ratio']}×** (wall {r['stats_wall_s']:.1f} s, peak "
            f"{r['stats_peak_mb']:.0f} MB"
            + (f"; {r['ratio_to_query_in_process']}× the query alone, in process"
               if "ratio_to_query_in_process" in r else "")
            + (f"; its read and survey {r['read_and_survey_in_process_cpu_s']} s"
               if "read_and_survey_in_process_cpu_s" in r else "") + ")"
            for k, r in st["by_rows"].items()
        )
        rows.append((
            "`realprobe stats --json` vs the anchor query `" + st["anchor_sql"] + "`, each in "
            "a fresh process (`python -c` running the query), CPU (30 tools, live rows with "
            "phases)",
            f"{cells} ({st_load})", "≤ 3× at 100,000 rows, ≤ 1.5× at 1,000,000", cmd))
    if "calls" in d:
        c = d["calls"]
        c_load = f"{_load(c if 'load_average_1m' in c else d)}; noise ±{NOISE['ratio']:.0%}"
        rows.append((
            f"call throughput: tool calls vs raw `httpx` `get` + `.json()` on the same loopback "
            f"sandbox (its own process), warm keep-alive connections, CPU of the caller, "
            f"{c['rounds']} rounds × {_n(c['n'])} calls side by side (medians)",
            f"sync (`call_tool_sync`) {c['realprobe_sync_us']} µs vs {c['raw_sync_us']} µs "
            f"per call: **{c['ratio_sync']:.2f}**; async (`call_tool`) "
            f"{c['realprobe_async_us']} µs vs {c['raw_async_us']} µs: "
            f"**{c['ratio_async']:.2f}** of raw httpx; validation, classification and result "
            f"{_pct(c['own_work_share_sync'])}"
            + (f" (sync) and {_pct(c['own_work_share_async'])} (async)"
               if "own_work_share_async" in c else "") + f" of a raw call ({c_load})",
            "≥ 0.95 of raw httpx; own work < 5 %", cmd))
    if "replay" in d:
        r = d["replay"]
        r_load = f"{_load(r if 'load_average_1m' in r else d)}; noise ±{NOISE['ratio']:.0%}"
        rows.append((
            f"replay per request, {_n(r['n'])}-interaction cassette through `use_cassette` vs "
            "an `httpx.MockTransport` handing back prebuilt responses, CPU",
            f"{r['use_cassette_us']} µs vs {r['mock_transport_us']} µs: **{r['ratio']}×** "
            f"({r_load})", "≤ 1.3×", cmd))
    if "metrics" in d:
        m = d["metrics"]
        rows.append((
            f"exporter `/metrics` on {_n(m['rows'])} rows (100 new between scrapes) vs a bare "
            "prometheus_client server serving the same samples, CPU per scrape (medians of "
            f"{m['scrapes']} scrapes side by side, alternating which goes first; the ratio is "
            "the median of the pairs' ratios)",
            f"{m['exporter_cpu_ms']} ms vs {m['bare_prometheus_cpu_ms']} ms: "
            f"**{m['ratio']}×** (quartiles {' – '.join(map(str, m.get('ratio_quartiles', [])))}"
            f"; {_load(m if 'load_average_1m' in m else d)}; noise ±{NOISE['ratio']:.0%})",
            "≤ 1.5×", cmd))
    if "calibrate" in d:
        c = d["calibrate"]
        rows.append((
            f"`calibrate` of {_n(c['tools'])} tools × {_n(c['rows_per_tool'])} calls behind a "
            f"{c['deadline_s']:g} s deadline that bites, one worker process per core "
            f"({c['cores']} cores; CPU counts the workers)",
            f"{c['wall_s']} s wall, {c['cpu_s']} s of CPU ({c['cpu_per_tool_s']} s per tool"
            + (f"; other work took {c['others_cpu_s']:g} s of CPU meanwhile"
               if "others_cpu_s" in c else "")
            + f"; {_load(c if 'load_average_1m' in c else d)}; noise ±{NOISE['wall_s']:.0%} "
            f"wall, ±{NOISE['cpu_s']:.0%} CPU)",
            "700 tools ≤ 60 s wall on 2 cores", cmd))
    if "startup" in d:
        u = d["startup"]
        rows.append((
            f"start-up: `catalog import-openapi` of a {u['import_openapi_doc_bytes'] / 1000:.0f}"
            " kB document (best of 3); `realprobe --help` vs a one-command typer app (fresh "
            f"processes, {u.get('help_runs', 7)} rounds running both back to back, median of "
            "the rounds' ratios), CPU",
            f"{u['import_openapi_cpu_s']} s of CPU ({u['import_openapi_wall_s']} s wall); "
            f"{u['help_cpu_s']} s vs {u['typer_one_command_cpu_s']} s: "
            f"**{u['ratio_help_to_typer']}×** (quartiles of the ratio "
            f"{' – '.join(str(q) for q in u.get('ratio_quartiles', [])[::2])}; "
            f"{_load(u if 'load_average_1m' in u else d)}; noise ±{NOISE['ratio']:.0%})",
            "≤ 1 s; ≤ 0.48×", cmd))
    return rows


#: the figures a busy machine cannot check, and why (the load average a rerun counts as busy:
#: as many runnable processes as cores)
UNDER_LOAD = {
    "calibrate, wall": "a wall time on shared cores measures the neighbours; its CPU per tool "
                       "is checked",
    "stats 10000 rows / GROUP BY, CPU": "at 10,000 rows both sides are mostly an interpreter "
                                        "starting (0.33 s against a 0.02 s query process), "
                                        "whose CPU grows with the neighbours' cache traffic; "
                                        "100,000 and 1,000,000 rows are checked",
    "call_tool_sync own work / raw call, CPU": "a share of a few percent, the difference of "
                                               "two CPU figures each noisier than it on busy "
                                               "cores; the ratio to raw httpx is checked",
    "call_tool own work / raw call, CPU": "a share of a few percent, the difference of two CPU "
                                          "figures each noisier than it on busy cores; the "
                                          "ratio to raw httpx is checked",
}
BUSY = os.cpu_count() or 1
#: the perf_table section each figure comes from (a figure off is measured once more)
SECTIONS = {"stats": "stats", "raw httpx": "calls", "call_tool": "calls",
            "use_cassette": "replay", "/metrics": "metrics", "calibrate": "calibrate",
            "import-openapi": "startup", "--help": "startup"}


def _perf_run(a: dict[str, Any], only: str, out: Path) -> dict[str, tuple[float, float]]:
    sizes = ",".join(n for n in a["sizes"].split(",") if int(n) < CHECKED_BELOW)
    subprocess.run(
        [sys.executable, str(HERE / "perf_table.py"), "--only", only, "--sizes",
         sizes, "--repeats", str(a["repeats"]), "--calls", str(a["calls"]),
         "--call-rounds", str(a.get("call_rounds", 15)),
         "--metrics-rows", str(a["metrics_rows"]), "--calibrate-tools",
         str(a["calibrate_tools"]), "--startup-runs", str(a.get("startup_runs", 41)),
         "--out", str(out)],
        check=True, stdout=subprocess.DEVNULL,
    )
    return claims(json.loads(out.read_text(encoding="utf-8")))


def rerun_check(results: Path = RESULTS) -> list[str]:
    """Rerun bench/perf_table.py as its results file says it ran; the figures that moved by
    more than their noise (empty: every claim held). Every figure is a CPU ratio or CPU time
    measured side by side (best of N, interleaved); one found off is measured once more and
    holds when either run holds it (a neighbour's burst during one section says nothing of
    the code). On a busy machine (load average at or above the cores) the figures in
    `UNDER_LOAD` are left unchecked, saying why."""
    path = results / "perf_table.json"
    if not path.exists():
        return []
    old = json.loads(path.read_text(encoding="utf-8"))
    a, busy = old["args"], os.getloadavg()[0] >= BUSY
    with tempfile.TemporaryDirectory() as tmp:
        runs = [_perf_run(a, a["only"], Path(tmp) / "perf_table.json")]

        def held(name: str) -> bool:
            was, noise = claims(old)[name]
            return any(abs(run.get(name, (math.nan, 0))[0] - was) <= noise * abs(was)
                       for run in runs)

        wanted = {name for name in claims(old) if not (busy and name in UNDER_LOAD)}
        again = {s for name in wanted if not held(name)
                 for k, s in SECTIONS.items() if name.startswith(k)}
        if again:
            runs.append(_perf_run(a, ",".join(sorted(again)), Path(tmp) / "again.json"))
    off = []
    for name, (was, noise) in claims(old).items():
        if name not in wanted:
            print(f"skip {name}: claimed {was:g}; load average {os.getloadavg()[0]:.1f} on "
                  f"{BUSY} cores: {UNDER_LOAD[name]}")
            continue
        nows = ", ".join(f"{run[name][0]:g}" for run in runs if name in run)
        print(f"{'ok ' if held(name) else 'OFF'} {name}: claimed {was:g}, now {nows} "
              f"(±{noise:.0%})")
        if not held(name):
            off.append(name)
    return off


#: results file stem -> its rows, in the table's order
TABLE: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "perf_table": perf_table,
    "chunk_store": chunk_store,
    "progress_cost": progress_cost,
    "probe_throughput": probe_throughput,
    "scheduling_efficiency": scheduling_efficiency,
    "report_100k": report_100k,
    "cli_startup": cli_startup,
    "demo_time": demo_time,
    "install_time": install_time,
    "sandbox_latency": sandbox_latency,
    "interval_coverage": interval_coverage,
    "stats_coverage": stats_coverage,
    "outage_drift": outage_drift,
    "error_mix_coverage": error_mix_coverage,
    "profile_roundtrip": profile_roundtrip,
    "catalog_scale": catalog_scale,
    "openapi_import": openapi_import,
    "replay_vs_vcrpy": replay_vs_vcrpy,
    "replay_load_time": replay_load_time,
    "realworld_replay": realworld_replay,
    "tasks_simulate": tasks_simulate,
    "tasks_replay": tasks_replay,
    "hostile_limits": hostile_limits,
    "input_limits": input_limits,
    "json_limits": json_limits,
    "drift_false_positives": drift_false_positives,
    "calibrate_burst_roundtrip": calibrate_burst_roundtrip,
    "latency_fit_checks": latency_fit_checks,
    "provenance_selection": provenance_selection,
    "mcp_overhead": mcp_overhead,
    "sandbox_proxy_throughput": sandbox_proxy_throughput,
    "use_cassette_replay": use_cassette_replay,
    "exporter_scrape": exporter_scrape,
    "merge_throughput": merge_throughput,
    "tasks_concurrency": tasks_concurrency,
    "eval_numbers": eval_numbers,
    "mcp_tools_list": mcp_tools_list,
    "probe_concurrency": probe_concurrency,
    "ray_live_gate": ray_live_gate,
    "first_hour": first_hour,
    "eta": eta,
    "door_names": door_names,
    "implicit_drift": implicit_drift,
    "paraphrase_scoring": paraphrase_scoring,
    "resilibench_rules": resilibench_rules,
    "retry_after_5xx": retry_after_5xx,
    "toolmaze_plans": toolmaze_plans,
    "mcp_proxy": mcp_proxy,
    "fault_rate_roundtrip": fault_rate_roundtrip,
    "history_import": history_import,
    "eval_round3": eval_round3,
    "mcp_sessions": mcp_sessions,
    "sandbox_budget_flood": sandbox_budget_flood,
}


#: the README's few headline numbers, written between these markers from the same results
README = HERE.parent / "README.md"
HEAD_START, HEAD_END = "<!-- headline:start -->", "<!-- headline:end -->"


def _headline_stats(d: dict[str, Any]) -> str:
    r = d["stats"]["by_rows"]["1000000"]
    return (f"`stats` over 1,000,000 rows: {r['stats_cpu_s']} s of CPU, **{r['ratio']}×** a "
            "bare SQL `GROUP BY` of the same rows")


def _headline_calls(d: dict[str, Any]) -> str:
    c = d["calls"]
    return (f"tool calls run at **{c['ratio_sync']:.2f}×** the rate of a raw `httpx` get + "
            f"`.json()` (sync; async {c['ratio_async']:.2f}×), validation and classification "
            "included")


def _headline_realworld(d: dict[str, Any]) -> str:
    r = d["replay"]
    return (f"**{r['imported_to_json']}/{r['real_files']}** real third-party cassettes (vcrpy, "
            "Ruby VCR, ...) imported and replayed byte for byte")


def _headline_coverage(d: dict[str, Any]) -> str:
    b = d["burst"]["coverage"]
    return (f"the 95 % success interval holds the truth **{_pct(b['success_burst_adjusted'])}** "
            f"of the time under bursts (plain Wilson {_pct(b['success_wilson'])})")


#: (results file, what the README says from it), at most eight
HEADLINES: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("demo_time", lambda d: f"`realprobe demo`, offline, end to end: **{d['cli_wall_s']:.1f} s**"),
    ("perf_table", _headline_stats),
    ("perf_table", _headline_calls),
    ("replay_vs_vcrpy", lambda d: f"replaying a {_n(d['interactions'])}-interaction cassette: "
                                  f"**{d['speedup']:.0f}×** faster than vcrpy"),
    ("realworld_replay", _headline_realworld),
    ("tasks_replay", lambda d: f"every shipped task run replayed: **{d['runs']} runs**, "
                               f"{d['outcomes_as_recorded']} as recorded, in "
                               f"{1000 * d['best_s']:.0f} ms"),
    ("interval_coverage", _headline_coverage),
    ("mcp_proxy", lambda d: "the MCP proxy in front of a real server: median "
                            f"**{d['overhead']['ratio_median']:.2f}×** a direct session"),
]


def headlines(results: Path = RESULTS) -> str:
    """The README's headline numbers, one bullet each (a result file that is missing is left
    out)."""
    out = []
    for name, say in HEADLINES:
        path = results / f"{name}.json"
        if path.exists():
            out.append(f"- {say(json.loads(path.read_text(encoding='utf-8')))}")
    return "\n".join(out)


def with_headlines(page: str, results: Path = RESULTS) -> str:
    try:
        head, rest = page.split(HEAD_START, 1)
        _, tail = rest.split(HEAD_END, 1)
    except ValueError:
        raise SystemExit(f"README.md lacks the {HEAD_START} ... {HEAD_END} markers") from None
    return f"{head}{HEAD_START}\n{headlines(results)}\n{HEAD_END}{tail}"


#: the results whose rows are performance figures: each states the load it was measured at
PERFORMANCE = {
    "perf_table", "chunk_store", "progress_cost", "probe_throughput", "scheduling_efficiency",
    "report_100k", "cli_startup", "demo_time", "install_time", "sandbox_latency",
    "catalog_scale", "openapi_import", "replay_vs_vcrpy", "replay_load_time", "tasks_simulate",
    "tasks_replay", "hostile_limits", "input_limits", "provenance_selection", "mcp_overhead",
    "sandbox_proxy_throughput", "use_cassette_replay", "exporter_scrape", "merge_throughput",
    "tasks_concurrency", "mcp_tools_list", "probe_concurrency", "ray_live_gate", "mcp_proxy",
}


def table(results: Path = RESULTS) -> str:
    lines = ["| what | result | goal | command |", "|---|---|---|---|"]
    for stem, rows_of in TABLE.items():
        path = results / f"{stem}.json"
        if not path.exists():
            continue
        for what, result, goal, cmd in rows_of(json.loads(path.read_text(encoding="utf-8"))):
            if stem in PERFORMANCE and "load average" not in result:
                result += " (load average not recorded when measured)"
            row = (what, result, goal, cmd)
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines)


def with_table(page: str, results: Path = RESULTS) -> str:
    """`page` with the text between the markers replaced by the table."""
    try:
        head, rest = page.split(START, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        raise SystemExit(f"{NUMBERS.name} lacks the {START} ... {END} markers") from None
    return f"{head}{START}\n{table(results)}\n{END}{tail}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="update docs/numbers.md")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/numbers.md is out of date or a rerun moves a figure")
    ap.add_argument("--no-rerun", action="store_true", help="--check without the rerun")
    args = ap.parse_args()
    current = NUMBERS.read_text(encoding="utf-8")
    wanted = with_table(current)
    readme = README.read_text(encoding="utf-8")
    readme_wanted = with_headlines(readme)
    if args.check:
        if current != wanted:
            sys.exit("docs/numbers.md is stale: run python bench/readme_numbers.py --write")
        if readme != readme_wanted:
            sys.exit("README.md's headline numbers are stale: run python "
                     "bench/readme_numbers.py --write")
        off = [] if args.no_rerun else rerun_check()
        if off:
            sys.exit(f"{len(off)} figure(s) off by more than their noise: "
                     + ", ".join(off))
        return
    if args.write:
        NUMBERS.write_text(wanted, encoding="utf-8")
        README.write_text(readme_wanted, encoding="utf-8")
        print(f"updated {NUMBERS} and the headline numbers of {README}")
        return
    print(table())


if __name__ == "__main__":
    main()
