"""The databases the benchmark runs on, and what differs between them for it: starting a
durable throwaway server, a fresh database per scenario copied from a migrated template,
URLs and raw DB-API connections, and the few raw SQL statements of the floors. Every
scenario is written once, against ``Database``.

- ``PostgreSQL``: ``tests/_postgres.py`` (fsync on), psycopg for the raw floors and both
  engines.
- ``MariaDB``: ``tests/_mariadb.py`` (``innodb_flush_log_at_trx_commit=1``), PyMySQL for the
  raw floors and sync engines, asyncmy (or ``async_driver``) for async ones. Raw
  connections run at READ COMMITTED, as the scheduler's own units do.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Protocol

import psycopg
import pymysql
from psycopg.types.json import Jsonb

from bench.results import ScenarioError, TableStats
from sqla_scheduler import migrate
from tests.support.servers.mariadb import MariaDBServer
from tests.support.servers.mariadb_databases import DatabasePool
from tests.support.servers.pgbouncer import PgBouncer
from tests.support.servers.postgres import PostgresCluster

__all__ = ["DATABASES", "Database", "MariaDB", "PostgreSQL", "RawConnection", "database"]

TASK_NAME = "noop"  # the task bench/worker.py runs
TEMPLATE_DB = "bench_template"

#: The columns of a raw INSERT, in the order of the rows ``Database.rows`` builds.
_COLUMNS = "task_name, task_instance, task_data, execution_time, priority"


class RawConnection(Protocol):
    """A DB-API connection, psycopg's or PyMySQL's: what the floors use of one."""

    def cursor(self) -> Any: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


class Database(ABC):
    """One database server for one benchmark run."""

    #: ``--database`` value.
    name: str
    #: As printed.
    title: str
    #: Another process's commit wakes an idle scheduler at once (``NOTIFY``); without it
    #: the due-time read finds the work within about a second.
    notifies: bool
    #: An ``INSERT`` of one due row (``rows``' columns) that skips an existing key.
    insert_sql: str
    #: The floors' pick: the due rows in priority order, ``LIMIT %s``, locked, skipping
    #: rows other transactions hold.
    pick_sql: str
    #: SQL for the database's clock, as the scheduler stores time.
    now_sql: str
    #: The driver packages the run uses (their versions go into the report).
    drivers: tuple[str, ...]

    @abstractmethod
    def start(self) -> None:
        """Start the durable server."""

    @abstractmethod
    def stop(self) -> None:
        """Stop it and remove its files (idempotent)."""

    @abstractmethod
    def describe(self) -> tuple[str, str]:
        """The server's version and its durability setting, once checked to be on."""

    @abstractmethod
    def create_template(self) -> None:
        """Create and migrate ``TEMPLATE_DB``, the database each scenario's is a copy of."""

    @abstractmethod
    def copy_template(self, label: str) -> str:
        """A new database copied from the template; its name (with ``label`` where it can)."""

    @abstractmethod
    def settle(self, dbs: Sequence[str]) -> None:
        """After a scenario: drop its databases ``dbs`` and leave the server with no
        work of theirs pending, so that the next scenario does not pay for it."""

    @abstractmethod
    def url(self, db: str, *, use_async: bool = False) -> str:
        """The SQLAlchemy URL of ``db``, for an ``AsyncEngine`` with ``use_async``."""

    @abstractmethod
    def connect(self, db: str, *, autocommit: bool = False) -> RawConnection:
        """A raw DB-API connection to ``db``."""

    @abstractmethod
    def json_null(self) -> Any:
        """``task_data`` of an execution without data, as the library writes it."""

    @abstractmethod
    def timestamp(self, when: datetime) -> datetime:
        """``when`` (aware) as bound to an ``execution_time``."""

    @abstractmethod
    def delete_keys(self, cur: Any, keys: Sequence[tuple[str, str]]) -> None:
        """Delete the rows of ``keys`` (task name, instance) in one statement."""

    def row(self, instance: str, when: datetime | None = None) -> tuple[Any, ...]:
        """A row of the bench's task for ``insert_sql``, due ``when`` (default now)."""
        at = self.timestamp(when or datetime.now(timezone.utc))
        return (TASK_NAME, instance, self.json_null(), at, 0)

    def rows(self, prefix: str, n: int) -> list[tuple[Any, ...]]:
        """``n`` rows due now, instances ``<prefix>0000000`` on."""
        now = datetime.now(timezone.utc)
        return [self.row(f"{prefix}{i:07d}", now) for i in range(n)]

    @abstractmethod
    def flush_stats(self, conn: RawConnection) -> None:
        """Make ``conn``'s own table statistics visible to other sessions now."""

    def table_stats(self, db: str, run: str, expected_deletes: int) -> TableStats | None:
        """The table's statistics after a drain (``None``: the database keeps none)."""
        return None


class PostgreSQL(Database):
    name = "postgresql"
    title = "PostgreSQL"
    notifies = True
    insert_sql = (
        f"INSERT INTO scheduled_tasks ({_COLUMNS}, schedule)"
        " VALUES (%s, %s, %s, %s, %s, NULL) ON CONFLICT DO NOTHING"
    )
    pick_sql = (
        "SELECT task_name, task_instance FROM scheduled_tasks"
        " WHERE picked = false AND execution_time <= now()"
        " ORDER BY priority DESC, execution_time LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    now_sql = "now()"
    drivers = ("psycopg",)

    def __init__(self) -> None:
        self.cluster = PostgresCluster(durable=True)
        self._bouncer: PgBouncer | None = None

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        if self._bouncer is not None:
            self._bouncer.stop()
        self.cluster.stop()

    def pooled_url(self, db: str) -> str:
        """The URL of ``db`` through a PgBouncer in transaction mode in front of the
        cluster (started on first use; its defaults, 20 server connections a database)."""
        if self._bouncer is None:
            self._bouncer = PgBouncer(self.cluster).start()
        return self._bouncer.url(db)

    def describe(self) -> tuple[str, str]:
        with self.cluster.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        assert row is not None
        assert fsync is not None
        if fsync[0] != "on":
            raise SystemExit("the benchmark cluster must run with fsync on")
        return str(row[0]).split()[0], "fsync on"

    def create_template(self) -> None:
        """A migrated database with planner statistics, as a table in service has.

        A table that was never analyzed leaves PostgreSQL guessing that a few rows match,
        so it sorts every due row on each pick instead of reading the due index in order
        (the raw floor's pick of 400 rows would too). Autovacuum analyzes a table in
        service within a minute of a change; here ANALYZE runs once on 100 rows, which
        are then deleted.
        """
        self.cluster.create_database(TEMPLATE_DB)
        migrate.upgrade(self.cluster.url(TEMPLATE_DB))
        with self.connect(TEMPLATE_DB, autocommit=True) as conn:
            with conn.cursor() as cur:
                cur.executemany(self.insert_sql, self.rows("warm", 100))
            conn.execute("ANALYZE scheduled_tasks")
            conn.execute("DELETE FROM scheduled_tasks")

    def copy_template(self, label: str) -> str:
        self.cluster.create_database(label, template=TEMPLATE_DB)
        return label

    def settle(self, dbs: Sequence[str]) -> None:
        """Drop ``dbs`` (and with them autovacuum's work on what the scenario left dead,
        which would otherwise run on the second core beside the next scenario), then
        ``CHECKPOINT``: the scenario's dirty pages are written now, not during the next."""
        for db in dbs:
            self.cluster.drop_database(db)
        with self.cluster.connect() as conn:
            conn.execute("CHECKPOINT")

    def url(self, db: str, *, use_async: bool = False) -> str:
        return self.cluster.url(db)  # psycopg is both

    def connect(self, db: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        return psycopg.connect(self.cluster.dsn(db), autocommit=autocommit, connect_timeout=10)

    def json_null(self) -> Any:
        return Jsonb(None)

    def timestamp(self, when: datetime) -> datetime:
        return when

    def delete_keys(self, cur: Any, keys: Sequence[tuple[str, str]]) -> None:
        cur.execute(
            "DELETE FROM scheduled_tasks WHERE (task_name, task_instance) IN"
            " (SELECT * FROM unnest(%s::varchar[], %s::varchar[]))",
            ([k[0] for k in keys], [k[1] for k in keys]),
        )

    def flush_stats(self, conn: RawConnection) -> None:
        assert isinstance(conn, psycopg.Connection)
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.commit()

    def table_stats(self, db: str, run: str, expected_deletes: int) -> TableStats | None:
        """Dead tuples once every backend that touched the table has reported its stats.

        Backends report at exit (the workers are gone by now) or every second or so while
        busy; poll, bounded, until the deletes the run made are all counted.
        """
        query = (
            "SELECT n_dead_tup, n_live_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,"
            " autovacuum_count FROM pg_stat_user_tables WHERE relname = 'scheduled_tasks'"
        )
        with self.connect(db, autocommit=True) as conn:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_stat_force_next_flush()")
            deadline = time.monotonic() + 5.0
            row: tuple[Any, ...] | None = None
            settled = False
            while True:
                conn.execute("SELECT pg_stat_clear_snapshot()")
                row = conn.execute(query).fetchone()
                if row is not None and row[5] is not None and row[5] >= expected_deletes:
                    settled = True
                    break
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        v: list[int | None] = (
            [None if x is None else int(x) for x in row] if row is not None else [None] * 7
        )
        return TableStats(run, v[0], v[1], v[2], v[3], v[4], v[5], v[6], settled=settled)


class MariaDB(Database):
    name = "mariadb"
    title = "MariaDB"
    notifies = False
    # ``schedule`` is left to its default (NULL): with a literal in VALUES PyMySQL's
    # ``executemany`` would send a statement per row instead of one multi-row INSERT.
    insert_sql = f"INSERT IGNORE INTO scheduled_tasks ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s)"
    # ``task_name =`` as the scheduler's pick has it (``IN`` its tasks): the due index
    # starts with it, and without it MariaDB reads and sorts every row on each pick
    # (a third of the rate).
    pick_sql = (
        f"SELECT task_name, task_instance FROM scheduled_tasks WHERE task_name = '{TASK_NAME}'"
        " AND picked = 0 AND execution_time <= UTC_TIMESTAMP(6)"
        " ORDER BY priority DESC, execution_time LIMIT %s FOR UPDATE SKIP LOCKED"
    )
    now_sql = "UTC_TIMESTAMP(6)"
    drivers = ("pymysql", "asyncmy")

    def __init__(self, async_driver: str = "asyncmy") -> None:
        self.server = MariaDBServer(durable=True)
        #: The driver of ``url(db, use_async=True)``: ``bench/drivers.py`` switches it.
        self.async_driver = async_driver
        self._pool: DatabasePool | None = None

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()

    def describe(self) -> tuple[str, str]:
        with self.server.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@innodb_doublewrite")
            version, flush, doublewrite = cur.fetchone()
        if int(flush) != 1 or not int(doublewrite):
            raise SystemExit(
                "the benchmark server must flush its log at each commit and keep the"
                " doublewrite buffer (MariaDBServer(durable=True))"
            )
        return str(version).split("-")[0], "innodb_flush_log_at_trx_commit=1"

    def create_template(self) -> None:
        self.server.create_database(TEMPLATE_DB)
        migrate.upgrade(self.server.url(TEMPLATE_DB))
        self._pool = DatabasePool(self.server, TEMPLATE_DB)

    def copy_template(self, label: str) -> str:
        # No CREATE DATABASE ... TEMPLATE: the tests' pool runs the template's SHOW
        # CREATE statements in a new database (named by the pool).
        if self._pool is None:
            raise ScenarioError("the template database was not created")
        return self._pool.take()

    def settle(self, dbs: Sequence[str]) -> None:
        """Drop ``dbs``: InnoDB's purge of what a scenario left is then not the next's."""
        for db in dbs:
            self.server.drop_database(db)

    def url(self, db: str, *, use_async: bool = False) -> str:
        return self.server.url(db, self.async_driver if use_async else "pymysql")

    def connect(self, db: str, *, autocommit: bool = False) -> Any:
        return pymysql.connect(
            host=self.server.host,
            port=self.server.port,
            user=self.server.user,
            database=db,
            autocommit=autocommit,
            connect_timeout=10,
            ssl_disabled=True,  # else PyMySQL builds a TLS context per connection
            init_command="SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )

    def json_null(self) -> Any:
        return "null"

    def timestamp(self, when: datetime) -> datetime:
        return when.astimezone(timezone.utc).replace(tzinfo=None)  # stored as naive UTC

    def flush_stats(self, conn: RawConnection) -> None:
        """Nothing to flush: no statistics are read on MariaDB (``table_stats``)."""

    def delete_keys(self, cur: Any, keys: Sequence[tuple[str, str]]) -> None:
        pairs = ", ".join(["(%s, %s)"] * len(keys))
        cur.execute(
            f"DELETE FROM scheduled_tasks WHERE (task_name, task_instance) IN ({pairs})",
            [part for key in keys for part in key],
        )


#: By ``--database`` value.
DATABASES: dict[str, type[Database]] = {"postgresql": PostgreSQL, "mariadb": MariaDB}


def database(name: str) -> Database:
    """A new (not started) ``Database`` of that ``--database`` name."""
    return DATABASES[name]()
