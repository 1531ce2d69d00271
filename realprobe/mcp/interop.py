"""realprobe's MCP sessions in other recorders' formats, so their tools replay what realprobe
recorded (their files come the other way through `cassette import`).

- `mcp-cassette`: one JSON document, `format_version` 3, `messages` of `{seq, t_offset_ms,
  sender: client|server, kind: request|response|notification, method, msg_id, payload,
  redacted}`, with the server's name and version from the handshake;
- `mcp-recorder`: one JSON document, `version` "1.0", `metadata`, `interactions` of
  `{type: jsonrpc_request|notification, request, response, latency_ms}` (each client request
  with the server's answer to it; the server's own notifications have no place there).
"""

from __future__ import annotations

import json
from typing import Any

EXPORT_FORMATS = ("mcp-cassette", "mcp-recorder")


def _kind(msg: dict[str, Any]) -> str:
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "response"


def _server_info(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    for rec in records:
        result = rec["msg"].get("result")
        if rec["dir"] == "s2c" and isinstance(result, dict) and isinstance(
                result.get("serverInfo"), dict):
            info = result["serverInfo"]
            return {"name": str(info.get("name", "")), "version": str(info.get("version", ""))}
    return None


def to_mcp_cassette(records: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    messages = [{
        "seq": i, "t_offset_ms": round(float(rec.get("t") or 0.0) * 1000),
        "sender": "client" if rec["dir"] == "c2s" else "server", "kind": _kind(rec["msg"]),
        "method": rec["msg"].get("method"), "msg_id": rec["msg"].get("id"),
        "payload": rec["msg"], "redacted": bool(meta.get("scrubbed")),
    } for i, rec in enumerate(records)]
    return {"format_version": 3, "recorded_at": meta.get("recorded_at") or
            "1970-01-01T00:00:00+00:00", "transport": "stdio",
            "server_info": _server_info(records), "messages": messages}


def to_mcp_recorder(records: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    answers: dict[str, dict[str, Any]] = {}
    for rec in records:
        msg = rec["msg"]
        if rec["dir"] == "s2c" and "method" not in msg and "id" in msg:
            answers.setdefault(json.dumps(msg["id"]), rec)
    interactions = []
    for rec in records:
        msg = rec["msg"]
        if rec["dir"] != "c2s" or "method" not in msg:
            continue
        if "id" not in msg:
            interactions.append({"type": "notification", "request": msg, "response": None,
                                 "response_status": 202, "latency_ms": 0})
            continue
        answer = answers.pop(json.dumps(msg["id"]), None)
        waited = (float(answer.get("t") or 0.0) - float(rec.get("t") or 0.0)) if answer else 0.0
        interactions.append({"type": "jsonrpc_request", "request": msg,
                             "response": answer["msg"] if answer else None,
                             "response_status": 200, "latency_ms": max(0, round(waited * 1000))})
    info = _server_info(records)
    init = next((i["response"] for i in interactions
                 if i["request"].get("method") == "initialize" and i["response"]), None)
    version = (init or {}).get("result", {}).get("protocolVersion")
    return {"version": "1.0", "metadata": {
        "recorded_at": meta.get("recorded_at") or "", "server_url": "",
        "transport_type": "stdio", "protocol_version": version, "server_info": info},
        "interactions": interactions}


def session_document(records: list[dict[str, Any]], meta: dict[str, Any],
                     fmt: str) -> tuple[dict[str, Any], int]:
    """An MCP session's records as `fmt`'s document (EXPORT_FORMATS), with the messages it
    holds."""
    messages = [r for r in records if isinstance(r.get("msg"), dict)
                and r.get("dir") in ("c2s", "s2c")]
    doc = (to_mcp_cassette if fmt == "mcp-cassette" else to_mcp_recorder)(messages, meta)
    return doc, len(messages)
