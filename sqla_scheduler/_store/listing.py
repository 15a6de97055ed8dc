"""The clients' reads of executions: one by key, pages of them, counts."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection

from sqla_scheduler._execution import Execution
from sqla_scheduler._statements import Statements
from sqla_scheduler._statements.listing import ListingFilter

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: Rows inserted, or keys bound, in one statement: well under SQLite's 32,766 bound

Key = tuple[str, str]
T = TypeVar("T")

log = logging.getLogger("sqla_scheduler")


def get_execution(
    conn: Connection, statements: Statements, task_name: str, instance_id: str
) -> Execution | None:
    """One execution by key, or ``None``."""
    stmts = statements.scheduling
    row = (
        conn.execute(stmts.get, {"key_task": task_name, "key_instance": instance_id})
        .mappings()
        .one_or_none()
    )
    return None if row is None else Execution.from_row(row)


def list_executions(
    conn: Connection,
    statements: Statements,
    *,
    limit: int | None,
    offset: int,
    now: datetime,
    **chosen: Unpack[ListingFilter],
) -> list[Execution]:
    """Executions ``chosen`` selects, highest priority and earliest first (failing:
    latest first), as of ``now``."""
    query = statements.listing.list_executions(limit=limit, offset=offset, **chosen)
    return [Execution.from_row(row) for row in conn.execute(query, _bound(chosen, now)).mappings()]


def list_previews(
    conn: Connection,
    statements: Statements,
    *,
    limit: int | None,
    offset: int,
    now: datetime,
    preview: int,
    **chosen: Unpack[ListingFilter],
) -> list[tuple[Execution, str | None, str | None]]:
    """``list_executions`` without the payloads and errors: each execution (its ``data``
    and ``last_error`` ``None``) with the first ``preview`` characters of its payload's
    JSON text and of its last error."""
    stmts = statements.listing
    query = stmts.list_executions(limit=limit, offset=offset, preview=preview, **chosen)
    return [
        (Execution.from_row(row), row["task_data_preview"], row["last_error_preview"])
        for row in conn.execute(query, _bound(chosen, now)).mappings()
    ]


def count_executions(
    conn: Connection, statements: Statements, *, now: datetime, **chosen: Unpack[ListingFilter]
) -> int:
    """How many executions ``list_executions`` lists with the same filters."""
    query = statements.listing.count_executions(**chosen)
    return int(conn.execute(query, _bound(chosen, now)).scalar_one())


def _bound(chosen: ListingFilter, now: datetime) -> dict[str, datetime]:
    """The parameters of a query of ``chosen``: ``now``, which the due ones compare with."""
    return {"now": now} if chosen["state"] == "due" else {}


def seen_task_names(conn: Connection, statements: Statements, *, limit: int) -> list[str]:
    """Up to ``limit`` task names that have executions in ``table``, in order."""
    query = statements.listing.seen_task_names(limit)
    return list(conn.execute(query).scalars())


def state_counts(
    conn: Connection, statements: Statements, *, known_tasks: frozenset[str], now: datetime
) -> dict[str, int]:
    """How many executions are in each state (keys as in ``ExecutionState``), counted in
    one statement; executions of tasks not in ``known_tasks`` are orphaned."""
    stmts = statements.listing
    params = {"names": sorted(known_tasks), "now": now}
    return dict(conn.execute(stmts.state_counts, params).mappings().one())


def counts_by_task(
    conn: Connection, statements: Statements, *, now: datetime
) -> dict[str, dict[str, int]]:
    """For every task name that has executions, registered or not, how many are in each
    state but ``orphaned`` (see ``state_totals``): one pass over the table."""
    stmts = statements.listing
    rows = conn.execute(stmts.counts_by_task, {"now": now}).mappings()
    return {row["task_name"]: {k: v for k, v in row.items() if k != "task_name"} for row in rows}


def state_totals(
    by_task: Mapping[str, Mapping[str, int]], known_tasks: frozenset[str]
) -> dict[str, int]:
    """What ``state_counts`` counts, from ``counts_by_task``'s counts: each state summed
    over the tasks, and the executions of tasks not in ``known_tasks`` as orphaned."""
    totals = dict.fromkeys(("all", "scheduled", "due", "running", "failing"), 0)
    orphaned = 0
    for name, counts in by_task.items():
        for state in totals:
            totals[state] += counts[state]
        if name not in known_tasks:
            orphaned += counts["all"]
    return {**totals, "orphaned": orphaned}


def task_counts(
    conn: Connection, statements: Statements, *, names: Sequence[str], now: datetime
) -> dict[str, dict[str, int]]:
    """For each of the tasks ``names`` that has executions, how many are in each state."""
    if not names:
        return {}
    stmts = statements.listing
    rows = conn.execute(stmts.task_counts, {"names": list(names), "now": now}).mappings()
    return {row["task_name"]: {k: v for k, v in row.items() if k != "task_name"} for row in rows}


def recurring_executions(
    conn: Connection, statements: Statements, *, names: Sequence[str], instance_id: str
) -> dict[str, Execution]:
    """The row of each recurring task of ``names`` that has one, by task name."""
    if not names:
        return {}
    stmts = statements.listing
    rows = conn.execute(stmts.recurring, {"names": list(names), "instance": instance_id})
    return {e.task_name: e for e in map(Execution.from_row, rows.mappings())}
