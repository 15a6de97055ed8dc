"""The table is set up to churn like a queue: heartbeats are HOT updates."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from sqla_scheduler import Scheduler, SchedulerConfig, one_time
from tests.conftest import Harness, wait_for

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
    release = threading.Event()
    task = one_time("long")(lambda ctx: release.wait(30))
    config = SchedulerConfig(
        heartbeat_interval=timedelta(milliseconds=30),
        polling_interval=timedelta(milliseconds=20),
        concurrency=4,
    )
    scheduler = Scheduler(db.engine, [task], config)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [task.instance(f"l{i}") for i in range(4)])
    )
    async with scheduler:
        # Statistics reach pg_stat_user_tables within a second or so of each commit.
        await wait_for(lambda: table_stats(db)[1] >= 40, deadline=30)
        updates, hot = table_stats(db)
        release.set()
    # Four picks are the only non-HOT updates: every heartbeat left the indexes alone.
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
