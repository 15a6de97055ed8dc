"""Database operations of the admin page's bulk actions, sync functions over a
``Connection`` in the caller's transaction (like ``_store``): count what a filter selects
that an action can act on, lock it, and act on it in batches (``_statements.bulk``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Connection

from sqla_scheduler._dialects import notice_of_stop
from sqla_scheduler._execution import ExecutionAction
from sqla_scheduler._statements import Statements
from sqla_scheduler._statements.bulk import Bulk, bulk_for
from sqla_scheduler._store import results as result_store
from sqla_scheduler._store._shared import chunks, notify

__all__ = [
    "BATCH",
    "count",
    "count_dead_letters",
    "dead_letters",
    "delete",
    "keys",
    "requeue",
    "retry",
    "stop",
]

#: Keys (or entry ids) changed by one statement.
BATCH = 1000

Key = tuple[str, str]
Where = Sequence[ColumnElement[bool]]


def _bulk(statements: Statements) -> Bulk:
    """The bulk actions' statements for the table of ``statements`` (cached)."""
    return bulk_for(statements.table, statements.backend)


def count(conn: Connection, statements: Statements, action: ExecutionAction, where: Where) -> int:
    """How many executions ``where`` selects that ``action`` can act on."""
    return int(conn.execute(_bulk(statements).count(action, where)).scalar_one())


def keys(
    conn: Connection, statements: Statements, action: ExecutionAction, where: Where, *, limit: int
) -> list[Key]:
    """The keys of up to ``limit`` executions that ``where`` selects and ``action`` can
    act on, locked until the transaction ends (nothing else changes them meanwhile)."""
    rows = conn.execute(_bulk(statements).keys(action, where, limit))
    return [(name, instance) for name, instance in rows]


def _batches(found: Sequence[Key]) -> list[tuple[str, list[str]]]:
    """``found`` as batches of one task's instances, at most ``BATCH`` each."""
    by_task: dict[str, list[str]] = defaultdict(list)
    for name, instance in found:
        by_task[name].append(instance)
    return [
        (name, list(chunk))
        for name, instances in sorted(by_task.items())
        for chunk in chunks(instances, BATCH)
    ]


def retry(
    conn: Connection,
    statements: Statements,
    found: Sequence[Key],
    now: datetime,
    on_moved: Callable[[datetime], None] | None = None,
) -> int:
    """Make the failing executions ``found`` due ``now``, a version further on, as the
    page's retry does each (running ones and waiting callbacks stay as they are); notify
    the schedulers of each task on commit (PostgreSQL) and call ``on_moved`` with ``now``.
    How many were moved."""
    bulk = _bulk(statements)
    moved = 0
    names: set[str] = set()
    for name, instances in _batches(found):
        params = {"batch_task": name, "batch_instances": instances, "now": now}
        changed = conn.execute(bulk.retry, params).rowcount
        if changed:
            moved += changed
            names.add(name)
    _announce(conn, statements, names, now, on_moved if moved else None)
    return moved


def delete(
    conn: Connection,
    statements: Statements,
    found: Sequence[Key],
    now: datetime,
    keeping: frozenset[str],
) -> int:
    """Delete the executions ``found`` that no scheduler runs and that are in no group, as
    the page's delete does each: those of the tasks ``keeping`` results keep the result
    ``cancelled`` at ``now``, so that a waiter on one is answered at once. How many were
    deleted."""
    bulk = _bulk(statements)
    deleted = 0
    kept: list[result_store.Kept] = []
    for name, instances in _batches(found):
        params = {"batch_task": name, "batch_instances": instances}
        deleted += conn.execute(bulk.delete, params).rowcount
        if name in keeping:  # locked when found: each of them was deleted
            kept += [
                result_store.Kept(
                    task_name=name, instance_id=instance, outcome="cancelled", finished_at=now
                )
                for instance in instances
            ]
    if kept:
        result_store.record(conn, statements, kept)
    return deleted


def stop(
    conn: Connection,
    statements: Statements,
    found: Sequence[Key],
    now: datetime,
    on_stop: Callable[[str, str], None] | None = None,
) -> int:
    """Ask the processes running the executions ``found`` to stop them, as the page's
    cancel does each (``_store.scheduling.request_stop``): their stop request is ``now``,
    each is announced on commit (NOTIFY, PostgreSQL) and told to ``on_stop`` (this
    process's own loop). How many were asked."""
    bulk = _bulk(statements)
    asked = 0
    for name, instances in _batches(found):
        params = {"batch_task": name, "batch_instances": instances, "now": now}
        asked += conn.execute(bulk.stop, params).rowcount
    scheduling = statements.scheduling
    if scheduling.notify is not None and found:  # locked when found: each was asked
        notices = [notice_of_stop(name, instance) for name, instance in found]
        conn.execute(
            scheduling.notify,
            [{"channel": scheduling.channel, "payload": notice} for notice in notices],
        )
    if on_stop is not None:
        for name, instance in found:
            on_stop(name, instance)
    return asked


def count_dead_letters(conn: Connection, statements: Statements, where: Where) -> int:
    """How many entries ``where`` selects that a requeue would schedule again."""
    return int(conn.execute(_bulk(statements).count_dead_letters(where)).scalar_one())


def dead_letters(
    conn: Connection, statements: Statements, where: Where, *, limit: int
) -> list[int]:
    """The ids of up to ``limit`` entries ``where`` selects that a requeue would schedule
    again: the newest dead letter of each key that has no execution in the table."""
    return list(conn.execute(_bulk(statements).dead_letters(where, limit)).scalars())


def requeue(
    conn: Connection,
    statements: Statements,
    ids: Sequence[int],
    now: datetime,
    on_inserted: Callable[[datetime], None] | None = None,
) -> int:
    """Schedule the dead letters ``ids`` again, due ``now``, each unless an execution with
    its key exists, as ``Scheduler.requeue`` does one; notify the schedulers of each task
    on commit (PostgreSQL) and call ``on_inserted`` with ``now``. How many were
    scheduled."""
    backend = statements.backend
    bulk = _bulk(statements)
    inserted = 0
    names: set[str] = set()
    for chunk in chunks(ids, BATCH):
        result = conn.execute(bulk.requeue, {"ids": list(chunk), "now": now})
        # without RETURNING (MySQL) they are counted; no NOTIFY names them there either
        count, found = backend.inserted(result)
        inserted += count
        names.update(name for (name,) in found)
    _announce(conn, statements, names, now, on_inserted if inserted else None)
    return inserted


def _announce(
    conn: Connection,
    statements: Statements,
    names: set[str],
    now: datetime,
    on_due: Callable[[datetime], None] | None,
) -> None:
    """Tell the schedulers of each task ``names`` that work of theirs is due (a NOTIFY
    each on commit, PostgreSQL), and call ``on_due`` with ``now`` (this process's own)."""
    notify(conn, statements.scheduling, names)
    if on_due is not None:
        on_due(now)
