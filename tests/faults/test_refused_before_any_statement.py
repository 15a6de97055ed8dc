"""A value the database cannot store is refused before any statement runs, so the
caller's own transaction goes on and commits its work (issue 13, defect 5; issue 29,
defects 5 and 8: every key and number a client method takes)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import ManualClock, PayloadError, Scheduler, TaskDefinitionError, one_time
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


async def test_the_callers_transaction_survives_a_refused_value(db: Harness) -> None:
    job = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([job])
    async with db.session() as session:
        await db.resolve(scheduler.schedule(session, job.instance("kept")))
        with pytest.raises(PayloadError, match="task 'job': payload\\['x'\\] contains a NUL"):
            await db.resolve(scheduler.schedule(session, job.instance("bad", {"x": "\x00"})))
        with pytest.raises(TaskDefinitionError, match="outside 0001-01-02 to 9999-12-30 UTC"):
            await db.resolve(
                scheduler.reschedule(
                    session, "job", "kept", datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=3)))
                )
            )
        await db.commit(session)
    assert db.row("job", "kept") is not None
    assert db.count() == 1


async def test_a_refused_follow_up_fails_its_handler_once(db: Harness) -> None:
    """Refused inside ``ctx.schedule()``: the handler fails and its failure is recorded,
    instead of a success that can never commit and a handler that re-runs without end."""
    clock = ManualClock(NOW)
    follow = one_time("follow")(lambda ctx: None)
    calls: list[str] = []

    def lead(ctx: Any) -> None:
        calls.append(ctx.instance_id)
        ctx.schedule(follow.instance("f", "\ud800"))

    task = one_time("lead")(lead)
    scheduler = db.scheduler([task, follow], clock)
    await db.resolve(scheduler.schedule(db.engine, task.instance("l")))
    assert await scheduler.run_due() == 1
    assert await scheduler.run_due() == 0
    assert calls == ["l"]
    row = db.row("lead", "l")
    assert row is not None
    assert row["consecutive_failures"] == 1
    assert db.row("follow", "f") is None


# --- every key and number a client method takes (issue 29, defects 5 and 8) ------------------

BIG = 2**63  # one past a bigint: the driver refuses it and PostgreSQL aborts the transaction
NUL, LONE = "a\x00b", "\ud800"
BIGINT = "from 0 to 9223372036854775807"
ID = "from 1 to 9223372036854775807"

#: (what, call, error, message): each call is refused before any statement runs, with an
#: error naming the field and the value.
REFUSED: list[tuple[str, Callable[[Scheduler, Any], Any], type[Exception], str]] = [
    (
        "cancel task",
        lambda s, t: s.cancel(t, NUL, "i"),
        TaskDefinitionError,
        r"task name 'a\\x00b' contains a NUL",
    ),
    (
        "cancel instance",
        lambda s, t: s.cancel(t, "job", LONE),
        TaskDefinitionError,
        r"task 'job': instance id '\\ud800' contains a lone surrogate",
    ),
    (
        "reschedule task",
        lambda s, t: s.reschedule(t, LONE, "i", NOW),
        TaskDefinitionError,
        r"task name '\\ud800' contains a lone surrogate",
    ),
    (
        "reschedule instance",
        lambda s, t: s.reschedule(t, "job", NUL, NOW),
        TaskDefinitionError,
        r"task 'job': instance id 'a\\x00b' contains a NUL",
    ),
    (
        "run_now task",
        lambda s, t: s.run_now(t, NUL),
        TaskDefinitionError,
        r"task name 'a\\x00b' contains a NUL",
    ),
    (
        "run_now instance",
        lambda s, t: s.run_now(t, "job", LONE),
        TaskDefinitionError,
        r"instance id '\\ud800' contains a lone surrogate",
    ),
    (
        "get_execution task",
        lambda s, t: s.get_execution(t, LONE, "i"),
        TaskDefinitionError,
        r"task name '\\ud800' contains a lone surrogate",
    ),
    (
        "get_execution instance",
        lambda s, t: s.get_execution(t, "job", NUL),
        TaskDefinitionError,
        r"instance id 'a\\x00b' contains a NUL",
    ),
    (
        "executions task_name",
        lambda s, t: s.executions(t, task_name=NUL),
        TaskDefinitionError,
        r"task_name 'a\\x00b' contains a NUL",
    ),
    (
        "executions limit",
        lambda s, t: s.executions(t, limit=BIG),
        ValueError,
        rf"limit must be an int {BIGINT}, got {BIG}",
    ),
    (
        "executions offset",
        lambda s, t: s.executions(t, offset=BIG),
        ValueError,
        rf"offset must be an int {BIGINT}, got {BIG}",
    ),
    (
        "executions negative",
        lambda s, t: s.executions(t, offset=-1),
        ValueError,
        rf"offset must be an int {BIGINT}, got -1",
    ),
    (
        "executions text",
        lambda s, t: s.executions(t, limit="5"),
        ValueError,
        rf"limit must be an int {BIGINT}, got '5'",
    ),
    (
        "history task_name",
        lambda s, t: s.history(t, task_name=LONE),
        TaskDefinitionError,
        r"task_name '\\ud800' contains a lone surrogate",
    ),
    (
        "history instance_id",
        lambda s, t: s.history(t, instance_id=NUL),
        TaskDefinitionError,
        r"instance_id 'a\\x00b' contains a NUL",
    ),
    (
        "history limit",
        lambda s, t: s.history(t, limit=2**70),
        ValueError,
        rf"limit must be an int {BIGINT}, got {2**70}",
    ),
    (
        "history bool",
        lambda s, t: s.history(t, limit=True),
        ValueError,
        rf"limit must be an int {BIGINT}, got True",
    ),
    (
        "requeue big",
        lambda s, t: s.requeue(t, BIG),
        ValueError,
        rf"history_id must be an int {ID}, got {BIG}",
    ),
    (
        "requeue zero",
        lambda s, t: s.requeue(t, 0),
        ValueError,
        rf"history_id must be an int {ID}, got 0",
    ),
    (
        "requeue text",
        lambda s, t: s.requeue(t, "7"),
        ValueError,
        rf"history_id must be an int {ID}, got '7'",
    ),
    (
        "cancel not text",
        lambda s, t: s.cancel(t, 5, "i"),
        TaskDefinitionError,
        r"task name must be a str, got 5",
    ),
    (
        "pause",
        lambda s, t: s.pause(t, NUL),
        TaskDefinitionError,
        r"task name 'a\\x00b' contains a NUL",
    ),
    (
        "resume",
        lambda s, t: s.resume(t, LONE),
        TaskDefinitionError,
        r"task name '\\ud800' contains a lone surrogate",
    ),
]


async def test_every_key_and_number_is_checked_before_any_statement(db: Harness) -> None:
    """Each refused call leaves the caller's transaction as it was: no statement ran (on
    PostgreSQL a failed one aborts the transaction, and its ``commit()`` then quietly rolls
    back), and the row scheduled before it commits."""
    job = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([job])
    statements: list[str] = []
    engine = db.engine.sync_engine if isinstance(db.engine, AsyncEngine) else db.engine

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    async with db.session() as session:
        await db.resolve(scheduler.schedule(session, job.instance("kept")))
        event.listen(engine, "before_cursor_execute", count)
        try:
            for what, call, error, message in REFUSED:
                with pytest.raises(error, match=message):
                    await db.resolve(call(scheduler, session))
                assert statements == [], (what, statements)
        finally:
            event.remove(engine, "before_cursor_execute", count)
        await db.commit(session)
    assert db.row("job", "kept") is not None
    # Text a database can be asked for is asked for: an empty key finds nothing, and a row
    # written before control characters were refused in names can still be reached.
    assert await db.resolve(scheduler.cancel(db.engine, "job", "")) is False
    db.put(task_name="old\x01", task_instance="i", execution_time=NOW)
    assert await db.resolve(scheduler.get_execution(db.engine, "old\x01", "i")) is not None
    assert await db.resolve(scheduler.cancel(db.engine, "old\x01", "i")) is True
