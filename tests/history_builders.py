"""Monitor histories built in their real formats for the history tests and the bench: an
Upptime status repository (git commits with exact dates, through `git fast-import`), an
Uptime Kuma database (the `monitor`/`heartbeat`/`stat_daily` tables as Kuma's
`db/knex_init_db.js` and migrations make them) and a Gatus store (the tables of Gatus's
`storage/store/sql/specific_sqlite.go`)."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
from collections.abc import Iterable
from pathlib import Path

UPPTIMERC = """owner: example
repo: status
sites:
{sites}
workflowSchedule:
  uptime: "*/5 * * * *"
"""


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def record(url: str, status: str, code: int, ms: int, ts: float, start: float) -> str:
    return (f"url: {url}\nstatus: {status}\ncode: {code}\nresponseTime: {ms}\n"
            f"lastUpdated: {iso(ts)}\nstartTime: {iso(start)}\n"
            "generator: Upptime <https://github.com/upptime/upptime>\n")


def upptime_repo(path: Path, sites: dict[str, str],
                 commits: Iterable[tuple[float, str, str]],
                 messages: list[str] | None = None) -> Path:
    """A git repository at `path`: `.upptimerc.yml` naming `sites` (name -> url), then one
    commit per (time, file path, content), committed at that time (with `messages`, each
    its own subject)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "master", str(path)], check=True)
    lines: list[bytes] = []
    mark = 0

    def commit(ts: float, files: dict[str, str], message: str) -> None:
        nonlocal mark
        mark += 1
        lines.append(b"commit refs/heads/master\n")
        lines.append(f"mark :{mark}\n".encode())
        who = f"Upptime Bot <bot@example.org> {int(ts)} +0000\n"
        lines.append(f"author {who}committer {who}".encode())
        msg = message.encode()
        lines.append(f"data {len(msg)}\n".encode() + msg + b"\n")
        for name, content in files.items():
            data = content.encode()
            lines.append(f"M 100644 inline {name}\ndata {len(data)}\n".encode() + data + b"\n")
        lines.append(b"\n")

    items = list(commits)
    first = items[0][0] - 60 if items else 0.0
    rc = UPPTIMERC.format(sites="\n".join(f"  - name: {n}\n    url: {u}"
                                          for n, u in sites.items()))
    commit(first, {".upptimerc.yml": rc}, "Initial commit")
    for i, (ts, name, content) in enumerate(items):
        commit(ts, {name: content},
               messages[i] if messages else f"update {name} [skip ci] [upptime]")
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=b"".join(lines),
                   check=True)
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "-f", "master"], check=True)
    return path


def site_records(slug: str, url: str, events: list[tuple[float, str, int]]
                 ) -> list[tuple[float, str, str]]:
    """(time, path, content) commits of one site from (time, status, code) records."""
    start = events[0][0]
    return [(ts, f"history/{slug}.yml", record(url, status, code, 200 + i % 7, ts, start))
            for i, (ts, status, code) in enumerate(events)]


KUMA_SCHEMA = """
CREATE TABLE monitor (id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(150),
  active BOOLEAN NOT NULL DEFAULT 1, user_id INTEGER, interval INTEGER NOT NULL DEFAULT 20,
  url TEXT, type VARCHAR(20), weight INTEGER DEFAULT 2000, hostname VARCHAR(255), port INTEGER,
  created_date DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, keyword VARCHAR(255),
  maxretries INTEGER NOT NULL DEFAULT 0, ignore_tls BOOLEAN NOT NULL DEFAULT 0,
  upside_down BOOLEAN NOT NULL DEFAULT 0, maxredirects INTEGER NOT NULL DEFAULT 10,
  accepted_statuscodes_json TEXT NOT NULL DEFAULT '["200-299"]',
  retry_interval INTEGER NOT NULL DEFAULT 0, timeout DOUBLE NOT NULL DEFAULT 0);
CREATE TABLE heartbeat (id INTEGER PRIMARY KEY AUTOINCREMENT,
  important BOOLEAN NOT NULL DEFAULT 0,
  monitor_id INTEGER NOT NULL REFERENCES monitor(id) ON DELETE CASCADE ON UPDATE CASCADE,
  status SMALLINT NOT NULL, msg TEXT, time DATETIME NOT NULL, ping INTEGER,
  duration INTEGER NOT NULL DEFAULT 0, down_count INTEGER NOT NULL DEFAULT 0,
  end_time DATETIME NULL DEFAULT NULL, retries INTEGER NOT NULL DEFAULT 0,
  response TEXT NULL DEFAULT NULL);
CREATE INDEX monitor_time_index ON heartbeat (monitor_id, time);
CREATE TABLE stat_daily (id INTEGER PRIMARY KEY AUTOINCREMENT,
  monitor_id INTEGER NOT NULL REFERENCES monitor(id), timestamp INTEGER NOT NULL,
  ping FLOAT NOT NULL, up SMALLINT NOT NULL, down SMALLINT NOT NULL,
  ping_min FLOAT NOT NULL DEFAULT 0, ping_max FLOAT NOT NULL DEFAULT 0, extras TEXT DEFAULT NULL,
  UNIQUE (monitor_id, timestamp));
"""


def kuma_time(ts: float) -> str:
    """How Kuma stores a heartbeat's time (`R.isoDateTimeMillis(dayjs.utc())`)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def kuma_db(path: Path, monitors: list[tuple[int, str, str, int]],
            beats: Iterable[tuple[int, int, str | None, float, int | None]]) -> Path:
    """monitors: (id, name, url, interval); beats: (monitor id, status, msg, time, ping)."""
    conn = sqlite3.connect(path)
    conn.executescript(KUMA_SCHEMA)
    conn.executemany("INSERT INTO monitor (id, name, url, interval, type) "
                     "VALUES (?, ?, ?, ?, 'http')", monitors)
    conn.executemany("INSERT INTO heartbeat (monitor_id, status, msg, time, ping) "
                     "VALUES (?, ?, ?, ?, ?)",
                     ((m, s, msg, kuma_time(t), p) for m, s, msg, t, p in beats))
    conn.commit()
    conn.close()
    return path


GATUS_SCHEMA = """
CREATE TABLE endpoints (endpoint_id INTEGER PRIMARY KEY, endpoint_key TEXT UNIQUE,
  endpoint_name TEXT NOT NULL, endpoint_group TEXT NOT NULL,
  UNIQUE(endpoint_name, endpoint_group));
CREATE TABLE endpoint_events (endpoint_event_id INTEGER PRIMARY KEY,
  endpoint_id INTEGER NOT NULL REFERENCES endpoints(endpoint_id) ON DELETE CASCADE,
  event_type TEXT NOT NULL, event_timestamp TIMESTAMP NOT NULL);
CREATE TABLE endpoint_results (endpoint_result_id INTEGER PRIMARY KEY,
  endpoint_id INTEGER NOT NULL REFERENCES endpoints(endpoint_id) ON DELETE CASCADE,
  success INTEGER NOT NULL, errors TEXT NOT NULL, connected INTEGER NOT NULL,
  status INTEGER NOT NULL, dns_rcode TEXT NOT NULL, certificate_expiration INTEGER NOT NULL,
  domain_expiration INTEGER NOT NULL, hostname TEXT NOT NULL, ip TEXT NOT NULL,
  duration INTEGER NOT NULL, timestamp TIMESTAMP NOT NULL, suite_result_id INTEGER);
CREATE TABLE endpoint_result_conditions (endpoint_result_condition_id INTEGER PRIMARY KEY,
  endpoint_result_id INTEGER NOT NULL, condition TEXT NOT NULL, success INTEGER NOT NULL);
CREATE TABLE endpoint_uptimes (endpoint_uptime_id INTEGER PRIMARY KEY,
  endpoint_id INTEGER NOT NULL REFERENCES endpoints(endpoint_id) ON DELETE CASCADE,
  hour_unix_timestamp INTEGER NOT NULL, total_executions INTEGER NOT NULL,
  successful_executions INTEGER NOT NULL, total_response_time INTEGER NOT NULL,
  UNIQUE(endpoint_id, hour_unix_timestamp));
"""


def go_time(ts: float) -> str:
    """How Go's SQLite driver writes a time.Time (`2006-01-02 15:04:05.999999999-07:00`)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "000+00:00"
