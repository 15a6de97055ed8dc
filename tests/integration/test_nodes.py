"""Nodes: a running scheduler records itself in the nodes table at start and every
``node_heartbeat_interval``, removes itself on a clean stop, and ``Scheduler.nodes`` lists
it, alive for three intervals after it was last seen."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import text

from sqla_scheduler import (
    DatabaseClock,
    ManualClock,
    Node,
    Scheduler,
    SchedulerConfig,
    one_time,
)
from tests.concurrency.app import SkewedClock
from tests.support import NOW, Harness, services, wait_for

pytestmark = pytest.mark.anyio

#: Short enough for a beat to come within a test, in real time; the manual clock decides
#: what each beat writes and whether a node is alive.
BEAT = timedelta(milliseconds=50)


def observer(db: Harness, clock: ManualClock, interval: timedelta = BEAT) -> Any:
    """A client on the test's sync engine, for ``wait_for`` conditions in every mode."""
    config = SchedulerConfig(scheduler_name="observer", node_heartbeat_interval=interval)
    client = Scheduler(db.sync_engine, config=config, clock=clock)
    return lambda: client.nodes(db.sync_engine)


async def test_a_running_scheduler_records_itself_and_a_clean_stop_removes_it(
    db: Harness, clock: ManualClock
) -> None:
    scheduler = db.scheduler([], clock, concurrency=3, node_heartbeat_interval=BEAT)
    async with scheduler:
        # recorded before the loop reports it runs
        nodes = await db.resolve(scheduler.nodes(db.engine))
        assert nodes == [
            Node(
                name="test-worker",
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=NOW,
                last_seen=NOW,
                concurrency=3,
                running=0,
                version=importlib.metadata.version("sqla-scheduler"),
                alive=True,
                heartbeat_interval=BEAT,
            )
        ]
        later = clock.advance(timedelta(seconds=10))
        nodes_now = observer(db, clock)
        await wait_for(lambda: nodes_now()[0].last_seen == later)
        (node,) = nodes_now()
        assert node.started_at == NOW
        assert node.alive
    assert await db.resolve(scheduler.nodes(db.engine)) == []


async def test_running_counts_the_handlers_running_now(db: Harness, clock: ManualClock) -> None:
    release = anyio.Event()

    @one_time("slow")
    async def slow(ctx: Any) -> None:
        await release.wait()

    scheduler = db.scheduler([slow], clock, node_heartbeat_interval=BEAT)
    nodes_now = observer(db, clock)
    async with scheduler:
        await db.resolve(scheduler.schedule(db.engine, slow.instance("s1")))
        await wait_for(lambda: nodes_now()[0].running == 1)
        release.set()
        await wait_for(lambda: nodes_now()[0].running == 0)


async def test_a_node_is_alive_for_three_intervals_after_it_was_last_seen(
    db: Harness, clock: ManualClock
) -> None:
    interval = timedelta(seconds=30)  # no beat comes while the test runs
    scheduler = db.scheduler([], clock, node_heartbeat_interval=interval)
    async with scheduler:
        clock.advance(3 * interval)
        (node,) = await db.resolve(scheduler.nodes(db.engine))
        assert node.last_seen == NOW
        assert node.alive
        clock.advance(timedelta(seconds=1))
        (node,) = await db.resolve(scheduler.nodes(db.engine))
        assert not node.alive
        # Judged by its own interval: a reader configured with a minute agrees.
        assert not observer(db, clock, timedelta(minutes=1))()[0].alive


async def test_a_failed_write_of_its_row_only_logs(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []
    job = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([job], clock, node_heartbeat_interval=BEAT)
    with db.sync_engine.begin() as conn:
        conn.execute(text("DROP TABLE scheduled_tasks_nodes"))
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        async with scheduler:
            await db.resolve(scheduler.schedule(db.engine, job.instance("j1")))
            await wait_for(lambda: ran == ["j1"])
            await wait_for(lambda: "recording scheduler 'test-worker'" in caplog.text)
    assert "recording scheduler 'test-worker' in the nodes table failed: " in caplog.text
    assert "could not remove scheduler 'test-worker' from the nodes table" in caplog.text
    assert db.row("job", "j1") is None


async def test_a_scheduler_removes_only_the_row_it_wrote(db: Harness, clock: ManualClock) -> None:
    first = db.scheduler([], clock, node_heartbeat_interval=BEAT)
    second = db.scheduler([], clock, node_heartbeat_interval=BEAT)  # the same name
    async with services(first) as old, services(second) as new:
        assert await old.node.run_once()
        clock.advance(timedelta(minutes=1))
        assert await new.node.run_once()  # started again under the name: replaces the row
        (node,) = await db.resolve(first.nodes(db.engine))
        assert node.started_at == node.last_seen == NOW + timedelta(minutes=1)
        assert not await old.node.remove()
        assert len(await db.resolve(first.nodes(db.engine))) == 1
        assert await new.node.remove()
    assert await db.resolve(first.nodes(db.engine)) == []


async def test_run_due_records_no_node(db: Harness, clock: ManualClock) -> None:
    job = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([job], clock)
    await db.resolve(scheduler.schedule(db.engine, job.instance("j1")))
    assert await scheduler.run_due() == 1
    assert await db.resolve(scheduler.nodes(db.engine)) == []


async def test_nodes_takes_a_session_too(db: Harness, clock: ManualClock) -> None:
    scheduler = db.scheduler([], clock)
    async with scheduler, db.session() as session:
        (node,) = await db.resolve(scheduler.nodes(session))
        assert node.name == "test-worker"
        await db.rollback(session)


async def test_maintenance_forgets_a_node_not_seen_for_a_day(
    db: Harness, clock: ManualClock
) -> None:
    killed = db.scheduler([], clock, scheduler_name="killed", node_heartbeat_interval=BEAT)
    alive = db.scheduler([], clock, scheduler_name="alive", node_heartbeat_interval=BEAT)
    async with services(killed) as dead, services(alive) as live:
        assert await dead.node.run_once()  # and never again, nor removed: it was killed
        clock.advance(timedelta(days=1))
        assert await live.node.run_once()
        assert await live.maintenance.forget_nodes_once() == 0  # a day exactly: kept
        clock.advance(timedelta(seconds=1))
        assert await live.maintenance.forget_nodes_once() == 1
        assert [n.name for n in await db.resolve(alive.nodes(db.engine))] == ["alive"]


async def test_a_node_is_judged_by_its_own_interval(db: Harness, clock: ManualClock) -> None:
    """A worker beating every second is not alive for a client configured with 30 s (it
    would be for 90 s after it was killed), and a row written before the interval was
    recorded is judged by the reader's."""
    worker = db.scheduler([], clock, node_heartbeat_interval=timedelta(seconds=1))
    async with services(worker) as runner:
        assert await runner.node.run_once()  # last seen NOW, then killed
    reader = observer(db, clock, timedelta(seconds=30))
    clock.advance(timedelta(seconds=3))
    assert reader()[0].alive
    clock.advance(timedelta(milliseconds=1))
    (node,) = reader()
    assert not node.alive
    assert node.heartbeat_interval == timedelta(seconds=1)
    with db.sync_engine.begin() as conn:  # as a version before the column wrote it
        conn.execute(text("update scheduled_tasks_nodes set heartbeat_interval_ms = null"))
    (node,) = reader()
    assert (node.heartbeat_interval, node.alive) == (None, True)


async def test_a_node_is_judged_on_the_databases_time(db: Harness) -> None:
    """A client whose machine clock is an hour ahead, and whose scheduler never ran (its
    ``DatabaseClock`` never measured), still sees a live worker alive."""
    if db.is_sqlite:
        pytest.skip("SQLite's time is the machine's")
    worker = db.scheduler([], node_heartbeat_interval=timedelta(seconds=1))
    async with services(worker) as runner:
        await runner.maintenance.sync_clock()
        assert await runner.node.run_once()
    ahead = DatabaseClock(SkewedClock(timedelta(hours=1)))
    config = SchedulerConfig(scheduler_name="client")
    client = Scheduler(db.sync_engine, config=config, clock=ahead)
    (node,) = client.nodes(db.sync_engine)
    assert node.alive
