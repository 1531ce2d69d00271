"""Bounds on input files, one home for every reader of YAML or JSON a user hands in:
cassettes (and HAR, vcrpy, Ruby VCR files) are read only up to a size cap; YAML aliases may
not expand past a node budget (a "billion laughs" file of a few hundred bytes would otherwise
expand to gigabytes once walked); and no document may nest deeper than MAX_NESTING levels
(OpenAPI descriptions use the same alias and depth limits, with their own size cap).

The cap is `REALPROBE_MAX_CASSETTE_MB` megabytes (default 100); the node budget covers the
document as if every alias were copied out (default 1,000,000 nodes).

Every other file a user hands in (catalogues, alert rules, profiles, fault plans, task files,
price files, sweep files) is read by `read_document`: a regular file (not a device, FIFO or
directory, whatever a symlink points at), not empty, not binary, at most
`REALPROBE_MAX_INPUT_MB` megabytes (default 20), nested at most MAX_NESTING levels, with at
most MAX_ENTRIES entries and, where the file holds rules, MAX_RULES of them. A refusal is one
line naming the file and the limit, before anything runs.

JSON text from outside realprobe's process that is not a file (a request or response body,
an LLM's answer or tool-call arguments, a journal line, a database cell) is parsed by
`load_json_text` (refused in one line) or `json_or_none` (None: treat it as opaque bytes),
under the same depth limit and the input cap: the json module's parser recurses once per
level, so a body nested a few thousand deep would otherwise end in a RecursionError.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from functools import lru_cache
from itertools import compress
from pathlib import Path
from typing import Any

import yaml

from realprobe.errors import RealprobeError

MAX_BYTES_ENV = "REALPROBE_MAX_CASSETTE_MB"
DEFAULT_MAX_MB = 100.0
MAX_YAML_NODES = 1_000_000
MAX_NESTING = 500
INPUT_MB_ENV = "REALPROBE_MAX_INPUT_MB"
DEFAULT_INPUT_MB = 20.0
#: list items and mapping keys in one document a user hands in
MAX_ENTRIES = 200_000
#: rules in one fault plan or alert rules file
MAX_RULES = 10_000
#: lines and commas in a YAML file a user hands in, counted before parsing: YAML parses at
#: about 10,000 entries a second, so a larger file should be JSON
MAX_YAML_ITEMS = 20_000


#: the types a parsed JSON, YAML or TOML document nests in
_CONTAINERS = (dict, list)


class InputTooLarge(RealprobeError):
    """An input file over a limit: too many bytes, nodes after alias expansion, or levels."""


def max_bytes(env: str = MAX_BYTES_ENV, default_mb: float = DEFAULT_MAX_MB) -> int:
    raw = os.environ.get(env)
    if raw:
        try:
            mb = float(raw)
        except ValueError:
            raise RealprobeError(f"{env}={raw!r}: expected a number of megabytes") from None
        if mb > 0:
            return int(mb * 1_000_000)
    return int(default_mb * 1_000_000)


def read_bounded(path: Path) -> bytes:
    """A cassette's bytes (`read_input` under the cassette cap)."""
    return read_input(path, "cassette", max_bytes(), MAX_BYTES_ENV)


def check_input(path: str | Path, what: str, *, directory: bool = False,
                missing_ok: bool = False, cap: int | None = None) -> Path:
    """`path` as a Path once it is known to be something a reader can read without
    blocking: a regular file (or a folder, with `directory`) at most `cap` bytes, whatever a
    symlink points at. With `missing_ok` a path that does not exist yet passes (a file a
    command will create). Looked at with stat alone: nothing is opened."""
    if not str(path).strip():
        raise RealprobeError(f"the {what}: expected a path, got an empty one")
    p = Path(path)
    try:
        st = p.stat()  # through symlinks; a loop or a dangling link is an OSError
    except FileNotFoundError:
        if missing_ok and not p.is_symlink():
            return p
        raise RealprobeError(f"{p}: cannot read the {what} (no such file)") from None
    except (OSError, ValueError) as exc:
        raise RealprobeError(f"{p}: cannot read the {what} ({_reason(exc)})") from None
    if directory and stat.S_ISDIR(st.st_mode):
        return p
    if not stat.S_ISREG(st.st_mode):
        want = "a folder" if directory else "a regular file"
        raise InputTooLarge(f"{p}: the {what} is {_file_type(st.st_mode)}, not {want}")
    if cap is not None and st.st_size > cap:
        raise InputTooLarge(_over(p, what, st.st_size, cap, INPUT_MB_ENV))
    return p


def read_input(path: str | Path, what: str, cap: int, env: str = INPUT_MB_ENV) -> bytes:
    """The bytes of a file a user hands in, the one way every reader opens one: opened
    without blocking (a FIFO or a device is refused, never waited on), a regular file of at
    most `cap` bytes (checked before reading and while reading), else one line naming the
    file and the limit (`env` raises it)."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError) as exc:
        raise RealprobeError(f"{p}: cannot read the {what} ({_reason(exc)})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise InputTooLarge(f"{p}: the {what} is {_file_type(st.st_mode)}, not a regular file")
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > cap:
            raise InputTooLarge(_over(p, what, st.st_size, cap, env))
        try:
            data = fh.read(cap + 1)
        except OSError as exc:
            raise RealprobeError(f"{p}: cannot read the {what} ({_reason(exc)})") from None
    if len(data) > cap:
        raise InputTooLarge(_over(p, what, len(data), cap, env))
    return data


def input_cap() -> int:
    """The size cap of a file a user hands in (`REALPROBE_MAX_INPUT_MB`)."""
    return max_bytes(INPUT_MB_ENV, DEFAULT_INPUT_MB)


def _file_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (a pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket or other special file"


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _over(p: Path, what: str, size: int, cap: int, env: str) -> str:
    return (f"{p}: the {what} is {size / 1e6:.1f} MB, over the {cap / 1e6:g} MB limit "
            f"(raise it with {env}=<megabytes>)")


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


_SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def check_nesting(
    value: Any, where: str, limit: int = MAX_NESTING, max_entries: int | None = None
) -> None:
    """InputTooLarge when a parsed document (dicts and lists) nests deeper than `limit`
    (code that walks it recursively would otherwise end in a RecursionError) or holds more
    than `max_entries` list items and mapping keys. Iterative, so the check itself cannot
    overflow. Level by level, the containers of each level picked out in C (`compress` over
    a map of type checks): a body of 50,000 small objects costs one short loop per object."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = entries = 0
    while level:
        if depth > limit:
            raise InputTooLarge(f"{where}: nested deeper than the limit of {limit} levels")
        entries += sum(map(len, level))
        if max_entries is not None and entries > max_entries:
            raise InputTooLarge(
                f"{where}: more than the limit of {max_entries:,} entries (list items "
                "and keys); split it"
            )
        below: list[Any] = []
        for node in level:
            subs = list(node.values()) if type(node) is dict else node
            below.extend(compress(subs, map(_CONTAINERS.__contains__, map(type, subs))))
        level, depth = below, depth + 1


def load_json_text(data: object, where: str, *, max_bytes: int, limit: int = MAX_NESTING,
                   max_entries: int | None = None) -> Any:
    """JSON text or bytes held somewhere other than a file (a database cell, say) under the
    input limits: at most `max_bytes`, nested at most `limit` deep, at most `max_entries`
    entries. InputTooLarge or RealprobeError naming `where` in one line, never a traceback."""
    if not isinstance(data, str | bytes):
        raise RealprobeError(f"{where}: expected JSON text, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise InputTooLarge(f"{where}: {len(data):,} bytes, over the limit of {max_bytes:,}")
    try:
        value = json.loads(data)
    except RecursionError:
        raise InputTooLarge(f"{where}: nested deeper than the limit of {limit} levels") from None
    except json.JSONDecodeError as exc:
        at = (f", it ends early at line {exc.lineno} (truncated file?)"
              if exc.pos >= len(data.rstrip()) or "Unterminated" in exc.msg
              else f" at line {exc.lineno} column {exc.colno}")
        raise RealprobeError(f"{where}: not valid JSON{at}: {exc.msg}") from None
    except ValueError as exc:  # not UTF-8, or an integer of more digits than Python converts
        raise RealprobeError(f"{where}: not valid JSON ({str(exc).split(';')[0]})") from None
    opening = (data.count("[") + data.count("{") if isinstance(data, str)
               else data.count(b"[") + data.count(b"{"))
    if max_entries is not None:
        check_nesting(value, where, limit=limit, max_entries=max_entries)
    elif opening > limit and text_depth(data) > limit + 1:  # fewer brackets cannot nest deeper
        raise InputTooLarge(f"{where}: nested deeper than the limit of {limit} levels")
    return value


#: the bytes that are neither quotes nor brackets, deleted before the depth is counted
_NOT_MARKS = bytes(c for c in range(256) if c not in b'"[]{}')
#: +1 for an opening bracket, -1 (255 as a signed byte) for a closing one, 0 for a quote
_STEPS = bytes(1 if c in b"[{" else 255 if c in b"]}" else 0 for c in range(256))


def text_depth(data: str | bytes) -> int:
    """How deep the brackets of JSON text nest (1 for `[]`, 0 for a scalar), counted over the
    text instead of walking the parsed value: a fraction of the parse where the walk cost
    three times it. Brackets between a string's quotes do not count, nor do escaped quotes.
    Exact for text that parses; for text that does not, a count good enough for a message."""
    import numpy as np  # on first use: most commands never parse a large document

    if isinstance(data, bytes) and json.detect_encoding(data) not in ("utf-8", "utf-8-sig"):
        data = data.decode(json.detect_encoding(data), "surrogatepass")  # UTF-16 or UTF-32
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")  # multi-byte sequences are all >= 0x80
    if b"\\" in data:
        # in valid JSON a backslash only starts an escape pair inside a string, and a run of
        # them pairs up from its first: drop the escaped backslashes, then the escaped quotes
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = data.translate(None, _NOT_MARKS)  # quotes and brackets, in order
    in_string = np.cumsum(np.frombuffer(marks, np.uint8) == ord('"'), dtype=np.int32) & 1
    steps = np.where(in_string, 0, np.frombuffer(marks.translate(_STEPS), np.int8))
    return int(np.cumsum(steps, dtype=np.int32).max(initial=0))


def json_or_none(data: object, max_bytes: int | None = None) -> Any:
    """The value of text that may hold JSON (a body, a model's answer, a database cell), or
    None when it is not JSON text or breaks the input limits (`load_json_text` under the
    input cap by default): for readers that then treat it as opaque."""
    try:
        return load_json_text(data, "", max_bytes=input_cap() if max_bytes is None else max_bytes)
    except RealprobeError:
        return None


def load_yaml_text(data: object, where: str, *, max_bytes: int,
                   max_entries: int | None = MAX_ENTRIES) -> Any:
    """YAML text or bytes held somewhere other than a file (a blob in a git history) under the
    input limits: at most `max_bytes`, aliases within the node budget, nested at most
    MAX_NESTING deep, at most `max_entries` entries. InputTooLarge or RealprobeError naming
    `where` in one line, never a traceback."""
    if not isinstance(data, str | bytes):
        raise RealprobeError(f"{where}: expected YAML text, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise InputTooLarge(f"{where}: {len(data):,} bytes, over the limit of {max_bytes:,}")
    try:
        value = yaml.load(data, Loader=bounded_loader(_SAFE_LOADER))  # aliases bounded
    except RecursionError:
        raise InputTooLarge(f"{where}: nested deeper than the limit of {MAX_NESTING} levels"
                            ) from None
    except InputTooLarge as exc:
        raise InputTooLarge(f"{where}: {exc}") from None
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RealprobeError(f"{where}: not valid YAML ({first})") from None
    check_nesting(value, where, max_entries=max_entries)
    return value


def read_text_input(path: str | Path, what: str, cap: int | None = None) -> str:
    """A text file a user hands in (`read_input`, at most `cap` or the input cap), as UTF-8:
    empty, binary or not UTF-8 is refused in one line."""
    p = Path(path)
    data = read_input(p, what, input_cap() if cap is None else cap)
    if not data.strip():
        raise InputTooLarge(f"{p}: the {what} is empty")
    text, bad = "", data.find(b"\0")
    if bad < 0:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            bad = exc.start
    if bad >= 0:
        raise InputTooLarge(
            f"{p}: the {what} is not UTF-8 text (binary at byte {bad}); save it as UTF-8"
        )
    return text


def read_document(path: str | Path, what: str, fmt: str | None = None) -> Any:
    """The parsed content of a file a user hands in (`what`: "fault plan", "price file",
    ...), JSON, TOML or YAML by `fmt` or the file's suffix (JSON otherwise). Refused in one
    line naming the file and the limit (see the module's docstring): never a traceback, a
    read of a huge file or a parse without end."""
    p = Path(path)
    text = read_text_input(p, what)
    kind = (fmt or p.suffix.lstrip(".") or "json").lower()
    if kind == "toml" and text.count("[[rules]]") > MAX_RULES:  # before the slow parse
        raise InputTooLarge(f"{p}: the {what} has more than the limit of {MAX_RULES:,} rules")
    if kind in ("yaml", "yml") and text.count("\n") + text.count(",") > MAX_YAML_ITEMS:
        raise InputTooLarge(
            f"{p}: the {what} is over the limit of {MAX_YAML_ITEMS:,} lines and items for "
            "YAML; write it as JSON"
        )
    try:
        if kind == "toml":
            value = tomllib.loads(text)
        elif kind in ("yaml", "yml"):
            value = yaml.load(text, Loader=bounded_loader(_SAFE_LOADER))  # aliases bounded
        else:
            value = json.loads(text)
    except RecursionError:
        raise InputTooLarge(
            f"{p}: the {what} is nested deeper than the limit of {MAX_NESTING} levels"
        ) from None
    except InputTooLarge as exc:
        raise InputTooLarge(f"{p}: the {what}: {exc}") from None
    except (ValueError, yaml.YAMLError) as exc:  # JSONDecodeError and TOMLDecodeError too
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RealprobeError(f"{p}: the {what} is not valid {kind.upper()} ({first})") from None
    rules = value.get("rules") if isinstance(value, dict) else None
    if isinstance(rules, list) and len(rules) > MAX_RULES:
        raise InputTooLarge(
            f"{p}: the {what} has {len(rules):,} rules, over the limit of {MAX_RULES:,}"
        )
    check_nesting(value, f"{p}: the {what}", max_entries=MAX_ENTRIES)
    return value
