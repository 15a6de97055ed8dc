"""The table is set up to churn like a queue: heartbeats are HOT updates."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from tests.support import Harness, services, wait_for

pytestmark = pytest.mark.anyio


def table_stats(db: Harness) -> tuple[int, int]:
    with db.sync_engine.connect() as conn:
        updates, hot = conn.execute(
            text(
                "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables"
                " where relname = 'scheduled_tasks'"
            )
        ).one()
    return int(updates), int(hot)


@pytest.mark.postgres_only("HOT updates and pg_stat_user_tables are PostgreSQL's")
async def test_heartbeats_are_hot_updates(db: Harness):
    task = one_time("long")(lambda ctx: None)
    clock = ManualClock(datetime(2030, 5, 17, 12, 0, tzinfo=timezone.utc))
    scheduler = Scheduler(db.engine, [task], SchedulerConfig(concurrency=4), clock=clock)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [task.instance(f"l{i}") for i in range(4)])
    )
    async with services(scheduler) as runner:
        assert len(await runner.picker.run_once()) == 4
        for _ in range(40):
            clock.advance(timedelta(seconds=1))
            assert await runner.heartbeater.run_once() == 4
    # A backend reports its statistics when it exits (an idle one only every 10 s): close
    # the pool's connections, then they reach pg_stat_user_tables within moments.
    await db.resolve(db.engine.dispose())
    await wait_for(lambda: table_stats(db)[0] >= 4 + 40 * 4, deadline=30)
    updates, hot = table_stats(db)
    # The pick's four row updates are the only non-HOT ones: heartbeats left the indexes alone.
    assert updates - hot <= 4, (updates, hot)


def test_storage_parameters_are_set(pg_url: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            options: Any = conn.scalar(
                text("select reloptions from pg_class where relname = 'scheduled_tasks'")
            )
    finally:
        engine.dispose()
    assert "fillfactor=90" in options
    assert "autovacuum_vacuum_scale_factor=0.0" in options


@pytest.mark.postgres_only("synchronous_commit is PostgreSQL's")
async def test_a_pick_commits_without_waiting_for_the_disk_and_leaves_the_session_alone(
    db: Harness,
):
    from sqla_scheduler import _store
    from sqla_scheduler._statements import statements_on

    task = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([task])
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    now = scheduler.clock.now() + timedelta(seconds=1)
    with db.sync_engine.connect() as conn:
        conn.execute(text("set synchronous_commit = on"))  # the test cluster runs with off
        conn.commit()
        with conn.begin():
            picked = _store.pick(
                conn,
                statements_on(conn, scheduler.table),
                names=["job"],
                limit=5,
                picker="me",
                now=now,
            )
            assert [e.instance_id for e in picked] == ["a"]
            # for the pick's own transaction only
            assert conn.scalar(text("show synchronous_commit")) == "off"
        assert conn.scalar(text("show synchronous_commit")) == "on"


@pytest.mark.postgres_only("plan_cache_mode is PostgreSQL's")
async def test_a_lane_that_plans_once_leaves_the_pool_as_it_was(db: Harness):
    from sqlalchemy import Connection, create_engine
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    from sqla_scheduler._bridge import Database

    def mode(conn: Connection) -> str:
        return f"{conn.scalar(text('show plan_cache_mode'))} jit={conn.scalar(text('show jit'))}"

    # A pool of one connection: the lane's, once it is given back.
    url = db.sync_engine.url
    engine: Any = (
        create_async_engine(url, pool_size=1, max_overflow=0)
        if isinstance(db.engine, AsyncEngine)
        else create_engine(url, pool_size=1, max_overflow=0)
    )
    try:
        database = Database(engine)
        # not before the connections are known to keep their sessions (no pooler between)
        unknown = await database.run(mode, autocommit=True, lane="picker", plan_once=True)
        assert unknown == "auto jit=on"
        database.sessions_kept()
        planned = await database.run(mode, autocommit=True, lane="picker", plan_once=True)
        again = await database.run(mode, autocommit=True, lane="picker")
        assert planned == again == "force_generic_plan jit=off"
        await database.close()
        assert await database.run(mode, autocommit=True) == "auto jit=on"
    finally:
        if isinstance(engine, AsyncEngine):
            await engine.dispose()
        else:
            engine.dispose()
