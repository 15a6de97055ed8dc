"""``timeout=`` per attempt: an async handler is cancelled at its timeout; a sync one is
signalled through ``ctx.shutdown`` and its attempt fails when it returns, its execution
held until then. Either way the error says it timed out and the retry policy applies."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import anyio
import pytest

from sqla_scheduler import ManualClock, TaskDefinitionError, custom, one_time, recurring
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio

TIMED_OUT = "sqla_scheduler.exceptions.TaskTimeoutError: task 'slow' timed out (timeout=50ms)"


async def test_an_async_handler_is_cancelled_at_its_timeout(
    db: Harness, clock: ManualClock
) -> None:
    cancelled = []

    @one_time("slow", max_retries=3, timeout=timedelta(milliseconds=50))
    async def slow(ctx: Any) -> None:
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            cancelled.append(ctx.instance_id)
            raise

    scheduler = db.scheduler([slow], clock)
    await db.resolve(scheduler.schedule(db.engine, slow.instance("s1")))
    with anyio.fail_after(10):
        assert await scheduler.run_due() == 1
    assert cancelled == ["s1"]
    row = db.row("slow", "s1")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"]) == (False, 1)
    assert row["last_error"].splitlines()[0] == f"{TIMED_OUT}: the handler was cancelled"


async def test_a_sync_handler_is_signalled_and_held_until_it_returns(
    db: Harness, clock: ManualClock
) -> None:
    signalled = threading.Event()
    release = threading.Event()

    @one_time("slow", max_retries=3, timeout=0.05)
    def slow(ctx: Any) -> str:
        assert ctx.shutdown.wait(30)  # the timeout sets the execution's own signal
        signalled.set()
        release.wait(30)
        return "done anyway"

    scheduler = db.scheduler([slow], clock)
    await db.resolve(scheduler.schedule(db.engine, slow.instance("s1")))
    async with anyio.create_task_group() as group:
        group.start_soon(scheduler.run_due)
        await wait_for(signalled.is_set)
        row = db.row("slow", "s1")
        assert row is not None
        assert row["picked"] is True, "never released while its sync handler still runs"
        assert not scheduler._make_runner().shutdown.is_set  # only this execution's signal
        release.set()
    row = db.row("slow", "s1")
    assert row is not None
    assert (row["picked"], row["consecutive_failures"]) == (False, 1)
    first = row["last_error"].splitlines()[0]
    assert first.startswith(f"{TIMED_OUT}: the sync handler was signalled (ctx.shutdown)")


async def test_a_timeout_is_a_failure_the_retry_policy_handles(
    db: Harness, clock: ManualClock
) -> None:
    @one_time("slow", max_retries=0, timeout=timedelta(milliseconds=50))
    async def slow(ctx: Any) -> None:
        await anyio.sleep(3600)

    scheduler = db.scheduler([slow], clock)
    await db.resolve(scheduler.schedule(db.engine, slow.instance("s1", {"n": 1})))
    await scheduler.run_due()
    assert db.row("slow", "s1") is None
    (entry,) = await db.resolve(scheduler.history(db.engine))
    assert entry.outcome == "abandoned"
    assert entry.data == {"n": 1}
    assert entry.error is not None
    assert entry.error.startswith(TIMED_OUT)


async def test_handlers_within_their_timeout_succeed_and_share_the_stop_signal(
    db: Harness, clock: ManualClock
) -> None:
    seen: list[bool] = []

    @one_time("quick", timeout=timedelta(seconds=30))
    def quick(ctx: Any) -> None:
        seen.append(ctx.shutdown.is_set)

    scheduler = db.scheduler([quick], clock)
    await db.resolve(scheduler.schedule(db.engine, quick.instance("q")))
    assert await scheduler.run_due() == 1
    assert seen == [False]
    assert db.row("quick", "q") is None


@pytest.mark.parametrize(
    "value", [0, -1, timedelta(0), float("inf"), float("nan"), "5s", True, 10**12]
)
def test_bad_timeouts_name_the_task_and_field(value: Any) -> None:
    for define in (one_time("job", timeout=value), custom("job", timeout=value)):
        with pytest.raises(TaskDefinitionError, match=r"task 'job': timeout must be"):
            define(lambda ctx: None)
    with pytest.raises(TaskDefinitionError, match=r"task 'tick': timeout must be"):
        recurring("tick", "FIXED_DELAY|1m", timeout=value)(lambda ctx: None)


def test_seconds_are_read_as_a_timedelta() -> None:
    assert one_time("job", timeout=2.5)(lambda ctx: None).timeout == timedelta(seconds=2.5)
    assert one_time("job")(lambda ctx: None).timeout is None
