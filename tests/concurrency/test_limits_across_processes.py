"""``max_concurrency`` holds across real worker processes: the handlers' own records never
show more than the limit running at once, and a killed process's places are held until
its executions are revived, then free."""

from __future__ import annotations

import signal
import time

from sqlalchemy import Engine

from tests.concurrency.app import LIMIT
from tests.support.faults import FAST, schedule
from tests.support.workers import Workers, rows, scalar, wait_until

SIZES = {"postgresql": (40, 3), "sqlite": (20, 2), "mariadb": (40, 3)}


def most_at_once(app_db: Engine, worker: str | None = None) -> int:
    """The most ``limited`` handlers running at once (in ``worker`` alone, if given), from
    their own records in the order they were written (each row commits before its handler
    goes on)."""
    sql = "select phase from runs where task = 'limited'"
    sql += " and worker = :worker order by id" if worker else " order by id"
    running = most = 0
    for (phase,) in rows(app_db, sql, worker=worker):
        running += 1 if phase == "started" else -1
        most = max(most, running)
    return most


def finished(app_db: Engine) -> int:
    sql = "select count(*) from runs where task = 'limited' and phase = 'finished'"
    return int(scalar(app_db, sql))


def test_the_limit_holds_across_processes(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    executions, size = SIZES[backend]
    cluster = [workers.start(f"w{i}", CONCURRENCY=10, POLL_MS=100) for i in range(size)]
    workers.wait_started(*cluster)
    schedule(db_url, app_db, "limited", [f"l{i}" for i in range(executions)])
    wait_until(lambda: finished(app_db) == executions, 60, "the limited runs", workers.report)
    workers.stop(*cluster)
    assert most_at_once(app_db) == LIMIT
    if backend == "postgresql":  # woken by each other's NOTIFY, every process takes turns
        by = scalar(app_db, "select count(distinct worker) from runs where task = 'limited'")
        assert by >= 2, "more than one process took its turn"


def test_a_killed_process_holds_its_places_until_revived(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    # the doomed process takes both places with executions that outlast it
    doomed = workers.start("doomed", CONCURRENCY=10, LIMITED_SLEEP_MS=60_000, **FAST)
    workers.wait_started(doomed)
    schedule(db_url, app_db, "limited", ["held-1", "held-2"])
    held = "select count(*) from scheduled_tasks where picked = true and picked_by = 'doomed'"
    wait_until(lambda: scalar(app_db, held) == 2, 30, "both places taken", workers.report)
    doomed.signal(signal.SIGKILL)
    doomed.proc.wait(timeout=30)
    schedule(db_url, app_db, "limited", [f"new-{i}" for i in range(3)])
    survivor = workers.start("survivor", CONCURRENCY=10, **FAST)
    workers.wait_started(survivor)
    started = "select count(*) from runs where worker = 'survivor' and phase = 'started'"
    give_up = time.monotonic() + 30
    while True:  # until the dead process's executions are revived (about 0.6 s)
        before = scalar(app_db, started)
        if scalar(app_db, held) < 2:
            break
        assert before == 0, "a place held by the dead process was given away"
        assert time.monotonic() < give_up, workers.report()
    wait_until(lambda: finished(app_db) == 5, 60, "the revived and new runs", workers.report)
    workers.stop(survivor)
    assert most_at_once(app_db, worker="survivor") == LIMIT
