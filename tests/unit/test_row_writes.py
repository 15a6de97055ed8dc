"""``RowWrites``: a heartbeat's statement on the held rows never runs beside a start
record or a completion commit (each locks many of those rows in its own order; side by
side they could deadlock), while those run side by side."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from sqla_scheduler._runner.held import RowWrites

pytestmark = pytest.mark.anyio


async def test_statements_run_side_by_side() -> None:
    writes = RowWrites()
    both = anyio.Event()
    inside = 0

    async def statement() -> None:
        nonlocal inside
        async with writes.statement():
            inside += 1
            if inside == 2:
                both.set()
            await both.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(statement)
            group.start_soon(statement)


@asynccontextmanager
async def _queued_behind(
    first: Callable[[], Awaitable[None]],
    first_in: anyio.Event,
    heartbeat: Callable[[], Awaitable[None]],
    later: Callable[[], Awaitable[None]],
) -> AsyncIterator[None]:
    """``first`` running (once it set ``first_in``), then ``heartbeat`` arriving, then
    ``later``, each started once everything else waits; within five seconds, the body
    ending what ``first`` holds, all of them run to their end on leaving."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await first_in.wait()
            group.start_soon(heartbeat)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(later)  # arrives while the heartbeat waits
            await anyio.wait_all_tasks_blocked()
            yield


async def test_a_heartbeat_waits_for_the_statement_under_way_and_new_ones_wait_for_it() -> None:
    writes = RowWrites()
    order: list[str] = []
    first_in, release_first = anyio.Event(), anyio.Event()

    async def first() -> None:
        async with writes.statement():
            order.append("first in")
            first_in.set()
            await release_first.wait()
            order.append("first out")

    async def heartbeat() -> None:
        async with writes.heartbeat():
            order.append("beat in")
            await anyio.lowlevel.checkpoint()
            order.append("beat out")

    async def later() -> None:
        async with writes.statement():
            order.append("later in")

    async with _queued_behind(first, first_in, heartbeat, later):
        assert order == ["first in"]
        release_first.set()
    assert order == ["first in", "first out", "beat in", "beat out", "later in"]


async def test_a_heartbeat_cancelled_while_it_waits_lets_statements_through() -> None:
    writes = RowWrites()
    first_in, release_first = anyio.Event(), anyio.Event()
    later_in = anyio.Event()
    beat = anyio.CancelScope()

    async def first() -> None:
        async with writes.statement():
            first_in.set()
            await release_first.wait()

    async def heartbeat() -> None:
        with beat:
            async with writes.heartbeat():
                pytest.fail("the heartbeat ran beside a statement")

    async def later() -> None:
        async with writes.statement():
            later_in.set()

    async with _queued_behind(first, first_in, heartbeat, later):
        assert not later_in.is_set()  # held up by the heartbeat waiting
        beat.cancel()
        await later_in.wait()  # let through once the heartbeat gave up
        release_first.set()


async def test_a_statement_begun_as_its_task_is_cancelled_still_runs() -> None:
    """As the statement itself is shielded, so is the wait for its turn: a release
    committed while the loop is being cancelled is not lost."""
    writes = RowWrites()
    ran = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with writes.statement():
            ran = True
    assert ran
