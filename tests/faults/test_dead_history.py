"""A worker killed while first attempts run: the revival records each lost attempt in
history as ``dead`` (SPEC: one entry per finished attempt), although a first attempt's
start is not recorded."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import anyio
from sqlalchemy import Engine, create_engine

from sqla_scheduler import ManualClock, Scheduler
from tests.support.faults import FAST, schedule
from tests.support.workers import Workers, scalar, wait_until

RUNNING = 3


def test_attempts_killed_before_their_start_was_recorded_are_in_history(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    worker = workers.start("doomed", **FAST, CONCURRENCY=RUNNING)
    workers.wait_started(worker)
    ids = [f"s-{i}" for i in range(RUNNING)]
    schedule(db_url, app_db, "slow", ids)  # they run until released: never, here
    wait_until(
        lambda: scalar(app_db, "select count(*) from runs where phase = 'started'") == RUNNING,
        30,
        "the first attempts to start",
        workers.report,
    )
    os.kill(worker.pid, signal.SIGKILL)
    assert worker.proc.wait(timeout=30) == -signal.SIGKILL

    # A scheduler whose clock reads past the dead-execution window revives them at once.
    engine = create_engine(db_url)
    try:
        later = scalar(app_db, "select current_timestamp") + timedelta(hours=1)
        reviver = Scheduler(engine, clock=ManualClock(later))
        revived = anyio.run(reviver.revive_dead_executions)
        assert sorted(e.instance_id for e in revived) == ids
        assert all(e.started_at is None for e in revived)  # not recorded, for speed
        entries = reviver.history(engine, outcome="dead")
    finally:
        engine.dispose()
    assert sorted(e.instance_id for e in entries) == ids
    for entry in entries:
        assert (entry.picked_by, entry.attempt, entry.started_at) == ("doomed", 1, None)
        assert entry.error is not None
        assert "its start was not recorded, so its handler may have run" in entry.error
