"""Database operations on the history table, each a sync function over a ``Connection``.

Like ``_store``: nothing here commits, the caller owns the transaction, so an entry is
written in the same transaction as the outcome it records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from sqla_scheduler._execution import Execution
from sqla_scheduler._history_entry import HistoryEntry, HistorySetting, Outcome, keeps
from sqla_scheduler._statements import Statements
from sqla_scheduler._statements.finding import HistoryFilter
from sqla_scheduler._statements.finding import seen_task_names as finding_names
from sqla_scheduler._store._shared import count_rows
from sqla_scheduler.models import INT_MAX

__all__ = [
    "Entry",
    "count_entries",
    "dead_letter_counts",
    "get",
    "list_entries",
    "list_previews",
    "move",
    "move_undecodable",
    "outcome_counts",
    "prune",
    "record",
    "requeue",
    "seen_task_names",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """An entry to record for an execution that stays in the scheduler's table (or left it
    with nothing to keep: a success)."""

    execution: Execution
    outcome: Outcome
    finished_at: datetime
    started_at: datetime | None = None
    attempt: int = 1
    error: str | None = None

    @property
    def attempt_kept(self) -> int:
        """``attempt`` as the column holds it: a count of failures at the column's largest
        value (``models.INT_MAX``) stays there, and its next attempt is that one too."""
        return min(self.attempt, INT_MAX)

    def values(self) -> dict[str, Any]:
        e = self.execution
        return {
            "task_name": e.task_name,
            "task_instance": e.instance_id,
            "outcome": self.outcome,
            "execution_time": e.execution_time,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "picked_by": e.picked_by,
            "attempt": self.attempt_kept,
            "error": self.error,
            "task_data": None,
            "priority": e.priority,
            "payload_version": e.payload_version,
        }


def record(
    conn: Connection, statements: Statements, setting: HistorySetting, entries: Sequence[Entry]
) -> None:
    """Write the entries ``setting`` keeps, in one statement."""
    kept = [entry.values() for entry in entries if keeps(setting, entry.outcome)]
    if kept:
        conn.execute(statements.history.record, kept)


def move(conn: Connection, statements: Statements, entry: Entry) -> bool:
    """Delete the held execution of ``entry`` and record it, payload included; ``False``
    (nothing written) when its version moved (another scheduler owns it)."""
    stmts = statements.history
    e = entry.execution
    params = {
        "key_task": e.task_name,
        "key_instance": e.instance_id,
        "seen_version": e.version,
        "outcome": entry.outcome,
        "started_at": entry.started_at,
        "finished_at": entry.finished_at,
        "attempt": entry.attempt_kept,
        "error": entry.error,
    }
    return _into_history(conn, stmts.move, stmts.remove_moved, params)


def move_undecodable(
    conn: Connection,
    statements: Statements,
    task_name: Any,
    instance_id: Any,
    *,
    now: datetime,
    error: str,
) -> bool:
    """Take the row ``task_name``/``instance_id`` out of the table into history as
    ``undecodable`` if the scheduler still cannot load it; ``error`` says what is wrong and
    the row's raw values follow it. ``False`` when the row is gone or readable now."""
    stmts = statements.history
    params = {
        "key_task": task_name,
        "key_instance": instance_id,
        "finished_at": now,
        "error": error,
    }
    return _into_history(conn, stmts.move_undecodable, stmts.remove_undecodable, params)


def _into_history(
    conn: Connection, copy: Any, remove: Any | None, params: Mapping[str, Any]
) -> bool:
    """Whether ``copy`` wrote an entry: one statement that also deletes the row and
    returns the entry's id, or (with ``remove``) a copy counted by its row count, then
    the row's deletion."""
    if remove is None:
        return conn.execute(copy, params).first() is not None
    if conn.execute(copy, params).rowcount == 0:
        return False
    conn.execute(remove, params)
    return True


def list_entries(
    conn: Connection,
    statements: Statements,
    chosen: HistoryFilter,
    *,
    limit: int | None = 100,
    offset: int = 0,
) -> list[HistoryEntry]:
    """The entries ``chosen`` selects, newest first."""
    query = statements.history.listing(chosen).limit(limit).offset(offset or None)
    return [HistoryEntry.from_row(row) for row in conn.execute(query).mappings()]


def list_previews(
    conn: Connection,
    statements: Statements,
    chosen: HistoryFilter,
    *,
    limit: int,
    offset: int = 0,
    preview: int,
) -> list[tuple[HistoryEntry, str | None, str | None]]:
    """``list_entries`` without the payloads and errors: each entry (its ``data`` and
    ``error`` ``None``) with the first ``preview`` characters of its payload's JSON text
    and of its error, ordered as ``chosen`` sorts them (``History.listing``)."""
    query = statements.history.previews(chosen, limit=limit, offset=offset, preview=preview)
    return [
        (HistoryEntry.from_row(row), row["task_data_preview"], row["error_preview"])
        for row in conn.execute(query).mappings()
    ]


def outcome_counts(
    conn: Connection, statements: Statements, *, since: datetime
) -> dict[str, dict[str, int]]:
    """For each task name with entries that finished at or after ``since``: how many
    ``succeeded`` and how many ``failed``."""
    rows = conn.execute(statements.history.outcome_counts, {"since": since}).mappings()
    return {row["task_name"]: {k: v for k, v in row.items() if k != "task_name"} for row in rows}


def dead_letter_counts(conn: Connection, statements: Statements) -> dict[str, int]:
    """For each task name with dead letters (abandoned or undecodable entries, however
    old), how many."""
    rows = conn.execute(statements.history.dead_letter_counts)
    return {name: int(count) for name, count in rows}


def count_entries(conn: Connection, statements: Statements, chosen: HistoryFilter) -> int:
    """How many entries ``list_entries`` (or ``list_previews``) would list without a
    limit."""
    return count_rows(conn, statements.history.listing(chosen))


def get(conn: Connection, statements: Statements, history_id: int) -> HistoryEntry | None:
    """The entry numbered ``history_id``, or ``None``."""
    query = statements.history.listing(HistoryFilter(), history_id=history_id)
    row = conn.execute(query).mappings().one_or_none()
    return None if row is None else HistoryEntry.from_row(row)


def requeue(
    conn: Connection,
    statements: Statements,
    history_id: int,
    now: datetime,
    on_inserted: Callable[[datetime], None] | None = None,
) -> bool:
    """Schedule an abandoned or undecodable entry's execution again, due ``now``.

    ``False`` when the entry is not one of those, or an execution with its key exists.
    The entry stays: history records what happened, and the requeued execution adds its
    own entries as it runs.
    """
    result = conn.execute(statements.history.requeue, {"history_id": history_id, "now": now})
    # without RETURNING (MySQL) it is counted; no NOTIFY names it there either
    inserted, found = statements.backend.inserted(result)
    name = found[0][0] if found else None
    if not inserted:
        return False
    notify = statements.scheduling.notify
    if notify is not None and name is not None:  # wake the schedulers on commit (PostgreSQL)
        conn.execute(notify, {"channel": statements.scheduling.channel, "payload": name})
    if on_inserted is not None:
        on_inserted(now)
    return True


def seen_task_names(conn: Connection, statements: Statements, *, limit: int) -> list[str]:
    """Up to ``limit`` task names that have history entries, in order (read on the
    index of task and instance)."""
    h = statements.history.history
    return list(conn.execute(finding_names(h.c.task_name, limit)).scalars())


def prune(conn: Connection, statements: Statements, *, threshold: datetime, limit: int) -> int:
    """Delete up to ``limit`` entries that finished before ``threshold``; return how many."""
    stmts = statements.history
    return conn.execute(stmts.prune, {"threshold": threshold, "limit": limit}).rowcount
