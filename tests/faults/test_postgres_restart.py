"""PostgreSQL restarts (``pg_ctl restart -m fast``) in the middle of a run: the workers
neither exit nor hang; they reconnect, listen again and finish everything.

The cluster here is this module's own: restarting the session's would break other tests.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from sqla_scheduler import migrate
from tests.support.faults import check_fault_runs, remaining, schedule
from tests.support.servers.postgres import PostgresCluster
from tests.support.workers import Workers, scalar, wait_until

# In one pytest-xdist worker: one cluster of the module's own, started once.
pytestmark = pytest.mark.xdist_group("own-cluster-restart")

EXECUTIONS = 1_500


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[PostgresCluster]:
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def db_url(own_cluster: PostgresCluster) -> str:
    own_cluster.create_database("restart")
    url = own_cluster.url("restart")
    migrate.upgrade(url)
    return url


def finished(app_db: Engine) -> int:
    return int(scalar(app_db, "select count(*) from runs where phase = 'finished'"))


@pytest.mark.slow
def test_workers_survive_a_postgresql_restart(
    workers: Workers, app_db: Engine, db_url: str, own_cluster: PostgresCluster
) -> None:
    """Slow by nature: a real restart of the server mid-run, and work resuming after it."""
    # Dead after 5 s: longer than the restart, so outcomes are retried, not revived. A
    # 5 s poll: a prompt start after the restart proves the LISTEN connection is back.
    env = {"HEARTBEAT_MS": 1000, "MISSED_LIMIT": 5, "POLL_MS": 5000, "CONCURRENCY": 4}
    cluster = [workers.start(f"w{i}", **env, FAULT_SLEEP_MS=20) for i in range(3)]
    workers.wait_started(*cluster)
    expected = {f"f-{i}" for i in range(EXECUTIONS)}
    schedule(db_url, app_db, "fault", sorted(expected))
    wait_until(lambda: finished(app_db) >= EXECUTIONS // 4, 60, "a quarter to finish")

    restarted = time.monotonic()
    own_cluster.restart("fast")
    down = time.monotonic() - restarted
    app_db.dispose()  # the test's own pooled connections died with the server
    before = finished(app_db)
    recovery = (
        wait_until(lambda: finished(app_db) > before, 60, "work to resume", workers.report) + down
    )
    wait_until(lambda: remaining(app_db) == 0, 120, "the queue to drain", workers.report)
    for worker in cluster:
        assert worker.proc.poll() is None, workers.report()
    figures = check_fault_runs(app_db, expected, killed=set(), allow_reruns=True)

    # Every worker listens again: an execution due now starts well within the 5 s poll.
    scheduled = time.monotonic()
    schedule(db_url, app_db, "record", ["after-restart"])
    latency = wait_until(
        lambda: scalar(app_db, "select count(*) from runs where task = 'record'") == 1,
        30,
        "the wake-up after the restart",
        workers.report,
    )
    assert latency < 2.5, f"{latency:.2f}s: the LISTEN connection did not come back"
    print(
        f"\npostgres restart: {EXECUTIONS} executions on 3 workers; restart took {down:.2f}s, "
        f"work resumed {recovery:.2f}s after it began; {figures['reruns']} re-run(s); "
        f"NOTIFY wake-up afterwards in {latency * 1000:.0f} ms (scheduled at {scheduled:.0f})"
    )
    workers.stop(*cluster)
