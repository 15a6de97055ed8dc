"""A real worker process stops what it runs when ``cancel`` asks from another process (the
test's), on every database, with the default stop configuration: through NOTIFY on
PostgreSQL, through the worker's own read of its running rows on SQLite and MariaDB.

Fifty handlers run at once, sync and async in turn; they are cancelled one after the
other, each as soon as the one before has stopped, so that the requests fall anywhere in
the worker's read cycle. Each request's commit-to-stop time (the commit's return in the
test, the handler's first sight of the stop in the worker: one machine's clock) is
recorded, and the 99th percentile must be under a second.
"""

from __future__ import annotations

import statistics
import time

from sqlalchemy import Engine

from tests.concurrency.app import build_scheduler, engine_of
from tests.support.faults import schedule
from tests.support.workers import Workers, rows, scalar, wait_until

#: Handlers running at once, each stopped once.
STOPS = 50


def _started(app_db: Engine) -> int:
    return int(scalar(app_db, "select count(*) from runs where phase = 'started'"))


def _stopped(app_db: Engine, instance: str) -> float | None:
    found = rows(app_db, "select at_us from stops where instance = :i", i=instance)
    return found[0][0] / 1_000_000 if found else None


def test_a_worker_stops_what_cancel_asks_within_a_second(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    worker = workers.start("w1", CONCURRENCY=STOPS, SLOW_DEADLINE_S=120)
    workers.wait_started(worker)
    names = {f"s{i}": "stoppable" if i % 2 == 0 else "stoppable-async" for i in range(STOPS)}
    for task in ("stoppable", "stoppable-async"):
        schedule(db_url, app_db, task, [i for i, t in names.items() if t == task])
    wait_until(lambda: _started(app_db) == STOPS, 60, "every handler to start", workers.report)

    operator = build_scheduler(db_url, name="operator")
    took: list[float] = []
    try:
        for instance, task in names.items():
            assert operator.cancel(app_db, task, instance) is True
            committed = time.time()
            wait_until(
                lambda i=instance: _stopped(app_db, i) is not None,  # type: ignore[misc]
                10,
                f"{task}/{instance} to stop",
                workers.report,
            )
            stopped = _stopped(app_db, instance)
            assert stopped is not None
            took.append(stopped - committed)
    finally:
        engine_of(operator).dispose()
    wait_until(
        lambda: scalar(app_db, "select count(*) from scheduled_tasks") == 0,
        10,
        "every execution to leave the table",
        workers.report,
    )
    cancelled = "select count(*) from scheduled_tasks_history where outcome = 'cancelled'"
    assert scalar(app_db, cancelled) == STOPS
    p50, p99 = statistics.median(took), statistics.quantiles(took, n=100)[98]
    print(f"{backend}: commit to stop over {STOPS} stops: p50 {p50:.3f}s, p99 {p99:.3f}s")
    assert p99 < 1.0, sorted(took)
    workers.stop(worker)
