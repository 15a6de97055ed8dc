"""``sqla-scheduler nodes`` and ``health --name``, and the functions behind them,
``nodes.list_nodes`` and ``health.check(name=...)``, on both databases."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import create_engine, insert

from sqla_scheduler import MissingTableError, Node, migrate
from sqla_scheduler.health import check
from sqla_scheduler.models import nodes_table, table_for
from sqla_scheduler.nodes import list_nodes
from tests.support.cli import cli_env, invoke, invoke_all, one_error_line

#: The revision before the one that made the nodes table.
BEFORE_NODES = "626b08d7d8ec"


def seed(url: str) -> datetime:
    """Two nodes: ``worker-1`` seen 5 seconds ago, ``worker-2`` seen 10 minutes ago.

    Returns when both started.
    """
    now = datetime.now(timezone.utc).replace(microsecond=0)
    started = now - timedelta(hours=1)
    common = {"host": "web-1", "started_at": started, "concurrency": 10, "version": "1.2.3"}
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                insert(nodes_table(table_for())),
                [
                    {**common, "name": "worker-1", "pid": 101, "running": 2,
                     "last_seen": now - timedelta(seconds=5)},
                    {**common, "name": "worker-2", "pid": 102, "running": 0,
                     "last_seen": now - timedelta(minutes=10)},
                ],
            )  # fmt: skip
    finally:
        engine.dispose()
    return started


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with no node in it."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    if request.param == "mariadb":
        return str(request.getfixturevalue("mariadb_url"))
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(db_url)
    return db_url


def test_nodes_lists_each_node_alive_or_stale(url: str) -> None:
    started = seed(url)
    table, as_json, patient = invoke_all(
        ("nodes", "--url", url),
        ("nodes", "--url", url, "--json"),
        ("nodes", "--url", url, "--node-heartbeat-interval", "5m"),
    )
    assert table.returncode == 0, table.stderr
    header, _rule, first, second = table.stdout.splitlines()
    assert header.split() == [
        "name", "state", "host", "pid", "started", "(UTC)", "last", "seen", "(UTC)", "seen",
        "concurrency", "running", "version",
    ]  # fmt: skip
    assert first.split()[:4] == ["worker-1", "alive", "web-1", "101"]
    assert first.split()[-3:] == ["10", "2", "1.2.3"]
    assert started.strftime("%Y-%m-%dT%H:%M:%SZ") in first
    assert re.search(r" \d+s ago ", first), first  # seconds: more than 9 on a loaded machine
    assert second.split()[:2] == ["worker-2", "stale"]
    assert re.search(r" 10m\d\ds ago ", second), second  # 10 minutes and the test's time

    assert as_json.returncode == 0, as_json.stderr
    listed = json.loads(as_json.stdout)
    assert [(n["name"], n["alive"]) for n in listed] == [("worker-1", True), ("worker-2", False)]
    assert set(listed[0]) == {
        "name", "alive", "host", "pid", "started_at", "last_seen", "concurrency", "running",
        "version", "heartbeat_interval_ms",
    }  # fmt: skip
    assert listed[0]["heartbeat_interval_ms"] is None  # seeded as a version before it wrote it
    assert datetime.fromisoformat(listed[1]["started_at"]) == started
    assert listed[0]["running"] == 2

    # Stale means three of the schedulers' intervals: at 5m, ten minutes is not yet.
    assert patient.returncode == 0, patient.stderr
    assert patient.stdout.splitlines()[3].split()[:2] == ["worker-2", "alive"]


def test_nodes_with_none_recorded_reads_database_url(url: str) -> None:
    done = invoke("nodes", env=cli_env(DATABASE_URL=url))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no nodes\n"


def test_health_with_name_requires_that_node_alive(url: str) -> None:
    seed(url)
    alive, stale, missing, bad_interval = invoke_all(
        ("health", "--url", url, "--name", "worker-1"),
        ("health", "--url", url, "--name", "worker-2"),
        ("health", "--url", url, "--name", "worker-9"),
        ("health", "--url", url, "--name", "worker-1", "--node-heartbeat-interval", "soon"),
    )
    assert alive.returncode == 0, alive.stderr
    assert re.fullmatch(
        r"the schema is at step (\d+) of \1 \(sqla_scheduler_alembic_version\); "
        r"scheduler 'worker-1' was last seen \d+s ago\n",
        alive.stdout,
    ), alive.stdout

    assert stale.returncode == 1
    assert re.fullmatch(
        r"sqla-scheduler: scheduler 'worker-2' was last seen 10m\d*s? ago, more than 3 "
        r"node_heartbeat_intervals of 30s: it was killed, hangs, or cannot reach the database",
        one_error_line(stale.stderr),
    ), stale.stderr

    assert missing.returncode == 1
    assert one_error_line(missing.stderr) == (
        "sqla-scheduler: no scheduler named 'worker-9' is recorded in 'scheduled_tasks_nodes': "
        "it has not started, stopped, or runs under another name"
    )

    assert bad_interval.returncode == 2
    assert "'soon' is not a duration" in bad_interval.stderr

    # The interval the schedulers run with, from their environment variable.
    patient = cli_env(SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL="5m")
    by_env = invoke("health", "--url", url, "--name", "worker-2", env=patient)
    assert by_env.returncode == 0, by_env.stderr
    assert "scheduler 'worker-2' was last seen 10m" in by_env.stdout


def test_health_json_with_name_has_the_node(url: str) -> None:
    """Issue 46, item 8: `health --json --name NAME` prints the node it found, as `nodes
    --json` does, or null."""
    seed(url)
    alive, missing = invoke_all(
        ("health", "--url", url, "--name", "worker-1", "--json"),
        ("health", "--url", url, "--name", "worker-9", "--json"),
    )
    assert (alive.returncode, alive.stderr) == (0, ""), alive.stderr
    found = json.loads(alive.stdout)
    assert found["healthy"] is True
    assert re.search(r"; scheduler 'worker-1' was last seen \d+s ago$", found["reason"]), found
    node = found["node"]
    assert (node["name"], node["alive"], node["pid"], node["running"]) == ("worker-1", True, 101, 2)
    assert node == json.loads(invoke("nodes", "--url", url, "--json").stdout)[0]
    assert (missing.returncode, missing.stderr) == (1, "")
    assert json.loads(missing.stdout)["node"] is None
    assert json.loads(missing.stdout)["reason"].startswith("no scheduler named 'worker-9'")


def test_list_nodes_and_check_tell_what_they_found(url: str) -> None:
    started = seed(url)
    first, second = list_nodes(url)
    assert isinstance(first, Node)
    assert (first.name, first.host, first.pid, first.alive) == ("worker-1", "web-1", 101, True)
    assert (first.started_at, first.concurrency, first.running) == (started, 10, 2)
    assert (second.name, second.alive) == ("worker-2", False)
    assert list_nodes(url, node_heartbeat_interval=timedelta(minutes=5))[1].alive

    found = check(url, name="worker-2")
    assert not found.healthy
    assert found.node == second
    assert check(url, name="worker-1").node == first
    assert check(url).node is None
    with pytest.raises(ValueError, match="node_heartbeat_interval must be more than zero"):
        list_nodes(url, node_heartbeat_interval=timedelta(0))


def test_a_schema_without_the_nodes_table(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    migrate.upgrade(url, BEFORE_NODES)
    with pytest.raises(MissingTableError, match="'scheduled_tasks_nodes' does not exist"):
        list_nodes(url)
    nodes, health = invoke_all(("nodes", "--url", url), ("health", "--url", url, "--name", "w"))
    assert nodes.returncode == 1
    assert "the table 'scheduled_tasks_nodes' does not exist" in one_error_line(nodes.stderr)
    assert health.returncode == 1  # the schema is behind: that is the reason given
    assert "the schema is behind" in one_error_line(health.stderr)
