"""The throwaway PgBouncer the test suite puts in front of its PostgreSQL cluster."""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support import children
from tests.support.children import gone
from tests.support.ports import a_taken_port_first
from tests.support.servers import pgbouncer as _pgbouncer
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.pgbouncer import (
    DIR_PREFIX,
    PgBouncer,
    PgBouncerError,
    cleanup_stale_bouncers,
)
from tests.support.servers.postgres import PostgresCluster, cleanup_stale_clusters


@pytest.fixture
def one_server_connection(pg_cluster: PostgresCluster) -> Iterator[PgBouncer]:
    """A bouncer of the test's own with one server connection per database.

    Were it in session mode, a second client would wait for the first to leave: a wait
    cut to seconds, so that such a test fails rather than hangs.
    """
    with PgBouncer(pg_cluster, {"default_pool_size": 1, "query_wait_timeout": 5}) as bouncer:
        yield bouncer


def sessions(cluster: PostgresCluster, dbname: str) -> int:
    with cluster.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [dbname]
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_settings_for_a_test_bouncer(pgbouncer: PgBouncer) -> None:
    config = pgbouncer.config()
    assert {key: config[key] for key in ("listen_addr", "listen_port", "unix_socket_dir")} == {
        "listen_addr": "127.0.0.1",
        "listen_port": str(pgbouncer.port),
        "unix_socket_dir": str(pgbouncer.root),
    }
    assert {
        key: config[key]
        for key in (
            "pool_mode",
            "auth_type",
            "max_client_conn",
            "default_pool_size",
            "ignore_startup_parameters",
        )
    } == {
        "pool_mode": "transaction",
        "auth_type": "trust",
        "max_client_conn": "500",
        "default_pool_size": "20",
        "ignore_startup_parameters": "extra_float_digits,options",
    }
    assert pgbouncer.root.name.startswith(DIR_PREFIX)


def test_runs_as_the_postgres_user_when_root(pgbouncer: PgBouncer) -> None:
    assert pgbouncer.pid is not None
    status = Path(f"/proc/{pgbouncer.pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    expected = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    assert pwd.getpwuid(uid).pw_name == expected


def test_sqlalchemy_engine_through_the_bouncer(
    pgbouncer: PgBouncer, pg_cluster: PostgresCluster, pgbouncer_url: str
) -> None:
    url = make_url(pgbouncer_url)
    assert url.port == pgbouncer.port != pg_cluster.port
    engine = create_engine(pgbouncer_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
            row = conn.execute(text("SELECT current_database(), inet_server_port()")).one()
    finally:
        engine.dispose()
    assert tuple(row) == (url.database, pg_cluster.port)
    assert url.database in {row[0] for row in pgbouncer.admin("SHOW POOLS")}


@pytest.mark.anyio
async def test_async_engine_through_the_bouncer(pgbouncer: PgBouncer, pgbouncer_url: str) -> None:
    url = make_url(pgbouncer_url).set(drivername="postgresql+psycopg_async")
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT current_database()"))).scalar_one() == (
                url.database
            )
    finally:
        await engine.dispose()


def test_clients_share_a_server_connection(
    one_server_connection: PgBouncer, pg_cluster: PostgresCluster
) -> None:
    """Two clients at once on one server connection: each has it for a transaction only,
    and a session setting one of them made is there for the other."""
    bouncer = one_server_connection
    with bouncer.connect() as a, bouncer.connect() as b:
        first = a.execute(
            "SELECT pg_backend_pid(), set_config('sqla_scheduler.probe', 'a', false)"
        ).fetchone()
        second = b.execute(
            "SELECT pg_backend_pid(), current_setting('sqla_scheduler.probe', true)"
        ).fetchone()
    assert first is not None
    assert second == (first[0], "a")


def test_one_client_moves_between_server_connections(
    pgbouncer: PgBouncer, pgbouncer_url: str
) -> None:
    """A client's next statement goes to whichever server connection is free: when another
    client holds the one it had, to another."""
    name = make_url(pgbouncer_url).database
    assert name is not None
    with pgbouncer.connect(name) as a, pgbouncer.connect(name, autocommit=False) as holder:
        before = a.execute("SELECT pg_backend_pid()").fetchone()
        held = holder.execute("SELECT pg_backend_pid()").fetchone()  # in a transaction
        after = a.execute("SELECT pg_backend_pid()").fetchone()
        holder.rollback()
    assert before == held != after


def test_release_ends_the_server_sessions_of_a_database(
    pgbouncer: PgBouncer, pg_cluster: PostgresCluster, pgbouncer_url: str
) -> None:
    name = make_url(pgbouncer_url).database
    assert name is not None
    with pgbouncer.connect(name) as conn:
        conn.execute("SELECT 1")
    assert sessions(pg_cluster, name) == 1  # pooled, for the next client
    pgbouncer.release(name)
    assert sessions(pg_cluster, name) == 0
    with pgbouncer.connect(name) as conn:  # and the database is served again
        assert conn.execute("SELECT current_database()").fetchone() == (name,)


def test_a_database_used_through_it_is_reused(
    pgbouncer: PgBouncer, pg_databases: DatabasePool
) -> None:
    """What ``pgbouncer_url`` does at teardown: the bouncer's pooled sessions would have
    the database dropped rather than wiped."""
    name, since = pg_databases.take()
    with pgbouncer.connect(name) as conn:
        conn.execute("SELECT 1")
    dropped = pg_databases.dropped
    pgbouncer.release(name)
    pg_databases.give_back(name, since)
    assert pg_databases.dropped == dropped
    name_again, since = pg_databases.take()
    pg_databases.give_back(name_again, since)
    assert name_again == name


def test_a_setting_it_refuses_fails_start_with_its_log(pg_cluster: PostgresCluster) -> None:
    bouncer = PgBouncer(pg_cluster, {"pool_mode": "sometimes"})
    with pytest.raises(
        PgBouncerError, match='invalid value "sometimes" for parameter pool_mode'
    ) as failed:
        bouncer.start()
    assert not bouncer.running
    log = re.search(r"its log \((\S+)\)", str(failed.value))
    assert log is not None
    assert not Path(log[1]).parent.exists()  # its directory is removed all the same


def test_start_retries_when_the_port_is_taken(
    monkeypatch: pytest.MonkeyPatch, pg_cluster: PostgresCluster
) -> None:
    """PgBouncer only warns when it cannot bind its port, and serves its socket alone."""
    with (
        a_taken_port_first(monkeypatch, _pgbouncer) as (taken, offered),
        PgBouncer(pg_cluster) as bouncer,
    ):
        assert offered[0] == taken
        assert bouncer.port == offered[-1] != taken
        assert "Address already in use" in bouncer.log_file.read_text()
        with psycopg.connect(bouncer.dsn(), connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_settings_and_stop_cleans_up(pg_cluster: PostgresCluster) -> None:
    bouncer = PgBouncer(pg_cluster, {"pool_mode": "session", "default_pool_size": 3})
    try:
        bouncer.start()
        root, pid = bouncer.root, bouncer.pid
        assert pid is not None
        config = bouncer.config()
        assert (config["pool_mode"], config["default_pool_size"]) == ("session", "3")
    finally:
        bouncer.stop()
    assert not root.exists()
    assert gone(pid)
    assert not bouncer.running
    bouncer.stop()  # idempotent


def run_child(body: str) -> tuple[subprocess.CompletedProcess[str], Path, int, Path]:
    """A Python child that starts a cluster and a bouncer in front of it, prints the
    bouncer's root and pid and the cluster's root, then runs body."""
    start = """
        from tests.support.servers.pgbouncer import PgBouncer
        from tests.support.servers.postgres import PostgresCluster
        pg = PostgresCluster().start()
        bouncer = PgBouncer(pg).start()
        print(bouncer.root, bouncer.pid, pg.root, flush=True)
        """
    proc, (root, pid, cluster_root) = children.run_child(start, body)
    return proc, Path(root), int(pid), Path(cluster_root)


def test_atexit_stops_a_forgotten_bouncer() -> None:
    proc, root, pid, cluster_root = run_child("sys.exit(0)  # never calls stop()\n")
    assert proc.returncode == 0, proc.stderr
    assert not root.exists()
    assert gone(pid)
    assert not cluster_root.exists()


def test_the_bouncer_of_a_killed_run_is_reaped(pgbouncer: PgBouncer) -> None:
    # SIGKILL skips every hook: the bouncer and its directory outlive the run...
    proc, root, pid, cluster_root = run_child("os.kill(os.getpid(), signal.SIGKILL)\n")
    assert proc.returncode == -signal.SIGKILL
    try:
        assert not gone(pid)
        assert root.exists()
    finally:
        # ...until the next start() (or an explicit call) reaps it; a live run's is kept.
        removed = cleanup_stale_bouncers(root.parent)
        cleanup_stale_clusters(cluster_root.parent)
    assert root in removed
    assert pgbouncer.root not in removed
    assert not root.exists()
    assert gone(pid)
    assert not cluster_root.exists()
    with pgbouncer.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
