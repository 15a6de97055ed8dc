"""LISTEN over a connection of its own (``listen_url``), and the check every new LISTEN
connection makes: a NOTIFY it sends itself through the engine's URL must reach it, else
the scheduler says so once and reads the earliest due time once a second instead."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import make_url, text

from sqla_scheduler import Scheduler, SchedulerConfig, one_time
from tests.support import Harness, wait_for
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.postgres import PostgresCluster

pytestmark = [pytest.mark.anyio, pytest.mark.postgres_only("LISTEN is PostgreSQL's")]

_DEAF = "did not hear a NOTIFY sent to it"


@pytest.fixture
def other_database(pg_cluster: PostgresCluster, pg_databases: DatabasePool) -> Iterator[str]:
    """The URL of another database on the same server: a LISTEN there hears none of the
    NOTIFYs sent in the test's database (what a pooler in transaction mode does to it)."""
    name, since = pg_databases.take()
    try:
        yield pg_cluster.url(name)
    finally:
        pg_databases.give_back(name, since)


def _listening(url: str) -> int:
    """The LISTEN connections open in the database ``url`` names."""
    import psycopg

    database = make_url(url).database
    with psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(False)) as c:
        row = c.execute(
            "select count(*) from pg_stat_activity where datname = %s and query like 'LISTEN%%'",
            [database],
        ).fetchone()
    return int(row[0]) if row else 0


def _job(ran: list[str], event: threading.Event) -> Any:
    def handler(ctx: Any) -> None:
        ran.append(ctx.instance_id)
        event.set()

    return one_time("job")(handler)


@pytest.mark.slow
async def test_a_listen_that_hears_nothing_says_so_once_and_probes(
    db: Harness, other_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Slow by nature: the check gives a LISTEN 3 s to hear its own NOTIFY before the
    scheduler gives way to the probe."""
    ran: list[str] = []
    event = threading.Event()
    task = _job(ran, event)
    config = SchedulerConfig(polling_interval=timedelta(minutes=5), listen_url=other_database)
    scheduler = Scheduler(db.engine, [task], config)
    # committed by a client with no running loop: nothing in the scheduler's process hears of it
    client = Scheduler(db.engine, [task])
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        async with scheduler:
            await wait_for(lambda: _DEAF in caplog.text, deadline=15)
            await wait_for(lambda: _listening(other_database) == 0)  # it stopped listening
            started = time.monotonic()
            await db.resolve(client.schedule(db.engine, task.instance("probed")))
            # with a five-minute poll, only the once-a-second probe explains this start
            await wait_for(event.is_set, deadline=10)
            assert time.monotonic() - started < 10
    assert ran == ["probed"]
    warned = [r for r in caplog.records if _DEAF in r.getMessage()]
    assert len(warned) == 1
    message = warned[0].getMessage()
    assert "listen_url (SQLA_SCHEDULER_LISTEN_URL)" in message
    assert str(make_url(other_database).database) in message  # where it listened


async def test_a_listen_url_to_the_same_database_hears_its_notifies(
    db: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """The same database by another name of the host: a separate URL, the same server."""
    ran: list[str] = []
    event = threading.Event()
    task = _job(ran, event)
    direct = make_url(db.url).set(host="localhost", drivername="postgresql+psycopg")
    listen_url = direct.render_as_string(hide_password=False)
    config = SchedulerConfig(polling_interval=timedelta(minutes=5), listen_url=listen_url)
    scheduler = Scheduler(db.engine, [task], config)
    client = Scheduler(db.engine, [task])
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        async with scheduler:
            await wait_for(lambda: _listening(db.url) == 1)
            with db.sync_engine.connect() as conn:  # the LISTEN came from the other host name
                clients = conn.scalar(
                    text(
                        "select count(*) from pg_stat_activity where datname ="
                        " current_database() and query like 'LISTEN%' and client_addr is not null"
                    )
                )
            assert clients == 1
            await db.resolve(client.schedule(db.engine, task.instance("heard")))
            await wait_for(event.is_set, deadline=10)
    assert ran == ["heard"]
    assert _DEAF not in caplog.text
