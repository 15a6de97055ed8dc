"""Workers whose machine clocks run two minutes ahead and behind: with the database's
clock (``DatabaseClock``, the default on PostgreSQL) neither starts work early nor revives
executions that are alive elsewhere, nor lets its own look dead."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, event, insert, text

from sqla_scheduler import DatabaseClock
from tests.concurrency.app import SkewedClock, release
from tests.support.faults import FAST, remaining, schedule
from tests.support.workers import Workers, rows, scalar, wait_until

SKEW = 120
#: How far ahead of the database a corrected clock may run (see the test).
MEASUREMENT_ERROR = timedelta(milliseconds=50)


@pytest.mark.slow
def test_skewed_workers_keep_the_databases_time(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    """Slow by nature: it proves that nothing happens too early, which takes watching three
    skewed workers for five seconds, past the dead-execution window and the due time."""
    env = {**FAST, "CONCURRENCY": 10, "SLOW_DEADLINE_S": 60}
    cluster = [
        workers.start("true", **env),
        workers.start("ahead", **env, SKEW_S=SKEW),
        workers.start("behind", **env, SKEW_S=-SKEW),
    ]
    workers.wait_started(*cluster)
    # Held executions on every worker, heartbeating; dead after 1.5 s without.
    schedule(db_url, app_db, "slow", [f"s-{i}" for i in range(9)])
    wait_until(
        lambda: scalar(app_db, "select count(*) from runs where phase = 'started'") == 9,
        30,
        "the slow executions to start",
        workers.report,
    )
    db_now = scalar(app_db, "select now()")
    at = db_now + timedelta(seconds=3)
    schedule(db_url, app_db, "record", [f"r-{i}" for i in range(30)], at=at)
    time.sleep(5)  # long past the dead-execution window, and past ``at``

    # A corrected clock is as good as its measurement: DatabaseClock takes the server's
    # reading to be from the middle of the query's round trip, so it may run ahead of the
    # database by up to half of it (milliseconds on a loaded machine). Two minutes of skew
    # left uncorrected would start the work 120 s early.
    early = rows(
        app_db,
        "select instance, at from runs where task = 'record' and at < :at",
        at=at - MEASUREMENT_ERROR,
    )
    assert early == []
    assert scalar(app_db, "select count(*) from runs where task = 'record'") == 30
    for worker in cluster:
        assert "revived dead execution" not in worker.output(), workers.report()
    corrected = [w.name for w in cluster if "off the database's; corrected" in w.output()]
    assert sorted(corrected) == ["ahead", "behind"], workers.report()

    with app_db.begin() as conn:
        conn.execute(insert(release).values(id=1))
    wait_until(lambda: remaining(app_db) == 0, 30, "the slow executions to finish")
    started = rows(
        app_db,
        "select count(*), count(distinct instance) from runs "
        "where task = 'slow' and phase = 'started'",
    )
    assert started == [(9, 9)]  # none revived and run again
    workers.stop(*cluster)


def test_without_the_database_clock_a_skewed_worker_revives_live_work(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    """The control: the same skew, uncorrected (``DB_CLOCK=0``), does the damage."""
    env = {**FAST, "CONCURRENCY": 10, "SLOW_DEADLINE_S": 60}
    holder = workers.start("true", **env)
    workers.wait_started(holder)
    schedule(db_url, app_db, "slow", ["s-0"])
    wait_until(
        lambda: scalar(app_db, "select count(*) from runs where phase = 'started'") == 1,
        30,
        "the slow execution to start",
        workers.report,
    )
    ahead = workers.start("ahead", **env, SKEW_S=SKEW, DB_CLOCK=0)
    wait_until(
        lambda: "revived dead execution slow/s-0" in ahead.output(),
        30,
        "the skewed worker to revive live work",
        workers.report,
    )
    with app_db.begin() as conn:
        conn.execute(insert(release).values(id=1))


def test_database_clock_measures_the_offset(db_url: str, app_db: Engine) -> None:
    clock = DatabaseClock(SkewedClock(timedelta(seconds=SKEW)), refresh=timedelta(hours=1))
    assert clock.due()
    with app_db.connect() as conn:
        offset = clock.measure(conn)
        server = conn.scalar(text("select clock_timestamp()"))
    assert abs(offset + timedelta(seconds=SKEW)) < timedelta(seconds=1)
    assert abs(clock.now() - server) < timedelta(seconds=1)
    assert not clock.due()


def test_database_clock_keeps_its_least_delayed_reading(app_db: Engine) -> None:
    # The first reading's query is held up 300 ms before it reaches the server, as on a
    # loaded machine: alone, it would put the database's clock 150 ms ahead of this one.
    delays = iter([0.3])

    def held_up(*_args: object) -> None:
        time.sleep(next(delays, 0.0))  # the injected delay, not a wait for work

    clock = DatabaseClock()  # this machine's clock, which the local server shares
    with app_db.connect() as conn:
        event.listen(conn, "before_cursor_execute", held_up)
        offset = clock.measure(conn)
    assert next(delays, None) is None, "the delay was injected"
    assert abs(offset) < timedelta(milliseconds=50), offset
