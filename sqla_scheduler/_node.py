"""A running scheduler as the nodes table shows it: ``Node``, with no upward imports (the
client, the CLI and the health check all build it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping

from sqla_scheduler._dialects import known_backend
from sqla_scheduler.clock import Clock, DatabaseClock, SystemClock

__all__ = ["ALIVE_INTERVALS", "Node", "database_now", "is_alive"]

ALIVE_INTERVALS = 3
#: How long a stale node's row stays (for ``nodes`` and the admin page to show that a
#: scheduler died) before maintenance forgets it; a clean stop deletes its own at once.
FORGET_AFTER = timedelta(days=1)
"""A node is alive while its last record is at most this many ``node_heartbeat_interval``s
old: one late or failed write is not a death."""


def is_alive(last_seen: datetime, now: datetime, interval: timedelta) -> bool:
    """Whether a node last seen at ``last_seen`` is alive at ``now``."""
    return now - last_seen <= interval * ALIVE_INTERVALS


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """One scheduler process, as it last recorded itself in the nodes table."""

    name: str
    """Its ``scheduler_name``, the name its picks write to ``picked_by``."""
    host: str
    """The name of the machine it runs on."""
    pid: int
    """Its process id on that machine."""
    started_at: datetime
    """When its loop started."""
    last_seen: datetime
    """When it last recorded itself, by its own clock (the database's, on PostgreSQL)."""
    concurrency: int
    """How many handlers it runs at once at most."""
    running: int
    """How many handlers it was running when it last recorded itself."""
    version: str
    """The version of sqla-scheduler it runs."""
    alive: bool
    """Whether ``last_seen`` was within three of its ``node_heartbeat_interval``s of the
    database's time when the node was listed (within three of the reader's, for a row
    that does not hold its interval). A scheduler that stopped cleanly removed its row;
    one that is listed and not alive was killed, hangs, or cannot reach the database."""
    heartbeat_interval: timedelta | None = None
    """Its ``node_heartbeat_interval``, as it recorded it; ``None`` in a row written
    before the nodes table held it (such a node is judged by the reader's interval)."""

    @classmethod
    def from_row(cls, row: RowMapping, *, now: datetime, interval: timedelta) -> Node:
        """Build from a row of the nodes table, alive or not at ``now`` by the interval
        the row holds, else by ``interval``."""
        milliseconds = row["heartbeat_interval_ms"]
        own = None if milliseconds is None else timedelta(milliseconds=milliseconds)
        return cls(
            name=row["name"],
            host=row["host"],
            pid=row["pid"],
            started_at=row["started_at"],
            last_seen=row["last_seen"],
            concurrency=row["concurrency"],
            running=row["running"],
            version=row["version"],
            alive=is_alive(row["last_seen"], now, own if own is not None else interval),
            heartbeat_interval=own,
        )

    def to_json(self) -> dict[str, Any]:
        """Every field in a JSON-ready dict, times as ISO 8601 text (what
        ``sqla-scheduler nodes --json`` prints, and the admin page's ``/api/summary``)."""
        return {
            "name": self.name,
            "alive": self.alive,
            "host": self.host,
            "pid": self.pid,
            "started_at": self.started_at.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "concurrency": self.concurrency,
            "running": self.running,
            "version": self.version,
            "heartbeat_interval_ms": (
                None
                if self.heartbeat_interval is None
                else round(self.heartbeat_interval.total_seconds() * 1000)
            ),
        }


def database_now(conn: Connection, clock: Clock | None = None) -> datetime:
    """The time to judge nodes by, read through ``conn``: the database's on PostgreSQL,
    where running schedulers write ``last_seen`` by the database's clock (``DatabaseClock``),
    and the machine's on SQLite, whose schedulers share this machine's clock.

    ``clock`` is the reader's own (a scheduler's): a ``DatabaseClock`` is measured first
    when it is due (a client whose scheduler never ran has never measured it, and would
    judge by its machine's clock); another clock is read as it is (a ``ManualClock`` in
    tests). Without one, a new ``DatabaseClock`` is measured (PostgreSQL)."""
    backend = known_backend(conn.dialect)
    shared = backend is not None and backend.shared_clock
    if clock is None:
        clock = DatabaseClock() if shared else SystemClock()
    if shared and isinstance(clock, DatabaseClock) and clock.due():
        clock.measure(conn)
    return clock.now()
