"""The one read path: a selection of stored probe rows (`realprobe.rows(...)`) and what is
computed from it (`.stats()`, `.calibrate()`, `.drift(other)`, `.report()`).

The selection parameters are defined once (`RowFilter`) and every reader takes them: a time
window (`since`, `until`), `tools`, the row kinds (`kinds`: live, sandbox, simulate, replay,
several, or all; by default live when the window holds live rows, else the one kind present,
and an error when several other kinds are present) and `vantage` (rows probed from these
vantage points). Each result names what it summarises (`provenance`). `target=` is the old
name of `kinds=`: it still works, with a deprecation warning (once), because `target` names
where calls go everywhere else in the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

from realprobe.errors import BadArgument, RealprobeError, Unavailable, renamed_keyword
from realprobe.ranges import checked

if TYPE_CHECKING:
    from realprobe.probes.drift import Drift
    from realprobe.probes.loading import ProbeArrays
    from realprobe.probes.results import Stats, VantageStats
    from realprobe.probes.stats import StatsReport
    from realprobe.report.build import ReportData
    from realprobe.simulator.profile import Profile
    from realprobe.store import Database

Window = tuple[float | None, float | None]
TimeSpec = str | float | None
Kinds = str | Sequence[str] | None


class RowFilter(TypedDict, total=False):
    """Which stored rows a reader reads (every parameter optional)."""

    since: TimeSpec  # ISO time, an age like "7d", or epoch seconds
    until: TimeSpec
    tools: Sequence[str] | str | None  # names, or "a,b"
    kinds: Kinds  # live | sandbox | simulate | replay, several, or all
    vantage: str | Sequence[str] | None  # "a,b" or a list
    target: str | None  # the old name of `kinds` (deprecated)


def _kinds_arg(kinds: Kinds, target: str | None) -> list[str] | None:
    """The kinds asked for (None: choose from the rows; `target=` is the old name of
    `kinds=`, as `--target` is of `--kinds`); each kind checked."""
    from realprobe.probes.provenance import parse_target

    if target is not None:
        given = {"target": target} | ({} if kinds is None else {"kinds": kinds})
        kinds = renamed_keyword(given, "target", "kinds")
    if kinds is None:
        return None
    parts = kinds.split(",") if isinstance(kinds, str) else list(kinds)
    names = [str(parse_target(p)) for p in parts if str(p).strip()]
    if not names:
        raise BadArgument("kinds", "kinds: give at least one kind")
    return ["all"] if "all" in names else sorted(set(names))


def _db(db: str | Path | Database | None) -> Database:
    """The probe database to read, opened and migrated: an older schema brought up to date and
    runs left `running` by a killed process marked (a read-only file is read as it is)."""
    from realprobe.store import open_db

    opened = open_db(db, read=True)
    opened.migrate()
    return opened


def _arg(param: str, parse: Callable[[Any], Any], value: Any) -> Any:
    """`parse(value)`, its error prefixed with the parameter it came from."""
    try:
        return parse(value)
    except BadArgument:
        raise
    except RealprobeError as exc:
        raise BadArgument(param, f"{param}: {exc}") from None


def _time(param: str, value: TimeSpec) -> float | None:
    """A time by the one grammar (ISO, `20261101`, an age, epoch seconds), refused naming
    `param` (NaN, inf or 10**400 are no time)."""
    from realprobe.ranges import parse_time

    if value is None:
        return None
    try:
        return parse_time(value)
    except RealprobeError as exc:
        raise BadArgument(param, f"{param} {str(exc).removeprefix('time ')}") from None


@checked
def window(since: TimeSpec = None, until: TimeSpec = None) -> Window:
    """(start, end) in epoch seconds from ISO times, ages like "7d", or numbers."""
    a, b = _time("since", since), _time("until", until)
    if a is not None and b is not None and a >= b:
        raise BadArgument(("since", "until"), "since must be before until")
    return a, b


def window_arg(param: str, value: str | Window) -> Window:
    from realprobe.ranges import parse_window

    return _arg(param, parse_window, value) if isinstance(value, str) else value


def _tool_names(tools: Sequence[str] | str | None) -> list[str] | None:
    if tools is None:
        return None
    names = [t.strip() for t in (tools.split(",") if isinstance(tools, str) else tools)]
    names = [n for n in names if n]
    if not names:
        raise BadArgument("tools", "tools: give at least one tool name")
    return names


def period_arg(period: str | float, param: str = "period") -> float:
    """Seconds from the one duration grammar (`10m`, `90s`, plain seconds), refused in one
    line naming `param`."""
    from realprobe.ranges import parse_duration

    try:
        return parse_duration(period, param)
    except RealprobeError as exc:
        raise BadArgument(param, str(exc)) from None


def select_rows(
    db: str | Path | Database,
    kinds: Kinds,
    vantage: str | Sequence[str] | None,
    windows: Sequence[Window],
    names: list[str] | None,
) -> tuple[list[str], list[str] | None]:
    """(kinds, vantages) to read: `kinds` as given, else chosen from the rows the windows
    hold (live first; the one other kind; several other kinds: an error asking to pick)."""
    from realprobe.store import open_db

    chosen, vantages, _ = _surveyed(open_db(db), kinds, vantage, windows, names)
    return chosen, vantages


def _surveyed(
    db: Database,
    kinds: Kinds,
    vantage: str | Sequence[str] | None,
    windows: Sequence[Window],
    names: list[str] | None,
) -> tuple[list[str], list[str] | None, list[Any] | None]:
    """`select_rows`, with each window's provenance survey when it was read to choose the
    kinds (handed to the loader, which then does not read it again)."""
    from realprobe.probes.provenance import kinds_present, parse_vantages, pick_kinds, survey

    asked = _kinds_arg(kinds, None)
    vantages = parse_vantages(vantage)
    if asked is not None and asked != ["all"]:
        return asked, vantages, None
    present: dict[str, int] = {}
    surveys = []
    for a, b in windows:
        groups = survey(db, a, b, names, vantages)
        surveys.append(groups)
        for kind, n in kinds_present(groups).items():
            present[kind] = present.get(kind, 0) + n
    return pick_kinds(present, None if asked is None else "all"), vantages, surveys


def check_tools(
    db: Database,
    names: list[str] | None,
    win: Window,
    kinds: list[str] | None = None,
    vantages: list[str] | None = None,
) -> None:
    """Unknown names get the catalogue's did-you-mean; known names with no rows a window hint."""
    from realprobe.probes.loading import tool_counts

    if not names:
        return
    present = tool_counts(db, *win, kinds, vantages)
    missing = [n for n in names if n not in present]
    if not missing:
        return
    from realprobe.adapters.catalog import Catalog  # the catalogue only for a did-you-mean

    everywhere = tool_counts(db)
    cat = Catalog.load([])
    for name in missing:
        if name not in everywhere and name not in {t.name for t in cat}:
            cat.get(name)  # raises with "did you mean"
    what = f"{'+'.join(kinds)} " if kinds else ""
    raise Unavailable(f"no {what}probe rows for {', '.join(missing)} in this window")


@dataclass(frozen=True)
class Rows:
    """A selection of stored probe rows, resolved and checked (`rows(...)` makes one): the
    database, the window, the tools (None: all), the row kinds and the vantages (None: all).
    Everything a reader computes comes from here."""

    db: Database
    since: float | None
    until: float | None
    tools: list[str] | None
    kinds: list[str]
    vantages: list[str] | None
    #: the window's provenance survey, when choosing the kinds read it
    survey: list[Any] | None = field(default=None, compare=False, repr=False)

    @property
    def window(self) -> Window:
        return self.since, self.until

    def arrays(self) -> ProbeArrays:
        """The rows as numpy columns, by tool then time (`probes.loading.ProbeArrays`)."""
        from realprobe.probes.loading import load_probes

        return load_probes(self.db, self.since, self.until, self.tools, kinds=self.kinds,
                           vantages=self.vantages)

    @overload
    def stats(self, *, period: str | float = ..., by: Literal["tool"] = ...) -> Stats: ...
    @overload
    def stats(self, *, period: str | float = ..., by: Literal["vantage"]) -> VantageStats: ...
    @overload
    def stats(self, *, period: str | float = ...,
              by: Literal["tool", "vantage"] = ...) -> Stats | VantageStats: ...
    def stats(self, *, period: str | float = "1d",
              by: Literal["tool", "vantage"] = "tool") -> Stats | VantageStats:
        """Per tool: success with intervals, error mix, latency (censored fit when the
        deadline bites), bursts, variability and where the time goes (`.phases`); with
        `by="vantage"` the same once per vantage point (a `VantageStats`)."""
        from realprobe.probes.phases import phase_medians
        from realprobe.probes.provenance import vantages_present
        from realprobe.probes.results import Stats, VantageStats
        from realprobe.probes.stats import stats_from_db

        if by not in ("tool", "vantage"):
            raise BadArgument("by", f"by {by!r}: choose tool or vantage")
        period_s = period_arg(period)
        sel = (self.db, self.since, self.until, self.tools)
        if by == "vantage":
            chosen = self.vantages or sorted(vantages_present(*sel, self.kinds))
            if not chosen:
                raise Unavailable("no probe rows in this window")
            reports = {
                v: stats_from_db(*sel, period_s, kinds=self.kinds, vantages=[v])[1]
                for v in chosen
            }
            return VantageStats(target_kinds=self.kinds, vantages=reports)
        arr, rep = stats_from_db(*sel, period_s, kinds=self.kinds, vantages=self.vantages,
                                 groups=self.survey)
        return Stats(**dict(rep), phases=phase_medians(arr))

    def calibrate(self, *, name: str | None = None) -> Profile:
        """A simulator profile fitted to these rows (each tool's latency a mixture of one or
        two lognormals); the sandbox and the simulate transport read it."""
        from realprobe.probes.calibrate import calibrate as calibrate_report
        from realprobe.probes.stats import stats_from_db

        arr, rep = stats_from_db(self.db, self.since, self.until, self.tools,
                                 kinds=self.kinds, vantages=self.vantages, groups=self.survey)
        return calibrate_report(rep, name=name, db=self.db, arrays=arr)

    def drift(self, current: Rows, *, alpha: float = 0.05,
              correction: Literal["holm", "bh"] = "holm", min_success_change: float = 0.05,
              min_latency_change: float = 0.2) -> Drift:
        """Which tools changed from these rows (the baseline) to `current`: success, latency
        and error mix, corrected across tools. Both must read the same kinds."""
        from realprobe.probes.drift import Drift
        from realprobe.probes.drift import drift as drift_arrays
        from realprobe.probes.provenance import describe, empty_selection_error

        _check_drift(alpha, correction, min_success_change, min_latency_change)
        if current.kinds != self.kinds:
            raise BadArgument("kinds", f"kinds: the baseline reads {'+'.join(self.kinds)} rows "
                                       f"and the current {'+'.join(current.kinds)}; give kinds")
        arrays, provs = {}, {}
        for label, sel in (("baseline", self), ("current", current)):
            arrays[label] = sel.arrays()
            provs[label] = prov = describe(sel.db, sel.kinds, sel.since, sel.until, sel.tools,
                                           sel.vantages)
            if len(arrays[label]) == 0:
                why = empty_selection_error(prov, sel.db, sel.tools, widen=(label,))
                raise Unavailable(f"{label}: {why}", param=(label, "kinds"))
        rep = drift_arrays(
            arrays["baseline"], arrays["current"], baseline_window=self.window,
            current_window=current.window, alpha=alpha, correction=correction,
            min_success_change=min_success_change, min_latency_change=min_latency_change,
        )
        return Drift(**dict(rep), provenance=provs)

    def report(self, *, period: str | float = "1d", baseline: str | Window | None = None,
               current: str | Window | None = None, stats: StatsReport | None = None
               ) -> ReportData:
        """What a report shows, computed once: the stats, drift (by default each tool's
        earlier half of calls against its later half) and success over time. Pass `stats`
        computed for the same rows to skip computing them again."""
        from realprobe.report.build import build_report as build

        if (baseline is None) != (current is None):
            raise BadArgument(("baseline", "current"),
                              "give both baseline and current, or neither")
        period_s = period_arg(period)
        bw = None if baseline is None else window_arg("baseline", baseline)
        cw = None if current is None else window_arg("current", current)
        return build(self.db, self.since, self.until, self.tools, baseline=bw, current=cw,
                     period_s=period_s, kinds=self.kinds, vantages=self.vantages, stats=stats,
                     groups=self.survey)


def _check_drift(alpha: float, correction: str, min_success_change: float,
                 min_latency_change: float) -> None:
    if correction not in ("holm", "bh"):
        raise BadArgument("correction", f"correction {correction!r}: choose holm or bh")
    if not 0 < alpha < 1:
        raise BadArgument("alpha", "alpha must be between 0 and 1")
    for param, v in (("min_success_change", min_success_change),
                     ("min_latency_change", min_latency_change)):
        if not v >= 0:
            raise BadArgument(param, f"{param} must be >= 0 (got {v:g})")


def selections(db: str | Path | Database | None, windows: Sequence[str | Window], *,
               tools: Sequence[str] | str | None = None, kinds: Kinds = None,
               vantage: str | Sequence[str] | None = None, target: str | None = None,
               check: bool = False, params: Sequence[str] = ()) -> list[Rows]:
    """One `Rows` per window, all of the same kinds (chosen from what the windows hold
    together when not given). `params` names each window's parameter in errors."""
    asked = _kinds_arg(kinds, target)
    path, names = _db(db), _tool_names(tools)
    wins = [
        window_arg(params[i] if i < len(params) else "window", w) if isinstance(w, str) else w
        for i, w in enumerate(windows)
    ]
    chosen, vantages, surveys = _surveyed(path, asked, vantage, wins, names)
    if check:
        for w in wins:
            check_tools(path, names, w, chosen, vantages)
    return [
        Rows(path, w[0], w[1], names, chosen, vantages, surveys[i] if surveys else None)
        for i, w in enumerate(wins)
    ]


@checked
def rows(
    db: str | Path | Database | None = None,
    *,
    since: TimeSpec = None,
    until: TimeSpec = None,
    tools: Sequence[str] | str | None = None,
    kinds: Kinds = None,
    vantage: str | Sequence[str] | None = None,
    target: str | None = None,
) -> Rows:
    """The stored probe rows of a window (`since`, `until`: ISO times, ages like "7d", or
    epoch seconds), of `tools`, of row `kinds` and from `vantage`(s), checked: a name that is
    no tool gets a did-you-mean, a tool with no rows here a hint. `target` is the old name of
    `kinds` (deprecated)."""
    win = window(since, until)
    return selections(db, [win], tools=tools, kinds=kinds, vantage=vantage, target=target,
                      check=True)[0]
