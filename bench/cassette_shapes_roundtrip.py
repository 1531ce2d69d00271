"""How many real-world response shapes survive record, replay, import and plain vcrpy.

The shapes are the ones `tests/test_cassette_shapes.py` serves from a loopback server
(Crossref-like metadata, a Gemini-like answer with token counts, a Twitter-like rate-limit
answer, an OAuth token answer, a gzip-encoded JSON answer, a PNG), each recorded with
`use_cassette` in JSON and in YAML. A shape round-trips when every check holds: the stored
body is byte for byte what the server sent (the OAuth answer: valid JSON with only its
credential replaced), realprobe's replay hands back the recorded headers and bytes, plain
vcrpy replays it, and `cassette import` keeps it unchanged.

    python bench/cassette_shapes_roundtrip.py [--save]

Writes bench/results/cassette_shapes_roundtrip.json only with --save.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import warnings
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import vcr  # noqa: E402

import realprobe  # noqa: E402
from realprobe.cassettes.importers import load_cassette  # noqa: E402
from realprobe.cassettes.scrub import ScrubConfig, scrub_cassette  # noqa: E402
from tests.test_cassette_shapes import ROUTES, Handler, requests_for, short  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "cassette_shapes_roundtrip.json"


def _stored_ok(route: str, body: bytes, stored: bytes) -> bool:
    if route != "/token":
        return stored == body
    data = json.loads(stored)
    return data["access_token"] == "REDACTED" and data["expires_in"] == 3599


def _replay_ok(path: Path) -> dict[str, bool]:
    out = {}
    calls = load_cassette(path).calls
    with realprobe.use_cassette(path, record_mode="none"), httpx.Client() as client:
        for call in calls:
            with client.stream(call.method, call.uri, content=call.request_body,
                               headers=dict(call.request_headers)) as r:
                raw = b"".join(r.iter_raw())
                same = list(r.headers.multi_items()) == [(k.lower(), v) for k, v in call.headers]
                out[short(call.uri)] = same and raw == call.body and r.status_code == call.status
    return out


def _vcrpy_ok(path: Path, base: str) -> dict[str, bool]:
    serializer = "json" if path.suffix == ".json" else "yaml"
    out = {}
    for method, url, headers, body in requests_for(base):
        name = short(url)
        route = next(r for r in ROUTES if short(r) == name)
        expected = ROUTES[route][2]
        try:
            # vcrpy's own filters put the same placeholder into the live request
            with vcr.use_cassette(str(path), serializer=serializer, record_mode="none",
                                  filter_query_parameters=[("key", "REDACTED")],
                                  filter_headers=[("authorization", "REDACTED")]), \
                    httpx.Client() as client:
                got = client.request(method, url, headers=headers, content=body).content
        except Exception:  # vcrpy could not serve it
            out[name] = False
            continue
        if route == "/gz":
            import gzip

            expected = gzip.decompress(expected)
        if route == "/token":
            out[name] = json.loads(got)["access_token"] == "REDACTED"
        else:
            out[name] = got == expected
    return out


def _import_ok(path: Path, tmp: Path) -> bool:
    from typer.testing import CliRunner

    from realprobe.cli import app

    out = tmp / ("imported" + path.suffix)
    res = CliRunner().invoke(app, ["cassette", "import", str(path), "-o", str(out)])
    if res.exit_code != 0:
        return False
    a, b = load_cassette(path), load_cassette(out)
    same = [(c.uri, c.headers, c.body) for c in a.calls] == [(c.uri, c.headers, c.body)
                                                             for c in b.calls]
    return same and scrub_cassette(b, ScrubConfig()).total == 0


def measure(fmt: str, base: str, tmp: Path) -> dict[str, dict[str, bool]]:
    path = tmp / f"shapes.{fmt}"
    with realprobe.use_cassette(path, record_mode="once"), httpx.Client() as client:
        for method, url, headers, body in requests_for(base):
            client.request(method, url, headers=headers, content=body).read()
    stored = {short(c.uri): c.body for c in load_cassette(path).calls}
    replay = _replay_ok(path)
    vcrpy = _vcrpy_ok(path, base)
    imported = _import_ok(path, tmp)
    table = {}
    for route, (_status, _headers, body) in ROUTES.items():
        name = short(route)
        table[name] = {"stored": _stored_ok(route, body, stored[name]), "replay": replay[name],
                       "vcrpy": vcrpy[name], "import": imported}
    return table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save", action="store_true", help="write bench/results/...json")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    result: dict[str, object] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for fmt in ("json", "yaml"):
                table = measure(fmt, base, Path(tmp))
                ok = [n for n, checks in table.items() if all(checks.values())]
                result[fmt] = {"shapes": len(table), "round_trip": len(ok), "checks": table}
                print(f"{fmt}: {len(ok)}/{len(table)} shapes round-trip "
                      f"({', '.join(n for n in table if n not in ok) or 'all'}"
                      f"{' fall short' if len(ok) < len(table) else ''})")
    finally:
        server.shutdown()
        server.server_close()
    print(json.dumps(result, indent=2))
    if args.save:
        RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
