"""What keeps the MCP server standing, built on the SDK's own options where it has them.

HTTP: DNS-rebinding protection (Host and Origin checks, the SDK's TransportSecuritySettings)
whatever address the server binds to, widened only by `--allowed-host`; an optional bearer
token (the SDK's token-verifier machinery, the token read from an environment variable); a cap
on open sessions and an idle timeout (the SDK's session manager). Stdio: each line is checked
before the SDK sees it, so a malformed line is answered with a JSON-RPC parse error (-32700)
or invalid-request error (-32600), and the server keeps reading.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage

from realprobe.errors import RealprobeError

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("0.0.0.0", "::", "")
DEFAULT_MAX_SESSIONS = 100
DEFAULT_SESSION_IDLE_S = 600.0
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
#: what the stdin reader yields for a line over its length limit
TOO_LONG = "\x00realprobe: line too long\x00"


# -- HTTP --------------------------------------------------------------------------------


def _host_form(host: str) -> str:
    host = host.strip()
    if host.count(":") > 1 and not host.startswith("["):
        return f"[{host}]"  # a bare IPv6 address
    return host


def security_settings(bind_host: str, allowed: Sequence[str] = ()) -> TransportSecuritySettings:
    """Host/Origin checks for any bind address: loopback names, the bound name when it is not a
    wildcard, and each `--allowed-host` (with or without a port). `*` turns the checks off."""
    if "*" in allowed:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = list(LOOPBACK)
    if bind_host not in WILDCARD_BINDS:
        names.append(_host_form(bind_host))
    for item in allowed:
        item = item.strip().lower()
        if not item:
            continue
        if "://" in item:
            raise RealprobeError(
                f"allowed_hosts {item!r}: give a host name, not a URL", param="allowed_hosts"
            )
        names.append(_host_form(item))
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(names):
        has_port = name.rsplit("]", 1)[-1].count(":") == 1 if name.startswith("[") else (
            ":" in name
        )
        patterns = [name] if has_port else [name, f"{name}:*"]
        hosts.extend(patterns)
        origins.extend(f"{scheme}://{p}" for p in patterns for scheme in ("http", "https"))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class StaticTokenVerifier:
    """The SDK's TokenVerifier for one shared secret (compared in constant time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode("utf-8"), self._token):
            return AccessToken(token="<bearer>", client_id="realprobe-client", scopes=[])
        return None


def token_from_env(var: str) -> str:
    """The bearer token from the environment variable `var` (never from the command line,
    where other users of the machine could read it)."""
    value = os.environ.get(var, "")
    if not value.strip():
        raise RealprobeError(
            f"auth_token_env {var}: the environment variable is unset or empty; "
            f"export {var}=<a long random token> first",
            param="auth_token_env",
        )
    if len(value) < 16:
        raise RealprobeError(
            f"auth_token_env {var}: the token is {len(value)} characters; use at least 16",
            param="auth_token_env",
        )
    from realprobe.secrets import remember

    remember(value)  # never in a log line, a row or a cassette
    return value


def auth_options(token: str | None, url: str) -> dict[str, Any]:
    """Keyword arguments for the SDK's `streamable_http_app` requiring `Bearer <token>`."""
    if token is None:
        return {}
    return {
        "token_verifier": StaticTokenVerifier(token),
        "auth": AuthSettings(issuer_url=url, resource_server_url=url),  # type: ignore[arg-type]
    }


def check_session_limits(max_sessions: int, idle_s: float) -> None:
    if max_sessions < 1:
        raise RealprobeError(
            f"max_sessions {max_sessions}: must be at least 1", param="max_sessions"
        )
    if not idle_s > 0 or idle_s == float("inf"):
        raise RealprobeError(
            f"session_idle_s {idle_s:g}: must be a positive number", param="session_idle_s"
        )


# -- stdio -------------------------------------------------------------------------------


def line_problem(line: str) -> types.JSONRPCError | bool | None:
    """None: pass the line on. False: skip it silently (blank). An error: answer it."""
    if line == TOO_LONG:
        return _error(None, PARSE_ERROR, "Parse error: line too long")
    if not line.strip():
        return False
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return _error(None, PARSE_ERROR, f"Parse error: {str(exc)[:200]}")
    try:
        types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except Exception as exc:  # pydantic's ValidationError, or anything the adapter raises
        ident = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(ident, bool) or not isinstance(ident, int | str):
            ident = None
        first = str(exc).splitlines()[0][:200]
        return _error(ident, INVALID_REQUEST, f"Invalid Request: {first}")
    return None


def _error(ident: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
    )


class CheckedLines:
    """Wraps the stdin line source: bad lines are answered through `reply` and skipped."""

    def __init__(self, inner: AsyncIterator[str]) -> None:
        self.inner = inner
        self.reply: Any = None  # the SDK's write stream, set once the transport is up

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self.inner.__anext__()
            problem = line_problem(line)
            if problem is None:
                return line
            if problem is False or self.reply is None:
                continue
            assert isinstance(problem, types.JSONRPCError)
            try:
                await self.reply.send(SessionMessage(problem))
            except Exception:  # the server is shutting down: nothing to answer to
                raise StopAsyncIteration from None


__all__ = [
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_IDLE_S",
    "CheckedLines",
    "StaticTokenVerifier",
    "auth_options",
    "check_session_limits",
    "line_problem",
    "security_settings",
    "token_from_env",
]
