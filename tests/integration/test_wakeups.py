"""Wake-ups: NOTIFY on commit starts work at once; polling covers what NOTIFY cannot."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import MetaData, func, select, text

from sqla_scheduler import OneTimeTask, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.models import scheduled_tasks_table
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every case on asyncio, and the sync-engine cases on trio too."""
    return str(request.param)


#: The sessions of the test's database that LISTEN.
LISTENING = "from pg_stat_activity where datname = current_database() and query like 'LISTEN%'"


def listeners(db: Harness) -> int:
    with db.sync_engine.connect() as conn:
        return int(conn.scalar(text(f"select count(*) {LISTENING}")))


def kill_listeners(db: Harness) -> int:
    with db.sync_engine.connect() as conn:
        return len(conn.execute(text(f"select pg_terminate_backend(pid) {LISTENING}")).all())


def scheduler_for(
    db: Harness, **config: Any
) -> tuple[Scheduler, OneTimeTask[Any], list[str], threading.Event]:
    """A scheduler of ``config`` with one task, ``job``; the instance ids it ran, in order,
    and an event its handler sets each time."""
    ran: list[str] = []
    event = threading.Event()

    def handler(ctx: Any) -> None:
        ran.append(ctx.instance_id)
        event.set()

    task = one_time("job")(handler)
    return Scheduler(db.engine, [task], SchedulerConfig(**config)), task, ran, event


@pytest.mark.postgres_only("a commit wakes schedulers through NOTIFY; the others have none")
async def test_a_commit_wakes_an_idle_scheduler(db: Harness):
    scheduler, task, ran, event = scheduler_for(db, polling_interval=timedelta(minutes=5))
    async with scheduler:
        await wait_for(lambda: listeners(db) == 1)
        started = time.monotonic()
        await db.resolve(scheduler.schedule(db.engine, task.instance("now")))
        await wait_for(event.is_set, deadline=10)
        # With a five-minute poll, only the notification can explain a start this soon.
        assert time.monotonic() - started < 10
    assert ran == ["now"]


@pytest.mark.parametrize("listen", [True, False], ids=["listen", "no-listen"])
async def test_a_commit_in_this_process_wakes_its_own_scheduler(db: Harness, listen: bool):
    """NOTIFY when the loop listens; otherwise (SQLite, MariaDB, listen=False) the commit
    itself."""
    scheduler, task, ran, event = scheduler_for(
        db, listen=listen, polling_interval=timedelta(minutes=5)
    )
    async with scheduler:
        if listen and db.notifies:
            await wait_for(lambda: listeners(db) == 1)
        async with db.session() as session:
            await db.resolve(scheduler.schedule(session, task.instance("rolled-back")))
            await db.rollback(session)
        async with db.session() as session:
            await db.resolve(scheduler.schedule(session, task.instance("in-session")))
            await db.commit(session)
        # With a five-minute poll, only a wake-up explains a start within the deadline.
        await wait_for(event.is_set, deadline=10)
        batch = [task.instance("batch-1"), task.instance("batch-2")]
        await db.resolve(scheduler.schedule_batch(db.engine, batch))
        await wait_for(lambda: len(ran) == 3, deadline=10)
    assert sorted(ran) == ["batch-1", "batch-2", "in-session"]


@pytest.mark.postgres_only("the LISTEN connection exists on PostgreSQL only")
async def test_the_listener_comes_back_after_its_connection_dies(db: Harness):
    scheduler, task, ran, event = scheduler_for(db, polling_interval=timedelta(minutes=5))
    async with scheduler:
        await wait_for(lambda: listeners(db) == 1)
        assert kill_listeners(db) == 1
        await wait_for(lambda: listeners(db) == 1, deadline=15)  # re-listened
        await db.resolve(scheduler.schedule(db.engine, task.instance("after")))
        await wait_for(event.is_set, deadline=10)
    assert ran == ["after"]


async def test_listen_can_be_switched_off(db: Harness):
    scheduler, task, ran, event = scheduler_for(
        db, listen=False, polling_interval=timedelta(milliseconds=50)
    )
    async with scheduler:
        await db.resolve(scheduler.schedule(db.engine, task.instance("polled")))
        await wait_for(event.is_set, deadline=10)
        if db.notifies:  # elsewhere no scheduler listens; polling is all there is
            assert listeners(db) == 0
    assert ran == ["polled"]


async def test_a_table_of_another_name_works_end_to_end(db: Harness):
    """``table_name`` moves everything: the rows, the picks and (PostgreSQL) the channel."""
    jobs = scheduled_tasks_table(MetaData(), "jobs")
    jobs.metadata.create_all(db.sync_engine)
    scheduler, task, ran, event = scheduler_for(
        db, table_name="jobs", polling_interval=timedelta(minutes=5)
    )
    async with scheduler:
        if db.notifies:
            await wait_for(lambda: listeners(db) == 1)
        await db.resolve(scheduler.schedule(db.engine, task.instance("in-jobs")))
        await wait_for(event.is_set, deadline=10)  # woken, then picked from "jobs"
    assert ran == ["in-jobs"]
    with db.sync_engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(jobs)) == 0
        assert conn.scalar(select(func.count()).select_from(db.table)) == 0
