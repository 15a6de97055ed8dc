"""A row the scheduler cannot read (written by hand, by an older version or by a bug)
affects that row alone: every other row is picked, run, revived, listed and shown, the bad
row is taken out of rotation, and the log names its task, instance and what was wrong
(issue 13, defect 3 and the read half of defect 2).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import text, update

from sqla_scheduler import ManualClock, one_time
from sqla_scheduler.models import INT_MAX
from tests.support import NOW, Harness, services, wait_for

pytestmark = pytest.mark.anyio


#: (column, raw SQL value) that no scheduler can read back, per database.
SQLITE_BAD = [
    ("task_data", "'not json{'"),
    ("task_data", "x'00ff'"),
    ("execution_time", "'0000-garbage'"),
    ("execution_time", "'2030-02-31 00:00:00.000000'"),
    ("execution_time", "12345"),
    ("priority", "'high'"),
    ("priority", "1.5"),
    ("version", "'seven'"),
    ("payload_version", "'v2'"),
    ("consecutive_failures", "'-'"),
    ("picked", "'yes'"),
    ("last_success", "'2030-13-01 00:00:00'"),
    ("trace_context", "'{'"),
    ("schedule", "x'01'"),
]
POSTGRES_BAD = [
    ("execution_time", "'4000-01-01 00:00:00+00 BC'"),
    ("execution_time", "'0001-01-01 00:00:00+00'"),
    ("last_success", "'10000-01-01 00:00:00+00'"),
    ("last_failure", "'294000-01-01 00:00:00+00'"),
    ("started_at", "'0100-01-01 00:00:00+00 BC'"),
]


MARIADB_BAD = [
    ("execution_time", "'0000-00-00 00:00:00'"),  # a zero date, as the default sql_mode allows
    ("execution_time", "'0001-01-01 00:00:00'"),
    ("last_heartbeat", "'0000-00-00 00:00:00'"),
    ("trace_context", "'[1, 2]'"),
    ("trace_context", "'5'"),
]


def bad_values(db: Harness) -> list[tuple[str, str]]:
    if db.is_sqlite:
        return SQLITE_BAD
    return MARIADB_BAD if db.is_mariadb else POSTGRES_BAD


def spoil(db: Harness, instance: str, column: str, value: str) -> None:
    """Write ``value`` (raw SQL) into ``column`` of job/``instance``, as a person would."""
    with db.sync_engine.begin() as conn:
        conn.execute(
            text(f"update scheduled_tasks set {column} = {value} where task_instance = :i"),
            {"i": instance},
        )


async def schedule_with_bad_rows(
    db: Harness, clock: ManualClock, **config: Any
) -> tuple[Any, list[str]]:
    """A scheduler of ``job`` with 20 good due rows and one bad row per bad value;
    return it and the good instance ids."""
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock, **config)
    good = [f"ok-{i}" for i in range(20)]
    bad = [f"bad-{i}" for i in range(len(bad_values(db)))]
    at = NOW - timedelta(minutes=1)
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i, at=at) for i in good]))
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i, at=at) for i in bad]))
    for instance, (column, value) in zip(bad, bad_values(db), strict=True):
        spoil(db, instance, column, value)
    scheduler.ran = ran  # type: ignore[attr-defined]
    return scheduler, good


async def test_bad_rows_do_not_stop_picks(db: Harness, clock: ManualClock) -> None:
    scheduler, good = await schedule_with_bad_rows(db, clock)
    assert await scheduler.run_due() == 20
    assert sorted(scheduler.ran) == sorted(good)
    assert db.count() == len(bad_values(db)), "the bad rows stay, out of rotation"
    assert await scheduler.run_due() == 0


async def test_bad_rows_do_not_stop_listings(db: Harness, clock: ManualClock) -> None:
    scheduler, good = await schedule_with_bad_rows(db, clock)
    listed = await db.resolve(scheduler.executions(db.engine))
    assert sorted(e.instance_id for e in listed) == sorted(good)
    shown = await db.resolve(scheduler.get_execution(db.engine, "job", "ok-3"))
    assert shown is not None
    assert shown.instance_id == "ok-3"
    assert await db.resolve(scheduler.get_execution(db.engine, "job", "bad-0")) is None


async def test_bad_rows_are_logged_by_name_and_field(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler, _ = await schedule_with_bad_rows(db, clock, history="none")
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        async with services(scheduler) as runner:
            await runner.maintenance.run_once()
            await runner.maintenance.run_once()
    reports = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    for i, (column, _) in enumerate(bad_values(db)):
        named = [m for m in reports if f"job/bad-{i}:" in m]
        assert len(named) == 1, (i, column, reports)  # once, not once per pass
        assert column in named[0], (column, named[0])
    assert db.count() == 20 + len(bad_values(db)), "without history they stay, out of rotation"


async def test_bad_rows_go_to_history_with_their_raw_values(
    db: Harness, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler, good = await schedule_with_bad_rows(db, clock)
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        async with services(scheduler) as runner:
            await runner.maintenance.run_once()
    assert db.count() == len(good)  # the good rows, still due; every bad one moved
    entries = await db.resolve(scheduler.history(db.engine))
    by_instance = {e.instance_id: e for e in entries}
    assert set(by_instance) == {f"bad-{i}" for i in range(len(bad_values(db)))}
    for i, (column, _value) in enumerate(bad_values(db)):
        entry = by_instance[f"bad-{i}"]
        assert (entry.task_name, entry.outcome, entry.attempt) == ("job", "undecodable", 1)
        assert entry.error is not None
        assert entry.error.startswith(f"cannot read job/bad-{i}: {column} holds a value")
        assert f'"{column}"' in entry.error  # the raw row follows, every column named
        if column != "execution_time":
            assert entry.execution_time == NOW - timedelta(minutes=1)
        report = [r.getMessage() for r in caplog.records if f"job/bad-{i}:" in r.getMessage()]
        assert len(report) == 1
        assert "into history as undecodable" in report[0]
    # history lists, and the rest runs
    assert await scheduler.run_due() == len(good)
    assert sorted(scheduler.ran) == sorted(good)


async def test_dead_bad_rows_do_not_stop_revivals(db: Harness, clock: ManualClock) -> None:
    scheduler, good = await schedule_with_bad_rows(db, clock)
    beat = NOW - timedelta(hours=1)
    with db.sync_engine.begin() as conn:
        conn.execute(update(db.table).values(picked=True, picked_by="crashed", last_heartbeat=beat))
    for i, (column, value) in enumerate(bad_values(db)):
        spoil(db, f"bad-{i}", column, value)  # each bad row keeps its own bad value
    revived = await scheduler.revive_dead_executions()
    assert sorted(e.instance_id for e in revived) == sorted(good)
    assert await scheduler.run_due() == 20


def app_write(db: Harness) -> None:
    with db.sync_engine.begin() as conn:
        conn.execute(text("create table app_write (x integer)"))


async def test_the_running_loop_leaves_the_database_writable(db: Harness) -> None:
    """Beside bad rows the loop runs the good ones and holds no lock that keeps the
    application from writing (on SQLite, a failing pick had kept the file locked)."""
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=50))
    bad = [f"bad-{i}" for i in range(len(bad_values(db)))]
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i) for i in bad]))
    for instance, (column, value) in zip(bad, bad_values(db), strict=True):
        spoil(db, instance, column, value)
    async with scheduler:
        await db.resolve(scheduler.schedule(db.engine, task.instance("first")))
        await wait_for(lambda: ran == ["first"])
        await anyio.to_thread.run_sync(app_write, db)  # off the loop the scheduler runs on
        await db.resolve(scheduler.schedule(db.engine, task.instance("second")))
        await wait_for(lambda: ran == ["first", "second"])
        # Maintenance takes the bad rows that are due out of the table, into history. On
        # SQLite 2030-02-31 sorts after today as text, so that row is not due yet: it waits.
        future = 1 if db.is_sqlite else 0
        await wait_for(lambda: db.count() == future)
        assert scheduler.running
    entries = await db.resolve(scheduler.history(db.engine, outcome="undecodable"))
    assert len(entries) == len(bad) - future


#: JSON each database accepts that Python's json cannot load: nested past the recursion
#: limit, and an integer longer than ``int()`` parses from text.
TOO_DEEP = "[" * 5000 + "]" * 5000
TOO_LONG = "1" + "0" * 5000


@pytest.mark.parametrize("raw", [TOO_DEEP, TOO_LONG], ids=["too-deep", "too-long"])
async def test_json_python_cannot_load_affects_its_row_alone(
    db: Harness, clock: ManualClock, raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the database's own JSON check passes such a payload (MariaDB's payload column
    has none), the row is picked and moved into history as undecodable, its raw payload
    kept there and in the log; SQLite's check refuses JSON nested past 1,000 levels, so
    there the row is left out like any unreadable one. The other rows run either way."""
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock)
    at = NOW - timedelta(minutes=1)
    good = [f"ok-{i}" for i in range(5)]
    await db.resolve(scheduler.schedule_batch(db.engine, [task.instance(i, at=at) for i in good]))
    await db.resolve(scheduler.schedule(db.engine, task.instance("bad", at=at)))
    with db.sync_engine.begin() as conn:
        value = ":raw" if db.is_sqlite or db.is_mariadb else "cast(:raw as jsonb)"
        conn.execute(
            text(f"update scheduled_tasks set task_data = {value} where task_instance = 'bad'"),
            {"raw": raw},
        )
    left_out = db.is_sqlite and raw == TOO_DEEP
    listed = await db.resolve(scheduler.executions(db.engine))
    expected = good if left_out else [*good, "bad"]
    assert sorted(e.instance_id for e in listed) == sorted(expected)
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        assert await scheduler.run_due() == len(expected)
    assert sorted(ran) == sorted(good)
    if left_out:
        assert db.count() == 1
        return
    assert db.count() == 0
    assert "took job/bad out of the table" in caplog.text
    assert raw[:50] in caplog.text
    # kept in history as it was stored, to be requeued once a codec can read it
    (entry,) = await db.resolve(scheduler.history(db.engine, outcome="undecodable"))
    assert (entry.task_name, entry.instance_id) == ("job", "bad")
    with db.sync_engine.connect() as conn:
        kept = conn.scalar(text("select task_data from scheduled_tasks_history"))
    assert kept.replace(" ", "") == raw.replace(" ", "")


@pytest.mark.parametrize("fraction", [999_999, 999_500, 500, 0])
async def test_a_time_in_the_last_millisecond_of_a_second_is_readable(
    db: Harness, fraction: int
) -> None:
    """SQLite rounds a time to the millisecond when it normalizes one: a check that
    normalized the whole text took ``...:00.999999`` for ``...:01`` and the row for one
    no scheduler can read (into history as undecodable). Every time the scheduler writes
    is readable: picked, run, and left alone by maintenance."""
    at = NOW.replace(microsecond=fraction)
    clock = ManualClock(at)
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], clock=clock)
    await db.resolve(scheduler.schedule(db.engine, task.instance("edge", at=at)))
    async with services(scheduler) as runner:
        await runner.maintenance.run_once()
    assert db.count() == 1, "maintenance took a good row out"
    assert await scheduler.run_due() == 1
    assert ran == ["edge"]


@pytest.mark.parametrize("started", [False, True], ids=["start-unrecorded", "started"])
async def test_a_dead_execution_at_the_most_failures_is_revived_into_history(
    db: Harness, clock: ManualClock, started: bool
) -> None:
    """A failure count at the column's largest value (written by hand, or reached) stays
    there, and so does the attempt its revival records: the history entry is written
    rather than failing the revival (the poison-row property found it)."""
    task = one_time("job")(lambda ctx: None)
    scheduler = db.scheduler([task], clock, history="all")
    await db.resolve(scheduler.schedule(db.engine, task.instance("most", at=NOW)))
    with db.sync_engine.begin() as conn:
        conn.execute(
            update(db.table)
            .where(db.table.c.task_instance == "most")
            .values(
                picked=True,
                picked_by="gone",
                last_heartbeat=NOW - timedelta(hours=1),
                started_at=NOW - timedelta(hours=1) if started else None,
                consecutive_failures=INT_MAX,
            )
        )
    revived = await scheduler.revive_dead_executions()
    assert [e.instance_id for e in revived] == ["most"]
    (entry,) = await db.resolve(scheduler.history(db.engine, outcome="dead"))
    assert (entry.instance_id, entry.attempt) == ("most", INT_MAX)
    assert db.row("job", "most")["consecutive_failures"] == INT_MAX  # type: ignore[index]
