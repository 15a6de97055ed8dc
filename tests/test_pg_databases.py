"""The suite's PostgreSQL databases: each test sees a fresh, migrated one.

A database is reused only when its test left the schema as it found it; then no row,
sequence value or statistic of the earlier test is left in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from tests.support.servers.pg_databases import RECORD_TABLE, VERSION_TABLE, DatabasePool
from tests.support.servers.postgres import PostgresCluster


@pytest.fixture
def pool(pg_cluster: PostgresCluster, pg_template: str) -> DatabasePool:
    return DatabasePool(pg_cluster, pg_template)


def used(pool: DatabasePool, work: Callable[[psycopg.Connection[Any]], object]) -> str:
    """Take a database, do ``work`` in it as a test would, give it back; its name."""
    name, since = pool.take()
    with pool.cluster.connect(name) as conn:
        work(conn)
    pool.give_back(name, since)
    return name


def exists(cluster: PostgresCluster, name: str) -> bool:
    with cluster.connect() as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        return found.fetchone() is not None


def add_rows(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO scheduled_tasks (task_name, task_instance, execution_time, priority)"
        " VALUES ('t', 'i', now(), 0)"
    )
    conn.execute("UPDATE scheduled_tasks SET priority = 1")
    conn.execute("SELECT nextval(pg_get_serial_sequence('scheduled_tasks_history', 'id'))")
    conn.execute("SELECT pg_stat_force_next_flush()")


def test_a_database_left_alone_is_wiped_and_handed_out_again(pool: DatabasePool) -> None:
    first = used(pool, add_rows)
    name, _since = pool.take()
    assert name == first
    assert (pool.created, pool.reused, pool.dropped) == (1, 1, 0)
    with pool.cluster.connect(name) as conn:
        assert conn.execute("SELECT count(*) FROM scheduled_tasks").fetchone() == (0,)
        stats = conn.execute(
            "SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'scheduled_tasks'"
        ).fetchone()
        assert stats == (0, 0)
        sequence = conn.execute(
            "SELECT nextval(pg_get_serial_sequence('scheduled_tasks_history', 'id'))"
        ).fetchone()
        assert sequence == (1,)
        (version,) = conn.execute(f"SELECT count(*) FROM {VERSION_TABLE}").fetchone() or (0,)
        assert version == 1
        (step,) = conn.execute(f"SELECT count(*) FROM {RECORD_TABLE}").fetchone() or (0,)
        assert step == 1


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE app_orders (id int)",
        "CREATE INDEX ix_extra ON scheduled_tasks (priority)",
        "DROP INDEX ix_scheduled_tasks_due",
        "ALTER TABLE scheduled_tasks ADD COLUMN extra int",
        "ALTER TABLE scheduled_tasks ALTER COLUMN priority SET DEFAULT 7",
        "CREATE SCHEMA other",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "COMMENT ON TABLE scheduled_tasks IS 'mine'",
        f"UPDATE {VERSION_TABLE} SET version_num = 'elsewhere'",
        f"UPDATE {RECORD_TABLE} SET step = 1",
        "SELECT lo_create(0)",
    ],
)
def test_a_changed_schema_is_dropped(pool: DatabasePool, change: str) -> None:
    name = used(pool, lambda conn: conn.execute(change))
    assert (pool.reused, pool.dropped) == (0, 1)
    assert not exists(pool.cluster, name)
    assert pool.take()[0] != name


def test_a_database_setting_or_a_session_left_open_drops_it(pool: DatabasePool) -> None:
    set_name = used(pool, lambda conn: conn.execute("SELECT 1"))  # reused below
    name, since = pool.take()
    assert name == set_name
    with pool.cluster.connect() as conn:
        conn.execute(f"ALTER DATABASE \"{name}\" SET work_mem = '8MB'")
    pool.give_back(name, since)
    assert not exists(pool.cluster, name)

    name, since = pool.take()
    with pool.cluster.connect(name):  # still open when it is given back
        pool.give_back(name, since)
    assert not exists(pool.cluster, name)
    assert pool.dropped == 2
