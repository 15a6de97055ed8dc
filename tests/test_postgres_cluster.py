"""End-to-end checks of the throwaway PostgreSQL cluster used by the test suite."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.support import children
from tests.support.ports import a_taken_port_first
from tests.support.servers import postgres as _postgres
from tests.support.servers.postgres import (
    DIR_PREFIX,
    PostgresCluster,
    cleanup_stale_clusters,
    find_pg_bin,
)

# In one pytest-xdist worker: one cluster of the module's own, started once.
pytestmark = pytest.mark.xdist_group("own-cluster")


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """A cluster of this module's own, separate from any session-wide one."""
    pg = PostgresCluster()
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _scalar(pg: PostgresCluster, query: str, dbname: str = "postgres") -> object:
    with pg.connect(dbname) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _live_processes_mentioning(needle: str) -> list[tuple[int, str]]:
    """Non-zombie processes whose command line (or server process title) has needle."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if needle in cmdline and int(entry.name) != os.getpid():
            found.append((int(entry.name), cmdline))
    return found


def test_find_pg_bin() -> None:
    bin_dir = find_pg_bin()
    assert bin_dir is not None
    for name in ("initdb", "pg_ctl", "postgres"):
        assert os.access(bin_dir / name, os.X_OK)


def test_listens_on_loopback_only(cluster: PostgresCluster) -> None:
    assert cluster.host == "127.0.0.1"
    assert _scalar(cluster, "SHOW listen_addresses") == "127.0.0.1"
    assert _scalar(cluster, "SHOW port") == str(cluster.port)
    assert _scalar(cluster, "SHOW unix_socket_directories") == str(cluster.socket_dir)
    assert cluster.data_dir.is_dir()
    assert cluster.root.name.startswith(DIR_PREFIX)


def test_fast_settings(cluster: PostgresCluster) -> None:
    assert _scalar(cluster, "SHOW fsync") == "off"
    assert _scalar(cluster, "SHOW synchronous_commit") == "off"
    assert _scalar(cluster, "SHOW full_page_writes") == "off"
    assert _scalar(cluster, "SHOW max_connections") == "300"
    assert _scalar(cluster, "SHOW server_encoding") == "UTF8"


def test_psycopg_connect(cluster: PostgresCluster) -> None:
    cluster.create_database("raw_psycopg")
    try:
        with psycopg.connect(cluster.dsn("raw_psycopg")) as conn:
            row = conn.execute("select version(), current_database(), current_user").fetchone()
        assert row is not None
        version, db, user = row
        assert version.startswith("PostgreSQL ")
        assert (db, user) == ("raw_psycopg", "postgres")
    finally:
        cluster.drop_database("raw_psycopg")


def test_sqlalchemy_sync_engine(cluster: PostgresCluster) -> None:
    cluster.create_database("sa_sync")
    engine = create_engine(cluster.url("sa_sync"))
    try:
        assert engine.url.drivername == "postgresql+psycopg"
        with engine.connect() as conn:
            version = conn.execute(text("select version()")).scalar_one()
            db = conn.execute(text("select current_database()")).scalar_one()
        assert version.startswith("PostgreSQL ")
        assert db == "sa_sync"
    finally:
        engine.dispose()
        cluster.drop_database("sa_sync")


@pytest.mark.anyio
async def test_sqlalchemy_async_engine(cluster: PostgresCluster) -> None:
    cluster.create_database("sa_async")
    engine = create_async_engine(cluster.url("sa_async"))
    try:
        async with engine.connect() as conn:
            version = (await conn.execute(text("select version()"))).scalar_one()
            db = (await conn.execute(text("select current_database()"))).scalar_one()
        assert version.startswith("PostgreSQL ")
        assert db == "sa_async"
    finally:
        await engine.dispose()
        cluster.drop_database("sa_async")


def test_database_names_are_quoted(cluster: PostgresCluster) -> None:
    name = 'Odd "name"/with spaces'
    cluster.create_database(name)
    engine = create_engine(cluster.url(name))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("select current_database()")).scalar_one() == name
        assert _scalar(cluster, "select current_database()", dbname=name) == name
    finally:
        engine.dispose()
        cluster.drop_database(name)


@pytest.mark.parametrize("strategy", [None, "wal_log", "file_copy"])
def test_create_database_from_template(
    cluster: PostgresCluster, strategy: Literal["wal_log", "file_copy"] | None
) -> None:
    template, clone = f"tmpl_{strategy}", f"clone_{strategy}"
    cluster.create_database(template)
    try:
        with cluster.connect(template) as conn:
            conn.execute("create table things (id int primary key, name text not null)")
            conn.execute("insert into things values (1, 'from the template')")
        cluster.create_database(clone, template=template, strategy=strategy)
        with cluster.connect(clone) as conn:
            rows = conn.execute("select id, name from things").fetchall()
            conn.execute("insert into things values (2, 'only in the clone')")
        assert rows == [(1, "from the template")]
        assert _scalar(cluster, "select count(*) from things", dbname=template) == 1
    finally:
        cluster.drop_database(clone)
        cluster.drop_database(template)


def test_drop_database(cluster: PostgresCluster) -> None:
    cluster.create_database("to_drop")
    # An open connection does not block the drop (WITH (FORCE)); it gets terminated.
    victim = cluster.connect("to_drop")
    try:
        cluster.drop_database("to_drop")
        exists = _scalar(cluster, "select count(*) from pg_database where datname = 'to_drop'")
        assert exists == 0
        with pytest.raises(psycopg.OperationalError):
            victim.execute("select 1")
    finally:
        victim.close()
    cluster.drop_database("to_drop")  # missing_ok by default
    with pytest.raises(psycopg.errors.InvalidCatalogName):
        cluster.drop_database("to_drop", missing_ok=False)


def test_restart(cluster: PostgresCluster) -> None:
    cluster.create_database("survives_restart")
    port, pid_before = cluster.port, cluster.postmaster_pid()
    old = cluster.connect()
    try:
        cluster.restart()
        with pytest.raises(psycopg.OperationalError):
            old.execute("select 1")
    finally:
        old.close()
    assert cluster.port == port
    assert cluster.postmaster_pid() not in (None, pid_before)
    assert _scalar(cluster, "select 1", dbname="survives_restart") == 1
    assert _scalar(cluster, "SHOW listen_addresses") == "127.0.0.1"
    assert _scalar(cluster, "SHOW fsync") == "off"
    cluster.drop_database("survives_restart")


def test_pg_ctl_status(cluster: PostgresCluster) -> None:
    result = cluster.pg_ctl("status")
    assert "server is running" in result.stdout


def test_durable_settings_and_stop_cleans_up() -> None:
    pg = PostgresCluster({"work_mem": "8MB", "application_name": "two words"}, durable=True)
    try:
        pg.start()
        root, name, postmaster = pg.root, pg.cluster_name, pg.postmaster_pid()
        assert postmaster is not None
        assert _scalar(pg, "SHOW fsync") == "on"
        assert _scalar(pg, "SHOW synchronous_commit") == "on"
        assert _scalar(pg, "SHOW full_page_writes") == "on"
        assert _scalar(pg, "SHOW work_mem") == "8MB"
        # application_name is overridden per connection by libpq; check the server default
        assert _scalar(pg, "select reset_val from pg_settings where name = 'application_name'") == (
            "two words"
        )
        assert _live_processes_mentioning(name), "server processes carry the cluster name"
    finally:
        pg.stop()
    assert not root.exists()
    assert children.gone(postmaster)
    assert _live_processes_mentioning(name) == []
    assert _live_processes_mentioning(str(root)) == []
    assert not pg.running
    pg.stop()  # idempotent


def test_start_retries_when_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    with a_taken_port_first(monkeypatch, _postgres) as (taken, offered):
        pg = PostgresCluster()
        try:
            pg.start()
            assert offered[0] == taken
            assert pg.port == offered[-1] != taken
            assert "could not bind" in pg.log_file.read_text()
            assert _scalar(pg, "select 1") == 1
        finally:
            pg.stop()


def _run_child(body: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run a Python child that starts a cluster, prints its root, then does body."""
    start = """
        from tests.support.servers.postgres import PostgresCluster
        pg = PostgresCluster().start()
        print(pg.root, flush=True)
        """
    proc, (root,) = children.run_child(start, body)
    return proc, Path(root)


def test_atexit_stops_forgotten_cluster() -> None:
    proc, root = _run_child("sys.exit(0)  # never calls stop()\n")
    assert proc.returncode == 0, proc.stderr
    assert not root.exists()
    assert _live_processes_mentioning(root.name) == []


def test_sigterm_stops_cluster() -> None:
    proc, root = _run_child("os.kill(os.getpid(), signal.SIGTERM)\nimport time; time.sleep(30)\n")
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert not root.exists()
    assert _live_processes_mentioning(root.name) == []


def test_cluster_of_killed_run_is_reaped() -> None:
    # SIGKILL skips every hook: the server and its directory survive the crashed run...
    proc, root = _run_child("os.kill(os.getpid(), signal.SIGKILL)\n")
    assert proc.returncode == -signal.SIGKILL
    try:
        assert (root / "data" / "postmaster.pid").exists()
        assert _live_processes_mentioning(root.name)
    finally:
        # ...until the next start() (or an explicit call) reaps it.
        removed = cleanup_stale_clusters(root.parent)
    assert root in removed
    assert not root.exists()
    assert _live_processes_mentioning(root.name) == []


def test_live_clusters_are_not_reaped(cluster: PostgresCluster) -> None:
    removed = cleanup_stale_clusters(cluster.root.parent)
    assert cluster.root not in removed
    assert cluster.root.exists()
    assert _scalar(cluster, "select 1") == 1
