"""The overview's failing section and dead-letter counts are read through their partial
indexes (migration step 16) on the databases that have partial indexes: each statement
the overview runs on them is explained by the database itself, with the parameters it
ran with. On PostgreSQL sequential scans are turned off for the question, as a table of
a few rows would be read whole anyway; what is asked is whether the index applies (its
``WHERE`` implied by the statement's), which a bound ``0`` or bound outcomes would stop
SQLite from seeing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection, event

from sqla_scheduler import ManualClock, Scheduler
from sqla_scheduler.admin import create_app
from tests.support import NOW, Harness
from tests.support.admin import PASSWORD, TASKS, USER, client_for, seed, seed_history

pytestmark = pytest.mark.anyio

#: Each index and pieces of the statement it is for (the failing section's, not the
#: counts' pass over the table, which counts the failing rows among the rest).
INDEXES = {
    "ix_scheduled_tasks_failing": (
        "scheduled_tasks.consecutive_failures > 0",
        "ORDER BY scheduled_tasks.last_failure DESC",
    ),
    "ix_scheduled_tasks_history_dead_letters": ("outcome IN ('abandoned', 'undecodable')",),
}


def _plan(conn: Connection, statement: str, parameters: Any) -> str:
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
        return "\n".join(str(row[-1]) for row in rows)
    conn.exec_driver_sql("SET enable_seqscan = off")
    rows = conn.exec_driver_sql("EXPLAIN " + statement, parameters)
    return "\n".join(row[0] for row in rows)


async def test_the_overview_reads_through_its_partial_indexes(db: Harness) -> None:
    if db.is_mariadb or db.is_async:
        pytest.skip("MariaDB has no partial indexes; the plan is the database's, not the driver's")
    seed(db.sync_engine)
    seed_history(db.sync_engine)
    ran: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        ran.append((statement, parameters))

    scheduler = Scheduler(db.engine, TASKS, clock=ManualClock(NOW))
    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        async with client_for(create_app(scheduler, username=USER, password=PASSWORD)) as client:
            assert (await client.get("/api/summary")).status_code == 200
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)

    for index, pieces in INDEXES.items():
        found = [(s, p) for s, p in ran if all(piece in s for piece in pieces)]
        assert found, f"no statement of the overview has {pieces}"
        for statement, parameters in found:
            with db.sync_engine.connect() as conn:
                plan = _plan(conn, statement, parameters)
            assert index in plan, f"{statement}\n{plan}"
