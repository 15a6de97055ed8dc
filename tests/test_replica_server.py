"""The throwaway streaming replica the test suite can read the cluster's databases on."""

from __future__ import annotations

import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, make_url, text

from tests.support import children
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.postgres import PostgresCluster, cleanup_stale_clusters
from tests.support.servers.replica import DIR_PREFIX, PostgresReplica, PostgresReplicaError
from tests.test_postgres_cluster import _live_processes_mentioning


def database(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


def test_a_hot_standby_streaming_from_the_cluster(
    pg_replica: PostgresReplica, pg_cluster: PostgresCluster
) -> None:
    assert pg_replica.port != pg_cluster.port
    assert pg_replica.root.name.startswith(f"{DIR_PREFIX}replica-")
    with pg_replica.connect() as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    with pg_cluster.connect() as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        streaming = conn.execute(
            "SELECT state FROM pg_stat_replication r JOIN pg_replication_slots s"
            " ON s.active_pid = r.pid WHERE s.slot_name = %s",
            [pg_replica.slot_name],
        ).fetchall()
    assert streaming == [("streaming",)]


def test_committed_rows_are_on_the_replica_once_caught_up(
    pg_replica: PostgresReplica, replica_urls: tuple[str, str]
) -> None:
    """Each row, read right after the wait: the cluster commits asynchronously, so its
    commit may not even be written when the wait begins."""
    primary_url, replica_url = replica_urls
    primary, replica = create_engine(primary_url), create_engine(replica_url)
    try:
        with primary.connect() as conn:
            conn.execute(text("CREATE TABLE probe (n int)"))
            conn.commit()
        with primary.connect() as writer, replica.connect() as reader:
            for n in range(20):
                writer.execute(text("INSERT INTO probe VALUES (:n)"), {"n": n})
                writer.commit()
                pg_replica.wait_caught_up()
                assert reader.execute(text("SELECT max(n) FROM probe")).scalar_one() == n
                reader.rollback()  # a new snapshot for the next read
    finally:
        primary.dispose()
        replica.dispose()


def test_writes_on_the_replica_are_refused(
    pg_replica: PostgresReplica, replica_urls: tuple[str, str]
) -> None:
    with (
        pg_replica.connect(database(replica_urls[1])) as conn,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        conn.execute("CREATE TABLE refused (n int)")


def test_lag_is_small_right_after_catching_up(pg_replica: PostgresReplica) -> None:
    pg_replica.wait_caught_up()
    lag = pg_replica.lag()
    assert isinstance(lag, timedelta)
    assert timedelta(0) <= lag < timedelta(seconds=5)


def test_release_ends_the_replica_sessions_and_the_database_is_reused(
    pg_replica: PostgresReplica, pg_cluster: PostgresCluster, pg_databases: DatabasePool
) -> None:
    """What ``replica_urls`` does at teardown. The session it ends holds a lock on a table
    the wipe truncates: left there, it would hold up all replay for 30 s."""
    name, since = pg_databases.take()
    with pg_cluster.connect(name) as conn:
        conn.execute("INSERT INTO scheduled_tasks_paused VALUES ('probe', now())")
    pg_replica.wait_caught_up()
    with pg_replica.connect(name, autocommit=False) as held:
        assert held.execute("SELECT count(*) FROM scheduled_tasks_paused").fetchone() == (1,)
        pg_replica.release(name)
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
    dropped = pg_databases.dropped
    pg_databases.give_back(name, since)
    assert pg_databases.dropped == dropped
    pg_replica.wait_caught_up(deadline=5)  # the wipe's TRUNCATE replayed at once
    name_again, since = pg_databases.take()
    try:
        assert name_again == name
        with pg_replica.connect(name) as conn:
            assert conn.execute("SELECT count(*) FROM scheduled_tasks_paused").fetchone() == (0,)
    finally:
        pg_databases.give_back(name_again, since)


def test_a_database_dropped_on_the_primary_goes_from_the_replica(
    pg_replica: PostgresReplica, pg_cluster: PostgresCluster, pg_databases: DatabasePool
) -> None:
    """Even with a replica session in it: the replay of the drop ends that session."""
    name, since = pg_databases.take()
    with pg_cluster.connect(name) as conn:
        conn.execute("CREATE TABLE changed_catalogs ()")  # give_back drops it
    pg_replica.wait_caught_up()
    with pg_replica.connect(name, autocommit=False) as held:
        held.execute("SELECT count(*) FROM changed_catalogs")
        dropped = pg_databases.dropped
        pg_databases.give_back(name, since)
        assert pg_databases.dropped == dropped + 1
        pg_replica.wait_caught_up(deadline=5)
        with pytest.raises(psycopg.OperationalError):
            held.execute("SELECT 1")
    with pg_replica.connect() as conn:
        assert conn.execute("SELECT FROM pg_database WHERE datname = %s", [name]).rowcount == 0


def test_stop_leaves_no_directory_process_or_slot(pg_cluster: PostgresCluster) -> None:
    replica = PostgresReplica(pg_cluster)
    began = time.monotonic()
    try:
        replica.start()
        took = time.monotonic() - began
        root, slot = replica.root, replica.slot_name
        assert _live_processes_mentioning(root.name)  # postmaster, startup, walreceiver...
    finally:
        replica.stop()
    assert took < 30
    assert not root.exists()
    assert _live_processes_mentioning(root.name) == []
    with pg_cluster.connect() as conn:
        assert (
            conn.execute("SELECT FROM pg_replication_slots WHERE slot_name = %s", [slot]).fetchall()
            == []
        )
    assert not replica.running
    replica.stop()  # idempotent


def test_a_primary_without_replication_is_refused_with_why(tmp_path: Path) -> None:
    with PostgresCluster({"wal_level": "minimal", "max_wal_senders": 0}) as primary:
        # Refused before it runs anything as the postgres user, so tmp_path will do.
        replica = PostgresReplica(primary, base_dir=tmp_path)
        with pytest.raises(
            PostgresReplicaError, match=r"needs wal_level=replica, max_wal_senders > 0$"
        ):
            replica.start()
    assert not replica.running
    assert list(tmp_path.iterdir()) == []


def run_child(body: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """A Python child that starts a cluster and a replica of it, prints their roots, then
    runs body."""
    start = """
        from tests.support.servers.postgres import PostgresCluster
        from tests.support.servers.replica import PostgresReplica
        pg = PostgresCluster().start()
        replica = PostgresReplica(pg).start()
        print(replica.root, pg.root, flush=True)
        """
    proc, (root, cluster_root) = children.run_child(start, body)
    return proc, Path(root), Path(cluster_root)


def test_atexit_stops_a_forgotten_replica() -> None:
    proc, root, cluster_root = run_child("sys.exit(0)  # never calls stop()\n")
    assert proc.returncode == 0, proc.stderr
    for path in (root, cluster_root):
        assert not path.exists()
        assert _live_processes_mentioning(path.name) == []


def test_the_replica_of_a_killed_run_is_reaped(pg_replica: PostgresReplica) -> None:
    # SIGKILL skips every hook: the replica and its directory outlive the run...
    proc, root, cluster_root = run_child("os.kill(os.getpid(), signal.SIGKILL)\n")
    assert proc.returncode == -signal.SIGKILL
    try:
        assert _live_processes_mentioning(root.name)
    finally:
        # ...until the next start() of any cluster reaps it; a live run's is kept.
        removed = cleanup_stale_clusters(root.parent)
    assert {root, cluster_root} <= set(removed)
    assert pg_replica.root not in removed
    for path in (root, cluster_root):
        assert not path.exists()
        assert _live_processes_mentioning(path.name) == []
    pg_replica.wait_caught_up()
