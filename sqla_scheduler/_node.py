"""A running scheduler as the nodes table shows it: ``Node``, with no upward imports (the
client, the CLI and the health check all build it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping

from sqla_scheduler.clock import DatabaseClock, SystemClock

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
    """Whether ``last_seen`` was within three ``node_heartbeat_interval``s of the time the
    node was listed. A scheduler that stopped cleanly removed its row; one that is listed
    and not alive was killed, hangs, or cannot reach the database."""

    @classmethod
    def from_row(cls, row: RowMapping, *, now: datetime, interval: timedelta) -> Node:
        """Build from a row of the nodes table, alive or not at ``now``."""
        return cls(
            name=row["name"],
            host=row["host"],
            pid=row["pid"],
            started_at=row["started_at"],
            last_seen=row["last_seen"],
            concurrency=row["concurrency"],
            running=row["running"],
            version=row["version"],
            alive=is_alive(row["last_seen"], now, interval),
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
        }


def database_now(conn: Connection) -> datetime:
    """The time to judge nodes by from outside a scheduler: the database's on PostgreSQL,
    where running schedulers write ``last_seen`` by the database's clock (``DatabaseClock``),
    and the machine's on SQLite, whose schedulers share this machine's clock."""
    if conn.dialect.name != "postgresql":
        return SystemClock().now()
    clock = DatabaseClock()
    clock.measure(conn)
    return clock.now()
