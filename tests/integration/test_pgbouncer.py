"""Through PgBouncer in transaction mode, given nothing but its URL: LISTEN cannot hear
there, so the scheduler says so once and probes; psycopg's prepared statements break
there, so the scheduler stops preparing, once, and loses no work; and with ``listen_url``
on a direct connection, wake-ups come within milliseconds as without the pooler."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text

from sqla_scheduler import Scheduler, SchedulerConfig, one_time
from tests.support import wait_for
from tests.support.cli import invoke
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.pgbouncer import PgBouncer
from tests.support.servers.postgres import PostgresCluster

pytestmark = pytest.mark.anyio

_DEAF = "did not hear a NOTIFY sent to it"
_UNPREPARED = "PostgreSQL refused a prepared statement of the scheduler's"


@pytest.fixture
def small_pool(pg_cluster: PostgresCluster, pg_databases: DatabasePool) -> Iterator[str]:
    """A database behind a bouncer of its own that has two server connections for all its
    clients: the scheduler's connections take turns on them, as on a busy pooler."""
    name, since = pg_databases.take()
    try:
        with PgBouncer(pg_cluster, {"default_pool_size": 2}) as bouncer:
            yield bouncer.url(name)
            bouncer.release(name)
    finally:
        pg_databases.give_back(name, since)


def _recording(ran: list[str], done: threading.Event, expected: int) -> Any:
    def handler(ctx: Any) -> None:
        ran.append(ctx.instance_id)
        if len(ran) == expected:
            done.set()

    return one_time("job")(handler)


@pytest.mark.slow
async def test_given_only_the_poolers_url_no_work_is_lost_and_it_says_why_once(
    small_pool: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Slow by nature: the LISTEN check waits its 3 s before giving way, and each batch
    waits for the once-a-second probe, so that every statement runs past psycopg's fifth
    execution, when it prepares."""
    ran: list[str] = []
    done = threading.Event()
    task = _recording(ran, done, 60)
    engine = create_engine(small_pool)
    try:
        config = SchedulerConfig(polling_interval=timedelta(minutes=5), concurrency=4)
        scheduler = Scheduler(engine, [task], config)
        client = Scheduler(engine, [task])  # no loop: its commits wake nothing here
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            async with scheduler:
                await wait_for(lambda: _DEAF in caplog.text, deadline=15)
                for batch in range(6):  # each statement runs far more than psycopg's 5 times
                    instances = [task.instance(f"{batch}-{i}") for i in range(10)]
                    client.schedule_batch(engine, instances)
                    await wait_for(lambda b=batch: len(ran) == 10 * (b + 1), deadline=15)
                # while it runs, nothing it set is on the server connections other clients
                # get: both of them, each held in a transaction at once
                assert _settings_of_both(engine) == {("auto", "on")}
        assert sorted(ran) == sorted(f"{b}-{i}" for b in range(6) for i in range(10))
        messages = [r.getMessage() for r in caplog.records]
        assert sum(_DEAF in m for m in messages) == 1
        assert sum(_UNPREPARED in m for m in messages) == 1
        assert 'prepared statement "_pg3_' in next(m for m in messages if _UNPREPARED in m)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    finally:
        engine.dispose()


async def test_with_a_direct_listen_url_work_starts_within_milliseconds(
    pgbouncer_url: str, pg_cluster: PostgresCluster, caplog: pytest.LogCaptureFixture
) -> None:
    starts: list[float] = []
    heard = threading.Event()

    @one_time("job")
    def task(ctx: Any) -> None:
        starts.append(time.monotonic())
        heard.set()

    direct = pg_cluster.url(str(make_url(pgbouncer_url).database))
    engine = create_engine(pgbouncer_url, connect_args={"prepare_threshold": None})
    try:
        config = SchedulerConfig(
            polling_interval=timedelta(minutes=5),
            listen_url=direct,
            prepared_statements=False,
        )
        scheduler = Scheduler(engine, [task], config)
        client = Scheduler(engine, [task])
        lags: list[float] = []
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            async with scheduler:
                await wait_for(lambda: _listening(pg_cluster, direct) == 1)
                for i in range(10):
                    heard.clear()
                    committed = time.monotonic()
                    client.schedule(engine, task.instance(f"n{i}"))
                    await wait_for(heard.is_set, deadline=10)
                    lags.append(starts[-1] - committed)
        assert _DEAF not in caplog.text
        # the probe, once a second, would spread them over a second; only NOTIFY explains these
        assert sorted(lags)[len(lags) // 2] < 0.25, lags
    finally:
        engine.dispose()


def _listening(cluster: PostgresCluster, url: str) -> int:
    """The LISTEN connections open in the database ``url`` names, seen on the server."""
    with cluster.connect() as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity where datname = %s and query like 'LISTEN%%'",
            [make_url(url).database],
        ).fetchone()
    return int(row[0]) if row else 0


def _settings_of_both(engine: Any) -> set[tuple[str, str]]:
    """``plan_cache_mode`` and ``jit`` on each of a two-connection bouncer's server
    connections, seen by a client of its own."""
    with engine.connect() as one, engine.connect() as two:
        found = set()
        pids = set()
        for conn in (one, two):
            conn.begin()
            found.add((conn.scalar(text("show plan_cache_mode")), conn.scalar(text("show jit"))))
            pids.add(conn.scalar(text("select pg_backend_pid()")))
        assert len(pids) == 2  # the bouncer's two server connections
    return found


@pytest.mark.slow
def test_every_command_works_through_the_pooler(small_pool: str) -> None:
    """The commands prepare nothing: through a transaction-mode pooler whose server
    connections keep other clients' prepared statements, each one works (a prepared
    ``_pg3_0`` left by the last command used to fail the next one: issue 46, item 3)."""
    commands = [
        ("db", "downgrade", "base"),
        ("db", "upgrade"),
        ("db", "current"),
        ("db", "upgrade"),
        ("health",),
        ("executions",),
        ("nodes",),
    ]
    for args in [*commands, *commands]:
        done = invoke(*args, "--url", small_pool)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "prepared statement" not in done.stderr, (args, done.stderr)
