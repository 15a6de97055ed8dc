"""``pg_terminate_backend`` on the workers' connections, the LISTEN ones included, every
few hundred milliseconds: nothing is lost, nothing stays picked past the dead-execution
window, and every listener comes back."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.support.faults import check_fault_runs, schedule
from tests.support.workers import Workers, wait_until

EXECUTIONS = 2_400
KILLING_FOR = 8.0
#: The workers' dead-execution window: 4 missed heartbeats of 500 ms.
DEAD_AFTER = 2.0


@pytest.fixture
def observer(db_url: str) -> Iterator[Engine]:
    """The test's own connections, spared by the killer and checked before use."""
    engine = create_engine(
        db_url, pool_pre_ping=True, connect_args={"application_name": "observer"}
    )
    try:
        yield engine
    finally:
        engine.dispose()


def one(engine: Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(text(sql)) or 0)


LISTENERS = (
    "select count(*) from pg_stat_activity where datname = current_database() "
    "and query ilike 'LISTEN%'"
)


@pytest.mark.slow
def test_terminated_backends_lose_nothing(
    workers: Workers, app_db: Engine, observer: Engine, db_url: str
) -> None:
    """Slow by nature: backends are terminated every 200-400 ms for 8 s under load."""
    env = {"HEARTBEAT_MS": 500, "MISSED_LIMIT": 4, "POLL_MS": 5000, "CONCURRENCY": 4}
    cluster = [workers.start(f"w{i}", **env, FAULT_SLEEP_MS=50) for i in range(3)]
    workers.wait_started(*cluster)
    wait_until(
        lambda: one(observer, LISTENERS) == 3, 30, "three LISTEN connections", workers.report
    )
    expected = {f"f-{i}" for i in range(EXECUTIONS)}
    schedule(db_url, app_db, "fault", sorted(expected))

    stop = threading.Event()
    terminated = {"listen": 0, "other": 0}
    oldest_heartbeat = [0.0]

    def kill() -> None:
        rng = random.Random(3)
        with observer.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            while not stop.wait(rng.uniform(0.2, 0.4)):
                age = conn.scalar(
                    text(
                        "select extract(epoch from max(now() - last_heartbeat)) "
                        "from scheduled_tasks where picked"
                    )
                )
                oldest_heartbeat[0] = max(oldest_heartbeat[0], float(age or 0))
                listen = rng.random() < 0.3
                victims = conn.scalars(
                    text(
                        "select pid from pg_stat_activity where datname = current_database() "
                        "and pid <> pg_backend_pid() and application_name <> 'observer' "
                        "and (query ilike 'LISTEN%') = :listen"
                    ),
                    {"listen": listen},
                ).all()
                if victims:
                    conn.execute(
                        text("select pg_terminate_backend(:pid)"), {"pid": rng.choice(victims)}
                    )
                    terminated["listen" if listen else "other"] += 1

    killer = threading.Thread(target=kill, name="killer")
    killer.start()
    try:
        stop.wait(KILLING_FOR)
    finally:
        stop.set()
        killer.join()

    # Whatever was picked by a connection that died is done or revived within the window.
    drained = wait_until(
        lambda: one(observer, "select count(*) from scheduled_tasks") == 0,
        60,
        "the queue to drain",
        workers.report,
    )
    # Revival runs every 1 s (two heartbeats): a dead row is revived by DEAD_AFTER + 1 s.
    assert oldest_heartbeat[0] < DEAD_AFTER + 2.0, oldest_heartbeat
    for worker in cluster:
        assert worker.proc.poll() is None, workers.report()
    app_db.dispose()
    figures = check_fault_runs(observer, expected, killed=set(), allow_reruns=True)

    wait_until(
        lambda: one(observer, LISTENERS) == 3, 30, "every LISTEN to come back", workers.report
    )
    schedule(db_url, observer, "record", ["after-kills"])
    latency = wait_until(
        lambda: one(observer, "select count(*) from runs where task = 'record'") == 1,
        30,
        "the wake-up after the kills",
    )
    assert latency < 2.5, f"{latency:.2f}s: a LISTEN connection did not come back"
    print(
        f"\nbackend kills: {EXECUTIONS} executions on 3 workers; {terminated} backends "
        f"terminated over {KILLING_FOR:.0f}s; oldest heartbeat of a picked row seen: "
        f"{oldest_heartbeat[0]:.2f}s; drained {drained:.1f}s after; "
        f"{figures['reruns']} re-run(s); NOTIFY wake-up afterwards in {latency * 1000:.0f} ms"
    )
    workers.stop(*cluster)
