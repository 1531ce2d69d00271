"""Where a catalogue tool's `secret` inputs sit in a recorded URL (path segment or query
parameter), so a cassette recorded without that knowledge can still be scrubbed of them."""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlsplit

from realprobe.adapters.catalog import Catalog
from realprobe.adapters.spec import PLACEHOLDER_RE
from realprobe.adapters.tool import Tool
from realprobe.cassettes.cassette import Call


def _path_regex(tool: Tool) -> re.Pattern[str]:
    base = urlsplit(tool.api.base_url).path.rstrip("/")
    out, pos = [], 0
    template = base + tool.spec.path
    for m in PLACEHOLDER_RE.finditer(template):
        out.append(re.escape(template[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>[^/]+)")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("^" + "".join(out) + "/?$")


@lru_cache(maxsize=64)
def _secret_tools(catalog: Catalog) -> list[tuple[str, str, Tool, re.Pattern[str]]]:
    out = []
    for tool in catalog:
        if tool.secret_inputs:
            parts = urlsplit(tool.api.base_url)
            out.append((parts.scheme, parts.netloc.lower(), tool, _path_regex(tool)))
    return out


def secret_values_in(catalog: Catalog, call: Call) -> list[str]:
    """Values of secret inputs in a recorded call's URL, for any catalogue tool it belongs to."""
    method, uri = call.method, call.uri
    tools = _secret_tools(catalog)
    if not tools:
        return []
    try:
        parts = urlsplit(uri)
    except ValueError:
        return []
    found: list[str] = []
    query = parse_qsl(parts.query, keep_blank_values=True)
    for _scheme, netloc, tool, regex in tools:
        if parts.netloc.lower() != netloc or tool.spec.method != method.upper():
            continue
        m = regex.match(parts.path)
        if m is None:
            continue
        for name in tool.secret_inputs:
            if name in m.groupdict() and m.group(name):
                found.append(unquote(m.group(name)))
                found.append(m.group(name))
        for key, template in tool.spec.query.items():
            names = set(PLACEHOLDER_RE.findall(template)) & tool.secret_inputs
            if names:
                found.extend(v for k, v in query if k == key and v)
    return found
