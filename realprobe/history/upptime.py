"""Upptime: a status repository whose history is the git log of `history/<slug>.yml`.

Each commit that touched a site's file is one record (status up/down/degraded, HTTP code
with 0 for no answer, responseTime, lastUpdated). The uptime workflow writes only when the
status changes and the response-time workflow rewrites every file once a day, so between two
records the site is implied to have kept the earlier record's status: held as one interval
with the checks implied at the configured cadence, never as synthetic rows. A silence of more
than two days (no daily re-commit) is censored: the monitor was not running.

Git is read with the `git` command (log, ls-tree, cat-file), never the network: lazy fetches
of a partial clone are turned off. Every YAML is parsed under the input limits.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from realprobe.errors import RealprobeError
from realprobe.history.records import (
    Check,
    History,
    HistoryError,
    Interval,
    Monitor,
    duration_words,
    keep,
    monitor_time,
    whole,
)
from realprobe.limits import load_json_text, load_yaml_text

#: a silence without the daily re-commit longer than this is censored
GAP_LIMIT_S = 2 * 86400.0
#: Upptime's default schedule of the uptime workflow (`*/5 * * * *`)
DEFAULT_CADENCE_S = 300.0
#: the largest history record read (a real one is a few hundred bytes)
RECORD_MAX_BYTES = 64_000
#: the largest configuration or summary read
CONFIG_MAX_BYTES = 2_000_000
VANTAGE = "github-actions"
#: the sites Upptime's template monitors until its owner edits `.upptimerc.yml`: their few
#: records (and any other unconfigured one-record file) are residue, not the owner's history
TEMPLATE_SITES = frozenset({"google", "wikipedia", "hacker-news", "test-broken-site",
                            "i-pv6-test", "ipv6-test"})
TEMPLATE_RECORDS = 5
_RECORD_PATH = re.compile(r"^history/([^/]+)\.ya?ml$")
_CRON_STEP = re.compile(r"^\*/(\d{1,2})$")


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    # never the network: no lazy fetch of a partial clone's missing objects (git 2.44 and
    # later), and no transport allowed at all for older ones
    env = {**os.environ, "GIT_NO_LAZY_FETCH": "1", "GIT_ALLOW_PROTOCOL": "",
           "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            ["git", "-c", "safe.directory=*", "-C", str(repo), *args],
            input=data, capture_output=True, env=env, check=False,
        )
    except FileNotFoundError:
        raise HistoryError("upptime: the `git` command is not installed") from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        worst = [ln for ln in lines if not ln.startswith(("warning:", "hint:"))] or lines
        raise HistoryError(worst[0] if worst else f"git {args[0]} failed")
    return done.stdout


def _show(repo: Path, commit: str, path: str, limit: int | None = None) -> bytes | None:
    """A file as `commit` left it (None: not there); over `limit` bytes, its size alone is
    read (b"" then stands for it, and the caller refuses it by its size)."""
    try:
        if limit is not None and int(_git(repo, "cat-file", "-s", f"{commit}:{path}")) > limit:
            raise HistoryError(f"{path} is over the limit of {limit:,} bytes")
        return _git(repo, "show", f"{commit}:{path}")
    except HistoryError as exc:
        if "over the limit" in str(exc):
            raise
        return None


def _sizes(repo: Path, shas: list[str]) -> dict[str, int]:
    """{blob: size} of the blobs this clone holds. A partial clone's missing blob stops
    `--batch-check` (it is never fetched); then the sizes come from the objects it has."""
    def parse(out: bytes) -> dict[str, int]:
        found = {}
        for line in out.splitlines():
            parts = line.decode().split()
            if len(parts) == 3 and parts[1] == "blob":
                found[parts[0]] = int(parts[2])
        return found

    try:
        return parse(_git(repo, "cat-file", "--batch-check",
                          data="\n".join(shas).encode() + b"\n"))
    except HistoryError:
        wanted = set(shas)
        have = parse(_git(repo, "cat-file", "--batch-all-objects", "--batch-check"))
        return {k: v for k, v in have.items() if k in wanted}


def _blobs(repo: Path, shas: list[str], skipped: Counter[str]) -> dict[str, bytes]:
    """The content of each blob under RECORD_MAX_BYTES (sizes asked first, so a huge blob is
    never read); larger ones are skipped and counted."""
    if not shas:
        return {}
    sizes = _sizes(repo, shas)
    small = [s for s in shas if sizes.get(s, RECORD_MAX_BYTES + 1) <= RECORD_MAX_BYTES]
    big = len({s for s in shas if s in sizes} - set(small))
    missing = len({s for s in shas if s not in sizes})
    if big:
        skipped["record over 64 KB"] += big
    if missing:
        skipped["record missing from a partial clone (clone with --filter=blob:limit=100k)"
                ] += missing
    out: dict[str, bytes] = {}
    if not small:
        return out
    raw = _git(repo, "cat-file", "--batch", data="\n".join(small).encode() + b"\n")
    pos = 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        head = raw[pos:end].decode().split()
        if len(head) != 3:  # `<sha> missing`: not in this clone after all
            pos = end + 1
            continue
        sha, _kind, size = head
        start = end + 1
        out[sha] = raw[start:start + int(size)]
        pos = start + int(size) + 1
    return out


def _changes(repo: Path) -> list[tuple[str, float, str, str]]:
    """(commit, commit time, slug, blob) for every commit that wrote a history record,
    oldest first (renames are seen as a delete and an add)."""
    log = _git(repo, "log", "--reverse", "--no-renames", "--raw", "--no-abbrev",
               "--format=%x01%H %ct", "--", "history/")
    out: list[tuple[str, float, str, str]] = []
    commit, when = "", 0.0
    for line in log.decode("utf-8", "replace").splitlines():
        if line.startswith("\x01"):
            commit, _, ct = line[1:].partition(" ")
            when = float(ct)
        elif line.startswith(":"):
            meta, _, path = line.partition("\t")
            fields = meta.split()
            m = _RECORD_PATH.match(path)
            if m is not None and len(fields) >= 5 and fields[4] in ("A", "M"):
                out.append((commit, when, m.group(1), fields[3]))
    return out


def _slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _configured_cadence(repo: Path, head: str, config: dict[str, Any]) -> float:
    """The uptime workflow's schedule: `workflowSchedule.uptime` in `.upptimerc.yml`, else
    the cron of `.github/workflows/uptime.yml`, else Upptime's default of 5 minutes."""
    sched = config.get("workflowSchedule")
    cron = sched.get("uptime") if isinstance(sched, dict) else None
    if not isinstance(cron, str):
        wf = _show(repo, head, ".github/workflows/uptime.yml") or b""
        found = re.search(rb"cron:\s*[\"']?([^\"'\n]+)", wf)
        cron = found.group(1).decode() if found else None
    if isinstance(cron, str):
        fields = cron.split()
        step = _CRON_STEP.match(fields[0]) if fields else None
        if step is not None and int(step.group(1)) > 0:
            return int(step.group(1)) * 60.0
        if fields and fields[0] == "*":
            return 60.0
    return DEFAULT_CADENCE_S


def _record(doc: Any, commit: str, when: float) -> tuple[Check, str | None] | None:
    """A check and the URL it was made on, from one record; None for a record of the wrong
    shape (no known status, a code or time that is no number or time)."""
    if not isinstance(doc, dict):
        return None
    status = doc.get("status")
    if status not in ("up", "down", "degraded"):
        return None
    code = whole(doc.get("code"))
    if doc.get("code") is not None and code is None:
        return None
    rt = whole(doc.get("responseTime"))
    updated = doc.get("lastUpdated")
    ts = monitor_time(updated) if updated is not None else when
    if ts is None:
        return None
    url = doc.get("url")
    return Check(ts=ts, state=str(status), http_status=code,
                 latency_ms=float(rt) if rt is not None else None,
                 source=commit), url if isinstance(url, str) else None


class _Reader:
    def __init__(self, path: str, now: float, since: float | None, until: float | None) -> None:
        self.repo = Path(path)
        self.where = f"upptime:{path}"
        self.now, self.since, self.until = now, since, until
        self.skipped: Counter[str] = Counter()

    def fail(self, what: str) -> HistoryError:
        return HistoryError(f"{self.where}: {what}")

    def open(self) -> str:
        if not self.repo.exists():
            raise self.fail("no such folder")
        if not self.repo.is_dir():
            raise self.fail("not a folder (give the clone of the status repository)")
        try:
            _git(self.repo, "rev-parse", "--git-dir")
        except HistoryError:
            raise self.fail("not a git repository (clone the status repository first)"
                            ) from None
        try:
            return _git(self.repo, "rev-parse", "--verify", "HEAD^{commit}").decode().strip()
        except HistoryError:
            raise self.fail("the repository has no commits") from None

    def document(self, head: str, path: str, parse: Any) -> Any:
        """A file at HEAD, else as the last commit that had it left it (a repository that
        stopped using Upptime keeps its history in the log)."""
        try:
            raw = _show(self.repo, head, path, CONFIG_MAX_BYTES)
            if raw is None:
                last = _git(self.repo, "log", "-1", "--format=%H", "--diff-filter=AM", "--",
                            path).decode().strip()
                raw = _show(self.repo, last, path, CONFIG_MAX_BYTES) if last else None
        except HistoryError as exc:
            raise self.fail(str(exc)) from None
        if raw is None:
            return None
        try:
            return parse(raw, f"{self.where}: {path}", max_bytes=CONFIG_MAX_BYTES)
        except RealprobeError as exc:  # the limits' own one-line errors, named here
            raise self.fail(str(exc).removeprefix(f"{self.where}: ")) from None

    def read(self) -> History:
        head = self.open()
        config = self.document(head, ".upptimerc.yml", load_yaml_text)
        if config is not None and not isinstance(config, dict):
            raise self.fail(".upptimerc.yml is not a mapping of settings")
        changes = _changes(self.repo)
        if config is None and not changes:
            raise self.fail("not an Upptime repository (no .upptimerc.yml and no "
                            "history/<site>.yml records)")
        if not changes:
            raise self.fail("no history/<site>.yml record in the git log (has the uptime "
                            "workflow run yet?)")
        config = config or {}
        summary = self.document(head, "history/summary.json", load_json_text)
        owner, name = config.get("owner"), config.get("repo")
        label = f"{owner}/{name}" if isinstance(owner, str) and isinstance(name, str) \
            else self.repo.resolve().name
        return self.build(head, label, config, summary, changes)

    def build(self, head: str, label: str, config: dict[str, Any], summary: Any,
              changes: list[tuple[str, float, str, str]]) -> History:
        hist = History(source=f"upptime:{label}@{head}", monitor_kind="upptime",
                       skipped=self.skipped)
        sites = _sites(config, summary)
        blobs = _blobs(self.repo, sorted({c[3] for c in changes}), self.skipped)
        records: dict[str, list[tuple[Check, str | None]]] = {}
        for commit, when, slug, blob in changes:
            if blob not in blobs:
                continue
            try:
                doc = load_yaml_text(blobs[blob], f"{slug} at {commit[:10]}",
                                     max_bytes=RECORD_MAX_BYTES)
            except RealprobeError:  # an odd record is skipped and counted
                self.skipped["record not valid YAML"] += 1
                continue
            got = _record(doc, f"upptime:{label}@{commit}", when)
            if got is None:
                self.skipped["record of the wrong types"] += 1
                continue
            mine = records.setdefault(slug, [])
            if mine and got[0].ts < mine[-1][0].ts:
                self.skipped["time going backwards"] += 1
                continue
            mine.append(got)
        cadence = _configured_cadence(self.repo, head, config)
        for slug, recs in records.items():
            m = self.monitor(slug, recs, sites, label, cadence, hist)
            if m is not None:
                hist.monitors.append(m)
        _renames(hist.monitors, records)
        _real_cadence(hist.monitors, cadence)
        if not hist.monitors:
            raise self.fail(_nothing(self.skipped))
        return hist

    def monitor(self, slug: str, recs: list[tuple[Check, str | None]],
                sites: dict[str, dict[str, Any]], label: str, cadence: float,
                hist: History) -> Monitor | None:
        site = sites.get(slug)
        if sites and site is None and (len(recs) <= 1 or (
                slug in TEMPLATE_SITES and len(recs) <= TEMPLATE_RECORDS)):
            self.skipped["template residue (the template's sites, not configured)"] += len(recs)
            return None
        urls = [u for _, u in recs if u]
        m = Monitor(
            key=f"upptime:{label}#{slug}", monitor=slug, kind="upptime",
            name=str((site or {}).get("name") or slug),
            url=str((site or {}).get("url") or (urls[-1] if urls else "")) or None,
            vantage=VANTAGE, source=hist.source, gap_limit_s=GAP_LIMIT_S,
            cadence_configured_s=cadence,
        )
        if sites and site is None:
            m.notes.append("not in .upptimerc.yml: the site was removed or renamed")
        for (_a, ua), (_b, ub) in pairwise(recs):
            if ua and ub and ua != ub:
                m.notes.append(f"url changed at {_day(_b.ts)}: {ua} -> {ub}")
        m.checks = keep([c for c, _ in recs], self.skipped, self.now, self.since, self.until)
        _implied(m, cadence)
        if site is not None and site.get("published"):
            m.published = site["published"]
        return m if m.checks else None


def _day(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _sites(config: dict[str, Any], summary: Any) -> dict[str, dict[str, Any]]:
    """slug -> {name, url, published}: the configured sites (their slug as Upptime makes it),
    with the figures `history/summary.json` publishes for them."""
    out: dict[str, dict[str, Any]] = {}
    for site in config.get("sites") or []:
        if isinstance(site, dict) and isinstance(site.get("name"), str):
            slug = site.get("slug") if isinstance(site.get("slug"), str) else None
            out[slug or _slugify(site["name"])] = {"name": site["name"], "url": site.get("url")}
    for entry in summary if isinstance(summary, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("slug"), str):
            continue
        published = {k: entry[k] for k in ("uptime", "uptimeDay", "uptimeWeek", "uptimeMonth",
                                           "uptimeYear", "time", "dailyMinutesDown")
                     if k in entry}
        published["by"] = "Upptime history/summary.json (computed from GitHub issues)"
        # Upptime's own slug wins over ours ("MySQL" is its "my-sql"): matched by name
        named = [k for k, v in out.items() if v["name"] == entry.get("name")]
        slot = out.pop(named[0]) if named else out.get(entry["slug"])
        if slot is not None:
            slot["published"] = published
            out[entry["slug"]] = slot
    return out


def _implied(m: Monitor, cadence: float) -> None:
    """The time between consecutive records: the earlier record's status held, with the
    checks implied at the configured cadence; a silence over two days censored."""
    for a, b in pairwise(m.checks):
        gap = b.ts - a.ts
        if gap > GAP_LIMIT_S:
            m.censored.append(Interval(a.ts, b.ts, "censored", reason=(
                f"no daily re-commit for {duration_words(gap)}"), source=a.source))
        else:
            m.observed.append(Interval(a.ts, b.ts, "observed", state=a.state,
                                       count=int(gap // cadence), source=a.source))


def _renames(monitors: list[Monitor], records: dict[str, list[tuple[Check, str | None]]]
             ) -> None:
    """A site that stopped and another that began within two days on the same URL: a
    rename, noted on both (each keeps its own slug)."""
    ends = {m.monitor: (records[m.monitor][-1][0].ts, records[m.monitor][-1][1])
            for m in monitors}
    for m in monitors:
        first_ts, first_url = records[m.monitor][0][0].ts, records[m.monitor][0][1]
        for other, (end_ts, end_url) in ends.items():
            if other != m.monitor and first_url and first_url == end_url \
                    and 0 <= first_ts - end_ts <= GAP_LIMIT_S:
                m.notes.append(f"renamed from {other}")
                for o in monitors:
                    if o.monitor == other:
                        o.notes.append(f"renamed to {m.monitor}")


def _real_cadence(monitors: list[Monitor], configured: float) -> None:
    """The spacing the uptime workflow really had: an outage the monitor saw lasts at least
    one run, so the shortest outages across the repository (their 10th percentile, of at
    least five) bound it; else the configured schedule, said so."""
    outages: list[float] = []
    for m in monitors:
        start: float | None = None
        for c in m.checks:
            if c.state == "down" and start is None:
                start = c.ts
            elif c.state != "down" and start is not None:
                outages.append(c.ts - start)
                start = None
    outages = sorted(d for d in outages if d > 0)
    if len(outages) >= 5:
        p10 = outages[max(0, int(0.1 * len(outages)) - 1)]
        real = max(configured, p10)
        how = (f"the shortest outages seen (10th percentile of {len(outages)} outage "
               f"durations across the repository: {duration_words(p10)}); configured "
               f"{duration_words(configured)}")
    else:
        real = configured
        how = (f"the configured schedule ({duration_words(configured)}): too few outages "
               f"({len(outages)}) to measure the real spacing")
    for m in monitors:
        m.cadence_s, m.cadence_how = real, how


def _nothing(skipped: Counter[str]) -> str:
    if not skipped:
        return "no usable history record in the window"
    why = ", ".join(f"{n} {k}" for k, n in skipped.most_common())
    return f"no usable history record ({sum(skipped.values())} skipped: {why})"


def read_upptime(path: str, *, now: float, since: float | None = None,
                 until: float | None = None) -> History:
    """The history of every site of the Upptime repository at `path` (a clone, bare or not)."""
    return _Reader(path, now, since, until).read()
