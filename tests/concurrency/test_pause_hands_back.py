"""A pause reaches what a worker process already holds: through NOTIFY (its poll is the
default 10 s), the executions it picked and has not started are handed back at once, and
none of them starts until the resume."""

from __future__ import annotations

from sqlalchemy import Engine, insert

from tests.concurrency.app import build_scheduler, engine_of, release
from tests.support.faults import schedule
from tests.support.workers import Workers, scalar, wait_until


def _count(app_db: Engine, phase: str) -> int:
    return int(
        scalar(app_db, "select count(*) from runs where task = 'slow' and phase = :p", p=phase)
    )


def test_a_pause_hands_back_what_a_worker_holds(workers: Workers, app_db: Engine, pg_url: str):
    worker = workers.start("w", CONCURRENCY=2, POLL_MS=10_000)
    workers.wait_started(worker)
    schedule(pg_url, app_db, "slow", [f"s{i}" for i in range(10)])
    picked = "select count(*) from scheduled_tasks where picked"
    # two run (until a row is in release), and more are held
    wait_until(
        lambda: _count(app_db, "started") == 2 and scalar(app_db, picked) >= 6,
        20,
        "two to start and more to be held",
        workers.report,
    )
    operator = build_scheduler(pg_url, name="operator")
    try:
        assert operator.pause(app_db, "slow") is True
        wait_until(
            lambda: scalar(app_db, picked) == 2, 5, "the held to be handed back", workers.report
        )
        with app_db.begin() as conn:
            conn.execute(insert(release).values(id=1))
        wait_until(
            lambda: _count(app_db, "finished") == 2 and scalar(app_db, picked) == 0,
            10,
            "the running two to finish",
            workers.report,
        )
        assert _count(app_db, "started") == 2, workers.report()  # none started after the pause
        waiting = (
            "select count(*) from scheduled_tasks where not picked and consecutive_failures = 0"
        )
        assert scalar(app_db, waiting) == 8

        assert operator.resume(app_db, "slow") is True
        wait_until(lambda: _count(app_db, "finished") == 10, 10, "the rest to run", workers.report)
    finally:
        engine_of(operator).dispose()
    assert "handing back" in worker.output()
    workers.stop(worker)
