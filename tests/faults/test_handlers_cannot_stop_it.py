"""Whatever a handler raises is a failure of that execution, ``BaseException`` subclasses
included; only stopping the scheduler stops it (issue 13, defect 6)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import ExecutionContext, SchedulerListener, one_time
from tests.support import Harness, wait_for

# what this module tests is the runner's handling of what a handler or listener raises,
# which no database takes part in (the outcome each records is written by the
# statements every other module runs everywhere)
pytestmark = [pytest.mark.anyio, pytest.mark.databases("postgresql")]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Custom(BaseException):
    """Neither an Exception nor one of the interpreter's own."""


RAISED = [
    SystemExit(0),
    SystemExit(3),
    KeyboardInterrupt(),
    Custom("odd"),
    # raised by the handler itself (its own timeout, a cancelled future it awaited), not
    # a cancellation of the scheduler's: asyncio's cancellation class, to anyio on asyncio
    asyncio.CancelledError("the handler's own"),
]


@pytest.mark.parametrize("raised", RAISED, ids=lambda e: f"{type(e).__name__}{e.args}")
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_base_exception_from_a_handler_is_a_failure(
    db: Harness, raised: BaseException, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    def sync_bad(ctx: Any) -> None:
        raise raised

    async def async_bad(ctx: Any) -> None:
        raise raised

    bad = one_time("bad", priority=10)(sync_bad if kind == "sync" else async_bad)
    good = one_time("good")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([bad, good], concurrency=1)
    await db.resolve(scheduler.schedule_batch(db.engine, [bad.instance("b"), good.instance("g")]))
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        async with scheduler:
            await wait_for(lambda: ran == ["g"])
            assert scheduler.running
    failed = db.row("bad", "b")
    assert failed is not None
    assert (failed["picked"], failed["consecutive_failures"]) == (False, 1)
    assert "execution bad/b failed (consecutive failures: 1)" in caplog.text
    assert type(raised).__name__ in caplog.text


@pytest.mark.parametrize("raised", RAISED, ids=lambda e: f"{type(e).__name__}{e.args}")
async def test_a_base_exception_from_a_listener_is_logged_and_skipped(
    db: Harness, raised: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    class Raising(SchedulerListener):
        def on_success(self, ctx: ExecutionContext[Any], duration: timedelta) -> None:
            raise raised

    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([task], concurrency=1)
    scheduler.listeners = [Raising()]
    await db.resolve(scheduler.schedule(db.engine, task.instance("first")))
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        async with scheduler:
            await wait_for(lambda: ran == ["first"] and db.row("job", "first") is None)
            await db.resolve(scheduler.schedule(db.engine, task.instance("then")))
            await wait_for(lambda: ran == ["first", "then"])
            assert scheduler.running
    assert "failed in on_success" in caplog.text


@pytest.mark.parametrize("raised", RAISED, ids=lambda e: f"{type(e).__name__}{e.args}")
async def test_a_base_exception_from_on_abandon_keeps_the_execution(
    db: Harness, raised: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    def hook(ctx: ExecutionContext[Any], session: Any) -> None:
        raise raised

    def fail(ctx: ExecutionContext[Any]) -> None:
        raise ValueError("out of retries at once")

    bad = one_time("bad", max_retries=0, on_abandon=hook, priority=10)(fail)
    ran: list[str] = []
    good = one_time("good")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([bad, good], concurrency=1)
    await db.resolve(scheduler.schedule_batch(db.engine, [bad.instance("b"), good.instance("g")]))

    def kept() -> bool:  # the hook's transaction rolled back: the row stays, handed back
        row = db.row("bad", "b")
        return row is not None and row["picked"] is False

    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        async with scheduler:
            await wait_for(lambda: ran == ["g"] and kept())
            assert scheduler.running
    assert "on_abandon of bad/b failed; the execution is kept" in caplog.text
