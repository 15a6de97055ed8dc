"""Database operations on the kept results, each a sync function over a ``Connection``.

Like ``_store``: nothing here commits; a result is written in the transaction that
records the outcome it keeps, and on PostgreSQL announced on the results' channel when
that commits (``Scheduler.wait`` listens there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row

from sqla_scheduler._result import Kept, Result, ResultOutcome, decode_result, kept
from sqla_scheduler._statements import Statements
from sqla_scheduler._statements.finding import ResultFilter
from sqla_scheduler._statements.finding import seen_task_names as finding_names
from sqla_scheduler._store._shared import count_rows

__all__ = [
    "Kept",
    "Listed",
    "count_results",
    "get",
    "kept",
    "list_results",
    "prune",
    "record",
    "record_cancelled",
    "seen_task_names",
]


def record(conn: Connection, statements: Statements, kept: Sequence[Kept]) -> None:
    """Write ``kept`` in one statement, and announce each on commit (PostgreSQL)."""
    if not kept:
        return
    stmts = statements.results
    record = stmts.record if stmts.record_announced is None else stmts.record_announced
    conn.execute(record, [k.values() for k in kept])


def record_cancelled(
    conn: Connection,
    statements: Statements,
    task_name: str,
    instance_id: str,
    now: datetime,
    group_id: int | None,
) -> None:
    """Keep ``cancelled`` (at ``now``, under ``group_id``) as the result of the execution
    ``task_name``/``instance_id``, which was deleted before it ran."""
    kept = Kept(
        task_name=task_name,
        instance_id=instance_id,
        outcome="cancelled",
        finished_at=now,
        group_id=group_id,
    )
    record(conn, statements, [kept])


def get(
    conn: Connection, statements: Statements, task_name: str, instance_id: str
) -> Result | None:
    """The newest result of ``task_name``/``instance_id``; ``None`` when there is none or
    an execution with that key is scheduled (again) and has not finished."""
    stmts = statements.results
    params = {"key_task": task_name, "key_instance": instance_id}
    row = conn.execute(stmts.get, params).first()
    if row is None:
        return None
    return Result(
        task_name=row.task_name,
        instance_id=row.task_instance,
        outcome=row.outcome,
        value=decode_result(row.value),
        error=row.error,
        finished_at=row.finished_at,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Listed:
    """A kept result as a listing reads it: the start of its value's JSON text and of its
    error, not the whole of either."""

    id: int
    task_name: str
    instance_id: str
    outcome: ResultOutcome
    finished_at: datetime
    #: The first characters of the value's JSON text (``None`` when none was kept: the
    #: execution did not succeed).
    value_preview: str | None
    #: The first characters of the error text, where there is one.
    error_preview: str | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> Listed:
        """The result a row of a previews statement lists (``Results.previews``, and the
        groups' ``member_previews``)."""
        return cls(
            id=row.id,
            task_name=row.task_name,
            instance_id=row.task_instance,
            outcome=row.outcome,
            finished_at=row.finished_at,
            value_preview=row.value_preview,
            error_preview=row.error_preview,
        )


def list_results(
    conn: Connection,
    statements: Statements,
    chosen: ResultFilter,
    *,
    limit: int,
    offset: int = 0,
    value_chars: int,
    error_chars: int,
) -> list[Listed]:
    """The kept results ``chosen`` selects, newest first (or as its ``finding`` sorts
    them), each with the first ``value_chars`` characters of its value's JSON text and
    ``error_chars`` of its error."""
    query = statements.results.previews(
        chosen, limit=limit, offset=offset, value_chars=value_chars, error_chars=error_chars
    )
    return [Listed.from_row(row) for row in conn.execute(query)]


def count_results(conn: Connection, statements: Statements, chosen: ResultFilter) -> int:
    """How many kept results ``list_results`` would list without a limit."""
    return count_rows(conn, statements.results.listing(chosen))


def seen_task_names(conn: Connection, statements: Statements, *, limit: int) -> list[str]:
    """Up to ``limit`` task names that have kept results, in order (read on the index of
    task and instance)."""
    r = statements.results.results
    return list(conn.execute(finding_names(r.c.task_name, limit)).scalars())


def prune(conn: Connection, statements: Statements, *, threshold: datetime, limit: int) -> int:
    """Delete up to ``limit`` results that finished before ``threshold``; return how many."""
    stmts = statements.results
    return conn.execute(stmts.prune, {"threshold": threshold, "limit": limit}).rowcount
