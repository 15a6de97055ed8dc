"""A scheduler whose reads go to a streaming replica (``read_engine``, ``--read-url``): the
admin page, the CLI's listings and ``result`` read there, and show what the replica has
replayed;
actions and scheduling write to the primary; the header shows the replica's lag."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine

from sqla_scheduler import Scheduler, one_time
from sqla_scheduler.admin import create_app
from tests.support.admin import PASSWORD, SECRET, TOKEN, USER, client_for
from tests.support.cli import cli_env, invoke
from tests.support.servers.replica import PostgresReplica

pytestmark = pytest.mark.anyio


@one_time("mail")
def mail(ctx: Any) -> None: ...


@pytest.fixture
def engines(replica_urls: tuple[str, str]) -> Iterator[tuple[Engine, Engine]]:
    primary, replica = (create_engine(url) for url in replica_urls)
    try:
        yield primary, replica
    finally:
        primary.dispose()
        replica.dispose()


@pytest.fixture
def replay_paused(pg_replica: PostgresReplica) -> Iterator[PostgresReplica]:
    """The replica, its replay paused for the test: what the primary commits meanwhile
    is not on it until ``resume_replay``."""
    with pg_replica.connect() as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    try:
        yield pg_replica
    finally:
        resume_replay(pg_replica)


def resume_replay(replica: PostgresReplica) -> None:
    with replica.connect() as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    replica.wait_caught_up()


async def test_the_admin_page_reads_the_replica_and_acts_on_the_primary(
    engines: tuple[Engine, Engine], replay_paused: PostgresReplica
) -> None:
    primary, replica = engines
    scheduler = Scheduler(primary, [mail], read_engine=replica)
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True, secret=SECRET)
    assert scheduler.schedule(primary, mail.instance("mail-0001"))  # committed on the primary
    async with client_for(app) as client:
        listing = (await client.get("/executions?state=all")).text
        assert "mail-0001" not in listing  # the replica has not replayed it
        assert re.search(r"replica \d+\.\d s behind", listing), listing[:2000]
        # an action writes to the primary: the replica refuses writes
        form = {"csrf": TOKEN, "task": "mail", "back": "/"}
        done = await client.post("/actions/pause", data=form)
        assert done.status_code == 303
        assert scheduler.paused_tasks(primary) == {"mail"}
        assert scheduler.paused_tasks(replica) == frozenset()
        resume_replay(replay_paused)
        listing = (await client.get("/executions?state=all")).text
        assert "mail-0001" in listing
        assert re.search(r"replica 0\.0 s behind", listing)
        assert scheduler.paused_tasks(replica) == {"mail"}


async def test_a_scheduler_without_a_replica_shows_no_lag(engines: tuple[Engine, Engine]) -> None:
    primary, _ = engines
    scheduler = Scheduler(primary, [mail])
    assert scheduler.read_engine is primary
    app = create_app(scheduler, username=USER, password=PASSWORD, secret=SECRET)
    async with client_for(app) as client:
        assert "behind" not in (await client.get("/")).text


def test_listings_of_the_command_line_read_the_replica(
    replica_urls: tuple[str, str], engines: tuple[Engine, Engine], replay_paused: PostgresReplica
) -> None:
    primary_url, replica_url = replica_urls
    primary, _ = engines
    assert Scheduler(primary, [mail]).schedule(primary, mail.instance("mail-0002"))
    env = cli_env(DATABASE_URL=primary_url)
    assert "mail-0002" in invoke("executions", env=env).stdout
    from_replica = invoke("executions", "--read-url", replica_url, env=env)
    assert from_replica.returncode == 0, from_replica.stderr
    assert "mail-0002" not in from_replica.stdout
    with_variable = invoke("executions", env={**env, "SQLA_SCHEDULER_READ_URL": replica_url})
    assert "mail-0002" not in with_variable.stdout
    resume_replay(replay_paused)
    assert "mail-0002" in invoke("executions", "--read-url", replica_url, env=env).stdout


@one_time("report", keep_result=True)
def report(ctx: Any) -> dict[str, int]:
    return {"pages": 3}


async def test_kept_results_are_read_on_the_replica(
    replica_urls: tuple[str, str], engines: tuple[Engine, Engine], replay_paused: PostgresReplica
) -> None:
    primary_url, replica_url = replica_urls
    primary, replica = engines
    scheduler = Scheduler(primary, [report], read_engine=replica)
    assert scheduler.schedule(primary, report.instance("rep-1"))
    assert await scheduler.run_due() == 1  # its result committed on the primary
    env = cli_env(DATABASE_URL=primary_url)
    app = create_app(scheduler, username=USER, password=PASSWORD)
    async with client_for(app) as client:
        assert (await client.get("/api/results")).json()["total"] == 0  # not replayed yet
        assert (
            invoke("result", "report", "rep-1", "--read-url", replica_url, env=env).returncode == 1
        )
        assert invoke("result", "report", "rep-1", env=env).returncode == 0  # the primary's
        resume_replay(replay_paused)
        listed = (await client.get("/api/results")).json()["results"]
        assert [(r["instance_id"], r["value_preview"]) for r in listed] == [
            ("rep-1", '{"pages": 3}')
        ]
    done = invoke(
        "result", "report", "rep-1", "--json", env={**env, "SQLA_SCHEDULER_READ_URL": replica_url}
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == {"pages": 3}


def test_a_read_engine_of_another_database_system_is_refused(
    engines: tuple[Engine, Engine],
) -> None:
    primary, _ = engines
    with pytest.raises(TypeError, match="a replica runs the same database system"):
        Scheduler(primary, [mail], read_engine=create_engine("sqlite://"))


def test_the_replica_refuses_writes_the_scheduler_never_sends_it(
    replica_urls: tuple[str, str],
) -> None:
    """What ``read_engine`` protects against: a write sent to the replica fails."""
    _, replica_url = replica_urls
    dsn = replica_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("DELETE FROM scheduled_tasks")
