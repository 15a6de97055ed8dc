"""What MariaDB needs of its own: its units run at READ COMMITTED whatever the server's
default, a unit that loses a lock conflict runs again, timestamps keep the microsecond in
UTC whatever the session's time zone, and a MySQL server or an old MariaDB is refused by
name. Everything else runs in the conformance suite (the ``db`` harness)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import OperationalError

from sqla_scheduler import DatabaseClock, Scheduler, SchedulerConfig, one_time
from sqla_scheduler._bridge import CONFLICT_ATTEMPTS, Database
from sqla_scheduler._dialects import backend_for
from tests.support import wait_for

pytestmark = pytest.mark.anyio


async def test_the_schedulers_own_units_run_at_read_committed(mariadb_url: str) -> None:
    """Each read of a unit sees what other transactions committed before it (READ
    COMMITTED), where the server's default (REPEATABLE READ) would show the first read's
    snapshot again; the connection goes back to the pool at the default, for the
    application's own transactions."""
    engine = create_engine(mariadb_url, pool_size=1, max_overflow=0)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE seen (id INT PRIMARY KEY)"))

    def counts(conn: Connection) -> tuple[int, int]:
        before = int(conn.scalar(text("SELECT count(*) FROM seen")))
        with other_engine.begin() as other:
            other.execute(text("INSERT INTO seen SELECT coalesce(max(id), 0) + 1 FROM seen"))
        return before, int(conn.scalar(text("SELECT count(*) FROM seen")))

    other_engine = create_engine(mariadb_url)
    db = Database(engine)
    try:
        own = await db.run(counts)
        in_transaction = await db.run(counts, lane="a-lane")
        await db.close()
        with engine.connect() as app, app.begin():  # the pool's one connection, given back
            application = counts(app)
    finally:
        engine.dispose()
        other_engine.dispose()
    assert (own, in_transaction, application) == ((0, 1), (1, 2), (2, 2))


async def test_a_unit_that_waits_too_long_for_a_lock_runs_again(mariadb_url: str) -> None:
    """A real lock wait timeout (1205): another transaction holds the row through the
    unit's first attempt and lets it go at the start of the second."""
    engine = create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)"))
        conn.execute(text("INSERT INTO counter VALUES (1, 0)"))
    holder = engine.connect()
    holder.execute(text("SELECT n FROM counter WHERE id = 1 FOR UPDATE"))
    attempts: list[int] = []

    def bump(conn: Connection) -> int:
        attempts.append(len(attempts) + 1)
        conn.execute(text("SET SESSION innodb_lock_wait_timeout = 1"))
        if len(attempts) == 2:
            holder.rollback()  # the other transaction ends, and its lock with it
        conn.execute(text("UPDATE counter SET n = n + 1 WHERE id = 1"))
        return int(conn.scalar(text("SELECT n FROM counter WHERE id = 1")))

    db = Database(engine)
    try:
        n = await db.run(bump)
    finally:
        holder.close()
        await db.close()
        engine.dispose()
    assert (n, attempts) == (1, [1, 2])


@pytest.mark.slow
async def test_a_unit_losing_every_attempt_fails_with_the_drivers_error(mariadb_url: str) -> None:
    """Slow by nature: each of the five attempts waits out MariaDB's shortest lock wait
    timeout, a second."""
    engine = create_engine(mariadb_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)"))
        conn.execute(text("INSERT INTO counter VALUES (1, 0)"))
    attempts: list[int] = []

    def bump(conn: Connection) -> None:
        attempts.append(1)
        conn.execute(text("SET SESSION innodb_lock_wait_timeout = 1"))
        conn.execute(text("UPDATE counter SET n = n + 1 WHERE id = 1"))

    db = Database(engine)
    with engine.connect() as holder:
        holder.execute(text("SELECT n FROM counter WHERE id = 1 FOR UPDATE"))
        try:
            with pytest.raises(OperationalError, match="1205"):
                await db.run(bump)
        finally:
            await db.close()
    engine.dispose()
    assert len(attempts) == CONFLICT_ATTEMPTS


async def test_times_keep_the_microsecond_in_utc_whatever_the_sessions_zone(
    mariadb_url: str,
) -> None:
    """The session's time zone is +05:00 (as a server's default may be): what is written
    and read back, and the database's clock, are UTC all the same."""
    engine = create_engine(mariadb_url, connect_args={"init_command": "SET time_zone = '+05:00'"})
    starts: list[datetime] = []
    task = one_time("job")(lambda ctx: starts.append(ctx.execution_time))
    clock = DatabaseClock()
    scheduler = Scheduler(engine, [task], SchedulerConfig(scheduler_name="tz"), clock=clock)
    at = datetime.now(timezone.utc).replace(microsecond=123457) + timedelta(milliseconds=300)
    try:
        with engine.connect() as conn:
            assert conn.scalar(text("SELECT @@session.time_zone")) == "+05:00"
        scheduler.schedule(engine, task.instance("a", at=at))
        [listed] = scheduler.executions(engine)
        assert listed.execution_time == at
        async with scheduler:
            await wait_for(lambda: len(starts) == 1)
        assert abs(clock.offset) < timedelta(seconds=1)
    finally:
        engine.dispose()
    assert starts == [at]


@pytest.mark.parametrize(
    ("version", "is_mariadb", "refused"),
    [
        ((5, 7, 44), False, "needs MySQL 8.0 or newer"),
        ((8, 0, 36), False, None),
        ((8, 4, 3), False, None),
        ((10, 5, 9), True, "needs MariaDB 10.6 or newer"),
        ((10, 6, 0), True, None),
        ((11, 4, 2), True, None),
    ],
)
def test_an_old_mysql_or_mariadb_is_refused_by_name(
    version: tuple[int, ...], is_mariadb: bool, refused: str | None
) -> None:
    """As the dialect knows its server once connected (its version and whether it is
    MariaDB); before that nothing is known and nothing refused."""
    dialect: Any = mysql.dialect()  # type: ignore[no-untyped-call]
    assert backend_for(dialect).name == "mariadb"
    dialect.server_version_info, dialect.is_mariadb = version, is_mariadb
    if refused is None:
        assert backend_for(dialect).name == "mariadb"
    else:
        with pytest.raises(NotImplementedError, match=refused):
            backend_for(dialect)
