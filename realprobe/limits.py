"""Bounds on input files, one home for every reader of YAML or JSON a user hands in:
cassettes (and HAR, vcrpy, Ruby VCR files) are read only up to a size cap; YAML aliases may
not expand past a node budget (a "billion laughs" file of a few hundred bytes would otherwise
expand to gigabytes once walked); and no document may nest deeper than MAX_NESTING levels
(OpenAPI descriptions use the same alias and depth limits, with their own size cap).

The cap is `REALPROBE_MAX_CASSETTE_MB` megabytes (default 100); the node budget covers the
document as if every alias were copied out (default 1,000,000 nodes).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from realprobe.errors import RealprobeError

MAX_BYTES_ENV = "REALPROBE_MAX_CASSETTE_MB"
DEFAULT_MAX_MB = 100.0
MAX_YAML_NODES = 1_000_000
MAX_NESTING = 500


class InputTooLarge(RealprobeError):
    """An input file over a limit: too many bytes, nodes after alias expansion, or levels."""


def max_bytes() -> int:
    raw = os.environ.get(MAX_BYTES_ENV)
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise RealprobeError(
                f"{MAX_BYTES_ENV}={raw!r}: expected a number of megabytes"
            ) from None
        if mb > 0:
            return int(mb * 1_000_000)
    return int(DEFAULT_MAX_MB * 1_000_000)


def read_bounded(path: Path, label: str | None = None) -> bytes:
    """The file's bytes, or InputTooLarge when it is over the cap (checked before reading)."""
    cap = max_bytes()
    where = label or str(path)
    try:
        size = path.stat().st_size
        if size > cap:
            raise InputTooLarge(_too_big(where, size, cap))
        with path.open("rb") as fh:
            data = fh.read(size + 1)
            if len(data) > size:  # it grew while read: still bounded
                data += fh.read(cap + 1 - len(data))
    except OSError as exc:
        raise RealprobeError(f"{where}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > cap:
        raise InputTooLarge(_too_big(where, len(data), cap))
    return data


def check_size(data: bytes, label: str) -> None:
    cap = max_bytes()
    if len(data) > cap:
        raise InputTooLarge(_too_big(label, len(data), cap))


def _too_big(where: str, size: int, cap: int) -> str:
    return (
        f"{where}: {size / 1e6:.1f} MB is over the {cap / 1e6:.0f} MB limit for cassette files; "
        f"split it, or raise the limit with {MAX_BYTES_ENV}=<megabytes>"
    )


# -- YAML with a node budget ------------------------------------------------------------


def expanded_size(root: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """Nodes in the document if every alias were copied out; InputTooLarge past `limit` plus
    ten times the distinct nodes, on a recursive alias, or past MAX_NESTING levels. Linear in
    the distinct nodes."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # iterative post-order walk: (node, depth, children visited?)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes[id(c)] for c in _children(node))
            if total > limit + 10 * len(sizes):  # big plain files pass; blow-ups do not
                raise InputTooLarge(
                    f"YAML aliases expand to more than {limit:,} nodes (a 'billion laughs' "
                    "file?); refusing to load it"
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise InputTooLarge("a YAML alias refers to a node that contains it (a cycle)")
        if depth > MAX_NESTING:
            raise InputTooLarge(f"YAML nested deeper than {MAX_NESTING} levels")
        on_path.add(key)
        stack.append((node, depth, True))
        for child in _children(node):
            if id(child) in on_path:
                raise InputTooLarge("a YAML alias refers to a node that contains it (a cycle)")
            if id(child) not in sizes:
                stack.append((child, depth + 1, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


@lru_cache(maxsize=8)
def bounded_loader(base: type) -> type:
    """A subclass of the safe loader `base` that checks the node budget before constructing."""

    class Bounded(base):  # type: ignore[misc,valid-type]
        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                expanded_size(node)
            return node

    Bounded.__name__ = f"Bounded{base.__name__}"
    return Bounded


def check_nesting(value: Any, where: str, limit: int = MAX_NESTING) -> None:
    """InputTooLarge when a parsed document (dicts and lists) nests deeper than `limit`:
    code that walks it recursively would otherwise end in a RecursionError. Iterative, so
    the check itself cannot overflow."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise InputTooLarge(f"{where}: nested deeper than {limit} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))


def read_json_or_toml(path: Path, label: str, param: str | None = None) -> Any:
    """A JSON or TOML file a user hands in (TOML by its `.toml` suffix), read under the size
    cap and the nesting limit; a parse failure is one error naming the file."""
    import json
    import tomllib

    text = read_bounded(path, f"{label} {path}").decode("utf-8", "replace")
    toml = path.suffix.lower() == ".toml"
    try:
        raw = tomllib.loads(text) if toml else json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RealprobeError(f"{label} {path}: not valid {'TOML' if toml else 'JSON'} ({exc})",
                             param=param) from exc
    check_nesting(raw, str(path))
    return raw
