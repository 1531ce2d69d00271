"""A small OpenAI-compatible chat-completions server on 127.0.0.1 that plays scripted turns.

Each script entry answers one POST /v1/chat/completions: a ready reply, or a function of the
request body (so a turn can quote what the tools really returned). Every request body is kept
in `requests` and its headers in `headers`, for assertions. When the script runs out, the
server answers HTTP 500.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
#: a reply, a function of the request body, or a raw body sent as is (one no JSON encoder
#: would write, such as one nested past the interpreter's recursion limit)
Turn = Reply | bytes | Callable[[dict[str, Any]], Reply]


def tool_calls(*calls: tuple[str, Any]) -> Reply:
    """An assistant turn with native tool calls; arguments as a dict or a raw string."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}_{name}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for i, (name, args) in enumerate(calls)
        ],
    }


def text(content: str) -> Reply:
    return {"role": "assistant", "content": content}


def http_error(status: int, message: str, **headers: str) -> Reply:
    """A scripted turn that answers with an HTTP error (e.g. 400, or 429 with Retry-After)."""
    return {"_status": status, "_headers": headers,
            "_body": {"error": {"message": message, "type": "invalid_request_error"}}}


def refusal(message: str) -> Reply:
    return {"role": "assistant", "content": None, "refusal": message}


def two_turns(body: dict[str, Any]) -> Reply:
    """A stateless responder: fetch a cat fact first, then finish (any task, any run)."""
    if not any(m["role"] == "tool" for m in body["messages"]):
        return tool_calls(("catfact_fact", {}))
    return text("TASK COMPLETE: done.")


def tool_results(body: dict[str, Any]) -> list[Any]:
    """Parsed contents of the tool messages (native) or <tool_result> blocks (text protocol)."""
    out: list[Any] = []
    for m in body["messages"]:
        content = m.get("content") or ""
        if m["role"] == "tool":
            out.append(_loads(content))
        elif m["role"] == "user" and content.startswith("<tool_result>"):
            inner = content[len("<tool_result>") :].split("</tool_result>")[0]
            out.append(_loads(inner))
    return out


def _loads(s: str) -> Any:
    try:
        return json.loads(s)
    except ValueError:
        return s


class ScriptedLLM:
    def __init__(
        self,
        script: list[Turn],
        delay_s: float = 0.0,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        keep_alive: bool = False,
    ) -> None:
        self.script = list(script)
        #: HTTP/1.1 with kept-alive connections, as a real endpoint serves (default: one
        #: connection per request)
        self.keep_alive = keep_alive
        self.peers: list[tuple[str, int]] = []  # the client address of every request
        #: answers every request from its body alone (concurrent runs share no script)
        self.responder = responder
        #: seconds every request waits before it is answered (a model's thinking time)
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []  # monotonic arrival time of every request
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _answer(self, body: dict[str, Any]) -> tuple[int, Reply | bytes, dict[str, str]]:
        with self.lock:
            self.requests.append(body)
            if self.responder is not None and not self.script:
                turn: Turn = self.responder
            elif not self.script:
                return 500, {"error": {"message": "script exhausted", "type": "server_error"}}, {}
            else:
                turn = self.script.pop(0)
        message = turn(body) if callable(turn) else turn
        if isinstance(message, bytes):
            return 200, message, {}
        if "_status" in message:
            return int(message["_status"]), message["_body"], dict(message.get("_headers", {}))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
        }, {}

    def start(self) -> str:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if owner.keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                owner.peers.append(self.client_address)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if owner.delay_s:
                    time.sleep(owner.delay_s)
                owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                owner.times.append(time.monotonic())
                extra: dict[str, str] = {}
                if not self.path.endswith("/chat/completions"):
                    status, payload = 404, {"error": {"message": "not found"}}
                else:
                    status, payload, extra = owner._answer(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k.replace("_", "-"), v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedLLM:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- scripted Reflexion models (pet_newsletter): reflect in text, beside a call, or not at all --

#: the three fetches of `pet_newsletter`, and the reflection the scripted models give
FETCHES = ("catfact_fact", "dogceo_random_image", "icanhazdadjoke_random")
REFLECTION = "I stopped after the fetches and never stored the post; next time I compose it."


def users_of(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def asks_to_reflect(body: dict[str, Any]) -> bool:
    from realprobe.tasks.agents.openai_native import REFLECT  # the openai SDK: when used

    return users_of(body)[-1] == REFLECT


def second_attempt(body: dict[str, Any]) -> bool:
    """The request opens an attempt after a reflection (its prompt carries them)."""
    from realprobe.tasks.agents.openai_native import REFLECTIONS_HEADER

    return REFLECTIONS_HEADER in users_of(body)[0]


def pet_newsletter_work(body: dict[str, Any], *, finish: bool) -> Reply:
    """Fetch the three items; then store a grounded post and finish (`finish`), or stop."""
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if not tools:
        return tool_calls(*((name, {}) for name in FETCHES))
    if not finish:
        return text("I fetched everything.")  # stops without storing the post
    if len(tools) == len(FETCHES):
        cat, dog, joke = tool_results(body)[-3:]
        post = f"Cat fact: {cat['fact']}\nDog: {dog['image_url']}\nJoke: {joke['joke']}"
        return tool_calls(("compose_post", {"text": post}))
    return text("TASK COMPLETE: the newsletter blurb is stored.")


def text_reflector(body: dict[str, Any]) -> Reply:
    if asks_to_reflect(body):
        return text(REFLECTION)
    return pet_newsletter_work(body, finish=second_attempt(body))


def reflects_beside_a_call(body: dict[str, Any]) -> Reply:
    if asks_to_reflect(body):
        return {**tool_calls(("catfact_fact", {})), "content": REFLECTION}
    return pet_newsletter_work(body, finish=second_attempt(body))


def ignores_the_request(body: dict[str, Any]) -> Reply:
    if asks_to_reflect(body):
        return tool_calls(("catfact_fact", {}))
    return pet_newsletter_work(body, finish=False)
