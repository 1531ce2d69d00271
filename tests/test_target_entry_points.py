"""One target, whatever door it comes through.

The same "where calls go" spelled through the Python API (`realprobe.options`), the options
object itself (`TransportOptions`), tasks (`TaskBatch.plan`'s check), the MCP server's and the
other commands' constructors resolves to equal `Target`s, or is refused by every one of them
with the same message.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_runner import main

import realprobe
from realprobe import EvalSettings, Mode, RealprobeError, TransportOptions
from realprobe.target import Target, TargetKind

Spelling = dict[str, Any]  # mode, sandbox, simulate


def via_options(s: Spelling) -> Target:
    return realprobe.options(mode=s["mode"], sandbox=s["sandbox"], profile=s["simulate"]).target


def via_transport_options(s: Spelling) -> Target:
    return TransportOptions(
        mode=s["mode"], sandbox=s["sandbox"], profile=s["simulate"]
    ).normalised().target


def via_mcp(s: Spelling) -> Target:
    service = realprobe.api.mcp_service(mode=Mode.parse(s["mode"]), sandbox=s["sandbox"],
                                        profile=s["simulate"])
    return service.transport_options.target


def via_tasks(s: Spelling) -> Target:
    settings = EvalSettings(mode=s["mode"], sandbox=s["sandbox"], profile=s["simulate"])
    return settings.target().target


DOORS: dict[str, Callable[[Spelling], Target]] = {
    "options": via_options,
    "TransportOptions": via_transport_options,
    "mcp": via_mcp,
    "tasks": via_tasks,
}

ACCEPTED: dict[str, tuple[Spelling, Target]] = {
    "simulate-no-profile": (
        {"mode": "simulate", "sandbox": None, "simulate": None},
        Target(kind=TargetKind.SIMULATE, profile="published", seed=0),
    ),
    "simulate-capitalised": (
        {"mode": "Simulate", "sandbox": None, "simulate": "calm"},
        Target(kind=TargetKind.SIMULATE, profile="calm", seed=0),
    ),
    "profile-implies-simulate": (
        {"mode": "live", "sandbox": None, "simulate": "harsh"},
        Target(kind=TargetKind.SIMULATE, profile="harsh", seed=0),
    ),
    "sandbox": (
        {"mode": "live", "sandbox": "http://127.0.0.1:9/", "simulate": None},
        Target(kind=TargetKind.SANDBOX, sandbox="http://127.0.0.1:9/"),
    ),
    "sandbox-forced-fault": (
        {"mode": "live", "sandbox": "http://127.0.0.1:9/_fault/hang/", "simulate": None},
        Target(kind=TargetKind.SANDBOX, sandbox="http://127.0.0.1:9/_fault/hang/"),
    ),
    "live": ({"mode": "live", "sandbox": None, "simulate": None}, Target.live()),
}

REFUSED: dict[str, Spelling] = {
    "unknown-fault": {"mode": "live", "sandbox": "http://127.0.0.1:9/_fault/nope/",
                      "simulate": None},
    "not-a-url": {"mode": "live", "sandbox": "127.0.0.1:9", "simulate": None},
    "sandbox-and-profile": {"mode": "live", "sandbox": "http://127.0.0.1:9",
                            "simulate": "calm"},
    "sandbox-and-simulate": {"mode": "simulate", "sandbox": "http://127.0.0.1:9",
                             "simulate": None},
    "port-out-of-range": {"mode": "live", "sandbox": "http://127.0.0.1:99999", "simulate": None},
    "unclosed-ipv6": {"mode": "live", "sandbox": "http://[::1", "simulate": None},
    "no-host": {"mode": "live", "sandbox": "http://:80/", "simulate": None},
    "bad-mode": {"mode": "simulation", "sandbox": None, "simulate": None},
    "bad-profile": {"mode": "simulate", "sandbox": None, "simulate": "no-such-profile"},
}


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_every_door_resolves_the_same_target(door: str, case: str) -> None:
    spelling, expected = ACCEPTED[case]
    assert DOORS[door](spelling) == expected


@pytest.mark.parametrize("case", list(REFUSED))
def test_every_door_refuses_with_the_same_message(case: str) -> None:
    messages: dict[str, str] = {}
    for door, build in DOORS.items():
        with pytest.raises(RealprobeError) as info:
            build(REFUSED[case])
        messages[door] = str(info.value)
    assert len(set(messages.values())) == 1, messages


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    old = sys.argv
    sys.argv = ["realprobe", *argv]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.argv = old
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "uselessfacts_random"],
        ["probe", "--all", "--rounds", "1"],
        ["mcp", "--transport", "http", "--port", "0"],
        ["run", "--all"],
    ],
    ids=["call", "probe", "mcp", "run"],
)
def test_cli_verbs_refuse_an_unknown_fault_variant_alike(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Nothing runs: the one check refuses before any call, socket or database."""
    code, err = run_cli([*argv, "--sandbox", "http://127.0.0.1:9/_fault/nope/",
                         "--db", str(tmp_path / "p.db")] if argv[0] in ("probe", "run")
                        else [*argv, "--sandbox", "http://127.0.0.1:9/_fault/nope/"], capsys)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unknown fault variant 'nope'" in lines[0], err
    assert "--sandbox" in lines[0]
    assert not (tmp_path / "p.db").exists()


@pytest.mark.parametrize("verb", [["call", "uselessfacts_random"], ["mcp"]], ids=["call", "mcp"])
def test_the_cli_reads_mode_like_the_library(
    verb: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`options(mode="Simulate")` is accepted, so `--mode Simulate` is too; an unknown mode is
    refused with the library's message, spelled as the flag."""
    code, err = run_cli([*verb, "--mode", "Simulation"], capsys)
    assert code == 2
    assert err.strip() == "error: --mode 'Simulation': choose one of live, record, replay, simulate"
    code, err = run_cli(["call", "uselessfacts_random", "--mode", "SIMULATE", "--profile", "calm",
                         "--json"], capsys)
    assert code == 0, err


def test_a_sandbox_port_no_client_can_reach_is_refused_before_any_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = run_cli(["call", "uselessfacts_random", "--sandbox", "http://127.0.0.1:99999"],
                        capsys)
    assert code == 2 and err.startswith("error: --sandbox 'http://127.0.0.1:99999'"), err
    assert "TaskGroup" not in err


@pytest.mark.parametrize(
    "argv",
    [["call", "uselessfacts_random"], ["probe", "--all", "--rounds", "1"], ["run", "--all"]],
    ids=["call", "probe", "run"],
)
def test_a_seed_past_64_bits_is_refused_before_any_run(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every row stores the seed: one SQLite cannot hold is refused up front (a batch used to
    run to the end and then fail to store its rows)."""
    extra = ["--db", str(tmp_path / "p.db")] if argv[0] != "call" else []
    code, err = run_cli([*argv, "--profile", "calm", "--seed", str(10**23), *extra], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and lines == [f"error: --seed {10**23}: expected an integer within 64 bits"]
    assert not (tmp_path / "p.db").exists()
    with pytest.raises(RealprobeError, match="within 64 bits"):
        realprobe.options(profile="calm", seed=2**63)
    with pytest.raises(RealprobeError, match=r"^flaw_seed .*: expected an integer within 64"):
        realprobe.run_tasks(["pet_newsletter"], profile="calm", flaw_seed=2**64,
                            db=tmp_path / "p.db")


def test_a_repeat_past_the_sweep_limit_is_refused_before_planning(tmp_path: Path) -> None:
    """Every run is planned up front: a repeat of 10**12 filled the memory before any run."""
    from realprobe.tasks.batch import MAX_REPEAT

    with pytest.raises(RealprobeError, match=f"^repeat must be at most {MAX_REPEAT:,}$"):
        realprobe.run_tasks(["pet_newsletter"], profile="calm", repeat=MAX_REPEAT + 1,
                            db=tmp_path / "p.db")
    assert not (tmp_path / "p.db").exists()
