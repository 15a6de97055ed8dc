"""Transactional scheduling through every kind of target, sync and async."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pydantic
import pytest
from sqlalchemy import Connection, Engine, create_engine, event, insert, text, update
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sqla_scheduler import ManualClock, Scheduler, one_time
from sqla_scheduler._dialects import read_notice
from sqla_scheduler.exceptions import PayloadError, TaskDefinitionError
from tests.support import NOW, Harness

# the core of scheduling and running also runs through PgBouncer in transaction mode
# (the sync-pgbouncer case, given nothing but the bouncer's URL), not every module again
pytestmark = [pytest.mark.anyio, pytest.mark.databases(pgbouncer=True)]


@one_time("send-email")
def send_email(ctx: Any) -> None:
    pass


@dataclasses.dataclass
class Invoice:
    number: int
    lines: list[str]


class Refund(pydantic.BaseModel):
    order_id: int
    amount_cents: int


@one_time("invoice", payload_type=Invoice)
def invoice(ctx: Any) -> None:
    pass


@one_time("refund", payload_type=Refund)
def refund(ctx: Any) -> None:
    pass


@pytest.fixture
def scheduler(db: Harness, clock: ManualClock) -> Scheduler:
    return Scheduler(db.engine, tasks=[send_email, invoice, refund], clock=clock)


class Target:
    """A scheduling target of one kind, with the commit/rollback that goes with it."""

    def __init__(self, obj: Any, commit: Callable[[], Any], rollback: Callable[[], Any]):
        self.obj = obj
        self.commit = commit
        self.rollback = rollback


@asynccontextmanager
async def open_target(db: Harness, kind: str) -> AsyncIterator[Target]:
    engine = db.engine
    if kind == "session":
        async with db.session() as session:
            yield Target(session, session.commit, session.rollback)
    elif kind == "connection":
        if isinstance(engine, AsyncEngine):
            async with engine.connect() as aconn:
                yield Target(aconn, aconn.commit, aconn.rollback)
        else:
            with engine.connect() as conn:
                yield Target(conn, conn.commit, conn.rollback)
    else:
        yield Target(engine, lambda: None, lambda: None)


@pytest.mark.parametrize("kind", ["session", "connection", "engine"])
async def test_schedule_commits_with_the_caller(db: Harness, scheduler: Scheduler, kind: str):
    async with open_target(db, kind) as target:
        inserted = await db.resolve(
            scheduler.schedule(target.obj, send_email.instance("e-1", {"to": "a@example.com"}))
        )
        assert inserted is True
        if kind != "engine":
            assert db.count() == 0, "visible before the caller committed"
        await db.resolve(target.commit())
    assert db.count() == 1
    execution = await db.resolve(scheduler.get_execution(db.engine, "send-email", "e-1"))
    assert execution.data == {"to": "a@example.com"}
    assert execution.execution_time == NOW
    assert execution.picked is False
    assert execution.version == 1
    assert execution.consecutive_failures == 0


@pytest.mark.parametrize("kind", ["session", "connection"])
async def test_rolled_back_caller_schedules_nothing(db: Harness, scheduler: Scheduler, kind: str):
    async with open_target(db, kind) as target:
        await db.resolve(scheduler.schedule(target.obj, send_email.instance("e-1")))
        await db.resolve(target.rollback())
    assert db.count() == 0


async def test_the_library_never_commits_a_session(db: Harness, scheduler: Scheduler):
    async with db.session() as session:
        await db.resolve(scheduler.schedule(session, send_email.instance("e-1")))
        assert session.in_transaction()
    # closing without commit discards the work
    assert db.count() == 0


async def test_schedule_joins_the_business_transaction(db: Harness, scheduler: Scheduler):
    with db.sync_engine.begin() as conn:
        conn.execute(text("create table orders (id int primary key)"))
    async with db.session() as session:
        await db.resolve(session.execute(text("insert into orders values (1)")))
        await db.resolve(scheduler.schedule(session, send_email.instance("order-1")))
        await db.rollback(session)
    async with db.session() as session:
        await db.resolve(session.execute(text("insert into orders values (2)")))
        await db.resolve(scheduler.schedule(session, send_email.instance("order-2")))
        await db.commit(session)
    with db.sync_engine.connect() as conn:
        assert conn.scalars(text("select id from orders")).all() == [2]
        assert conn.scalars(text("select task_instance from scheduled_tasks")).all() == ["order-2"]


async def test_second_schedule_of_same_instance_changes_nothing(
    db: Harness, scheduler: Scheduler, clock: ManualClock
):
    first = send_email.instance("e-1", {"v": 1}, at=NOW + timedelta(hours=1), priority=5)
    second = send_email.instance("e-1", {"v": 2}, at=NOW + timedelta(days=1), priority=9)
    assert await db.resolve(scheduler.schedule(db.engine, first)) is True
    assert await db.resolve(scheduler.schedule(db.engine, second)) is False
    execution = await db.resolve(scheduler.get_execution(db.engine, "send-email", "e-1"))
    assert (execution.data, execution.execution_time, execution.priority, execution.version) == (
        {"v": 1},
        NOW + timedelta(hours=1),
        5,
        1,
    )


async def test_schedule_batch_uses_one_statement_per_chunk(db: Harness, scheduler: Scheduler):
    inserts: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # also the INSERT of a WITH ... INSERT, and MariaDB's INSERT IGNORE INTO
        if re.search(r"\bINSERT (IGNORE )?INTO\b", statement.upper()):
            inserts.append(statement)

    sync_engine = db.engine.sync_engine if isinstance(db.engine, AsyncEngine) else db.engine
    event.listen(sync_engine, "before_cursor_execute", count)
    await db.resolve(scheduler.schedule(db.engine, send_email.instance("dup-7")))
    inserts.clear()
    batch = [send_email.instance(f"dup-{i}") for i in range(2500)]
    batch.append(send_email.instance("dup-1"))  # a duplicate inside the batch
    inserted = await db.resolve(scheduler.schedule_batch(db.engine, batch))
    assert inserted == 2499  # dup-7 existed already, dup-1 came twice
    assert db.count() == 2500
    assert 1 <= len(inserts) <= 3, f"{len(inserts)} INSERT statements for 2,501 rows"


async def test_schedule_batch_rolls_back_as_a_whole(db: Harness, scheduler: Scheduler):
    async with db.session() as session:
        n = await db.resolve(
            scheduler.schedule_batch(session, [send_email.instance(f"b-{i}") for i in range(50)])
        )
        assert n == 50
        await db.rollback(session)
    assert db.count() == 0


async def test_timestamps_come_back_aware_utc(db: Harness, scheduler: Scheduler):
    rome = datetime(2030, 7, 1, 9, 30, tzinfo=ZoneInfo("Europe/Rome"))
    await db.resolve(scheduler.schedule(db.engine, send_email.instance("tz", at=rome)))
    execution = await db.resolve(scheduler.get_execution(db.engine, "send-email", "tz"))
    assert execution.execution_time == rome
    assert execution.execution_time.utcoffset() == timedelta(0)
    assert execution.execution_time.hour == 7


async def test_typed_payloads_round_trip_through_the_table(db: Harness, scheduler: Scheduler):
    await db.resolve(scheduler.schedule(db.engine, invoice.instance("i-1", Invoice(7, ["a"]))))
    await db.resolve(
        scheduler.schedule(db.engine, refund.instance("r-1", Refund(order_id=3, amount_cents=250)))
    )
    stored_invoice = await db.resolve(scheduler.get_execution(db.engine, "invoice", "i-1"))
    stored_refund = await db.resolve(scheduler.get_execution(db.engine, "refund", "r-1"))
    assert stored_invoice.data == {"number": 7, "lines": ["a"]}
    assert invoice.codec.decode(stored_invoice.data) == Invoice(7, ["a"])
    assert refund.codec.decode(stored_refund.data) == Refund(order_id=3, amount_cents=250)


async def test_reschedule_moves_time_and_payload(db: Harness, scheduler: Scheduler):
    await db.resolve(scheduler.schedule(db.engine, send_email.instance("e-1", {"v": 1})))
    later = NOW + timedelta(minutes=30)
    assert await db.resolve(scheduler.reschedule(db.engine, "send-email", "e-1", later)) is True
    execution = await db.resolve(scheduler.get_execution(db.engine, "send-email", "e-1"))
    assert (execution.execution_time, execution.data, execution.version) == (later, {"v": 1}, 2)
    assert await db.resolve(
        scheduler.reschedule(db.engine, "send-email", "e-1", NOW, payload={"v": 2})
    )
    execution = await db.resolve(scheduler.get_execution(db.engine, "send-email", "e-1"))
    assert (execution.execution_time, execution.data, execution.version) == (NOW, {"v": 2}, 3)
    assert not await db.resolve(scheduler.reschedule(db.engine, "send-email", "nope", NOW))


async def test_reschedule_encodes_with_the_tasks_payload_type(db: Harness, scheduler: Scheduler):
    await db.resolve(scheduler.schedule(db.engine, invoice.instance("i-1", Invoice(1, []))))
    with pytest.raises(PayloadError, match="invoice"):
        scheduler.reschedule(db.engine, "invoice", "i-1", NOW, payload={"number": 2})
    assert await db.resolve(
        scheduler.reschedule(db.engine, "invoice", "i-1", NOW, payload=Invoice(2, ["x"]))
    )
    execution = await db.resolve(scheduler.get_execution(db.engine, "invoice", "i-1"))
    assert execution.data == {"number": 2, "lines": ["x"]}


async def test_reschedule_rejects_naive_datetimes(scheduler: Scheduler, db: Harness):
    with pytest.raises(TaskDefinitionError, match="timezone-aware"):
        scheduler.reschedule(db.engine, "send-email", "e-1", datetime(2030, 1, 1))


async def test_running_executions_cannot_be_rescheduled_and_are_asked_to_stop_by_cancel(
    db: Harness, scheduler: Scheduler, clock: ManualClock
):
    await db.resolve(scheduler.schedule(db.engine, send_email.instance("busy")))
    with db.sync_engine.begin() as conn:
        conn.execute(update(db.table).values(picked=True, picked_by="w1"))
    assert not await db.resolve(scheduler.reschedule(db.engine, "send-email", "busy", NOW))
    # a running one is asked to stop: the row stays (its holder records the outcome), with
    # the request's time; a second cancel keeps the first request's time
    assert await db.resolve(scheduler.cancel(db.engine, "send-email", "busy")) is True
    clock.advance(timedelta(minutes=1))
    assert await db.resolve(scheduler.cancel(db.engine, "send-email", "busy")) is True
    assert db.count() == 1
    row = db.row("send-email", "busy")
    assert row is not None
    assert row["stop_requested_at"] == NOW
    assert row["version"] == 1  # the holder's writes still apply


async def test_cancel_removes_only_the_named_execution(db: Harness, scheduler: Scheduler):
    await db.resolve(
        scheduler.schedule_batch(db.engine, [send_email.instance(i) for i in ("a", "b")])
    )
    async with db.session() as session:
        assert await db.resolve(scheduler.cancel(session, "send-email", "a")) is True
        await db.commit(session)
    assert await db.resolve(scheduler.cancel(db.engine, "send-email", "a")) is False
    remaining = await db.resolve(scheduler.executions(db.engine))
    assert [e.instance_id for e in remaining] == ["b"]


async def test_listing_by_state(db: Harness, scheduler: Scheduler, clock: ManualClock):
    later = NOW + timedelta(hours=2)
    await db.resolve(
        scheduler.schedule_batch(
            db.engine,
            [
                send_email.instance("due-low", priority=1),
                send_email.instance("due-high", priority=10),
                send_email.instance("later", at=later),
                send_email.instance("running"),
                send_email.instance("failing"),
            ],
        )
    )
    t = db.table
    with db.sync_engine.begin() as conn:
        conn.execute(
            insert(t).values(
                task_name="retired-task", task_instance="x", execution_time=NOW + timedelta(hours=1)
            )
        )
        conn.execute(update(t).where(t.c.task_instance == "running").values(picked=True))
        conn.execute(
            update(t)
            .where(t.c.task_instance == "failing")
            .values(consecutive_failures=2, last_failure=NOW)
        )

    async def ids(state: Any, **kw: Any) -> list[str]:
        found = await db.resolve(scheduler.executions(db.engine, state, **kw))
        return [e.instance_id for e in found]

    assert await ids("due") == ["due-high", "due-low", "failing"]
    assert await ids("scheduled") == ["due-high", "due-low", "failing", "x", "later"]
    assert await ids("running") == ["running"]
    assert await ids("failing") == ["failing"]
    assert await ids("orphaned") == ["x"]
    assert len(await ids("all")) == 6
    assert await ids("all", task_name="retired-task") == ["x"]
    assert await ids("due", limit=1) == ["due-high"]
    assert await ids("due", limit=1, offset=1) == ["due-low"]
    clock.advance(timedelta(hours=3))
    assert "later" in await ids("due")


def _listen(db: Harness, scheduler: Scheduler) -> psycopg.Connection[Any]:
    from sqla_scheduler._dialects import notify_channel

    url = db.direct_url.replace("postgresql+psycopg://", "postgresql://")
    conn = psycopg.connect(url, autocommit=True)
    conn.execute(f'LISTEN "{notify_channel(scheduler.table)}"')
    return conn


def _next_notification(conn: psycopg.Connection[Any]) -> str:
    """The payload (task name) of the next notification, waiting up to 10 s for it."""
    for notify in conn.notifies(timeout=10, stop_after=1):
        return notify.payload
    raise AssertionError("no notification within 10 s")


@pytest.mark.postgres_only("NOTIFY wake-ups exist on PostgreSQL only; elsewhere schedulers probe")
async def test_due_schedule_notifies_on_commit_only(db: Harness, scheduler: Scheduler):
    # Notifications arrive in commit order, so a rolled-back NOTIFY that leaked would be
    # seen before the committed one.
    with _listen(db, scheduler) as listener:
        async with db.session() as session:
            await db.resolve(scheduler.schedule(session, invoice.instance("no", Invoice(1, []))))
            await db.rollback(session)
        async with db.session() as session:
            await db.resolve(scheduler.schedule(session, send_email.instance("e-1")))
            await db.commit(session)
        assert _next_notification(listener) == "send-email"


@pytest.mark.postgres_only("NOTIFY wake-ups exist on PostgreSQL only; elsewhere schedulers probe")
async def test_each_new_execution_notifies_with_its_time(db: Harness, scheduler: Scheduler):
    """Due work notifies with the bare task name; later work with the task and its time
    (issue 14: a listening scheduler waits for that time rather than its poll)."""
    with _listen(db, scheduler) as listener:
        later = NOW + timedelta(hours=1)
        await db.resolve(
            scheduler.schedule(db.engine, invoice.instance("i", Invoice(1, []), at=later))
        )
        assert read_notice(_next_notification(listener)) == ("invoice", later)
        await db.resolve(scheduler.schedule(db.engine, send_email.instance("due")))
        assert read_notice(_next_notification(listener)) == ("send-email", None)
        # a duplicate inserts nothing and so wakes nobody
        await db.resolve(scheduler.schedule(db.engine, send_email.instance("due")))
        await db.resolve(scheduler.reschedule(db.engine, "invoice", "i", NOW))
        assert read_notice(_next_notification(listener)) == ("invoice", None)
        await db.resolve(scheduler.reschedule(db.engine, "invoice", "i", later))
        assert read_notice(_next_notification(listener)) == ("invoice", later)


@pytest.mark.postgres_only("NOTIFY wake-ups exist on PostgreSQL only; elsewhere schedulers probe")
async def test_a_batch_notifies_once_per_task_with_its_earliest_time(
    db: Harness, scheduler: Scheduler
):
    later = NOW + timedelta(hours=1)
    with _listen(db, scheduler) as listener:
        async with db.session() as session:  # rolled back: no notification
            await db.resolve(
                scheduler.schedule_batch(session, [send_email.instance(f"x-{i}") for i in range(3)])
            )
            await db.rollback(session)
        only_later = [
            invoice.instance(f"i-{i}", Invoice(i, []), at=later + timedelta(minutes=i))
            for i in range(3)
        ]
        assert await db.resolve(scheduler.schedule_batch(db.engine, only_later)) == 3
        mixed = [
            *(send_email.instance(f"e-{i}") for i in range(5)),
            *(invoice.instance(f"j-{i}", Invoice(i, []), at=later) for i in range(5)),
        ]
        assert await db.resolve(scheduler.schedule_batch(db.engine, mixed)) == 10
        await db.resolve(scheduler.schedule(db.engine, invoice.instance("due", Invoice(0, []))))

        # In commit order, so anything the rollback had sent would come first: the
        # later-only batch's one notice, the mixed batch's two, then the single schedule's.
        payloads = [read_notice(n.payload) for n in listener.notifies(timeout=10, stop_after=4)]
        assert payloads[0] == ("invoice", later)
        assert sorted(payloads[1:3], key=str) == [("invoice", later), ("send-email", None)]
        assert payloads[3] == ("invoice", None)


@pytest.mark.postgres_only("one statement in autocommit is PostgreSQL's way")
async def test_the_pools_connection_leaves_autocommit_after_schedule(db: Harness) -> None:
    """``schedule`` on an engine runs its INSERT in autocommit on a connection of the
    application's pool: the connection the application checks out next is out of
    autocommit, in a transaction whose rollback undoes its writes."""
    # one connection in the pool: the one schedule() used is the one checked out next
    engine: Engine | AsyncEngine = (
        create_async_engine(db.url, pool_size=1, max_overflow=0)
        if db.is_async
        else create_engine(db.url, pool_size=1, max_overflow=0)
    )
    scheduler = Scheduler(engine, [send_email])

    def undone(conn: Connection) -> None:
        assert conn.connection.driver_connection.autocommit is False
        conn.execute(update(db.table).values(priority=7))
        conn.rollback()

    try:
        assert await db.resolve(scheduler.schedule(engine, send_email.instance("first")))
        assert not await db.resolve(scheduler.schedule(engine, send_email.instance("first")))
        if isinstance(engine, AsyncEngine):
            async with engine.connect() as async_conn:
                await async_conn.run_sync(undone)
        else:
            with engine.connect() as conn:
                undone(conn)
    finally:
        await db.resolve(engine.dispose())
    row = db.row("send-email", "first")
    assert row is not None
    assert row["priority"] == 0
