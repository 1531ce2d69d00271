"""One address floods the sandbox with callers that tell a budget of 86,000 s to a hanging
tool: what the others still get, and how soon the slots come back.

The attacker (bound to 127.0.0.2) opens `--connections` sockets (default 1,100, past the
1,024-connection cap), each sending `GET /_fault/hang/catfact/fact` with
`X-Realprobe-Budget: 86000`. Reported:

- held / refused: connections the sandbox holds (at most the address's share) and answers
  503 at once;
- the budget the sandbox holds a call for (journal `delay_ms`: capped at the 300 s hang cap);
- another address's API call and `/_admin`, the attacker's own `/_admin` (status codes);
- after the attacker closes its sockets: seconds until every held call has ended
  (`client-closed`), and its API call's status then.

    python bench/sandbox_budget_flood.py [--connections 1100] [--save]
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from benchlib import bench_args, emit, load_average  # noqa: E402
from peer_sockets import ask, connect  # noqa: E402

from realprobe import Sandbox, default_catalog, load_profile  # noqa: E402
from realprobe.http.simulate import routes_from_catalog  # noqa: E402
from realprobe.sandbox.server import running  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sandbox_budget_flood.json"
ATTACKER, OTHER = "127.0.0.2", "127.0.0.3"


def held(port: int) -> list[dict[str, Any]]:
    _, body = ask(port, OTHER, "/_journal")
    rows = json.loads(body)
    rows = rows["entries"] if isinstance(rows, dict) else rows
    return [r for r in rows if str(r["request_id"]).startswith("flood-")]


def main() -> None:
    args = bench_args(__doc__, connections=1100)
    before = load_average()
    sb = Sandbox(routes_from_catalog(default_catalog()), load_profile("calm"),
                 latency_scale=0.0)
    out: dict[str, Any] = {"connections": args.connections}
    with running(sb) as url:
        port = int(url.rsplit(":", 1)[1])
        with contextlib.ExitStack() as stack:
            socks = []
            for i in range(args.connections):
                s = stack.enter_context(connect(port, ATTACKER))
                s.sendall(f"GET /_fault/hang/catfact/fact HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"X-Realprobe-Budget: 86000\r\nX-Request-Id: flood-{i}\r\n\r\n"
                          .encode())
                socks.append(s)
            time.sleep(1.0)
            refused = 0
            for s in socks:
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    if s.recv(100).startswith(b"HTTP/1.1 503"):
                        refused += 1
            rows = held(port)
            out["held"] = len(rows)
            out["refused_503"] = refused
            out["held_for_s"] = sorted({r["delay_ms"] / 1000 for r in rows})
            out["other_api_status"] = ask(port, OTHER, "/catfact/fact")[0]
            out["other_admin_status"] = ask(port, OTHER, "/_admin")[0]
            out["attacker_admin_status"] = ask(port, ATTACKER, "/_admin")[0]
            out["attacker_api_status_while_holding"] = ask(port, ATTACKER, "/catfact/fact")[0]
            closed_at = time.perf_counter()
        while not all(r["ended"] == "client-closed" for r in held(port)):
            time.sleep(0.01)
        out["slots_freed_after_close_s"] = round(time.perf_counter() - closed_at, 3)
        out["attacker_api_status_after_close"] = ask(port, ATTACKER, "/catfact/fact")[0]
    emit(out, args.save, RESULTS, before)


if __name__ == "__main__":
    main()
