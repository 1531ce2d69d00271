"""Every file a user hands in goes through the one reader with limits (`read_document`): a
deep, huge, many-rule, many-entry, empty, binary or badly linked file is refused in one line
naming the file and the limit, never a traceback or a parse without end. Every reader x
every hostile kind; the CLI's exit code and line for two of them. Timings: bench/input_limits.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from realprobe import RealprobeError, Store, load_profile
from realprobe.adapters.catalog import load_file
from realprobe.limits import MAX_ENTRIES, MAX_NESTING, MAX_RULES, MAX_YAML_ITEMS
from realprobe.monitor.alerts import load_rules
from realprobe.simulator.plans import load_plan
from realprobe.tasks.model import load_task
from realprobe.tasks.results import load_prices
from realprobe.tasks.sweep import load_sweep

READERS: dict[str, tuple[Callable[[Path], Any], str]] = {
    "catalogue": (load_file, ".json"),
    "alert rules": (load_rules, ".json"),
    "profile": (load_profile, ".json"),
    "fault plan": (load_plan, ".json"),
    "task file": (load_task, ".json"),
    "price file": (load_prices, ".json"),
    "sweep file": (load_sweep, ".toml"),
}


def write_hostile(path: Path, kind: str) -> Path:
    toml = path.suffix == ".toml"
    if kind == "deep":
        depth = 5000
        path.write_text(("a = " if toml else "") + "[" * depth + "]" * depth + "\n")
    elif kind == "shallow-deep":  # under the parser's recursion, over the nesting limit
        depth = MAX_NESTING + 20
        path.write_text(("a = " if toml else "") + "[" * depth + "]" * depth + "\n")
    elif kind == "huge":
        with path.open("wb") as fh:  # sparse: refused from its size alone
            fh.truncate(300 * 1_000_000)
    elif kind == "rules":
        n = 100_001
        path.write_text('[[rules]]\nfault = "500"\n' * n if toml
                        else json.dumps({"rules": [{"fault": "500"}] * n}))
    elif kind == "entries":
        n = MAX_ENTRIES + 10
        path.write_text("a = [" + "1," * n + "]\n" if toml else json.dumps({"a": [1] * n}))
    elif kind == "empty":
        path.write_text("")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        path.symlink_to(path.with_name("other" + path.suffix))
        path.with_name("other" + path.suffix).symlink_to(path)
    return path


KINDS = ("deep", "shallow-deep", "huge", "rules", "entries", "empty", "binary", "device", "loop")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_every_hostile_file_in_one_line(
    tmp_path: Path, reader: str, kind: str
) -> None:
    load, suffix = READERS[reader]
    path = write_hostile(tmp_path / f"hostile{suffix}", kind)
    with pytest.raises(RealprobeError) as err:
        load(path)
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg, msg
    want = {
        "deep": f"{MAX_NESTING} levels", "shallow-deep": f"{MAX_NESTING} levels",
        "huge": "MB limit", "rules": f"limit of {MAX_RULES:,}", "entries": f"{MAX_ENTRIES:,}",
        "empty": "is empty", "binary": "not UTF-8", "device": "not a regular file",
        "loop": "cannot read",
    }[kind]
    assert want in msg, msg


def test_a_symlink_to_a_good_file_is_read(tmp_path: Path) -> None:
    real = tmp_path / "prices.json"
    real.write_text('{"m": {"input": 1, "output": 2}}')
    (tmp_path / "link.json").symlink_to(real)
    assert load_prices(tmp_path / "link.json")["m"] == (1.0, 2.0)


@pytest.mark.parametrize("kind", ["deep", "rules"])
def test_the_cli_refuses_a_hostile_plan_and_price_file_with_exit_2(
    tmp_path: Path, kind: str
) -> None:
    env = {**os.environ, "REALPROBE_DATA_DIR": str(tmp_path / "data")}
    plan = write_hostile(tmp_path / "plan.json", kind)
    prices = write_hostile(tmp_path / "prices.json", kind)
    db, old = tmp_path / "t.db", tmp_path / "old.db"
    with Store(old):
        pass  # `results` reads a database: an existing one, left as it was
    before = old.read_bytes()
    for args, named in (
        (["run", "--all", "--fault-plan", str(plan), "--mode", "simulate", "--db", str(db)], plan),
        (["results", "--prices", str(prices), "--db", str(old)], prices),
    ):
        res = subprocess.run([sys.executable, "-m", "realprobe.cli", *args],
                             capture_output=True, text=True, timeout=120, env=env)
        assert res.returncode == 2, (args, res.stdout, res.stderr[-2000:])
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and str(named) in lines[0], res.stderr[-2000:]
        assert "limit" in lines[0]
        assert "Traceback" not in res.stderr
        assert not db.exists() and old.read_bytes() == before


@pytest.mark.parametrize("load", [load_rules, load_file])
def test_yaml_aliases_that_blow_up_are_refused(tmp_path: Path, load: Callable[[Path], Any]) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefghi", "bcdefghij", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RealprobeError) as err:
        load(path)
    assert str(path) in str(err.value) and "aliases expand" in str(err.value)


def test_a_long_yaml_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n" + "- {kind: no_success, for: 1h}\n" * (MAX_YAML_ITEMS + 1))
    with pytest.raises(RealprobeError, match=f"limit of {MAX_YAML_ITEMS:,} lines"):
        load_rules(path)
