"""A corpus of malformed HAR (and vcrpy/VCR) files: each must give a one-line error, never a
traceback. `corpus(folder)` writes them and returns {file name: path}."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GOOD_ENTRY: dict[str, Any] = {
    "startedDateTime": "2026-11-20T10:00:00.000Z",
    "time": 12.5,
    "request": {"method": "GET", "url": "https://catfact.ninja/fact", "headers": []},
    "response": {
        "status": 200, "statusText": "OK",
        "headers": [{"name": "Content-Type", "value": "application/json"}],
        "content": {"mimeType": "application/json", "text": '{"fact": "x", "length": 1}'},
    },
    "timings": {"send": 1, "wait": 10, "receive": 1.5},
}


def har(*entries: Any) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "t"}, "entries": list(entries)}}


def entry(**changes: Any) -> dict[str, Any]:
    e = json.loads(json.dumps(GOOD_ENTRY))
    for path, value in changes.items():
        cur = e
        keys = path.split("__")
        for k in keys[:-1]:
            cur = cur[k]
        cur[keys[-1]] = value
    return e


def cases() -> dict[str, str | bytes]:
    """name -> file content (text or bytes)."""
    d = json.dumps
    out: dict[str, str | bytes] = {
        "status-abc.har": d(har(entry(response__status="abc"))),
        "status-infinity.har": d(har(entry(response__status=1))).replace(
            '"status": 1', '"status": Infinity'),
        "status-nan.har": d(har(entry(response__status=1))).replace('"status": 1', '"status": NaN'),
        "status-1e400.har": d(har(entry(response__status=1))).replace(
            '"status": 1', '"status": 1e400'),
        "status-huge-int.har": d(har(entry(response__status=1))).replace(
            '"status": 1', '"status": ' + "9" * 5000),
        "status-99999.har": d(har(entry(response__status=99999))),
        "status-float.har": d(har(entry(response__status=200.7))),
        "status-object.har": d(har(entry(response__status={"code": 200}))),
        "bad-base64.har": d(har(entry(response__content={"text": "!!!not base64@@",
                                                          "encoding": "base64"}))),
        "response-list.har": d(har(entry(response=[1, 2]))),
        "response-string.har": d(har(entry(response="200 OK"))),
        "mixed-dates.har": d(har(entry(), entry(startedDateTime="2026-11-20T10:00:01"))),
        "date-garbage.har": d(har(entry(startedDateTime="yesterday at noon"))),
        "date-number.har": d(har(entry(startedDateTime=12345))),
        "entries-object.har": d({"log": {"entries": {"a": 1}}}),
        "entry-number.har": d(har(5)),
        "request-list.har": d(har(entry(request=["GET", "https://x"]))),
        "request-no-url.har": d(har(entry(request={"method": "GET"}))),
        "method-null.har": d(har(entry(request__method=None))),
        "url-number.har": d(har(entry(request__url=12))),
        "headers-string.har": d(har(entry(response__headers="Content-Type: text/plain"))),
        "headers-numbers.har": d(har(entry(request__headers=[1, 2, 3]))),
        "header-name-object.har": d(har(entry(response__headers=[{"name": {"x": 1},
                                                                   "value": None}]))),
        "content-list.har": d(har(entry(response__content=["x"]))),
        "content-text-number.har": d(har(entry(response__content={"text": 5}))),
        "postdata-list.har": d(har(entry(request__postData=["a"]))),
        "timings-list.har": d(har(entry(timings=[1, 2]))),
        "time-string.har": d(har(entry(time="slow"))),
        "gzip-garbage.har": d(har(entry(response__headers=[
            {"name": "Content-Encoding", "value": "gzip"}],
            response__content={"text": "bm90IGd6aXA=", "encoding": "base64"}))),
        "log-list.har": d({"log": [1, 2]}),
        "no-entries.har": d({"log": {"version": "1.2"}}),
        "top-array.har": d([1, 2, 3]),
        "deep-nesting.har": "[" * 200_000 + "]" * 200_000,
        "not-utf8.har": b'{"log": {"entries": [\xff\xfe]}}',
        "truncated.har": d(har(entry()))[:80],
        "empty.har": "",
        # vcrpy / Ruby VCR shapes
        "vcr-status-abc.yaml": "version: 1\ninteractions:\n- request: {method: GET, uri: "
                               "'https://x.test/'}\n  response: {status: {code: abc}, "
                               "body: {string: ''}}\n",
        "vcr-response-list.yaml": "version: 1\ninteractions:\n- request: {method: GET, uri: "
                                  "'https://x.test/'}\n  response: [1, 2]\n",
        "vcr-bad-binary.yaml": "version: 1\ninteractions:\n- request: {method: GET, uri: "
                               "'https://x.test/'}\n  response: {status: {code: 200}, "
                               "body: {string: !binary '@@@'}}\n",
        "vcr-bad-base64-body.json": d({"version": 1, "interactions": [
            {"request": {"method": "GET", "uri": "https://x.test/"},
             "response": {"status": {"code": 200}, "body": {"base64_string": "@@@"}}}]}),
        "ruby-vcr-status-list.yaml": "http_interactions:\n- request: {method: get, uri: "
                                     "'https://x.test/'}\n  response: {status: [1], "
                                     "body: {string: ''}}\n",
        "vcr-headers-nested-alias.yaml": "version: 1\nx: &a [[1, 2], [3, 4]]\ninteractions:\n"
                                         "- request: {method: GET, uri: 'https://x.test/', "
                                         "headers: {h: *a}}\n  response: {status: {code: 200}, "
                                         "body: {string: ''}}\n",
        "vcr-timing-nan.json": d({"version": 1, "interactions": [
            {"request": {"method": "GET", "uri": "https://x.test/"},
             "response": {"status": {"code": 200}, "body": {"string": ""}},
             "realprobe": {"seq": 0, "elapsed_ms": 1}}]}).replace('"elapsed_ms": 1',
                                                                     '"elapsed_ms": NaN'),
        "vcr-seq-string.json": d({"version": 1, "interactions": [
            {"request": {"method": "GET", "uri": "https://x.test/"},
             "response": {"status": {"code": 200}, "body": {"string": ""}},
             "realprobe": {"seq": "first"}}]}),
    }
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for n in "bcdefghij":
        laughs.append(f"{n}: &{n} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = n
    laughs.append("version: 1\ninteractions:\n- request: {method: GET, uri: 'https://x.test/', "
                  "headers: {h: *j}}\n  response: {status: {code: 200}, body: {string: ''}}")
    out["billion-laughs.yaml"] = "\n".join(laughs) + "\n"
    return out


def corpus(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, content in cases().items():
        p = folder / name
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        paths[name] = p
    return paths
