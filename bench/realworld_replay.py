"""Real cassettes, real suites, attacks: the hardening numbers in one run, offline.

    python bench/realworld_replay.py [--suite DIR ...] [--site DIR] [--save]

- every real cassette shipped under tests/data (third-party test suites' cassettes with their
  licences, and single real recordings) imported to JSON and to YAML;
- every interaction of the originals and of both imports replayed through httpx, requests and
  aiohttp under `realprobe.use_cassette`, compared byte for byte with the body that client
  reads live from the recording (tests/realworld_clients.py);
  `--cassettes DIR` adds more (a folder of real cassettes, not shipped);
- peer-style suites run unchanged under realprobe's plugin (`-p no:recording`, network
  blocked, replay only): the pytest-recording sample project in tests/data, plus each
  `--suite DIR` (a checkout of a project's repository; `--site DIR` adds the site-packages
  holding its dependencies);
- the attacker-style tests, each an attack that must hold.

With --save also writes bench/results/realworld_replay.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchlib import emit  # noqa: E402
from realworld_clients import CLIENTS, Tally, real_files, replay_file  # noqa: E402

from realprobe.api_cassettes import import_cassette  # noqa: E402
from realprobe.cassettes.importers import load_cassette  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "realworld_replay.json"
ATTACKS = [  # one test node per attack
    "tests/test_network_block.py::test_reverse_lookups_are_blocked",
    "tests/test_network_block.py::test_a_socket_opened_before_the_block_cannot_write_around_it",
    "tests/test_network_block.py::test_a_tls_connection_opened_before_the_block_cannot_send",
    "tests/test_network_block.py::test_udp_sendto_is_blocked",
    "tests/test_network_block.py::test_udp_sendmsg_is_blocked",
    "tests/test_network_block.py::test_name_lookups_are_blocked_before_they_leave",
    "tests/test_monitor_merge.py::test_sources_with_generated_columns_merge_or_are_refused_per_row",
    "tests/test_catalog_record_fixtures.py::test_record_fixtures_never_copies_a_secret_example",
    "tests/test_exit_codes.py::test_a_severity_no_int_reads_is_one_usage_line",
    "tests/test_mcp_guards.py::test_sessions_are_capped_per_client_and_expire",
    "tests/test_run_executors.py::test_a_ray_started_here_listens_on_loopback_only",
]


def replay_numbers(more: list[Path]) -> dict[str, object]:
    warnings.simplefilter("ignore")
    found = real_files() + sorted(
        p for folder in more for p in folder.rglob("*") if p.suffix in (".yaml", ".yml", ".json")
        and "interactions" in p.read_text(errors="replace")  # cassettes, not other data
    )
    seen: set[bytes] = set()
    files = []
    for p in found:  # each file once, however many folders hold it
        digest = hashlib.sha256(p.read_bytes()).digest()
        if digest not in seen:
            seen.add(digest)
            files.append(p)
    tallies = {"original": Tally(), "json": Tally(), "yaml": Tally()}
    imported = {"json": 0, "yaml": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(files):
            try:
                replay_file(src, tallies["original"])
            except Exception as exc:  # counted, and named
                tallies["original"].failures.append(f"load {src.name}: {exc}")
            for fmt in ("json", "yaml"):
                out = Path(tmp) / f"{i}.{fmt}"
                try:
                    import_cassette(src, out, scrub=False)
                except Exception as exc:  # counted, and named
                    tallies[fmt].failures.append(f"import {src.name}: {exc}")
                    continue
                imported[fmt] += 1
                replay_file(out, tallies[fmt])
    interactions = 0
    for p in files:
        with contextlib.suppress(Exception):
            interactions += len(load_cassette(p).calls)
    return {
        "real_files": len(files),
        "interactions": interactions,
        "imported_to_json": imported["json"],
        "imported_to_yaml": imported["yaml"],
        "replayed_identically": {
            form: {c: f"{t.identical[c]}/{t.tried[c]}" for c in CLIENTS}
            for form, t in tallies.items()
        },
        "failures": [f for t in tallies.values() for f in t.failures][:20],
    }


def pytest_summary(args: list[str], cwd: Path, site: str = "") -> dict[str, int]:
    """pytest's summary counts for `args` run in `cwd`, with this checkout's realprobe first
    and `site` (a project's dependencies) after everything else on the path."""
    code = ("import site, sys; site.addsitedir(sys.argv[1]) if sys.argv[1] else None; "
            "sys.path.insert(0, sys.argv[2]); import pytest; sys.exit(pytest.main(sys.argv[3:]))")
    cmd = [sys.executable, "-c", code, site, str(ROOT), "-q", "-p", "no:cacheprovider",
           "-n", "0", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}


def suites(extra: list[Path], site: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    flags = ["-p", "no:recording", "--block-network", "--record-mode=none"]
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "pytest_recording_project"
        shutil.copytree(ROOT / "tests" / "data" / "pytest_recording_project", sample)
        out["pytest-recording sample (tests/data)"] = pytest_summary(flags, sample)
    for folder in extra:
        out[folder.name] = pytest_summary(flags, folder, site)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", type=Path, action="append", default=[])
    ap.add_argument("--cassettes", type=Path, action="append", default=[],
                    help="more real cassettes (a folder), besides those under tests/data")
    ap.add_argument("--site", default="")
    ap.add_argument("--save", action="store_true")
    a = ap.parse_args()
    out: dict[str, object] = {"replay": replay_numbers(a.cassettes)}
    out["peer_suites"] = suites(a.suite, a.site)
    held = pytest_summary(ATTACKS, ROOT)
    out["attacks"] = {"tests": len(ATTACKS), "test_cases": sum(held.values()),
                      "held": held.get("passed", 0)}
    emit(out, a.save, RESULTS)


if __name__ == "__main__":
    main()
