"""Database operations on the nodes table, each a sync function over a ``Connection``.

Like ``_store``: nothing here commits; the caller owns the transaction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from sqla_scheduler._node import Node
from sqla_scheduler._statements import Statements

__all__ = ["Record", "forget", "get_node", "list_nodes", "record", "remove"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """What a running scheduler writes about itself each time it records itself."""

    name: str
    host: str
    pid: int
    started_at: datetime
    last_seen: datetime
    concurrency: int
    running: int
    version: str
    heartbeat_interval_ms: int


def record(conn: Connection, statements: Statements, node: Record) -> None:
    """Write ``node``'s row, inserting it or overwriting the row of its name."""
    conn.execute(statements.nodes.record, dataclasses.asdict(node))


def remove(conn: Connection, statements: Statements, *, name: str, started_at: datetime) -> bool:
    """Delete the row of ``name`` written by the scheduler that started at ``started_at``;
    return whether there was one."""
    deleted = conn.execute(statements.nodes.remove, {"name": name, "started_at": started_at})
    return deleted.rowcount > 0


def forget(conn: Connection, statements: Statements, *, threshold: datetime) -> int:
    """Delete the rows of nodes last seen before ``threshold``; return how many."""
    return conn.execute(statements.nodes.forget, {"threshold": threshold}).rowcount


def list_nodes(
    conn: Connection, statements: Statements, *, now: datetime, interval: timedelta
) -> list[Node]:
    """Every recorded node by name, alive or not at ``now`` by its own interval (by
    ``interval`` where the row does not say)."""
    rows = conn.execute(statements.nodes.listing).mappings()
    return [Node.from_row(row, now=now, interval=interval) for row in rows]


def get_node(
    conn: Connection, statements: Statements, name: str, *, now: datetime, interval: timedelta
) -> Node | None:
    """The node called ``name``, alive or not at ``now`` (as ``list_nodes`` judges), or
    ``None``."""
    row = conn.execute(statements.nodes.named, {"name": name}).mappings().one_or_none()
    return None if row is None else Node.from_row(row, now=now, interval=interval)
