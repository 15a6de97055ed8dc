"""The throwaway MariaDB server and its pool of template copies, used by the test suite.

The template here is plain SQL shaped like the library's schema (a table with an
``AUTO_INCREMENT`` id, a foreign key, a view and the two kept tables), not its migrations.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support import children
from tests.support.children import gone
from tests.support.ports import a_taken_port_first
from tests.support.servers import mariadb as _mariadb
from tests.support.servers.mariadb import DIR_PREFIX, MariaDBServer, cleanup_stale_servers, quote
from tests.support.servers.mariadb_databases import RECORD_TABLE, VERSION_TABLE, DatabasePool

# In one pytest-xdist worker: the servers of the module's own.
pytestmark = pytest.mark.xdist_group("own-mariadb")

TEMPLATE = "template"
TEMPLATE_SQL = [
    f"CREATE TABLE {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL PRIMARY KEY)",
    f"INSERT INTO {VERSION_TABLE} VALUES ('5d7c3a1f0b42')",
    f"CREATE TABLE {RECORD_TABLE} (step INT NOT NULL PRIMARY KEY, note VARCHAR(20))",
    f"INSERT INTO {RECORD_TABLE} VALUES (3, 'queue')",
    "CREATE TABLE scheduled_tasks (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " task_name VARCHAR(100) NOT NULL, priority INT NOT NULL DEFAULT 0,"
    " due DATETIME(6), KEY ix_scheduled_tasks_due (due))",
    "CREATE TABLE scheduled_tasks_history (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " task_id BIGINT NOT NULL, CONSTRAINT fk_history_task FOREIGN KEY (task_id)"
    " REFERENCES scheduled_tasks (id) ON DELETE CASCADE)",
    "CREATE VIEW due_tasks AS SELECT id, task_name FROM scheduled_tasks WHERE due IS NOT NULL",
]


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    with MariaDBServer() as started:
        started.create_database(TEMPLATE)
        with started.connect(TEMPLATE) as conn, conn.cursor() as cur:
            for statement in TEMPLATE_SQL:
                cur.execute(statement)
        yield started


@pytest.fixture
def pool(server: MariaDBServer) -> DatabasePool:
    return DatabasePool(server, TEMPLATE)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def rows(
    server: MariaDBServer, query: str, dbname: str | None = None, args: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    with server.connect(dbname) as conn, conn.cursor() as cur:
        cur.execute(query, args or None)
        return list(cur.fetchall())


def scalar(server: MariaDBServer, query: str, dbname: str | None = None) -> Any:
    return rows(server, query, dbname)[0][0]


def exists(server: MariaDBServer, name: str) -> bool:
    query = "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s"
    return bool(rows(server, query, args=(name,)))


def outward_address() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_listens_on_loopback_only(server: MariaDBServer) -> None:
    assert scalar(server, "SELECT @@bind_address") == "127.0.0.1"
    assert scalar(server, "SELECT @@port") == server.port
    assert scalar(server, "SELECT @@socket") == str(server.socket_path)
    assert server.root.name.startswith(DIR_PREFIX)
    address = outward_address()
    if address is not None:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, server.port), timeout=5).close()


def test_settings_for_a_test_server(server: MariaDBServer) -> None:
    (settings,) = rows(
        server,
        "SELECT @@innodb_flush_log_at_trx_commit, @@innodb_doublewrite, @@log_bin,"
        " @@max_connections, @@skip_name_resolve, @@tx_isolation, CURRENT_USER()",
    )
    assert settings == (2, 0, 0, 500, 1, "REPEATABLE-READ", "root@127.0.0.1")


def test_runs_as_the_mysql_user_when_root(server: MariaDBServer) -> None:
    assert server.pid is not None
    status = Path(f"/proc/{server.pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    expected = "mysql" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    assert pwd.getpwuid(uid).pw_name == expected
    assert pwd.getpwuid(server.data_dir.stat().st_uid).pw_name == expected


def _connected_to(url: str) -> str:
    """The database a sync engine of ``url`` connects to."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SELECT DATABASE()")).scalar_one())
    finally:
        engine.dispose()


def test_sqlalchemy_sync_engine(server: MariaDBServer) -> None:
    assert _connected_to(server.url(TEMPLATE)) == TEMPLATE


@pytest.mark.anyio
@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
async def test_sqlalchemy_async_engines(server: MariaDBServer, driver: str) -> None:
    engine = create_async_engine(server.url(TEMPLATE, driver=driver))
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT DATABASE()"))).scalar_one() == TEMPLATE
    finally:
        await engine.dispose()


def test_odd_database_names_are_quoted(server: MariaDBServer) -> None:
    name = "odd `name` with spaces"
    server.create_database(name)
    try:
        assert _connected_to(server.url(name)) == name
    finally:
        server.drop_database(name)
    assert not exists(server, name)


def test_drop_database_ends_its_sessions(server: MariaDBServer) -> None:
    server.create_database("to_drop")
    victim = server.connect("to_drop")
    try:
        with victim.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT)")
            victim.begin()
            cur.execute("INSERT INTO t VALUES (1)")  # holds a lock the drop would wait on
        server.drop_database("to_drop")
        assert not exists(server, "to_drop")
        with pytest.raises(pymysql.err.OperationalError), victim.cursor() as cur:
            cur.execute("SELECT 1")
    finally:
        victim.close()
    server.drop_database("to_drop")  # missing_ok by default
    with pytest.raises(pymysql.err.OperationalError):
        server.drop_database("to_drop", missing_ok=False)


def test_restart(server: MariaDBServer) -> None:
    port, pid = server.port, server.pid
    old = server.connect(TEMPLATE)
    try:
        server.restart()
        with pytest.raises(pymysql.err.OperationalError), old.cursor() as cur:
            cur.execute("SELECT 1")
    finally:
        old.close()
    assert server.port == port
    assert pid is not None
    assert gone(pid)
    assert server.pid not in (None, pid)
    assert scalar(server, f"SELECT version_num FROM {VERSION_TABLE}", TEMPLATE) == "5d7c3a1f0b42"


def test_settings_durable_and_stop_cleans_up() -> None:
    server = MariaDBServer({"default_time_zone": "+05:00"}, durable=True)
    try:
        server.start()
        root, pid = server.root, server.pid
        assert pid is not None
        (settings,) = rows(
            server, "SELECT @@time_zone, @@innodb_flush_log_at_trx_commit, @@innodb_doublewrite"
        )
        assert settings == ("+05:00", 1, 1)
    finally:
        server.stop()
    assert not root.exists()
    assert gone(pid)
    assert not server.running
    server.stop()  # idempotent


def test_start_retries_when_the_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        a_taken_port_first(monkeypatch, _mariadb) as (taken, offered),
        MariaDBServer() as server,
    ):
        assert offered[0] == taken
        assert server.port == offered[-1] != taken
        assert "Address already in use" in server.log_file.read_text()
        assert scalar(server, "SELECT 1") == 1


def run_child(body: str) -> tuple[subprocess.CompletedProcess[str], Path, int]:
    """A Python child that starts a server, prints its root and pid, then runs body."""
    start = """
        from tests.support.servers.mariadb import MariaDBServer
        server = MariaDBServer().start()
        print(server.root, server.pid, flush=True)
        """
    proc, (root, pid) = children.run_child(start, body)
    return proc, Path(root), int(pid)


def test_atexit_stops_a_forgotten_server() -> None:
    proc, root, pid = run_child("sys.exit(0)  # never calls stop()\n")
    assert proc.returncode == 0, proc.stderr
    assert not root.exists()
    assert gone(pid)


def test_sigterm_stops_the_server() -> None:
    proc, root, pid = run_child("os.kill(os.getpid(), signal.SIGTERM)\nsignal.pause()\n")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert not root.exists()
    assert gone(pid)


def test_the_server_of_a_killed_run_is_reaped(server: MariaDBServer) -> None:
    # SIGKILL skips every hook: the server and its directory outlive the run...
    proc, root, pid = run_child("os.kill(os.getpid(), signal.SIGKILL)\n")
    assert proc.returncode == -signal.SIGKILL
    try:
        assert not gone(pid)
        assert root.exists()
    finally:
        # ...until the next start() (or an explicit call) reaps it; a live run's is kept.
        removed = cleanup_stale_servers(root.parent)
    assert root in removed
    assert server.root not in removed
    assert not root.exists()
    assert gone(pid)
    assert scalar(server, "SELECT 1") == 1


def used(pool: DatabasePool, work: Callable[[Any], object]) -> str:
    """Take a database, do ``work`` with a cursor in it as a test would, give it back."""
    name = pool.take()
    with pool.server.connect(name) as conn, conn.cursor() as cur:
        work(cur)
    pool.give_back(name)
    return name


def test_a_copy_has_the_template_schema_and_kept_rows(pool: DatabasePool) -> None:
    name = used(pool, lambda cur: None)
    assert pool.take() == name  # the copy's schema equals the template's
    show = "SHOW CREATE TABLE scheduled_tasks_history"
    assert rows(pool.server, show, name) == rows(pool.server, show, TEMPLATE)
    assert rows(pool.server, "SHOW FULL TABLES", name) == rows(
        pool.server, "SHOW FULL TABLES", TEMPLATE
    )
    assert rows(pool.server, f"SELECT * FROM {VERSION_TABLE}", name) == [("5d7c3a1f0b42",)]
    assert rows(pool.server, f"SELECT * FROM {RECORD_TABLE}", name) == [(3, "queue")]
    assert rows(pool.server, "SELECT * FROM due_tasks", name) == []
    pool.give_back(name)


def write(cur: Any) -> None:
    cur.execute("INSERT INTO scheduled_tasks (task_name, due) VALUES ('t', NOW()), ('u', NULL)")
    cur.execute("INSERT INTO scheduled_tasks_history (task_id) VALUES (LAST_INSERT_ID())")
    cur.execute("DELETE FROM scheduled_tasks_history")  # its counter used, no row left


def test_a_written_database_is_wiped_and_handed_out_again(pool: DatabasePool) -> None:
    first = used(pool, write)
    name = pool.take()
    assert name == first
    assert (pool.created, pool.reused, pool.dropped) == (1, 1, 0)
    assert scalar(pool.server, "SELECT COUNT(*) FROM scheduled_tasks", name) == 0
    with pool.server.connect(name) as conn, conn.cursor() as cur:
        write(cur)  # the counters start again at 1
        cur.execute("SELECT MIN(id) FROM scheduled_tasks")
        assert cur.fetchone() == (1,)
        cur.execute("INSERT INTO scheduled_tasks_history (task_id) VALUES (1)")
        assert cur.lastrowid == 2
    assert rows(pool.server, f"SELECT * FROM {VERSION_TABLE}", name) == [("5d7c3a1f0b42",)]
    pool.give_back(name)
    assert pool.take() == name


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE app_orders (id INT)",
        "CREATE INDEX ix_extra ON scheduled_tasks (priority)",
        "DROP INDEX ix_scheduled_tasks_due ON scheduled_tasks",
        "ALTER TABLE scheduled_tasks ADD COLUMN extra INT",
        "ALTER TABLE scheduled_tasks ALTER COLUMN priority SET DEFAULT 7",
        "ALTER TABLE scheduled_tasks MODIFY task_name VARCHAR(100) CHARACTER SET utf8mb4",
        "ALTER TABLE scheduled_tasks COMMENT 'mine'",
        "ALTER TABLE scheduled_tasks_history DROP FOREIGN KEY fk_history_task",
        # the same foreign key but ON DELETE RESTRICT: the index stays, the rule changes
        "ALTER TABLE scheduled_tasks_history DROP FOREIGN KEY fk_history_task; ALTER TABLE"
        " scheduled_tasks_history ADD CONSTRAINT fk_history_task FOREIGN KEY (task_id)"
        " REFERENCES scheduled_tasks (id)",
        "CREATE OR REPLACE VIEW due_tasks AS SELECT id FROM scheduled_tasks",
        "CREATE TRIGGER tr BEFORE INSERT ON scheduled_tasks FOR EACH ROW SET NEW.priority = 1",
        "CREATE FUNCTION f() RETURNS INT RETURN 1",
        "CREATE SEQUENCE s",
        "ALTER DATABASE CHARACTER SET utf8mb4",
        f"UPDATE {VERSION_TABLE} SET version_num = 'elsewhere'",
        f"UPDATE {RECORD_TABLE} SET note = 'other'",
        "DROP DATABASE IF EXISTS {name}",
    ],
)
def test_a_changed_schema_is_dropped(pool: DatabasePool, change: str) -> None:
    name = pool.take()
    with pool.server.connect(name) as conn, conn.cursor() as cur:
        for statement in change.format(name=quote(name)).split("; "):
            cur.execute(statement)
    pool.give_back(name)
    assert (pool.reused, pool.dropped) == (0, 1)
    assert not exists(pool.server, name)
    assert pool.take() != name


def test_a_session_left_open_drops_it(pool: DatabasePool) -> None:
    name = pool.take()
    with pool.server.connect(name):  # still open when it is given back
        pool.give_back(name)
    assert not exists(pool.server, name)
    assert pool.dropped == 1
