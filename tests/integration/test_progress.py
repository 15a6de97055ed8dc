"""Progress end to end, on every database: ``ctx.report_progress`` from a running
handler (sync or async) is written to the row at most once a second, however often it is
called; another connection reads the latest report as ``Execution.progress`` while the
handler runs; the hand-back of the finished attempt clears it. Handlers are held by
events; the test waits for the report's statement, not for a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, event
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import Scheduler, one_time
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio

CALLS = 10_000


class ProgressWrites:
    """Counts the statements that write a report (``UPDATE`` of the progress columns
    outside a hand-back) on one engine, and tells when one has committed."""

    def __init__(self, engine: Engine | AsyncEngine) -> None:
        self.engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        self.count = 0
        self.committed = threading.Event()
        self._pending: set[int] = set()

    def __enter__(self) -> ProgressWrites:
        event.listen(self.engine, "before_cursor_execute", self._execute)
        event.listen(self.engine, "commit", self._commit)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._execute)
        event.remove(self.engine, "commit", self._commit)

    def _execute(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        text = statement.lower()
        # a hand-back (which sets picked_by) clears the progress: not a report
        reported = "progress_at" in text and "picked_by" not in text
        if text.lstrip().startswith("update") and reported:
            self.count += 1
            self._pending.add(id(conn))

    def _commit(self, conn: Any) -> None:
        if id(conn) in self._pending:
            self._pending.discard(id(conn))
            self.committed.set()


@pytest.fixture
def writes(db: Harness) -> Iterator[ProgressWrites]:
    with ProgressWrites(db.engine) as counted:
        yield counted


def _scheduler(db: Harness, task: Any) -> Scheduler:
    return db.scheduler(
        [task], polling_interval=timedelta(milliseconds=20), retry_base_delay=timedelta(hours=1)
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_ten_thousand_reports_in_a_second_write_at_most_two_statements(
    db: Harness, writes: ProgressWrites, kind: str
) -> None:
    done = threading.Event()
    calls: list[int] = []

    def spread(ctx: Any) -> None:  # at least CALLS reports, spread over a second
        n, end = 0, time.monotonic() + 1
        while n < CALLS or time.monotonic() < end:
            ctx.report_progress(min(n / CALLS, 1.0), f"step {n}")
            n += 1
        calls.append(n)
        done.set()

    async def spread_async(ctx: Any) -> None:
        n, end = 0, time.monotonic() + 1
        while n < CALLS or time.monotonic() < end:
            await ctx.report_progress(min(n / CALLS, 1.0), f"step {n}")
            n += 1
            if n % 1000 == 0:
                await anyio.lowlevel.checkpoint()  # the loop's writer gets its turns
        calls.append(n)
        done.set()

    task = one_time("spread")(spread if kind == "sync" else spread_async)
    scheduler = _scheduler(db, task)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(done.is_set)
        await wait_for(lambda: db.row("spread", "a") is None)
    assert calls
    assert calls[0] >= CALLS
    assert writes.count <= 2


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_latest_report_is_read_elsewhere_while_it_runs_and_cleared_after(
    db: Harness, writes: ProgressWrites, kind: str
) -> None:
    release = threading.Event()

    def halfway(ctx: Any) -> None:
        ctx.report_progress(0.25)
        ctx.report_progress(0.5, "half of the rows")
        release.wait(20)
        raise RuntimeError("the attempt fails: its hand-back keeps the row")

    async def halfway_async(ctx: Any) -> None:
        await ctx.report_progress(0.25)
        await ctx.report_progress(0.5, "half of the rows")
        await anyio.to_thread.run_sync(release.wait, 20)
        raise RuntimeError("the attempt fails: its hand-back keeps the row")

    task = one_time("halfway", max_retries=3)(halfway if kind == "sync" else halfway_async)
    scheduler = _scheduler(db, task)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    assert (await db.resolve(scheduler.get_execution(db.engine, "halfway", "a"))).progress is None
    async with scheduler:
        await wait_for(writes.committed.is_set)
        # another engine, the way another process reads it; the writer may have taken the
        # first report alone, a write before the second: the latest comes a second later
        reader = Scheduler(db.sync_engine, [task])

        def latest_report() -> tuple[float | None, str | None] | None:
            seen = reader.get_execution(db.sync_engine, "halfway", "a")
            progress = None if seen is None else seen.progress
            return None if progress is None else (progress.fraction, progress.message)

        await wait_for(lambda: latest_report() == (0.5, "half of the rows"))
        seen = reader.get_execution(db.sync_engine, "halfway", "a")
        assert seen is not None
        assert seen.progress is not None
        assert seen.progress.at is not None
        release.set()
        await wait_for(lambda: (db.row("halfway", "a") or {}).get("consecutive_failures") == 1)
    after = await db.resolve(scheduler.get_execution(db.engine, "halfway", "a"))
    assert after is not None
    assert after.progress is None
    row = db.row("halfway", "a")
    assert row is not None
    assert (row["progress"], row["progress_message"], row["progress_at"]) == (None, None, None)


async def test_a_task_that_never_reports_writes_no_progress(
    db: Harness, writes: ProgressWrites
) -> None:
    task = one_time("quiet")(lambda ctx: None)
    scheduler = _scheduler(db, task)
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(str(i)) for i in range(5)]))
    async with scheduler:
        await wait_for(lambda: db.count() == 0)
    assert writes.count == 0


async def test_a_refused_report_fails_the_attempt_naming_the_value(db: Harness) -> None:
    task = one_time("wrong", max_retries=3)(lambda ctx: ctx.report_progress(1.5))
    scheduler = _scheduler(db, task)
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with scheduler:
        await wait_for(lambda: (db.row("wrong", "a") or {}).get("consecutive_failures") == 1)
    row = db.row("wrong", "a")
    assert row is not None
    assert "wrong/a: progress must be from 0 to 1, got 1.5" in row["last_error"]
