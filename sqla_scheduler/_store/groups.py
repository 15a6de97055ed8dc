"""Database operations on groups and chains, each a sync function over a ``Connection``.

Like ``_store``: nothing here commits; the caller's transaction holds a group's members,
its callback and its row together, and a member's finish together with its outcome.

A group is a row of ``<table>_groups`` counting its members down. Its callback is in the
scheduler's table from the start, ``awaiting`` the group at ``WAITING``, a time no pick
reaches (so the picks need no condition for it); the transaction that counts the last
member down moves it to now. The count is one row that every finishing member's
transaction updates, so they queue on its lock and exactly one of them sees it reach 0,
with no scan of the members however many they are. A chain is a group of one whose
callback is itself the member of the next link's group.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy import Connection, delete

from sqla_scheduler._dialects import notice_of_later
from sqla_scheduler._execution import WAITING, GroupPlan, TaskInstance, instance_values
from sqla_scheduler._result import Result, decode_result
from sqla_scheduler._statements import Statements
from sqla_scheduler._store import results as result_store
from sqla_scheduler.groups import Group

__all__ = [
    "cancel",
    "cancel_chain",
    "count_groups",
    "finished",
    "forget_member",
    "get",
    "is_chain",
    "list_groups",
    "list_members",
    "locked",
    "prune",
    "schedule",
]


def _new_id() -> int:
    """A group's id: random, so that it is known before anything is written (no RETURNING
    needed on MySQL), positive and within a BIGINT."""
    return secrets.randbits(62) + 1


def schedule(
    conn: Connection,
    statements: Statements,
    plan: GroupPlan,
    now: datetime,
    trace_context: Mapping[str, str] | None = None,
    on_inserted: Callable[[datetime], None] | None = None,
) -> Group | None:
    """Schedule ``plan`` in the caller's transaction; return its first group (the one
    of its members), or ``None``, leaving the transaction as it was, when a callback's
    key is taken (or, ``plan.whole``, a member's): by a group's callback (looked up
    first), or by an execution (found as the insert skips it, and what was inserted
    before is deleted again)."""
    stmts = statements
    for callback in [*plan.then, *(plan.members if plan.whole else ())]:
        key = {"key_task": callback.task_name, "key_instance": callback.instance_id}
        if conn.execute(stmts.groups.exists, key).first() is not None:
            return None
    ids = [_new_id() for _ in plan.then] or [_new_id()]
    members = [{**instance_values(m, now, trace_context), "group_id": ids[0]} for m in plan.members]
    total = _insert(conn, stmts, members, now, on_inserted) if members else 0
    if plan.whole and total < len(members):
        _undo(conn, statements, ids)  # a member's key is taken: nothing stays written
        return None
    links = [
        {
            **instance_values(callback, now, trace_context),
            "execution_time": WAITING,
            "awaits": ids[k],
            "group_id": ids[k + 1] if k + 1 < len(ids) else None,
        }
        for k, callback in enumerate(plan.then)
    ]
    if links and _insert(conn, stmts, links, now, on_inserted) != len(links):
        _undo(conn, statements, ids)  # an execution has a callback's key: nothing stays written
        return None
    callbacks: list[TaskInstance[Any] | None] = [*plan.then] or [None]
    groups = [
        Group(
            id=group_id,
            task_name=None if callback is None else callback.task_name,
            instance_id=None if callback is None else callback.instance_id,
            total=total if k == 0 else 1,  # each later link waits for the one before
            remaining=total if k == 0 else 1,
            created_at=now,
            finished_at=now if k == 0 and total == 0 else None,
            chain=k > 0 or plan.whole,
        )
        for k, (group_id, callback) in enumerate(zip(ids, callbacks, strict=True))
    ]
    conn.execute(stmts.groups.create, [_group_values(group) for group in groups])
    first = groups[0]
    if first.finished and first.task_name is not None and first.instance_id is not None:
        _release(conn, stmts, first.id, first.task_name, first.instance_id, now)
        if on_inserted is not None:
            on_inserted(now)
    return first


def _undo(conn: Connection, statements: Statements, ids: list[int]) -> None:
    """Delete what ``schedule`` inserted before it found a key taken: the members of its
    first group and the links awaiting its groups, known by its fresh ids (no row
    scheduled before carries them). The caller's transaction is then as it was."""
    table = statements.table
    conn.execute(delete(table).where(table.c.group_id == ids[0], table.c.awaits.is_(None)))
    conn.execute(delete(table).where(table.c.awaits.in_(ids)))


def _group_values(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "task_name": group.task_name,
        "task_instance": group.instance_id,
        "total": group.total,
        "remaining": group.remaining,
        "created_at": group.created_at,
        "finished_at": group.finished_at,
        "chain": group.chain,
    }


def _insert(
    conn: Connection,
    stmts: Statements,
    rows: list[dict[str, Any]],
    now: datetime,
    on_inserted: Callable[[datetime], None] | None,
) -> int:
    """Insert ``rows`` that do not exist yet; return how many were. Those due by a time
    before ``WAITING`` wake the schedulers: NOTIFY on PostgreSQL, ``on_inserted``."""
    scheduling = stmts.scheduling
    result = conn.execute(scheduling.insert, rows)
    asked = [(row["task_name"], row["execution_time"]) for row in rows]
    inserted, found = scheduling.backend.inserted(result, asked)
    due: dict[str, datetime] = {}
    for name, at in found:
        if at < WAITING:
            due[name] = min(at, due.get(name, at))
    if due:
        _notify(conn, stmts, due, now)
        if on_inserted is not None:
            on_inserted(min(due.values()))
    return inserted


def _notify(
    conn: Connection, stmts: Statements, due: Mapping[str, datetime], now: datetime
) -> None:
    """NOTIFY the schedulers of work of each task in ``due`` at its time (PostgreSQL)."""
    notify = stmts.scheduling.notify
    if notify is None:
        return
    for name, at in sorted(due.items()):
        payload = name if at <= now else notice_of_later(name, at)
        conn.execute(notify, {"channel": stmts.scheduling.channel, "payload": payload})


def _release(
    conn: Connection,
    stmts: Statements,
    group_id: int,
    task_name: str,
    instance_id: str,
    now: datetime,
) -> bool:
    """Make the callback ``task_name``/``instance_id`` of ``group_id`` due ``now``;
    whether it was there, waiting."""
    params = {
        "key_task": task_name,
        "key_instance": instance_id,
        "awaited": group_id,
        "waiting": WAITING,
        "now": now,
    }
    released = conn.execute(stmts.groups.release, params).rowcount == 1
    if released:
        _notify(conn, stmts, {task_name: now}, now)
    return released


def finished(
    conn: Connection, statements: Statements, counts: Mapping[int, int], now: datetime
) -> bool:
    """Count down each group in ``counts`` by its number of members that finished in the
    caller's transaction; the group that reaches 0 makes its callback due ``now``.
    Groups are counted in order of id, so that transactions finishing members of the
    same groups lock them in one order. Whether a callback was made due."""
    stmts = statements
    released = False
    for group_id, count in sorted(counts.items()):
        params = {"group_id": group_id, "finished": count, "now": now}
        if stmts.groups.counted_down is not None:
            row = conn.execute(stmts.groups.counted_down, params).first()
        else:  # MySQL: no UPDATE ... RETURNING; the row is ours to read until commit
            conn.execute(stmts.groups.count_down, params)
            row = conn.execute(stmts.groups.get, params).first()
        if row is None or row.remaining > 0 or row.remaining + count <= 0:
            continue  # not finished; or finished before (a member counted down again)
        if row.task_name is not None and row.cancelled_at is None:
            released |= _release(conn, stmts, group_id, row.task_name, row.task_instance, now)
    return released


def forget_member(
    conn: Connection, statements: Statements, task_name: str, instance_id: str
) -> tuple[int | None, int | None]:
    """The group and awaited group of the execution ``task_name``/``instance_id`` that is
    not running, locked until the caller's transaction ends: ``(None, None)`` when it is
    in neither (or not there)."""
    stmts = statements
    params = {"key_task": task_name, "key_instance": instance_id}
    row = conn.execute(stmts.groups.membership, params).first()
    return (None, None) if row is None else (row.group_id, row.awaits)


def is_chain(conn: Connection, statements: Statements, group_id: int) -> bool:
    """Whether the group ``group_id`` is a link of a chain (``Group.chain``)."""
    row = conn.execute(statements.groups.get, {"group_id": group_id}).first()
    return row is not None and bool(row.chain)


def get(
    conn: Connection, statements: Statements, group_id: int, *, members: bool = False
) -> Group | None:
    """The group ``group_id`` with its finished members counted by outcome (and, given
    ``members``, each one's result); ``None`` when there is no such group."""
    stmts = statements
    params = {"group_id": group_id}
    row = conn.execute(stmts.groups.get, params).first()
    if row is None:
        return None
    if not members:
        counted = conn.execute(stmts.groups.outcome_counts, params)
        return _group(row, {str(outcome): int(n) for outcome, n in counted})
    found = tuple(
        Result(
            task_name=m.task_name,
            instance_id=m.task_instance,
            outcome=m.outcome,
            value=decode_result(m.value),
            error=m.error,
            finished_at=m.finished_at,
        )
        for m in conn.execute(stmts.groups.members, params)
    )
    counts: dict[str, int] = {}
    for member in found:  # counted here: one round trip fewer before a callback starts
        counts[member.outcome] = counts.get(member.outcome, 0) + 1
    return _group(row, counts, found)


def list_groups(
    conn: Connection,
    statements: Statements,
    *,
    task_name: str | None = None,
    limit: int,
    offset: int = 0,
) -> list[Group]:
    """The groups (of callbacks of ``task_name``, when given), newest first, each with
    its finished members counted by outcome (not their results): what the admin page
    lists, counted for all of the page in one grouped read."""
    stmts = statements.groups
    query = stmts.listing(task_name=task_name).limit(limit).offset(offset or None)
    rows = list(conn.execute(query))
    counts: dict[int, dict[str, int]] = {row.id: {} for row in rows}
    if rows:
        found = conn.execute(stmts.page_outcome_counts, {"group_ids": list(counts)})
        for group_id, outcome, n in found:
            counts[group_id][str(outcome)] = int(n)
    return [_group(row, counts[row.id]) for row in rows]


def count_groups(conn: Connection, statements: Statements, *, task_name: str | None = None) -> int:
    """How many groups ``list_groups`` would list without a limit."""
    stmts = statements.groups
    return int(conn.execute(stmts.count(task_name=task_name)).scalar_one())


def list_members(
    conn: Connection,
    statements: Statements,
    group_id: int,
    *,
    limit: int,
    offset: int = 0,
    value_chars: int,
    error_chars: int,
) -> list[result_store.Listed]:
    """The finished members of ``group_id``, newest first, each with the first
    ``value_chars`` characters of its value's JSON text and ``error_chars`` of its error
    (as the results listing reads them: a page costs the same whatever they weigh)."""
    stmts = statements.groups
    params = {
        "group_id": group_id,
        "limit": limit,
        "offset": offset,
        "value_chars": value_chars,
        "error_chars": error_chars,
    }
    rows = conn.execute(stmts.member_previews, params)
    return [result_store.Listed.from_row(row) for row in rows]


def _group(row: Any, counts: Mapping[str, int], members: tuple[Result, ...] = ()) -> Group:
    """The ``Group`` of a row of the groups table, with its members' ``counts`` by outcome."""
    return Group(
        id=row.id,
        task_name=row.task_name,
        instance_id=row.task_instance,
        total=row.total,
        remaining=row.remaining,
        created_at=row.created_at,
        finished_at=row.finished_at,
        cancelled_at=row.cancelled_at,
        chain=row.chain,
        outcomes=MappingProxyType(dict(counts)),
        members=members,
    )


def prune(conn: Connection, statements: Statements, *, threshold: datetime, limit: int) -> int:
    """Delete up to ``limit`` groups that finished or were cancelled before ``threshold``;
    return how many."""
    stmts = statements.groups
    return conn.execute(stmts.prune, {"threshold": threshold, "limit": limit}).rowcount


def locked(conn: Connection, statements: Statements, group_id: int) -> Group | None:
    """The group ``group_id`` (its members not counted by outcome), locked until the
    caller's transaction ends; ``None`` when there is no such group."""
    stmts = statements.groups
    row = conn.execute(stmts.locked, {"group_id": group_id}).first()
    return None if row is None else _group(row, {})


def cancel(conn: Connection, statements: Statements, group_id: int, now: datetime) -> int:
    """Cancel the group ``group_id``: its members that are not running and its callback
    unless it is running (and then, along a chain, every link after it), each kept as
    ``cancelled`` and counted as finished. Members running now finish as they would.
    Return how many executions were cancelled: 0 for an unknown group, one cancelled
    already, or a finished one whose callback has run (which stays as it was)."""
    stmts = statements
    params = {"group_id": group_id, "now": now}
    group = locked(conn, statements, group_id)  # concurrent cancels of one group queue here
    if group is None or group.cancelled_at is not None:
        return 0
    keys = [(name, instance) for name, instance in conn.execute(stmts.groups.unstarted, params)]
    members = sum(_cancel_one(conn, stmts, name, i, group_id, now) for name, i in keys)
    if members:
        conn.execute(stmts.groups.count_down, {**params, "finished": members})
    cancelled = members + _cancel_callback(conn, statements, group, now)
    if cancelled or not group.finished:
        conn.execute(stmts.groups.cancel, params)
    return cancelled


def _cancel_callback(conn: Connection, statements: Statements, group: Group, now: datetime) -> int:
    """Cancel ``group``'s callback if it has not started, and the chain after it; how
    many executions that cancelled."""
    if group.task_name is None or group.instance_id is None:
        return 0
    stmts = statements
    key = {"key_task": group.task_name, "key_instance": group.instance_id}
    link = conn.execute(stmts.groups.membership, key).first()
    if link is None or link.awaits != group.id:
        return 0  # it ran, or it is running
    if not _cancel_one(conn, stmts, group.task_name, group.instance_id, link.group_id, now):
        return 0
    if link.group_id is None:
        return 1
    return 1 + cancel_chain(conn, statements, link.group_id, now)


def cancel_chain(conn: Connection, statements: Statements, group_id: int, now: datetime) -> int:
    """The link of ``group_id`` was cancelled before it ran: what waits for it is
    cancelled too (it would otherwise run at once, ahead of the links before it). The
    link counts as the group's finished member; return how many executions that
    cancelled after it."""
    stmts = statements
    conn.execute(stmts.groups.count_down, {"group_id": group_id, "finished": 1, "now": now})
    return cancel(conn, statements, group_id, now)


def _cancel_one(
    conn: Connection,
    stmts: Statements,
    task_name: str,
    instance_id: str,
    group_id: int | None,
    now: datetime,
) -> int:
    """Delete the execution at the key if it is not running, keeping ``cancelled`` under
    ``group_id``; 1 if it was deleted."""
    key = {"key_task": task_name, "key_instance": instance_id}
    if conn.execute(stmts.scheduling.cancel(shown=False), key).rowcount != 1:
        return 0
    result_store.record_cancelled(conn, stmts, task_name, instance_id, now, group_id)
    return 1
