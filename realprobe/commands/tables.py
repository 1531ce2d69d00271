"""Every table the commands print, laid out in one place so that each reads at any width.

Without a terminal (cron, CI logs, a pipe) rich assumes 80 columns. A `FitTable` is laid out
when it is printed, at the width of the console it is printed on: names and numbers are never
cut or split across lines, headers break only between words, text columns wrap between words,
list columns ("TIMEOUT 3, SERVER_ERROR 1") between their comma-separated items.
When the columns do not fit, a `key` column (one that says which row is which: agent, model,
prompt, target) that holds one value in every row is named once above the table instead, then
the columns with the highest `drop` rank are left out and a footer names them (a `key` column
is never left out); when even the columns that are never dropped do not fit, each row is
printed as a record (`header: value` lines). `--json` remains the machine interface.

The title, the line naming hoisted columns and the caption are wrapped here too, between
words (a word wider than the terminal, such as a path, gets a line of its own, never cut),
so that no line is wider than the terminal even in a pipe. Absolute paths in name cells, the
title and the caption are shown relative to the working directory, or to the shipped data
(`<realprobe>/cassettes/tasks`), when they lie under it (`short_paths`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

Kind = Literal["name", "num", "text", "list"]

#: a text column is at least as wide as its longest word, up to this many cells (longer words,
#: such as URLs, are folded)
WORD_MAX = 24


@dataclass(frozen=True)
class Column:
    """One column: `name` and `num` cells are never wrapped nor cut; `text` cells wrap
    between words; `list` cells between their ", "-separated items, never inside one.
    `drop` 0 means always shown; otherwise columns with the highest rank are left out first
    when the table is too wide."""

    header: str
    kind: Kind = "text"
    drop: int = 0
    justify: Literal["left", "right", "center"] | None = None
    key: bool = False

    @property
    def align(self) -> Literal["left", "right", "center"]:
        return self.justify or ("right" if self.kind == "num" else "left")


def plain(cell: str) -> str:
    """A cell's text without rich markup."""
    from rich.text import Text

    return Text.from_markup(cell).plain


def _longest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines() or [""]), default=0)


def _longest_word(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(w) for w in text.split()), default=0)


@dataclass
class _Widths:
    low: int  # narrowest this column may be
    high: int  # what it needs to show everything on one line per cell line


def _widths(col: Column, cells: list[str]) -> _Widths:
    texts = [plain(c) for c in cells]
    head_word = max(_longest_line(u) for u in _units(col.header))
    high = max([_longest_line(col.header), *(_longest_line(t) for t in texts)])
    if col.kind == "text":
        low = max(head_word, min(WORD_MAX, max((_longest_word(t) for t in texts), default=0)))
    elif col.kind == "list":
        low = max([head_word, *(_longest_line(i) for t in texts for i in t.split(", "))])
    else:
        low = max([head_word, *(_longest_line(t) for t in texts)])
    return _Widths(max(low, 1), max(high, low, 1))


def _frame(n: int) -> int:
    """Columns a rich table with the default box spends on borders and padding."""
    return 3 * n + 1


@dataclass
class Layout:
    """Which columns are shown at a width, and how wide each is (None: record layout)."""

    shown: list[int]
    widths: list[int] | None
    dropped: list[str] = field(default_factory=list)
    hoisted: list[int] = field(default_factory=list)  # key columns named above the table


@dataclass
class FitTable:
    """A table laid out at print time for the console's width (see the module docstring)."""

    columns: Sequence[Column]
    rows: list[list[str]] = field(default_factory=list)
    title: str | None = None
    caption: str | None = None
    #: where a column left out to fit can be seen instead
    elsewhere: str = "in --json"

    def add_row(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(["-" if c is None else
                          short_paths(str(c)) if col.kind == "name" else str(c)
                          for c, col in zip(cells, self.columns, strict=True)])

    def column_cells(self, i: int) -> list[str]:
        return [row[i] for row in self.rows]

    def layout(self, width: int) -> Layout:
        ranges = [_widths(c, self.column_cells(i)) for i, c in enumerate(self.columns)]
        shown = list(range(len(self.columns)))

        def fits() -> bool:
            return sum(ranges[i].low for i in shown) + _frame(len(shown)) <= width

        hoisted = [] if fits() else [
            i for i, c in enumerate(self.columns)
            if c.key and self.rows and len(set(self.column_cells(i))) == 1]
        shown = [i for i in shown if i not in hoisted]
        order = sorted((i for i, c in enumerate(self.columns) if c.drop > 0 and not c.key),
                       key=lambda i: (-self.columns[i].drop, -i))
        dropped: list[str] = []
        while not fits():
            if not order:
                return Layout(shown=list(range(len(self.columns))), widths=None)
            gone = order.pop(0)
            shown.remove(gone)
            dropped.append(self.columns[gone].header.replace("\n", " "))
        widths = _spread([ranges[i] for i in shown], width - _frame(len(shown)))
        return Layout(shown=shown, widths=widths, dropped=dropped, hoisted=hoisted)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        width = options.max_width
        layout = self.layout(width)
        if layout.widths is None:
            yield from self._records(width)
            return
        title = [short_paths(self.title)] if self.title else []
        if layout.hoisted:
            title.append("every row: " + " · ".join(
                f"{self.columns[i].header.replace(chr(10), '/')} {plain(self.rows[0][i])}"
                for i in layout.hoisted))
        caption = [short_paths(self.caption)] if self.caption else []
        if layout.dropped:
            caption.append(f"left out to fit: {', '.join(layout.dropped)} "
                           f"(see them wider or {short_paths(self.elsewhere)})")
        for line in wrap("\n".join(title), width) if title else []:
            yield Text(line, style="italic", no_wrap=True, overflow="ignore")
        yield self._table(layout)
        for line in wrap("\n".join(caption), width) if caption else []:
            yield Text(line, style="dim", no_wrap=True, overflow="ignore")

    def _table(self, layout: Layout) -> Any:
        from rich.table import Table

        table = Table()
        assert layout.widths is not None
        for i, w in zip(layout.shown, layout.widths, strict=True):
            col = self.columns[i]
            # a name or number column never wraps its cells, so its header is broken between
            # words here (rich would cut it), a bracketed group kept on one line
            head = _head(col.header, w)
            table.add_column(head, justify=col.align, width=w,
                             no_wrap=col.kind != "text", overflow="fold")
        packed = {i: w for i, w in zip(layout.shown, layout.widths, strict=True)
                  if self.columns[i].kind == "list"}
        for row in self.rows:
            table.add_row(*(_pack(row[i], packed[i]) if i in packed else row[i]
                            for i in layout.shown))
        return table

    def _records(self, width: int) -> Iterator[Any]:
        from rich.text import Text

        def lines(text: str, style: str = "") -> Iterator[Any]:
            for line in wrap(text, width):
                yield Text(line, style=style, no_wrap=True, overflow="ignore")

        if self.title:
            yield from lines(short_paths(self.title), "bold")
        for row in self.rows:
            yield Text("")
            for col, cell in zip(self.columns, row, strict=True):
                head = col.header.replace("\n", " ")
                yield Text(f"{head}: {plain(cell).replace(chr(10), '; ')}")
        if self.caption:
            yield from lines(short_paths(self.caption))


def _fill(pieces: Iterable[str], width: int, sep: str = " ") -> list[str]:
    """`pieces` joined by `sep` into lines of at most `width` cells, a piece never split (one
    wider than that is a line of its own, whole)."""
    from rich.cells import cell_len

    lines = [""]
    for piece in pieces:
        if lines[-1] and cell_len(lines[-1]) + len(sep) + cell_len(piece) > width:
            lines.append(piece)
        else:
            lines[-1] = f"{lines[-1]}{sep}{piece}" if lines[-1] else piece
    return lines


def wrap(text: str, width: int) -> list[str]:
    """`text`'s lines broken between words to at most `width` cells; a word wider than that
    (a path, a URL) is a line of its own, whole."""
    return [out for line in text.split("\n") for out in _fill(line.split(" "), width)]


#: an absolute path inside a text: after a start, a space, "(" or a scheme's ":" (never the
#: second slash of a URL's "//")
_ABS_PATH = re.compile(r"(?<![\w./])/(?!/)[^\s,;()\[\]'\"`]+")


def short_path(path: str) -> str:
    """A path the user can open: relative to the working directory when under it, else
    whole."""
    from pathlib import Path

    full = Path(path)
    if full.is_absolute() and full.is_relative_to(Path.cwd()) and full != Path.cwd():
        return full.relative_to(Path.cwd()).as_posix()
    return path


def short_paths(text: str) -> str:
    """`text` with each absolute path under the working directory shown relative to it, and
    one under the shipped data (cassettes, tasks, docs) as `<realprobe>/...`; other paths
    are left whole."""
    from pathlib import Path

    from realprobe.data import data_dir

    if "/" not in text:
        return text
    cwd = Path.cwd()
    shipped = data_dir("cassettes").parent

    def shorter(m: re.Match[str]) -> str:
        path = Path(m.group(0))
        for root, shown in ((cwd, "."), (shipped, "<realprobe>")):
            if path.is_relative_to(root) and path != root:
                rel = path.relative_to(root).as_posix()
                return rel if shown == "." else f"{shown}/{rel}"
        return m.group(0)

    return _ABS_PATH.sub(shorter, text)


def _units(header: str) -> list[str]:
    """A header's unbreakable pieces: words, and a bracketed group ("(p adj)", "[95% CI]")."""
    return re.findall(r"\([^()]*\)|\[[^\[\]]*\]|\S+", header) or [""]


def _head(header: str, width: int) -> str:
    """`header` broken between its pieces (`_units`) to lines of at most `width` cells."""
    return "\n".join(out for line in header.split("\n") for out in _fill(_units(line), width))


def _pack(cell: str, width: int) -> str:
    """A list cell's items, as many to a line as fit in `width` (an item is never split)."""
    return "\n".join(_fill(cell.split(", "), width, ", "))


def _spread(ranges: list[_Widths], room: int) -> list[int]:
    """Give each column its low width, then share what is left, one cell at a time, among the
    columns that could use more."""
    widths = [r.low for r in ranges]
    spare = room - sum(widths)
    while spare > 0:
        wanting = [i for i, r in enumerate(ranges) if widths[i] < r.high][:spare]
        if not wanting:
            break
        for i in wanting:
            widths[i] += 1
        spare -= len(wanting)
    return widths


#: a group of notes this small is printed in full even without --explain
FEW = 2


@dataclass
class Notes:
    """Footnotes about many rows, grouped by what they say. By default a group of more than
    `FEW` rows is one counted line ("† 32 tools: ... (--explain lists them)"); a smaller one,
    or any with `explain`, is its line followed by one line per row. `{n}` and `{s}` in a
    group's text are its count and plural ending."""

    explain: bool = False
    groups: dict[str, list[str]] = field(default_factory=dict)

    def add(self, group: str, detail: str) -> None:
        self.groups.setdefault(group, []).append(detail)

    def lines(self) -> list[str]:
        out: list[str] = []
        for group, details in self.groups.items():
            n = len(details)
            head = group.format(n=n, s="" if n == 1 else "s")
            if self.explain or n <= FEW:
                out += [f"{head}:", *(f"  {d}" for d in details)]
            else:
                out.append(f"{head} (--explain lists {'it' if n == 1 else 'them'})")
        return out

    def print(self, console: Any) -> None:
        for line in self.lines():
            console.print(f"[dim]{escape(line)}[/dim]", highlight=False)


def pct(share: float | None, digits: int = 0) -> str:
    """A share as a percentage with `digits` decimals ("-": unknown)."""
    return "-" if share is None else f"{100 * share:.{digits}f}%"


def escape(text: str) -> str:
    """`text` with rich markup escaped (intervals such as [0.2, 0.9] stay text)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fit_table(columns: Iterable[Column], title: str | None = None,
              caption: str | None = None, elsewhere: str = "in --json") -> FitTable:
    """A new, empty table (add rows with `add_row`); `elsewhere`: where a column left out
    to fit can be seen instead."""
    return FitTable(columns=list(columns), title=title, caption=caption, elsewhere=elsewhere)


__all__ = ["Column", "FitTable", "Layout", "Notes", "escape", "fit_table", "pct", "plain",
           "short_path", "short_paths", "wrap"]
