"""Several worker processes on one table: each execution runs exactly once, and a crashed
worker's executions are revived and finished by a live one. On PostgreSQL, on MariaDB, and
on a SQLite file that processes on one host share."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, insert

from tests.concurrency.app import build_scheduler, engine_of, metadata, one_time_task, release
from tests.support.faults import FAST
from tests.support.workers import Workers, rows, scalar, wait_until

#: Executions and workers per database: SQLite lets one writer in at a time.
SIZES = {"postgresql": (5_000, 3), "sqlite": (500, 2), "mariadb": (2_000, 3)}


@pytest.mark.slow
def test_workers_share_executions_each_runs_exactly_once(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    """Slow by nature: real worker processes share thousands of executions (5,000 among
    three on PostgreSQL, 2,000 among three on MariaDB, 500 among two on SQLite) until the
    table is empty."""
    executions, size = SIZES[backend]
    cluster = [workers.start(f"w{i}", CONCURRENCY=10, POLL_MS=100) for i in range(size)]
    workers.wait_started(*cluster)

    client = build_scheduler(db_url, name="client")
    record = one_time_task(client, "record")
    expected = {f"r-{i}" for i in range(executions)}
    try:
        started = time.monotonic()
        assert client.schedule_batch(app_db, [record.instance(i) for i in sorted(expected)]) == (
            executions
        )
    finally:
        engine_of(client).dispose()

    wait_until(
        lambda: (
            scalar(app_db, "select count(*) from scheduled_tasks") == 0
            and scalar(app_db, "select count(*) from runs") >= executions
        ),
        120,
        f"{executions} executions to run",
        workers.report,
    )
    elapsed = time.monotonic() - started

    duplicates = rows(
        app_db, "select instance, count(*) from runs group by instance having count(*) > 1"
    )
    assert duplicates == []
    assert {i for (i,) in rows(app_db, "select instance from runs")} == expected
    per_worker = dict(rows(app_db, "select worker, count(*) from runs group by worker"))
    assert sum(per_worker.values()) == executions
    if backend != "sqlite":
        # SKIP LOCKED lets the workers pick side by side. On SQLite one worker may well pick
        # everything before another's next poll (one writer at a time, no wake-ups), and
        # that is fine: what matters there is that nothing runs twice or is lost.
        assert len(per_worker) > 1, per_worker
    print(
        f"\ncluster ({backend}): {executions} executions on {size} workers in {elapsed:.2f}s "
        f"({executions / elapsed:.0f}/s); per worker: {dict(sorted(per_worker.items()))}"
    )

    workers.stop(*cluster)
    for worker in cluster:
        assert "Traceback" not in worker.output()


def test_crashed_workers_executions_are_revived_and_finished_once(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    # Dead after 6 missed heartbeats of 250 ms (the fault tests' FAST).
    fast = {"CONCURRENCY": 10, **FAST}
    a = workers.start("A", **fast)
    workers.wait_started(a)

    client = build_scheduler(db_url, name="client")
    slow = one_time_task(client, "slow")
    expected = {f"s-{i}" for i in range(10)}
    try:
        client.schedule_batch(app_db, [slow.instance(i) for i in sorted(expected)])
    finally:
        engine_of(client).dispose()

    def phase_count(phase: str, worker: str) -> int:
        return int(
            scalar(
                app_db,
                "select count(*) from runs where phase = :phase and worker = :worker",
                phase=phase,
                worker=worker,
            )
        )

    wait_until(lambda: phase_count("started", "A") == 10, 30, "A to start all 10", workers.report)
    assert scalar(app_db, "select count(*) from scheduled_tasks where picked_by = 'A'") == 10

    os.kill(a.pid, signal.SIGKILL)
    killed = time.monotonic()
    assert a.proc.wait(timeout=30) == -signal.SIGKILL
    with app_db.begin() as conn:
        conn.execute(insert(release).values(id=1))
    b = workers.start("B", **fast)

    wait_until(
        lambda: (
            phase_count("finished", "B") == 10
            and scalar(app_db, "select count(*) from scheduled_tasks") == 0
        ),
        60,
        "B to finish all 10",
        workers.report,
    )
    recovery = time.monotonic() - killed

    finished = rows(app_db, "select instance, worker from runs where phase = 'finished'")
    assert sorted(finished) == sorted((i, "B") for i in expected)  # each once, all by B
    started = rows(
        app_db,
        "select worker, count(*), count(distinct instance) from runs "
        "where phase = 'started' group by worker order by worker",
    )
    assert started == [("A", 10, 10), ("B", 10, 10)]
    assert "revived dead execution slow/" in b.output()
    print(
        f"\ncrash ({backend}): 10 executions of a SIGKILLed worker finished by another "
        f"{recovery:.2f}s after the kill (including its start-up)"
    )

    workers.stop(b)


@pytest.mark.slow
def test_workers_behind_pgbouncer_lose_nothing_when_one_is_killed(
    pgbouncer_url: str, tmp_path: Path
) -> None:
    """Slow by nature: three workers given only PgBouncer's URL (transaction mode) share
    3,000 executions, and one of them is killed (SIGKILL) half way: every execution runs,
    and the only ones that run twice are those the killed worker had started (revived)."""
    executions = 3_000
    engine = create_engine(pgbouncer_url, connect_args={"prepare_threshold": None})
    metadata.create_all(engine)
    workers = Workers(pgbouncer_url, tmp_path)
    try:
        fast = {"CONCURRENCY": 10, "PREPARE": 0, **FAST}
        cluster = [workers.start(f"w{i}", **fast) for i in range(3)]
        workers.wait_started(*cluster)
        client = build_scheduler(pgbouncer_url, name="client", prepare=False)
        record = one_time_task(client, "record")
        expected = {f"r-{i}" for i in range(executions)}
        try:
            assert client.schedule_batch(engine, [record.instance(i) for i in expected]) == (
                executions
            )
        finally:
            engine_of(client).dispose()
        done = "select count(distinct instance) from runs"
        wait_until(lambda: scalar(engine, done) >= executions // 2, 60, "half", workers.report)
        victim, survivors = cluster[0], cluster[1:]
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.proc.wait(timeout=30) == -signal.SIGKILL
        left = executions - scalar(engine, done)
        print(f"\npgbouncer: killed {victim.name} with {left} of {executions} not yet run")
        wait_until(
            lambda: (
                scalar(engine, "select count(*) from scheduled_tasks") == 0
                and scalar(engine, done) == executions
            ),
            120,
            "every execution to run",
            workers.report,
        )
        assert {i for (i,) in rows(engine, "select instance from runs")} == expected
        twice = rows(
            engine,
            "select instance, string_agg(worker, ',' order by id) from runs"
            " group by instance having count(*) > 1",
        )
        assert all(by.split(",")[0] == victim.name for _, by in twice), twice
        workers.stop(*survivors)
        for worker in survivors:
            output = worker.output()
            assert "Traceback" not in output
            assert output.count("did not hear a NOTIFY sent to it") <= 1  # said once at most
    finally:
        workers.close()
        engine.dispose()
