"""A poison pill: a handler that kills its worker process (``os._exit``) on one execution.
From its second crash on, each crash counts as a failure when the execution is revived;
after ``max_retries`` of them it is abandoned like any failing execution, and the rest of
the queue runs."""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import Engine

from tests.support.faults import FAST, remaining, schedule
from tests.support.workers import Workers, rows, scalar

MAX_RETRIES = 2


def run_poison_pill(workers: Workers, app_db: Engine, db_url: str) -> str:
    """Run the pill and 20 good executions, restarting the worker after each crash;
    return the workers' logs."""
    env = {**FAST, "CONCURRENCY": 2, "MAX_RETRIES": MAX_RETRIES}
    generation = 0
    worker = workers.start("p0", **env)
    workers.wait_started(worker)
    schedule(db_url, app_db, "poison", ["die"] + [f"ok-{i}" for i in range(20)])

    crashes = 0
    began = time.monotonic()
    while remaining(app_db):
        if worker.proc.poll() is not None:  # the pill took it down: restart it, as systemd would
            assert worker.proc.returncode == 7, workers.report()
            crashes += 1
            assert crashes <= MAX_RETRIES + 2, workers.report()
            generation += 1
            worker = workers.start(f"p{generation}", **env)
        assert time.monotonic() - began < 90, workers.report()
        time.sleep(0.1)
    # the first crash of an execution never in trouble before is not counted (its start
    # was not recorded); then one counted crash for the first run and one per retry
    assert crashes == MAX_RETRIES + 2
    assert scalar(app_db, "select count(*) from runs where phase = 'crashed'") == crashes
    workers.wait_started(worker)
    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0, workers.report()
    return workers.report()


@pytest.mark.slow
def test_a_poison_pill_is_abandoned_after_max_retries(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    """Slow by nature: the worker process dies at each attempt and is started again,
    four times, each waiting out the dead-execution window."""
    report = run_poison_pill(workers, app_db, db_url)
    assert "abandoned poison/die after" in report, report
    # history: every crash is a dead attempt: the first, whose start was not recorded,
    # without a start and not counted (the next attempt is numbered 1 again), then one per
    # counted crash, then the abandon, which keeps the payload for a requeue
    outcomes = rows(
        app_db,
        "select outcome, attempt, picked_by is not null, started_at is not null"
        " from scheduled_tasks_history"
        " where task_name = 'poison' and task_instance = 'die' order by id",
    )
    assert [tuple(r) for r in outcomes] == [
        ("dead", 1, True, False),
        ("dead", 1, True, True),
        ("dead", 2, True, True),
        ("dead", 3, True, True),
        ("abandoned", 3, True, False),  # spent: abandoned before it ran again
    ], outcomes


@pytest.mark.slow
def test_executions_queued_beside_a_poison_pill_still_run(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    """Slow by nature: worker processes die and are started again, each crash waiting out
    the dead-execution window."""
    """Waiting in the queue of a process the pill kills costs an execution nothing.

    With concurrency 2, one neighbour at a time runs beside the pill, and its handler is
    killed with the process: that is a real lost attempt, and a neighbour that runs beside
    the pill at every counted crash can be abandoned. Every other neighbour only waited in
    the queue when the process died, and runs.
    """
    run_poison_pill(workers, app_db, db_url)
    (done,) = rows(app_db, "select count(distinct instance) from runs where phase = 'done'")
    concurrency = 2
    assert done[0] >= 20 - (concurrency - 1), done
