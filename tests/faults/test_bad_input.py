"""Bad input and failing pieces, in process, on every database and engine mode: each gives
a clear error (or none, where none is due) and affects nothing else.

Covered elsewhere and not repeated here: undecodable and schema-mismatched payloads
(``tests/integration/test_runner.py::test_undecodable_payload_is_removed_with_its_raw_payload_logged``),
orphans (``::test_orphans_are_left_alone_then_deleted``), a custom task returning garbage
(``::test_custom_task_returning_garbage_fails_clearly``), heartbeats over a long handler
(``::test_heartbeats_keep_a_long_execution_alive``), NUL bytes and invalid Unicode in ids
and naive ``at=`` (``tests/unit/test_tasks.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import text, update

from sqla_scheduler import (
    FixedDelay,
    ManualClock,
    NextAt,
    _store,
    custom,
    one_time,
    recurring,
)
from tests.support import NOW, Harness, services, wait_for

pytestmark = pytest.mark.anyio


async def test_a_corrupt_schedule_column_is_only_text(db: Harness) -> None:
    clock = ManualClock(NOW)
    runs: list[str] = []
    tick = recurring("tick", FixedDelay("1m"))(lambda ctx: runs.append("ran"))
    scheduler = db.scheduler([tick], clock)
    await scheduler.run_due()  # registers it
    with db.sync_engine.begin() as conn:
        conn.execute(
            update(db.table)
            .where(db.table.c.task_name == "tick")
            .values(schedule="every \x7f blue moon ;-- garbage", execution_time=NOW)
        )
    assert await scheduler.run_due() == 1  # the registered task's schedule counts
    after = db.row("tick", "recurring")
    assert after is not None
    assert after["execution_time"] == NOW + timedelta(minutes=1)
    await scheduler.run_due()  # and start-up registration writes the real text back
    expected = tick.first_instance(NOW)
    assert expected is not None
    assert db.row("tick", "recurring")["schedule"] == expected.schedule  # type: ignore[index]


async def test_next_at_in_the_past_runs_again_promptly(db: Harness) -> None:
    clock = ManualClock(NOW)
    calls: list[int] = []

    @custom("again")
    def again(ctx: Any) -> NextAt[Any] | None:
        calls.append(1)
        return NextAt(NOW - timedelta(hours=1)) if len(calls) < 3 else None

    scheduler = db.scheduler([again], clock)
    await db.resolve(scheduler.schedule(db.engine, again.instance("a")))
    assert await scheduler.run_due() == 3
    assert db.row("again", "a") is None


async def test_handlers_returning_the_wrong_type(
    db: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(NOW)
    plain = one_time("plain")(lambda ctx: {"ignored": object()})  # a one-time result is ignored
    counter = recurring("counter", FixedDelay("1m"), payload_type=int, initial_payload=0)(
        lambda ctx: "not an int"  # a recurring result is its next payload: must be an int
    )
    scheduler = db.scheduler([plain, counter], clock)
    await db.resolve(scheduler.schedule(db.engine, plain.instance("p")))
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        assert await scheduler.run_due() == 2
    assert db.row("plain", "p") is None
    kept = db.row("counter", "recurring")
    assert kept is not None
    assert kept["consecutive_failures"] == 1
    assert kept["task_data"] == 0
    assert "execution counter/recurring failed" in caplog.text


async def test_payloads_over_a_megabyte_are_accepted(db: Harness) -> None:
    seen: list[int] = []
    big = one_time("big")(lambda ctx: seen.append(len(ctx.payload["blob"])))
    scheduler = db.scheduler([big], ManualClock(NOW))
    blob = "x" * (2 * 1024 * 1024)
    await db.resolve(scheduler.schedule(db.engine, big.instance("b", {"blob": blob})))
    assert await scheduler.run_due() == 1
    assert seen == [len(blob)]


class Flaky:
    """Wraps a ``_store`` function: the first ``failures`` calls raise."""

    def __init__(self, fn: Any, failures: int) -> None:
        self.fn, self.left, self.calls = fn, failures, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise ConnectionError("simulated: connection lost")
        return self.fn(*args, **kwargs)


async def test_failed_heartbeats_are_retried_and_the_execution_stays_ours(
    db: Harness,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = one_time("long")(lambda ctx: None)
    flaky = Flaky(_store.heartbeat, failures=2)
    monkeypatch.setattr(_store, "heartbeat", flaky)
    config = {"heartbeat_interval": timedelta(seconds=10), "missed_heartbeat_limit": 4}
    scheduler = db.scheduler([task], clock, **config)
    reviver = db.scheduler([task], clock, scheduler_name="reviver", **config)
    await db.resolve(scheduler.schedule(db.engine, task.instance("l")))
    async with services(scheduler) as runner, services(reviver) as other:
        [held] = await runner.picker.run_once()
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            for beat in range(6):
                clock.advance(timedelta(seconds=10))
                assert await runner.heartbeater.run_once() == (0 if beat < 2 else 1)
                assert await other.maintenance.revive_once() == []
        assert flaky.calls == 6
        row = db.row("long", "l")
        assert row is not None
        assert (row["picked_by"], row["last_heartbeat"]) == ("test-worker", clock.now())
        assert not held.lost
        runner.completer.submit(await runner.executor.run_once(held))
        await runner.completer.run_once()
    assert db.row("long", "l") is None
    # the first failure in a line, the second counted, and the recovery said once
    assert caplog.text.count("the heartbeat of the executions held failed") == 1
    assert "the heartbeat of the executions held works again, after 2 failure(s)" in caplog.text
    assert "revived" not in caplog.text


async def test_a_failed_outcome_commit_is_retried(
    db: Harness,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = one_time("job")(lambda ctx: None)
    flaky = Flaky(_store.complete, failures=3)
    monkeypatch.setattr(_store, "complete", flaky)
    scheduler = db.scheduler([task], clock, heartbeat_interval=timedelta(seconds=1))
    await db.resolve(scheduler.schedule(db.engine, task.instance("j")))
    async with services(scheduler) as runner:
        [held] = await runner.picker.run_once()
        runner.completer.submit(await runner.executor.run_once(held))
        with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
            await runner.completer.run_once()
        assert len(runner.held) == 0
    assert db.row("job", "j") is None
    assert flaky.calls == 4
    assert caplog.text.count("ConnectionError: simulated") == 3  # each retry says why
    assert "could not record the outcome of job/j; retrying" in caplog.text
    assert "version mismatch" not in caplog.text


async def test_a_handler_blocked_forever_blocks_neither_others_nor_stop(db: Harness) -> None:
    forever = threading.Event()  # set at the end only, so the thread does not outlive the test
    done: list[str] = []
    blocked = one_time("blocked")(lambda ctx: forever.wait(60))
    quick = one_time("quick")(lambda ctx: done.append(ctx.instance_id))
    scheduler = db.scheduler(
        [blocked, quick],
        concurrency=2,
        polling_interval=timedelta(milliseconds=20),
        shutdown_max_wait=timedelta(milliseconds=300),
    )
    await db.resolve(scheduler.schedule(db.engine, blocked.instance("b")))
    try:
        async with scheduler:
            await wait_for(lambda: db.count("picked") == 1)
            await db.resolve(
                scheduler.schedule_batch(db.engine, [quick.instance(f"q{i}") for i in range(20)])
            )
            await wait_for(lambda: len(done) == 20)
            stopping = time.monotonic()
            scheduler.request_stop()
        assert time.monotonic() - stopping < 2.0
        released = db.row("blocked", "b")
        assert released is not None
        assert released["picked"] is False
    finally:
        forever.set()


async def test_a_session_idle_in_transaction_gets_in_nobodys_way(db: Harness) -> None:
    if db.is_sqlite:
        pytest.skip("a snapshot held open matters to MVCC (PostgreSQL, MariaDB)")
    done: list[str] = []
    task = one_time("job")(lambda ctx: done.append(ctx.instance_id))
    scheduler = db.scheduler([task], polling_interval=timedelta(milliseconds=20))
    with db.sync_engine.connect() as idle:
        idle.execute(text("set transaction isolation level repeatable read"))
        idle.execute(text("select count(*) from scheduled_tasks"))  # the snapshot is taken
        async with scheduler:
            await db.resolve(
                scheduler.schedule_batch(db.engine, [task.instance(f"j{i}") for i in range(200)])
            )
            await wait_for(lambda: db.count() == 0)
            await anyio.sleep(0.1)
        assert idle.scalar(text("select count(*) from scheduled_tasks")) == 0  # its old snapshot
        idle.rollback()
    assert sorted(done) == sorted(f"j{i}" for i in range(200))
