"""Liveness means progress (issue 46, item 0): a worker that owes work of its own (an
outcome to commit, an execution to start with a worker free) and has started or recorded
nothing for longer than the bound fails ``/livez``, though its event loop still ticks; one
whose workers are all busy running handlers does not, however long they run."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from functools import partial
from typing import Any

import anyio
import pytest

from sqla_scheduler import Scheduler, one_time
from sqla_scheduler._probes import Probes
from sqla_scheduler.worker import _stalled_for
from tests.support import Harness, wait_for
from tests.support.http import get

pytestmark = pytest.mark.anyio

BOUND = timedelta(milliseconds=500)


def livez(port: int) -> tuple[int, str]:
    return get(port, "/livez")


@asynccontextmanager
async def probed(scheduler: Scheduler) -> AsyncIterator[Probes]:
    """``scheduler`` running, with the worker's probes on a free port beside it."""
    probes = Probes(
        scheduler.engine.url,
        port=0,
        host="127.0.0.1",
        stalled=partial(_stalled_for, scheduler),
        stalled_after=BOUND,
    )
    probes.start()
    try:
        async with scheduler, anyio.create_task_group() as group:
            group.start_soon(probes.tick)
            yield probes
            group.cancel_scope.cancel()
    finally:
        probes.stop()


async def answers(port: int, status: int) -> str:
    """Poll ``/livez`` (in a thread) until it answers ``status``; its text then."""
    seen: list[tuple[int, str]] = []

    def check() -> bool:
        return seen[-1][0] == status if seen else False

    with anyio.fail_after(20):
        while not check():
            seen.append(await anyio.to_thread.run_sync(livez, port))
            if not check():
                await anyio.sleep(0.05)
    return seen[-1][1]


@pytest.mark.slow
async def test_owed_work_without_progress_fails_liveness(sqlite: Harness) -> None:
    """Slow: a stall shows once it has lasted past the bound, read at the probes'
    one-second tick, and its end at a later tick.

    An abandon whose ``on_abandon`` hook does not return holds its outcome, and every
    outcome after it, uncommitted: ``/livez`` fails once that lasts past the bound, and
    passes again once the hook returns and the outcomes are recorded."""
    hooked = threading.Event()
    release = threading.Event()

    def hold_on(ctx: Any, session: Any) -> None:
        hooked.set()
        release.wait(30)

    @one_time("stuck", max_retries=0, on_abandon=hold_on)
    def stuck(ctx: Any) -> None:
        raise RuntimeError("fails; its hook hangs")

    scheduler = sqlite.scheduler([stuck])
    scheduler.schedule(sqlite.engine, stuck.instance("s1"))
    async with probed(scheduler) as probes:
        await wait_for(hooked.is_set)
        text = await answers(probes.port, 503)
        assert text.startswith("not live: work owed for ")
        release.set()
        assert (await answers(probes.port, 200)).startswith("live: ")
        await wait_for(lambda: sqlite.row("stuck", "s1") is None)


async def test_workers_busy_with_long_handlers_stay_live(sqlite: Harness) -> None:
    """Every worker runs a handler and more executions wait their turn: nothing starts
    or finishes for longer than the bound, and that is no stall."""
    started = threading.Event()
    release = threading.Event()

    @one_time("long")
    def long(ctx: Any) -> None:
        started.set()
        release.wait(30)

    scheduler = sqlite.scheduler([long], concurrency=1)
    for i in range(3):
        scheduler.schedule(sqlite.engine, long.instance(f"l{i}"))
    try:
        async with probed(scheduler) as probes:
            await wait_for(started.is_set)
            await wait_for(lambda: len(list(runner_of(scheduler).held)) >= 2)  # one queued
            quiet_until = anyio.current_time() + 3 * BOUND.total_seconds()
            while anyio.current_time() < quiet_until:  # nothing starts meanwhile
                status, text = await anyio.to_thread.run_sync(livez, probes.port)
                assert status == 200, text
                await anyio.sleep(0.1)
            release.set()
    finally:
        release.set()


def runner_of(scheduler: Scheduler) -> Any:
    runner = scheduler._loop.runner
    assert runner is not None
    return runner
