"""How long the README's example commands take, so the README can say so.

Starts a sandbox (`published` profile) on a free loopback port, runs each command in a fresh
folder with its own database, and prints the wall time. The live examples are not run.

    python bench/readme_durations.py                 # the quick ones
    python bench/readme_durations.py --polite        # also the polite 20-round probe (~5 min)
    python bench/readme_durations.py --save         # also bench/results/readme_durations.json
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RP = [sys.executable, "-c", "from realprobe.cli import main; main()"]

QUICK = [
    ["demo"],
    ["probe", "--all", "--rounds", "500", "--profile", "harsh", "--seed", "7"],
    ["probe", "--all", "--rounds", "20", "--sandbox", "{url}", "--politeness", "off"],
    ["probe", "--all", "--rounds", "20", "--sandbox", "{url}", "--politeness", "off",
     "--timeout", "2"],
    ["run", "--all", "--agent", "reference", "--mode", "replay"],
    ["run", "--all", "--profile", "published", "--repeat", "5"],
    ["cassette", "replay-round"],
]
POLITE = [["probe", "--all", "--rounds", "20", "--sandbox", "{url}"]]


def _sandbox(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = folder / "sandbox.log"
    proc = subprocess.Popen([*RP, "sandbox", "--port", "0", "--profile", "published"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=folder)
    for _ in range(600):
        m = re.search(r"http://127\.0\.0\.1:\d+", log.read_text())
        if m:
            return proc, m.group(0)
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the sandbox did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polite", action="store_true")
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        proc, url = _sandbox(base)
        try:
            for i, cmd in enumerate(QUICK + (POLITE if args.polite else [])):
                argv = [a.replace("{url}", url) for a in cmd]
                here = base / f"run{i}"
                here.mkdir()
                t0 = time.monotonic()
                db = ["--db", str(here / "r.db")] if argv[0] in ("probe", "run") else []
                res = subprocess.run([*RP, *argv, *db],
                                     cwd=here, capture_output=True, timeout=3600)
                took = time.monotonic() - t0
                line = "realprobe " + " ".join(cmd).replace("{url}", "URL")
                print(f"{took:8.1f} s  exit {res.returncode}  {line}", flush=True)
                results.append({"command": line, "seconds": round(took, 1),
                                "exit": res.returncode})
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    if args.save:
        out = HERE / "results" / "readme_durations.json"
        out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
