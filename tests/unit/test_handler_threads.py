"""The pool of threads that runs sync handlers, on asyncio and trio."""

from __future__ import annotations

import contextvars
import threading

import anyio
import pytest

from sqla_scheduler._threads import HandlerThreads
from tests.support import wait_for

pytestmark = pytest.mark.anyio

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_returns_the_result_from_another_thread() -> None:
    pool = HandlerThreads()
    loop_thread = threading.get_ident()

    result = await pool.run(lambda x: (x * 2, threading.get_ident()), 21)

    assert result[0] == 42
    assert result[1] != loop_thread
    pool.close()


async def test_raises_the_handlers_exception() -> None:
    pool = HandlerThreads()

    def boom(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="no luck"):
        await pool.run(boom, "no luck")
    assert await pool.run(str.upper, "still works") == "STILL WORKS"
    pool.close()


async def test_the_handler_sees_the_callers_context() -> None:
    pool = HandlerThreads()
    request_id.set("r-17")

    assert await pool.run(lambda _: request_id.get(), None) == "r-17"
    pool.close()


async def test_calls_run_at_the_same_time() -> None:
    pool = HandlerThreads()
    everyone_in = threading.Barrier(8, timeout=10)  # breaks unless all 8 run at once
    results: list[int] = []

    def meet(n: int) -> int:
        everyone_in.wait()
        return n

    async def one(i: int) -> None:
        results.append(await pool.run(meet, i))

    async with anyio.create_task_group() as group:
        for i in range(8):
            group.start_soon(one, i)

    assert sorted(results) == list(range(8))
    pool.close()


async def test_many_short_calls_all_come_back() -> None:
    pool = HandlerThreads()
    results: list[int] = []

    async def worker(start: int) -> None:
        for i in range(start, start + 500):
            results.append(await pool.run(int, i))

    async with anyio.create_task_group() as group:
        for w in range(10):
            group.start_soon(worker, w * 500)

    assert sorted(results) == list(range(5000))
    pool.close()


async def test_a_cancelled_wait_leaves_the_handler_running_and_new_work_still_runs() -> None:
    pool = HandlerThreads()
    release = threading.Event()
    finished = threading.Event()

    def stuck(_: object) -> None:
        release.wait(10)
        finished.set()

    with anyio.move_on_after(0.05) as scope:
        await pool.run(stuck, None)
    assert scope.cancelled_caught
    assert not finished.is_set()

    # The only thread is busy with the abandoned handler: the pool starts another.
    with anyio.fail_after(10):
        assert await pool.run(str.lower, "ABC") == "abc"

    release.set()
    assert finished.wait(10)
    pool.close()


async def test_close_lets_idle_threads_leave() -> None:
    pool = HandlerThreads(name="handler-close-test")

    def alive() -> int:
        return sum(t.name == "handler-close-test" for t in threading.enumerate())

    async with anyio.create_task_group() as group:
        for i in range(3):
            group.start_soon(pool.run, str, i)
    assert alive() >= 1

    pool.close()
    await wait_for(lambda: alive() == 0, deadline=10)
