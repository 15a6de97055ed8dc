"""A value the database cannot store is refused before any statement runs, so the
caller's own transaction goes on and commits its work (issue 13, defect 5)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sqla_scheduler import ManualClock, PayloadError, TaskDefinitionError, one_time
from tests.conftest import Harness

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 5, 17, 12, 0, tzinfo=timezone.utc)


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
