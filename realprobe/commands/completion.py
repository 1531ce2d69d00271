"""Shell completion of the names a verb takes: tool names (`realprobe call advice_r<TAB>`),
task ids (`realprobe run quiz<TAB>`) and built-in profiles (`--profile ha<TAB>`).

Each is a completion callback (ctx, incomplete) -> names, attached with typer's
`autocompletion=` to the parameter where it is declared (typer turns it into click's
`shell_complete`, without the deprecation warning a direct `shell_complete=` gets); typer's
completion script (`--install-completion`) calls them. A catalogue or task folder that
cannot be read completes nothing rather than failing: the shell prints no traceback on a
TAB."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _starting(names: list[str], incomplete: str) -> list[str]:
    return sorted(n for n in names if n.startswith(incomplete))


def complete_tool(ctx: Any, incomplete: str) -> list[str]:
    """Tool names of the catalogue (with the files `--catalog` names, when given first)."""
    from realprobe.adapters.catalog import Catalog
    from realprobe.errors import RealprobeError

    extra = [Path(p) for p in (ctx.params.get("catalog") or [])]
    try:
        names = [t.name for t in Catalog.load(extra)]
    except (RealprobeError, OSError, ValueError):
        return []
    return _starting(names, incomplete)


def complete_task(ctx: Any, incomplete: str) -> list[str]:
    """Task ids of the shipped tasks (or of `--tasks-dir`, when given first)."""
    from realprobe.errors import RealprobeError
    from realprobe.tasks.model import default_tasks_dir, load_tasks

    folder = ctx.params.get("tasks_dir") or default_tasks_dir()
    try:
        names = list(load_tasks(Path(folder)))
    except (RealprobeError, OSError, ValueError):
        return []
    return _starting(names, incomplete)


def complete_profile(ctx: Any, incomplete: str) -> list[str]:
    """The built-in profiles; when none matches, nothing, so the shell completes file names
    (a profile may be a file; the completion script asks bash for its default then)."""
    from realprobe.simulator.profile import BUILTIN_PROFILES

    return _starting(list(BUILTIN_PROFILES), incomplete)


__all__ = ["complete_profile", "complete_task", "complete_tool"]
