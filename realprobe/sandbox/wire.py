"""Writing one answer to the socket: the plan's socket behaviour (hang, drip, reset,
truncation), with the request's toxics on top (see `simulator.toxics`)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import h11

from realprobe.http.transports import DELAY_HEADER, MISSED_HEADER
from realprobe.sandbox.journal import Entry
from realprobe.simulator.render import Plan
from realprobe.simulator.toxics import (
    BandwidthToxic,
    LatencyToxic,
    LimitDataToxic,
    ResetPeerToxic,
    SlicerToxic,
    SlowCloseToxic,
    TimeoutToxic,
    Toxic,
)

HANG_LIMIT_S = 300.0
DRIP_INTERVAL_S = 1.0
#: bandwidth pacing granularity: writes of at most rate/PACE_STEPS bytes
PACE_STEPS = 50


@dataclass(slots=True)
class Active:
    """The toxics that apply to one request, resolved (toxicity and jitter drawn)."""

    names: list[str] = field(default_factory=list)
    latency_s: float = 0.0
    rate: float | None = None
    slicer: SlicerToxic | None = None
    slow_close_s: float | None = None
    limit: int | None = None
    reset_after: int | None = None
    timeout_s: float | None = None


def resolve(toxics: dict[str, Toxic], rng: random.Random) -> Active:
    out = Active()
    for name, t in sorted(toxics.items()):
        if t.toxicity < 1.0 and rng.random() >= t.toxicity:
            continue
        out.names.append(name)
        if isinstance(t, LatencyToxic):
            jitter = rng.uniform(-t.jitter_ms, t.jitter_ms) if t.jitter_ms else 0.0
            out.latency_s += max(0.0, t.latency_ms + jitter) / 1000.0
        elif isinstance(t, BandwidthToxic):
            out.rate = t.rate if out.rate is None else min(out.rate, t.rate)
        elif isinstance(t, SlicerToxic):
            out.slicer = t
        elif isinstance(t, SlowCloseToxic):
            out.slow_close_s = t.delay_ms / 1000.0
        elif isinstance(t, LimitDataToxic):
            out.limit = t.bytes if out.limit is None else min(out.limit, t.bytes)
        elif isinstance(t, ResetPeerToxic):
            out.reset_after = t.after_bytes
        elif isinstance(t, TimeoutToxic):
            out.timeout_s = t.timeout_ms / 1000.0
    return out


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN, as a crashed origin or a middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


#: request bytes a held call keeps for later (a pipelined request); a client that sends more
#: while it waits is dropped
HOLD_BUFFER = 64 * 1024


async def wait_for_close(reader: asyncio.StreamReader, limit: float,
                         conn: h11.Connection | None = None) -> bool:
    """Wait up to `limit` seconds for the client to close; True as soon as it did (its slot
    is free at once, not when the wait would have ended). What it sends meanwhile is read as
    it comes: dropped (never gathered: a client streaming for the whole wait costs no
    memory), or with `conn` handed to h11, so a pipelined request is still answered in its
    turn (past HOLD_BUFFER bytes the client is dropped, as if it had closed)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    kept = 0
    while (left := end - loop.time()) > 0:
        try:
            async with asyncio.timeout(left):
                data = await reader.read(65536)
        except TimeoutError:
            return False
        except OSError:
            return True
        if not data:
            return True
        if conn is not None:
            kept += len(data)
            try:
                conn.receive_data(data)
            except RuntimeError:  # h11 takes nothing more on this connection
                return True
            if kept > HOLD_BUFFER:
                return True
    return False


class Wire:
    """Writes response bytes under bandwidth, slicer, limit_data and reset_peer."""

    def __init__(
        self, writer: asyncio.StreamWriter, active: Active, rng: random.Random, entry: Entry
    ) -> None:
        self.writer = writer
        self.active = active
        self.rng = rng
        self.entry = entry
        self.sent = 0
        self.started: float | None = None
        cuts = [(n, "closed") for n in (active.limit,) if n is not None]
        if active.reset_after is not None:
            cuts.append((active.reset_after, "reset"))
        self.cut = min(cuts) if cuts else None

    def _pieces(self, data: bytes) -> list[bytes]:
        sizes: list[bytes] = []
        sl = self.active.slicer
        if sl is not None:
            pos = 0
            while pos < len(data):
                n = sl.average_size
                if sl.size_variation:
                    n += self.rng.randint(-sl.size_variation, sl.size_variation)
                n = max(1, n)
                sizes.append(data[pos : pos + n])
                pos += n
        else:
            sizes = [data]
        if self.active.rate is None:
            return sizes
        step = max(1, int(self.active.rate / PACE_STEPS))
        return [p[i : i + step] for p in sizes for i in range(0, len(p), step)]

    async def write(self, data: bytes) -> bool:
        """Write (part of) `data`; False once the connection has been cut."""
        cutting = False
        if self.cut is not None and self.sent + len(data) >= self.cut[0]:
            data = data[: max(0, self.cut[0] - self.sent)]
            cutting = True
        pieces = self._pieces(data) if data else []
        sl_delay = self.active.slicer.delay_ms / 1000.0 if self.active.slicer else 0.0
        for i, piece in enumerate(pieces):
            now = time.perf_counter()
            if self.started is None:
                self.started = now
                self.entry.first_byte_ms = self.entry.elapsed_ms()
            self.writer.write(piece)
            self.sent += len(piece)
            await self.writer.drain()
            if self.active.rate is not None:
                wait = self.started + self.sent / self.active.rate - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
            elif sl_delay and i < len(pieces) - 1:
                await asyncio.sleep(sl_delay)
        self.entry.wire_bytes = self.sent
        if cutting and self.cut is not None:
            self.entry.ended = self.cut[1]
            if self.cut[1] == "reset":
                reset(self.writer)
            else:
                await self.writer.drain()
                self.writer.close()
            return False
        return True


#: an answer due before the client's deadline is sent by this share of the time it had left
DEADLINE_GUARD = 0.75


def budget_of(headers: Mapping[str, str]) -> float | None:
    """The seconds a request says it has left (`X-Realprobe-Budget`), capped like a hang
    (`HANG_LIMIT_S`: a caller cannot hold a connection longer by asking), or None."""
    try:
        value = float(headers.get("x-realprobe-budget", ""))
    except (TypeError, ValueError):
        return None
    return min(value, HANG_LIMIT_S) if 0 < value < 86400 else None


def misses(plan: Plan, active: Active, delay: float, budget_s: float) -> str | None:
    """The phase a call drawn to miss a `budget_s` deadline ends in (no status line yet:
    "headers"; a body too slow: "body"), or None when its answer is drawn to come in time."""
    if plan.action == "hang" or active.timeout_s == 0 or delay >= budget_s:
        return "headers"
    if active.timeout_s is not None and active.timeout_s >= budget_s:
        return "headers"
    body = delay + (len(plan.body) * DRIP_INTERVAL_S if plan.action == "drip" else 0.0)
    if active.rate:
        body += (len(plan.body) + 200) / active.rate
    return "body" if body >= budget_s else None


async def _write_close(writer: asyncio.StreamWriter, conn: h11.Connection,
                       head: h11.Response) -> None:
    writer.write((conn.send(head) or b"") + (conn.send(h11.EndOfMessage()) or b""))
    await writer.drain()
    writer.close()


async def send(
    conn: h11.Connection,
    plan: Plan,
    active: Active,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    entry: Entry,
    rng: random.Random,
    latency_scale: float = 1.0,
    budget_s: float | None = None,
) -> bool:
    """Act out `plan` on the socket; True when the connection may serve another request.

    `budget_s` is what the client said it has left of its deadline (`X-Realprobe-Budget`):
    an answer drawn to come in time comes by `DEADLINE_GUARD` of it at the latest and says
    its drawn delay (`X-Realprobe-Delay-Ms`); a call drawn to miss (a hang, a delay or a drip
    past the budget) is held for the budget, then answered 504 with `X-Realprobe-Missed`.
    Whether a call makes its deadline is then the seed's and the request's doing, not a
    loaded machine's: the client honours both marks."""
    entry.toxics = list(active.names)
    delay = plan.delay_s * latency_scale + active.latency_s
    # a proxied answer's upstream time (real, from the live API) counts against the budget
    spent = (entry.upstream_ms or 0.0) / 1000.0
    missed = None if budget_s is None else misses(plan, active, delay + spent, budget_s)
    if budget_s is not None and missed is None:
        delay = min(delay, budget_s * DEADLINE_GUARD)
    elif budget_s is not None:
        delay = budget_s  # acted out for exactly the budget, then said plainly
    entry.delay_ms = delay * 1000.0
    # the delay counts from when the request was read: the time spent choosing and
    # rendering the answer is part of it, not added on top
    wait = delay - entry.elapsed_ms() / 1000.0
    if wait > 0 and await wait_for_close(reader, min(wait, HANG_LIMIT_S), conn):
        entry.ended = "client-closed"
        entry.total_ms = entry.elapsed_ms()
        return False
    try:
        if missed is not None:
            entry.ended = "deadline"
            await _write_close(writer, conn, h11.Response(status_code=504, headers=[
                (MISSED_HEADER, missed), ("Content-Length", "0"), ("Connection", "close")]))
            return False
        if budget_s is not None:
            plan = replace(plan, headers=[*plan.headers, (DELAY_HEADER, f"{delay * 1000:.1f}")])
        if active.timeout_s is not None or plan.action in ("hang", "reset"):
            await _no_answer(plan, active, reader, writer, entry)
            return False
        wire = Wire(writer, active, rng, entry)
        head = conn.send(h11.Response(status_code=plan.status,
                                      headers=_headers(plan, active))) or b""
        entry.status = plan.status
        if plan.action == "respond":
            # one write for the whole answer: toxics see one byte stream, and one syscall
            data = head + (conn.send(h11.Data(data=plan.body)) or b"" if plan.body else b"")
            data += conn.send(h11.EndOfMessage()) or b""
            done = await wire.write(data)
            entry.body_bytes = max(0, min(wire.sent - len(head), len(plan.body)))
            return done and await _finish(writer, reader, active, entry)
        return (await wire.write(head)
                and await _body_in_parts(conn, plan, wire, len(head), writer, entry)
                and await wire.write(conn.send(h11.EndOfMessage()) or b"")
                and await _finish(writer, reader, active, entry))
    except ConnectionError:
        entry.ended = "client-closed"
        raise
    finally:
        entry.total_ms = entry.elapsed_ms()


async def _no_answer(
    plan: Plan,
    active: Active,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    entry: Entry,
) -> None:
    """No status line goes out: a timeout toxic, a hang or a reset."""
    if active.timeout_s is not None:
        # nothing gets through; the connection closes after the timeout (0: never)
        await wait_for_close(reader, active.timeout_s or HANG_LIMIT_S)
        entry.ended = "closed" if active.timeout_s else "hang"
        writer.close()
    elif plan.action == "hang":
        await wait_for_close(reader, HANG_LIMIT_S)
        entry.ended = "hang"
    else:
        reset(writer)
        entry.ended = "reset"


def _headers(plan: Plan, active: Active) -> list[tuple[str, str]]:
    """The plan's headers with our own framing (Content-Length, Connection, Server)."""
    headers = [
        (k, v) for k, v in plan.headers if k.lower() not in ("content-length", "connection")
    ]
    headers.append(("Content-Length", str(len(plan.body))))
    if not any(k.lower() == "server" for k, _ in headers):  # a proxied answer keeps its own
        headers.append(("Server", "realprobe-sandbox"))
    if active.slow_close_s is not None:
        headers.append(("Connection", "close"))
    return headers


async def _body_in_parts(
    conn: h11.Connection,
    plan: Plan,
    wire: Wire,
    head_len: int,
    writer: asyncio.StreamWriter,
    entry: Entry,
) -> bool:
    """The body of a plan that misbehaves mid-body (cut, reset, drip) or is written after its
    head; False once the connection is over."""

    async def body(data: bytes) -> bool:
        ok = await wire.write(conn.send(h11.Data(data=data)) or b"")
        entry.body_bytes = max(0, wire.sent - head_len)
        return ok

    if plan.action in ("reset_mid_body", "truncated"):
        if await body(plan.body[: len(plan.body) // 2]):
            await writer.drain()
            if plan.action == "reset_mid_body":
                reset(writer)
                entry.ended = "reset"
            else:
                writer.close()
                entry.ended = "closed"
        return False
    if plan.action == "drip":
        for i in range(len(plan.body)):
            if not await body(plan.body[i : i + 1]):
                return False
            await asyncio.sleep(DRIP_INTERVAL_S)
        return True
    return not plan.body or await body(plan.body)


async def _finish(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, active: Active,
                  entry: Entry) -> bool:
    await writer.drain()
    if active.slow_close_s is not None:  # over as soon as the client goes
        await wait_for_close(reader, active.slow_close_s)
        writer.close()
        entry.ended = "closed"
        return False
    return True
