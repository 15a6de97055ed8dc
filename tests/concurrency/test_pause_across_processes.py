"""A pause holds in every worker process sharing the table, and a resume reaches them all:
through NOTIFY on PostgreSQL, through the due-time read on MariaDB (both within the
default 10 s poll), at the next poll on SQLite."""

from __future__ import annotations

from sqlalchemy import Engine

from tests.concurrency.app import build_scheduler, engine_of
from tests.support.faults import schedule
from tests.support.workers import Workers, scalar, wait_until

#: The workers' poll: the default on PostgreSQL and MariaDB, where NOTIFY or the probe
#: must carry the resume.
POLL_MS = {"postgresql": 10_000, "sqlite": 200, "mariadb": 10_000}


def _done(app_db: Engine, task: str) -> int:
    return int(
        scalar(
            app_db,
            "select count(distinct instance) from runs where task = :task"
            " and phase in ('done', 'finished')",
            task=task,
        )
    )


def test_a_pause_holds_in_every_process_until_resumed(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    started = [workers.start(f"w{i}", POLL_MS=POLL_MS[backend]) for i in range(3)]
    workers.wait_started(*started)
    operator = build_scheduler(db_url, name="operator")
    try:
        assert operator.pause(app_db, "record") is True
        schedule(db_url, app_db, "record", [f"r{i}" for i in range(20)])
        schedule(db_url, app_db, "fault", [f"f{i}" for i in range(20)])
        # the other task runs in the meantime: every process is picking
        wait_until(lambda: _done(app_db, "fault") == 20, 30, "the fault runs", workers.report)
        assert _done(app_db, "record") == 0
        waiting = (
            "select count(*) from scheduled_tasks where task_name = 'record' and picked = false"
        )
        assert scalar(app_db, waiting) == 20

        assert operator.resume(app_db, "record") is True
        # well within the 10 s poll: the resume's NOTIFY (PostgreSQL) or the probe woke them
        took = wait_until(
            lambda: _done(app_db, "record") == 20, 8, "the record runs", workers.report
        )
        assert took < 5, took
        ran_by = scalar(app_db, "select count(distinct worker) from runs where task = 'record'")
        assert ran_by >= 1
    finally:
        engine_of(operator).dispose()
    workers.stop(*started)
