"""The scheduler under trio, with a sync engine, in a plain script.

Schedules a few greetings, runs the scheduler until all of them ran, then stops it
gracefully. Run it with ``python examples/trio_script.py`` (needs ``trio``).
"""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta

import anyio
import sniffio
import trio
import trio.lowlevel
from sqlalchemy import create_engine

from sqla_scheduler import (
    ExecutionContext,
    Scheduler,
    SchedulerConfig,
    configure_sqlite,
    migrate,
    one_time,
)

NAMES = ["ada", "bob", "cy"]
greeted: list[str] = []
all_greeted: anyio.Event  # created in main(), inside the event loop


@one_time("greet", payload_type=str)
async def greet(ctx: ExecutionContext[str]) -> None:
    await trio.lowlevel.checkpoint()  # async handlers run on the event loop: here, trio's
    print(f"hello, {ctx.payload}", flush=True)
    greeted.append(ctx.payload)
    if len(greeted) == len(NAMES):
        all_greeted.set()


async def main() -> None:
    global all_greeted
    all_greeted = anyio.Event()
    path = os.environ.get("TRIO_DB") or os.path.join(tempfile.mkdtemp(), "trio.db")
    url = f"sqlite:///{path}"
    migrate.upgrade(url)
    engine = configure_sqlite(create_engine(url))  # trio needs a sync engine
    config = SchedulerConfig(polling_interval=timedelta(milliseconds=100))
    scheduler = Scheduler(engine, tasks=[greet], config=config)
    scheduler.schedule_batch(engine, [greet.instance(name, name) for name in NAMES])
    with anyio.fail_after(60):
        async with scheduler:  # runs the loop in a task group until the block ends
            await all_greeted.wait()
    print(f"done under {sniffio.current_async_library()}: {sorted(greeted)}")
    engine.dispose()


if __name__ == "__main__":
    anyio.run(main, backend="trio")
